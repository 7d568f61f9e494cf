//! The gate: `allow_request`, `check`, and the pure oracle `is_tool_available`.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::call::{CallOutcome, GateDecision, Permit};
use crate::control::Control;
use crate::hook;

use super::entry::Entry;
use super::names::{NameError, NameIndex};
use super::observers::CallEvent;
use super::ToolHealthRegistry;

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
    ///
    /// Tool spans of one tool nested in each other are one call: when the call already holds
    /// the probe of `tool` (an outer gate, such as a middleware's, was granted it), asking again
    /// from inside it answers that probe instead of refusing the call by its own probe.
    ///
    /// A name longer than [`max_name_len`](Self::max_name_len) is refused with
    /// `retry_after = Duration::MAX` (no tool by that name can ever be called), bound to no span
    /// and counted nowhere but [`OverflowStats::rejected_names`](crate::observe::OverflowStats):
    /// [`try_check`](Self::try_check) says why, and the model should be told the name is
    /// invalid, not [`REFUSAL_MESSAGE`](crate::REFUSAL_MESSAGE).
    #[inline(always)]
    pub fn check(&self, tool: &str) -> GateDecision {
        if hook::installed() {
            return self.check_hooked(tool);
        }
        self.check_detached(tool)
    }

    /// The gate, saying why it refuses a name: [`check`](Self::check)'s decision, or the
    /// [`NameError`] of a name longer than [`max_name_len`](Self::max_name_len) (an invalid
    /// argument of the model's: tell it so). Nothing is bound, recorded or copied for such a
    /// name.
    ///
    /// ```
    /// use tool_health::{GateDecision, ToolHealthRegistry, REFUSAL_MESSAGE};
    ///
    /// let registry = ToolHealthRegistry::new();
    /// let tool = "x".repeat(300); // from the model
    /// let text = match registry.try_check(&tool) {
    ///     Err(invalid) => invalid.to_string(),
    ///     Ok(GateDecision::Refused { .. }) => REFUSAL_MESSAGE.to_owned(),
    ///     Ok(_) => "call the tool".to_owned(),
    /// };
    /// assert_eq!(text, "invalid tool name: 300 bytes, longer than the 256 allowed");
    /// ```
    pub fn try_check(&self, tool: &str) -> Result<GateDecision, NameError> {
        self.validate_name(tool)?;
        Ok(self.check(tool))
    }

    /// [`check`](Self::check) while a layer is attached somewhere: the hook binds the decision
    /// (or answers the call's own probe) around the detached gate. A name too long to be a
    /// tool's is refused before the hook, which would copy it into the span's binding.
    #[inline(never)]
    fn check_hooked(&self, tool: &str) -> GateDecision {
        if tool.len() > self.max_name_len {
            return self.check_untracked(tool);
        }
        hook::gate(self.address(), tool, &mut || self.check_detached(tool))
    }

    #[doc(hidden)] // the gate without span binding: the layer's and the tests' (one obvious gate: `check`)
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

    /// The gate on a resolved entry (`None`: an untracked tool, see
    /// [`check_untracked`](Self::check_untracked)): the one implementation behind the by-name
    /// gate and [`ToolHandle`](crate::ToolHandle).
    #[inline(always)]
    pub(super) fn check_on_entry(&self, tool: &str, entry: Option<&Entry>) -> GateDecision {
        let Some(e) = entry else {
            return self.check_untracked(tool);
        };
        // No control and a Closed breaker: admitted on two loads, no clock read, no write.
        if let Some(decision) = e.admit_fast() {
            return decision;
        }
        self.check_slow(tool, e)
    }

    /// The gate past the Closed fast path: controls, refusals, the probe. Out of line to keep
    /// the Closed path small enough to inline.
    #[inline(never)]
    fn check_slow(&self, tool: &str, e: &Entry) -> GateDecision {
        if self.evicting && e.is_retired() {
            return self.check_retired(tool);
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

    /// The gate for a name the registry does not track (the slow path of a first sight): a
    /// name too long to be a tool's is refused (and counted, never copied); past the cap, the
    /// shared overflow breaker decides; otherwise allowed, in the generation the tool's entry
    /// will start at (see `generation_floor`), with the tag its entry will have.
    #[cold]
    #[inline(never)]
    fn check_untracked(&self, tool: &str) -> GateDecision {
        if tool.len() > self.max_name_len {
            self.reject_name(tool.len());
            return GateDecision::Refused {
                retry_after: Duration::MAX,
            };
        }
        if self.at_cap() {
            return self.check_overflow(tool);
        }
        self.untracked_decision(tool)
    }

    /// An untracked tool's admission: its entry's first generation and tag.
    fn untracked_decision(&self, tool: &str) -> GateDecision {
        GateDecision::Allowed(
            Permit::admitted(self.generation_floor.load(Ordering::Relaxed))
                .tagged(u64::from(self.tag_of(tool))),
        )
    }

    /// The gate of a name past the cap: the overflow breaker's decision.
    #[cold]
    fn check_overflow(&self, tool: &str) -> GateDecision {
        self.warn_overflow_once(tool);
        let e = self.overflow_entry();
        let decision = match e.admit_fast() {
            Some(d) => d,
            None => self.gate_entry(e),
        };
        if let GateDecision::Refused { .. } = decision {
            self.notify_call(|| CallEvent {
                tool,
                outcome: CallOutcome::Refused,
                duration: Duration::ZERO,
                error_type: None,
                overflow: true,
            });
        }
        decision
    }

    /// The gate for an entry the evictor retired (a handle kept across eviction): the live
    /// entry decides — the handle follows its tool — and a tool with no live entry is
    /// untracked. A live entry found retired too is one a sweep has retired and not yet
    /// removed: untracked for that moment. No recursion: the live entry is looked up once.
    #[cold]
    fn check_retired(&self, tool: &str) -> GateDecision {
        self.names
            .with(tool, |live| {
                (!live.is_retired()).then(|| self.check_on_entry(tool, Some(live)))
            })
            .flatten()
            .unwrap_or_else(|| self.check_untracked(tool))
    }

    /// The gate on a known tool: operator control first, then the breaker. Inlined into
    /// `check_slow` (the refusal path's cost is counted in `BENCHMARKS.md`).
    #[inline(always)]
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
            let (decision, recorded) = e.breaker.acquire(|| self.now_step());
            if !decision.is_allowed() {
                e.stats.record_refused();
            }
            self.notify_entry_transitions(e, &recorded);
            return decision;
        }
        self.gate_controlled(e, control)
    }

    #[cold]
    fn gate_controlled(&self, e: &Entry, control: u64) -> GateDecision {
        if Control::only_coordinated(control) {
            return self.gate_coordinated(e);
        }
        let ctl = Control::decode(control);
        let now = self.now_step();
        if let Some(until) = ctl.forced_open_until(now.at) {
            e.stats.record_refused();
            return GateDecision::Refused {
                retry_after: until.until(now.at).to_duration(),
            };
        }
        // Force-closed and shadow mode: the breaker decides as under enforcement — its own
        // machine runs, the probe included — and only its refusal is not enforced.
        let (decision, recorded) = e.breaker.acquire(|| now);
        self.notify_entry_transitions(e, &recorded);
        match decision {
            GateDecision::Refused { .. } if ctl.unenforced() => {
                let generation = e.breaker.generation();
                e.stats.record_shadow_refused();
                GateDecision::Allowed(Permit::shadow_refused(generation).tagged(e.breaker.tag()))
            }
            GateDecision::Refused { .. } if Control::is_coordinated(control) => {
                e.stats.record_coordinated_refused();
                decision
            }
            GateDecision::Refused { .. } => {
                e.stats.record_refused();
                decision
            }
            d => d,
        }
    }

    /// The gate while a coordinator has a say in the tool's episode and no operator control is
    /// set: the plain gate's decisions, in its order and on the same two clock readings (see
    /// `gate_entry`), with the refusals counted as coordinated. A breaker found closed has left
    /// the coordinated episode: the mark is cleared (if nothing else changed the word), and the
    /// fast path serves the next call.
    #[cold]
    fn gate_coordinated(&self, e: &Entry) -> GateDecision {
        if let Some(retry_after) = e.breaker.refusal_while_open(|| self.coarse_now_ticks()) {
            e.stats.record_coordinated_refused();
            return GateDecision::Refused { retry_after };
        }
        let (decision, recorded) = e.breaker.acquire(|| self.now_step());
        match decision {
            GateDecision::Refused { .. } => e.stats.record_coordinated_refused(),
            GateDecision::Allowed(_) => e.control.clear_coordinated_if_alone(),
            GateDecision::Probe(_) => {}
        }
        self.notify_entry_transitions(e, &recorded);
        decision
    }

    /// The pure availability oracle: exactly what [`allow_request`](Self::allow_request) would
    /// answer at this instant, without consuming the probe or creating anything.
    pub fn is_tool_available(&self, tool: &str) -> bool {
        self.with_entry(tool, |e| self.available_on_entry(e))
            .unwrap_or_else(|| self.available_untracked(tool))
    }

    /// The oracle for a name the registry does not track, as
    /// [`check_untracked`](Self::check_untracked) decides: never for a name too long to be a
    /// tool's, the overflow breaker's verdict past the cap, else available.
    #[cold]
    fn available_untracked(&self, tool: &str) -> bool {
        if tool.len() > self.max_name_len {
            return false;
        }
        match self.overflow.get() {
            Some(e) if self.at_cap() => self.available_on_entry(e),
            _ => true,
        }
    }

    /// [`is_tool_available`](Self::is_tool_available) on a resolved entry.
    pub(super) fn available_on_entry(&self, e: &Entry) -> bool {
        if self.evicting && e.is_retired() {
            return self.available_retired(&e.name);
        }
        let control = e.control.raw();
        if Control::only_coordinated(control) {
            // The gate's own two readings, in its order (see `gate_entry`, `gate_coordinated`).
            return e
                .breaker
                .refusal_while_open(|| self.coarse_now_ticks())
                .is_none()
                && e.breaker.would_allow(|| self.now_step());
        }
        let ctl = Control::decode(control);
        let now = self.now_step();
        if ctl.forced_open_until(now.at).is_some() {
            return false;
        }
        ctl.unenforced() || e.breaker.would_allow(|| now)
    }

    /// The oracle for a retired entry, exactly as [`check_retired`](Self::check_retired)
    /// decides: the live entry once, untracked (available) when there is none or it is retired
    /// too. It used to recurse by name, and a sweep between retiring an entry and removing it
    /// from the map kept it recursing on the same entry.
    #[cold]
    fn available_retired(&self, tool: &str) -> bool {
        self.names
            .with(tool, |live| {
                if live.is_retired() {
                    self.available_untracked(tool)
                } else {
                    self.available_on_entry(live)
                }
            })
            .unwrap_or_else(|| self.available_untracked(tool))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    use super::super::entry::RETIRED;
    use super::ToolHealthRegistry;

    #[test]
    fn the_oracle_on_an_entry_retired_mid_sweep_answers_like_the_gate() {
        let r = Arc::new(ToolHealthRegistry::builder().evictable().build());
        let h = r.handle("t").expect("tracked");
        // A sweep between retiring the entry and removing it from the map: retired, mapped.
        r.names.with("t", |e| {
            e.seen.store(RETIRED, Ordering::SeqCst);
            e.control.retire();
        });
        // The oracle used to recurse by name onto the same retired entry for as long as the
        // sweep had not removed it (here: for ever, so the stack overflowed).
        assert!(r.is_tool_available("t"));
        assert!(h.is_tool_available());
        assert!(
            r.check("t").is_allowed(),
            "the gate: untracked for that moment"
        );
        assert!(h.check().is_allowed());
        assert!(r.unavailable_tools().is_empty());
    }
}
