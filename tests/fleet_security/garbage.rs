//! Hostile values in every key the protocol uses (`src/fleet/lua/*.lua`) and on its events
//! channel: corrupt, truncated, of the wrong type, huge, negative or overflowing numbers, a
//! newer format. For each: no panic (the task answers), no breaker opened or closed on every
//! replica, `status().rejected` rises, and each kind is logged once per replica — however many
//! rounds meet the value again.

use std::time::Duration;

use fred::bytes::Bytes;
use fred::prelude::*;
use fred::types::{ClusterHash, CustomCommand};
use tool_health::fleet::FleetError;
use tool_health::{
    Apply, BreakerState, CallOutcome, GateDecision, ManualClock, ToolPolicy, TripPolicy,
};

use crate::capture::Logs;
use crate::support::*;

/// A tool that never failed: must stay closed everywhere.
const CALM: &str = "calm";
/// A tool open everywhere (replica 0 tripped it): must stay open everywhere.
const DOWN: &str = "down";
const REPLICAS: usize = 3;
/// A replica id no replica has.
const ID: &str = "00000000000000aa";

/// What the replicas must say about a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Stored,
    Reply,
    Message,
    Future,
}

impl Kind {
    /// The words of its WARN line (`Rejected`'s Display).
    fn words(self) -> &'static str {
        match self {
            Kind::Stored => "a stored value no replica writes",
            Kind::Reply => "a reply of unexpected shape",
            Kind::Message => "an unreadable event message",
            Kind::Future => "a value of a newer format",
        }
    }
}

const KINDS: [Kind; 4] = [Kind::Stored, Kind::Reply, Kind::Message, Kind::Future];

/// One hostile value: raw commands (`|`-separated words with placeholders, see [`expand`]).
pub(crate) struct Case {
    pub(crate) name: &'static str,
    pub(crate) expect: Kind,
    /// Every round meets it again (so every round counts it): the log must still say it once.
    pub(crate) persistent: bool,
    pub(crate) cmds: Vec<String>,
}

pub(crate) fn case(name: &'static str, expect: Kind, persistent: bool, cmds: &[&str]) -> Case {
    Case {
        name,
        expect,
        persistent,
        cmds: cmds.iter().map(|c| (*c).to_owned()).collect(),
    }
}

pub(crate) fn hex(tool: &str) -> String {
    tool.bytes().map(|b| format!("{b:02x}")).collect()
}

/// A raw command with any arguments (bytes too); its reply.
pub(crate) async fn raw_cmd(client: &Client, args: Vec<Value>) -> Value {
    let mut args = args.into_iter();
    let name = args.next().and_then(|v| v.as_string()).expect("a name");
    client
        .custom(
            CustomCommand::new(name.clone(), ClusterHash::FirstKey, false),
            args.collect::<Vec<Value>>(),
        )
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The placeholders: `{P}` the fleet's key space (`prefix:v1:`), `{calm}` / `{down}` the
/// tools' hex, `{ep}` the open episode, `{boot}` the store's boot id, `{now}` / `{later}`
/// server time (ms) and 10 s on (`{far}`: 31 years on), `{id}` a well-formed replica id, `{big}` a megabyte of
/// digits, `{fields}` 40 extra hash fields.
pub(crate) struct Vars {
    pub(crate) p: String,
    pub(crate) ep: String,
    pub(crate) boot: String,
    pub(crate) now: u64,
}

fn expand(template: &str, v: &Vars) -> Vec<Value> {
    let big = "9".repeat(1 << 20);
    let mut out = Vec::new();
    for word in template.split('|') {
        if word == "{fields}" {
            for i in 0..40 {
                out.push(Value::from(format!("x{i}")));
                out.push(Value::from("1"));
            }
            continue;
        }
        let w = word
            .replace("{P}", &v.p)
            .replace("{calm}", &hex(CALM))
            .replace("{down}", &hex(DOWN))
            .replace("{ep}", &v.ep)
            .replace("{boot}", &v.boot)
            .replace("{now}", &v.now.to_string())
            .replace("{later}", &(v.now + 10_000).to_string())
            .replace("{far}", &(v.now + 1_000_000_000_000).to_string())
            .replace("{id}", ID)
            .replace("{big}", &big);
        out.push(Value::from(w));
    }
    out
}

/// Server time in ms.
pub(crate) async fn server_ms(client: &Client) -> u64 {
    let t: Vec<String> = cmd(client, "TIME", vec![]).await;
    t[0].parse::<u64>().expect("secs") * 1000 + t[1].parse::<u64>().expect("micros") / 1000
}

pub(crate) async fn vars(client: &Client, prefix: &str) -> Vars {
    let p = format!("{prefix}:v1:");
    let ep: Option<String> = cmd(client, "HGET", vec![&format!("{p}t:{}", hex(DOWN)), "ep"]).await;
    let boot: Option<String> = cmd(client, "GET", vec![&format!("{p}boot")]).await;
    Vars {
        ep: ep.unwrap_or_default(),
        boot: boot.unwrap_or_default(),
        now: server_ms(client).await,
        p,
    }
}

/// Three replicas: `CALM` known and closed, `DOWN` open everywhere through the fleet.
pub(crate) async fn fleet(url: &str, prefix: &str) -> Vec<Replica> {
    let all = replicas(url, prefix, REPLICAS, config(3, 2 * SEC, 10 * SEC)).await;
    for r in &all {
        assert!(r.registry.allow_request(CALM));
        r.registry.record_success(CALM, MS);
    }
    assert_eq!(all[0].fail(DOWN, 3), 3);
    wait_all(
        &all,
        DOWN,
        BreakerState::Open,
        "the trip to spread",
        5 * SEC,
    )
    .await;
    for r in &all {
        r.fleet.sync_now().await.expect("round");
    }
    all
}

/// A round on every replica: the store may answer or not, the task must be alive.
pub(crate) async fn rounds(all: &[Replica], n: usize) {
    for _ in 0..n {
        for r in all {
            let res = r.fleet.sync_now().await;
            assert_ne!(res, Err(FleetError::Stopped), "the fleet's task died");
        }
    }
}

/// `n` rounds on every replica, each after the shard's change counter moved (as every change
/// a replica makes moves it): each round reads what the store holds, garbage included.
/// (Garbage written with no change of the counter is read at the shard's next change.)
pub(crate) async fn touched_rounds(client: &Client, prefix: &str, all: &[Replica], n: usize) {
    for _ in 0..n {
        // A counter that is no number (a case of its own) is not moved: the replicas read it
        // anyway, since it is not the counter they know.
        let _: Result<Value, _> = client
            .custom(
                CustomCommand::new_static("INCR", ClusterHash::FirstKey, false),
                vec![format!("{prefix}:v1:seq")],
            )
            .await;
        rounds(all, 1).await;
    }
}

pub(crate) fn rejected(all: &[Replica]) -> Vec<u64> {
    all.iter().map(|r| r.fleet.status().rejected).collect()
}

/// `CALM` closed and available, `DOWN` open and refusing, on every replica.
pub(crate) fn unchanged(all: &[Replica], what: &str) {
    for (i, r) in all.iter().enumerate() {
        assert_eq!(
            r.registry.breaker_state(CALM),
            BreakerState::Closed,
            "{what}: replica {i} opened `{CALM}`"
        );
        assert!(
            r.registry.is_tool_available(CALM),
            "{what}: replica {i} refuses `{CALM}`"
        );
        assert_eq!(
            r.registry.breaker_state(DOWN),
            BreakerState::Open,
            "{what}: replica {i} closed `{DOWN}`"
        );
        assert!(
            !r.registry.is_tool_available(DOWN),
            "{what}: replica {i} lets `{DOWN}` through"
        );
    }
}

/// Checks the log after the rounds: the expected kind said, every kind at most once per
/// replica. The counts per kind, to compare after more rounds.
pub(crate) fn said_once(logs: &Logs, expect: Kind, what: &str) -> Vec<usize> {
    let counts: Vec<usize> = KINDS
        .iter()
        .map(|k| logs.fleet_warnings(k.words()))
        .collect();
    for (k, n) in KINDS.iter().zip(&counts) {
        assert!(
            *n <= REPLICAS,
            "{what}: {k:?} logged {n} times by {REPLICAS} replicas:\n{}",
            logs.text()
        );
    }
    let n = counts[KINDS.iter().position(|k| *k == expect).expect("a kind")];
    assert!(n >= 1, "{what}: {expect:?} never logged:\n{}", logs.text());
    counts
}

/// Runs every case on a fresh fleet (own prefix) of one store.
async fn run(test: &str, cases: Vec<Case>) {
    let Some(store) = store() else { return };
    let url = store.url();
    let client = raw(&url).await;
    for c in cases {
        let what = format!("{test} / {}", c.name);
        let logs = Logs::capture();
        let prefix = prefix(test);
        let all = fleet(&url, &prefix).await;
        unchanged(&all, &what);
        let before = rejected(&all);
        let v = vars(&client, &prefix).await;
        for template in &c.cmds {
            raw_cmd(&client, expand(template, &v)).await;
        }
        touched_rounds(&client, &prefix, &all, 3).await;
        unchanged(&all, &what);
        let after = rejected(&all);
        assert!(
            after.iter().sum::<u64>() > before.iter().sum::<u64>(),
            "{what}: nothing rejected: {before:?} → {after:?}"
        );
        let said = said_once(&logs, c.expect, &what);
        touched_rounds(&client, &prefix, &all, 4).await;
        unchanged(&all, &what);
        let later = rejected(&all);
        if c.persistent {
            for i in 0..REPLICAS {
                assert!(
                    later[i] >= after[i] + 4,
                    "{what}: replica {i} met the value every round: {after:?} → {later:?}"
                );
            }
        }
        assert_eq!(
            said_once(&logs, c.expect, &what),
            said,
            "{what}: more rounds, more warnings:\n{}",
            logs.text()
        );
        for r in all {
            r.fleet.shutdown().await;
        }
    }
}

pub(crate) async fn garbage_in_the_tool_state_hash_of_the_wrong_type_or_number_changes_no_breaker()
{
    use Kind::*;
    run(
        "state",
        vec![
            case(
                "a list",
                Stored,
                true,
                &["DEL|{P}t:{down}", "RPUSH|{P}t:{down}|a|b"],
            ),
            case(
                "a string",
                Stored,
                true,
                &["DEL|{P}t:{down}", "SET|{P}t:{down}|o"],
            ),
            case(
                "a set",
                Stored,
                true,
                &["DEL|{P}t:{down}", "SADD|{P}t:{down}|st"],
            ),
            case(
                "truncated",
                Stored,
                true,
                &["DEL|{P}t:{down}", "HSET|{P}t:{down}|v|1|ep|{ep}"],
            ),
            case(
                "closed, by no id",
                Stored,
                true,
                &["HSET|{P}t:{down}|st|c|by|not-a-replica-id"],
            ),
            case(
                "a negative episode",
                Stored,
                true,
                &["HSET|{P}t:{down}|st|c|ep|-5"],
            ),
            case(
                "an overflowing episode",
                Stored,
                true,
                &["HSET|{P}t:{down}|st|c|ep|99999999999999999999"],
            ),
            case(
                "a fractional episode",
                Stored,
                true,
                &["HSET|{P}t:{down}|ep|1.5"],
            ),
        ],
    )
    .await;
}

pub(crate) async fn garbage_in_the_tool_state_hash_of_the_wrong_shape_or_format_changes_no_breaker()
{
    use Kind::*;
    run(
        "state-shape",
        vec![
            case(
                "an unknown state",
                Stored,
                true,
                &["HSET|{P}t:{down}|st|closed"],
            ),
            case(
                "a negative cooldown",
                Stored,
                true,
                &["HSET|{P}t:{down}|cd|-1"],
            ),
            case(
                "a huge value",
                Stored,
                true,
                &["HSET|{P}t:{down}|ready|{big}"],
            ),
            case(
                "too many fields",
                Stored,
                true,
                &["HSET|{P}t:{down}|{fields}"],
            ),
            case("version zero", Stored, true, &["HSET|{P}t:{down}|v|0|st|c"]),
            case(
                "a non-numeric version",
                Stored,
                true,
                &["HSET|{P}t:{down}|v|one"],
            ),
            case(
                "a newer format saying closed",
                Future,
                false,
                &["HSET|{P}t:{down}|v|2|st|c"],
            ),
            // The calm tool, listed as open fleet-wide with a state no replica writes.
            case(
                "open, with a negative deadline",
                Stored,
                false,
                &[
                    "HSET|{P}t:{calm}|v|1|ep|5|st|o|ready|-1|cd|2000|by|{id}",
                    "SADD|{P}open|{calm}",
                ],
            ),
            // Issue 20, item 8: a cooldown end past its own cooldown from now (a trip writes
            // ready = now + cd). It was applied as is: every replica held open for decades.
            case(
                "open, with more left than its whole cooldown",
                Stored,
                false,
                &[
                    "HSET|{P}t:{calm}|v|1|ep|5|st|o|ready|{far}|cd|2000|by|{id}",
                    "SADD|{P}open|{calm}",
                ],
            ),
            case(
                "open, with an overflowing cooldown",
                Stored,
                false,
                &[
                    "HSET|{P}t:{calm}|v|1|ep|5|st|o|ready|{later}|cd|99999999999999999|by|{id}",
                    "SADD|{P}open|{calm}",
                ],
            ),
            case(
                "open, in a newer format",
                Future,
                false,
                &[
                    "HSET|{P}t:{calm}|v|2|ep|5|st|o|ready|{later}|cd|10000|by|{id}",
                    "SADD|{P}open|{calm}",
                ],
            ),
        ],
    )
    .await;
}

pub(crate) async fn garbage_in_a_closed_tools_operator_control_forces_nothing_and_is_said_once() {
    use Kind::*;
    run(
        "controls",
        vec![
            case(
                "forced open with mode 7",
                Stored,
                false,
                &[
                    "HSET|{P}c:{calm}|v|1|ver|1|mode|7|until|0|shadow|0|rst|0|by|{id}",
                    "SADD|{P}ctls|{calm}",
                ],
            ),
            case(
                "forced open until a negative time",
                Stored,
                false,
                &[
                    "HSET|{P}c:{calm}|v|1|ver|1|mode|1|until|-5|shadow|0|rst|0|by|{id}",
                    "SADD|{P}ctls|{calm}",
                ],
            ),
            case(
                "forced open, truncated",
                Stored,
                false,
                &["HSET|{P}c:{calm}|v|1|ver|1|mode|1", "SADD|{P}ctls|{calm}"],
            ),
            case(
                "forced open in a newer format",
                Future,
                false,
                &[
                    "HSET|{P}c:{calm}|v|2|ver|9|mode|1|until|0|shadow|0|rst|0|by|{id}",
                    "SADD|{P}ctls|{calm}",
                ],
            ),
        ],
    )
    .await;
}

pub(crate) async fn garbage_in_an_open_tools_operator_control_closes_nothing_and_is_said_once() {
    use Kind::*;
    run(
        "controls-open",
        vec![
            case(
                "a control that is a list",
                Stored,
                true,
                &["RPUSH|{P}c:{down}|2"],
            ),
            case(
                "forced closed, by no id",
                Stored,
                true,
                &["HSET|{P}c:{down}|v|1|ver|5|mode|2|until|0|shadow|0|rst|0|by|me"],
            ),
            case(
                "forced closed with an overflowing version",
                Stored,
                true,
                &[
                    "HSET|{P}c:{down}|v|1|ver|99999999999999999|mode|2|until|0|shadow|0|rst|0|by|{id}",
                ],
            ),
            case(
                "a reset with an overflowing counter",
                Stored,
                true,
                &[
                    "HSET|{P}c:{down}|v|1|ver|5|mode|0|until|0|shadow|0|rst|99999999999999999|by|{id}",
                ],
            ),
            case(
                "shadow 2",
                Stored,
                true,
                &["HSET|{P}c:{down}|v|1|ver|5|mode|0|until|0|shadow|2|rst|0|by|{id}"],
            ),
            case("a huge control", Stored, true, &["HSET|{P}c:{down}|v|1|ver|{big}|{fields}"]),
        ],
    )
    .await;
}

pub(crate) async fn garbage_in_the_open_and_control_sets_changes_no_breaker_and_is_said_once() {
    use Kind::*;
    let many: String = (0..3000).map(|i| format!("|junk-{i}")).collect();
    let many: &'static str = Box::leak(format!("SADD|{{P}}open{many}").into_boxed_str());
    let long: &'static str =
        Box::leak(format!("SADD|{{P}}open|{}", "61".repeat(300)).into_boxed_str());
    run(
        "sets",
        vec![
            case(
                "the open set is a string",
                Stored,
                false,
                &["DEL|{P}open", "SET|{P}open|x"],
            ),
            case(
                "the open set is a hash",
                Stored,
                false,
                &["DEL|{P}open", "HSET|{P}open|a|1"],
            ),
            case(
                "the open set holds no names",
                Stored,
                false,
                &["SADD|{P}open|xyz|ZZ|7|-1"],
            ),
            case(
                "the open set holds 3000 junk members",
                Stored,
                false,
                &[many],
            ),
            case(
                "the open set holds an over-long name",
                Stored,
                false,
                &[long],
            ),
            case(
                "the open set holds a name that is not UTF-8",
                Reply,
                false,
                &["SADD|{P}open|ff"],
            ),
            case(
                "the control set is a list",
                Stored,
                false,
                &["RPUSH|{P}ctls|{calm}"],
            ),
            case(
                "the control set holds no names",
                Stored,
                false,
                &["SADD|{P}ctls|g|{big}"],
            ),
        ],
    )
    .await;
}

pub(crate) async fn garbage_in_the_boot_key_changes_no_breaker_and_is_said_once() {
    use Kind::*;
    run(
        "boot",
        vec![
            case(
                "a list",
                Stored,
                false,
                &["DEL|{P}boot", "RPUSH|{P}boot|{boot}"],
            ),
            case("a word", Stored, false, &["SET|{P}boot|yesterday"]),
            case("negative", Stored, false, &["SET|{P}boot|-{boot}"]),
            case(
                "overflowing",
                Stored,
                false,
                &["SET|{P}boot|99999999999999999999"],
            ),
            case("huge", Stored, false, &["SET|{P}boot|{big}"]),
            case(
                "the change counter, a word",
                Stored,
                false,
                &["SET|{P}seq|yesterday"],
            ),
            case(
                "the change counter, a hash",
                Stored,
                false,
                &["DEL|{P}seq", "HSET|{P}seq|v|1"],
            ),
            case(
                "a hash",
                Stored,
                false,
                &["DEL|{P}boot", "HSET|{P}boot|v|{boot}"],
            ),
        ],
    )
    .await;
}

pub(crate) async fn garbage_on_the_events_channel_changes_no_breaker_and_is_said_once() {
    let Some(store) = store() else { return };
    let url = store.url();
    let client = raw(&url).await;
    let logs = Logs::capture();
    let prefix = prefix("events");
    let all = fleet(&url, &prefix).await;
    let v = vars(&client, &prefix).await;
    let (down, calm, boot, ep) = (hex(DOWN), hex(CALM), v.boot.clone(), v.ep.clone());
    let channel = format!("{prefix}:v1:ev");
    let mut messages: Vec<Vec<u8>> = [
        String::new(),
        "garbage".to_owned(),
        format!("v1 c {down}"),
        format!("v2 c {down} {ep} 0 0 0 0 {ID} {boot}"),
        format!("v1 c {down} -{ep} 0 0 0 0 {ID} {boot}"),
        format!("v1 c {down} 0 0 0 0 0 {ID} {boot}"),
        format!("v1 c {down} 99999999999999999999 0 0 0 0 {ID} {boot}"),
        format!("v1 c {down} {ep} 0 0 0 0 me {boot}"),
        format!("v1 c {down} {ep} 0 0 0 0 {ID} {boot} extra"),
        format!("v1 c {down}  {ep} 0 0 0 0 {ID} {boot}"),
        format!("v1 c zz {ep} 0 0 0 0 {ID} {boot}"),
        format!("v1 o {calm} 1 -5 1000 0 0 {ID} {boot}"),
        format!("v1 o {calm} 1 1000 99999999999999999 0 0 {ID} {boot}"),
        format!("v1 x {calm} 1 1000 1000 0 0 {ID} {boot}"),
        format!("v1 k {calm} 1 3 0 0 0 {ID} {boot}"),
        format!("v1 k {down} 1 2 0 2 0 {ID} {boot}"),
        format!("v1 k {down} 1 0 0 0 99999999999999999 {ID} {boot}"),
        format!("v1 o {calm} 1 1000 1000 0 0 {ID} {}", "9".repeat(1 << 20)),
    ]
    .into_iter()
    .map(String::into_bytes)
    .collect();
    messages.push(vec![0xff, 0xfe, b' ', 0x00]);
    let mut close_in_binary = format!("v1 c {down} {ep} 0 0 0 0 {ID} {boot}").into_bytes();
    close_in_binary[0] = 0xc3; // not UTF-8 any more
    messages.push(close_in_binary);
    let n = messages.len() as u64;
    let before = rejected(&all);
    for m in messages {
        raw_cmd(
            &client,
            vec![
                Value::from("PUBLISH"),
                Value::from(channel.clone()),
                Value::Bytes(Bytes::from(m)),
            ],
        )
        .await;
    }
    for (i, r) in all.iter().enumerate() {
        wait_for("every message rejected", 5 * SEC, || {
            r.fleet.status().rejected >= before[i] + n
        })
        .await;
    }
    rounds(&all, 3).await;
    unchanged(&all, "events");
    let after = rejected(&all);
    for i in 0..REPLICAS {
        assert_eq!(
            after[i],
            before[i] + n,
            "replica {i}: each message counted once"
        );
    }
    assert_eq!(
        logs.fleet_warnings(Kind::Message.words()),
        REPLICAS,
        "once per replica, not once per message:\n{}",
        logs.text()
    );
    for r in all {
        r.fleet.shutdown().await;
    }
}

/// The probe lease of the open episode: a replica that meets garbage there replaces it and
/// takes the probe — one probe in the fleet, no breaker moved before the cooldown ends.
pub(crate) async fn garbage_in_the_probe_lease_changes_no_breaker_and_still_one_probe() {
    use Kind::*;
    let Some(store) = store() else { return };
    let url = store.url();
    let client = raw(&url).await;
    let cases = [
        case("a list", Stored, false, &["RPUSH|{P}p:{down}:{ep}|{id}"]),
        case(
            "no replica id",
            Stored,
            false,
            &["SET|{P}p:{down}:{ep}|me|PX|60000"],
        ),
        case(
            "an id, never expiring",
            Stored,
            false,
            &["SET|{P}p:{down}:{ep}|{id}"],
        ),
        case(
            "an id, for ten years",
            Stored,
            false,
            &["SET|{P}p:{down}:{ep}|{id}|PX|315360000000"],
        ),
        case(
            "a huge value",
            Stored,
            false,
            &["SET|{P}p:{down}:{ep}|{big}|PX|60000"],
        ),
    ];
    for c in cases {
        let what = format!("lease / {}", c.name);
        let logs = Logs::capture();
        let prefix = prefix("lease");
        let all = fleet(&url, &prefix).await;
        let before = rejected(&all);
        let v = vars(&client, &prefix).await;
        for template in &c.cmds {
            raw_cmd(&client, expand(template, &v)).await;
        }
        // Every claim falls due (2 s cooldown; claims are made up to 400 ms around its end),
        // the cooldown has not ended: nothing may move.
        for r in &all {
            r.clock.advance(1900 * MS);
        }
        rounds(&all, 2).await;
        for r in &all {
            r.clock.advance(500 * MS);
        }
        rounds(&all, 2).await;
        for r in &all {
            r.clock.advance(100 * MS);
            assert_eq!(r.registry.breaker_state(DOWN), BreakerState::Open, "{what}");
            assert_eq!(
                r.registry.breaker_state(CALM),
                BreakerState::Closed,
                "{what}"
            );
        }
        let after = rejected(&all);
        assert!(
            after.iter().sum::<u64>() > before.iter().sum::<u64>(),
            "{what}: nothing rejected: {before:?} → {after:?}"
        );
        said_once(&logs, c.expect, &what);
        // The cooldown over: one probe in the fleet.
        for r in &all {
            r.clock.advance(2 * SEC);
        }
        rounds(&all, 1).await;
        let mut granted = Vec::new();
        for (i, r) in all.iter().enumerate() {
            for _ in 0..2 {
                if let GateDecision::Probe(p) = r.registry.check(DOWN) {
                    granted.push((i, p));
                }
            }
        }
        assert_eq!(granted.len(), 1, "{what}: one probe: {granted:?}");
        let (i, permit) = granted.pop().expect("one");
        all[i]
            .registry
            .record_with_permit(DOWN, permit, CallOutcome::Success, MS);
        wait_all(
            &all,
            DOWN,
            BreakerState::Closed,
            "closed everywhere",
            5 * SEC,
        )
        .await;
        for r in all {
            r.fleet.shutdown().await;
        }
    }
}

/// The fleet's failure-rate buckets: hostile counts never trip a tool, and never crash a
/// replica.
pub(crate) async fn garbage_in_the_rate_buckets_trips_nothing_and_is_said_once() {
    use Kind::*;
    let Some(store) = store() else { return };
    let url = store.url();
    let client = raw(&url).await;
    const RATED: &str = "rated";
    let policy = ToolPolicy {
        breaker: config(3, 2 * SEC, 10 * SEC),
        trip: TripPolicy::FailureRate {
            ratio: 0.5,
            min_calls: 10,
            window: Duration::from_secs(600),
        },
        ..ToolPolicy::default()
    };
    // `{r}` the tool's counts (a hash: `s<bucket>`, `f<bucket>`), `{b0}` the current bucket,
    // `{b1}`… the ones before it, `{b99}` one far ahead of the server's clock.
    let cases = [
        case(
            "the counts are a list",
            Stored,
            false,
            &["DEL|{r}", "RPUSH|{r}|9"],
        ),
        case(
            "the counts are a string",
            Stored,
            false,
            &["DEL|{r}", "SET|{r}|99"],
        ),
        case("negative failures", Stored, false, &["HSET|{r}|f{b1}|-50"]),
        case(
            "fractional failures",
            Stored,
            false,
            &["HSET|{r}|f{b2}|50.5|s{b2}|1e3"],
        ),
        case("a huge count", Stored, false, &["HSET|{r}|f{b3}|{big}"]),
        case(
            "overflowing failures",
            Stored,
            false,
            &["HSET|{r}|f{b1}|99999999999999999999"],
        ),
        case(
            "failures counted far ahead of the clock",
            Stored,
            false,
            &["HSET|{r}|f{b99}|500"],
        ),
        // Each in range, their sum not: the fleet's window cannot be trusted.
        case(
            "failures whose sum overflows",
            Reply,
            true,
            &[
                "HSET|{r}|f{b1}|4503599627370496",
                "HSET|{r}|f{b2}|4503599627370496",
            ],
        ),
        case(
            "fields of no bucket",
            Stored,
            false,
            &["HSET|{r}|f{b0}|1|{fields}"],
        ),
        case(
            "too many fields",
            Stored,
            false,
            &["HSET|{r}|f{b0}|1|{fields}|{fields2}"],
        ),
    ];
    for c in cases {
        let what = format!("rates / {}", c.name);
        let logs = Logs::capture();
        let prefix = prefix("rates");
        let all = replicas(&url, &prefix, REPLICAS, config(3, 2 * SEC, 10 * SEC)).await;
        for r in &all {
            r.registry
                .set_tool_policy(RATED, policy.clone(), Apply::Now);
            for _ in 0..2 {
                assert!(r.registry.allow_request(RATED));
                r.registry.record_success(RATED, MS);
            }
        }
        rounds(&all, 1).await;
        let (key, current) = counts_key(&client, &format!("{prefix}:v1:r:*"))
            .await
            .unwrap_or_else(|| panic!("{what}: no counts written"));
        let before = rejected(&all);
        let v = vars(&client, &prefix).await;
        for template in &c.cmds {
            let mut t = template.replace("{r}", &key).replace(
                "{fields2}",
                &(40..80)
                    .map(|i| format!("y{i}|1"))
                    .collect::<Vec<_>>()
                    .join("|"),
            );
            for back in 0..4 {
                t = t.replace(&format!("{{b{back}}}"), &(current - back).to_string());
            }
            t = t.replace("{b99}", &(current + 99).to_string());
            raw_cmd(&client, expand(&t, &v)).await;
        }
        // Every replica keeps calling (some failures, below every threshold) and counting.
        for round in 0..6 {
            for r in &all {
                assert!(r.registry.allow_request(RATED), "{what}: round {round}");
                r.registry.record_failure(RATED, MS);
                r.registry.record_success(RATED, MS);
                r.registry.record_success(RATED, MS);
            }
            rounds(&all, 1).await;
        }
        for (i, r) in all.iter().enumerate() {
            assert_eq!(
                r.registry.breaker_state(RATED),
                BreakerState::Closed,
                "{what}: replica {i} tripped on hostile counts"
            );
        }
        let after = rejected(&all);
        assert!(
            after.iter().sum::<u64>() > before.iter().sum::<u64>(),
            "{what}: nothing rejected: {before:?} → {after:?}"
        );
        if c.persistent {
            for i in 0..REPLICAS {
                assert!(after[i] >= before[i] + 5, "{what}: {before:?} → {after:?}");
            }
        }
        said_once(&logs, c.expect, &what);
        for r in all {
            r.fleet.shutdown().await;
        }
    }
}

/// The first counts hash matching `pattern`, and the bucket it counted last in (its newest
/// field, `s<bucket>` or `f<bucket>`).
async fn counts_key(client: &Client, pattern: &str) -> Option<(String, u64)> {
    let keys: Vec<String> = cmd(client, "KEYS", vec![pattern]).await;
    let key = keys.into_iter().next()?;
    let fields: Vec<String> = cmd(client, "HKEYS", vec![&key]).await;
    let newest = fields
        .iter()
        .filter_map(|f| f[1..].parse::<u64>().ok())
        .max()?;
    Some((key, newest))
}

/// The quorum votes (`q:`): junk votes never make a quorum.
pub(crate) async fn garbage_in_the_quorum_votes_opens_nothing_and_is_said_once() {
    use Kind::*;
    let Some(store) = store() else { return };
    let url = store.url();
    let client = raw(&url).await;
    let cases = [
        case("a string", Stored, false, &["SET|{P}q:{down}|3"]),
        case(
            "votes by no replica",
            Stored,
            false,
            &["ZADD|{P}q:{down}|{now}|junk-1|{now}|junk-2"],
        ),
        case(
            "votes from the future",
            Stored,
            false,
            &["ZADD|{P}q:{down}|99999999999999|00000000000000aa|99999999999999|00000000000000bb"],
        ),
    ];
    for c in cases {
        let what = format!("quorum / {}", c.name);
        let logs = Logs::capture();
        let prefix = prefix("quorum");
        let all: Vec<Replica> = (0..REPLICAS)
            .map(|_| {
                Replica::with(
                    builder(&url, &prefix).quorum(3),
                    ManualClock::new(),
                    config(3, 2 * SEC, 10 * SEC),
                )
            })
            .collect();
        for r in &all {
            r.fleet.wait_connected(10 * SEC).await.expect("connected");
            r.fleet.sync_now().await.expect("round");
        }
        let before = rejected(&all);
        let v = vars(&client, &prefix).await;
        for template in &c.cmds {
            raw_cmd(&client, expand(template, &v)).await;
        }
        // One replica trips: one vote of the three needed.
        assert_eq!(all[0].fail(DOWN, 3), 3);
        rounds(&all, 3).await;
        for (i, r) in all.iter().enumerate().skip(1) {
            assert_eq!(
                r.registry.breaker_state(DOWN),
                BreakerState::Closed,
                "{what}: replica {i} opened on junk votes"
            );
        }
        let state: Option<String> = cmd(
            &client,
            "HGET",
            vec![&format!("{prefix}:v1:t:{}", hex(DOWN)), "st"],
        )
        .await;
        assert_eq!(state, None, "{what}: no episode opened fleet-wide");
        let after = rejected(&all);
        assert!(
            after.iter().sum::<u64>() > before.iter().sum::<u64>(),
            "{what}: nothing rejected: {before:?} → {after:?}"
        );
        said_once(&logs, c.expect, &what);
        for r in all {
            r.fleet.shutdown().await;
        }
    }
}

/// Issue 20, item 8: one tool's stored buckets, each in range, whose sum is not, made the
/// whole counts reply unreadable — and every tool of its batch (up to 256) stopped tripping on
/// the fleet's failure rate. Now that tool alone is skipped (and said once).
pub(crate) async fn a_tool_whose_fleet_window_overflows_leaves_its_batch_mates_tripping() {
    let Some(store) = store() else { return };
    let url = store.url();
    let client = raw(&url).await;
    const HOSTILE: &str = "hostile";
    const MATE: &str = "mate";
    let policy = ToolPolicy {
        breaker: config(1000, 30 * SEC, 10 * SEC),
        trip: TripPolicy::FailureRate {
            ratio: 0.5,
            min_calls: 10,
            window: Duration::from_secs(600),
        },
        ..ToolPolicy::default()
    };
    let logs = Logs::capture();
    let prefix = prefix("rates-mate");
    let all = replicas(&url, &prefix, REPLICAS, config(3, 2 * SEC, 10 * SEC)).await;
    for r in &all {
        for tool in [HOSTILE, MATE] {
            r.registry.set_tool_policy(tool, policy.clone(), Apply::Now);
            assert!(r.registry.allow_request(tool));
            r.registry.record_success(tool, MS);
        }
    }
    rounds(&all, 1).await;
    let pattern = format!("{prefix}:v1:r:{}:*", hex(HOSTILE));
    let (key, current) = counts_key(&client, &pattern).await.expect("counts written");
    for back in 1..3 {
        let field = format!("f{}", current - back);
        let _: i64 = cmd(&client, "HSET", vec![&key, &field, "4503599627370496"]).await;
    }
    let before = rejected(&all);
    // Four failed calls on each replica: below `min_calls` (10) on each, 12 of 15 fleet-wide;
    // and a new call of the hostile tool, so that its counts go in the same batch.
    for r in &all {
        for _ in 0..4 {
            assert!(r.registry.allow_request(MATE));
            r.registry.record_failure(MATE, MS);
        }
        assert!(r.registry.allow_request(HOSTILE));
        r.registry.record_success(HOSTILE, MS);
    }
    rounds(&all, 2).await;
    for (i, r) in all.iter().enumerate() {
        assert_eq!(
            r.registry.breaker_state(MATE),
            BreakerState::Open,
            "replica {i}: the fleet's failure rate of `{MATE}` no longer trips"
        );
        assert_eq!(r.registry.breaker_state(HOSTILE), BreakerState::Closed);
    }
    assert!(rejected(&all).iter().sum::<u64>() > before.iter().sum::<u64>());
    said_once(
        &logs,
        Kind::Reply,
        "an overflowing window beside a good one",
    );
    for r in all {
        r.fleet.shutdown().await;
    }
}
