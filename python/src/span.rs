//! `PySpan`: an OpenTelemetry Python span (`ReadableSpan`, or a live `Span` when asking
//! whether it is a tool span) read on demand as the crate's [`SpanSource`], by a [`Reader`]
//! (the span feed's attribute keys as Python strings, and what of the OpenTelemetry API a span
//! is read by).
//!
//! Nothing is copied and only what a decision needs is read: the span's name, its scope and
//! the few attributes that can make it a tool span (looked up in its dict with key strings made
//! once, when the feed is), then for a tool span the attributes its convention reads, its
//! status, times and events, then the helper's open calls. Strings are borrowed from the
//! Python objects for the time of the call. The SDK's own spans are read through their private
//! slots (`_attributes`, `_events`, `_status`: the public properties copy the mapping and take a
//! lock per item on every access), any other span object through its public attributes.
//!
//! The Rust side allocates nothing per span once a thread has read a few (the buffers below are
//! the thread's, kept between spans): `python/tests/alloc/`.

use std::borrow::Cow;
use std::cell::{Cell, OnceCell, RefCell};
use std::time::{Duration, SystemTime};

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyString, PyTuple};
use tool_health::span_feed::{AttributeValue, SpanEvent, SpanSource, SpanStatus};

/// What a span is read by: the span feed's attribute keys as Python strings, the
/// OpenTelemetry API's types, the helper's open calls.
#[derive(Debug)]
pub(crate) struct Reader {
    otel: Option<Otel>,
    /// The `get` of the `contextvars.ContextVar` holding the tools whose helper calls are open
    /// in the current context (a tuple of str), set by the call helper: bound once.
    open_calls: Option<Py<PyAny>>,
    /// The feed's attribute keys as Python strings (interned), by their place.
    keys: Box<[Py<PyString>]>,
    /// The same keys by their Python hash: `(hash, place)`, open addressing (`u32::MAX`:
    /// empty), for the one pass over a small dict's keys.
    by_hash: Box<[(isize, u32)]>,
    /// The keys' texts, by place.
    names: Box<[Box<str>]>,
}

impl Reader {
    /// A reader of the keys `names` (in the order of their places: the feed's
    /// `attribute_keys`), with the helper's `open_calls` variable.
    pub(crate) fn new<'k>(
        py: Python<'_>,
        names: impl Iterator<Item = &'k str>,
        open_calls: Option<Py<PyAny>>,
    ) -> Self {
        let names: Box<[Box<str>]> = names.map(Box::from).collect();
        let keys: Box<[Py<PyString>]> = names
            .iter()
            .map(|k| PyString::intern(py, k).unbind())
            .collect();
        let open_calls = open_calls.and_then(|v| v.bind(py).getattr("get").ok().map(Bound::unbind));
        Self {
            otel: otel(py),
            open_calls,
            by_hash: by_hash(&keys, py),
            keys,
            names,
        }
    }

    /// The place of the feed's key whose hash is `hash` and text `text`, if it has one.
    /// `text` is asked only when a key of that hash is found (most keys of a span are not the
    /// feed's: their text is never read).
    fn place<'s>(&self, hash: isize, text: impl Fn() -> Option<&'s str>) -> Option<usize> {
        let mask = self.by_hash.len().wrapping_sub(1);
        let mut i = (hash as usize) & mask;
        for _ in 0..self.by_hash.len() {
            let (h, place) = *self.by_hash.get(i)?;
            if place == u32::MAX {
                return None;
            }
            let place = place as usize;
            if h == hash && self.names.get(place).is_some_and(|n| Some(&**n) == text()) {
                return Some(place);
            }
            i = (i + 1) & mask;
        }
        None
    }
}

/// The open-addressing table of `keys` by hash (twice their number, a power of two).
fn by_hash(keys: &[Py<PyString>], py: Python<'_>) -> Box<[(isize, u32)]> {
    let size = (keys.len() * 2).next_power_of_two().max(2);
    let mut table = vec![(0isize, u32::MAX); size];
    for (place, key) in keys.iter().enumerate() {
        let Ok(hash) = key.bind(py).hash() else {
            continue;
        };
        let mut i = (hash as usize) & (size - 1);
        while table[i].1 != u32::MAX {
            i = (i + 1) & (size - 1);
        }
        table[i] = (hash, place as u32);
    }
    table.into_boxed_slice()
}

/// An attribute value as read once, kept for the rest of the span's reading.
#[derive(Debug)]
enum Slot {
    Absent,
    /// A `str`, or the text of a value of another type (`str(value)`): `other` says which.
    Text {
        text: Py<PyString>,
        other: bool,
    },
    I64(i64),
    F64(f64),
    Bool(bool),
}

impl Slot {
    /// A Python value as the feed reads it (bool before int: a bool is an int).
    fn of(value: &Bound<'_, PyAny>) -> Self {
        if let Ok(s) = value.cast::<PyString>() {
            return Slot::Text {
                text: utf8(s.clone()).unbind(),
                other: false,
            };
        }
        if let Ok(b) = value.cast::<PyBool>() {
            return Slot::Bool(b.is_true());
        }
        if value.is_instance_of::<PyInt>() {
            if let Ok(i) = value.extract::<i64>() {
                return Slot::I64(i);
            }
        } else if value.is_instance_of::<PyFloat>() {
            if let Ok(x) = value.extract::<f64>() {
                return Slot::F64(x);
            }
        }
        // A value whose `str()` fails reads as an empty text.
        let text = value
            .str()
            .map(utf8)
            .unwrap_or_else(|_| PyString::new(value.py(), ""));
        Slot::Text {
            text: text.unbind(),
            other: true,
        }
    }

    fn value<'s, 'py: 's>(&'s self, py: Python<'py>) -> Option<AttributeValue<'s>> {
        Some(match self {
            Slot::Absent => return None,
            Slot::Text { text, other } => {
                let s = text.bind(py).to_str().ok()?;
                if *other {
                    AttributeValue::Other(Cow::Borrowed(s))
                } else {
                    AttributeValue::Str(Cow::Borrowed(s))
                }
            }
            Slot::I64(i) => AttributeValue::I64(*i),
            Slot::F64(x) => AttributeValue::F64(*x),
            Slot::Bool(b) => AttributeValue::Bool(*b),
        })
    }
}

thread_local! {
    /// The attribute values of the span being read, by key place (kept between spans, each
    /// emptied when its span is read).
    static SLOTS: RefCell<Vec<OnceCell<Slot>>> = const { RefCell::new(Vec::new()) };
    /// The values an event's borrowed texts come from (each event's name, then its keys and
    /// values in turn), and each event's number of attributes.
    static HELD: RefCell<Vec<Slot>> = const { RefCell::new(Vec::new()) };
    static SHAPES: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
    /// Spare attribute lists for events, and a spare list of events (their room kept).
    static EVENT_ATTRS: RefCell<Vec<Attributes<'static>>> = const { RefCell::new(Vec::new()) };
    static EVENTS: RefCell<Vec<SpanEvent<'static>>> = const { RefCell::new(Vec::new()) };
}

type Attributes<'a> = Vec<(Cow<'a, str>, AttributeValue<'a>)>;

/// This thread's kept buffer `cell` (empty; a new one while it is lent out).
fn take<T>(cell: &'static std::thread::LocalKey<RefCell<Vec<T>>>) -> Vec<T> {
    cell.try_with(|c| c.try_borrow_mut().map(|mut v| std::mem::take(&mut *v)).ok())
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Gives `buf` back to `cell`, emptied (the larger of two is kept).
fn give<T>(cell: &'static std::thread::LocalKey<RefCell<Vec<T>>>, mut buf: Vec<T>) {
    buf.clear();
    let _ = cell.try_with(|c| {
        if let Ok(mut kept) = c.try_borrow_mut() {
            if kept.capacity() < buf.capacity() {
                *kept = buf;
            }
        }
    });
}

/// `v`'s room, emptied, for items of another lifetime: std collects a `Vec` into one of the
/// same layout in place, so no allocation.
fn recycle<T, U>(mut v: Vec<T>) -> Vec<U> {
    v.clear();
    v.into_iter().filter_map(|_| None).collect()
}

/// An attribute or getter that may be missing or `None`.
fn opt<'py>(obj: &Bound<'py, PyAny>, name: &Bound<'py, PyString>) -> Option<Bound<'py, PyAny>> {
    obj.getattr(name).ok().filter(|v| !v.is_none())
}

/// A field of an SDK object by its private slot when it has one, else by its public name.
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

/// A value as text: a `str` itself, anything else by `str()` (none when that fails).
fn text_of<'py>(value: Bound<'py, PyAny>) -> Option<Bound<'py, PyString>> {
    match value.cast_into::<PyString>() {
        Ok(s) => Some(utf8(s)),
        Err(e) => e.into_inner().str().ok().map(utf8),
    }
}

/// `s`, or — when it holds what UTF-8 cannot (a lone surrogate) — a copy with U+FFFD in its
/// place: every text read off a span can be lent as UTF-8.
fn utf8(s: Bound<'_, PyString>) -> Bound<'_, PyString> {
    if s.to_str().is_ok() {
        return s;
    }
    PyString::new(s.py(), &s.to_string_lossy())
}

/// An attribute mapping: the SDK's `BoundedAttributes` by its inner dict (its own lookup is
/// Python code), a dict directly, any other mapping by item.
fn mapping<'py>(value: Option<Bound<'py, PyAny>>) -> Option<Bound<'py, PyAny>> {
    let value = value?;
    if value.is_instance_of::<PyDict>() {
        return Some(value);
    }
    match opt(&value, intern!(value.py(), "_dict")) {
        Some(inner) if inner.is_instance_of::<PyDict>() => Some(inner),
        _ => Some(value),
    }
}

/// The value of `key` in `mapping` (none when missing or unreadable).
fn lookup<'py>(
    mapping: &Bound<'py, PyAny>,
    key: &Bound<'py, PyString>,
) -> Option<Bound<'py, PyAny>> {
    match mapping.cast::<PyDict>() {
        Ok(dict) => dict.get_item(key).ok().flatten(),
        Err(_) => mapping.get_item(key).ok(),
    }
}

/// Each pair of a mapping (a dict's own, or `.items()`'s), until `f` fails.
fn pairs<'py>(
    mapping: &Bound<'py, PyAny>,
    mut f: impl FnMut(Bound<'py, PyAny>, Bound<'py, PyAny>),
) -> PyResult<()> {
    if let Ok(dict) = mapping.cast::<PyDict>() {
        for (k, v) in dict.iter() {
            f(k, v);
        }
        return Ok(());
    }
    for item in mapping
        .call_method0(intern!(mapping.py(), "items"))?
        .try_iter()?
    {
        let item = item?;
        let pair = item.cast::<PyTuple>()?;
        if pair.len() == 2 {
            f(pair.get_item(0)?, pair.get_item(1)?);
        }
    }
    Ok(())
}

/// A span context's id (`context.span_id`, `parent.span_id`): the API's `SpanContext` is a
/// tuple whose second item is the id (its `span_id` property is Python code), any other
/// object by its `span_id`.
fn id_of(ctx: Option<Bound<'_, PyAny>>, otel: Option<&Otel>) -> u64 {
    let Some(ctx) = ctx else {
        return 0;
    };
    let id = match ctx.cast::<PyTuple>() {
        Ok(t) if otel.is_some_and(|o| ctx.get_type().is(&o.span_context)) => t.get_item(1).ok(),
        _ => ctx.getattr(intern!(ctx.py(), "span_id")).ok(),
    };
    id.and_then(|v| v.extract::<u64>().ok()).unwrap_or(0)
}

/// Unix nanoseconds (or `None`: now).
fn time_of(value: Option<Bound<'_, PyAny>>) -> SystemTime {
    value
        .and_then(|v| v.extract::<u64>().ok())
        .map_or_else(SystemTime::now, |ns| {
            SystemTime::UNIX_EPOCH + Duration::from_nanos(ns)
        })
}

/// What of the OpenTelemetry API a span is read by, when it is installed: the `StatusCode`s
/// (a span's status code is compared by identity: reading an enum's `.value` runs Python
/// code), and the `SpanContext` type.
#[derive(Debug)]
struct Otel {
    ok: Py<PyAny>,
    error: Py<PyAny>,
    unset: Py<PyAny>,
    span_context: Py<PyAny>,
}

fn otel(py: Python<'_>) -> Option<Otel> {
    let code = py
        .import("opentelemetry.trace.status")
        .ok()?
        .getattr("StatusCode")
        .ok()?;
    let span_context = py
        .import("opentelemetry.trace.span")
        .ok()?
        .getattr("SpanContext")
        .ok()?;
    Some(Otel {
        ok: code.getattr("OK").ok()?.unbind(),
        error: code.getattr("ERROR").ok()?.unbind(),
        unset: code.getattr("UNSET").ok()?.unbind(),
        span_context: span_context.unbind(),
    })
}

fn status_of(code: Option<Bound<'_, PyAny>>, codes: Option<&Otel>) -> SpanStatus {
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
        if code.is(&c.unset) {
            return SpanStatus::Unset;
        }
    }
    match opt(&code, intern!(code.py(), "value")).and_then(|v| v.extract::<i64>().ok()) {
        Some(1) => SpanStatus::Ok,
        Some(2) => SpanStatus::Error,
        _ => SpanStatus::Unset,
    }
}

/// What every span is read for: its name, its scope's name and its attributes (held while
/// the span is read, so that the texts can be lent).
pub(crate) struct Parts<'py> {
    name: Bound<'py, PyString>,
    scope: Option<Bound<'py, PyString>>,
    attributes: Option<Bound<'py, PyAny>>,
}

impl<'py> Parts<'py> {
    pub(crate) fn of(span: &Bound<'py, PyAny>) -> Self {
        let py = span.py();
        let name = field(span, intern!(py, "_name"), intern!(py, "name"))
            .and_then(text_of)
            .unwrap_or_else(|| PyString::new(py, ""));
        let scope = field(
            span,
            intern!(py, "_instrumentation_scope"),
            intern!(py, "instrumentation_scope"),
        )
        .and_then(|s| field(&s, intern!(py, "_name"), intern!(py, "name")))
        .and_then(text_of);
        let attributes = mapping(field(
            span,
            intern!(py, "_attributes"),
            intern!(py, "attributes"),
        ));
        Self {
            name,
            scope,
            attributes,
        }
    }
}

/// How many attributes a span's dict may have for one pass over its keys to be cheaper than
/// looking each wanted key up (a decision asks about ten keys; a pass costs a third of a
/// lookup per attribute, and converts only the values of the feed's keys).
const SCAN_MAX: usize = 24;

/// A Python span as the feed reads it: on demand.
pub(crate) struct PySpan<'a, 'py> {
    span: &'a Bound<'py, PyAny>,
    reader: &'a Reader,
    name: &'a str,
    scope: &'a str,
    attributes: Option<&'a Bound<'py, PyAny>>,
    /// The attributes are a small dict: one pass over its keys answers every key (done when
    /// the first key is asked).
    scan: bool,
    scanned: Cell<bool>,
    /// What each key of the feed's table was found to be, once asked (this thread's kept
    /// buffer, one cell per key).
    slots: Vec<OnceCell<Slot>>,
    /// Which cells were filled (bit `i`: cell `i`; the cells past 127 are all emptied).
    filled: Cell<u128>,
}

impl<'a, 'py> PySpan<'a, 'py> {
    pub(crate) fn new(
        reader: &'a Reader,
        span: &'a Bound<'py, PyAny>,
        parts: &'a Parts<'py>,
    ) -> Self {
        let mut slots = take(&SLOTS);
        if slots.len() != reader.keys.len() {
            slots.clear();
            slots.resize_with(reader.keys.len(), OnceCell::new);
        }
        let attributes = parts.attributes.as_ref();
        let scan = attributes
            .and_then(|a| a.cast::<PyDict>().ok())
            .is_some_and(|d| d.len() <= SCAN_MAX);
        Self {
            span,
            reader,
            name: parts.name.to_str().unwrap_or(""),
            scope: parts
                .scope
                .as_ref()
                .and_then(|s| s.to_str().ok())
                .unwrap_or(""),
            attributes,
            scan,
            scanned: Cell::new(false),
            slots,
            filled: Cell::new(0),
        }
    }

    fn py(&self) -> Python<'py> {
        self.span.py()
    }

    /// Marks cell `index` filled.
    fn fill(&self, index: usize) {
        if index < 128 {
            self.filled.set(self.filled.get() | 1 << index);
        }
    }

    /// One pass over a small dict's keys: the value of each of the feed's keys it holds goes
    /// into its cell (found by the key's hash, then its text); any other cell reads absent.
    fn scan(&self) {
        self.scanned.set(true);
        let Some(dict) = self.attributes.and_then(|a| a.cast::<PyDict>().ok()) else {
            return;
        };
        for (k, v) in dict.iter() {
            let Ok(key) = k.cast::<PyString>() else {
                continue;
            };
            let Ok(hash) = key.hash() else {
                continue;
            };
            if let Some(index) = self.reader.place(hash, || key.to_str().ok()) {
                if let Some(cell) = self.slots.get(index) {
                    if cell.set(Slot::of(&v)).is_ok() {
                        self.fill(index);
                    }
                }
            }
        }
    }
}

impl Drop for PySpan<'_, '_> {
    fn drop(&mut self) {
        // Empty the cells this span filled (the rest are empty), and keep them for the next.
        let mut slots = std::mem::take(&mut self.slots);
        let mut filled = self.filled.get();
        while filled != 0 {
            let i = filled.trailing_zeros() as usize;
            filled &= filled - 1;
            if let Some(cell) = slots.get_mut(i) {
                cell.take();
            }
        }
        for cell in slots.iter_mut().skip(128) {
            cell.take();
        }
        let _ = SLOTS.try_with(|c| {
            if let Ok(mut kept) = c.try_borrow_mut() {
                if kept.capacity() <= slots.capacity() {
                    *kept = slots;
                }
            }
        });
    }
}

impl SpanSource for PySpan<'_, '_> {
    fn name(&self) -> &str {
        self.name
    }

    fn scope(&self) -> &str {
        self.scope
    }

    fn attribute(&self, index: usize, _key: &str) -> Option<AttributeValue<'_>> {
        let cell = self.slots.get(index)?;
        if self.scan {
            if !self.scanned.get() {
                self.scan();
            }
            // The pass filled the cell of every key the span has: an empty one is absent.
            return cell.get()?.value(self.py());
        }
        let slot = cell.get_or_init(|| {
            self.fill(index);
            let (Some(attributes), Some(key)) = (self.attributes, self.reader.keys.get(index))
            else {
                return Slot::Absent;
            };
            lookup(attributes, key.bind(self.py())).map_or(Slot::Absent, |v| Slot::of(&v))
        });
        slot.value(self.py())
    }

    fn span_id(&self) -> u64 {
        let py = self.py();
        id_of(
            field(self.span, intern!(py, "_context"), intern!(py, "context")),
            self.reader.otel.as_ref(),
        )
    }

    fn parent_id(&self) -> u64 {
        let py = self.py();
        id_of(
            field(self.span, intern!(py, "_parent"), intern!(py, "parent")),
            self.reader.otel.as_ref(),
        )
    }

    fn start(&self) -> SystemTime {
        let py = self.py();
        time_of(field(
            self.span,
            intern!(py, "_start_time"),
            intern!(py, "start_time"),
        ))
    }

    fn end(&self) -> SystemTime {
        let py = self.py();
        time_of(field(
            self.span,
            intern!(py, "_end_time"),
            intern!(py, "end_time"),
        ))
    }

    fn status(&self) -> SpanStatus {
        let py = self.py();
        let code = field(self.span, intern!(py, "_status"), intern!(py, "status"))
            .and_then(|s| field(&s, intern!(py, "_status_code"), intern!(py, "status_code")));
        status_of(code, self.reader.otel.as_ref())
    }

    fn events(&self, f: &mut dyn FnMut(&SpanEvent<'_>)) {
        let py = self.py();
        let Some(mut list) = field(self.span, intern!(py, "_events"), intern!(py, "events")) else {
            return;
        };
        // The SDK's `BoundedList` by its deque (its own iteration takes a lock in Python).
        if let Some(inner) = opt(&list, intern!(py, "_dq")) {
            list = inner;
        }
        if !list.len().is_ok_and(|n| n > 0) {
            return; // most spans: no event
        }
        let mut held = take(&HELD);
        let mut shapes = take(&SHAPES);
        let _ = hold_events(&list, &mut held, &mut shapes);
        {
            let mut events: Vec<SpanEvent<'_>> = recycle(take(&EVENTS));
            let mut at = 0;
            for &n in &shapes {
                let name = held
                    .get(at)
                    .and_then(|s| s.value(py))
                    .map_or(Cow::Borrowed(""), |v| match v {
                        AttributeValue::Str(s) | AttributeValue::Other(s) => s,
                        _ => Cow::Borrowed(""),
                    });
                at += 1;
                let mut attributes: Attributes<'_> = recycle(
                    EVENT_ATTRS
                        .try_with(|a| a.try_borrow_mut().ok().and_then(|mut a| a.pop()))
                        .ok()
                        .flatten()
                        .unwrap_or_default(),
                );
                for pair in held.get(at..at + 2 * n).unwrap_or(&[]).chunks_exact(2) {
                    let key = match pair[0].value(py) {
                        Some(AttributeValue::Str(k) | AttributeValue::Other(k)) => k,
                        _ => continue,
                    };
                    if let Some(value) = pair[1].value(py) {
                        attributes.push((key, value));
                    }
                }
                at += 2 * n;
                events.push(SpanEvent::new(name, attributes));
            }
            for event in &events {
                f(event);
            }
            // The lists go back for the next span's events.
            for event in events.drain(..) {
                let attributes: Attributes<'static> = recycle(event.attributes);
                let _ = EVENT_ATTRS.try_with(|a| {
                    if let Ok(mut a) = a.try_borrow_mut() {
                        if a.len() < 8 {
                            a.push(attributes);
                        }
                    }
                });
            }
            give(&EVENTS, recycle(events));
        }
        give(&SHAPES, shapes);
        give(&HELD, held);
    }

    fn call_open(&self, tool: &str) -> bool {
        let Some(get) = &self.reader.open_calls else {
            return false;
        };
        let py = self.py();
        let Ok(open) = get.bind(py).call0() else {
            return false; // no value in this context, no default: nothing open
        };
        let Ok(open) = open.cast_into::<PyTuple>() else {
            return false;
        };
        open.iter().any(|t| {
            t.cast::<PyString>()
                .ok()
                .and_then(|s| s.to_str().ok().map(|s| s == tool))
                .unwrap_or(false)
        })
    }
}

/// Holds each event's name, then its attributes' keys and values, in `held` (in order), and
/// how many attributes each event has, in `shapes`.
fn hold_events(
    list: &Bound<'_, PyAny>,
    held: &mut Vec<Slot>,
    shapes: &mut Vec<usize>,
) -> PyResult<()> {
    let py = list.py();
    for event in list.try_iter()? {
        let event = event?;
        let name = field(&event, intern!(py, "_name"), intern!(py, "name"))
            .and_then(text_of)
            .unwrap_or_else(|| PyString::new(py, ""));
        held.push(Slot::of(&name));
        let attributes = mapping(field(
            &event,
            intern!(py, "_attributes"),
            intern!(py, "attributes"),
        ));
        let mut n = 0;
        if let Some(attributes) = attributes {
            pairs(&attributes, |k, v| {
                let Some(key) = text_of(k) else {
                    return;
                };
                held.push(Slot::of(&key));
                held.push(Slot::of(&v));
                n += 1;
            })?;
        }
        shapes.push(n);
    }
    Ok(())
}
