//! URLs of the wrong kind: a plain `redis://` at a cluster node, a `redis-cluster://` at a
//! single server. Before, the first started and logged every script's failure as "the store
//! does not answer" (the store answered, with an error); the second was refused at start. Now
//! each is told at its first answer, with the URL to use — by `wait_connected`, the status and
//! one ERROR line — and the replica breaks locally meanwhile.

use std::time::Duration;

use tool_health::fleet::FleetError;
use tool_health::{BreakerState, ManualClock};

use crate::capture::Logs;
use crate::cluster::*;
use crate::support::*;

/// The replica's error says `expected` (the URL to use), holds no password, is the status's
/// last error, and is logged once; the gate breaks locally.
async fn told(r: &Replica, logs: &Logs, expected: &str) {
    let err = r
        .fleet
        .wait_connected(Duration::from_secs(10))
        .await
        .expect_err("a store of the wrong kind never reads as connected");
    println!("told: {err}");
    let FleetError::Config(why) = &err else {
        panic!("a configuration error, not a store that does not answer: {err:?}");
    };
    assert!(why.contains(expected), "names the URL to use: {why}");
    assert!(!why.contains(PASSWORD), "{why}");
    let status = r.fleet.status();
    assert!(!status.connected);
    assert_eq!(status.last_error.as_deref(), Some(why.as_str()));
    // More rounds say nothing more.
    for _ in 0..3 {
        assert!(r.fleet.sync_now().await.is_err());
    }
    let text = logs.text();
    let errors = text
        .lines()
        .filter(|l| l.contains(" ERROR ") && l.contains(expected))
        .count();
    assert_eq!(errors, 1, "said once:\n{text}");
    assert!(
        !text.contains("does not answer"),
        "the store answered, with an error:\n{text}"
    );
    assert_eq!(r.fail("search", 5), 3);
    assert_eq!(r.registry.breaker_state("search"), BreakerState::Open);
}

pub(crate) async fn a_plain_url_at_a_cluster_node_says_which_url_to_use() {
    let Some(cluster) = Cluster::start(Duration::from_secs(5)).await else {
        return;
    };
    let logs = Logs::capture();
    let url = cluster.node_url(1);
    let r = Replica::with(
        builder(&url, &prefix("plain-at-cluster")),
        ManualClock::new(),
        config(3, SEC, 10 * SEC),
    );
    let port = cluster.nodes[1].port;
    told(&r, &logs, &format!("redis-cluster://***@127.0.0.1:{port}")).await;
}

pub(crate) async fn a_cluster_url_at_a_single_server_says_which_url_to_use() {
    let Some(server) = Server::start() else {
        return;
    };
    let logs = Logs::capture();
    let url = format!(
        "redis-cluster://{USER}:{PASSWORD}@127.0.0.1:{}",
        server.port
    );
    let r = Replica::with(
        builder(&url, &prefix("cluster-at-single")),
        ManualClock::new(),
        config(3, SEC, 10 * SEC),
    );
    told(
        &r,
        &logs,
        &format!("use redis://***@127.0.0.1:{}", server.port),
    )
    .await;
}
