//! Episodes: local transitions published to the store (trips, probe results) and what other
//! replicas did applied here.

use super::*;

impl Task {
    pub(super) async fn on_local(&mut self, ev: LocalEvent) {
        let t = ev.transition;
        match (t.from, t.to, t.reason) {
            (BreakerState::Closed, BreakerState::Open, _) => self.publish_trip(&ev.tool).await,
            (BreakerState::HalfOpen, BreakerState::Closed, _) => {
                self.settle(&ev.tool, true).await;
                self.registry.coordination().end_coordination(&ev.tool);
            }
            (
                BreakerState::HalfOpen,
                BreakerState::Open,
                TransitionReason::ProbeFailed | TransitionReason::LeaseExpired,
            ) => self.settle(&ev.tool, false).await,
            (BreakerState::Open, BreakerState::HalfOpen, _) => self.probe_granted(&ev.tool).await,
            (BreakerState::HalfOpen, BreakerState::Open, TransitionReason::ProbeReleased) => {
                self.probe_given_back(&ev.tool).await;
            }
            _ => {}
        }
    }

    /// This replica's breaker tripped: join or open the fleet's episode.
    pub(super) async fn publish_trip(&mut self, tool: &str) {
        let Some(view) = self.registry.coordination().coordination_view(tool) else {
            return;
        };
        if view.state != BreakerState::Open {
            return; // moved on already (the next event says how)
        }
        let cooldown = view.ready_in.unwrap_or(view.recovery);
        self.trip(tool, cooldown, true).await;
    }

    /// Runs the trip script for `tool` with `cooldown`; adopts the episode it answers.
    pub(super) async fn trip(
        &mut self,
        tool: &str,
        cooldown: Duration,
        tripped_here: bool,
    ) -> bool {
        let replica = self.shared.replica;
        let (quorum, window) = (self.settings.quorum, self.settings.quorum_window);
        let Some(ts) = self.tool(tool) else {
            return true;
        };
        if ts.future {
            return true;
        }
        let (shard, hex) = (ts.shard, ts.hex.clone());
        let args = vec![
            hex.clone(),
            ts.known_ep.to_string(),
            arg_ms(cooldown).to_string(),
            replica.to_string(),
            quorum.to_string(),
            arg_ms(window).to_string(),
        ];
        let keys = self.keys(
            shard,
            &hex,
            &[
                Part::State,
                Part::Streak,
                Part::Streaks,
                Part::Open,
                Part::Quorum,
            ],
        );
        let reply = match self.store.call(shard, Which::Trip, keys, args).await {
            Ok(f) => f,
            Err(e) => {
                self.store_failed(shard, &e);
                return false;
            }
        };
        let Some(r) = wire::trip_reply(&reply) else {
            self.reject(Rejected::Reply, 1);
            return false;
        };
        self.note(shard, r.boot, r.corrupt);
        match r.value {
            TripReply::Open { ep, remaining, .. } => {
                self.adopt(tool, ep, remaining, tripped_here);
            }
            TripReply::Vote { .. } => {}
            TripReply::Future => {
                if let Some(ts) = self.tool(tool) {
                    ts.future = true;
                }
                self.reject(Rejected::Future, 1);
            }
        }
        true
    }

    /// The local breaker is open for fleet episode `ep`, whose probe may start in `remaining`.
    pub(super) fn adopt(&mut self, tool: &str, ep: u64, remaining: Duration, tripped_here: bool) {
        self.streak_over(tool);
        let Some(ts) = self.tool(tool) else { return };
        ts.known_ep = ts.known_ep.max(ep);
        // A replica of this very episode does not re-apply it (a poll, an echo).
        if ts.episode.as_ref().is_some_and(|e| e.ep == ep) {
            return;
        }
        // Read before the open: `ready_at` may then be a hair early (a claim a hair early),
        // never late — a clock that moved between two readings must not push the claim past the
        // moment the local gate would let the probe through.
        let before = self.now();
        let Some(opened) =
            self.registry
                .coordination()
                .open_remotely(tool, remaining, !tripped_here)
        else {
            return; // past the registry's cap: this tool is not tracked here
        };
        tracing::debug!(
            target: LOG_TARGET,
            replica = %self.shared.replica,
            tool,
            ep,
            ?remaining,
            tripped_here,
            generation = opened.generation,
            "fleet: episode adopted"
        );
        if !tripped_here && !opened.recorded.is_empty() {
            self.shared.applied[OPEN].fetch_add(1, Ordering::Relaxed);
        }
        let refused = self
            .registry
            .coordination()
            .coordination_view(tool)
            .map_or(0, |v| v.refused);
        let episode = Episode {
            ep,
            generation: opened.generation,
            ready_at: before.saturating_add(opened.ready_in),
            tripped_here,
            demand_base: refused,
            claim: Claim::Pending,
            hold: None,
        };
        if let Some(ts) = self.tools.get_mut(tool) {
            ts.episode = Some(episode);
        }
        self.hold_for_claim(tool);
    }

    /// The probe of this replica's episode ended: `closed` (it succeeded) or not.
    pub(super) async fn settle(&mut self, tool: &str, closed: bool) {
        let replica = self.shared.replica;
        let cooldown = self
            .registry
            .coordination()
            .coordination_view(tool)
            .and_then(|v| v.ready_in.or(Some(v.recovery)))
            .unwrap_or_default();
        let Some(ts) = self.tool(tool) else { return };
        let Some(e) = ts.episode.clone() else {
            // Not a fleet episode here (acting alone, or never shared): a new trip if it
            // re-opened; a close of nothing the store knows is nothing to say.
            if !closed {
                self.publish_trip(tool).await;
            }
            return;
        };
        let (shard, hex) = (ts.shard, ts.hex.clone());
        let args = vec![
            hex.clone(),
            e.ep.to_string(),
            if closed { "c" } else { "o" }.to_owned(),
            arg_ms(cooldown).to_string(),
            replica.to_string(),
        ];
        if closed {
            ts.episode = None;
        }
        let keys = self.keys(
            shard,
            &hex,
            &[
                Part::State,
                Part::Lease(e.ep),
                Part::Streak,
                Part::Streaks,
                Part::Open,
            ],
        );
        let reply = match self.store.call(shard, Which::Settle, keys, args).await {
            Ok(f) => f,
            Err(err) => {
                self.store_failed(shard, &err);
                return;
            }
        };
        let Some(r) = wire::settle_reply(&reply) else {
            self.reject(Rejected::Reply, 1);
            return;
        };
        self.note(shard, r.boot, r.corrupt);
        match r.value {
            SettleReply::Closed { ep } => {
                if let Some(ts) = self.tools.get_mut(tool) {
                    ts.known_ep = ts.known_ep.max(ep);
                }
            }
            SettleReply::Reopened { ep, remaining } => {
                if let Some(ts) = self.tools.get_mut(tool) {
                    ts.episode = None;
                }
                self.adopt(tool, ep, remaining, true);
            }
            // Another replica holds this episode's probe (this one acted alone): its result
            // will spread; this replica's own breaker keeps what its probe said.
            SettleReply::Held { .. } => {}
            SettleReply::Stale(state) => self.apply_state(tool, state, Source::Read).await,
        }
    }

    pub(super) async fn on_message(&mut self, shard: usize, m: &fred::types::Message) {
        if self.store.keys.shard_of_channel(&m.channel) != Some(shard) {
            return;
        }
        let Some(event) = m.value.as_bytes().and_then(wire::event) else {
            self.reject(Rejected::Message, 1);
            return;
        };
        if self.store.keys.shard_of(&event.tool) != shard {
            self.reject(Rejected::Message, 1);
            return;
        }
        if self.shards[shard].boot != Some(event.boot) {
            // Not the shard this replica last read (or none yet): read it before anything.
            let _ = self.round(true).await;
            if self.shards[shard].boot != Some(event.boot) {
                return;
            }
        }
        let mine = event.by == self.shared.replica;
        match event.kind {
            wire::EventKind::Open {
                ep,
                remaining,
                cooldown: _,
            } => {
                let state = SharedState::Open {
                    ep,
                    remaining,
                    cooldown: remaining,
                    by: event.by,
                };
                self.apply_state(&event.tool, state, Source::Message).await;
            }
            wire::EventKind::Close { ep } => {
                let state = SharedState::Closed { ep, by: event.by };
                self.apply_state(&event.tool, state, Source::Message).await;
            }
            wire::EventKind::Control(c) if !mine => {
                self.apply_control(&event.tool, ControlField::Ok(c), Source::Message);
            }
            wire::EventKind::Control(_) => {}
            wire::EventKind::Streak { threshold, .. } => {
                if self
                    .registry
                    .coordination()
                    .coordination_view(&event.tool)
                    .is_some()
                {
                    self.heard_streak(&event.tool, threshold).await;
                }
            }
            wire::EventKind::StreakOver => self.streak_over(&event.tool),
        }
    }

    /// Brings the local breaker in line with the tool's shared state.
    pub(super) async fn apply_state(&mut self, tool: &str, state: SharedState, _source: Source) {
        let replica = self.shared.replica;
        let Some(ts) = self.tool(tool) else { return };
        if ts.future {
            return;
        }
        match state {
            SharedState::Open {
                ep, remaining, by, ..
            } => {
                if ep > ts.known_ep {
                    self.adopt(tool, ep, remaining, by == replica);
                }
            }
            SharedState::Closed { ep, .. } => {
                ts.known_ep = ts.known_ep.max(ep);
                if let Some(e) = ts.episode.take_if(|e| e.ep <= ep) {
                    let recorded = self
                        .registry
                        .coordination()
                        .close_remotely(tool, e.generation);
                    tracing::debug!(
                        target: LOG_TARGET,
                        replica = %replica,
                        tool,
                        ep,
                        generation = e.generation,
                        closed = !recorded.is_empty(),
                        "fleet: episode closed elsewhere"
                    );
                    if !recorded.is_empty() {
                        self.shared.applied[CLOSE].fetch_add(1, Ordering::Relaxed);
                    }
                    self.registry.coordination().end_coordination(tool);
                }
            }
            SharedState::None => {
                // The store lost an episode this replica's breaker is open for: say it again.
                if let Some(e) = ts.episode.take() {
                    let remaining = self
                        .registry
                        .coordination()
                        .coordination_view(tool)
                        .and_then(|v| v.ready_in)
                        .unwrap_or_default();
                    let _ = e;
                    self.trip(tool, remaining, true).await;
                }
            }
            SharedState::Corrupt => {
                // Counted by the script that met it; the next trip replaces it. Meanwhile
                // this replica acts alone for the tool's episode.
                if let Some(e) = ts.episode.as_mut() {
                    e.claim = Claim::Alone;
                    if let Some(hold) = e.hold.take() {
                        self.registry.coordination().release_hold(tool, hold);
                    }
                }
            }
            SharedState::Future => {
                ts.future = true;
                if let Some(e) = ts.episode.as_mut() {
                    e.claim = Claim::Alone;
                    if let Some(hold) = e.hold.take() {
                        self.registry.coordination().release_hold(tool, hold);
                    }
                }
                self.reject(Rejected::Future, 1);
            }
        }
    }
}
