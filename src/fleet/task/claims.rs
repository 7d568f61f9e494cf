//! The probe: claims in the store, holds on the local gate, and the winner's lease kept
//! covering the probe it lets through.
//!
//! # The lease covers the probe in flight
//!
//! A won claim lets the local gate grant the probe only while the store's lease can still be
//! made to cover it: from the cooldown's end until `lead` (twice the command timeout) before the
//! lease ends (the *grant window*; the claim's lease runs the probe lease plus `2 × lead` past
//! the cooldown, so the window is the probe lease plus `lead` long). When the gate grants, the
//! task extends the lease to cover the local probe's own lease plus `lead` from then (the
//! `lease` script: only the holder's lease is touched), and keeps extending it while a probe
//! without a lease of its own is in flight. A window that passes with no probe puts the hold
//! back; the replica claims again when the lease ends, as the others do. A probe given back (a
//! caller error, a cancellation) gives the claim back: the lease goes and the claim is made
//! again through the store.
//!
//! So while every replica's task runs within its `lead`, no probe outlives its replica's lease,
//! and no other replica wins the probe while one is in flight: one probe per fleet per episode.
//! A replica whose task is held up past its margin (or whose store does not answer) may probe
//! on its own — the documented price of never blocking a call on the store.

use super::*;

/// The probe claim of one episode.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Claim {
    /// Not made yet.
    Pending,
    /// This replica holds the probe; its lease ends at `lease_end` at the earliest (registry
    /// clock): the gate may grant it until `lead` before.
    Won { lease_end: Duration },
    /// This replica's gate granted the probe; the lease covers it until `lease_end` at the
    /// earliest.
    Probing { lease_end: Duration },
    /// Another replica holds it until `until` (registry clock): claim again then.
    Lost { until: Duration },
    /// The store could not answer: this replica acts alone for this episode.
    Alone,
}

/// What a claim that fell due asks of the store.
#[derive(Debug, Clone, Copy)]
enum Due {
    /// Make the claim (`lease`: how long it lasts past the cooldown).
    Claim { lease: Duration },
    /// The grant window passed with no probe: hold again, claim again at `lease_end`.
    WindowOver { lease_end: Duration },
    /// A probe is in flight: keep its lease covering it.
    Renew,
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

    /// How long a probe here is covered: its own lease (the fleet's `probe_lease` for a tool
    /// without one).
    fn probe_cover(&self, view: &CoordinationView) -> Duration {
        if view.probe_timeout.is_zero() {
            self.settings.probe_lease
        } else {
            view.probe_timeout
        }
    }

    /// Makes every probe claim that is due.
    pub(super) async fn claims(&mut self) {
        let now = self.now();
        let lead = self.settings.lead;
        let probe_lease = self.settings.probe_lease;
        let mut due = Vec::new();
        for (tool, ts) in &mut self.tools {
            let Some(e) = &mut ts.episode else { continue };
            if e.claim == Claim::Alone && self.shards[ts.shard].connected {
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
                let cover = if view.probe_timeout.is_zero() {
                    probe_lease
                } else {
                    view.probe_timeout
                };
                let what = match e.claim {
                    Claim::Won { lease_end } => Due::WindowOver { lease_end },
                    Claim::Probing { .. } => Due::Renew,
                    _ => Due::Claim {
                        lease: cover.saturating_add(lead.saturating_mul(2)),
                    },
                };
                due.push((tool.clone(), ts.hex.clone(), e.ep, what));
            }
        }
        for (tool, hex, ep, what) in due {
            match what {
                Due::Claim { lease } => self.claim(&tool, &hex, ep, lease).await,
                Due::WindowOver { lease_end } => self.window_over(&tool, ep, lease_end),
                Due::Renew => self.renew(&tool, ep).await,
            }
        }
    }

    /// The grant window of a won claim passed and the gate granted no probe: the hold comes
    /// back until the lease ends (plus the next claim's margin), when the claim is made again.
    fn window_over(&mut self, tool: &str, ep: u64, lease_end: Duration) {
        let now = self.now();
        let lead = self.settings.lead;
        let registry = Arc::clone(&self.registry);
        let Some(e) = self.episode_mut(tool, ep) else {
            return;
        };
        let hold = registry.coordination().hold_probe(
            tool,
            lease_end
                .saturating_sub(now)
                .saturating_add(lead.saturating_mul(2)),
        );
        if hold.is_none()
            && registry
                .coordination()
                .coordination_view(tool)
                .is_some_and(|v| v.state == BreakerState::HalfOpen)
        {
            return; // granted just now: the grant's event extends the lease
        }
        e.hold = hold;
        e.claim = Claim::Lost { until: lease_end };
        tracing::debug!(
            target: LOG_TARGET,
            replica = %self.shared.replica,
            tool,
            ep,
            "fleet: no call took the probe within its claim; holding until the lease ends"
        );
    }

    /// The lease of a probe this replica granted is about to end: extended while the probe is
    /// in flight (a probe without a lease of its own), else left to end — a probe whose lease
    /// expired here is over, whether or not a call has written the expiry yet — and claimed
    /// again when it does.
    async fn renew(&mut self, tool: &str, ep: u64) {
        let in_flight = self
            .registry
            .coordination()
            .coordination_view(tool)
            .is_some_and(|v| v.state == BreakerState::HalfOpen);
        if in_flight {
            self.extend(tool, ep).await;
        } else if let Some(e) = self.episode_mut(tool, ep) {
            if let Claim::Probing { lease_end } = e.claim {
                e.claim = Claim::Lost { until: lease_end };
            }
        }
    }

    /// The local gate granted the probe of `tool`'s fleet episode: the lease must cover it in
    /// flight (see the module docs).
    pub(super) async fn probe_granted(&mut self, tool: &str) {
        let Some(e) = self.tools.get(tool).and_then(|t| t.episode.as_ref()) else {
            return; // not a fleet episode here
        };
        if e.claim == Claim::Alone {
            return;
        }
        let ep = e.ep;
        self.extend(tool, ep).await;
    }

    /// Extends this replica's lease on episode `ep`'s probe to cover the probe in flight here.
    pub(super) async fn extend(&mut self, tool: &str, ep: u64) {
        let Some(view) = self.registry.coordination().coordination_view(tool) else {
            return;
        };
        let lead = self.settings.lead;
        let cover = self.probe_cover(&view).saturating_add(lead);
        let replica = self.shared.replica;
        let Some((shard, hex)) = self.tools.get(tool).map(|t| (t.shard, t.hex.clone())) else {
            return;
        };
        let sent = self.now();
        let keys = self.keys(shard, &hex, &[Part::State, Part::Lease(ep)]);
        let args = vec![
            hex,
            ep.to_string(),
            replica.to_string(),
            "extend".to_owned(),
            arg_ms(cover).to_string(),
        ];
        let reply = match self.store.call(shard, Which::Lease, keys, args).await {
            Ok(f) => f,
            Err(e) => {
                self.store_failed(shard, &e);
                self.go_alone(tool);
                return;
            }
        };
        let Some(r) = wire::lease_reply(&reply, replica) else {
            self.reject(Rejected::Reply, 1);
            self.go_alone(tool);
            return;
        };
        self.note(shard, r.boot, r.corrupt);
        tracing::debug!(
            target: LOG_TARGET,
            replica = %replica,
            tool,
            ep,
            reply = ?r.value,
            "fleet: probe lease extended"
        );
        let now = self.now();
        match r.value {
            LeaseReply::Held { ttl } => {
                if let Some(e) = self.episode_mut(tool, ep) {
                    e.claim = Claim::Probing {
                        lease_end: sent.saturating_add(ttl),
                    };
                }
            }
            LeaseReply::Lost { holder, ttl } => {
                // This replica's task came too late: another replica holds the probe now.
                tracing::debug!(
                    target: LOG_TARGET,
                    replica = %replica,
                    tool,
                    ep,
                    %holder,
                    "fleet: the probe granted here outlived this replica's claim"
                );
                if let Some(e) = self.episode_mut(tool, ep) {
                    e.claim = Claim::Lost {
                        until: now.saturating_add(ttl),
                    };
                }
            }
            LeaseReply::Released | LeaseReply::None => {}
            LeaseReply::Stale(state) => self.apply_state(tool, state, Source::Read).await,
        }
    }

    /// The probe of `tool`'s fleet episode was given back here without a verdict (a caller
    /// error, a cancellation): so is the claim — the lease goes, and the claim is made again
    /// through the store (at once: the call that gave it back wants the tool). A probe granted
    /// again here in between keeps the claim (its grant extends the lease).
    pub(super) async fn probe_given_back(&mut self, tool: &str) {
        let now = self.now();
        let lead = self.settings.lead;
        let Some(ts) = self.tools.get_mut(tool) else {
            return;
        };
        let (shard, hex) = (ts.shard, ts.hex.clone());
        let Some(e) = ts.episode.as_mut() else {
            return;
        };
        if !matches!(e.claim, Claim::Won { .. } | Claim::Probing { .. }) {
            return;
        }
        let Some(hold) = self
            .registry
            .coordination()
            .hold_probe(tool, lead.saturating_mul(2))
        else {
            return; // a probe in flight here again: the claim stands
        };
        let ep = e.ep;
        e.hold = Some(hold);
        e.claim = Claim::Pending;
        e.ready_at = now;
        e.tripped_here = true;
        let replica = self.shared.replica;
        let keys = self.keys(shard, &hex, &[Part::State, Part::Lease(ep)]);
        let args = vec![
            hex,
            ep.to_string(),
            replica.to_string(),
            "release".to_owned(),
            "0".to_owned(),
        ];
        let reply = match self.store.call(shard, Which::Lease, keys, args).await {
            Ok(f) => f,
            Err(e) => {
                self.store_failed(shard, &e);
                self.go_alone(tool);
                return;
            }
        };
        let Some(r) = wire::lease_reply(&reply, replica) else {
            self.reject(Rejected::Reply, 1);
            self.go_alone(tool);
            return;
        };
        self.note(shard, r.boot, r.corrupt);
        tracing::debug!(
            target: LOG_TARGET,
            replica = %replica,
            tool,
            ep,
            reply = ?r.value,
            "fleet: probe given back, and its claim"
        );
        if let LeaseReply::Stale(state) = r.value {
            self.apply_state(tool, state, Source::Read).await;
        }
        self.claims().await;
    }

    pub(super) async fn claim(&mut self, tool: &str, hex: &str, ep: u64, lease: Duration) {
        let replica = self.shared.replica;
        let shard = self.store.keys.shard_of(tool);
        // The lease ends no sooner than its ttl from now: the server counted it after this.
        let sent = self.now();
        let keys = self.keys(shard, hex, &[Part::State, Part::Lease(ep)]);
        let args = vec![
            hex.to_owned(),
            ep.to_string(),
            replica.to_string(),
            arg_ms(lease).to_string(),
        ];
        let reply = self.store.call(shard, Which::Claim, keys, args).await;
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
                self.store_failed(shard, &e);
                self.go_alone(tool);
            }
            (Ok(_), None) => {
                self.reject(Rejected::Reply, 1);
                self.go_alone(tool);
            }
            (Ok(_), Some(r)) => {
                self.note(shard, r.boot, r.corrupt);
                match r.value {
                    ClaimReply::Won { ttl } => {
                        if let Some(e) = self.episode_mut(tool, ep) {
                            e.claim = Claim::Won {
                                lease_end: sent.saturating_add(ttl),
                            };
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
        // The end of the grant window; the lease renewed before it ends.
        Claim::Won { lease_end } | Claim::Probing { lease_end } => {
            Some(lease_end.saturating_sub(lead))
        }
        Claim::Alone => None,
    }
}
