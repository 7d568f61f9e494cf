//! Operator controls fleet-wide: force open (with and without a duration), force closed,
//! release, shadow mode, reset; a replica started later picks them up from the store.

use std::time::Duration;

use tool_health::{BreakerState, GateDecision, ManualClock, ToolControl};

use crate::support::*;

const TOOL: &str = "payments";

fn refused(r: &Replica, tool: &str) -> bool {
    matches!(r.registry.check(tool), GateDecision::Refused { .. })
}

/// Trips `tool` on `all[by]` and waits until it is open everywhere.
async fn trip_everywhere(all: &[Replica], by: usize, tool: &str) {
    assert_eq!(all[by].fail(tool, 3), 3);
    wait_all(all, tool, BreakerState::Open, "the trip to spread", 5 * SEC).await;
}

pub(crate) async fn force_open_reaches_every_replica_and_a_release_elsewhere_ends_it() {
    let Some(store) = store() else { return };
    let prefix = prefix("force-open");
    let all = replicas(&store.url(), &prefix, 3, config(3, 30 * SEC, 10 * SEC)).await;
    for r in &all {
        assert!(r.registry.allow_request(TOOL));
    }
    all[1].fleet.force_open(TOOL, None).await.expect("stored");
    // Here at once, elsewhere within a bounded delay.
    assert_eq!(
        all[1].registry.control(TOOL),
        ToolControl::ForcedOpen { until: None }
    );
    for (i, r) in all.iter().enumerate() {
        wait_for("the force-open to spread", 5 * SEC, || {
            r.registry.control(TOOL) == ToolControl::ForcedOpen { until: None }
        })
        .await;
        match r.registry.check(TOOL) {
            GateDecision::Refused { retry_after } => {
                assert_eq!(retry_after, Duration::MAX, "replica {i}: until released")
            }
            d => panic!("replica {i} let a call through a forced-open tool: {d:?}"),
        }
        // The breaker itself did not trip: only the control refuses.
        let own = r
            .registry
            .coordination()
            .coordination_view(TOOL)
            .expect("tracked")
            .state;
        assert_eq!(own, BreakerState::Closed, "replica {i}");
    }
    // Time does not end it.
    for r in &all {
        r.clock.advance(3600 * SEC);
    }
    sync_all(&all).await;
    assert!(all.iter().all(|r| refused(r, TOOL)));
    // Released by another replica than the one that set it: released everywhere.
    all[2].fleet.release_control(TOOL).await.expect("stored");
    for (i, r) in all.iter().enumerate() {
        wait_for("the release to spread", 5 * SEC, || {
            r.registry.control(TOOL) == ToolControl::Normal
        })
        .await;
        assert!(r.registry.allow_request(TOOL), "replica {i}");
    }
    // A round reads the store: nothing brings the control back.
    sync_all(&all).await;
    assert!(all.iter().all(|r| r.registry.allow_request(TOOL)));
}

pub(crate) async fn force_open_for_a_duration_reaches_every_replica_with_its_remaining_time() {
    let Some(store) = store() else { return };
    let prefix = prefix("force-open-for");
    let all = replicas(&store.url(), &prefix, 3, config(3, 30 * SEC, 10 * SEC)).await;
    // Clocks far apart: only the remaining duration crosses hosts.
    all[1].clock.advance(5000 * SEC);
    all[2].clock.advance(77 * SEC);
    let d = 20 * SEC;
    all[0]
        .fleet
        .force_open(TOOL, Some(d))
        .await
        .expect("stored");
    for (i, r) in all.iter().enumerate() {
        wait_for("the force-open to spread", 5 * SEC, || {
            matches!(
                r.registry.control(TOOL),
                ToolControl::ForcedOpen { until: Some(_) }
            )
        })
        .await;
        let ToolControl::ForcedOpen { until: Some(until) } = r.registry.control(TOOL) else {
            unreachable!()
        };
        let left = until.saturating_sub(r.registry.now());
        assert!(
            left <= d && left > d - SEC,
            "replica {i}: {left:?} left of {d:?}"
        );
        match r.registry.check(TOOL) {
            GateDecision::Refused { retry_after } => assert!(
                retry_after <= d && retry_after > d - SEC,
                "replica {i}: {retry_after:?}"
            ),
            d => panic!("replica {i} let a call through: {d:?}"),
        }
    }
    // Just before the end: still refused; after it: allowed, on each replica's own clock.
    for r in &all {
        r.clock.advance(d - 2 * SEC);
    }
    assert!(all.iter().all(|r| refused(r, TOOL)));
    for r in &all {
        r.clock.advance(2 * SEC + MS);
    }
    for (i, r) in all.iter().enumerate() {
        assert!(r.registry.allow_request(TOOL), "replica {i}: lapsed");
    }
}

pub(crate) async fn force_closed_reaches_every_replica_and_lets_calls_through_an_open_breaker() {
    let Some(store) = store() else { return };
    let prefix = prefix("force-closed");
    let all = replicas(&store.url(), &prefix, 3, config(3, 30 * SEC, 10 * SEC)).await;
    trip_everywhere(&all, 0, TOOL).await;
    assert!(all.iter().all(|r| refused(r, TOOL)));
    all[2].fleet.force_closed(TOOL).await.expect("stored");
    for (i, r) in all.iter().enumerate() {
        wait_for("the force-closed to spread", 5 * SEC, || {
            r.registry.control(TOOL) == ToolControl::ForcedClosed
        })
        .await;
        for _ in 0..5 {
            assert!(r.registry.allow_request(TOOL), "replica {i}: forced closed");
        }
        // The breaker's own machine still says open: only its refusals are not enforced.
        assert_eq!(
            r.registry.breaker_state(TOOL),
            BreakerState::Open,
            "replica {i}"
        );
    }
    all[0].fleet.release_control(TOOL).await.expect("stored");
    for (i, r) in all.iter().enumerate() {
        wait_for("the release to spread", 5 * SEC, || {
            r.registry.control(TOOL) == ToolControl::Normal
        })
        .await;
        assert!(
            refused(r, TOOL),
            "replica {i}: the open breaker refuses again"
        );
    }
}

pub(crate) async fn shadow_mode_reaches_every_replica() {
    let Some(store) = store() else { return };
    let prefix = prefix("shadow");
    let all = replicas(&store.url(), &prefix, 3, config(3, 30 * SEC, 10 * SEC)).await;
    trip_everywhere(&all, 1, TOOL).await;
    all[0].fleet.set_shadow(TOOL, true).await.expect("stored");
    for (i, r) in all.iter().enumerate() {
        wait_for("shadow mode to spread", 5 * SEC, || {
            r.registry.is_shadow(TOOL)
        })
        .await;
        assert!(
            r.registry.allow_request(TOOL),
            "replica {i}: refusals not enforced"
        );
        assert_eq!(
            r.registry.breaker_state(TOOL),
            BreakerState::Open,
            "replica {i}"
        );
        assert_eq!(r.registry.control(TOOL), ToolControl::Normal, "replica {i}");
    }
    all[2].fleet.set_shadow(TOOL, false).await.expect("stored");
    for (i, r) in all.iter().enumerate() {
        wait_for("shadow mode off to spread", 5 * SEC, || {
            !r.registry.is_shadow(TOOL)
        })
        .await;
        assert!(refused(r, TOOL), "replica {i}: enforced again");
    }
}

pub(crate) async fn reset_closes_an_open_episode_everywhere() {
    let Some(store) = store() else { return };
    let url = store.url();
    let prefix = prefix("reset");
    let all = replicas(&url, &prefix, 3, config(3, 30 * SEC, 10 * SEC)).await;
    trip_everywhere(&all, 0, TOOL).await;
    let client = raw(&url).await;
    let state_key = key(&prefix, "t", TOOL);
    let st: String = cmd(&client, "HGET", vec![&state_key, "st"]).await;
    assert_eq!(st, "o");
    // Reset from a replica that did not trip.
    all[1].fleet.reset(TOOL).await.expect("stored");
    for (i, r) in all.iter().enumerate() {
        wait_for("the reset to spread", 5 * SEC, || {
            r.registry.breaker_state(TOOL) == BreakerState::Closed
        })
        .await;
        assert!(r.registry.allow_request(TOOL), "replica {i}");
    }
    let st: String = cmd(&client, "HGET", vec![&state_key, "st"]).await;
    assert_eq!(st, "c", "the store's episode is closed too");
    // Rounds read the store: nothing re-opens it.
    sync_all(&all).await;
    assert!(all
        .iter()
        .all(|r| r.registry.breaker_state(TOOL) == BreakerState::Closed));
    // The next trip is a new episode and spreads as before.
    trip_everywhere(&all, 2, TOOL).await;
    let st: String = cmd(&client, "HGET", vec![&state_key, "st"]).await;
    assert_eq!(st, "o");
}

pub(crate) async fn a_replica_started_later_picks_up_controls_and_open_episodes_from_the_store() {
    let Some(store) = store() else { return };
    let url = store.url();
    let prefix = prefix("late");
    let cfg = config(3, 30 * SEC, 10 * SEC);
    let all = replicas(&url, &prefix, 2, cfg.clone()).await;
    all[0]
        .fleet
        .force_open("isolated", None)
        .await
        .expect("stored");
    all[1]
        .fleet
        .force_open("isolated-for", Some(600 * SEC))
        .await
        .expect("stored");
    all[0]
        .fleet
        .force_closed("forced-closed")
        .await
        .expect("stored");
    all[1]
        .fleet
        .set_shadow("shadowed", true)
        .await
        .expect("stored");
    trip_everywhere(&all, 0, "tripped").await;
    // A replica that heard none of it: no message reaches it, only the poll of the store
    // (its first round runs at start; no sync_now here).
    let late = Replica::with(
        builder(&url, &prefix).poll_interval(Duration::from_millis(100)),
        ManualClock::new(),
        cfg,
    );
    let r = &late.registry;
    wait_for("the controls and episodes to be read", 5 * SEC, || {
        r.control("isolated") == ToolControl::ForcedOpen { until: None }
            && matches!(
                r.control("isolated-for"),
                ToolControl::ForcedOpen { until: Some(_) }
            )
            && r.control("forced-closed") == ToolControl::ForcedClosed
            && r.is_shadow("shadowed")
            && r.breaker_state("tripped") == BreakerState::Open
    })
    .await;
    assert!(late.fleet.status().connected);
    assert!(!r.allow_request("isolated"));
    assert!(!r.allow_request("isolated-for"));
    assert!(!r.allow_request("tripped"));
    assert!(r.allow_request("forced-closed"));
    assert!(r.allow_request("shadowed"));
    let ToolControl::ForcedOpen { until: Some(until) } = r.control("isolated-for") else {
        unreachable!()
    };
    let left = until.saturating_sub(r.now());
    assert!(left <= 600 * SEC && left > 590 * SEC, "{left:?}");
    match r.check("tripped") {
        GateDecision::Refused { retry_after } => assert!(
            retry_after <= 30 * SEC + CLAIM_MARGIN && retry_after > 20 * SEC,
            "the episode's remaining cooldown: {retry_after:?}"
        ),
        d => panic!("{d:?}"),
    }
}
