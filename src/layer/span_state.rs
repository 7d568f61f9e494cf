//! The per-span state of a tool-span candidate: what was seen on it so far and the gate
//! decision bound to it. It is shared ([`SpanCell`]) between the span's extensions, where the
//! layer's callbacks find it, and the entered-span stack of each thread the span is entered on
//! (`bind.rs`), where the gate finds it without asking the dispatcher for the subscriber — so
//! binding works whatever wraps the layer.

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::call::{GateDecision, Permit};
use crate::infer::facts::Observed;
#[cfg(test)]
use crate::infer::facts::SpanFields;

/// A tool span's state, shared between its extensions and the threads it is entered on.
#[derive(Debug, Clone)]
pub(crate) struct SpanCell(pub(crate) Arc<Mutex<ToolSpan>>);

impl SpanCell {
    pub(crate) fn new(state: ToolSpan) -> Self {
        Self(Arc::new(Mutex::new(state)))
    }

    /// The state, locked. Never held while user code runs (visiting fields, classifiers,
    /// observers) or while another span's cell is locked, except child before parent.
    pub(crate) fn lock(&self) -> MutexGuard<'_, ToolSpan> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A gate decision bound to a tool span.
#[derive(Debug, Clone)]
pub(crate) struct Binding {
    /// The name the gate was asked about (the requested name).
    pub(crate) tool: Box<str>,
    pub(crate) decision: GateDecision,
}

impl Binding {
    /// The probe permit this binding holds, if any.
    pub(crate) fn probe(&self) -> Option<Permit> {
        match self.decision {
            GateDecision::Probe(p) => Some(p),
            _ => None,
        }
    }
}

/// What [`ToolSpan::bind`] did.
#[derive(Debug)]
pub(crate) struct Bound {
    /// The decision was stored (and should be written on the span).
    pub(crate) stored: bool,
    /// A probe the new decision replaced: give it back.
    pub(crate) replaced_probe: Option<Binding>,
}

/// The per-span state of a tool-span candidate, kept in the span's extensions: what was seen
/// on the call (the neutral [`Observed`], which it derefs to) and the layer's own part.
#[derive(Debug)]
pub(crate) struct ToolSpan {
    /// The layer that owns this state (its shared part's address): one layer per subscriber
    /// feeds the span, any other stays out.
    pub(crate) owner: usize,
    /// The registry clock when the span was first entered; until then, when it was created.
    pub(crate) start: Duration,
    /// The span was entered at least once (`start` is its first enter).
    pub(crate) entered: bool,
    /// What was seen on the call so far.
    pub(crate) seen: Observed,
    /// The span closed: its state was taken for the record, nothing binds to it any more.
    pub(crate) closed: bool,
    /// The call is in the late-verdict table (`late.rs`): its close asks it.
    pub(crate) late: bool,
    pub(crate) binding: Option<Binding>,
    /// A run of the call helper was recorded in this span (or in a span of the same tool
    /// inside it): each run is one call, and the span adds no record of its own (`settle.rs`).
    pub(crate) helper_recorded: bool,
}

impl Deref for ToolSpan {
    type Target = Observed;
    fn deref(&self) -> &Observed {
        &self.seen
    }
}

impl DerefMut for ToolSpan {
    fn deref_mut(&mut self) -> &mut Observed {
        &mut self.seen
    }
}

impl ToolSpan {
    /// A new candidate created at `start`. A convention that marks nothing on success starts
    /// completed: strict mode cannot apply to it.
    pub(crate) fn new(owner: usize, start: Duration, completion_marker: bool) -> Self {
        Self {
            owner,
            start,
            entered: false,
            seen: Observed::new(completion_marker),
            closed: false,
            late: false,
            binding: None,
            helper_recorded: false,
        }
    }

    /// The probe of `tool` this span holds, if any: the call's own probe.
    pub(crate) fn own_probe(&self, tool: &str) -> Option<Permit> {
        self.binding
            .as_ref()
            .filter(|b| &*b.tool == tool)
            .and_then(Binding::probe)
    }

    /// Binds a gate decision. A later decision replaces an earlier one, except:
    ///
    /// * a refusal never replaces a probe of the same tool (the gate answers the call's own
    ///   probe before it gets there; this keeps a racing refusal from taking it);
    /// * a decision about another tool never replaces the span's decision about its own tool
    ///   (a tool that gates another one inside its span): a span's probe is resolved by that
    ///   span's own outcome only.
    pub(crate) fn bind(&mut self, tool: &str, decision: GateDecision) -> Bound {
        const KEPT: Bound = Bound {
            stored: false,
            replaced_probe: None,
        };
        if let Some(old) = &self.binding {
            if old.probe().is_some()
                && &*old.tool == tool
                && matches!(decision, GateDecision::Refused { .. })
            {
                return KEPT;
            }
            let own = self.tool_name();
            if own.is_some_and(|own| own != tool && own == &*old.tool) {
                return KEPT;
            }
        }
        let old = self.binding.replace(Binding {
            tool: tool.into(),
            decision,
        });
        Bound {
            stored: true,
            replaced_probe: old.filter(|b| b.probe().is_some() && b.decision != decision),
        }
    }

    /// Folds a closed tool span of the same tool nested in this one into it: one call is one
    /// record. What was seen on the inner span counts for this one, and a decision bound to
    /// the inner span holds for this one (by the rules of [`ToolSpan::bind`]). Returns a probe
    /// the inner decision replaced, to give back.
    pub(crate) fn absorb(&mut self, inner: &mut ToolSpan) -> Option<Binding> {
        self.seen.absorb(&mut inner.seen);
        self.helper_recorded |= inner.helper_recorded;
        let binding = inner.binding.take()?;
        self.bind(&binding.tool, binding.decision).replaced_probe
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn permit(probe: bool) -> Permit {
        if probe {
            Permit::probe(7)
        } else {
            Permit::admitted(7)
        }
    }

    #[test]
    fn another_tools_decision_never_replaces_the_spans_own() {
        let mut s = ToolSpan::new(0, Duration::ZERO, false);
        s.apply(SpanFields {
            name: Some((0, "research".into())),
            ..Default::default()
        });
        s.bind("research", GateDecision::Probe(permit(true)));
        let b = s.bind(
            "search",
            GateDecision::Refused {
                retry_after: Duration::ZERO,
            },
        );
        assert!(!b.stored && b.replaced_probe.is_none());
        assert_eq!(s.own_probe("research"), Some(permit(true)));
    }

    #[test]
    fn a_refusal_never_replaces_the_probe_of_the_same_tool() {
        let mut s = ToolSpan::new(0, Duration::ZERO, false);
        let b = s.bind("a", GateDecision::Probe(permit(true)));
        assert!(b.stored && b.replaced_probe.is_none());
        let b = s.bind(
            "a",
            GateDecision::Refused {
                retry_after: Duration::ZERO,
            },
        );
        assert!(!b.stored);
        assert_eq!(
            s.binding.as_ref().and_then(Binding::probe),
            Some(permit(true))
        );
        // Another tool's decision replaces it, and hands the probe back for release.
        let b = s.bind("b", GateDecision::Allowed(permit(false)));
        assert!(b.stored);
        assert_eq!(b.replaced_probe.map(|b| b.tool), Some("a".into()));
    }
}
