//! The probe: claims in the store, holds on the local gate.

use super::*;

/// The probe claim of one episode.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Claim {
    /// Not made yet.
    Pending,
    /// This replica holds the probe.
    Won,
    /// Another replica holds it until `until` (registry clock): claim again then.
    Lost { until: Duration },
    /// The store could not answer: this replica acts alone for this episode.
    Alone,
}

impl Task {
    /// Keeps the local gate from probing before this replica's claim is decided.
    pub(super) fn hold_for_claim(&mut self, tool: &str) {
        let now = self.now();
        let lead = self.settings.lead;
        let Some(view) = self.registry.coordination().coordination_view(tool) else {
            return;
        };
        let Some(e) = self.tools.get_mut(tool).and_then(|t| t.episode.as_mut()) else {
            return;
        };
        let Some(due) = claim_due(e, &view, lead) else {
            return;
        };
        // Until the claim is decided — made at `due`, answered within the command timeout's
        // bound — the local gate grants no probe, whether this replica has callers or not: a
        // claim made late (a busy task, a slow store) must not leave the probe to the local
        // gate alone. Won: the hold is released at once; lost: it becomes the winner's lease;
        // no answer: the replica acts alone when the hold ends.
        let until = due.max(now).saturating_add(lead.saturating_mul(2));
        if let Some(hold) = self
            .registry
            .coordination()
            .hold_probe(tool, until.saturating_sub(now))
        {
            e.hold = Some(hold);
        }
    }

    /// When the next probe claim falls due, as a tokio instant (at most a poll interval on).
    pub(super) fn next_claim_instant(&self) -> tokio::time::Instant {
        let now = self.now();
        let lead = self.settings.lead;
        let mut next = self.settings.poll_interval;
        for (tool, ts) in &self.tools {
            let Some(e) = &ts.episode else { continue };
            let Some(view) = self.registry.coordination().coordination_view(tool) else {
                continue;
            };
            if let Some(due) = claim_due(e, &view, lead) {
                next = next.min(due.saturating_sub(now));
            }
        }
        tokio::time::Instant::now() + next
    }

    /// Makes every probe claim that is due.
    pub(super) async fn claims(&mut self) {
        let now = self.now();
        let lead = self.settings.lead;
        let mut due = Vec::new();
        for (tool, ts) in &mut self.tools {
            let Some(e) = &mut ts.episode else { continue };
            if e.claim == Claim::Alone && self.shared.is_connected() {
                e.claim = Claim::Pending; // the store is back: through the lease again
            }
            let Some(view) = self.registry.coordination().coordination_view(tool) else {
                continue;
            };
            tracing::trace!(
                target: LOG_TARGET,
                replica = %self.shared.replica,
                tool = tool.as_str(),
                ep = e.ep,
                claim = ?e.claim,
                due = ?claim_due(e, &view, lead),
                ?now,
                ready_at = ?e.ready_at,
                "fleet: claim due?"
            );
            if claim_due(e, &view, lead).is_some_and(|d| d <= now) {
                let lease = if view.probe_timeout.is_zero() {
                    self.settings.probe_lease
                } else {
                    view.probe_timeout
                };
                due.push((tool.clone(), ts.hex.clone(), e.ep, lease));
            }
        }
        for (tool, hex, ep, lease) in due {
            self.claim(&tool, hex, ep, lease).await;
        }
    }

    pub(super) async fn claim(&mut self, tool: &str, hex: String, ep: u64, lease: Duration) {
        let replica = self.shared.replica;
        let args = vec![
            hex,
            ep.to_string(),
            replica.to_string(),
            arg_ms(lease).to_string(),
        ];
        let reply = self.store.call(&self.store.scripts.claim, args).await;
        let parsed = match &reply {
            Ok(f) => wire::claim_reply(f, replica),
            Err(_) => None,
        };
        let now = self.now();
        let lead = self.settings.lead;
        tracing::debug!(
            target: LOG_TARGET,
            replica = %self.shared.replica,
            tool,
            ep,
            reply = ?parsed.as_ref().map(|r| &r.value),
            "fleet: probe claim"
        );
        match (reply, parsed) {
            (Err(e), _) => {
                self.store_failed(&e);
                self.go_alone(tool);
            }
            (Ok(_), None) => {
                self.reject(Rejected::Reply, 1);
                self.go_alone(tool);
            }
            (Ok(_), Some(r)) => {
                self.note(r.boot, r.corrupt);
                match r.value {
                    ClaimReply::Won { .. } => {
                        if let Some(e) = self.episode_mut(tool, ep) {
                            e.claim = Claim::Won;
                            if let Some(hold) = e.hold.take() {
                                self.registry.coordination().release_hold(tool, hold);
                            }
                        }
                    }
                    ClaimReply::Lost { ttl, .. } => {
                        let registry = Arc::clone(&self.registry);
                        if let Some(e) = self.episode_mut(tool, ep) {
                            // The holder's lease ends at the latest `ttl` from now (it was
                            // counted on the server before this reply left it).
                            let until = now
                                .saturating_add(ttl)
                                .saturating_add(Duration::from_millis(1));
                            e.claim = Claim::Lost { until };
                            if let Some(hold) = registry.coordination().hold_probe(
                                tool,
                                until
                                    .saturating_sub(now)
                                    .saturating_add(lead.saturating_mul(2)),
                            ) {
                                e.hold = Some(hold);
                                self.shared.applied[HOLD].fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    ClaimReply::Stale(state) => self.apply_state(tool, state, Source::Read).await,
                }
            }
        }
    }

    pub(super) fn episode_mut(&mut self, tool: &str, ep: u64) -> Option<&mut Episode> {
        self.tools
            .get_mut(tool)?
            .episode
            .as_mut()
            .filter(|e| e.ep == ep)
    }

    /// The store cannot decide this episode's probe: the hold goes, the local gate decides.
    pub(super) fn go_alone(&mut self, tool: &str) {
        tracing::debug!(target: LOG_TARGET, replica = %self.shared.replica, tool, "fleet: acting alone");
        if let Some(e) = self.tools.get_mut(tool).and_then(|t| t.episode.as_mut()) {
            e.claim = Claim::Alone;
            if let Some(hold) = e.hold.take() {
                self.registry.coordination().release_hold(tool, hold);
            }
        }
    }
}

/// When `e`'s probe claim is due on the registry's clock (`None`: nothing to claim).
fn claim_due(e: &Episode, view: &CoordinationView, lead: Duration) -> Option<Duration> {
    match e.claim {
        Claim::Pending => {
            let demand = e.tripped_here || view.refused > e.demand_base;
            Some(if demand {
                e.ready_at.saturating_sub(lead)
            } else {
                e.ready_at.saturating_add(lead)
            })
        }
        Claim::Lost { until } => Some(until),
        Claim::Won | Claim::Alone => None,
    }
}
