//! Per-callsite classification and per-span state: what the layer remembers about tool spans.
//!
//! Field values are always visited into a local [`SpanFields`] / [`EventFields`] *before* a
//! span's extensions are locked: visiting may run user `Debug` / `Display` code, which may log,
//! and logging re-enters the layer.

use std::fmt;
use std::time::Duration;

use tracing_core::field::{Field, Visit};
use tracing_core::{Level, Metadata};

use crate::gate::{GateDecision, Permit};

/// The OpenTelemetry GenAI attribute naming the operation of a span.
pub(crate) const OPERATION_FIELD: &str = "gen_ai.operation.name";
/// The operation name of a tool execution.
pub(crate) const EXECUTE_TOOL: &str = "execute_tool";
pub(crate) const ERROR_TYPE_FIELD: &str = "error.type";
pub(crate) const STATUS_CODE_FIELD: &str = "otel.status_code";
/// The HTTP status a tool's backend answered with.
pub(crate) const HTTP_STATUS_FIELD: &str = "http.response.status_code";

/// What a callsite can be, decided once per callsite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Kind(pub(crate) u8);

impl Kind {
    /// A span callsite that can be a tool span.
    pub(crate) const TOOL_SPAN: u8 = 1;
    /// A span callsite declaring the operation-name field.
    pub(crate) const HAS_OPERATION: u8 = 1 << 1;
    /// An ERROR-level event from a target that is not excluded.
    pub(crate) const ERROR_EVENT: u8 = 1 << 2;
    /// An event with a `return` or `error` field: a completion marker.
    pub(crate) const MARKER_EVENT: u8 = 1 << 3;
    /// An event with an `error.type` field.
    pub(crate) const EVENT_ERROR_TYPE: u8 = 1 << 4;

    pub(crate) fn has(self, bit: u8) -> bool {
        self.0 & bit != 0
    }

    /// Classifies a callsite. `span_filter` replaces the "declares the tool-name field" test.
    pub(crate) fn of(
        meta: &Metadata<'_>,
        tool_name_field: &str,
        span_filter: Option<fn(&Metadata<'_>) -> bool>,
    ) -> Self {
        let fields = meta.fields();
        let mut bits = 0;
        if meta.is_span() {
            let candidate = match span_filter {
                Some(filter) => filter(meta),
                None => fields.field(tool_name_field).is_some(),
            };
            if candidate {
                bits |= Self::TOOL_SPAN;
                if fields.field(OPERATION_FIELD).is_some() {
                    bits |= Self::HAS_OPERATION;
                }
            }
        } else if meta.is_event() {
            if *meta.level() == Level::ERROR && !excluded_target(meta.target()) {
                bits |= Self::ERROR_EVENT;
            }
            if fields.field("return").is_some() || fields.field("error").is_some() {
                bits |= Self::MARKER_EVENT;
            }
            if fields.field(ERROR_TYPE_FIELD).is_some() {
                bits |= Self::EVENT_ERROR_TYPE;
            }
        }
        Self(bits)
    }
}

/// Events from OpenTelemetry's own crates and from this crate never mark a tool span failed.
fn excluded_target(target: &str) -> bool {
    target.starts_with("opentelemetry")
        || target == "tool_health"
        || target.starts_with("tool_health::")
}

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

/// Values of the fields the layer reads on a span, visited without any lock held.
#[derive(Debug, Default)]
pub(crate) struct SpanFields {
    pub(crate) name: Option<String>,
    pub(crate) operation: Option<bool>,
    pub(crate) error_type: Option<String>,
    pub(crate) status: Option<Status>,
    pub(crate) http_status: Option<u64>,
    /// Seconds.
    pub(crate) retry_after: Option<f64>,
}

impl SpanFields {
    pub(crate) fn is_empty(&self) -> bool {
        self.name.is_none()
            && self.operation.is_none()
            && self.error_type.is_none()
            && self.status.is_none()
            && self.http_status.is_none()
            && self.retry_after.is_none()
    }
}

/// A recorded `otel.status_code`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    Error,
    Other,
}

/// Visits a span's `Attributes` or `Record` into [`SpanFields`].
pub(crate) struct SpanVisitor<'a> {
    pub(crate) tool_name_field: &'a str,
    pub(crate) retry_after_field: &'a str,
    pub(crate) out: &'a mut SpanFields,
}

impl SpanVisitor<'_> {
    fn value(&mut self, field: &Field, value: &str) {
        let name = field.name();
        if name == self.tool_name_field {
            self.out.name = Some(value.to_owned());
        } else if name == OPERATION_FIELD {
            self.out.operation = Some(value == EXECUTE_TOOL);
        } else if name == ERROR_TYPE_FIELD {
            self.out.error_type = Some(value.to_owned());
        } else if name == STATUS_CODE_FIELD {
            self.out.status = Some(if value.eq_ignore_ascii_case("error") {
                Status::Error
            } else {
                Status::Other
            });
        } else if name == HTTP_STATUS_FIELD {
            self.out.http_status = value.trim().parse().ok();
        } else if name == self.retry_after_field {
            self.number(field, value.trim().parse().unwrap_or(f64::NAN));
        }
    }

    /// A numeric field: the HTTP status or the retry hint (seconds; negative, NaN or infinite
    /// values are no hint).
    fn number(&mut self, field: &Field, value: f64) {
        let name = field.name();
        if name == HTTP_STATUS_FIELD && (0.0..=999.0).contains(&value) {
            self.out.http_status = Some(value as u64);
        } else if name == self.retry_after_field {
            self.out.retry_after = (value.is_finite() && value >= 0.0).then_some(value);
        }
    }

    fn is_number_field(&self, field: &Field) -> bool {
        field.name() == HTTP_STATUS_FIELD || field.name() == self.retry_after_field
    }

    fn wanted(&self, field: &Field) -> bool {
        let name = field.name();
        name == self.tool_name_field
            || name == OPERATION_FIELD
            || name == ERROR_TYPE_FIELD
            || name == STATUS_CODE_FIELD
            || name == HTTP_STATUS_FIELD
            || name == self.retry_after_field
    }
}

impl Visit for SpanVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.value(field, value);
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        if self.is_number_field(field) {
            self.number(field, value as f64);
        } else {
            self.record_debug(field, &value);
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if self.is_number_field(field) {
            self.number(field, value as f64);
        } else {
            self.record_debug(field, &value);
        }
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        if self.is_number_field(field) {
            self.number(field, value);
        } else {
            self.record_debug(field, &value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        // Only format the fields we read: the others may be large or slow to format.
        if self.wanted(field) {
            self.value(field, &format!("{value:?}"));
        }
    }
}

/// Values of the fields the layer reads on an event.
#[derive(Debug, Default)]
pub(crate) struct EventFields {
    pub(crate) error_type: Option<String>,
}

impl Visit for EventFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == ERROR_TYPE_FIELD && !value.is_empty() {
            self.error_type = Some(value.to_owned());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == ERROR_TYPE_FIELD {
            self.record_str(field, &format!("{value:?}"));
        }
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
        Permit {
            generation: 7,
            probe,
            shadow_refused: false,
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
