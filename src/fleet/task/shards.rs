//! The store's shards, as the task follows them: each one's boot id, last complete read,
//! subscription and connection; the keys a script about a tool is given; and what the shards'
//! connections report.

use super::*;

/// The task's view of one shard of the store.
#[derive(Debug, Default)]
pub(super) struct ShardSync {
    /// The shard's boot id, as last answered.
    pub(super) boot: Option<Boot>,
    /// The boot id and change counter of the shard's last complete read: a poll that finds
    /// them unchanged has nothing to read. `None`: read everything next time.
    pub(super) read: Option<(Boot, u64)>,
    /// Its subscription is confirmed on its subscriber's current connection.
    pub(super) subscribed: bool,
    /// Its last exchange succeeded, and it is subscribed.
    pub(super) connected: bool,
    /// The breakers open here of its tools must be re-published (after an outage of the
    /// shard, a shard that lost its data, or lost local events).
    pub(super) resync: bool,
    /// Its going away was said (WARN): its coming back is said too.
    pub(super) warned: bool,
}

/// A key of a tool's shard, besides the boot id and change counter every script is given.
#[derive(Debug, Clone, Copy)]
pub(super) enum Part {
    /// The tool's state (`t`).
    State,
    /// The tool's operator control (`c`).
    Control,
    /// The tool's failure streak (`k`).
    Streak,
    /// The tool's quorum votes (`q`).
    Quorum,
    /// The probe lease of the tool's episode.
    Lease(u64),
    /// The shard's set of open tools.
    Open,
    /// The shard's set of controlled tools.
    Controls,
    /// The shard's set of tools with a failure streak.
    Streaks,
}

impl Task {
    /// The keys of a script about the tool `hex` of shard `shard`: the shard's boot id and
    /// change counter, then `parts` in order.
    pub(super) fn keys(&self, shard: usize, hex: &str, parts: &[Part]) -> Vec<String> {
        let k = &self.store.keys;
        let mut keys = k.head(shard);
        keys.extend(parts.iter().map(|p| match *p {
            Part::State => k.tool(shard, "t", hex),
            Part::Control => k.tool(shard, "c", hex),
            Part::Streak => k.tool(shard, "k", hex),
            Part::Quorum => k.tool(shard, "q", hex),
            Part::Lease(ep) => k.lease(shard, hex, ep),
            Part::Open => k.open(shard),
            Part::Controls => k.controls(shard),
            Part::Streaks => k.streaks(shard),
        }));
        keys
    }

    /// Shard `shard`'s name in the log: its node on a cluster.
    pub(super) fn shard_label(&self, shard: usize) -> String {
        match self.store.node(shard) {
            Some(node) => format!("shard {shard} ({node})"),
            None if self.store.is_cluster() => format!("shard {shard}"),
            None => "the store".to_owned(),
        }
    }

    /// What a shard's connections reported. Whether a round ran (the next one is then a poll
    /// interval away).
    pub(super) async fn on_shard_event(&mut self, ev: ShardEvent) -> bool {
        let s = ev.shard;
        if self.store.generation(s) != Some(ev.generation) {
            return false; // connections replaced since (a failover): not news
        }
        match ev.event {
            ConnEvent::Message(m) => {
                self.on_message(s, &m).await;
                false
            }
            ConnEvent::Lagged => {
                // Messages were lost: the poll finds what they said (the shards' counters
                // moved), now rather than at the next poll.
                let _ = self.round(true).await;
                true
            }
            ConnEvent::Connected => {
                // Connected (again): a round now rather than at the next retry or poll — the
                // first sync, or the resync after an outage, without waiting. A shard that
                // reads as connected already (its subscriber's connection came first) is only
                // read: a restart it did not notice shows in its boot id.
                if self.shards[s].connected && !self.shards[s].resync {
                    self.resubscribe(s).await;
                } else {
                    let _ = self.round(false).await;
                }
                true
            }
            ConnEvent::Error(e) => {
                let (auth, text) = self.store.describe(&e);
                self.disconnected(s, text, auth);
                false
            }
            ConnEvent::SubConnected => {
                // The subscriber (re)connected: its subscription went with the old connection.
                // Subscribed again and the shard read, now.
                self.shards[s].subscribed = false;
                self.resubscribe(s).await;
                true
            }
            ConnEvent::SubError(e) => {
                let (_, text) = self.store.describe(&e);
                self.unsubscribed(s, format!("the events channel: {text}"));
                false
            }
        }
    }

    /// On a cluster: asks for the shards' routes when one of them has none or does not answer
    /// (its node failed over, or moved its slot); the connections of a shard re-routed are
    /// new, and their first connection starts its resync.
    pub(super) async fn route_shards(&mut self) {
        if !self.store.is_cluster()
            || self.layout_error.is_some()
            || self.shards.iter().all(|s| s.connected)
        {
            return;
        }
        match self.store.discover().await {
            Ok(moved) => {
                for s in moved {
                    tracing::debug!(
                        target: LOG_TARGET,
                        replica = %self.shared.replica,
                        shard = s,
                        node = self.store.node(s),
                        "fleet: shard routed"
                    );
                    let shard = &mut self.shards[s];
                    shard.subscribed = false;
                    shard.resync = true;
                }
            }
            Err(e) => {
                // Every shard that has no connection yet shares this error.
                for s in 0..self.shards.len() {
                    if self.store.generation(s).is_none() {
                        self.store_failed(s, &e);
                    }
                }
            }
        }
    }
}
