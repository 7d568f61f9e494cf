//! Rounds: one complete exchange with the store.

use super::*;

impl Task {
    /// One complete exchange: local events, the store's state, resync, claims, counts.
    pub(super) async fn round(&mut self) -> Result<(), FleetError> {
        while let Ok(ev) = self.local.try_recv() {
            self.on_local(ev).await;
        }
        if self.overflow.swap(false, Ordering::Relaxed) {
            self.resync = true;
        }
        let mut result = Ok(());
        if let Err(e) = self.store.ensure_subscribed().await {
            self.store_failed(&e);
            result = Err(e.to_fleet());
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
        self.rates().await;
        self.forget_idle();
        if result.is_ok() && self.shared.is_connected() {
            self.connected();
        }
        result
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
        Ok(())
    }

    /// Re-publishes every breaker open here that has no fleet episode (after an outage, a
    /// store that lost its data, lost local events). Whether the store answered throughout.
    pub(super) async fn republish(&mut self) -> bool {
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

    /// Forgets tools the registry no longer tracks and the fleet holds nothing for.
    pub(super) fn forget_idle(&mut self) {
        if self.tools.len() <= self.registry.tracked_tools() {
            return;
        }
        let registry = Arc::clone(&self.registry);
        self.tools.retain(|name, t| {
            t.holds_state() || registry.coordination().coordination_view(name).is_some()
        });
    }
}
