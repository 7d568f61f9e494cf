//! Issue 20, item 7: the fleet-wide failure streak. Failures are reported as they happen (no
//! `sync_now` between them here: the replicas' tasks publish them by themselves); the fleet
//! opens once the failures seen anywhere reach the threshold with no success in between;
//! successes count while a streak is open; a replica's own streak still trips it alone; with
//! different thresholds the strictest decides; with a quorum the streak is not used.

use std::time::Duration;

use tool_health::{BreakerState, ManualClock};

use crate::support::*;

const TOOL: &str = "search";

/// The fleet's streak of `TOOL` in the store: failures, or `None` when there is none.
async fn stored_streak(client: &fred::prelude::Client, prefix: &str) -> Option<u64> {
    let n: Option<u64> = cmd(client, "HGET", vec![&key(prefix, "k", TOOL), "n"]).await;
    n
}

/// Waits (bounded) until the store's streak of `TOOL` reads `n` (`None`: no streak).
async fn until_streak(client: &fred::prelude::Client, prefix: &str, n: Option<u64>) {
    let start = std::time::Instant::now();
    loop {
        let now = stored_streak(client, prefix).await;
        if now == n {
            return;
        }
        assert!(
            start.elapsed() < 5 * SEC,
            "the fleet's streak reads {now:?}, not {n:?}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn succeed(r: &Replica) {
    assert!(r.registry.allow_request(TOOL));
    r.registry.record_success(TOOL, MS);
}

fn states(all: &[Replica]) -> Vec<BreakerState> {
    all.iter().map(|r| r.registry.breaker_state(TOOL)).collect()
}

pub(crate) async fn failures_spread_over_replicas_trip_the_fleet_at_the_threshold() {
    let Some(store) = store() else { return };
    let url = store.url();
    let prefix = prefix("streak-trip");
    let client = raw(&url).await;
    let all = replicas(&url, &prefix, 3, config(3, 30 * SEC, 10 * SEC)).await;
    for r in &all {
        succeed(r);
    }
    // One failure on each replica: none of them reaches its own threshold (3)…
    for (i, r) in all.iter().enumerate() {
        assert_eq!(r.fail(TOOL, 1), 1, "replica {i} calls the tool");
        if i < 2 {
            until_streak(&client, &prefix, Some(i as u64 + 1)).await;
            assert_eq!(states(&all), [BreakerState::Closed; 3]);
        }
    }
    // …the fleet's streak does: every replica opens, each after one failure of its own.
    wait_all(&all, TOOL, BreakerState::Open, "the fleet to open", 5 * SEC).await;
    for (i, r) in all.iter().enumerate() {
        let s = r.registry.snapshot(TOOL).expect("tracked");
        assert_eq!(
            (s.failure_count, s.consecutive_failures),
            (1, 1),
            "replica {i}"
        );
        assert!(!r.registry.allow_request(TOOL), "replica {i} refuses");
    }
    until_streak(&client, &prefix, None).await;
}

pub(crate) async fn a_success_anywhere_ends_the_fleets_streak() {
    let Some(store) = store() else { return };
    let url = store.url();
    let prefix = prefix("streak-reset");
    let client = raw(&url).await;
    let all = replicas(&url, &prefix, 3, config(3, 30 * SEC, 10 * SEC)).await;
    for r in &all {
        succeed(r);
    }
    for round in 0..3 {
        // Replicas 0 and 1 fail once each (each after a success of its own, made while no
        // streak was open: no replica's own streak grows past one)…
        succeed(&all[0]);
        succeed(&all[1]);
        all[0].fail(TOOL, 1);
        until_streak(&client, &prefix, Some(1)).await;
        all[1].fail(TOOL, 1);
        until_streak(&client, &prefix, Some(2)).await;
        // Replica 2 hears of the streak (a round reads it too, should the event be slow), and
        // its success ends it.
        all[2].fleet.sync_now().await.expect("round");
        succeed(&all[2]);
        until_streak(&client, &prefix, None).await;
        assert_eq!(states(&all), [BreakerState::Closed; 3], "round {round}");
        for r in &all {
            r.fleet.sync_now().await.expect("round"); // each knows the streak is over
        }
    }
    // Six failures in all, never three without a success between: the tool stays closed.
    succeed(&all[0]);
    all[0].fail(TOOL, 1);
    until_streak(&client, &prefix, Some(1)).await;
    assert_eq!(states(&all), [BreakerState::Closed; 3]);
}

pub(crate) async fn a_replicas_own_streak_still_trips_it_alone() {
    let Some(store) = store() else { return };
    let url = store.url();
    let prefix = prefix("streak-own");
    let client = raw(&url).await;
    let all = replicas(&url, &prefix, 3, config(3, 30 * SEC, 10 * SEC)).await;
    for r in &all {
        succeed(r);
    }
    // Replica 0's path to the tool is broken; the others' calls succeed in between, ending the
    // fleet's streak each time — replica 0 still trips on its own third failure.
    for i in 0..3 {
        assert_eq!(all[0].fail(TOOL, 1), 1);
        until_streak(&client, &prefix, if i < 2 { Some(1) } else { None }).await;
        if i < 2 {
            let other = &all[1 + i];
            other.fleet.sync_now().await.expect("round");
            succeed(other);
            until_streak(&client, &prefix, None).await;
        }
    }
    assert_eq!(all[0].registry.breaker_state(TOOL), BreakerState::Open);
    assert_eq!(
        all[0].registry.snapshot(TOOL).unwrap().consecutive_failures,
        3
    );
}

pub(crate) async fn the_strictest_threshold_of_the_fleet_decides() {
    let Some(store) = store() else { return };
    let url = store.url();
    let prefix = prefix("streak-strict");
    let client = raw(&url).await;
    trace_from_env();
    // Thresholds 5, 5 and 2: two failures on the lenient replicas open the fleet, once the
    // strict one knows of the streak.
    let all: Vec<Replica> = [5, 5, 2]
        .into_iter()
        .map(|threshold| {
            Replica::with(
                builder(&url, &prefix),
                ManualClock::new(),
                config(threshold, 30 * SEC, 10 * SEC),
            )
        })
        .collect();
    for r in &all {
        r.fleet.wait_connected(10 * SEC).await.expect("connected");
        r.fleet.sync_now().await.expect("a first round");
    }
    for r in &all {
        succeed(r);
    }
    all[0].fail(TOOL, 1);
    all[1].fail(TOOL, 1);
    // Open on every replica (the strict one reported its threshold on hearing of the streak;
    // a round makes sure it heard).
    all[2].fleet.sync_now().await.expect("round");
    wait_all(&all, TOOL, BreakerState::Open, "the fleet to open", 5 * SEC).await;
    assert_eq!(
        all[2].registry.snapshot(TOOL).unwrap().failure_count,
        0,
        "the strict replica never called the failing tool"
    );
    until_streak(&client, &prefix, None).await;
}

pub(crate) async fn with_a_quorum_the_fleet_streak_is_not_used() {
    let Some(store) = store() else { return };
    let url = store.url();
    let prefix = prefix("streak-quorum");
    let client = raw(&url).await;
    let all = replicas_with(3, config(3, 30 * SEC, 10 * SEC), |_| {
        (builder(&url, &prefix).quorum(2), ManualClock::new())
    })
    .await;
    for r in &all {
        succeed(r);
        r.fail(TOOL, 1);
    }
    for r in &all {
        r.fleet.sync_now().await.expect("round");
    }
    assert_eq!(states(&all), [BreakerState::Closed; 3]);
    assert_eq!(stored_streak(&client, &prefix).await, None);
}

/// Issue 32: a replica that missed a trip's event (an episode the store holds whose message
/// never reached it) learns of it at its first failure — its streak report answers the open
/// episode — not after its own threshold of failures or at the next poll (an hour away here).
pub(crate) async fn a_replica_that_missed_a_trip_joins_it_at_its_first_failure() {
    let Some(store) = store() else { return };
    let url = store.url();
    let prefix = prefix("missed-trip");
    let all = replicas(&url, &prefix, 2, config(3, 30 * SEC, 10 * SEC)).await;
    // The episode as the trip script writes it — state, the set of open tools, the change
    // counter — without its event.
    let client = raw(&url).await;
    let hex: String = TOOL.bytes().map(|b| format!("{b:02x}")).collect();
    let script = "local t = redis.call('TIME') \
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) \
        redis.call('HSET', KEYS[1], 'v', '1', 'ep', now, 'st', 'o', 'ready', now + 30000, \
          'cd', '30000', 'by', '00000000000000ff') \
        redis.call('SADD', KEYS[2], ARGV[1]) \
        redis.call('INCR', KEYS[3]) return 1";
    let (state, open, seq) = (
        key(&prefix, "t", TOOL),
        format!("{prefix}:v1:open"),
        format!("{prefix}:v1:seq"),
    );
    let _: i64 = cmd(
        &client,
        "EVAL",
        vec![script, "3", &state, &open, &seq, &hex],
    )
    .await;
    for r in &all {
        assert_eq!(r.registry.breaker_state(TOOL), BreakerState::Closed);
    }
    // One failed call each: the report answers the open episode, the breaker opens.
    for r in &all {
        assert_eq!(r.fail(TOOL, 1), 1);
    }
    wait_all(
        &all,
        TOOL,
        BreakerState::Open,
        "the missed episode to be joined",
        5 * SEC,
    )
    .await;
    for r in &all {
        assert_eq!(r.fail(TOOL, 5), 0, "no call after the first failure");
        assert_eq!(r.registry.snapshot(TOOL).expect("tracked").failure_count, 1);
        // The episode's remaining cooldown (30 s, less the instants since), not a fresh one
        // of its own.
        match r.registry.check(TOOL) {
            tool_health::GateDecision::Refused { retry_after } => assert!(
                retry_after <= 30 * SEC + CLAIM_MARGIN && retry_after > 20 * SEC,
                "{retry_after:?}"
            ),
            d => panic!("{d:?}"),
        }
    }
}
