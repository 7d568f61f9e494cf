//! Reading field values: a span's attributes and records into [`SpanFields`], an event's into
//! [`EventFields`].
//!
//! Field values are always visited into these local structs *before* a span's extensions are
//! locked: visiting may run user `Debug` / `Display` code, which may log, and logging re-enters
//! the layer.

use std::fmt;

use tracing_core::field::{Field, Visit};

use crate::semconv;

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
        } else if name == semconv::OPERATION_NAME {
            self.out.operation = Some(value == semconv::EXECUTE_TOOL);
        } else if name == semconv::ERROR_TYPE {
            self.out.error_type = Some(value.to_owned());
        } else if name == semconv::OTEL_STATUS_CODE {
            self.out.status = Some(if value.eq_ignore_ascii_case("error") {
                Status::Error
            } else {
                Status::Other
            });
        } else if name == semconv::HTTP_STATUS_CODE {
            self.out.http_status = value.trim().parse().ok();
        } else if name == self.retry_after_field {
            self.number(field, value.trim().parse().unwrap_or(f64::NAN));
        }
    }

    /// A numeric field: the HTTP status or the retry hint (seconds; negative, NaN or infinite
    /// values are no hint).
    fn number(&mut self, field: &Field, value: f64) {
        let name = field.name();
        if name == semconv::HTTP_STATUS_CODE && (0.0..=999.0).contains(&value) {
            self.out.http_status = Some(value as u64);
        } else if name == self.retry_after_field {
            self.out.retry_after = (value.is_finite() && value >= 0.0).then_some(value);
        }
    }

    fn is_number_field(&self, field: &Field) -> bool {
        field.name() == semconv::HTTP_STATUS_CODE || field.name() == self.retry_after_field
    }

    fn wanted(&self, field: &Field) -> bool {
        let name = field.name();
        name == self.tool_name_field
            || name == semconv::OPERATION_NAME
            || name == semconv::ERROR_TYPE
            || name == semconv::OTEL_STATUS_CODE
            || name == semconv::HTTP_STATUS_CODE
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
        if field.name() == semconv::ERROR_TYPE && !value.is_empty() {
            self.error_type = Some(value.to_owned());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == semconv::ERROR_TYPE {
            self.record_str(field, &format!("{value:?}"));
        }
    }
}
