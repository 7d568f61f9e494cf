//! Fleets sharing a store are isolated by their key prefix.

use tool_health::{BreakerState, CallOutcome, GateDecision};

use crate::support::*;

pub(crate) async fn two_fleets_with_different_prefixes_on_one_server_never_affect_each_other() {
    let Some(store) = store() else { return };
    let url = store.url();
    // One prefix starts with the other: isolation must not rest on them being unlike.
    let pa = prefix("iso");
    let pb = format!("{pa}-b");
    let a = replicas(&url, &pa, 2, config(3, SEC, 10 * SEC)).await;
    let b = replicas(&url, &pb, 2, config(3, SEC, 10 * SEC)).await;
    async fn sync(all: &[&Replica]) {
        for _ in 0..3 {
            for r in all {
                r.fleet.sync_now().await.expect("round");
            }
        }
    }
    let everyone: Vec<&Replica> = a.iter().chain(b.iter()).collect();

    // A trip in A reaches A, never B.
    assert_eq!(a[0].fail("search", 3), 3);
    wait_for("A's trip to spread in A", 5 * SEC, || {
        a[1].registry.breaker_state("search") == BreakerState::Open
    })
    .await;
    sync(&everyone).await;
    for r in &b {
        assert_eq!(r.registry.breaker_state("search"), BreakerState::Closed);
    }
    // An operator's force-open in B reaches B, never A.
    b[0].fleet
        .force_open("billing", None)
        .await
        .expect("control");
    wait_for("B's control to reach B", 5 * SEC, || {
        !b[1].registry.is_tool_available("billing")
    })
    .await;
    sync(&everyone).await;
    for r in &a {
        assert!(r.registry.is_tool_available("billing"));
    }
    // B trips the same tool: its own episode; A's episode and probe are A's.
    assert_eq!(b[1].fail("search", 3), 3);
    wait_for("B's trip to spread in B", 5 * SEC, || {
        b[0].registry.breaker_state("search") == BreakerState::Open
    })
    .await;
    // A recovers: exactly one probe in A, and B stays open.
    for r in &a {
        r.clock.advance(2 * SEC);
    }
    sync(&everyone).await;
    let mut granted = Vec::new();
    for (i, r) in a.iter().enumerate() {
        for _ in 0..2 {
            if let GateDecision::Probe(p) = r.registry.check("search") {
                granted.push((i, p));
            }
        }
    }
    assert_eq!(granted.len(), 1, "one probe in A: {granted:?}");
    let (i, permit) = granted.pop().expect("one");
    a[i].registry
        .record_with_permit("search", permit, CallOutcome::Success, MS);
    wait_all(&a, "search", BreakerState::Closed, "A closes", 5 * SEC).await;
    sync(&everyone).await;
    for r in &b {
        assert_eq!(r.registry.breaker_state("search"), BreakerState::Open);
    }
    // Nothing either fleet wrote looked like garbage to the other, and each fleet's keys are
    // its own.
    for r in &everyone {
        assert_eq!(r.fleet.status().rejected, 0);
    }
    let client = raw(&url).await;
    let keys: Vec<String> = cmd(&client, "KEYS", vec![&format!("{pa}*")]).await;
    assert!(keys.iter().any(|k| k.starts_with(&format!("{pa}:v1:"))));
    assert!(keys.iter().any(|k| k.starts_with(&format!("{pb}:v1:"))));
    assert!(
        keys.iter()
            .all(|k| k.starts_with(&format!("{pa}:v1:")) || k.starts_with(&format!("{pb}:v1:"))),
        "{keys:?}"
    );
    for r in a.into_iter().chain(b) {
        r.fleet.shutdown().await;
    }
}
