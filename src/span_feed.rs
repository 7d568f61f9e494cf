//! A feed of finished spans made outside this crate (feature `span-feed`): hand the inference a
//! span in a neutral, owned shape ([`FinishedSpan`]) and it is read exactly as the span
//! processors and the OTLP receiver read theirs — the same core, with the receiver's
//! conventions (every language's frameworks, then the built-in ones), the same classification,
//! late verdicts and nested calls, the same records.
//!
//! It is how a span source this crate does not link feeds a registry: the Python package's
//! OpenTelemetry `SpanProcessor` converts each `ReadableSpan` into a [`FinishedSpan`] and calls
//! [`SpanFeed::on_end`]. No OpenTelemetry SDK is pulled in; the span's shape is OpenTelemetry's
//! (name, instrumentation scope, ids, times, status, attributes, events), owned or borrowed
//! ([`Cow`]) so that a binding can lend its strings for the time of the call.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::{Duration, SystemTime};
//! use tool_health::span_feed::{AttributeValue, FinishedSpan, SpanFeed, SpanStatus};
//! use tool_health::ToolHealthRegistry;
//!
//! let registry = Arc::new(ToolHealthRegistry::new());
//! let feed = SpanFeed::new(registry.clone());
//!
//! let start = SystemTime::now();
//! let mut span = FinishedSpan::new("execute_tool search", start, start + Duration::from_millis(40));
//! span.scope = "my-agent".into();
//! span.span_id = 7;
//! span.status = SpanStatus::Error;
//! span.attributes.push(("gen_ai.operation.name".into(), AttributeValue::from("execute_tool")));
//! span.attributes.push(("gen_ai.tool.name".into(), AttributeValue::from("search")));
//! span.attributes.push(("error.type".into(), AttributeValue::from("timeout")));
//! feed.on_end(&span);
//!
//! assert_eq!(registry.snapshot("search").unwrap().failure_count, 1);
//! ```
//!
//! # One call, one record
//!
//! A call the application gated and records itself (its own call helper) may also end as a
//! tool span, and would be counted twice. The caller says which spans are its calls:
//!
//! * [`SpanFeed::claim`]: the span that was current when it gated (by id) — when that span
//!   ends as a tool span of the same tool, it is the caller's call;
//! * [`SpanFeed::on_end_within`]: the tools whose calls are open where a span ends (the
//!   caller's context) — a tool span of one of them ending inside the call is part of it.
//!
//! Either way the span is skipped as the `tracing` layer's own calls are (a span carrying
//! `tool_health.gate.decision` is skipped too), after it has taken in its nested spans (an MCP
//! client span inside it), so they are skipped with it.
//!
//! # Spans read on demand
//!
//! A source whose spans keep their attributes in a map of their own (the Python package's:
//! a `ReadableSpan`'s dict) need not copy a span into a [`FinishedSpan`]: it implements
//! [`SpanSource`] and calls [`SpanFeed::on_end_source`], and the feed asks for what it needs,
//! in the order a decision needs it — the span's name, scope and the few attributes that decide
//! whether it can be a tool span at all (most spans of an agent are not, and cost only that),
//! then the keys the matched convention reads, then its status, times and events. Attributes
//! are asked by key, each key with its place in [`SpanFeed::attribute_keys`], so a source looks
//! them up with key objects it made once. Reading a span this way allocates nothing in the
//! feed after a tool's first call (`tests/span_feed_alloc.rs`).
//!
//! # Time
//!
//! A call is recorded by its span's own times, mapped onto the registry's clock (the span's
//! age when it is handed in, taken back from the registry's reading then), with the rules of
//! [`ToolHealthRegistry::record_past`] — as the OTLP receiver records: a span that started
//! after its tool's cooldown ended is the probe, and its outcome closes or re-opens the
//! breaker, so an agent whose only feed is its spans (no gate) brings a recovered tool back by
//! calling it again; stale results never move a newer episode. Its duration is the span's own
//! (end − start). Spans that waited for a late verdict are recorded by a later span or by
//! [`SpanFeed::flush`].
//!

use std::borrow::Cow;
use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use crate::infer::classify::OutcomeClassifier;
use crate::infer::conventions::Convention;
use crate::infer::feed_options::FeedOptions;
use crate::infer::span_core::{
    self, Attributes, EventView, Key, Keys, SpanCore, SpanView, Timing, Val,
};
use crate::infer::span_keys::SpanKeys;
use crate::infer::text::Text;
use crate::registry::ToolHealthRegistry;

/// A finished span, in the neutral shape the inference reads (OpenTelemetry's data model).
///
/// Strings are [`Cow`]: owned (`FinishedSpan<'static>`), or borrowed from the source's own
/// span for the time of one [`SpanFeed::on_end`] call. Built with [`FinishedSpan::new`], then
/// its fields set.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct FinishedSpan<'a> {
    /// The span's name (`execute_tool search`, `running tool`, …).
    pub name: Cow<'a, str>,
    /// The instrumentation scope's name (the tracer's name: `pydantic-ai`,
    /// `openinference.instrumentation.langchain`, …).
    pub scope: Cow<'a, str>,
    /// The span's id (the 8 bytes big-endian); 0 when unknown.
    pub span_id: u64,
    /// The parent span's id; 0 for a root span.
    pub parent_id: u64,
    /// When it started (wall clock).
    pub start: SystemTime,
    /// When it ended (wall clock).
    pub end: SystemTime,
    /// Its status.
    pub status: SpanStatus,
    /// Its attributes, in order (the first of a repeated key counts).
    pub attributes: Vec<(Cow<'a, str>, AttributeValue<'a>)>,
    /// Its events, in order.
    pub events: Vec<SpanEvent<'a>>,
}

impl<'a> FinishedSpan<'a> {
    /// A span named `name` that ran from `start` to `end`: no scope, ids 0, status unset, no
    /// attributes or events.
    pub fn new(name: impl Into<Cow<'a, str>>, start: SystemTime, end: SystemTime) -> Self {
        Self {
            name: name.into(),
            scope: Cow::Borrowed(""),
            span_id: 0,
            parent_id: 0,
            start,
            end,
            status: SpanStatus::Unset,
            attributes: Vec::new(),
            events: Vec::new(),
        }
    }
}

/// A span's status ([OpenTelemetry's](https://opentelemetry.io/docs/specs/otel/trace/api/#set-status)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SpanStatus {
    /// Not set.
    #[default]
    Unset,
    /// Ok.
    Ok,
    /// Error.
    Error,
}

/// An event of a span (an `exception` event, a log bridged as an event, …).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SpanEvent<'a> {
    /// Its name (`exception`, or a bridged log's message).
    pub name: Cow<'a, str>,
    /// Its attributes, in order.
    pub attributes: Vec<(Cow<'a, str>, AttributeValue<'a>)>,
}

impl<'a> SpanEvent<'a> {
    /// An event named `name` with `attributes`.
    pub fn new(
        name: impl Into<Cow<'a, str>>,
        attributes: Vec<(Cow<'a, str>, AttributeValue<'a>)>,
    ) -> Self {
        Self {
            name: name.into(),
            attributes,
        }
    }
}

/// An attribute's value.
#[derive(Clone, PartialEq)]
#[non_exhaustive]
pub enum AttributeValue<'a> {
    /// A string.
    Str(Cow<'a, str>),
    /// An integer.
    I64(i64),
    /// A float.
    F64(f64),
    /// A boolean.
    Bool(bool),
    /// Anything else (an array, bytes), by a text form of the source's choosing: read only
    /// where a convention takes a field's text.
    Other(Cow<'a, str>),
}

impl fmt::Debug for AttributeValue<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Str(s) => fmt::Debug::fmt(s, f),
            Self::I64(i) => fmt::Debug::fmt(i, f),
            Self::F64(x) => fmt::Debug::fmt(x, f),
            Self::Bool(b) => fmt::Debug::fmt(b, f),
            Self::Other(s) => f.write_str(s),
        }
    }
}

impl<'a> From<&'a str> for AttributeValue<'a> {
    fn from(s: &'a str) -> Self {
        Self::Str(Cow::Borrowed(s))
    }
}

impl From<String> for AttributeValue<'_> {
    fn from(s: String) -> Self {
        Self::Str(Cow::Owned(s))
    }
}

impl From<i64> for AttributeValue<'_> {
    fn from(i: i64) -> Self {
        Self::I64(i)
    }
}

impl From<f64> for AttributeValue<'_> {
    fn from(x: f64) -> Self {
        Self::F64(x)
    }
}

impl From<bool> for AttributeValue<'_> {
    fn from(b: bool) -> Self {
        Self::Bool(b)
    }
}

/// The text of an [`AttributeValue::Other`], as the inference's `Debug` reading takes it.
struct OtherText<'s>(&'s str);

impl fmt::Debug for OtherText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// Visits `k` = `v` as the inference reads a pair.
fn visit(k: &str, v: &AttributeValue<'_>, f: &mut dyn FnMut(&str, Val<'_>)) {
    match v {
        AttributeValue::Str(s) => f(k, Val::Str(s)),
        AttributeValue::I64(i) => f(k, Val::I64(*i)),
        AttributeValue::F64(x) => f(k, Val::F64(*x)),
        AttributeValue::Bool(b) => f(k, Val::Bool(*b)),
        AttributeValue::Other(s) => f(k, Val::Other(&OtherText(s))),
    }
}

/// A value as the inference's `get` answers it.
fn got<'s>(v: &'s AttributeValue<'_>) -> Val<'s> {
    match v {
        AttributeValue::Str(s) => Val::Str(s),
        AttributeValue::I64(i) => Val::I64(*i),
        AttributeValue::F64(x) => Val::F64(*x),
        AttributeValue::Bool(b) => Val::Bool(*b),
        // A `get` is asked for names, decisions and markers: an opaque value is present, with
        // the text as a plain string.
        AttributeValue::Other(s) => Val::Str(s),
    }
}

fn each(attributes: &[(Cow<'_, str>, AttributeValue<'_>)], f: &mut dyn FnMut(&str, Val<'_>)) {
    for (k, v) in attributes {
        visit(k, v, f);
    }
}

fn get<'s>(attributes: &'s [(Cow<'_, str>, AttributeValue<'_>)], key: &str) -> Option<Val<'s>> {
    let (_, v) = attributes.iter().find(|(k, _)| k == key)?;
    Some(got(v))
}

impl Attributes for SpanEvent<'_> {
    fn each(&self, f: &mut dyn FnMut(&str, Val<'_>)) {
        each(&self.attributes, f)
    }
    fn get(&self, key: &str) -> Option<Val<'_>> {
        get(&self.attributes, key)
    }
}

impl EventView for SpanEvent<'_> {
    fn name(&self) -> &str {
        &self.name
    }
}

impl Attributes for FinishedSpan<'_> {
    fn each(&self, f: &mut dyn FnMut(&str, Val<'_>)) {
        each(&self.attributes, f)
    }
    fn get(&self, key: &str) -> Option<Val<'_>> {
        get(&self.attributes, key)
    }
}

impl SpanView for FinishedSpan<'_> {
    fn name(&self) -> &str {
        &self.name
    }
    fn scope(&self) -> &str {
        &self.scope
    }
    fn span_id(&self) -> u64 {
        self.span_id
    }
    fn parent_id(&self) -> u64 {
        self.parent_id
    }
    fn start(&self) -> SystemTime {
        self.start
    }
    fn end(&self) -> SystemTime {
        self.end
    }
    fn status(&self) -> span_core::SpanStatus {
        core_status(self.status)
    }
    fn events(&self, f: &mut dyn FnMut(&dyn EventView)) {
        for event in &self.events {
            f(event);
        }
    }
}

/// A finished span the feed reads on demand ([`SpanFeed::on_end_source`]): for a source whose
/// spans live elsewhere and keep their attributes in a map (a Python span), so that nothing is
/// copied and only what a decision needs is read (see the [module docs](self#spans-read-on-demand)).
///
/// Each method is asked at most a few times per span, and only when needed: a span that can be
/// no tool call is asked for its name, its scope and a few attributes; a tool span for the
/// attributes its convention reads, its status and times, then its events; the ids only when a
/// claim, a nested call or a late verdict needs them.
pub trait SpanSource {
    /// The span's name.
    fn name(&self) -> &str;
    /// The instrumentation scope's name (the tracer's name).
    fn scope(&self) -> &str;
    /// The first value of the attribute `key` — the key at place `index` of the feed's
    /// [`attribute_keys`](SpanFeed::attribute_keys) —, or `None` when the span has none. The
    /// feed asks only for keys of that table. Texts are lent from the span
    /// (`Cow::Borrowed`): an owned text is read where a convention reads a field's value, but
    /// where the feed keeps a text while it decides (the span's `target`) it counts as empty.
    fn attribute(&self, index: usize, key: &str) -> Option<AttributeValue<'_>>;
    /// The span's id (the 8 bytes big-endian); 0 when unknown.
    fn span_id(&self) -> u64;
    /// The parent span's id; 0 for a root span.
    fn parent_id(&self) -> u64;
    /// When it started (wall clock).
    fn start(&self) -> SystemTime;
    /// When it ended (wall clock).
    fn end(&self) -> SystemTime;
    /// Its status.
    fn status(&self) -> SpanStatus;
    /// Calls `f` with each of its events, in order.
    fn events(&self, f: &mut dyn FnMut(&SpanEvent<'_>));
    /// Whether the caller has a call of `tool` in flight where this span ends (its context),
    /// which it records itself: a tool span of `tool` is then part of that call, and is
    /// skipped (as [`SpanFeed::on_end_within`]'s `open`). Asked only of a tool span, with its
    /// tool; none by default.
    fn call_open(&self, tool: &str) -> bool {
        let _ = tool;
        false
    }
}

/// A [`SpanSource`] as the span core sees a span: attributes by key.
struct Source<'s> {
    span: &'s dyn SpanSource,
    keys: &'s SpanKeys,
}

impl Attributes for Source<'_> {
    fn each(&self, f: &mut dyn FnMut(&str, Val<'_>)) {
        for (index, key) in self.keys.names().enumerate() {
            if let Some(v) = self.span.attribute(index, key) {
                visit(key, &v, f);
            }
        }
    }
    fn get(&self, key: &str) -> Option<Val<'_>> {
        let index = self.keys.index_of(key)?;
        self.get_key(Key { index, name: key })
    }
    fn get_key(&self, key: Key<'_>) -> Option<Val<'_>> {
        // A borrowed value stays borrowed from the source; an owned one (a number) is copied.
        match self.span.attribute(key.index, key.name)? {
            AttributeValue::Str(Cow::Borrowed(s)) | AttributeValue::Other(Cow::Borrowed(s)) => {
                Some(Val::Str(s))
            }
            AttributeValue::I64(i) => Some(Val::I64(i)),
            AttributeValue::F64(x) => Some(Val::F64(x)),
            AttributeValue::Bool(b) => Some(Val::Bool(b)),
            // An owned text cannot outlive this call: present, read as no text.
            AttributeValue::Str(Cow::Owned(_)) | AttributeValue::Other(Cow::Owned(_)) => {
                Some(Val::Str(""))
            }
        }
    }
    fn each_of(&self, keys: Keys<'_>, f: &mut dyn FnMut(&str, Val<'_>)) {
        for key in keys.iter() {
            if let Some(v) = self.span.attribute(key.index, key.name) {
                visit(key.name, &v, f);
            }
        }
    }
}

impl SpanView for Source<'_> {
    fn name(&self) -> &str {
        self.span.name()
    }
    fn scope(&self) -> &str {
        self.span.scope()
    }
    fn span_id(&self) -> u64 {
        self.span.span_id()
    }
    fn parent_id(&self) -> u64 {
        self.span.parent_id()
    }
    fn start(&self) -> SystemTime {
        self.span.start()
    }
    fn end(&self) -> SystemTime {
        self.span.end()
    }
    fn status(&self) -> span_core::SpanStatus {
        core_status(self.span.status())
    }
    fn events(&self, f: &mut dyn FnMut(&dyn EventView)) {
        self.span.events(&mut |event| f(event));
    }
}

fn core_status(status: SpanStatus) -> span_core::SpanStatus {
    match status {
        SpanStatus::Error => span_core::SpanStatus::Error,
        SpanStatus::Ok => span_core::SpanStatus::Ok,
        SpanStatus::Unset => span_core::SpanStatus::Unset,
    }
}

/// Feeds a [`ToolHealthRegistry`] from finished spans handed in as [`FinishedSpan`]s (see the
/// [module docs](self)). Cheap to share (`Arc` inside); `Send + Sync`.
#[derive(Clone)]
pub struct SpanFeed {
    core: Arc<SpanCore>,
    claims: Arc<Claims>,
}

impl fmt::Debug for SpanFeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.core, f)
    }
}

impl SpanFeed {
    /// A feed into `registry` with the OTLP receiver's conventions —
    /// [`Convention::other_languages`] (Pydantic AI, the Vercel AI SDK, LangChain and the OpenAI
    /// Agents SDK through OpenInference or OpenLLMetry, LangSmith), then
    /// [`Convention::builtin`] (OpenTelemetry GenAI and MCP, the Rust frameworks) —, not strict,
    /// caller errors [`DEFAULT_CALLER_ERRORS`](crate::layer::DEFAULT_CALLER_ERRORS).
    pub fn new(registry: Arc<ToolHealthRegistry>) -> Self {
        Self::builder(registry).build()
    }

    /// A builder for other conventions and outcome rules (the span processor's options).
    pub fn builder(registry: Arc<ToolHealthRegistry>) -> SpanFeedBuilder {
        let mut conventions = Convention::other_languages();
        conventions.extend(Convention::builtin());
        SpanFeedBuilder(FeedOptions::new(registry).conventions(conventions))
    }

    /// The registry this feed records into.
    pub fn registry(&self) -> &Arc<ToolHealthRegistry> {
        self.core.registry()
    }

    /// A span ended: if it is a tool call by some convention, its outcome is recorded (or waits
    /// for a late verdict, or for its parent when it may be nested in a tool span of the same
    /// tool). Never panics: a panic inside (a classifier's) is caught and the span dropped.
    pub fn on_end(&self, span: &FinishedSpan<'_>) {
        self.on_end_within(span, &[])
    }

    /// Records the waiting calls whose time has come (late verdicts that never came). Every
    /// [`on_end`](Self::on_end) and every gate of the registry does it too; call it when spans
    /// may stop arriving (a periodic flush, a shutdown).
    pub fn flush(&self) {
        let core = &self.core;
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| core.flush_waiting()));
    }

    /// How many calls wait (for a late verdict, or for their parent span).
    pub fn waiting(&self) -> usize {
        self.core.waiting()
    }

    /// The tool `span` is a call of, by the conventions — its name, scope and attributes so
    /// far; events and status are not read — or `None` for a span that is no tool call's.
    /// Nothing is recorded or counted. For a call helper asking whether the span it gates in is
    /// the call's own (to annotate it with `tool_health.gate.decision`, as the layer does).
    pub fn tool_name(&self, span: &FinishedSpan<'_>) -> Option<String> {
        let core = &self.core;
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            core.tool_name_of(span).map(|t| t.as_str().to_owned())
        }))
        .ok()
        .flatten()
    }

    /// Whether `span` (finished or live, read on demand) is a call of `tool` by the
    /// conventions — [`tool_name`](Self::tool_name)'s question, with nothing copied. Nothing is
    /// recorded or counted.
    pub fn is_call_of(&self, span: &dyn SpanSource, tool: &str) -> bool {
        let core = &self.core;
        let view = Source {
            span,
            keys: core.attribute_keys(),
        };
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            core.tool_name_of(&view).is_some_and(|t| t == tool)
        }))
        .unwrap_or(false)
    }

    /// [`tool_name`](Self::tool_name) of a span read on demand.
    pub fn tool_name_of(&self, span: &dyn SpanSource) -> Option<String> {
        let core = &self.core;
        let view = Source {
            span,
            keys: core.attribute_keys(),
        };
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            core.tool_name_of(&view).map(|t| t.as_str().to_owned())
        }))
        .ok()
        .flatten()
    }

    /// Every attribute key this feed may ask a [`SpanSource`] for, each once, in the order of
    /// their places (the `index` of [`SpanSource::attribute`]). Fixed when the feed is built.
    pub fn attribute_keys(&self) -> impl ExactSizeIterator<Item = &str> {
        self.core.attribute_keys().names()
    }

    /// [`on_end`](Self::on_end) for a span read on demand (see [`SpanSource`]): a span that
    /// can be no tool call is asked only for its name, scope and a few attributes; a tool span
    /// of a tool the source says has a call open where it ends ([`SpanSource::call_open`]) is
    /// part of that call, and is skipped. Never panics.
    pub fn on_end_source(&self, span: &dyn SpanSource) {
        let core = &self.core;
        let view = Source {
            span,
            keys: core.attribute_keys(),
        };
        let claims = &self.claims;
        let recorded =
            |tool: &str| claims.is_claimed(|| span.span_id(), tool) || span.call_open(tool);
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            core.on_end_skipping(&view, Timing::OwnTimes, &recorded)
        }));
        claims.release(|| span.span_id());
    }

    /// The caller gated a call of `tool` inside the span `span_id` (the current span when it
    /// gated) and records the call itself: when that span ends and is a tool span of `tool`
    /// (by the conventions, read at its end), it is that call, and is skipped. A claim lasts
    /// until its span ends; at most [`MAX_CLAIMS`] are kept (the oldest goes first).
    pub fn claim(&self, span_id: u64, tool: &str) {
        if span_id != 0 {
            self.claims.add(span_id, tool);
        }
    }

    /// [`on_end`](Self::on_end) for a span ending while the caller has calls of the `open`
    /// tools in flight where it ends (its context): a tool span of one of them is part of that
    /// call, and is skipped.
    pub fn on_end_within(&self, span: &FinishedSpan<'_>, open: &[&str]) {
        let claims = &self.claims;
        let recorded =
            |tool: &str| claims.is_claimed(|| span.span_id, tool) || open.contains(&tool);
        let core = &self.core;
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // By the span's own times, as the receiver records: a span that started after a
            // cooldown ended is the probe, so spans alone bring a tool back.
            core.on_end_skipping(span, Timing::OwnTimes, &recorded)
        }));
        claims.release(|| span.span_id);
    }
}

/// How many [`SpanFeed::claim`]s a feed keeps at most.
pub const MAX_CLAIMS: usize = 1024;

/// The claims: (span id, tool), oldest first. One relaxed load while there are none; the
/// tools' names in recycled buffers and the list's room kept, so a claim allocates nothing
/// once the list has grown to its usual size.
#[derive(Debug, Default)]
struct Claims {
    any: AtomicBool,
    list: Mutex<VecDeque<(u64, Text)>>,
}

impl Claims {
    fn add(&self, span_id: u64, tool: &str) {
        let mut list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        if list.iter().any(|(id, t)| *id == span_id && t == tool) {
            return; // many calls of one tool inside one span: one claim
        }
        if list.len() >= MAX_CLAIMS {
            list.pop_front();
        }
        list.push_back((span_id, Text::new(tool)));
        // Relaxed: a span ends after the claim made inside it, on the same thread or through
        // the SDK's own synchronisation, which orders this store before the load.
        self.any.store(true, Ordering::Relaxed);
    }

    /// Whether a claim may wait (one relaxed load).
    fn any(&self) -> bool {
        self.any.load(Ordering::Relaxed)
    }

    /// Whether a call of `tool` was claimed on the span `span_id` (read only when a claim
    /// waits: calls of several tools may have been gated inside one span).
    fn is_claimed(&self, span_id: impl FnOnce() -> u64, tool: &str) -> bool {
        if !self.any() {
            return false;
        }
        let span_id = span_id();
        if span_id == 0 {
            return false;
        }
        let list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        list.iter().any(|(id, t)| *id == span_id && t == tool)
    }

    /// The span `span_id` ended: its claims go.
    fn release(&self, span_id: impl FnOnce() -> u64) {
        if !self.any() {
            return;
        }
        let span_id = span_id();
        if span_id == 0 {
            return;
        }
        let mut list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        list.retain(|(id, _)| *id != span_id);
        if list.is_empty() {
            self.any.store(false, Ordering::Relaxed);
        }
    }
}

/// Builds a [`SpanFeed`] (the span processor's options).
#[derive(Debug)]
#[must_use]
pub struct SpanFeedBuilder(FeedOptions);

impl SpanFeedBuilder {
    /// Adds a convention, tried before the others (one of the same name is replaced in
    /// place). A convention with a [`filter`](crate::layer::Convention::filter) (a `tracing`
    /// metadata predicate) never matches a finished span.
    pub fn convention(self, convention: Convention) -> Self {
        Self(self.0.convention(convention))
    }

    /// Replaces every convention (default: the receiver's).
    pub fn conventions(self, conventions: impl IntoIterator<Item = Convention>) -> Self {
        Self(self.0.conventions(conventions))
    }

    /// Strict mode (default off), as the layer's.
    pub fn strict(self, strict: bool) -> Self {
        Self(self.0.strict(strict))
    }

    /// The `error.type` values that are the caller's fault, as the layer's.
    pub fn caller_errors<I>(self, errors: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        Self(self.0.caller_errors(errors))
    }

    /// Replaces the outcome rules, as the layer's.
    pub fn classifier(self, classifier: impl OutcomeClassifier) -> Self {
        Self(self.0.classifier(classifier))
    }

    /// The feed.
    pub fn build(self) -> SpanFeed {
        SpanFeed {
            core: self.0.build(),
            claims: Arc::default(),
        }
    }
}
