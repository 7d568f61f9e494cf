//! `SpanFeed`: OpenTelemetry Python spans handed to [`tool_health::span_feed::SpanFeed`] as
//! [`SpanSource`](tool_health::span_feed::SpanSource)s read on demand (`span.rs`) — the same
//! span core, conventions and classification as the Rust span processors and the OTLP
//! receiver.

use pyo3::prelude::*;

use crate::registry::Registry;
use crate::span::{Parts, PySpan, Reader};

/// Feeds a registry from finished OpenTelemetry Python spans (the span processor's core).
#[pyclass(module = "tool_health", frozen)]
#[derive(Debug)]
pub(crate) struct SpanFeed {
    feed: tool_health::span_feed::SpanFeed,
    /// How its spans are read.
    reader: Reader,
}

#[pymethods]
impl SpanFeed {
    /// A feed into `registry` with the OTLP receiver's conventions. `strict`: a tool span
    /// that marks no outcome reads as cancelled; `caller_errors`: the `error.type` values (and
    /// exception types) that are the caller's fault, in place of the defaults; `open_calls`: a
    /// `ContextVar` of the tools whose calls the caller has open (and records) in a context.
    #[new]
    #[pyo3(signature = (registry, *, strict = false, caller_errors = None, open_calls = None))]
    fn new(
        py: Python<'_>,
        registry: &Bound<'_, Registry>,
        strict: bool,
        caller_errors: Option<Vec<String>>,
        open_calls: Option<Py<PyAny>>,
    ) -> Self {
        let mut builder =
            tool_health::span_feed::SpanFeed::builder(registry.get().inner.clone()).strict(strict);
        if let Some(errors) = caller_errors {
            builder = builder.caller_errors(errors);
        }
        let feed = builder.build();
        let reader = Reader::new(py, feed.attribute_keys(), open_calls);
        // The call helper looks for the registry's feed from now on (Relaxed: a call made
        // while the processor is being attached may or may not see it, as before).
        registry
            .get()
            .fed
            .store(true, std::sync::atomic::Ordering::Relaxed);
        Self { feed, reader }
    }

    /// A span ended: read it, record its tool call if it is one — unless the call helper
    /// records it (a span it claimed, or one ending inside its open call of the same tool).
    /// Never raises: a span that cannot be read is dropped (the SDK calls this on every
    /// span's end).
    fn on_end(&self, span: &Bound<'_, PyAny>) {
        let parts = Parts::of(span);
        let view = PySpan::new(&self.reader, span, &parts);
        self.feed.on_end_source(&view);
    }

    /// The tool a span (finished or live) is a call of by the conventions, or `None`.
    fn tool_name(&self, span: &Bound<'_, PyAny>) -> Option<String> {
        let parts = Parts::of(span);
        let view = PySpan::new(&self.reader, span, &parts);
        self.feed.tool_name_of(&view)
    }

    /// Whether a span (finished or live) is a call of `tool` by the conventions (nothing
    /// copied).
    fn is_call_of(&self, span: &Bound<'_, PyAny>, tool: &str) -> bool {
        let parts = Parts::of(span);
        let view = PySpan::new(&self.reader, span, &parts);
        self.feed.is_call_of(&view, tool)
    }

    /// The caller gated a call of `tool` inside the span `span_id` and records it itself: when
    /// that span ends as a tool span of `tool`, it is skipped.
    fn claim(&self, span_id: u64, tool: &str) {
        self.feed.claim(span_id, tool)
    }

    /// Records the waiting calls whose time has come.
    fn flush(&self) {
        self.feed.flush()
    }

    /// How many calls wait for a late verdict or their parent span.
    #[getter]
    fn waiting(&self) -> usize {
        self.feed.waiting()
    }
}
