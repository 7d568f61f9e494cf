//! The per-span state of a tool-span candidate, kept in the span's extensions: what was seen
//! on it so far and the gate decision bound to it.

use std::time::Duration;

use crate::call::{CallOutcome, GateDecision, Permit};

use super::visitor::{SpanFields, Status};

/// The operation a tool-span candidate declared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    /// No operation field: the tool-name field (or the span filter) alone decides.
    Undeclared,
    /// Declared, no value yet.
    Unset,
    /// `execute_tool`.
    ExecuteTool,
    /// Anything else: not a tool span.
    Other,
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

/// An outcome the call helper settled on the span: recorded as is at close.
#[derive(Debug, Clone)]
pub(crate) struct Settled {
    pub(crate) outcome: CallOutcome,
    pub(crate) error_type: Option<Box<str>>,
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
    pub(crate) start: Duration,
    pub(crate) name: Option<String>,
    pub(crate) operation: Operation,
    pub(crate) error_type: Option<String>,
    pub(crate) event_error_type: Option<String>,
    pub(crate) http_status: Option<u64>,
    pub(crate) retry_after: Option<f64>,
    pub(crate) status_error: bool,
    pub(crate) error_event: bool,
    pub(crate) panicked: bool,
    pub(crate) completed: bool,
    pub(crate) binding: Option<Binding>,
    /// The outcome the call helper settled, if it did: wins over inference.
    pub(crate) settled: Option<Settled>,
}

impl ToolSpan {
    pub(crate) fn new(owner: usize, start: Duration, has_operation: bool) -> Self {
        Self {
            owner,
            start,
            name: None,
            operation: if has_operation {
                Operation::Unset
            } else {
                Operation::Undeclared
            },
            error_type: None,
            event_error_type: None,
            http_status: None,
            retry_after: None,
            status_error: false,
            error_event: false,
            panicked: false,
            completed: false,
            binding: None,
            settled: None,
        }
    }

    /// Applies recorded field values.
    pub(crate) fn apply(&mut self, fields: SpanFields) {
        if let Some(name) = fields.name {
            self.name = Some(name);
        }
        if let Some(execute) = fields.operation {
            self.operation = if execute {
                Operation::ExecuteTool
            } else {
                Operation::Other
            };
        }
        if let Some(error_type) = fields.error_type {
            self.completed = true;
            // An empty error.type is a completion marker but no failure.
            self.error_type = (!error_type.is_empty()).then_some(error_type);
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

    /// Whether the span may still turn out to be a tool span (its operation, if any, is not
    /// known to be something else).
    pub(crate) fn may_be_tool(&self) -> bool {
        self.operation != Operation::Other
    }

    /// The tool name, when the span is a tool span.
    pub(crate) fn tool_name(&self) -> Option<&str> {
        if !self.may_be_tool() {
            return None;
        }
        self.name.as_deref().filter(|n| !n.is_empty())
    }

    /// Binds a gate decision. A later decision replaces an earlier one, except that a refusal
    /// never replaces a probe of the same tool (the probe holder asking again is refused by its
    /// own probe).
    pub(crate) fn bind(&mut self, tool: &str, decision: GateDecision) -> Bound {
        if let Some(old) = &self.binding {
            if old.probe().is_some()
                && &*old.tool == tool
                && matches!(decision, GateDecision::Refused { .. })
            {
                return Bound {
                    stored: false,
                    replaced_probe: None,
                };
            }
        }
        let old = self.binding.replace(Binding {
            tool: tool.into(),
            decision,
        });
        Bound {
            stored: true,
            replaced_probe: old.filter(|b| b.probe().is_some()),
        }
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
    fn operation_and_name_decide_tool_spans() {
        let mut s = ToolSpan::new(0, Duration::ZERO, true);
        assert_eq!(s.tool_name(), None);
        s.apply(SpanFields {
            name: Some(String::new()),
            ..Default::default()
        });
        assert_eq!(s.tool_name(), None, "an empty name is no name");
        s.apply(SpanFields {
            name: Some("x".into()),
            ..Default::default()
        });
        assert_eq!(s.tool_name(), Some("x"));
        s.apply(SpanFields {
            operation: Some(false),
            ..Default::default()
        });
        assert_eq!(s.tool_name(), None);
        assert!(!s.may_be_tool());
    }

    #[test]
    fn markers_and_errors_from_fields() {
        let mut s = ToolSpan::new(0, Duration::ZERO, false);
        s.apply(SpanFields {
            error_type: Some(String::new()),
            ..Default::default()
        });
        assert!(s.completed && s.error_type.is_none());
        s.apply(SpanFields {
            status: Some(Status::Error),
            ..Default::default()
        });
        assert!(s.status_error);
    }
}
