//! Issue 20, item 1: one probe per fleet per episode even when the winner of the claim calls
//! late — the store's lease covers the probe in flight (the gate grants only within the
//! winner's grant window, and a grant extends the lease), and a probe given back gives its
//! claim back. Both replicas are connected throughout (`connected`, no error): not the
//! documented "cut off from the store" exception.
//!
//! The store's leases count real time while the breakers run on manual clocks: each test reads
//! the lease's real TTL and advances every clock by at least the real time it waits (a clock
//! behind the store's would believe in a lease the store already dropped).

use std::time::{Duration, Instant};

use tool_health::{BreakerState, CallOutcome, GateDecision};

use crate::support::*;

const TOOL: &str = "search";

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

fn advance(all: &[Replica], by: Duration) {
    for r in all {
        r.clock.advance(by);
    }
}

/// Both replicas connected, with no error since.
fn both_connected(all: &[Replica]) {
    for (i, r) in all.iter().enumerate() {
        let s = r.fleet.status();
        assert!(s.connected && s.last_error.is_none(), "replica {i}: {s:?}");
    }
}

/// The probe lease's key of the open episode, its holder and its real TTL.
async fn lease(client: &fred::prelude::Client, prefix: &str) -> Option<(String, String, Duration)> {
    let keys: Vec<String> = cmd(client, "KEYS", vec![&format!("{prefix}:v1:p:*")]).await;
    let k = keys.into_iter().next()?;
    let holder: Option<String> = cmd(client, "GET", vec![&k]).await;
    let ttl: i64 = cmd(client, "PTTL", vec![&k]).await;
    Some((k, holder?, Duration::from_millis(u64::try_from(ttl).ok()?)))
}

/// Waits (real time, bounded) until no probe lease is left in the store; how long it took.
async fn until_no_lease(client: &fred::prelude::Client, prefix: &str) -> Duration {
    let start = Instant::now();
    while lease(client, prefix).await.is_some() {
        assert!(start.elapsed() < 20 * SEC, "the lease never expired");
        tokio::time::sleep(Duration::from_millis(5)).await; // the store's TTL runs in real time
    }
    start.elapsed()
}

/// Replica 0 trips; both are open; past the cooldown replica 0 (it tripped: it has callers)
/// claims and wins, then replica 1 (no demand) claims after it and loses. (One clock at a
/// time: a replica's task claims by itself when its clock says so.)
async fn tripped_and_claimed(url: &str, prefix: &str, lease: Duration) -> Vec<Replica> {
    let all = replicas(url, prefix, 2, config(3, SEC, lease)).await;
    assert_eq!(all[0].fail(TOOL, 3), 3);
    wait_all(&all, TOOL, BreakerState::Open, "open everywhere", 5 * SEC).await;
    for r in &all {
        r.fleet.sync_now().await.expect("round"); // the trip applied everywhere
    }
    for r in &all {
        r.clock.advance(2 * SEC);
        r.fleet.sync_now().await.expect("round");
    }
    all
}

pub(crate) async fn a_winner_whose_first_call_comes_after_its_lease_never_makes_a_second_probe() {
    let Some(store) = store() else { return };
    let prefix = prefix("late-call");
    let url = store.url();
    let client = raw(&url).await;
    let all = tripped_and_claimed(&url, &prefix, 600 * MS).await;
    let (_, holder, _) = lease(&client, &prefix).await.expect("a lease");
    assert_eq!(holder, all[0].fleet.replica_id(), "the tripper won");
    // Replica 0's first call comes late: after its lease in the store is gone.
    let waited = until_no_lease(&client, &prefix).await;
    advance(&all, waited + 100 * MS);
    // Replica 1 claims again when the lease it lost to ended: it wins now.
    all[1].fleet.sync_now().await.expect("round");
    all[0].fleet.sync_now().await.expect("round");
    both_connected(&all);
    let granted = probes(&all, 3);
    assert!(
        granted.len() <= 1,
        "two probes in one fleet episode: {granted:?} (the late winner's gate still granted)"
    );
    // Whoever holds it now: the episode recovers with one probe.
    let granted = if granted.is_empty() {
        until_no_lease(&client, &prefix).await;
        advance(&all, 3 * SEC);
        for r in &all {
            r.fleet.sync_now().await.expect("round");
        }
        probes(&all, 3)
    } else {
        granted
    };
    assert_eq!(granted.len(), 1, "{granted:?}");
    let (i, permit) = granted[0];
    probe_succeeds(&all, i, TOOL, permit).await;
}

pub(crate) async fn a_probe_granted_late_in_its_lease_is_covered_until_it_ends() {
    let Some(store) = store() else { return };
    let prefix = prefix("late-grant");
    let url = store.url();
    let client = raw(&url).await;
    let probe_lease = SEC;
    let lead = 2 * COMMAND_TIMEOUT;
    let all = tripped_and_claimed(&url, &prefix, probe_lease).await;
    let claimed = Instant::now();
    let (key, holder, ttl) = lease(&client, &prefix).await.expect("a lease");
    assert_eq!(holder, all[0].fleet.replica_id());
    // The winner's first call comes as late as its grant window allows: `lead` before the
    // lease ends, and 300 ms more — room for a loaded machine to wake this task and reach the
    // gate (with 150 ms, CI on two busy cores once woke past the window). Still past the probe
    // lease counted from the claim: the old lease would end under this probe.
    let late = ttl.saturating_sub(lead + 300 * MS);
    assert!(
        late > probe_lease,
        "the grant comes after a lease from the claim would end"
    );
    tokio::time::sleep(late.saturating_sub(claimed.elapsed())).await; // the store's real TTL
    advance(&all, late);
    let GateDecision::Probe(permit) = all[0].registry.check(TOOL) else {
        panic!(
            "the winner probes within its window: {:?}",
            all[0].fleet.status()
        );
    };
    all[0].fleet.sync_now().await.expect("round"); // the grant reaches the store
                                                   // Past the end of the lease as claimed (real time, and the replica that lost: its clock).
                                                   // The winner's probe is still in flight (its own lease runs from the grant).
    let past = ttl + 200 * MS;
    tokio::time::sleep(past.saturating_sub(claimed.elapsed())).await;
    all[1].clock.advance(past);
    all[1].fleet.sync_now().await.expect("round");
    both_connected(&all);
    assert_eq!(
        all[0].registry.breaker_state(TOOL),
        BreakerState::HalfOpen,
        "the winner's probe is in flight"
    );
    let (_, holder, _) = lease(&client, &prefix)
        .await
        .unwrap_or_else(|| panic!("{key}: the lease expired under the probe in flight"));
    assert_eq!(
        holder,
        all[0].fleet.replica_id(),
        "the lease went to another replica"
    );
    let second = probes(&all[1..], 3);
    assert!(
        second.is_empty(),
        "a second probe while the first is in flight: {second:?}"
    );
    all[0]
        .registry
        .record_with_permit(TOOL, permit, CallOutcome::Success, MS);
    wait_all(
        &all,
        TOOL,
        BreakerState::Closed,
        "the recovery to spread",
        5 * SEC,
    )
    .await;
}

pub(crate) async fn a_probe_given_back_gives_its_claim_back() {
    let Some(store) = store() else { return };
    let prefix = prefix("given-back");
    let url = store.url();
    let client = raw(&url).await;
    let all = tripped_and_claimed(&url, &prefix, SEC).await;
    let claimed = Instant::now();
    let (_, _, old_ttl) = lease(&client, &prefix).await.expect("a lease");
    let lead = 2 * COMMAND_TIMEOUT;
    // Past the cooldown in real time too (so a new claim lasts longer than the old one), and
    // within the winner's grant window.
    let wait = 2 * SEC;
    tokio::time::sleep(wait).await;
    advance(&all, wait);
    let GateDecision::Probe(permit) = all[0].registry.check(TOOL) else {
        panic!("the winner probes: {:?}", all[0].fleet.status());
    };
    // The caller gives the probe back (a cancellation: no verdict on the tool).
    all[0]
        .registry
        .record_with_permit(TOOL, permit, CallOutcome::Cancelled, MS);
    all[0].fleet.sync_now().await.expect("round");
    // The claim went back to the store and was made again (the tool wanted at once: the same
    // replica wins): a fresh claim's lease — the probe lease plus twice `lead` past the
    // cooldown, longer than what extending a lease for a probe in flight gives — that ends
    // later than the one given back.
    let (_, holder, ttl) = lease(&client, &prefix).await.expect("claimed again");
    assert_eq!(holder, all[0].fleet.replica_id());
    assert!(
        ttl > SEC + lead + 100 * MS && claimed.elapsed() + ttl > old_ttl + 500 * MS,
        "the claim was not made again: {ttl:?} left, {old_ttl:?} at first, {:?} ago",
        claimed.elapsed()
    );
    // When the lease given back would have ended, the replica that lost claims again.
    let past = old_ttl + 200 * MS;
    tokio::time::sleep(past.saturating_sub(claimed.elapsed())).await;
    advance(&all, past.saturating_sub(wait));
    all[1].fleet.sync_now().await.expect("round");
    all[0].fleet.sync_now().await.expect("round");
    both_connected(&all);
    let granted = probes(&all, 3);
    assert!(
        granted.len() <= 1,
        "two probes in one fleet episode: {granted:?} (the winner kept the claim it gave back)"
    );
}
