//! `SpanFeed`: an OpenTelemetry Python span (`ReadableSpan`, or a live `Span` when asking
//! whether it is a tool span) read into the crate's neutral [`FinishedSpan`] and handed to
//! [`tool_health::span_feed::SpanFeed`] — the same span core, conventions and classification as
//! the Rust span processors and the OTLP receiver. Strings are borrowed from the Python objects
//! for the time of the call (no copy); other values are read by type.

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyString, PyTuple};
use tool_health::span_feed::{AttributeValue, FinishedSpan, SpanEvent, SpanStatus};

use crate::registry::Registry;

/// Feeds a registry from finished OpenTelemetry Python spans (the span processor's core).
#[pyclass(module = "tool_health", frozen)]
#[derive(Debug)]
pub(crate) struct SpanFeed {
    feed: tool_health::span_feed::SpanFeed,
    codes: Option<Codes>,
    /// A `contextvars.ContextVar` holding the tools whose helper calls are open in the current
    /// context (a tuple of str), set by the call helper.
    open_calls: Option<Py<PyAny>>,
}

/// Attribute pairs, held.
type Pairs<'py> = Vec<(Bound<'py, PyAny>, Bound<'py, PyAny>)>;

/// A span's parts, held (so their strings can be borrowed) while it is read.
struct Raw<'py> {
    name: Bound<'py, PyAny>,
    scope: Option<Bound<'py, PyAny>>,
    span_id: u64,
    parent_id: u64,
    start: SystemTime,
    end: SystemTime,
    status: SpanStatus,
    attributes: Pairs<'py>,
    events: Vec<(Bound<'py, PyAny>, Pairs<'py>)>,
}

/// An attribute or getter that may be missing or `None`.
fn opt<'py>(obj: &Bound<'py, PyAny>, name: &Bound<'py, PyString>) -> Option<Bound<'py, PyAny>> {
    obj.getattr(name).ok().filter(|v| !v.is_none())
}

/// A field of an SDK object by its private slot when it has one (`_attributes`, `_events`:
/// the SDK's public properties copy or wrap them on every access), else by its public name.
fn field<'py>(
    obj: &Bound<'py, PyAny>,
    private: &Bound<'py, PyString>,
    public: &Bound<'py, PyString>,
) -> Option<Bound<'py, PyAny>> {
    match obj.getattr(private) {
        Ok(v) => (!v.is_none()).then_some(v),
        Err(_) => opt(obj, public),
    }
}

/// A span context's id (`context.span_id`, `parent.span_id`).
fn id_of(ctx: Option<Bound<'_, PyAny>>) -> u64 {
    let py_id = |c: &Bound<'_, PyAny>| -> Option<u64> {
        c.getattr(intern!(c.py(), "span_id"))
            .ok()?
            .extract::<u64>()
            .ok()
    };
    ctx.as_ref().and_then(py_id).unwrap_or(0)
}

/// Unix nanoseconds (or `None`: now).
fn time_of(value: Option<Bound<'_, PyAny>>) -> SystemTime {
    value
        .and_then(|v| v.extract::<u64>().ok())
        .map_or_else(SystemTime::now, |ns| {
            SystemTime::UNIX_EPOCH + Duration::from_nanos(ns)
        })
}

/// The pairs of an attribute mapping: the SDK's `BoundedAttributes` by its inner dict (its
/// own iteration is Python code taking a lock per item), a dict directly, any other mapping
/// through `.items()`.
fn pairs<'py>(mapping: Option<Bound<'py, PyAny>>, out: &mut Pairs<'py>) -> PyResult<()> {
    let Some(mut mapping) = mapping else {
        return Ok(());
    };
    let py = mapping.py();
    if !mapping.is_instance_of::<PyDict>() {
        if let Some(inner) = opt(&mapping, intern!(py, "_dict")) {
            mapping = inner;
        }
    }
    if let Ok(dict) = mapping.cast::<PyDict>() {
        out.extend(dict.iter());
        return Ok(());
    }
    for item in mapping.call_method0(intern!(py, "items"))?.try_iter()? {
        let item = item?;
        let pair = item.cast::<PyTuple>()?;
        if pair.len() == 2 {
            out.push((pair.get_item(0)?, pair.get_item(1)?));
        }
    }
    Ok(())
}

/// `StatusCode.OK` and `StatusCode.ERROR` of the OpenTelemetry API, when it is installed: a
/// span's status code is compared by identity (reading an enum's `.value` runs Python code).
#[derive(Debug)]
struct Codes {
    ok: Py<PyAny>,
    error: Py<PyAny>,
}

fn codes(py: Python<'_>) -> Option<Codes> {
    let code = py
        .import("opentelemetry.trace.status")
        .ok()?
        .getattr("StatusCode")
        .ok()?;
    Some(Codes {
        ok: code.getattr("OK").ok()?.unbind(),
        error: code.getattr("ERROR").ok()?.unbind(),
    })
}

fn status_of(code: Option<Bound<'_, PyAny>>, codes: Option<&Codes>) -> SpanStatus {
    let Some(code) = code else {
        return SpanStatus::Unset;
    };
    if let Some(c) = codes {
        if code.is(&c.ok) {
            return SpanStatus::Ok;
        }
        if code.is(&c.error) {
            return SpanStatus::Error;
        }
    }
    match opt(&code, intern!(code.py(), "value")).and_then(|v| v.extract::<i64>().ok()) {
        Some(1) => SpanStatus::Ok,
        Some(2) => SpanStatus::Error,
        _ => SpanStatus::Unset,
    }
}

fn read<'py>(
    span: &Bound<'py, PyAny>,
    with_events: bool,
    codes: Option<&Codes>,
) -> PyResult<Raw<'py>> {
    let py = span.py();
    let code = field(span, intern!(py, "_status"), intern!(py, "status"))
        .and_then(|s| field(&s, intern!(py, "_status_code"), intern!(py, "status_code")));
    let status = status_of(code, codes);
    let mut attributes = Vec::new();
    pairs(
        field(span, intern!(py, "_attributes"), intern!(py, "attributes")),
        &mut attributes,
    )?;
    let mut events = Vec::new();
    if with_events {
        if let Some(mut list) = field(span, intern!(py, "_events"), intern!(py, "events")) {
            // The SDK's `BoundedList` by its deque (its own iteration takes a lock in Python).
            if let Some(inner) = opt(&list, intern!(py, "_dq")) {
                list = inner;
            }
            for event in list.try_iter()? {
                let event = event?;
                let name = field(&event, intern!(py, "_name"), intern!(py, "name"))
                    .unwrap_or_else(|| PyString::new(py, "").into_any());
                let mut attrs = Vec::new();
                pairs(
                    field(
                        &event,
                        intern!(py, "_attributes"),
                        intern!(py, "attributes"),
                    ),
                    &mut attrs,
                )?;
                events.push((name, attrs));
            }
        }
    }
    Ok(Raw {
        name: field(span, intern!(py, "_name"), intern!(py, "name"))
            .unwrap_or_else(|| PyString::new(py, "").into_any()),
        scope: field(
            span,
            intern!(py, "_instrumentation_scope"),
            intern!(py, "instrumentation_scope"),
        )
        .and_then(|s| field(&s, intern!(py, "_name"), intern!(py, "name"))),
        span_id: id_of(field(span, intern!(py, "_context"), intern!(py, "context"))),
        parent_id: id_of(field(span, intern!(py, "_parent"), intern!(py, "parent"))),
        start: time_of(field(
            span,
            intern!(py, "_start_time"),
            intern!(py, "start_time"),
        )),
        end: time_of(field(
            span,
            intern!(py, "_end_time"),
            intern!(py, "end_time"),
        )),
        status,
        attributes,
        events,
    })
}

/// A value's text: a `str` borrowed, anything else by `str()`.
fn text<'a>(value: &'a Bound<'_, PyAny>) -> Cow<'a, str> {
    if let Ok(s) = value.cast::<PyString>() {
        if let Ok(s) = s.to_str() {
            return Cow::Borrowed(s);
        }
    }
    Cow::Owned(value.str().map(|s| s.to_string()).unwrap_or_default())
}

/// An attribute value by its Python type (bool before int: a bool is an int).
fn value<'a>(value: &'a Bound<'_, PyAny>) -> AttributeValue<'a> {
    if value.is_instance_of::<PyString>() {
        return AttributeValue::Str(text(value));
    }
    if let Ok(b) = value.cast::<PyBool>() {
        return AttributeValue::Bool(b.is_true());
    }
    if value.is_instance_of::<PyInt>() {
        if let Ok(i) = value.extract::<i64>() {
            return AttributeValue::I64(i);
        }
    } else if value.is_instance_of::<PyFloat>() {
        if let Ok(x) = value.extract::<f64>() {
            return AttributeValue::F64(x);
        }
    }
    AttributeValue::Other(text(value))
}

fn attributes<'a>(
    pairs: &'a [(Bound<'_, PyAny>, Bound<'_, PyAny>)],
) -> Vec<(Cow<'a, str>, AttributeValue<'a>)> {
    pairs.iter().map(|(k, v)| (text(k), value(v))).collect()
}

fn finished<'a>(raw: &'a Raw<'_>) -> FinishedSpan<'a> {
    let mut span = FinishedSpan::new(text(&raw.name), raw.start, raw.end);
    if let Some(scope) = &raw.scope {
        span.scope = text(scope);
    }
    span.span_id = raw.span_id;
    span.parent_id = raw.parent_id;
    span.status = raw.status;
    span.attributes = attributes(&raw.attributes);
    span.events = raw
        .events
        .iter()
        .map(|(name, attrs)| SpanEvent::new(text(name), attributes(attrs)))
        .collect();
    span
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
        Self {
            feed: builder.build(),
            codes: codes(py),
            open_calls,
        }
    }

    /// A span ended: read it, record its tool call if it is one — unless the call helper
    /// records it (a span it claimed, or one ending inside its open call of the same tool).
    /// Never raises: a span that cannot be read is dropped (the SDK calls this on every
    /// span's end).
    fn on_end(&self, span: &Bound<'_, PyAny>) {
        let py = span.py();
        let Ok(raw) = read(span, true, self.codes.as_ref()) else {
            return;
        };
        let open = self
            .open_calls
            .as_ref()
            .and_then(|var| var.bind(py).call_method1(intern!(py, "get"), ((),)).ok())
            .and_then(|v| v.cast_into::<PyTuple>().ok());
        let held: Vec<Bound<'_, PyString>> = open
            .iter()
            .flat_map(|t| t.iter())
            .filter_map(|t| t.cast_into::<PyString>().ok())
            .collect();
        let tools: Vec<&str> = held.iter().filter_map(|s| s.to_str().ok()).collect();
        self.feed.on_end_within(&finished(&raw), &tools);
    }

    /// The tool a span (finished or live) is a call of by the conventions, or `None`.
    fn tool_name(&self, span: &Bound<'_, PyAny>) -> Option<String> {
        let raw = read(span, false, self.codes.as_ref()).ok()?;
        self.feed.tool_name(&finished(&raw))
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
