//! One received span ([`SpanRecord`], filled by `wire.rs` or `json.rs`) as the inference reads
//! it: the span processor's [`SpanView`], values decoded when read.
//!
//! Tool names are untrusted: a value longer than the receiver's name limit in a field some
//! convention takes a tool name from (or a span name that long) reads as empty — no tool, no
//! record, nothing copied — and is counted.

use std::cell::Cell;
use std::time::{Duration, SystemTime};

use crate::infer::span_core::{Attributes, EventView, SpanStatus, SpanView, Val};

use super::json;
use super::record::{RawValue, SpanRecord};
use super::wire::{self, Decoded};

/// A value as the inference reads it, decoded now.
fn val(raw: RawValue<'_>) -> Val<'_> {
    match raw {
        RawValue::Proto(b) => match wire::any_value(b) {
            Decoded::Str(s) => Val::Str(s),
            Decoded::Bool(b) => Val::Bool(b),
            Decoded::I64(i) => Val::I64(i),
            Decoded::F64(x) => Val::F64(x),
            Decoded::Opaque(what) => Val::Other(opaque(what)),
            Decoded::Empty => Val::Other(&EMPTY),
        },
        RawValue::Json(v) => json::any_value(v),
        RawValue::Empty => Val::Other(&EMPTY),
    }
}

const EMPTY: &str = "<empty>";

fn opaque(what: &'static str) -> &'static dyn std::fmt::Debug {
    match what {
        "<array>" => &"<array>",
        "<kvlist>" => &"<kvlist>",
        "<bytes>" => &"<bytes>",
        _ => &"<invalid UTF-8>",
    }
}

/// A [`SpanRecord`] as the inference sees it, names bounded.
pub(crate) struct View<'r, 'a> {
    pub(crate) span: &'r SpanRecord<'a>,
    /// Fields some convention takes a tool name from.
    pub(crate) name_fields: &'r [&'r str],
    pub(crate) max_name_len: usize,
    /// Set when a name was refused for its length.
    pub(crate) refused_name: &'r Cell<bool>,
}

fn unix(nanos: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_nanos(nanos)
}

impl<'a> View<'_, 'a> {
    fn bounded(&self, key: &str, value: Val<'a>) -> Val<'a> {
        match value {
            Val::Str(s) if s.len() > self.max_name_len && self.name_fields.contains(&key) => {
                self.refused_name.set(true);
                Val::Str("")
            }
            v => v,
        }
    }
}

impl Attributes for View<'_, '_> {
    fn each(&self, f: &mut dyn FnMut(&str, Val<'_>)) {
        for &(k, v) in &self.span.attributes {
            f(k, self.bounded(k, val(v)));
        }
    }

    fn get(&self, key: &str) -> Option<Val<'_>> {
        self.span
            .attributes
            .iter()
            .find(|(k, _)| *k == key)
            .map(|&(k, v)| self.bounded(k, val(v)))
    }
}

struct EventRef<'r, 'a> {
    name: &'a str,
    attributes: &'r [(&'a str, RawValue<'a>)],
}

impl Attributes for EventRef<'_, '_> {
    fn each(&self, f: &mut dyn FnMut(&str, Val<'_>)) {
        for &(k, v) in self.attributes {
            f(k, val(v));
        }
    }

    fn get(&self, key: &str) -> Option<Val<'_>> {
        self.attributes
            .iter()
            .find(|(k, _)| *k == key)
            .map(|&(_, v)| val(v))
    }
}

impl EventView for EventRef<'_, '_> {
    fn name(&self) -> &str {
        self.name
    }
}

impl SpanView for View<'_, '_> {
    fn name(&self) -> &str {
        // The span's name is a tool-name source for conventions that read `otel.name`.
        if self.span.name.len() > self.max_name_len {
            self.refused_name.set(true);
            return "";
        }
        self.span.name
    }
    fn scope(&self) -> &str {
        self.span.scope
    }
    fn span_id(&self) -> u64 {
        self.span.span_id
    }
    fn parent_id(&self) -> u64 {
        self.span.parent_id
    }
    fn start(&self) -> SystemTime {
        unix(self.span.start)
    }
    fn end(&self) -> SystemTime {
        unix(self.span.end)
    }
    fn status(&self) -> SpanStatus {
        match self.span.status {
            2 => SpanStatus::Error,
            1 => SpanStatus::Ok,
            _ => SpanStatus::Unset,
        }
    }
    fn events(&self, f: &mut dyn FnMut(&dyn EventView)) {
        for &(name, from, to) in &self.span.events {
            let attributes = self.span.event_attributes.get(from..to).unwrap_or(&[]);
            f(&EventRef { name, attributes });
        }
    }
}
