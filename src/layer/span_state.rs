//! The per-span state of a tool-span candidate: what was seen on it so far and the gate
//! decision bound to it. It is shared ([`SpanCell`]) between the span's extensions, where the
//! layer's callbacks find it, and the entered-span stack of each thread the span is entered on
//! (`bind.rs`), where the gate finds it without asking the dispatcher for the subscriber — so
//! binding works whatever wraps the layer.

use std::borrow::Cow;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::call::{GateDecision, Permit};
use crate::semconv;

use super::visitor::{SpanFields, Status};

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

/// The per-span state of a tool-span candidate, kept in the span's extensions.
#[derive(Debug)]
pub(crate) struct ToolSpan {
    /// The layer that owns this state (its shared part's address): one layer per subscriber
    /// feeds the span, any other stays out.
    pub(crate) owner: usize,
    /// The registry clock when the span was first entered; until then, when it was created.
    pub(crate) start: Duration,
    /// The span was entered at least once (`start` is its first enter).
    pub(crate) entered: bool,
    /// The tool name and the rank of the convention's source it came from.
    pub(crate) name: Option<(u8, String)>,
    /// Kind checks of the convention whose last recorded value did not match (bits).
    pub(crate) kinds_bad: u8,
    /// The error type (non-empty) and the rank of its field.
    pub(crate) error_type: Option<(u8, String)>,
    pub(crate) event_error_type: Option<String>,
    /// A failure field of the convention was recorded non-empty.
    pub(crate) failure_field: bool,
    /// The framework's own verdict (`gen_ai.tool.call.outcome`).
    pub(crate) call_outcome: Option<Cow<'static, str>>,
    pub(crate) http_status: Option<u64>,
    pub(crate) retry_after: Option<f64>,
    pub(crate) status_error: bool,
    pub(crate) error_event: bool,
    pub(crate) panicked: bool,
    pub(crate) completed: bool,
    /// The call was refused: its tool returned the refusal as its error (an `error` field whose
    /// text contains [`REFUSAL_MESSAGE`](crate::REFUSAL_MESSAGE)), or recorded `error.type` =
    /// [`REFUSAL_ERROR_TYPE`](crate::REFUSAL_ERROR_TYPE). A refused call is never a failure,
    /// whether or not the gate could bind to the span.
    pub(crate) refused: bool,
    /// The span closed: its state was taken for the record, nothing binds to it any more.
    pub(crate) closed: bool,
    pub(crate) binding: Option<Binding>,
    /// A run of the call helper was recorded in this span (or in a span of the same tool
    /// inside it): each run is one call, and the span adds no record of its own (`settle.rs`).
    pub(crate) helper_recorded: bool,
}

impl ToolSpan {
    /// A new candidate created at `start`. A convention that marks nothing on success starts
    /// completed: strict mode cannot apply to it.
    pub(crate) fn new(owner: usize, start: Duration, completion_marker: bool) -> Self {
        Self {
            owner,
            start,
            entered: false,
            name: None,
            kinds_bad: 0,
            error_type: None,
            event_error_type: None,
            failure_field: false,
            call_outcome: None,
            http_status: None,
            retry_after: None,
            status_error: false,
            error_event: false,
            panicked: false,
            completed: !completion_marker,
            refused: false,
            closed: false,
            binding: None,
            helper_recorded: false,
        }
    }

    /// Applies recorded field values.
    pub(crate) fn apply(&mut self, fields: SpanFields) {
        if let Some((rank, name)) = fields.name {
            if self.name.as_ref().is_none_or(|(r, _)| rank <= *r) {
                self.name = Some((rank, name));
            }
        }
        self.kinds_bad = (self.kinds_bad & !fields.kinds_seen) | fields.kinds_bad;
        if let Some((rank, error_type)) = fields.error_type {
            self.completed = true;
            self.refused |= error_type == semconv::REFUSAL_ERROR_TYPE;
            // An empty error type is a completion marker but no failure.
            if error_type.is_empty() {
                if self.error_type.as_ref().is_some_and(|(r, _)| *r == rank) {
                    self.error_type = None;
                }
            } else if self.error_type.as_ref().is_none_or(|(r, _)| rank <= *r) {
                self.error_type = Some((rank, error_type));
            }
        }
        if let Some(failed) = fields.failure {
            self.completed = true;
            self.failure_field |= failed;
        }
        if let Some(outcome) = fields.outcome {
            self.completed = true;
            self.call_outcome = Some(outcome);
        }
        if let Some(status) = fields.status {
            self.completed = true;
            self.status_error = status == Status::Error;
        }
        if fields.http_status.is_some() {
            self.http_status = fields.http_status;
        }
        if fields.retry_after.is_some() {
            self.retry_after = fields.retry_after;
        }
    }

    /// The tool's retry hint: the retry-after field, when the HTTP status (if any) is one that
    /// carries it (429 Too Many Requests, 503 Service Unavailable). Used on failures only.
    pub(crate) fn retry_hint(&self) -> Option<Duration> {
        let status_ok = matches!(self.http_status, None | Some(429) | Some(503));
        self.retry_after
            .filter(|_| status_ok)
            .and_then(|s| Duration::try_from_secs_f64(s).ok())
    }

    /// Whether the span may still turn out to be a tool span (no kind check of its convention,
    /// such as `gen_ai.operation.name`, was recorded with another value).
    pub(crate) fn may_be_tool(&self) -> bool {
        self.kinds_bad == 0
    }

    /// The tool name, when the span is a tool span.
    pub(crate) fn tool_name(&self) -> Option<&str> {
        if !self.may_be_tool() {
            return None;
        }
        self.name
            .as_ref()
            .map(|(_, n)| n.as_str())
            .filter(|n| !n.is_empty())
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
        if self.error_type.is_none() {
            self.error_type = inner.error_type.take();
        }
        if self.event_error_type.is_none() {
            self.event_error_type = inner.event_error_type.take();
        }
        if self.http_status.is_none() {
            self.http_status = inner.http_status;
        }
        if self.retry_after.is_none() {
            self.retry_after = inner.retry_after;
        }
        if self.call_outcome.is_none() {
            // The framework's own verdict (`skipped`, `denied`) on the inner span holds for
            // the call.
            self.call_outcome = inner.call_outcome.take();
        }
        self.failure_field |= inner.failure_field;
        self.status_error |= inner.status_error;
        self.error_event |= inner.error_event;
        self.panicked |= inner.panicked;
        self.completed |= inner.completed;
        self.refused |= inner.refused;
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

    #[test]
    fn kinds_and_name_decide_tool_spans() {
        let mut s = ToolSpan::new(0, Duration::ZERO, true);
        assert_eq!(s.tool_name(), None);
        s.apply(SpanFields {
            name: Some((0, String::new())),
            ..Default::default()
        });
        assert_eq!(s.tool_name(), None, "an empty name is no name");
        s.apply(SpanFields {
            name: Some((1, "later-source".into())),
            ..Default::default()
        });
        s.apply(SpanFields {
            name: Some((0, "x".into())),
            ..Default::default()
        });
        s.apply(SpanFields {
            name: Some((1, "ignored: an earlier source named it".into())),
            ..Default::default()
        });
        assert_eq!(s.tool_name(), Some("x"));
        s.apply(SpanFields {
            kinds_seen: 0b10,
            kinds_bad: 0b10,
            ..Default::default()
        });
        assert_eq!(s.tool_name(), None);
        assert!(!s.may_be_tool());
        // The same check recorded again with the expected value clears it; another check
        // matching does not.
        s.apply(SpanFields {
            kinds_seen: 0b01,
            ..Default::default()
        });
        assert!(!s.may_be_tool());
        s.apply(SpanFields {
            kinds_seen: 0b10,
            ..Default::default()
        });
        assert_eq!(s.tool_name(), Some("x"));
    }

    #[test]
    fn a_convention_without_marker_starts_completed() {
        assert!(ToolSpan::new(0, Duration::ZERO, false).completed);
        assert!(!ToolSpan::new(0, Duration::ZERO, true).completed);
    }

    #[test]
    fn markers_and_errors_from_fields() {
        let mut s = ToolSpan::new(0, Duration::ZERO, false);
        s.apply(SpanFields {
            error_type: Some((0, String::new())),
            ..Default::default()
        });
        assert!(s.completed && s.error_type.is_none());
        s.apply(SpanFields {
            error_type: Some((1, "other".into())),
            ..Default::default()
        });
        s.apply(SpanFields {
            error_type: Some((0, "timeout".into())),
            ..Default::default()
        });
        s.apply(SpanFields {
            error_type: Some((1, "later, lower rank".into())),
            ..Default::default()
        });
        assert_eq!(
            s.error_type.as_ref().map(|(_, t)| t.as_str()),
            Some("timeout")
        );
        s.apply(SpanFields {
            outcome: Some("denied".into()),
            failure: Some(true),
            ..Default::default()
        });
        assert_eq!(s.call_outcome.as_deref(), Some("denied"));
        assert!(s.failure_field);
        s.apply(SpanFields {
            status: Some(Status::Error),
            ..Default::default()
        });
        assert!(s.status_error);
    }
}
