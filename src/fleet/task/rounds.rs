//! Rounds: one exchange with the store, shard by shard.

use super::*;

/// The most tools one read (a poll's second half) names.
const READ_BATCH: usize = 200;

impl Task {
    /// One exchange: local events, a cluster's routes, then each due shard's subscription,
    /// change counter and news (and its resync), then claims, streaks, counts. `full`: every
    /// shard is due (a `sync_now`, lost messages); otherwise the shards this replica holds
    /// state in or must read again, and one more in turn — every shard is read at least once
    /// every `shards` poll intervals, and a poll costs one command (one shard, nothing new)
    /// whatever the number of tools and shards. `Err` with the first shard's error that did
    /// not answer.
    pub(super) async fn round(&mut self, full: bool) -> Result<(), FleetError> {
        while let Ok(ev) = self.local.try_recv() {
            self.on_local(ev).await;
        }
        if self.overflow.swap(false, Ordering::Relaxed) {
            self.resync_all();
            self.lost_events = true;
        }
        self.route_shards().await;
        let mut result = Ok(());
        for s in self.due_shards(full) {
            if let Err(e) = self.sync_shard(s).await {
                result = result.and(Err(e));
            }
        }
        self.claims().await;
        self.streaks().await;
        self.rates().await;
        self.forget_idle();
        self.update_connected();
        result
    }

    /// The shards a round reads (see [`round`](Self::round)).
    fn due_shards(&mut self, full: bool) -> Vec<usize> {
        let n = self.shards.len();
        let mut due: Vec<bool> = self
            .shards
            .iter()
            .map(|s| full || s.read.is_none() || s.resync || !s.subscribed || !s.connected)
            .collect();
        for ts in self.tools.values() {
            if ts.holds_state() || ts.streak.is_some() {
                due[ts.shard] = true;
            }
        }
        due[self.sweep % n] = true;
        self.sweep = (self.sweep + 1) % n;
        (0..n).filter(|s| due[*s]).collect()
    }

    /// Shard `shard`'s part of a round: subscribed before it is read (whatever is published
    /// from then on is heard, whatever was published before is in what the poll reads), read,
    /// and its open breakers re-published if it needs them.
    async fn sync_shard(&mut self, shard: usize) -> Result<(), FleetError> {
        let mut result = Ok(());
        if !self.shards[shard].subscribed || !self.store.subscriber_connected(shard) {
            self.shards[shard].subscribed = false;
            match self.store.subscribe(shard).await {
                Ok(()) => self.shards[shard].subscribed = true,
                Err(e) => {
                    self.store_failed(shard, &e);
                    result = Err(e.to_fleet());
                }
            }
        }
        if let Err(e) = self.poll(shard).await {
            self.store_failed(shard, &e);
            return Err(e.to_fleet());
        }
        if self.shards[shard].resync && !self.republish(shard).await {
            return Err(FleetError::Unavailable(
                "the store stopped answering".into(),
            ));
        }
        self.answered(shard);
        result
    }

    /// Subscribes shard `shard` again (after its subscriber reconnected, or when it is not
    /// subscribed), then reads it: what was published while the subscription was down moved
    /// its change counter (and open breakers are re-published if it needs them).
    pub(super) async fn resubscribe(&mut self, shard: usize) {
        if !self.shards[shard].subscribed || !self.store.subscriber_connected(shard) {
            if let Err(e) = self.store.subscribe(shard).await {
                self.shards[shard].subscribed = false;
                self.store_failed(shard, &e);
                return;
            }
            self.shards[shard].subscribed = true;
        }
        if let Err(e) = self.poll(shard).await {
            self.store_failed(shard, &e);
            return;
        }
        if self.shards[shard].resync && !self.republish(shard).await {
            return;
        }
        self.answered(shard);
    }

    /// Reads shard `shard`: its boot id and change counter, and — when the counter moved since
    /// the last complete read, or the shard is being resynced — the state of the tools it lists
    /// (open, controlled, streaking), of those this replica holds state for, and (resyncing) of
    /// the breakers open here; applies it.
    pub(super) async fn poll(&mut self, shard: usize) -> Result<(), StoreError> {
        let known = match (self.shards[shard].read, self.shards[shard].resync) {
            (Some((boot, seq)), false) => format!("{}:{seq}", boot.0),
            _ => "-".to_owned(),
        };
        let k = &self.store.keys;
        let mut set_keys = k.head(shard);
        set_keys.extend([k.open(shard), k.controls(shard), k.streaks(shard)]);
        let reply = self
            .store
            .call(
                shard,
                Which::Index,
                set_keys.clone(),
                vec![known, POLL_OPEN_MAX.to_string()],
            )
            .await?;
        let Some(index) = wire::index_reply(&reply) else {
            return Err(StoreError::Reply);
        };
        self.note(shard, index.boot, index.corrupt);
        self.reject(Rejected::Reply, index.unreadable);
        let Some(listed) = index.listed else {
            return Ok(()); // nothing changed since the last complete read
        };
        // Every set listed in full (none at its bound): the streaks not listed are over.
        let complete = listed.len() < POLL_OPEN_MAX;
        let mut names: BTreeSet<String> = listed.into_iter().collect();
        names.extend(
            self.tools
                .iter()
                .filter(|(_, t)| t.shard == shard && (t.holds_state() || t.streak.is_some()))
                .map(|(name, _)| name.clone()),
        );
        if self.shards[shard].resync {
            // Breakers open here that the store may not know.
            let keys = &self.store.keys;
            self.registry
                .coordination()
                .for_each_coordination_view(|name, v| {
                    if v.state == BreakerState::Open && keys.shard_of(name) == shard {
                        names.insert(name.to_owned());
                    }
                });
        }
        let names: Vec<String> = names
            .into_iter()
            .filter(|n| self.tool(n).is_some())
            .collect();
        let mut streaks = Vec::new();
        for batch in names.chunks(READ_BATCH) {
            let mut keys = set_keys.clone();
            let mut args = vec![batch.len().to_string()];
            for name in batch {
                let hex = &self.tools[name].hex;
                let k = &self.store.keys;
                keys.extend([
                    k.tool(shard, "t", hex),
                    k.tool(shard, "c", hex),
                    k.tool(shard, "k", hex),
                ]);
                args.push(hex.clone());
            }
            let reply = self.store.call(shard, Which::Read, keys, args).await?;
            let Some(r) = wire::poll_reply(&reply) else {
                return Err(StoreError::Reply);
            };
            self.note(shard, r.boot, r.corrupt);
            self.reject(Rejected::Reply, r.value.unreadable);
            for polled in r.value.tools {
                self.apply_state(&polled.tool, polled.state, Source::Read)
                    .await;
                self.apply_control(&polled.tool, polled.control, Source::Read);
            }
            streaks.extend(r.value.streaks);
        }
        self.polled_streaks(shard, streaks, complete).await;
        self.shards[shard].read = Some((index.boot, index.seq));
        Ok(())
    }

    /// Re-publishes every breaker open here of shard `shard`'s tools that has no fleet episode
    /// (after an outage, a shard that lost its data, lost local events). Whether the shard
    /// answered throughout.
    pub(super) async fn republish(&mut self, shard: usize) -> bool {
        if std::mem::take(&mut self.lost_events) {
            self.settle_unheard().await;
        }
        let mut open = Vec::new();
        let keys = &self.store.keys;
        self.registry
            .coordination()
            .for_each_coordination_view(|name, v| {
                if v.state == BreakerState::Open && keys.shard_of(name) == shard {
                    open.push((name.to_owned(), v.ready_in.unwrap_or(v.recovery)));
                }
            });
        for (tool, remaining) in open {
            let has_episode = self
                .tools
                .get(&tool)
                .is_some_and(|t| t.episode.is_some() || t.future);
            if !has_episode && !self.trip(&tool, remaining, true).await {
                return false;
            }
        }
        self.shards[shard].resync = false;
        true
    }

    /// After local transitions were lost (more than the queue holds): the probes of this
    /// replica's episodes that ended unheard are settled from the breakers' state — a breaker
    /// closed under a claim this replica held closes the episode fleet-wide; one open again
    /// after the probe was granted here opens the next — and episodes whose breaker closed some
    /// other way are dropped. (Trips lost the same way are re-published below.)
    async fn settle_unheard(&mut self) {
        let mut ended = Vec::new();
        for (tool, ts) in &self.tools {
            let Some(e) = &ts.episode else { continue };
            let Some(view) = self.registry.coordination().coordination_view(tool) else {
                continue;
            };
            let held = matches!(e.claim, Claim::Won { .. } | Claim::Probing { .. });
            match view.state {
                BreakerState::Closed => ended.push((tool.clone(), held.then_some(true))),
                BreakerState::Open if matches!(e.claim, Claim::Probing { .. }) => {
                    ended.push((tool.clone(), Some(false)));
                }
                _ => {}
            }
        }
        for (tool, settle) in ended {
            tracing::debug!(
                target: LOG_TARGET,
                replica = %self.shared.replica,
                tool,
                ?settle,
                "fleet: a probe's end was not heard (local events lost); settled from the breaker"
            );
            match settle {
                Some(closed) => {
                    self.settle(&tool, closed).await;
                    if closed {
                        self.registry.coordination().end_coordination(&tool);
                    }
                }
                None => {
                    if let Some(ts) = self.tools.get_mut(&tool) {
                        ts.episode = None;
                    }
                    self.registry.coordination().end_coordination(&tool);
                }
            }
        }
    }

    /// Forgets tools the registry no longer tracks and the fleet holds nothing for (and their
    /// names behind the outcome listener's keys).
    pub(super) fn forget_idle(&mut self) {
        let registry = Arc::clone(&self.registry);
        let tracked = registry.tracked_tools();
        if self.names.len() > tracked {
            // The names behind the outcome listener's keys: of tracked tools only.
            self.names
                .retain(|_, name| registry.coordination().coordination_view(name).is_some());
        }
        if self.tools.len() <= tracked {
            return;
        }
        self.tools.retain(|name, t| {
            t.holds_state() || registry.coordination().coordination_view(name).is_some()
        });
    }
}
