//! The gate: `allow_request`, `check`, and the pure oracle `is_tool_available`.

use std::time::Duration;

use crate::call::{CallOutcome, GateDecision, Permit};
use crate::control::{Control, ToolControl};
use crate::hook;

use super::entry::Entry;
use super::names::NameIndex;
use super::observers::CallEvent;
use super::ToolHealthRegistry;

/// The decision for a tool the registry does not track: always allowed, generation 0.
const ALLOWED_UNTRACKED: GateDecision = GateDecision::Allowed(Permit::admitted(0));

impl ToolHealthRegistry {
    /// The mutating gate: may this call go to the tool now? May grant the single probe.
    ///
    /// Inside a tool span watched by a [`ToolHealthLayer`](crate::ToolHealthLayer), the
    /// decision is bound to that span (see [`ToolHealthRegistry::check`]).
    #[inline(always)]
    pub fn allow_request(&self, tool: &str) -> bool {
        self.check(tool).is_allowed()
    }

    /// The gate with its whole answer: allowed, probe (with the permit to report through) or
    /// refused (with when to retry).
    ///
    /// When called inside a tool span (the current span or its nearest tool-span ancestor) of a
    /// subscriber that has a [`ToolHealthLayer`](crate::ToolHealthLayer) for this registry, the
    /// decision is bound to that span: the span's outcome is recorded with the permit, a refused
    /// span records nothing but the refusal, and the span is annotated. Outside any tool span
    /// this is [`ToolHealthRegistry::check_detached`].
    #[inline(always)]
    pub fn check(&self, tool: &str) -> GateDecision {
        let decision = self.check_detached(tool);
        hook::bind(self.address(), tool, &decision);
        decision
    }

    /// The gate, never bound to a span.
    #[inline(always)]
    pub fn check_detached(&self, tool: &str) -> GateDecision {
        match &self.names {
            NameIndex::AppendOnly(index) => {
                self.check_on_entry(tool, index.get(tool).map(|e| &**e))
            }
            NameIndex::Evictable(_) => self.check_evictable(tool),
        }
    }

    /// [`check_detached`](Self::check_detached) in an evicting registry, out of line.
    #[inline(never)]
    fn check_evictable(&self, tool: &str) -> GateDecision {
        let mut slot = None;
        let entry = self.names.get(tool, &mut slot);
        self.check_on_entry(tool, entry.map(|e| &**e))
    }

    /// The gate on a resolved entry (`None`: an untracked tool, always allowed): the one
    /// implementation behind the by-name gate and [`ToolHandle`](crate::ToolHandle).
    #[inline(always)]
    pub(super) fn check_on_entry(&self, tool: &str, entry: Option<&Entry>) -> GateDecision {
        let Some(e) = entry else {
            return ALLOWED_UNTRACKED;
        };
        // No control and a Closed breaker: admitted on two loads, no clock read, no write.
        if e.control.raw() == 0 {
            if let Some(generation) = e.breaker.closed_generation() {
                return GateDecision::Allowed(Permit::admitted(generation));
            }
        }
        self.check_slow(tool, e)
    }

    /// The gate past the Closed fast path: controls, refusals, the probe. Out of line to keep
    /// the Closed path small enough to inline.
    #[inline(never)]
    fn check_slow(&self, tool: &str, e: &Entry) -> GateDecision {
        if self.evicting && e.is_retired() {
            // A handle on an evicted tool: the live entry, if any, decides.
            return self
                .names
                .with(tool, |live| {
                    if live.is_retired() {
                        ALLOWED_UNTRACKED
                    } else {
                        self.check_on_entry(tool, Some(live))
                    }
                })
                .unwrap_or(ALLOWED_UNTRACKED);
        }
        let decision = self.gate_entry(e);
        if let GateDecision::Refused { .. } = decision {
            self.notify_call(|| CallEvent {
                tool,
                outcome: CallOutcome::Refused,
                duration: Duration::ZERO,
                error_type: None,
                overflow: false,
            });
        }
        decision
    }

    /// The gate on a known tool: operator control first, then the breaker.
    #[inline]
    fn gate_entry(&self, e: &Entry) -> GateDecision {
        let control = e.control.raw();
        if control == 0 {
            // The common refusal: an Open breaker still cooling down, decided on one load and
            // one coarse clock read, without the full step. The coarse reading lags, never
            // leads: it can keep the breaker open a tick longer, never end a cooldown early.
            if let Some(retry_after) = e.breaker.refusal_while_open(|| self.coarse_now_ticks()) {
                e.stats.record_refused();
                return GateDecision::Refused { retry_after };
            }
            let (decision, recorded) = e.breaker.acquire(|| self.now_ticks());
            if !decision.is_allowed() {
                e.stats.record_refused();
            }
            self.notify_transitions(&e.name, &recorded);
            return decision;
        }
        self.gate_controlled(e, control)
    }

    #[cold]
    fn gate_controlled(&self, e: &Entry, control: u64) -> GateDecision {
        let ctl = Control::decode(control);
        let now = self.now_ticks();
        if let Some(until) = ctl.forced_open_until(now) {
            e.stats.record_refused();
            return GateDecision::Refused {
                retry_after: until.until(now).to_duration(),
            };
        }
        let generation = e.breaker.load().generation;
        if ctl.mode == ToolControl::ForcedClosed {
            return GateDecision::Allowed(Permit::admitted(generation));
        }
        let (decision, recorded) = e.breaker.acquire(|| now);
        self.notify_transitions(&e.name, &recorded);
        match decision {
            GateDecision::Refused { .. } if ctl.shadow => {
                e.stats.record_shadow_refused();
                GateDecision::Allowed(Permit::shadow_refused(generation))
            }
            GateDecision::Refused { .. } => {
                e.stats.record_refused();
                decision
            }
            d => d,
        }
    }

    /// The pure availability oracle: exactly what [`allow_request`](Self::allow_request) would
    /// answer at this instant, without consuming the probe or creating anything.
    pub fn is_tool_available(&self, tool: &str) -> bool {
        self.with_entry(tool, |e| self.available_on_entry(e))
            .unwrap_or(true)
    }

    /// [`is_tool_available`](Self::is_tool_available) on a resolved entry.
    pub(super) fn available_on_entry(&self, e: &Entry) -> bool {
        if self.evicting && e.is_retired() {
            return self.is_tool_available(&e.name);
        }
        let control = e.control.raw();
        if control == 0 {
            // The gate's own two readings, in its order (see `gate_entry`).
            return e
                .breaker
                .refusal_while_open(|| self.coarse_now_ticks())
                .is_none()
                && e.breaker.would_allow(|| self.now_ticks());
        }
        let ctl = Control::decode(control);
        let now = self.now_ticks();
        if ctl.forced_open_until(now).is_some() {
            return false;
        }
        ctl.mode == ToolControl::ForcedClosed || ctl.shadow || e.breaker.would_allow(|| now)
    }
}
