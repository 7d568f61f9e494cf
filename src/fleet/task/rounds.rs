//! Rounds: one complete exchange with the store.

use super::*;

impl Task {
    /// One complete exchange: local events, the subscription, the store's state, resync,
    /// claims, streaks, counts.
    pub(super) async fn round(&mut self) -> Result<(), FleetError> {
        while let Ok(ev) = self.local.try_recv() {
            self.on_local(ev).await;
        }
        if self.overflow.swap(false, Ordering::Relaxed) {
            self.resync = true;
            self.lost_events = true;
        }
        let mut result = Ok(());
        // Subscribed before the store is read: whatever is published from then on is heard,
        // whatever was published before is in what the poll reads.
        if !self.subscribed || !self.store.subscriber_connected() {
            self.subscribed = false;
            match self.store.subscribe().await {
                Ok(()) => self.subscribed = true,
                Err(e) => {
                    self.store_failed(&e);
                    result = Err(e.to_fleet());
                }
            }
        }
        match self.poll().await {
            Ok(()) => {}
            Err(e) => {
                self.store_failed(&e);
                return Err(e.to_fleet());
            }
        }
        if self.resync && !self.republish().await {
            return Err(FleetError::Unavailable(
                "the store stopped answering".into(),
            ));
        }
        self.claims().await;
        self.streaks().await;
        self.rates().await;
        self.forget_idle();
        if result.is_ok() && self.shared.is_connected() {
            self.connected();
        }
        result
    }

    /// Subscribes again (after the subscriber reconnected, or when it is not subscribed), then
    /// reads the store: what was published while the subscription was down is in what the poll
    /// reads (and open breakers are re-published if the store needs them).
    pub(super) async fn resubscribe(&mut self) {
        if !self.subscribed || !self.store.subscriber_connected() {
            if let Err(e) = self.store.subscribe().await {
                self.subscribed = false;
                self.store_failed(&e);
                return;
            }
            self.subscribed = true;
        }
        if let Err(e) = self.poll().await {
            self.store_failed(&e);
            return;
        }
        if self.resync {
            let _ = self.republish().await;
        }
    }

    /// Reads the store's state of every tool this replica holds state for, and of the tools
    /// open or controlled fleet-wide; applies it.
    pub(super) async fn poll(&mut self) -> Result<(), StoreError> {
        let mut args = vec![POLL_OPEN_MAX.to_string()];
        let mut interest: Vec<String> = self
            .tools
            .values()
            .filter(|t| t.holds_state())
            .map(|t| t.hex.clone())
            .collect();
        if self.resync {
            // Breakers open here that the store may not know.
            let mut open = Vec::new();
            self.registry
                .coordination()
                .for_each_coordination_view(|name, v| {
                    if v.state == BreakerState::Open {
                        open.push(name.to_owned());
                    }
                });
            for name in open {
                if let Some(ts) = self.tool(&name) {
                    interest.push(ts.hex.clone());
                }
            }
        }
        args.push(interest.len().to_string());
        args.extend(interest);
        let reply = self.store.call(&self.store.scripts.poll, args).await?;
        let Some(r) = wire::poll_reply(&reply) else {
            return Err(StoreError::Reply);
        };
        self.connected();
        self.note(r.boot, r.corrupt);
        self.reject(Rejected::Reply, r.value.unreadable);
        for polled in r.value.tools {
            self.apply_state(&polled.tool, polled.state, Source::Read)
                .await;
            self.apply_control(&polled.tool, polled.control, Source::Read);
        }
        // Every open streak, unless there were more than one poll lists.
        let complete = r.value.streaks.len() < POLL_OPEN_MAX;
        self.polled_streaks(r.value.streaks, complete).await;
        Ok(())
    }

    /// Re-publishes every breaker open here that has no fleet episode (after an outage, a
    /// store that lost its data, lost local events). Whether the store answered throughout.
    pub(super) async fn republish(&mut self) -> bool {
        if std::mem::take(&mut self.lost_events) {
            self.settle_unheard().await;
        }
        let mut open = Vec::new();
        self.registry
            .coordination()
            .for_each_coordination_view(|name, v| {
                if v.state == BreakerState::Open {
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
        self.resync = false;
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
