//! The store's failure modes, each against a private server this test kills, pauses or
//! restarts: `kill -9` and an empty restart, SIGSTOP, replicas that cannot reach the store, and
//! an hour of clock skew. In every case each replica keeps breaking on its own, no call fails
//! or waits because of the store (the gate's latency is measured around every `check`), and
//! the fleet resyncs when the store is back.

use std::time::{Duration, Instant};

use tool_health::fleet::{FleetBuilder, RateScope};
use tool_health::{
    Apply, BreakerState, CallOutcome, GateDecision, ManualClock, ToolPolicy, TripPolicy,
};

use crate::gate::*;
use crate::support::*;

const TOOL: &str = "search";
const OTHER: &str = "db";
/// Replicas of the fault tests poll often, so that they notice the store going and coming
/// back by themselves.
fn fault_builder(url: &str, prefix: &str) -> FleetBuilder {
    builder(url, prefix).poll_interval(Duration::from_millis(100))
}

fn state(r: &Replica, tool: &str) -> BreakerState {
    r.registry.breaker_state(tool)
}

async fn wait_disconnected(all: &[&Replica]) -> Duration {
    let start = Instant::now();
    for r in all {
        wait_for("the replica to notice", 10 * SEC, || {
            !r.fleet.status().connected
        })
        .await;
        let status = r.fleet.status();
        assert!(status.last_error.is_some(), "{status:?}");
    }
    start.elapsed()
}

/// Each replica breaks on its own while the store is away: `all[0]` trips `TOOL`, the others
/// trip `OTHER`; nobody else hears of it. Every decision is timed.
fn break_alone(all: &[Replica], gate: &mut Gate) {
    assert_eq!(timed_fail(&all[0], TOOL, 3, gate), 3);
    for r in &all[1..] {
        assert_eq!(timed_fail(r, OTHER, 3, gate), 3);
    }
    assert_eq!(state(&all[0], TOOL), BreakerState::Open);
    assert_eq!(state(&all[0], OTHER), BreakerState::Closed);
    for r in &all[1..] {
        assert_eq!(state(r, OTHER), BreakerState::Open);
        assert_eq!(state(r, TOOL), BreakerState::Closed);
        let t = Instant::now();
        assert!(r.registry.allow_request(TOOL), "not refused for the store");
        gate.samples.push(t.elapsed());
    }
}

/// After the store is back: every breaker opened alone reaches every replica. The time it took.
async fn wait_resynced(all: &[Replica], cooldown: Duration) -> Duration {
    let start = Instant::now();
    for (i, r) in all.iter().enumerate() {
        wait_for("the replica to reconnect", 10 * SEC, || {
            r.fleet.status().connected
        })
        .await;
        for tool in [TOOL, OTHER] {
            wait_for("the open breakers to be re-published", 10 * SEC, || {
                state(r, tool) == BreakerState::Open
            })
            .await;
            match r.registry.check(tool) {
                GateDecision::Refused { retry_after } => assert!(
                    retry_after <= cooldown + CLAIM_MARGIN,
                    "replica {i}, {tool}: {retry_after:?}"
                ),
                d => panic!("replica {i}, {tool}: {d:?}"),
            }
        }
    }
    start.elapsed()
}

pub(crate) async fn kill_9_of_the_store_then_an_empty_restart_every_replica_breaks_alone_then_resyncs(
) {
    let Some(mut server) = Server::start() else {
        return;
    };
    let url = server.url();
    let prefix = prefix("kill9");
    let cooldown = 30 * SEC;
    let all = replicas_with(3, config(3, cooldown, 10 * SEC), |_| {
        (fault_builder(&url, &prefix), ManualClock::new())
    })
    .await;
    let callers = Callers::start(&all.iter().collect::<Vec<_>>());
    let mut gate = Gate::default();

    server.kill9();
    let killed = Instant::now();
    let noticed = wait_disconnected(&all.iter().collect::<Vec<_>>()).await;
    break_alone(&all, &mut gate);
    for r in &all {
        assert!(r.fleet.sync_now().await.is_err(), "no store, no round");
    }
    // The sync lag counts from the last exchange, before the kill.
    for r in &all {
        let lag = r.fleet.status().sync_lag.expect("synced before");
        assert!(lag + 10 * MS >= killed.elapsed(), "{lag:?}");
    }

    server.restart(); // empty: the episodes are gone, the breakers are not
    let restarted = Instant::now();
    let resynced = wait_resynced(&all, cooldown).await;
    let total = restarted.elapsed();
    println!(
        "kill -9: noticed by all in {noticed:?}; after the empty restart, resynced in {total:?} \
         (last replica {resynced:?})"
    );
    for r in &all {
        let lag = r.fleet.status().sync_lag.expect("synced");
        assert!(lag < SEC, "{lag:?}");
    }
    // One episode per tool in the new store.
    let client = raw(&url).await;
    let open: Vec<String> = cmd(&client, "SMEMBERS", vec![&format!("{prefix}:v1:open")]).await;
    assert_eq!(open.len(), 2, "{open:?}");
    gate.add(callers.finish());
    gate.check("kill -9 and empty restart");
}

pub(crate) async fn a_paused_store_blocks_no_call_and_the_fleet_recovers_on_resume() {
    let Some(server) = Server::start() else {
        return;
    };
    let url = server.url();
    let prefix = prefix("sigstop");
    let cooldown = 30 * SEC;
    let all = replicas_with(3, config(3, cooldown, 10 * SEC), |_| {
        (fault_builder(&url, &prefix), ManualClock::new())
    })
    .await;
    let callers = Callers::start(&all.iter().collect::<Vec<_>>());
    let mut gate = Gate::default();

    server.pause(); // the socket stays open; nothing answers: only timeouts tell
    let noticed = wait_disconnected(&all.iter().collect::<Vec<_>>()).await;
    break_alone(&all, &mut gate);
    let t = Instant::now();
    assert!(all[1].fleet.sync_now().await.is_err());
    let round = t.elapsed();
    assert!(
        round < 2 * SEC,
        "a round against a paused store is bounded: {round:?}"
    );

    server.resume();
    let resumed = Instant::now();
    wait_resynced(&all, cooldown).await;
    println!(
        "SIGSTOP: noticed by all in {noticed:?}, a round gave up after {round:?}; resynced \
         {:?} after SIGCONT",
        resumed.elapsed()
    );
    gate.add(callers.finish());
    gate.check("SIGSTOP and SIGCONT");
}

pub(crate) async fn replicas_that_cannot_reach_the_store_break_alone_while_the_others_coordinate() {
    let Some(store) = store() else { return };
    // A black hole: a server that accepts connections and never answers.
    let Some(black_hole) = Server::start() else {
        return;
    };
    black_hole.pause();
    let url = store.url();
    let prefix = prefix("partition");
    let cfg = config(3, 30 * SEC, 10 * SEC);
    let mut all = replicas(&url, &prefix, 2, cfg.clone()).await;
    let refused_url = format!("redis://{USER}:{PASSWORD}@127.0.0.1:{}", free_port());
    for cut_off in [refused_url, black_hole.url()] {
        let r = Replica::with(
            fault_builder(&cut_off, &prefix),
            ManualClock::new(),
            cfg.clone(),
        );
        let waited = Instant::now();
        assert!(r.fleet.wait_connected(SEC).await.is_err());
        assert!(waited.elapsed() < 2 * SEC);
        assert!(!r.fleet.status().connected);
        all.push(r);
    }
    let callers = Callers::start(&all.iter().collect::<Vec<_>>());
    let mut gate = Gate::default();
    // The connected ones coordinate.
    assert_eq!(timed_fail(&all[0], TOOL, 3, &mut gate), 3);
    wait_for(
        "the trip to reach the other connected replica",
        5 * SEC,
        || state(&all[1], TOOL) == BreakerState::Open,
    )
    .await;
    // The cut-off ones do not hear it, and keep calling.
    for r in &all[2..] {
        assert_eq!(state(r, TOOL), BreakerState::Closed);
        assert!(r.registry.allow_request(TOOL));
    }
    // They break on their own; the others do not hear that either.
    for r in &all[2..] {
        assert_eq!(timed_fail(r, OTHER, 3, &mut gate), 3);
        assert_eq!(state(r, OTHER), BreakerState::Open);
        assert!(r.fleet.sync_now().await.is_err());
        let status = r.fleet.status();
        assert!(
            !status.connected && status.last_error.is_some(),
            "{status:?}"
        );
    }
    sync_all(&all[..2]).await;
    for r in &all[..2] {
        assert_eq!(state(r, OTHER), BreakerState::Closed);
        assert!(r.fleet.status().connected);
    }
    gate.add(callers.finish());
    gate.check("partition");
}

pub(crate) async fn fleet_scope_falls_back_to_the_local_window_while_the_store_is_down() {
    let Some(mut server) = Server::start() else {
        return;
    };
    let url = server.url();
    let prefix = prefix("fleet-scope-down");
    let policy = ToolPolicy {
        breaker: config(1000, 30 * SEC, 10 * SEC),
        trip: TripPolicy::FailureRate {
            ratio: 0.5,
            min_calls: 10,
            window: 60 * SEC,
        },
        ..ToolPolicy::default()
    };
    let all = replicas_with(2, policy.breaker.clone(), |_| {
        (
            fault_builder(&url, &prefix).rate_scope(RateScope::Fleet),
            ManualClock::new(),
        )
    })
    .await;
    for r in &all {
        r.registry
            .set_tool_policy(TOOL, policy.clone(), Apply::NewBreakers);
    }
    server.kill9();
    wait_disconnected(&all.iter().collect::<Vec<_>>()).await;
    // Alone, the replica's own window trips (it would not while the store answers).
    let mut gate = Gate::default();
    assert_eq!(timed_fail(&all[0], TOOL, 12, &mut gate), 10);
    assert_eq!(state(&all[0], TOOL), BreakerState::Open);
    assert_eq!(state(&all[1], TOOL), BreakerState::Closed);
    server.restart();
    wait_for("the trip to be re-published", 10 * SEC, || {
        state(&all[1], TOOL) == BreakerState::Open
    })
    .await;
    assert!(
        gate.samples.iter().all(|d| *d < GATE_PREEMPTED_MAX),
        "{:?}",
        gate.samples
    );
}

pub(crate) async fn an_hour_of_clock_skew_changes_nothing_only_durations_cross_hosts() {
    let Some(store) = store() else { return };
    let url = store.url();
    let prefix = prefix("skew");
    let cooldown = 10 * SEC;
    let hour = 3600 * SEC;
    // Replica 2 started an hour after the others (its clock reads an hour more).
    let all = replicas_with(3, config(3, cooldown, 10 * SEC), |i| {
        let clock = ManualClock::new();
        if i == 2 {
            clock.advance(hour);
        }
        (builder(&url, &prefix), clock)
    })
    .await;
    let lead = 400 * MS; // twice the command timeout: the probe claim's margin
    for round in 0..2 {
        // A trip on an unskewed replica reaches the skewed one with its remaining cooldown,
        // and the other way round.
        let tripper = if round == 0 { 0 } else { 2 };
        assert_eq!(all[tripper].fail(TOOL, 3), 3);
        for (i, r) in all.iter().enumerate() {
            wait_for("the trip to spread", 5 * SEC, || {
                state(r, TOOL) == BreakerState::Open
            })
            .await;
            match r.registry.check(TOOL) {
                GateDecision::Refused { retry_after } => assert!(
                    retry_after > cooldown - SEC && retry_after <= cooldown + 3 * lead,
                    "round {round}, replica {i}: {retry_after:?}"
                ),
                d => panic!("round {round}, replica {i}: {d:?}"),
            }
        }
        // Every task done with the trip (the tripper adopts the episode when the trip script's
        // reply arrives: a clock moved while it is in flight would count its cooldown from
        // the later instant).
        sync_all(&all).await;
        // Half the cooldown: still open everywhere, half left.
        for r in &all {
            r.clock.advance(cooldown / 2);
        }
        sync_all(&all).await;
        for (i, r) in all.iter().enumerate() {
            match r.registry.check(TOOL) {
                GateDecision::Refused { retry_after } => assert!(
                    retry_after > cooldown / 2 - SEC && retry_after <= cooldown / 2 + 3 * lead,
                    "round {round}, replica {i}: {retry_after:?}"
                ),
                d => panic!("round {round}, replica {i}: {d:?}"),
            }
        }
        // The cooldown over: one probe in the fleet, its success closes every replica.
        for r in &all {
            r.clock.advance(cooldown / 2 + SEC);
        }
        sync_all(&all).await;
        let mut probes = Vec::new();
        for _ in 0..2 {
            for (i, r) in all.iter().enumerate() {
                if let GateDecision::Probe(p) = r.registry.check(TOOL) {
                    probes.push((i, p));
                }
            }
        }
        assert_eq!(probes.len(), 1, "round {round}: {probes:?}");
        let (i, permit) = probes[0];
        probe_succeeds(&all, i, TOOL, permit).await;
        // Then the skewed replica's clock jumps another hour.
        all[2].clock.advance(hour);
    }
}

/// Issue 20, item 8: more local transitions than the task's queue holds (1,024) while the store
/// hangs: the ones past it are dropped and the task resyncs. A resync re-published the open
/// breakers only, so a probe's success in the dropped part never reached the fleet — the other
/// replicas stayed open until the lease ran out and they probed again. Now the resync settles
/// the probes of this replica's episodes from its breakers (and runs at once, not at the next
/// poll).
pub(crate) async fn a_probes_success_lost_in_an_overflowing_queue_still_closes_the_fleet() {
    let Some(server) = Server::start() else {
        return;
    };
    let url = server.url();
    let prefix = prefix("overflow");
    // No poll: only the resync the overflow asks for can tell the fleet.
    let all = replicas(&url, &prefix, 2, config(3, SEC, 30 * SEC)).await;
    let (a, b) = (&all[0], &all[1]);
    assert_eq!(a.fail(TOOL, 3), 3);
    wait_all(&all, TOOL, BreakerState::Open, "open everywhere", 5 * SEC).await;
    // Past the cooldown, A first: A claims (it has callers) and wins; then B, which loses.
    a.clock.advance(2 * SEC);
    a.fleet.sync_now().await.expect("round");
    b.clock.advance(2 * SEC);
    b.fleet.sync_now().await.expect("round");
    let GateDecision::Probe(permit) = a.registry.check(TOOL) else {
        panic!("A probes: {:?}", a.fleet.status());
    };
    a.fleet.sync_now().await.expect("round"); // its grant reaches the store
    server.pause();
    // More transitions than the queue holds, one trip each (threshold 1), while the task
    // waits on a store that does not answer…
    let churn = ToolPolicy {
        breaker: config(1, SEC, SEC),
        ..ToolPolicy::default()
    };
    for i in 0..1100 {
        let tool = format!("churn-{i}");
        a.registry
            .set_tool_policy(&tool, churn.clone(), Apply::NewBreakers);
        a.registry.record_failure(&tool, MS);
    }
    // …and then the probe succeeds: its transition is one of those dropped.
    a.registry
        .record_with_permit(TOOL, permit, CallOutcome::Success, MS);
    assert_eq!(a.registry.breaker_state(TOOL), BreakerState::Closed);
    server.resume();
    let took = wait_for("the recovery to reach B", 20 * SEC, || {
        b.registry.breaker_state(TOOL) == BreakerState::Closed
    })
    .await;
    println!("a probe's success lost in the queue reached the fleet {took:?} after SIGCONT");
    let s = b.registry.snapshot(TOOL).expect("tracked");
    assert_eq!(
        (s.success_count, s.failure_count),
        (0, 0),
        "B closed by A's probe, not one of its own"
    );
}
