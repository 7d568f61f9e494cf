//! A cluster's failures: a primary killed mid-outage and its replica promoted, a shard that
//! restarts empty, a node the replicas cannot reach. In each, no call waits on the network (the
//! gate's latency is measured around every decision), the tools of the other shards keep
//! coordinating, and the fleet follows the cluster when it is whole again.

use std::time::Duration;

use fred::prelude::ClientLike;
use tool_health::{BreakerState, ManualClock};

use crate::cluster::*;
use crate::gate::*;
use crate::spread::*;
use crate::support::*;

/// Replicas that poll every 100 ms: they notice a node going and coming back by themselves.
async fn fleet(url: &str, prefix: &str, n: usize) -> Vec<Replica> {
    replicas_with(n, config(3, COOLDOWN, 10 * SEC), |_| {
        (
            builder(url, prefix).poll_interval(Duration::from_millis(100)),
            ManualClock::new(),
        )
    })
    .await
}

/// The state key of `tool` and its slot.
async fn slot_of_tool(cluster: &Cluster, prefix: &str, tool: &str) -> u16 {
    let node = node_holding(cluster, prefix, tool)
        .await
        .expect("the tool's state is stored");
    let hex: String = tool.bytes().map(|b| format!("{b:02x}")).collect();
    let client = raw(&cluster.node_url(node)).await;
    let keys: Vec<String> = cmd(&client, "KEYS", vec![&format!("{{{prefix}:*}}:v1:t:{hex}")]).await;
    let _ = client.quit().await;
    cluster.slot_of(&keys[0]).await
}

/// The episode number the store holds for `tool` (`None`: none).
async fn stored_episode(cluster: &Cluster, prefix: &str, tool: &str) -> Option<String> {
    let node = node_holding(cluster, prefix, tool).await?;
    let hex: String = tool.bytes().map(|b| format!("{b:02x}")).collect();
    let client = raw(&cluster.node_url(node)).await;
    let keys: Vec<String> = cmd(&client, "KEYS", vec![&format!("{{{prefix}:*}}:v1:t:{hex}")]).await;
    let ep: Option<String> = cmd(&client, "HGET", vec![&keys[0], "ep"]).await;
    let _ = client.quit().await;
    ep
}

pub(crate) async fn a_primary_killed_mid_outage_fails_over_and_the_fleet_follows() {
    let Some(mut cluster) = Cluster::start(Duration::from_millis(1000)).await else {
        return;
    };
    let url = cluster.url();
    let prefix = prefix("failover");
    let all = fleet(&url, &prefix, 3).await;
    let down = tool_in_shard("down", 0, SHARDS);
    let other = tool_in_shard("other", 1, SHARDS);
    let callers = Callers::start(&all.iter().collect::<Vec<_>>());
    let mut gate = Gate::default();
    // Mid-outage: `down` open fleet-wide.
    assert_eq!(timed_fail(&all[0], &down, 3, &mut gate), 3);
    wait_all(
        &all,
        &down,
        BreakerState::Open,
        "the trip to spread",
        5 * SEC,
    )
    .await;
    let slot = slot_of_tool(&cluster, &prefix, &down).await;
    let old = cluster.primary_of(slot).await;
    let ep = stored_episode(&cluster, &prefix, &down).await;
    assert!(ep.is_some());
    // Its primary dies.
    cluster.nodes[old].kill9();
    // Meanwhile the other shards coordinate: a trip elsewhere reaches every replica.
    assert_eq!(timed_fail(&all[1], &other, 3, &mut gate), 3);
    wait_all(
        &all,
        &other,
        BreakerState::Open,
        "a trip on another primary to spread while one fails over",
        5 * SEC,
    )
    .await;
    let new = cluster.wait_failover(slot, old).await;
    println!("slot {slot}: node {old} killed, node {new} promoted");
    // The fleet follows the promoted replica (the replicas re-route, subscribe, read).
    for r in &all {
        wait_for("the replica to follow the failover", 20 * SEC, || {
            r.fleet.status().connected
        })
        .await;
    }
    // What the promoted replica had (the trip, replicated as it was written) is kept: the
    // episode is the same one (FLEET.md, "Cluster mode": a failover that lost writes shows as
    // a new boot id of that shard, and its open breakers are re-published).
    assert_eq!(stored_episode(&cluster, &prefix, &down).await, ep);
    for r in &all {
        assert_eq!(r.registry.breaker_state(&down), BreakerState::Open);
    }
    // One probe per recovery, on the promoted node and on the others.
    one_probe_then_closed(&all, &down, "after a failover").await;
    one_probe_then_closed(&all, &other, "beside a failover").await;
    // And the next outage of the failed-over shard spreads as before.
    assert_eq!(timed_fail(&all[2], &down, 3, &mut gate), 3);
    wait_all(
        &all,
        &down,
        BreakerState::Open,
        "a trip after the failover",
        5 * SEC,
    )
    .await;
    one_probe_then_closed(&all, &down, "the next outage").await;
    gate.add(callers.finish());
    gate.check("a primary killed and its replica promoted");
}

pub(crate) async fn a_manual_failover_is_followed_through_the_moved_answer() {
    let Some(cluster) = Cluster::start(Duration::from_secs(5)).await else {
        return;
    };
    let url = cluster.url();
    let prefix = prefix("manual-failover");
    let all = fleet(&url, &prefix, 3).await;
    let down = tool_in_shard("down", 0, SHARDS);
    let next = tool_in_shard("next", 0, SHARDS);
    assert_eq!(all[0].fail(&down, 3), 3);
    wait_all(
        &all,
        &down,
        BreakerState::Open,
        "the trip to spread",
        5 * SEC,
    )
    .await;
    let slot = slot_of_tool(&cluster, &prefix, &down).await;
    let old = cluster.primary_of(slot).await;
    let ep = stored_episode(&cluster, &prefix, &down).await;
    // A maintenance failover (what managed offerings run): the replica takes the slots over
    // and the old primary becomes its replica — the fleet's connections stay up, pointed at a
    // node that now answers MOVED.
    let replica = raw(&cluster.node_url(PRIMARIES + old)).await;
    let _: String = cmd(&replica, "CLUSTER", vec!["FAILOVER"]).await;
    let _ = replica.quit().await;
    let new = cluster.wait_failover(slot, old).await;
    assert_eq!(new, PRIMARIES + old);
    // A trip of another tool of that shard reaches every replica: they followed the MOVED
    // answer to the new primary and subscribed there.
    assert_eq!(all[1].fail(&next, 3), 3);
    wait_all(
        &all,
        &next,
        BreakerState::Open,
        "a trip after a manual failover",
        10 * SEC,
    )
    .await;
    assert_eq!(stored_episode(&cluster, &prefix, &down).await, ep);
    one_probe_then_closed(&all, &down, "after a manual failover").await;
    one_probe_then_closed(&all, &next, "after a manual failover").await;
    for r in &all {
        assert!(r.fleet.status().connected, "{:?}", r.fleet.status());
    }
}

pub(crate) async fn a_shard_that_lost_its_data_is_republished_alone() {
    // A node timeout longer than the restart: no failover, the replica re-syncs from its
    // primary that restarted empty — the shard lost its data, the others did not.
    let Some(mut cluster) = Cluster::start(Duration::from_secs(10)).await else {
        return;
    };
    let url = cluster.url();
    let prefix = prefix("empty-shard");
    let all = fleet(&url, &prefix, 3).await;
    let lost = tool_in_shard("lost", 0, SHARDS);
    let kept = tool_in_shard("kept", 1, SHARDS);
    for tool in [&lost, &kept] {
        assert_eq!(all[0].fail(tool, 3), 3);
        wait_all(
            &all,
            tool,
            BreakerState::Open,
            "the trip to spread",
            5 * SEC,
        )
        .await;
    }
    let kept_ep = stored_episode(&cluster, &prefix, &kept).await;
    let slot = slot_of_tool(&cluster, &prefix, &lost).await;
    let node = cluster.primary_of(slot).await;
    let callers = Callers::start(&all.iter().collect::<Vec<_>>());
    cluster.nodes[node].restart();
    // The shard's open breakers are re-published: the store holds the episode again.
    wait_for_async("the lost episode re-published", 20 * SEC, || async {
        stored_episode(&cluster, &prefix, &lost).await.is_some()
    })
    .await;
    for r in &all {
        wait_for("the replica to reconnect", 20 * SEC, || {
            r.fleet.status().connected
        })
        .await;
    }
    // The other shard's episode was never touched.
    assert_eq!(stored_episode(&cluster, &prefix, &kept).await, kept_ep);
    for r in &all {
        for tool in [&lost, &kept] {
            assert_eq!(r.registry.breaker_state(tool), BreakerState::Open);
        }
    }
    one_probe_then_closed(&all, &lost, "a shard restarted empty").await;
    one_probe_then_closed(&all, &kept, "beside a shard restarted empty").await;
    callers.finish().check("a shard restarted empty");
}

pub(crate) async fn replicas_cut_off_from_one_node_still_coordinate_the_tools_of_the_others() {
    // A node timeout far longer than the test: the paused node is never failed over.
    let Some(cluster) = Cluster::start(Duration::from_secs(120)).await else {
        return;
    };
    let url = cluster.url();
    let prefix = prefix("cut-off");
    let all = fleet(&url, &prefix, 3).await;
    let away = tool_in_shard("away", 0, SHARDS);
    let near = tool_in_shard("near", 1, SHARDS);
    let far = tool_in_shard("far", 2, SHARDS);
    // Learn where `away` lives (a trip and its recovery), then cut every replica off that node.
    assert_eq!(all[0].fail(&away, 3), 3);
    wait_all(
        &all,
        &away,
        BreakerState::Open,
        "the trip to spread",
        5 * SEC,
    )
    .await;
    let slot = slot_of_tool(&cluster, &prefix, &away).await;
    let node = cluster.primary_of(slot).await;
    one_probe_then_closed(&all, &away, "before the cut").await;
    let callers = Callers::start(&all.iter().collect::<Vec<_>>());
    let mut gate = Gate::default();
    cluster.nodes[node].pause();
    // The tools of the other primaries: trips spread, one probe per recovery.
    for tool in [&near, &far] {
        assert_eq!(timed_fail(&all[1], tool, 3, &mut gate), 3);
        wait_all(
            &all,
            tool,
            BreakerState::Open,
            "a trip on a reachable node to spread",
            5 * SEC,
        )
        .await;
    }
    for r in &all {
        wait_for("the replica to notice the node is away", 10 * SEC, || {
            !r.fleet.status().connected
        })
        .await;
    }
    for tool in [&near, &far] {
        one_probe_then_closed(&all, tool, "a node away").await;
    }
    // The cut-off node's tool: each replica breaks on its own (nobody hears the others).
    assert_eq!(timed_fail(&all[0], &away, 3, &mut gate), 3);
    assert_eq!(all[0].registry.breaker_state(&away), BreakerState::Open);
    for r in &all[1..] {
        assert_eq!(r.registry.breaker_state(&away), BreakerState::Closed);
        assert!(r.registry.allow_request(&away));
    }
    // The node is back: the fleet resyncs (the open breaker re-published), one probe.
    cluster.nodes[node].resume();
    for r in &all {
        wait_for("the replica to reconnect", 20 * SEC, || {
            r.fleet.status().connected
        })
        .await;
    }
    wait_for_async("the cut-off trip re-published", 10 * SEC, || async {
        stored_episode(&cluster, &prefix, &away).await.is_some()
    })
    .await;
    wait_all(
        &all,
        &away,
        BreakerState::Open,
        "the re-published trip to spread",
        10 * SEC,
    )
    .await;
    one_probe_then_closed(&all, &away, "the node back").await;
    gate.add(callers.finish());
    gate.check("a node cut off");
}

/// Waits (polling, bounded) until the async `cond` holds.
async fn wait_for_async<F, Fut>(what: &str, timeout: Duration, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = std::time::Instant::now();
    while !cond().await {
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
