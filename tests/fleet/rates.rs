//! Fleet-wide failure rates: a fleet trip while every replica is below its own `min_calls`,
//! `RateScope::Local` / `Fleet` / `Either`, counts never sent twice, and the quorum.

use std::sync::Arc;
use std::time::Duration;

use tool_health::fleet::RateScope;
use tool_health::{Apply, BreakerState, ManualClock, ToolHealthRegistry, ToolPolicy, TripPolicy};

use crate::support::*;

const TOOL: &str = "vector_db";
const MIN_CALLS: u64 = 10;
const WINDOW: Duration = Duration::from_secs(60);

/// Trips at a failure ratio of 50 % over at least `MIN_CALLS` calls in a minute.
fn rate_policy() -> ToolPolicy {
    ToolPolicy {
        breaker: config(1000, 30 * SEC, 10 * SEC),
        trip: TripPolicy::FailureRate {
            ratio: 0.5,
            min_calls: MIN_CALLS,
            window: WINDOW,
        },
        ..ToolPolicy::default()
    }
}

/// `n` replicas with `scope`, the tool under the failure-rate policy on each.
async fn rate_replicas(url: &str, prefix: &str, n: usize, scope: RateScope) -> Vec<Replica> {
    let all = replicas_with(n, config(1000, 30 * SEC, 10 * SEC), |_| {
        (builder(url, prefix).rate_scope(scope), ManualClock::new())
    })
    .await;
    for r in &all {
        r.registry
            .set_tool_policy(TOOL, rate_policy(), Apply::NewBreakers);
    }
    all
}

/// `s` successes and `f` failures through the gate (all must be let through).
fn calls(r: &Replica, s: u64, f: u64) {
    for _ in 0..s {
        assert!(r.registry.allow_request(TOOL));
        r.registry.record_success(TOOL, MS);
    }
    for _ in 0..f {
        assert!(r.registry.allow_request(TOOL));
        r.registry.record_failure(TOOL, MS);
    }
}

fn state(r: &Replica) -> BreakerState {
    r.registry.breaker_state(TOOL)
}

/// The fleet's window for the tool as the store holds it: (successes, failures) summed over
/// every bucket (fields `s<bucket>`, `f<bucket>` of one hash per window width).
async fn stored_counts(url: &str, prefix: &str) -> (u64, u64) {
    let client = raw(url).await;
    let pattern = format!("{}:*", key(prefix, "r", TOOL));
    let keys: Vec<String> = cmd(&client, "KEYS", vec![&pattern]).await;
    let (mut s, mut f) = (0, 0);
    for k in keys {
        let fields: Vec<String> = cmd(&client, "HGETALL", vec![&k]).await;
        for pair in fields.chunks(2) {
            let n: u64 = pair[1].parse().expect("a count");
            match pair[0].as_bytes()[0] {
                b's' => s += n,
                b'f' => f += n,
                _ => panic!("not a count field: {}", pair[0]),
            }
        }
    }
    (s, f)
}

pub(crate) async fn the_fleet_trips_on_its_failure_rate_while_every_replica_is_below_min_calls() {
    let Some(store) = store() else { return };
    let url = store.url();
    let prefix = prefix("rate-fleet");
    let all = rate_replicas(&url, &prefix, 3, RateScope::Either).await;
    // 4 calls each, 3 of them failures: every replica is below `min_calls` (10) on its own;
    // the fleet saw 12 calls, 9 failed.
    for r in &all {
        calls(r, 1, 3);
        assert_eq!(state(r), BreakerState::Closed, "locally below min_calls");
    }
    // Each round adds this replica's new counts; the round that brings the fleet's window to
    // 12 calls trips (the third), and the trip spreads.
    for (i, r) in all.iter().enumerate() {
        r.fleet.sync_now().await.expect("round");
        if i < 2 {
            assert_eq!(
                state(r),
                BreakerState::Closed,
                "replica {i}: 4·(i+1) < 10 calls"
            );
        }
    }
    for (i, r) in all.iter().enumerate() {
        wait_for("the fleet's rate trip to spread", 5 * SEC, || {
            state(r) == BreakerState::Open
        })
        .await;
        assert!(!r.registry.allow_request(TOOL), "replica {i}");
    }
    assert_eq!(stored_counts(&url, &prefix).await, (3, 9));
}

pub(crate) async fn fleet_scope_trips_on_the_fleet_window_not_the_local_one() {
    let Some(store) = store() else { return };
    let url = store.url();
    let prefix = prefix("rate-fleet-only");
    let all = rate_replicas(&url, &prefix, 3, RateScope::Fleet).await;
    // Enough on one replica to trip its own window (12 calls, all failed): not with
    // `Fleet`, as long as the store answers.
    calls(&all[0], 0, 12);
    assert_eq!(
        state(&all[0]),
        BreakerState::Closed,
        "the local window does not trip"
    );
    // The fleet's window does, at this replica's next round, and everyone opens.
    all[0].fleet.sync_now().await.expect("round");
    for r in &all {
        wait_for("the fleet's rate trip to spread", 5 * SEC, || {
            state(r) == BreakerState::Open
        })
        .await;
    }
    assert_eq!(stored_counts(&url, &prefix).await, (0, 12));
}

pub(crate) async fn local_scope_never_trips_on_fleet_counts_and_sends_none() {
    let Some(store) = store() else { return };
    let url = store.url();
    let prefix = prefix("rate-local");
    let all = rate_replicas(&url, &prefix, 3, RateScope::Local).await;
    // 27 failed calls in the fleet, 9 per replica: the fleet's rate would trip, no replica's.
    for _ in 0..3 {
        for r in &all {
            calls(r, 0, 3);
        }
        sync_all(&all).await;
    }
    for (i, r) in all.iter().enumerate() {
        assert_eq!(state(r), BreakerState::Closed, "replica {i}");
    }
    assert_eq!(
        stored_counts(&url, &prefix).await,
        (0, 0),
        "no counts shared"
    );
    // Each replica's own window still trips, and that trip spreads like any other.
    calls(&all[1], 0, 1);
    assert_eq!(state(&all[1]), BreakerState::Open, "10 calls, all failed");
    for r in &all {
        wait_for("the local trip to spread", 5 * SEC, || {
            state(r) == BreakerState::Open
        })
        .await;
    }
}

pub(crate) async fn either_scope_trips_on_the_local_window_at_once() {
    let Some(store) = store() else { return };
    let url = store.url();
    let prefix = prefix("rate-either");
    let all = rate_replicas(&url, &prefix, 3, RateScope::Either).await;
    // The local window alone: tripped on the call, no round needed; then it spreads.
    calls(&all[2], 2, 8);
    assert_eq!(state(&all[2]), BreakerState::Open);
    for r in &all {
        wait_for("the local trip to spread", 5 * SEC, || {
            state(r) == BreakerState::Open
        })
        .await;
    }
}

pub(crate) async fn counts_are_never_sent_twice() {
    let Some(store) = store() else { return };
    let url = store.url();
    let prefix = prefix("rate-once");
    let all = rate_replicas(&url, &prefix, 3, RateScope::Either).await;
    // Mostly successes: the ratio never trips, the counts just add up.
    let mut expected = (0, 0);
    for round in 0..5u64 {
        for (i, r) in all.iter().enumerate() {
            let (s, f) = (3 + i as u64 + round, u64::from(round % 2 == 0));
            calls(r, s, f);
            expected.0 += s;
            expected.1 += f;
        }
        // Several rounds per batch of calls: the later ones have nothing new to send.
        for _ in 0..3 {
            sync_all(&all).await;
        }
        assert_eq!(
            stored_counts(&url, &prefix).await,
            expected,
            "after round {round}"
        );
    }
    for r in &all {
        assert_eq!(state(r), BreakerState::Closed);
    }
}

pub(crate) async fn with_a_quorum_the_tool_opens_fleet_wide_only_after_k_replicas_tripped() {
    let Some(store) = store() else { return };
    let url = store.url();
    let prefix = prefix("quorum");
    let all = replicas_with(4, config(3, 30 * SEC, 10 * SEC), |_| {
        (builder(&url, &prefix).quorum(2), ManualClock::new())
    })
    .await;
    // The first trip opens its own breaker only.
    assert_eq!(all[0].fail(TOOL, 3), 3);
    assert_eq!(state(&all[0]), BreakerState::Open);
    sync_all(&all).await;
    sync_all(&all).await;
    for (i, r) in all.iter().enumerate().skip(1) {
        assert_eq!(
            state(r),
            BreakerState::Closed,
            "replica {i}: one trip of two"
        );
        assert!(r.registry.allow_request(TOOL));
    }
    let client = raw(&url).await;
    let open: Vec<String> = cmd(&client, "SMEMBERS", vec![&format!("{prefix}:v1:open")]).await;
    assert!(open.is_empty(), "no fleet episode yet: {open:?}");
    // The second replica's trip makes the quorum: the tool opens everywhere.
    assert_eq!(all[1].fail(TOOL, 3), 3);
    for r in &all {
        wait_for("the quorum's trip to spread", 5 * SEC, || {
            state(r) == BreakerState::Open
        })
        .await;
    }
    let open: Vec<String> = cmd(&client, "SMEMBERS", vec![&format!("{prefix}:v1:open")]).await;
    assert_eq!(open.len(), 1);
}

pub(crate) async fn counts_made_before_a_replica_joined_are_not_the_fleets() {
    let Some(store) = store() else { return };
    let url = store.url();
    let prefix = prefix("rate-before");
    // A registry that ran alone for a while: 8 failed calls, below its own `min_calls`.
    let clock = ManualClock::new();
    let registry = Arc::new(
        ToolHealthRegistry::builder()
            .clock(clock.clone())
            .config(config(1000, 30 * SEC, 10 * SEC))
            .log_transitions(false)
            .build(),
    );
    registry.set_tool_policy(TOOL, rate_policy(), Apply::NewBreakers);
    for _ in 0..8 {
        assert!(registry.allow_request(TOOL));
        registry.record_failure(TOOL, MS);
    }
    let fleet = builder(&url, &prefix).start(&registry).expect("starts");
    fleet.wait_connected(10 * SEC).await.expect("connected");
    let joined = Replica {
        registry,
        clock,
        fleet,
    };
    let other = rate_replicas(&url, &prefix, 1, RateScope::Either).await;
    for _ in 0..3 {
        joined.fleet.sync_now().await.expect("round");
    }
    assert_eq!(stored_counts(&url, &prefix).await, (0, 0));
    // 4 failures elsewhere: with the old 8 the fleet would have 12; it has 4.
    calls(&other[0], 0, 4);
    sync_all(&other).await;
    joined.fleet.sync_now().await.expect("round");
    assert_eq!(stored_counts(&url, &prefix).await, (0, 4));
    assert_eq!(state(&joined), BreakerState::Closed);
    assert_eq!(state(&other[0]), BreakerState::Closed);
    // New calls of the joined replica count: 4 + 6 = 10 failures, the fleet trips (its own
    // window has forgotten the 8 old ones: 6 calls, below `min_calls`).
    joined.clock.advance(WINDOW + 10 * SEC);
    calls(&joined, 0, 6);
    joined.fleet.sync_now().await.expect("round");
    assert_eq!(stored_counts(&url, &prefix).await, (0, 10));
    for r in [&joined, &other[0]] {
        wait_for("the fleet's rate trip", 5 * SEC, || {
            state(r) == BreakerState::Open
        })
        .await;
    }
}

pub(crate) async fn a_tool_turned_to_a_failure_rate_sends_only_calls_made_since() {
    let Some(store) = store() else { return };
    let url = store.url();
    let prefix = prefix("rate-switch");
    let all = replicas(&url, &prefix, 2, config(1000, 30 * SEC, 10 * SEC)).await;
    // Counted under consecutive failures (threshold 1000): nothing to share.
    for _ in 0..20 {
        assert!(all[0].registry.allow_request(TOOL));
        all[0].registry.record_failure(TOOL, MS);
    }
    sync_all(&all).await;
    assert_eq!(stored_counts(&url, &prefix).await, (0, 0));
    for r in &all {
        r.registry.set_tool_policy(TOOL, rate_policy(), Apply::Now);
    }
    calls(&all[0], 3, 1);
    sync_all(&all).await;
    assert_eq!(
        stored_counts(&url, &prefix).await,
        (3, 1),
        "the 20 older failures stay out"
    );
    assert_eq!(state(&all[0]), BreakerState::Closed);
    assert_eq!(state(&all[1]), BreakerState::Closed);
}

/// Issue 20, item 8: a tool evicted (idle) and tracked again counts from zero; its new entry's
/// counts used to be taken as differences from the old entry's last ones — once they had
/// grown past those, the part below them was never sent.
pub(crate) async fn a_tool_evicted_and_tracked_again_sends_every_count_of_its_new_entry() {
    let Some(store) = store() else { return };
    let url = store.url();
    let prefix = prefix("rate-evicted");
    let clock = ManualClock::new();
    clock.advance(100 * SEC); // idle times count from a sweep's start, not from time zero
    let registry = Arc::new(
        ToolHealthRegistry::builder()
            .clock(clock.clone())
            .config(config(1000, 30 * SEC, 10 * SEC))
            .evictable()
            .log_transitions(false)
            .build(),
    );
    registry.set_tool_policy(TOOL, rate_policy(), Apply::NewBreakers);
    let fleet = builder(&url, &prefix)
        .rate_scope(RateScope::Either)
        .start(&registry)
        .expect("starts");
    fleet.wait_connected(10 * SEC).await.expect("connected");
    let call = |s: u64, f: u64| {
        // Failures first: the tool ends on a success, fresh enough to evict.
        for _ in 0..f {
            assert!(registry.allow_request(TOOL));
            registry.record_failure(TOOL, MS);
        }
        for _ in 0..s {
            assert!(registry.allow_request(TOOL));
            registry.record_success(TOOL, MS);
        }
    };
    call(5, 3);
    fleet.sync_now().await.expect("round");
    assert_eq!(stored_counts(&url, &prefix).await, (5, 3));
    assert_eq!(
        registry.evict_idle(30 * SEC),
        0,
        "a sweep starts the idle clock"
    );
    clock.advance(60 * SEC);
    assert_eq!(registry.evict_idle(30 * SEC), 1, "the idle tool is evicted");
    // Tracked again, and counting past what the old entry had sent (7 > 5, 4 > 3) before the
    // next round: every one of its counts is new.
    call(7, 4);
    assert_eq!(registry.breaker_state(TOOL), BreakerState::Closed);
    fleet.sync_now().await.expect("round");
    assert_eq!(
        stored_counts(&url, &prefix).await,
        (12, 7),
        "the new entry's counts below the old entry's last ones were never sent"
    );
    fleet.shutdown().await;
}
