//! The `tracing` feed's reader: a span's attributes and records into
//! [`SpanFields`], an event's into [`EventFields`] — both the neutral shapes of
//! `infer/facts.rs`, read by the same code the span processor uses.
//!
//! Field values are always visited into these local structs *before* a span's extensions are
//! locked: visiting may run user `Debug` / `Display` code, which may log, and logging re-enters
//! the layer.

use std::fmt;

use tracing_core::field::{Field, Visit};

use crate::infer::conventions::Compiled;
use crate::infer::facts::{debug_text, EventFields, SpanFields};

/// Visits a span's `Attributes` or `Record` into [`SpanFields`], reading the fields its
/// convention names.
pub(crate) struct SpanVisitor<'a> {
    pub(crate) convention: &'a Compiled,
    pub(crate) out: &'a mut SpanFields,
    /// The longest tool name the registry takes: a longer name is refused, never copied.
    pub(crate) max_name_len: usize,
}

impl Visit for SpanVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.out
            .read(self.convention, field.name(), value, self.max_name_len);
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.out.read_number(
            self.convention,
            field.name(),
            value as f64,
            &value,
            self.max_name_len,
        );
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.out.read_number(
            self.convention,
            field.name(),
            value as f64,
            &value,
            self.max_name_len,
        );
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.out.read_number(
            self.convention,
            field.name(),
            value,
            &value,
            self.max_name_len,
        );
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        // Only format the fields we read: the others may be large or slow to format.
        // A hostile value costs no more than the bounded text (a name cut short is refused).
        if self.convention.reads(field.name()) {
            let text = debug_text(value, self.max_name_len);
            self.out
                .read(self.convention, field.name(), &text, self.max_name_len);
        }
    }
}

/// Visits an event into [`EventFields`].
pub(crate) struct EventVisitor<'a>(pub(crate) &'a mut EventFields);

impl Visit for EventVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.read(field.name(), value);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.read_debug(field.name(), value);
    }
}
