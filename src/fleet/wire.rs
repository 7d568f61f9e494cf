//! What crosses the wire, parsed strictly: tool names in keys, replica ids, script replies and
//! channel messages.
//!
//! Nothing read from the store is trusted. Every reply and message is checked for its shape
//! (exact field counts, known words), every number is a bounded decimal, every id and name is
//! of the expected alphabet and length; anything else is a [`Rejected`] value that changes
//! nothing (the caller reports it once and counts it). Pure functions: unit-tested here on
//! hostile input, no network needed.

use std::fmt;
use std::time::Duration;

/// The longest tool name shared with the fleet, in bytes. A longer name is broken locally only
/// (its hex form would make keys of more than a kilobyte).
pub(crate) const MAX_SHARED_NAME: usize = 256;

/// The largest millisecond count on the wire: 2^40 − 1, "never" (as the breaker's own word).
pub(crate) const NEVER_MS: u64 = (1 << 40) - 1;

/// The bound of every other integer on the wire (episodes, versions, counts): 2^52.
const MAX_INT: u64 = 1 << 52;

/// The longest single field accepted from the store.
const MAX_FIELD: usize = 1024;

/// The most fields a reply may have.
pub(crate) const MAX_FIELDS: usize = 200_000;

/// Why a value from the store was not trusted. Each kind is reported once (WARN), then only
/// counted (`tool_health.fleet.rejected`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Rejected {
    /// A script's reply had an unexpected shape or value.
    Reply,
    /// A message on the events channel could not be parsed.
    Message,
    /// A key held a value no replica writes (repaired by the script that met it).
    Stored,
    /// A key holds a value of a newer format: left alone.
    Future,
}

impl Rejected {
    pub(crate) const ALL: [Rejected; 4] = [
        Rejected::Reply,
        Rejected::Message,
        Rejected::Stored,
        Rejected::Future,
    ];

    /// The value of the `tool_health.fleet.value` metric attribute.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Rejected::Reply => "reply",
            Rejected::Message => "message",
            Rejected::Stored => "stored",
            Rejected::Future => "future",
        }
    }
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Rejected::Reply => "a reply of unexpected shape",
            Rejected::Message => "an unreadable event message",
            Rejected::Stored => "a stored value no replica writes (replaced)",
            Rejected::Future => "a value of a newer format (left alone)",
        })
    }
}

/// A replica's id: 16 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ReplicaId(pub(crate) u64);

impl ReplicaId {
    pub(crate) fn parse(s: &str) -> Option<Self> {
        if s.len() != 16 || !s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return None;
        }
        u64::from_str_radix(s, 16).ok().map(ReplicaId)
    }

    /// A fresh random id (std's per-process random hash keys, the time and a counter).
    pub(crate) fn random() -> Self {
        use std::collections::hash_map::RandomState;
        use std::hash::{BuildHasher, Hasher};
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let mut h = RandomState::new().build_hasher();
        h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        h.write_u32(std::process::id());
        if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            h.write_u128(t.as_nanos());
        }
        ReplicaId(h.finish())
    }
}

impl fmt::Display for ReplicaId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

impl fmt::Debug for ReplicaId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A tool name as it appears in keys: lowercase hex of its bytes (any name, no key syntax).
/// `None` for a name too long to share or empty.
pub(crate) fn encode_tool(name: &str) -> Option<String> {
    if name.is_empty() || name.len() > MAX_SHARED_NAME {
        return None;
    }
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(name.len() * 2);
    for b in name.bytes() {
        s.push(HEX[usize::from(b >> 4)] as char);
        s.push(HEX[usize::from(b & 15)] as char);
    }
    Some(s)
}

/// The tool name a key's hex stands for, if it is one (valid hex of valid UTF-8, in bounds).
pub(crate) fn decode_tool(hex: &str) -> Option<String> {
    if hex.is_empty() || hex.len() % 2 != 0 || hex.len() > 2 * MAX_SHARED_NAME {
        return None;
    }
    let digit = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    };
    let bytes: Option<Vec<u8>> = hex
        .as_bytes()
        .chunks(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect();
    String::from_utf8(bytes?).ok()
}

/// A strict decimal in `[0, max]`.
fn int(s: &str, max: u64) -> Option<u64> {
    if s.is_empty() || s.len() > 16 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<u64>().ok().filter(|n| *n <= max)
}

/// Milliseconds on the wire as a duration; [`NEVER_MS`] is `Duration::MAX`.
fn ms(s: &str) -> Option<Duration> {
    let n = int(s, NEVER_MS)?;
    Some(if n >= NEVER_MS {
        Duration::MAX
    } else {
        Duration::from_millis(n)
    })
}

/// A reply's fields, each bounded; `None` when the reply is not a flat array of strings.
pub(crate) fn fields(values: impl IntoIterator<Item = Option<String>>) -> Option<Vec<String>> {
    let mut out = Vec::new();
    for v in values {
        let v = v?;
        if v.len() > MAX_FIELD || out.len() >= MAX_FIELDS {
            return None;
        }
        out.push(v);
    }
    Some(out)
}

/// One tool's shared state, as a script reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SharedState {
    /// Nothing stored.
    None,
    /// A value no replica writes: ignored (the next trip replaces it).
    Corrupt,
    /// A newer format: ignored, left alone.
    Future,
    /// An open episode: `remaining` until its probe may start, its cooldown, who opened it.
    Open {
        ep: u64,
        remaining: Duration,
        cooldown: Duration,
        by: ReplicaId,
    },
    /// A closed episode.
    Closed { ep: u64, by: ReplicaId },
}

impl SharedState {
    /// From the six state fields: kind, ep, st, remaining, cooldown, by.
    fn parse(f: &[String]) -> Option<Self> {
        let [kind, ep, st, remaining, cooldown, by] = f else {
            return None;
        };
        Some(match kind.as_str() {
            "none" => SharedState::None,
            "corrupt" => SharedState::Corrupt,
            "future" => SharedState::Future,
            "ok" => {
                let ep = int(ep, MAX_INT).filter(|e| *e > 0)?;
                let by = ReplicaId::parse(by)?;
                match st.as_str() {
                    "o" => {
                        let (remaining, cooldown) = (ms(remaining)?, ms(cooldown)?);
                        // An episode's cooldown never has more left than its whole length:
                        // a longer wait is no replica's (it would hold every replica open).
                        if remaining > cooldown {
                            return None;
                        }
                        SharedState::Open {
                            ep,
                            remaining,
                            cooldown,
                            by,
                        }
                    }
                    "c" => SharedState::Closed { ep, by },
                    _ => return None,
                }
            }
            _ => return None,
        })
    }
}

/// An operator control shared fleet-wide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SharedControl {
    pub(crate) ver: u64,
    pub(crate) mode: SharedMode,
    pub(crate) shadow: bool,
    /// How many fleet-wide resets the tool has had.
    pub(crate) resets: u64,
}

/// The mode part of a [`SharedControl`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SharedMode {
    Normal,
    /// Forced open for `remaining` more (`Duration::MAX`: until released).
    ForcedOpen {
        remaining: Duration,
    },
    ForcedClosed,
}

/// A control as a script reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ControlField {
    None,
    Corrupt,
    Future,
    Ok(SharedControl),
}

impl ControlField {
    /// From the six control fields: kind, ver, mode, remaining, shadow, resets.
    fn parse(f: &[String]) -> Option<Self> {
        let [kind, ver, mode, remaining, shadow, resets] = f else {
            return None;
        };
        Some(match kind.as_str() {
            "none" => ControlField::None,
            "corrupt" => ControlField::Corrupt,
            "future" => ControlField::Future,
            "ok" => ControlField::Ok(SharedControl::parse(ver, mode, remaining, shadow, resets)?),
            _ => return None,
        })
    }
}

impl SharedControl {
    fn parse(ver: &str, mode: &str, remaining: &str, shadow: &str, resets: &str) -> Option<Self> {
        let remaining = ms(remaining)?;
        Some(SharedControl {
            ver: int(ver, MAX_INT)?,
            mode: match mode {
                "0" => SharedMode::Normal,
                // A forced-open that lapsed is over.
                "1" if remaining.is_zero() => SharedMode::Normal,
                "1" => SharedMode::ForcedOpen { remaining },
                "2" => SharedMode::ForcedClosed,
                _ => return None,
            },
            shadow: match shadow {
                "0" => false,
                "1" => true,
                _ => return None,
            },
            resets: int(resets, MAX_INT)?,
        })
    }
}

/// The store's boot id: a different one means the store lost its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Boot(pub(crate) u64);

fn boot(s: &str) -> Option<Boot> {
    int(s, MAX_INT).map(Boot)
}

/// What the trip script answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TripReply {
    /// The tool's episode `ep` is open (joined, or opened by this trip).
    Open {
        ep: u64,
        remaining: Duration,
        new: bool,
    },
    /// Quorum not met yet: `votes` replicas tripped within the window.
    Vote { votes: u64 },
    /// A newer format holds the tool's state: this replica stays local for it.
    Future,
}

/// A script's reply with the two fields every reply ends with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reply<T> {
    pub(crate) value: T,
    pub(crate) boot: Boot,
    /// Stored values the script met that no replica writes (and replaced).
    pub(crate) corrupt: u64,
}

fn tail(f: &[String]) -> Option<(Boot, u64)> {
    let [.., b, c] = f else { return None };
    Some((boot(b)?, int(c, MAX_INT)?))
}

pub(crate) fn trip_reply(f: &[String]) -> Option<Reply<TripReply>> {
    let [code, ep, remaining, _cooldown, by, _, _] = f else {
        return None;
    };
    ReplicaId::parse(by)?;
    let (boot, corrupt) = tail(f)?;
    let value = match code.as_str() {
        "join" | "new" => TripReply::Open {
            ep: int(ep, MAX_INT).filter(|e| *e > 0)?,
            remaining: ms(remaining)?,
            new: code == "new",
        },
        "vote" => TripReply::Vote {
            votes: int(ep, MAX_INT)?,
        },
        "future" => TripReply::Future,
        _ => return None,
    };
    Some(Reply {
        value,
        boot,
        corrupt,
    })
}

/// What the claim script answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ClaimReply {
    /// This replica holds the probe for `ttl` more.
    Won { ttl: Duration },
    /// `holder` holds it for `ttl` more.
    Lost { holder: ReplicaId, ttl: Duration },
    /// The episode is not the open one any more: the tool's state now.
    Stale(SharedState),
}

pub(crate) fn claim_reply(f: &[String], me: ReplicaId) -> Option<Reply<ClaimReply>> {
    let (boot, corrupt) = tail(f)?;
    let value = match f.first()?.as_str() {
        "won" | "lost" => {
            let [code, holder, ttl, _, _] = f else {
                return None;
            };
            let holder = ReplicaId::parse(holder)?;
            let ttl = ms(ttl)?;
            if code == "won" && holder == me {
                ClaimReply::Won { ttl }
            } else if code == "lost" && holder != me {
                ClaimReply::Lost { holder, ttl }
            } else {
                return None;
            }
        }
        "stale" => {
            let [_, state @ .., _, _] = f else {
                return None;
            };
            ClaimReply::Stale(SharedState::parse(state)?)
        }
        _ => return None,
    };
    Some(Reply {
        value,
        boot,
        corrupt,
    })
}

/// What the settle script answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SettleReply {
    /// The episode closed.
    Closed { ep: u64 },
    /// The next episode opened.
    Reopened { ep: u64, remaining: Duration },
    /// Another replica holds the episode's lease: not this one's to settle.
    Held { holder: ReplicaId, ttl: Duration },
    /// The episode is not the open one any more.
    Stale(SharedState),
}

pub(crate) fn settle_reply(f: &[String]) -> Option<Reply<SettleReply>> {
    let (boot, corrupt) = tail(f)?;
    let value = match f.first()?.as_str() {
        "stale" => {
            let [_, state @ .., _, _] = f else {
                return None;
            };
            SettleReply::Stale(SharedState::parse(state)?)
        }
        code => {
            let [_, a, b, _, _, _, _, _, _] = f else {
                return None;
            };
            match code {
                "closed" => SettleReply::Closed {
                    ep: int(a, MAX_INT).filter(|e| *e > 0)?,
                },
                "new" => SettleReply::Reopened {
                    ep: int(a, MAX_INT).filter(|e| *e > 0)?,
                    remaining: ms(b)?,
                },
                "held" => SettleReply::Held {
                    holder: ReplicaId::parse(a)?,
                    ttl: ms(b)?,
                },
                _ => return None,
            }
        }
    };
    Some(Reply {
        value,
        boot,
        corrupt,
    })
}

/// What the lease script answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LeaseReply {
    /// This replica holds the lease for `ttl` more.
    Held { ttl: Duration },
    /// This replica's lease was given back.
    Released,
    /// `holder` holds it for `ttl` more.
    Lost { holder: ReplicaId, ttl: Duration },
    /// Nobody holds it.
    None,
    /// The episode is not the open one any more.
    Stale(SharedState),
}

pub(crate) fn lease_reply(f: &[String], me: ReplicaId) -> Option<Reply<LeaseReply>> {
    let (boot, corrupt) = tail(f)?;
    let value = match f.first()?.as_str() {
        "stale" => {
            let [_, state @ .., _, _] = f else {
                return None;
            };
            LeaseReply::Stale(SharedState::parse(state)?)
        }
        code => {
            let [_, holder, ttl, _, _] = f else {
                return None;
            };
            let holder = ReplicaId::parse(holder)?;
            let ttl = ms(ttl)?;
            match code {
                "held" if holder == me => LeaseReply::Held { ttl },
                "released" if holder == me => LeaseReply::Released,
                "none" => LeaseReply::None,
                "lost" if holder != me => LeaseReply::Lost { holder, ttl },
                _ => return None,
            }
        }
    };
    Some(Reply {
        value,
        boot,
        corrupt,
    })
}

/// What the streak script answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StreakReply {
    /// The tool's fleet-wide streak is open: `n` failures, the strictest threshold `threshold`.
    Streak { n: u64, threshold: u64 },
    /// No streak (a success ended it, or there was none).
    None,
    /// The tool is open fleet-wide (episode `ep`, its probe in `remaining`): no streak while
    /// it is.
    Open { ep: u64, remaining: Duration },
    /// This report reached the threshold: episode `ep` opened for `cooldown`.
    Tripped { ep: u64, cooldown: Duration },
    /// A newer format holds the tool's state: this replica stays local for it.
    Future,
}

pub(crate) fn streak_reply(f: &[String]) -> Option<Reply<StreakReply>> {
    let [code, n, threshold, ep, cooldown, _, _] = f else {
        return None;
    };
    let (boot, corrupt) = tail(f)?;
    let value = match code.as_str() {
        "streak" => StreakReply::Streak {
            n: int(n, MAX_INT).filter(|n| *n > 0)?,
            threshold: int(threshold, MAX_THRESHOLD)?,
        },
        "none" => StreakReply::None,
        "open" => {
            // `n` carries the episode's cooldown, `cooldown` what is left of it.
            let (whole, remaining) = (ms(n)?, ms(cooldown)?);
            if remaining > whole {
                return None; // see `SharedState::parse`
            }
            StreakReply::Open {
                ep: int(ep, MAX_INT).filter(|e| *e > 0)?,
                remaining,
            }
        }
        "tripped" => StreakReply::Tripped {
            ep: int(ep, MAX_INT).filter(|e| *e > 0)?,
            cooldown: ms(cooldown)?,
        },
        "future" => StreakReply::Future,
        _ => return None,
    };
    Some(Reply {
        value,
        boot,
        corrupt,
    })
}

/// The largest threshold on the wire (a breaker's `failure_threshold` is a `u32`; the scripts
/// bound it at 10^9).
const MAX_THRESHOLD: u64 = 1_000_000_000;

/// One tool in a poll reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Polled {
    pub(crate) tool: String,
    pub(crate) state: SharedState,
    pub(crate) control: ControlField,
}

/// A poll reply: the tools, the open failure streaks, and how many of either could not be read
/// (skipped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PollReply {
    pub(crate) tools: Vec<Polled>,
    /// Open fleet-wide failure streaks: (tool, failures, strictest threshold).
    pub(crate) streaks: Vec<(String, u64, u64)>,
    pub(crate) unreadable: u64,
}

const POLL_FIELDS: usize = 13;

pub(crate) fn poll_reply(f: &[String]) -> Option<Reply<PollReply>> {
    let [b, corrupt, count, rest @ ..] = f else {
        return None;
    };
    let boot = boot(b)?;
    let corrupt = int(corrupt, MAX_INT)?;
    let count = usize::try_from(int(count, MAX_INT)?).ok()?;
    let (rest, tail) = rest.split_at_checked(count.checked_mul(POLL_FIELDS)?)?;
    let [scount, tail @ ..] = tail else {
        return None;
    };
    let scount = usize::try_from(int(scount, MAX_INT)?).ok()?;
    if tail.len() != scount.checked_mul(3)? {
        return None;
    }
    let mut tools = Vec::with_capacity(count);
    let mut unreadable = 0;
    let mut streaks = Vec::with_capacity(scount);
    for s in tail.chunks_exact(3) {
        match (
            decode_tool(&s[0]),
            int(&s[1], MAX_INT),
            int(&s[2], MAX_THRESHOLD),
        ) {
            (Some(tool), Some(n), Some(thr)) if n > 0 => streaks.push((tool, n, thr)),
            _ => unreadable += 1,
        }
    }
    for t in rest.chunks_exact(POLL_FIELDS) {
        let parsed = (|| {
            Some(Polled {
                tool: decode_tool(&t[0])?,
                state: SharedState::parse(&t[1..7])?,
                control: ControlField::parse(&t[7..13])?,
            })
        })();
        match parsed {
            Some(p) => tools.push(p),
            None => unreadable += 1,
        }
    }
    Some(Reply {
        value: PollReply {
            tools,
            streaks,
            unreadable,
        },
        boot,
        corrupt,
    })
}

/// What a poll's first half answered: the shard's boot id and change counter, and the tools
/// it lists when they changed since the replica's last read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IndexReply {
    pub(crate) boot: Boot,
    pub(crate) seq: u64,
    pub(crate) corrupt: u64,
    /// `None`: nothing changed since the last read (`same`).
    pub(crate) listed: Option<Vec<String>>,
    /// Members listed that are no tool name (skipped).
    pub(crate) unreadable: u64,
}

pub(crate) fn index_reply(f: &[String]) -> Option<IndexReply> {
    let [b, seq, corrupt, kind, rest @ ..] = f else {
        return None;
    };
    let listed = match kind.as_str() {
        "same" if rest.is_empty() => None,
        "list" => Some(rest.iter().filter_map(|hex| decode_tool(hex)).collect()),
        _ => return None,
    };
    let unreadable = listed
        .as_ref()
        .map_or(0, |l: &Vec<String>| (rest.len() - l.len()) as u64);
    Some(IndexReply {
        boot: boot(b)?,
        seq: int(seq, MAX_INT)?,
        corrupt: int(corrupt, MAX_INT)?,
        listed,
        unreadable,
    })
}

/// A counts reply: the fleet window's (successes, failures) per tool, and how many tools' sums
/// could not be read (skipped: the others still count).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CountsReply {
    pub(crate) tools: Vec<(String, u64, u64)>,
    pub(crate) unreadable: u64,
}

pub(crate) fn counts_reply(f: &[String]) -> Option<Reply<CountsReply>> {
    let [b, corrupt, rest @ ..] = f else {
        return None;
    };
    if rest.len() % 3 != 0 {
        return None;
    }
    let mut tools = Vec::with_capacity(rest.len() / 3);
    let mut unreadable = 0;
    for t in rest.chunks_exact(3) {
        match (decode_tool(&t[0]), int(&t[1], MAX_INT), int(&t[2], MAX_INT)) {
            (Some(tool), Some(s), Some(f)) => tools.push((tool, s, f)),
            _ => unreadable += 1,
        }
    }
    Some(Reply {
        value: CountsReply { tools, unreadable },
        boot: boot(b)?,
        corrupt: int(corrupt, MAX_INT)?,
    })
}

/// A control reply: the control's new version.
pub(crate) fn control_reply(f: &[String]) -> Option<Reply<u64>> {
    let [ver, _, _] = f else { return None };
    let (boot, corrupt) = tail(f)?;
    Some(Reply {
        value: int(ver, MAX_INT)?,
        boot,
        corrupt,
    })
}

/// A message on the events channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Event {
    pub(crate) tool: String,
    pub(crate) kind: EventKind,
    pub(crate) by: ReplicaId,
    pub(crate) boot: Boot,
}

/// What an event says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EventKind {
    /// Episode `ep` opened, probe in `remaining`.
    Open {
        ep: u64,
        remaining: Duration,
        cooldown: Duration,
    },
    /// Episode `ep` closed.
    Close { ep: u64 },
    /// An operator's control changed.
    Control(SharedControl),
    /// A fleet-wide failure streak opened (or its threshold got stricter): `n` failures, the
    /// strictest threshold `threshold`.
    Streak { n: u64, threshold: u64 },
    /// A success ended the tool's fleet-wide failure streak.
    StreakOver,
}

/// The longest message accepted.
const MAX_MESSAGE: usize = 2 * MAX_SHARED_NAME + 200;

pub(crate) fn event(msg: &[u8]) -> Option<Event> {
    if msg.len() > MAX_MESSAGE {
        return None;
    }
    let msg = std::str::from_utf8(msg).ok()?;
    let parts: Vec<&str> = msg.split(' ').collect();
    let [version, kind, hex, a, b, c, d, e, by, bt] = parts[..] else {
        return None;
    };
    if version != "v1" {
        return None;
    }
    let kind = match kind {
        "o" => {
            let (remaining, cooldown) = (ms(b)?, ms(c)?);
            if remaining > cooldown {
                return None; // see `SharedState::parse`
            }
            EventKind::Open {
                ep: int(a, MAX_INT).filter(|e| *e > 0)?,
                remaining,
                cooldown,
            }
        }
        "c" => EventKind::Close {
            ep: int(a, MAX_INT).filter(|e| *e > 0)?,
        },
        "k" => EventKind::Control(SharedControl::parse(a, b, c, d, e)?),
        "s" => EventKind::Streak {
            n: int(a, MAX_INT).filter(|n| *n > 0)?,
            threshold: int(b, MAX_THRESHOLD)?,
        },
        "z" => EventKind::StreakOver,
        _ => return None,
    };
    Some(Event {
        tool: decode_tool(hex)?,
        kind,
        by: ReplicaId::parse(by)?,
        boot: boot(bt)?,
    })
}

/// Milliseconds for a script argument: whole milliseconds rounded up, [`NEVER_MS`] for
/// anything that long or longer.
pub(crate) fn arg_ms(d: Duration) -> u64 {
    let ms = d.as_nanos().div_ceil(1_000_000);
    u64::try_from(ms).unwrap_or(NEVER_MS).min(NEVER_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|s| (*s).to_owned()).collect()
    }

    const ME: &str = "00000000000000aa";
    const OTHER: &str = "00000000000000bb";

    #[test]
    fn tool_names_round_trip_and_anything_else_is_no_name() {
        for name in ["search", "a:b{c}", "é ü \u{202e}", "\0", &"x".repeat(256)] {
            let hex = encode_tool(name).unwrap();
            assert_eq!(decode_tool(&hex).as_deref(), Some(name));
        }
        assert_eq!(encode_tool(""), None);
        assert_eq!(encode_tool(&"x".repeat(257)), None);
        for bad in ["", "a", "zz", "ABCD", "c3", "ff", &"61".repeat(257)] {
            assert_eq!(decode_tool(bad), None, "{bad}");
        }
    }

    #[test]
    fn ids_and_numbers_are_strict() {
        assert!(ReplicaId::parse(ME).is_some());
        for bad in [
            "",
            "00000000000000AA",
            "0000000000000aa",
            "00000000000000aaa",
            "+000000000000000",
        ] {
            assert!(ReplicaId::parse(bad).is_none(), "{bad}");
        }
        assert_eq!(int("0", 5), Some(0));
        for bad in ["", "-1", "+1", " 1", "1.0", "1e3", "6", "99999999999999999"] {
            assert_eq!(int(bad, 5), None, "{bad}");
        }
        assert_eq!(ms("1099511627775"), Some(Duration::MAX));
        assert_eq!(ms("1099511627776"), None);
        assert_eq!(arg_ms(Duration::from_micros(1_001)), 2);
        assert_eq!(arg_ms(Duration::MAX), NEVER_MS);
        let a = ReplicaId::random();
        assert_ne!(a, ReplicaId::random());
        assert_eq!(ReplicaId::parse(&a.to_string()), Some(a));
    }

    #[test]
    fn replies_parse_only_in_their_exact_shape() {
        let open = v(&["new", "1700000000000", "5000", "5000", ME, "17", "0"]);
        assert_eq!(
            trip_reply(&open).unwrap().value,
            TripReply::Open {
                ep: 1_700_000_000_000,
                remaining: Duration::from_millis(5000),
                new: true
            }
        );
        for bad in [
            v(&["new", "0", "5000", "5000", ME, "17", "0"]),
            v(&["new", "1", "5000", "5000", "x", "17", "0"]),
            v(&["nope", "1", "5000", "5000", ME, "17", "0"]),
            v(&["new", "1", "5000", "5000", ME, "17"]),
            v(&["new", "1", "-5", "5000", ME, "17", "0"]),
        ] {
            assert_eq!(trip_reply(&bad), None, "{bad:?}");
        }
        let me = ReplicaId::parse(ME).unwrap();
        assert_eq!(
            claim_reply(&v(&["won", ME, "300", "17", "0"]), me)
                .unwrap()
                .value,
            ClaimReply::Won {
                ttl: Duration::from_millis(300)
            }
        );
        assert_eq!(claim_reply(&v(&["won", OTHER, "300", "17", "0"]), me), None);
        assert_eq!(claim_reply(&v(&["lost", ME, "300", "17", "0"]), me), None);
        assert!(matches!(
            claim_reply(
                &v(&["stale", "ok", "9", "c", "0", "0", OTHER, "17", "2"]),
                me
            )
            .unwrap()
            .value,
            ClaimReply::Stale(SharedState::Closed { ep: 9, .. })
        ));
        assert!(matches!(
            settle_reply(&v(&["held", OTHER, "300", "0", "0", "0", "0", "17", "0"]))
                .unwrap()
                .value,
            SettleReply::Held { .. }
        ));
    }

    #[test]
    fn lease_streak_and_counts_replies_parse_only_in_their_exact_shape() {
        let me = ReplicaId::parse(ME).unwrap();
        let lease = |f: &[&str]| lease_reply(&v(f), me).map(|r| r.value);
        assert_eq!(
            lease(&["held", ME, "900", "17", "0"]),
            Some(LeaseReply::Held {
                ttl: Duration::from_millis(900)
            })
        );
        assert_eq!(
            lease(&["released", ME, "0", "17", "0"]),
            Some(LeaseReply::Released)
        );
        assert!(matches!(
            lease(&["lost", OTHER, "5", "17", "0"]),
            Some(LeaseReply::Lost { .. })
        ));
        for bad in [
            &["held", OTHER, "900", "17", "0"][..],
            &["lost", ME, "900", "17", "0"],
            &["held", ME, "-1", "17", "0"],
            &["held", ME, "900", "17"],
        ] {
            assert_eq!(lease(bad), None, "{bad:?}");
        }
        let streak = |f: &[&str]| streak_reply(&v(f)).map(|r| r.value);
        assert_eq!(
            streak(&["streak", "2", "3", "0", "0", "17", "0"]),
            Some(StreakReply::Streak { n: 2, threshold: 3 })
        );
        assert_eq!(
            streak(&["tripped", "3", "3", "99", "5000", "17", "0"]),
            Some(StreakReply::Tripped {
                ep: 99,
                cooldown: Duration::from_secs(5)
            })
        );
        assert_eq!(
            streak(&["open", "5000", "0", "99", "1200", "17", "0"]),
            Some(StreakReply::Open {
                ep: 99,
                remaining: Duration::from_millis(1200)
            })
        );
        for bad in [
            &["streak", "0", "3", "0", "0", "17", "0"][..],
            &["tripped", "3", "3", "0", "5000", "17", "0"],
            &["open", "5000", "0", "99", "5001", "17", "0"],
            &["open", "5000", "0", "0", "10", "17", "0"],
            &["streak", "2", "3", "0", "0", "17"],
            &["what", "2", "3", "0", "0", "17", "0"],
        ] {
            assert_eq!(streak(bad), None, "{bad:?}");
        }
        // A poll's first half: nothing changed, or the tools listed (names only).
        let index = |f: &[&str]| index_reply(&v(f));
        let same = index(&["17", "42", "0", "same"]).unwrap();
        assert_eq!((same.boot, same.seq, same.listed), (Boot(17), 42, None));
        let list = index(&["17", "43", "1", "list", "61", "ff", "62"]).unwrap();
        assert_eq!(list.listed, Some(vec!["a".to_owned(), "b".to_owned()]));
        assert_eq!((list.corrupt, list.unreadable), (1, 1));
        for bad in [
            &["17", "42", "0", "same", "61"][..],
            &["17", "42", "0", "other"],
            &["17", "-1", "0", "same"],
            &["17", "42", "0"],
        ] {
            assert_eq!(index(bad), None, "{bad:?}");
        }
        // One tool's unreadable sums leave the others of the batch readable.
        let r = counts_reply(&v(&["17", "0", "61", "-", "-", "62", "3", "4"])).unwrap();
        assert_eq!(r.value.tools, vec![("b".to_owned(), 3, 4)]);
        assert_eq!(r.value.unreadable, 1);
        assert_eq!(counts_reply(&v(&["17", "0", "61", "1"])), None);
    }

    #[test]
    fn a_poll_reply_skips_the_tools_it_cannot_read_and_keeps_the_others() {
        let good = [
            "736561726368",
            "ok",
            "5",
            "o",
            "100",
            "200",
            OTHER,
            "ok",
            "3",
            "1",
            "5000",
            "0",
            "1",
        ];
        let bad = [
            "zz", "ok", "5", "o", "100", "200", OTHER, "none", "0", "0", "0", "0", "0",
        ];
        let mut f = v(&["17", "1", "2"]);
        f.extend(v(&good));
        f.extend(v(&bad));
        f.extend(v(&["2", "736561726368", "2", "3", "zz", "1", "3"]));
        let r = poll_reply(&f).unwrap();
        assert_eq!(r.value.streaks, vec![("search".to_owned(), 2, 3)]);
        assert_eq!(r.value.unreadable, 2, "a tool and a streak skipped");
        assert_eq!(r.value.tools.len(), 1);
        assert_eq!(r.value.tools[0].tool, "search");
        assert_eq!(
            r.value.tools[0].control,
            ControlField::Ok(SharedControl {
                ver: 3,
                mode: SharedMode::ForcedOpen {
                    remaining: Duration::from_secs(5)
                },
                shadow: false,
                resets: 1
            })
        );
        let mut short = v(&["17", "1", "2"]);
        short.extend(v(&good));
        short.push("0".into());
        assert_eq!(poll_reply(&short), None, "the count must match");
        let mut no_streaks = v(&["17", "1", "1"]);
        no_streaks.extend(v(&good));
        assert_eq!(poll_reply(&no_streaks), None, "the streak count is there");
        no_streaks.push("0".into());
        assert!(poll_reply(&no_streaks).is_some());
    }

    #[test]
    fn events_parse_only_in_their_exact_shape() {
        let ok = format!("v1 o 736561726368 9 100 200 0 0 {OTHER} 17");
        assert_eq!(
            event(ok.as_bytes()).unwrap().kind,
            EventKind::Open {
                ep: 9,
                remaining: Duration::from_millis(100),
                cooldown: Duration::from_millis(200)
            }
        );
        for bad in [
            format!("v2 o 736561726368 9 100 200 0 0 {OTHER} 17"),
            format!("v1 o 736561726368 9 100 200 0 0 {OTHER}"),
            format!("v1 o 736561726368 9 100 200 0 0 {OTHER} 17 x"),
            format!("v1 o 736561726368 9 100 200 0 0  {OTHER} 17"),
            format!("v1 x 736561726368 9 100 200 0 0 {OTHER} 17"),
            format!("v1 k 736561726368 1 7 0 0 0 {OTHER} 17"),
            "\u{ff}\u{fe}".to_owned(),
            "x".repeat(10_000),
        ] {
            assert_eq!(event(bad.as_bytes()), None, "{bad}");
        }
        assert_eq!(event(&[0xff, 0xfe, 0x20]), None);
        let streak = format!("v1 s 736561726368 2 3 0 0 0 {OTHER} 17");
        assert_eq!(
            event(streak.as_bytes()).unwrap().kind,
            EventKind::Streak { n: 2, threshold: 3 }
        );
        let over = format!("v1 z 736561726368 0 0 0 0 0 {OTHER} 17");
        assert_eq!(event(over.as_bytes()).unwrap().kind, EventKind::StreakOver);
        for bad in [
            format!("v1 s 736561726368 0 3 0 0 0 {OTHER} 17"),
            format!("v1 s 736561726368 2 1000000001 0 0 0 {OTHER} 17"),
            // More cooldown left than the whole cooldown: no replica's.
            format!("v1 o 736561726368 9 5000 200 0 0 {OTHER} 17"),
        ] {
            assert_eq!(event(bad.as_bytes()), None, "{bad}");
        }
    }

    proptest::proptest! {
        /// Whatever the store or the channel holds, parsing answers, never panics.
        #[test]
        fn no_input_panics_a_parser(
            f in proptest::collection::vec("[a-z0-9 ]{0,20}|ok|o|c|new|won|stale|[0-9]{1,17}", 0..40),
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
        ) {
            let me = ReplicaId(0xaa);
            let _ = trip_reply(&f);
            let _ = claim_reply(&f, me);
            let _ = settle_reply(&f);
            let _ = poll_reply(&f);
            let _ = index_reply(&f);
            let _ = counts_reply(&f);
            let _ = lease_reply(&f, me);
            let _ = streak_reply(&f);
            let _ = control_reply(&f);
            let _ = event(&bytes);
            let _ = event(f.join(" ").as_bytes());
            let _ = decode_tool(&String::from_utf8_lossy(&bytes));
        }
    }
}
