//! What both readers fill (`wire.rs` for protobuf, `json.rs` for OTLP/JSON) and `span.rs`
//! shows the inference: a span located in a request, a span's fields borrowed from it, an
//! attribute's value undecoded, and why a request is not OTLP.

use std::fmt;

/// Why a request is not OTLP/protobuf.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WireError(pub(crate) &'static str);

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// A span found in a request: where it is, its scope's name, its end time (for the order
/// spans are applied in).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Located<'a> {
    pub(crate) span: Source<'a>,
    pub(crate) scope: &'a str,
    pub(crate) end: u64,
}

/// Where a located span is.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Source<'a> {
    /// A `Span` message's bytes.
    Proto(&'a [u8]),
    /// An OTLP/JSON span object.
    Json(&'a serde_json::Value),
}

/// An attribute's value as received, decoded when read.
#[derive(Debug, Clone, Copy)]
pub(crate) enum RawValue<'a> {
    /// An `AnyValue` message's bytes.
    Proto(&'a [u8]),
    /// An OTLP/JSON `AnyValue` object.
    Json(&'a serde_json::Value),
    Empty,
}

/// A span's fields, reused from span to span (its vectors keep their room).
#[derive(Debug, Default)]
pub(crate) struct SpanRecord<'a> {
    pub(crate) name: &'a str,
    pub(crate) scope: &'a str,
    pub(crate) span_id: u64,
    pub(crate) parent_id: u64,
    /// Unix nanoseconds.
    pub(crate) start: u64,
    pub(crate) end: u64,
    /// 0 unset, 1 ok, 2 error.
    pub(crate) status: u8,
    pub(crate) attributes: Vec<(&'a str, RawValue<'a>)>,
    /// (name, first attribute, end) into `event_attributes`.
    pub(crate) events: Vec<(&'a str, usize, usize)>,
    pub(crate) event_attributes: Vec<(&'a str, RawValue<'a>)>,
}

impl SpanRecord<'_> {
    pub(crate) fn clear(&mut self) {
        self.name = "";
        self.scope = "";
        self.span_id = 0;
        self.parent_id = 0;
        self.start = 0;
        self.end = 0;
        self.status = 0;
        self.attributes.clear();
        self.events.clear();
        self.event_attributes.clear();
    }
}
