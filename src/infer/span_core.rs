//! The span core: a finished OpenTelemetry-shaped span, seen through [`SpanView`], into
//! records — conventions, classification, late verdicts and nested calls exactly as the layer
//! runs them. Every feed of such spans adapts its own span to `SpanView` and calls
//! [`SpanCore::on_end`]: each SDK version's span processor (`crate::span_processor`), the OTLP
//! receiver (`crate::receiver`) for other processes' spans, the span feed (`crate::span_feed`)
//! for spans made outside the crate. It lives below all of them, so each feed goes down only.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::call::{CallOutcome, CallReport};
use crate::hook::{self, CallingOut};
use crate::infer::classify::{DefaultClassifier, OutcomeClassifier, SharedClassifier};
use crate::infer::conventions::{Compiled, Convention, MAX_CONVENTIONS};
use crate::infer::deferred::{self, Closed, Deferred, Resolution, Resolved};
use crate::infer::facts::{contains_formatted, EventFields, Observed, SpanFields};
use crate::infer::span_keys::SpanKeys;
use crate::infer::text::Text;
use crate::registry::past::CallTimes;
use crate::registry::ToolHealthRegistry;
use crate::semconv;

use tracing_core::Level;

/// The hash a waiting call's tool name is matched by (FNV-1a).
fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

pub(crate) use super::span_view::{
    str_at, str_of, Attributes, EventView, Key, Keys, SpanStatus, SpanView, Val,
};

/// When a span from another process ran, on this registry's clock: its age on arrival (the
/// receiver's wall clock minus the span's timestamps) taken back from the registry's reading
/// at arrival. Clock skew between the hosts shifts it; a span from the future is read as now.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Arrival {
    /// The receiver's wall clock at arrival.
    pub(crate) wall: SystemTime,
    /// The registry's clock at arrival.
    pub(crate) registry: Duration,
}

impl Arrival {
    /// Now, on both clocks.
    pub(crate) fn now(registry: &ToolHealthRegistry) -> Self {
        Self {
            wall: SystemTime::now(),
            registry: registry.now(),
        }
    }

    /// A span timestamp as a registry clock reading.
    fn at(&self, t: SystemTime) -> Duration {
        let age = self.wall.duration_since(t).unwrap_or(Duration::ZERO);
        self.registry.saturating_sub(age)
    }

    /// A span's start and end as registry clock readings.
    fn times(&self, start: SystemTime, end: SystemTime) -> CallTimes {
        let ended = self.at(end);
        CallTimes::new(self.at(start).min(ended), ended)
    }
}

/// How a feed's calls are timed.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Timing<'a> {
    /// Recorded now (the SDK span processors: this process's spans, as they end).
    Now,
    /// By the span's own times as of their arrival (the receiver: one arrival per request).
    #[cfg_attr(not(feature = "receiver"), allow(dead_code))]
    Arrived(&'a Arrival),
    /// By the span's own times, mapped onto the registry's clock when the call is recorded (the
    /// span feed: no clock is read for a span that is no tool call).
    OwnTimes,
}

impl Timing<'_> {
    /// When a call that ran from `start` to `end` is recorded as having run (`None`: now).
    fn times(
        self,
        registry: &ToolHealthRegistry,
        start: SystemTime,
        end: SystemTime,
    ) -> Option<CallTimes> {
        match self {
            Timing::Now => None,
            Timing::Arrived(a) => Some(a.times(start, end)),
            Timing::OwnTimes => Some(Arrival::now(registry).times(start, end)),
        }
    }
}

/// Which feed a core serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Feed {
    /// The span processor: spans of this process, recorded as they end; the layer's records
    /// win over its own for a call both see.
    InProcess,
    /// The OTLP receiver: spans of other processes, recorded by their own clock
    /// ([`ToolHealthRegistry::record_past`]).
    #[cfg_attr(not(feature = "receiver"), allow(dead_code))]
    Remote,
}

/// A call waiting in a table (a late verdict, or its parent): what its span showed, its
/// duration, its tool's hash, and when it ran (a remote span's times).
type Waiting = (Observed, Duration, u64, Option<CallTimes>);

/// How a feed maps a span's tool name to the registry key its call is recorded under (`None`:
/// the name itself).
pub(crate) type KeyMap = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Whether a span (by its id) is of a call its feed's application recorded another way.
pub(crate) type RecordedElsewhere = Arc<dyn Fn(u64) -> bool + Send + Sync>;

/// What every processor version (and the OTLP receiver) shares.
pub(crate) struct SpanCore {
    registry: Arc<ToolHealthRegistry>,
    conventions: Box<[Convention]>,
    compiled: Box<[Compiled]>,
    /// Every attribute key the conventions match on and read, and each one's by key.
    span_keys: SpanKeys,
    classifier: SharedClassifier,
    late: Deferred<Waiting>,
    /// Spans of a convention that may sit inside a tool span of the same tool (MCP client
    /// spans inside `execute_tool`), waiting for their parent: one call, one record.
    nested: Deferred<Waiting>,
    feed: Feed,
    /// The receiver's map from span tool names to registry keys.
    keys: Option<KeyMap>,
    /// The receiver's spans of calls recorded another way.
    elsewhere: Option<RecordedElsewhere>,
    /// The parents of such spans seen lately (the caller's tool span around its transport's
    /// span: the same call), at most [`ELSEWHERE_PARENTS`].
    elsewhere_parents: std::sync::Mutex<std::collections::VecDeque<u64>>,
}

/// How many parents of spans recorded elsewhere are remembered for their own end.
const ELSEWHERE_PARENTS: usize = 1024;

impl fmt::Debug for SpanCore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolHealthSpanProcessor")
            .field("registry", &self.registry)
            .field(
                "conventions",
                &self
                    .conventions
                    .iter()
                    .map(Convention::name)
                    .collect::<Vec<_>>(),
            )
            .field("feed", &self.feed)
            .finish_non_exhaustive()
    }
}

/// Reads a value into `fields` the way the span's convention says (a name longer than `max`
/// bytes is refused, never copied).
fn read(fields: &mut SpanFields, c: &Compiled, key: &str, value: Val<'_>, max: usize) {
    match value {
        Val::Str(s) => fields.read(c, key, s, max),
        Val::I64(i) => fields.read_number(c, key, i as f64, &i, max),
        Val::F64(x) => fields.read_number(c, key, x, &x, max),
        Val::Bool(b) => fields.read(c, key, if b { "true" } else { "false" }, max),
        Val::Other(d) => {
            if c.reads(key) {
                let text = crate::infer::facts::debug_text(d, max);
                fields.read(c, key, &text, max);
            }
        }
    }
}

/// The text of a value (no allocation for strings).
fn with_text<R>(value: Val<'_>, f: impl FnOnce(&str) -> R) -> R {
    match value {
        Val::Str(s) => f(s),
        Val::I64(i) => f(&i.to_string()),
        Val::F64(x) => f(&x.to_string()),
        Val::Bool(b) => f(if b { "true" } else { "false" }),
        Val::Other(d) => f(&format!("{d:?}")),
    }
}

/// A tool span's facts, read before anything is recorded.
struct ToolSpan<'c> {
    convention: &'c Compiled,
    nests: bool,
    seen: Observed,
    hash: u64,
}

impl SpanCore {
    pub(crate) fn new(
        registry: Arc<ToolHealthRegistry>,
        conventions: Vec<Convention>,
        classifier: Option<Arc<dyn OutcomeClassifier>>,
        default_classifier: DefaultClassifier,
        feed: Feed,
        keys: Option<KeyMap>,
        elsewhere: Option<RecordedElsewhere>,
    ) -> Arc<Self> {
        let mut conventions = conventions;
        conventions.truncate(MAX_CONVENTIONS);
        // A convention with a `tracing` metadata filter cannot be matched here.
        conventions.retain(|c| !c.has_filter());
        let compiled: Box<[Compiled]> = conventions
            .iter()
            .map(|c| c.compile(&std::borrow::Cow::Borrowed(semconv::RETRY_AFTER)))
            .collect();
        let span_keys = SpanKeys::new(&conventions, &compiled);
        let core = Arc::new(Self {
            registry,
            conventions: conventions.into_boxed_slice(),
            compiled,
            span_keys,
            classifier: SharedClassifier(
                classifier.unwrap_or_else(|| Arc::new(default_classifier)),
            ),
            late: Deferred::new(),
            nested: Deferred::new(),
            feed,
            keys,
            elsewhere,
            elsewhere_parents: std::sync::Mutex::default(),
        });
        if feed == Feed::InProcess {
            // The layer marks its records only for an in-process processor to skip.
            hook::install_processor();
        }
        let weak: std::sync::Weak<dyn hook::DeferredFlush> = Arc::downgrade(&core) as _;
        hook::install_deferred_flush(weak);
        core
    }

    pub(crate) fn registry(&self) -> &Arc<ToolHealthRegistry> {
        &self.registry
    }

    /// Every attribute key the conventions match on and read, each once, in the order of
    /// their places (the [`Key::index`] a span is asked by).
    pub(crate) fn attribute_keys(&self) -> &SpanKeys {
        &self.span_keys
    }

    /// The names of the conventions, in the order they are tried.
    #[cfg_attr(not(feature = "receiver"), allow(dead_code))]
    pub(crate) fn convention_names(&self) -> impl Iterator<Item = &str> {
        self.conventions.iter().map(Convention::name)
    }

    /// The convention a finished span matches (its place, its table, whether its spans nest
    /// in a tool span): its target is the `target` attribute (tracing-opentelemetry's), else
    /// `code.module.name` / `code.namespace`, else the instrumentation scope's name. The first
    /// look at every span: just the target and the fields that match, by key.
    fn convention_of(&self, span: &dyn SpanView) -> Option<(usize, &Compiled, bool)> {
        let [target, module, namespace] = self.span_keys.target();
        let target = str_at(span, target)
            .or_else(|| str_at(span, module))
            .or_else(|| str_at(span, namespace))
            .unwrap_or(span.scope());
        let index = self.conventions.iter().enumerate().position(|(i, c)| {
            let name = (!c.names_from_otel_name()).then(|| span.name());
            c.matches_target_and_name(target, name) && self.span_keys.declares(i, span)
        })?;
        Some((
            index,
            self.compiled.get(index)?,
            self.conventions[index].nests_in_tool_span(),
        ))
    }

    /// A span's fields as the convention at `index` (table `c`) reads them: its name as
    /// `otel.name`, then the keys that convention reads.
    fn fields_of(&self, span: &dyn SpanView, index: usize, c: &Compiled) -> SpanFields {
        let mut fields = SpanFields::default();
        let max = self.registry.max_name_len();
        // `otel.name` became the span's name.
        fields.read(c, semconv::OTEL_NAME, span.name(), max);
        span.each_of(self.span_keys.reads(index), &mut |k, v| {
            read(&mut fields, c, k, v, max)
        });
        fields
    }

    /// The tool a span (finished or not) is a call of by its name, scope and attributes, with
    /// nothing counted or recorded (a feed asking whether the current span is a tool span).
    pub(crate) fn tool_name_of(&self, span: &dyn SpanView) -> Option<Text> {
        let (index, c, _) = self.convention_of(span)?;
        let mut seen = Observed::new(c.completion_marker);
        seen.apply(self.fields_of(span, index, c));
        seen.tool_name()?;
        seen.name.take().map(|(_, name)| name)
    }

    /// What a finished span shows, if it is a tool span.
    fn tool_span(&self, span: &dyn SpanView) -> Option<ToolSpan<'_>> {
        let (index, c, nests) = self.convention_of(span)?;
        let fields = self.fields_of(span, index, c);
        if fields.rejected_name != 0 {
            self.registry.reject_name(fields.rejected_name as usize);
        }
        let mut seen = Observed::new(c.completion_marker);
        seen.apply(fields);
        match span.status() {
            SpanStatus::Error => {
                seen.status_error = true;
                seen.completed = true;
            }
            SpanStatus::Ok => seen.completed = true,
            SpanStatus::Unset => {}
        }
        span.events(&mut |event| {
            let mut error = event.name() == "exception";
            let mut marker = false;
            let mut own = true;
            let mut e = EventFields::default();
            event.each(&mut |k, v| match k {
                "level" => with_text(v, |l| error |= l.eq_ignore_ascii_case("error")),
                "target" => with_text(v, |t| {
                    own = !(t.starts_with("opentelemetry") || t.starts_with("tool_health"))
                }),
                semconv::RETURN_FIELD => marker = true,
                semconv::ERROR_FIELD => {
                    marker = true;
                    error = true;
                    if let Val::Other(d) = v {
                        e.refusal |= contains_formatted(crate::REFUSAL_MESSAGE, d);
                    } else {
                        with_text(v, |t| e.read(k, t));
                    }
                }
                // A refusal raised as an exception (the Python call helper's `Refused`),
                // recorded by an SDK's `record_exception`.
                "exception.message" => {
                    with_text(v, |t| e.refusal |= t.starts_with(crate::REFUSAL_MESSAGE))
                }
                "exception.type" if e.error_type.is_none() => {
                    with_text(v, |t| e.error_type = Some(Text::new(t)))
                }
                semconv::ERROR_TYPE => with_text(v, |t| e.read(k, t)),
                _ => {}
            });
            seen.refused |= e.refusal;
            if error && own {
                seen.error_event(c.event_error_type(e.error_type.take()));
            }
            seen.completed |= marker;
        });
        let hash = name_hash(seen.tool_name()?);
        Some(ToolSpan {
            convention: c,
            nests,
            seen,
            hash,
        })
    }

    /// A span ended (`arrival`: a span of another process, received then).
    #[cfg_attr(
        not(any(feature = "span-processor", feature = "span-processor-sdk-0-32")),
        allow(dead_code)
    )]
    pub(crate) fn on_end(&self, span: &dyn SpanView, arrival: Option<&Arrival>) {
        let timing = arrival.map_or(Timing::Now, Timing::Arrived);
        self.on_end_skipping(span, timing, &|_| false)
    }

    /// [`on_end`](Self::on_end), where a tool span of a tool `recorded` answers true for is
    /// the caller's own record (a feed's claims): skipped as a span the layer recorded is —
    /// after it has taken in its nested spans, so they are skipped with it.
    pub(crate) fn on_end_skipping(
        &self,
        span: &dyn SpanView,
        timing: Timing<'_>,
        recorded: &dyn Fn(&str) -> bool,
    ) {
        let _calling_out = CallingOut::enter();
        let mut own = self.tool_span(span);
        if self.elsewhere.is_some() && self.was_recorded_elsewhere(span, own.is_some()) {
            if let Some(own) = own.as_mut() {
                own.seen.recorded_elsewhere = true;
            }
        }
        if !self.late.is_idle() {
            self.parent_ended(span);
        }
        if !self.nested.is_idle() {
            self.nested_parent_ended(span, own.as_mut());
        }
        self.flush_due();
        let Some(ToolSpan {
            convention: c,
            nests,
            seen,
            hash,
        }) = own
        else {
            return;
        };
        let Some(tool) = seen.tool_name() else {
            return;
        };
        let registry = &self.registry;
        if self.feed == Feed::InProcess {
            let marked =
                hook::take_layer_recorded(registry.address(), hook::tool_hash(tool), || {
                    registry.now()
                });
            if marked || span.get_key(self.span_keys.gate_decision()).is_some() || recorded(tool) {
                // The layer just handled this very call (it closed the tracing span this one
                // was bridged from), or bound a gate decision to it, or a feed's caller
                // records it: one call, one record — the one that holds the permit.
                return;
            }
        }
        if self.feed == Feed::Remote
            && str_at(span, self.span_keys.registry_id()) == Some(registry.instance_id())
        {
            // This very registry gated the call and recorded it where it ran: its span came
            // back (a process exporting its own spans to its own receiver, directly or
            // through a collector). One call, one record.
            return;
        }
        if seen.refused {
            return;
        }
        let (start, end) = (span.start(), span.end());
        let duration = end.duration_since(start).unwrap_or(Duration::ZERO);
        let times = timing.times(registry, start, end);
        // The parent is read only for a call that may wait for it (a span read on demand
        // pays for each field it is asked).
        let parent = || span.parent_id();
        let nested_in = if nests { parent() } else { 0 };
        if nested_in != 0 {
            // Wait for the parent: inside a tool span of the same tool, it is that call.
            let now = registry.now();
            let due = deferred::due(now, registry.probe_timeout_of(&self.key(tool)));
            let mut out = self.nested.batch();
            let key = span.span_id();
            match self
                .nested
                .open(nested_in, (seen, duration, key, times), &mut out)
            {
                Ok(()) => {
                    if let Closed::Waits = self.nested.close(now, due, |w| w.2 == key) {
                        hook::deferred_add(1);
                    }
                    self.record_resolved(out);
                }
                Err((seen, ..)) => {
                    // No room to wait: recorded on its own, now.
                    self.record_resolved(out);
                    if let Some(tool) = seen.tool_name() {
                        let outcome = self.classify(&seen, tool);
                        self.record(&seen, tool, outcome, duration, times);
                    }
                }
            }
            return;
        }
        let outcome = self.classify(&seen, tool);
        let waits = c.late_failure.is_some() && outcome == Some(CallOutcome::Success);
        let parent = if waits { parent() } else { 0 };
        if parent != 0 {
            let now = registry.now();
            let due = deferred::due(now, registry.probe_timeout_of(&self.key(tool)));
            let mut out = self.late.batch();
            if self
                .late
                .open(parent, (seen, duration, hash, times), &mut out)
                .is_ok()
            {
                let is_new = |w: &Waiting| w.2 == hash;
                if let Closed::Waits = self.late.close(now, due, is_new) {
                    hook::deferred_add(1);
                }
            }
            self.record_resolved(out);
            return;
        }
        self.record(&seen, tool, outcome, duration, times);
    }

    /// Whether `span`'s call was recorded where it was served: the span is one the application
    /// named (the caller's span whose trace context came with the call, often its transport's
    /// — an MCP client's `tools/call`, not itself a tool span here), or a tool span around
    /// one (the caller's own span of that call: it ends after its child). Nothing more is
    /// recorded for either.
    fn was_recorded_elsewhere(&self, span: &dyn SpanView, is_tool: bool) -> bool {
        let Some(elsewhere) = &self.elsewhere else {
            return false;
        };
        let mut parents = self
            .elsewhere_parents
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if elsewhere(span.span_id()) {
            if span.parent_id() != 0 {
                if parents.len() >= ELSEWHERE_PARENTS {
                    parents.pop_front();
                }
                parents.push_back(span.parent_id());
            }
            return true;
        }
        if !is_tool {
            return false;
        }
        match parents.iter().position(|&p| p == span.span_id()) {
            Some(i) => {
                parents.remove(i);
                true
            }
            None => false,
        }
    }

    /// The registry key a call of `tool` is recorded under.
    fn key<'a>(&self, tool: &'a str) -> std::borrow::Cow<'a, str> {
        match self.keys.as_ref().and_then(|f| f(tool)) {
            Some(key) => std::borrow::Cow::Owned(key),
            None => std::borrow::Cow::Borrowed(tool),
        }
    }

    fn classify(&self, seen: &Observed, tool: &str) -> Option<CallOutcome> {
        let facts = seen.facts(tool);
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.classifier.0.classify(&facts)
        }))
        .unwrap_or_else(|_| DefaultClassifier::new().classify(&facts))
    }

    fn record(
        &self,
        seen: &Observed,
        tool: &str,
        outcome: Option<CallOutcome>,
        duration: Duration,
        times: Option<CallTimes>,
    ) {
        let Some(outcome) = outcome else {
            return; // no call was made
        };
        if seen.recorded_elsewhere {
            return;
        }
        let facts = seen.facts(tool);
        let key = self.key(tool);
        let tool: &str = &key;
        let mut report = CallReport::new(outcome, duration);
        report.error_type = facts.error_type;
        report.retry_after = seen.retry_hint();
        match times {
            Some(times) => {
                let _ = self.registry.record_past(tool, &report, times);
            }
            None => {
                let _ = self.registry.record_report(tool, &report);
            }
        }
    }

    /// A span ended that may be the parent of waiting calls: its events after them are the
    /// framework's verdicts (tracing events bridged as span events: the message as the name,
    /// `level` and `target` attributes, the fields).
    fn parent_ended(&self, span: &dyn SpanView) {
        let key = span.span_id();
        if !self.late.has_parent(key) {
            return;
        }
        let mut out = self.late.batch();
        span.events(&mut |event| {
            let Some(level) = str_of(event, "level").and_then(|l| l.parse::<Level>().ok()) else {
                return;
            };
            let target = str_of(event, "target").unwrap_or("");
            for c in self.compiled.iter() {
                let Some(lf) = c.late_failure.as_ref() else {
                    continue;
                };
                if !lf.may_match(target, level) || !lf.message_matches(event.name()) {
                    continue;
                }
                let mut tool: Option<u64> = None;
                event.each(&mut |k, v| {
                    if let Val::Str(t) = v {
                        if let Some(n) = lf.tool_name_of(k, t) {
                            tool = Some(name_hash(n));
                        }
                    }
                });
                self.late
                    .verdict(key, |w| tool.is_none_or(|h| w.2 == h), &mut out);
                break;
            }
        });
        self.late.moved_on(key, true, &mut out);
        self.record_resolved(out);
    }

    /// A span ended that may be the parent of waiting nested spans: a tool span of the same
    /// tool takes them in (one call: what they saw is folded into its record), any other span
    /// lets them record on their own.
    fn nested_parent_ended(&self, span: &dyn SpanView, mut own: Option<&mut ToolSpan<'_>>) {
        let key = span.span_id();
        if !self.nested.has_parent(key) {
            return;
        }
        let mut out = self.nested.batch();
        self.nested.moved_on(key, true, &mut out);
        for ((mut child, duration, _, times), _, _) in out.drain() {
            hook::deferred_add(-1);
            let same_tool = child.tool_name().map(name_hash);
            match own.as_deref_mut() {
                Some(parent) if same_tool == Some(parent.hash) => parent.seen.absorb(&mut child),
                _ => {
                    if let Some(tool) = child.tool_name() {
                        let outcome = self.classify(&child, tool);
                        self.record(&child, tool, outcome, duration, times);
                    }
                }
            }
        }
    }

    /// Records the waiting calls that are due.
    fn flush_due(&self) {
        if self.late.is_idle() && self.nested.is_idle() {
            return; // nothing waits: no clock to read
        }
        let now = self.registry.now();
        for table in [&self.late, &self.nested] {
            if table.is_idle() {
                continue;
            }
            let mut out = table.batch();
            table.flush_due(now, &mut out);
            self.record_resolved(out);
        }
    }

    /// Records what was resolved out of a table.
    fn record_resolved(&self, mut out: Resolved<Waiting>) {
        for ((mut seen, duration, _, times), how, end) in out.drain() {
            if end.is_none() {
                continue;
            }
            hook::deferred_add(-1);
            seen.late_failure |= how == Resolution::Failed;
            if let Some(tool) = seen.tool_name() {
                let outcome = self.classify(&seen, tool);
                self.record(&seen, tool, outcome, duration, times);
            }
        }
    }

    /// Records the waiting calls that are due (a feed's periodic flush).
    #[cfg_attr(not(feature = "receiver"), allow(dead_code))]
    pub(crate) fn flush_waiting(&self) {
        let _calling_out = CallingOut::enter();
        self.flush_due();
    }

    /// Records every waiting call now, whatever its due time (a receiver shutting down).
    #[cfg_attr(not(feature = "receiver"), allow(dead_code))]
    pub(crate) fn flush_all(&self) {
        for table in [&self.late, &self.nested] {
            let mut out = table.batch();
            table.flush_due(Duration::MAX, &mut out);
            self.record_resolved(out);
        }
    }

    /// How many calls wait (for a late verdict or their parent).
    #[cfg_attr(not(feature = "receiver"), allow(dead_code))]
    pub(crate) fn waiting(&self) -> usize {
        self.late.len() + self.nested.len()
    }
}

impl hook::DeferredFlush for SpanCore {
    fn flush_due(&self, registry: usize) {
        if self.registry.address() == registry {
            let _calling_out = CallingOut::enter();
            SpanCore::flush_due(self);
        }
    }
}
