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

/// An attribute key of the span core's key table (`SpanCore::attribute_keys`): its place
/// there, and its name. The core asks a span by these: a view whose attributes live in a map
/// elsewhere (a Python span's dict) looks each up by its place, with a key made once.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Key<'k> {
    pub(crate) index: usize,
    pub(crate) name: &'k str,
}

/// Key-value pairs, whatever the SDK version.
pub(crate) trait Attributes {
    /// Every pair, in order.
    fn each(&self, f: &mut dyn FnMut(&str, Val<'_>));
    /// The first value of `key`.
    fn get(&self, key: &str) -> Option<Val<'_>>;
    /// The first value of a key of the core's table: [`get`](Self::get) by its name, unless
    /// the view looks keys up by their place.
    fn get_key(&self, key: Key<'_>) -> Option<Val<'_>> {
        self.get(key.name)
    }
    /// The pairs a reader of `keys` needs: every pair, in order (the reader skips the others),
    /// unless the view looks keys up — then the value of each of `keys` it has, in the order
    /// of `keys` (no other attribute is read).
    fn each_of(&self, keys: Keys<'_>, f: &mut dyn FnMut(&str, Val<'_>)) {
        let _ = keys;
        self.each(f)
    }
}

/// Some keys of the core's table: the table's names, and the places wanted.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Keys<'k> {
    pub(crate) names: &'k [std::borrow::Cow<'static, str>],
    pub(crate) places: &'k [usize],
}

impl<'k> Keys<'k> {
    /// Each key, in the order of `places`.
    pub(crate) fn iter(self) -> impl Iterator<Item = Key<'k>> {
        self.places.iter().map(move |&index| Key {
            index,
            name: &self.names[index],
        })
    }
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

/// A string attribute's value, by a key of the core's table.
pub(crate) fn str_at<'a>(attrs: &'a dyn Attributes, key: Key<'_>) -> Option<&'a str> {
    match attrs.get_key(key)? {
        Val::Str(s) => Some(s),
        _ => None,
    }
}
