//! Trips spread, recoveries spread, exactly one probe per episode, lease takeover.

use std::time::Duration;

use tool_health::{BreakerState, CallOutcome, GateDecision};

use crate::support::*;

const TOOL: &str = "search";

/// Advances every replica's clock and runs a round on each (claims fall due).
async fn advance_and_sync(all: &[Replica], by: Duration) {
    for r in all {
        r.clock.advance(by);
    }
    for r in all {
        r.fleet.sync_now().await.expect("round");
    }
}

/// Every replica's fleet status, for failure messages.
fn statuses(all: &[Replica]) -> Vec<tool_health::fleet::FleetStatus> {
    all.iter().map(|r| r.fleet.status()).collect()
}

/// Every replica asks the gate `calls` times: the probes granted (replica, permit).
fn probes(all: &[Replica], calls: usize) -> Vec<(usize, tool_health::Permit)> {
    let mut out = Vec::new();
    for _ in 0..calls {
        for (i, r) in all.iter().enumerate() {
            if let GateDecision::Probe(p) = r.registry.check(TOOL) {
                out.push((i, p));
            }
        }
    }
    out
}

pub(crate) async fn a_trip_spreads_to_every_replica_within_a_bounded_delay() {
    let Some(store) = store() else { return };
    let prefix = prefix("spread");
    let all = replicas(&store.url(), &prefix, 3, config(3, 2 * SEC, 10 * SEC)).await;
    let mut delays = Vec::new();
    for episode in 0..20 {
        let tripper = &all[episode % 3];
        assert_eq!(
            tripper.fail(TOOL, 3),
            3,
            "episode {episode}: all three reach the tool"
        );
        assert_eq!(tripper.registry.breaker_state(TOOL), BreakerState::Open);
        for (i, r) in all.iter().enumerate() {
            if std::ptr::eq(r, tripper) {
                continue;
            }
            delays.push(
                wait_for("the trip to spread", 5 * SEC, || {
                    r.registry.breaker_state(TOOL) == BreakerState::Open
                })
                .await,
            );
            // The remaining cooldown, as a duration, plus at most the probe claim's margin: a
            // replica that saw no call for the tool claims after the cooldown and holds its
            // probe until that claim is decided (`CLAIM_MARGIN`).
            match r.registry.check(TOOL) {
                GateDecision::Refused { retry_after } => assert!(
                    retry_after > Duration::ZERO && retry_after <= 2 * SEC + CLAIM_MARGIN,
                    "replica {i}: {retry_after:?}"
                ),
                d => panic!("replica {i} let a call through: {d:?}"),
            }
        }
        // Recover: one probe somewhere, its success spreads.
        advance_and_sync(&all, 3 * SEC).await;
        let granted = probes(&all, 2);
        assert_eq!(
            granted.len(),
            1,
            "episode {episode}: {granted:?} {:?}",
            statuses(&all)
        );
        let (i, permit) = granted[0];
        probe_succeeds(&all, i, TOOL, permit).await;
    }
    delays.sort();
    println!(
        "trip propagation over {} replica-trips: p50 {:?}, p99 {:?}, max {:?}",
        delays.len(),
        percentile(&delays, 0.5),
        percentile(&delays, 0.99),
        delays.last().unwrap()
    );
    assert!(percentile(&delays, 0.99) < SEC, "bounded delay: {delays:?}");
}

pub(crate) async fn exactly_one_probe_per_episode_over_100_episodes() {
    let Some(store) = store() else { return };
    let prefix = prefix("probe");
    let all = replicas(&store.url(), &prefix, 3, config(3, SEC, 10 * SEC)).await;
    let mut episodes = 0;
    let mut failed_probes = 0;
    for round in 0..100 {
        let tripper = &all[round % 3];
        tripper.fail(TOOL, 3);
        wait_all(&all, TOOL, BreakerState::Open, "open everywhere", 5 * SEC).await;
        // Every fifth episode's first probe fails: the next episode opens fleet-wide and gets
        // its own single probe.
        let fail_first = round % 5 == 4;
        loop {
            episodes += 1;
            advance_and_sync(&all, 2 * SEC).await;
            let granted = probes(&all, 3);
            assert_eq!(
                granted.len(),
                1,
                "round {round}: exactly one probe in the fleet, got {granted:?} {:?}",
                statuses(&all)
            );
            let (i, permit) = granted[0];
            if fail_first && failed_probes < (round / 5) + 1 {
                failed_probes += 1;
                all[i]
                    .registry
                    .record_with_permit(TOOL, permit, CallOutcome::Failure, MS);
                // The next episode reaches every replica (the prober's own is open already).
                wait_all(
                    &all,
                    TOOL,
                    BreakerState::Open,
                    "the re-open to spread",
                    5 * SEC,
                )
                .await;
                for r in &all {
                    r.fleet.sync_now().await.expect("round");
                }
                continue;
            }
            probe_succeeds(&all, i, TOOL, permit).await;
            break;
        }
    }
    assert_eq!(episodes, 100 + failed_probes);
    println!("{episodes} episodes ({failed_probes} re-opened by a failed probe): one probe each");
}

pub(crate) async fn a_dead_probers_lease_expires_and_another_replica_takes_the_probe() {
    let Some(store) = store() else { return };
    let prefix = prefix("takeover");
    let lease = Duration::from_millis(400);
    let mut all = replicas(&store.url(), &prefix, 3, config(3, SEC, lease)).await;
    all[0].fail(TOOL, 3);
    wait_all(&all, TOOL, BreakerState::Open, "open everywhere", 5 * SEC).await;
    // The tripper has callers: it claims first and wins; it takes the probe, then dies.
    advance_and_sync(&all, 2 * SEC).await;
    let granted = probes(&all, 2);
    assert_eq!(granted.len(), 1, "{granted:?}");
    let (dead, _) = granted[0];
    let prober = all.remove(dead);
    drop(prober); // its task and its registry are gone; its lease is not released
                  // The others hold: no probe while the lease lives.
    assert!(probes(&all, 3).is_empty());
    let client = raw(&store.url()).await;
    let lease_key_gone = || async {
        let keys: Vec<String> = cmd(&client, "KEYS", vec![&format!("{prefix}:v1:p:*")]).await;
        keys.is_empty()
    };
    let start = std::time::Instant::now();
    while !lease_key_gone().await {
        assert!(start.elapsed() < 10 * SEC, "the lease never expired");
        tokio::time::sleep(Duration::from_millis(5)).await; // the store's TTL runs in real time
    }
    // The survivors' hold ends when the lease does (on their clocks, which must not fall
    // behind the real time the store's TTL counted): one of them probes.
    advance_and_sync(&all, start.elapsed() + 2 * SEC).await;
    let granted = probes(&all, 3);
    assert_eq!(granted.len(), 1, "one survivor takes over: {granted:?}");
    let (i, permit) = granted[0];
    probe_succeeds(&all, i, TOOL, permit).await;
}
