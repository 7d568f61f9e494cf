//! A fleet on a cluster: its shards spread over the primaries, and on each one trips spread,
//! exactly one probe per recovery, recoveries spread — through sharded pub/sub on each node.

use std::collections::BTreeSet;
use std::time::Duration;

use fred::prelude::ClientLike;
use tool_health::{BreakerState, CallOutcome, GateDecision, Permit};

use crate::cluster::*;
use crate::support::*;

pub(crate) const SHARDS: u64 = 3;
pub(crate) const COOLDOWN: Duration = SEC;

/// The node (index) holding `tool`'s state key, found by asking every running node.
pub(crate) async fn node_holding(cluster: &Cluster, prefix: &str, tool: &str) -> Option<usize> {
    let hex: String = tool.bytes().map(|b| format!("{b:02x}")).collect();
    let pattern = format!("{{{prefix}:*}}:v1:t:{hex}");
    for (i, n) in cluster.nodes.iter().enumerate() {
        if !n.running() {
            continue;
        }
        let client = raw(&cluster.node_url(i)).await;
        let role: Vec<fred::prelude::Value> = cmd(&client, "ROLE", vec![]).await;
        let primary =
            matches!(role.first(), Some(fred::prelude::Value::String(s)) if &**s == "master");
        let keys: Vec<String> = if primary {
            cmd(&client, "KEYS", vec![&pattern]).await
        } else {
            Vec::new()
        };
        let _ = client.quit().await;
        if !keys.is_empty() {
            return Some(i);
        }
    }
    None
}

/// The probes the replicas' gates grant for `tool` now (each asked twice).
pub(crate) fn probes(all: &[Replica], tool: &str) -> Vec<(usize, Permit)> {
    let mut granted = Vec::new();
    for (i, r) in all.iter().enumerate() {
        for _ in 0..2 {
            if let GateDecision::Probe(p) = r.registry.check(tool) {
                granted.push((i, p));
            }
        }
    }
    granted
}

/// `tool`'s cooldown passes on every replica (and the margin a probe claim adds to it: a
/// breaker re-published after a shard lost its data keeps the hold it had); exactly one probe
/// in the fleet, which succeeds; the recovery reaches every replica.
pub(crate) async fn one_probe_then_closed(all: &[Replica], tool: &str, what: &str) {
    for r in all {
        r.clock.advance(2 * COOLDOWN + CLAIM_MARGIN);
    }
    for r in all {
        let _ = r.fleet.sync_now().await;
    }
    let mut granted = probes(all, tool);
    assert_eq!(
        granted.len(),
        1,
        "{what}: exactly one probe for `{tool}`: {granted:?}"
    );
    let (i, permit) = granted.pop().expect("one");
    all[i]
        .registry
        .record_with_permit(tool, permit, CallOutcome::Success, MS);
    wait_all(
        all,
        tool,
        BreakerState::Closed,
        "the recovery to spread",
        10 * SEC,
    )
    .await;
}

/// The ACL rules of FLEET.md, "Security", on a cluster, for `prefix`.
fn cluster_acl(prefix: &str) -> String {
    format!(
        "on >fleetpw ~{{{prefix}:* &{{{prefix}:* +@scripting +@pubsub +ping +hello +auth \
         +client|setname +client|id +time +type +get +set +del +incr +hset +hmget +hlen \
         +hincrby +hgetall +hdel +sadd +srem +srandmember +zadd +zrange +zrem +zremrangebyscore \
         +zcard +pexpire +pttl +cluster|slots"
    )
}

pub(crate) async fn a_fleet_on_a_cluster_coordinates_the_tools_of_every_primary() {
    let Some(cluster) = Cluster::start(Duration::from_secs(5)).await else {
        return;
    };
    // As the least-privilege user FLEET.md documents for a cluster (on every node: a
    // cluster's ACL is each node's own).
    let prefix = prefix("cluster");
    for i in 0..cluster.nodes.len() {
        let admin = raw(&cluster.node_url(i)).await;
        let mut args = vec!["SETUSER", "fleet"];
        let rules = cluster_acl(&prefix);
        args.extend(rules.split(' '));
        let _: String = cmd(&admin, "ACL", args).await;
        let _ = admin.quit().await;
    }
    let url = cluster
        .url()
        .replace(&format!("{USER}:{PASSWORD}@"), "fleet:fleetpw@");
    let all = replicas(&url, &prefix, 3, config(3, COOLDOWN, 10 * SEC)).await;
    for r in &all {
        assert!(r.fleet.status().connected, "{:?}", r.fleet.status());
    }
    // One tool in each shard (`fnv1a64(name) mod 3`, as FLEET.md says), each tripped by
    // another replica: every replica hears it (the poll is an hour away: through each node's
    // sharded pub/sub).
    let tools: Vec<String> = (0..SHARDS)
        .map(|s| tool_in_shard("tool", s, SHARDS))
        .collect();
    let mut nodes = BTreeSet::new();
    for (i, tool) in tools.iter().enumerate() {
        assert_eq!(all[i].fail(tool, 3), 3);
        wait_all(
            &all,
            tool,
            BreakerState::Open,
            "the trip to spread",
            5 * SEC,
        )
        .await;
        let node = node_holding(&cluster, &prefix, tool)
            .await
            .expect("the tool's state is stored");
        nodes.insert(node);
    }
    assert_eq!(
        nodes.len(),
        PRIMARIES,
        "three shards on three primaries: {nodes:?}"
    );
    for tool in &tools {
        one_probe_then_closed(&all, tool, "a cluster").await;
    }
    // A hundred tools: each on its shard, each trip heard everywhere.
    let many: Vec<String> = (0..100).map(|i| format!("many-{i}")).collect();
    for (i, tool) in many.iter().enumerate() {
        assert_eq!(all[i % 3].fail(tool, 3), 3);
    }
    for tool in &many {
        wait_all(
            &all,
            tool,
            BreakerState::Open,
            "the trips to spread",
            5 * SEC,
        )
        .await;
    }
    // An operator's control reaches every replica.
    all[0]
        .fleet
        .force_open("isolated", None)
        .await
        .expect("a control under the ACL");
    for r in &all {
        wait_for("the control to spread", 5 * SEC, || {
            !r.registry.allow_request("isolated")
        })
        .await;
    }
    for r in &all {
        assert!(r.fleet.status().connected, "{:?}", r.fleet.status());
        assert_eq!(r.fleet.status().rejected, 0);
        assert_eq!(r.fleet.status().last_error, None);
    }
}
