//! How the span core sees a finished span, whatever its source: [`SpanView`] (name, scope,
//! ids, times, status, attributes, events) and its attribute values. Each feed implements it
//! over its own span (an SDK version's `SpanData`, a received OTLP span, a `FinishedSpan`).

use std::fmt;
use std::time::SystemTime;

/// An attribute value, as the SDKs' `Value`s are read.
#[derive(Clone, Copy)]
pub(crate) enum Val<'a> {
    Str(&'a str),
    I64(i64),
    F64(f64),
    Bool(bool),
    /// Anything else, by its `Debug` form.
    Other(&'a dyn fmt::Debug),
}

/// An OpenTelemetry span's status.
pub(crate) enum SpanStatus {
    Unset,
    Ok,
    Error,
}

/// Key-value pairs, whatever the SDK version.
pub(crate) trait Attributes {
    /// Every pair, in order.
    fn each(&self, f: &mut dyn FnMut(&str, Val<'_>));
    /// The first value of `key`.
    fn get(&self, key: &str) -> Option<Val<'_>>;
}

/// A span event, whatever the SDK version.
pub(crate) trait EventView: Attributes {
    fn name(&self) -> &str;
}

/// A finished OpenTelemetry span, whatever the SDK version.
pub(crate) trait SpanView: Attributes {
    fn name(&self) -> &str;
    fn scope(&self) -> &str;
    fn span_id(&self) -> u64;
    fn parent_id(&self) -> u64;
    fn start(&self) -> SystemTime;
    fn end(&self) -> SystemTime;
    fn status(&self) -> SpanStatus;
    /// Each event, in order.
    fn events(&self, f: &mut dyn FnMut(&dyn EventView));
}

/// A string attribute's value.
pub(crate) fn str_of<'a>(attrs: &'a dyn Attributes, key: &str) -> Option<&'a str> {
    match attrs.get(key)? {
        Val::Str(s) => Some(s),
        _ => None,
    }
}
