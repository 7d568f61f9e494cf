//! The version-neutral part of the span processor: an OpenTelemetry span, seen through
//! [`SpanView`] (each SDK version's adapter implements it), into the inference's neutral shape;
//! conventions, classification and late verdicts exactly as the layer runs them.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::call::{CallOutcome, CallReport};
use crate::hook::{self, CallingOut};
use crate::infer::classify::{DefaultClassifier, OutcomeClassifier, SharedClassifier};
use crate::infer::conventions::{Compiled, Convention, MAX_CONVENTIONS};
use crate::infer::deferred::{self, Closed, Deferred, Resolution, Resolved};
use crate::infer::facts::{contains_formatted, EventFields, Observed, SpanFields};
use crate::registry::ToolHealthRegistry;
use crate::semconv;

use tracing_core::Level;

/// The hash a waiting call's tool name is matched by (FNV-1a).
fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

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
fn str_of<'a>(attrs: &'a dyn Attributes, key: &str) -> Option<&'a str> {
    match attrs.get(key)? {
        Val::Str(s) => Some(s),
        _ => None,
    }
}

/// A call waiting for its late verdict: what its span showed, its duration, its tool's hash.
type Waiting = (Observed, Duration, u64);

/// What every processor version shares.
pub(crate) struct ProcessorCore {
    registry: Arc<ToolHealthRegistry>,
    conventions: Box<[Convention]>,
    compiled: Box<[Compiled]>,
    classifier: SharedClassifier,
    late: Deferred<Waiting>,
}

impl fmt::Debug for ProcessorCore {
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

impl ProcessorCore {
    pub(crate) fn new(
        registry: Arc<ToolHealthRegistry>,
        conventions: Vec<Convention>,
        classifier: Option<Arc<dyn OutcomeClassifier>>,
        default_classifier: DefaultClassifier,
    ) -> Arc<Self> {
        let mut conventions = conventions;
        conventions.truncate(MAX_CONVENTIONS);
        // A convention with a `tracing` metadata filter cannot be matched here.
        conventions.retain(|c| !c.has_filter());
        let compiled = conventions
            .iter()
            .map(|c| c.compile(&std::borrow::Cow::Borrowed(semconv::RETRY_AFTER)))
            .collect();
        let core = Arc::new(Self {
            registry,
            conventions: conventions.into_boxed_slice(),
            compiled,
            classifier: SharedClassifier(
                classifier.unwrap_or_else(|| Arc::new(default_classifier)),
            ),
            late: Deferred::new(),
        });
        hook::install_processor();
        let weak: std::sync::Weak<dyn hook::DeferredFlush> = Arc::downgrade(&core) as _;
        hook::install_deferred_flush(weak);
        core
    }

    pub(crate) fn registry(&self) -> &Arc<ToolHealthRegistry> {
        &self.registry
    }

    /// The convention a finished span matches: its target is the `target` attribute
    /// (tracing-opentelemetry's), else `code.module.name` / `code.namespace`, else the
    /// instrumentation scope's name.
    fn convention_of(&self, span: &dyn SpanView) -> Option<&Compiled> {
        let target = str_of(span, "target")
            .or_else(|| str_of(span, "code.module.name"))
            .or_else(|| str_of(span, "code.namespace"))
            .unwrap_or(span.scope());
        let declares = |f: &str| {
            f == semconv::OTEL_NAME || f == semconv::OTEL_STATUS_CODE || span.get(f).is_some()
        };
        let index = self.conventions.iter().position(|c| {
            let name = (!c.names_from_otel_name()).then(|| span.name());
            c.matches_shape(target, name, declares)
        })?;
        self.compiled.get(index)
    }

    /// A span ended.
    pub(crate) fn on_end(&self, span: &dyn SpanView) {
        let _calling_out = CallingOut::enter();
        if !self.late.is_idle() {
            self.parent_ended(span);
        }
        self.flush_due();
        let Some(c) = self.convention_of(span) else {
            return;
        };
        let mut fields = SpanFields::default();
        let max = self.registry.max_name_len();
        // `otel.name` became the span's name.
        fields.read(c, semconv::OTEL_NAME, span.name(), max);
        span.each(&mut |k, v| read(&mut fields, c, k, v, max));
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
                "exception.type" if e.error_type.is_none() => {
                    with_text(v, |t| e.error_type = Some(t.to_owned()))
                }
                semconv::ERROR_TYPE => with_text(v, |t| e.read(k, t)),
                _ => {}
            });
            seen.refused |= e.refusal;
            if error && own {
                seen.error_event(e.error_type.take());
            }
            seen.completed |= marker;
        });
        let Some(tool) = seen.tool_name() else {
            return;
        };
        let registry = &self.registry;
        let marked =
            hook::take_layer_recorded(registry.address(), hook::tool_hash(tool), registry.now());
        if marked || span.get(semconv::GATE_DECISION).is_some() {
            // The layer just handled this very call (it closed the tracing span this one was
            // bridged from), or bound a gate decision to it: one call, one record — the
            // layer's, which holds the permit.
            return;
        }
        if seen.refused {
            return;
        }
        let duration = span
            .end()
            .duration_since(span.start())
            .unwrap_or(Duration::ZERO);
        let outcome = self.classify(&seen, tool);
        let parent = span.parent_id();
        if c.late_failure.is_some() && outcome == Some(CallOutcome::Success) && parent != 0 {
            let hash = name_hash(tool);
            let now = registry.now();
            let due = deferred::due(now, registry.probe_timeout_of(tool));
            let mut out = self.late.batch();
            if self
                .late
                .open(parent, (seen, duration, hash), &mut out)
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
        self.record(&seen, tool, outcome, duration);
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
    ) {
        let Some(outcome) = outcome else {
            return; // no call was made
        };
        let facts = seen.facts(tool);
        let mut report = CallReport::new(outcome, duration);
        report.error_type = facts.error_type;
        report.retry_after = seen.retry_hint();
        let _ = self.registry.record_report(tool, &report);
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

    /// Records the waiting calls that are due.
    fn flush_due(&self) {
        if self.late.is_idle() {
            return;
        }
        let now = self.registry.now();
        loop {
            let mut out = self.late.batch();
            self.late.flush_due(now, &mut out);
            let more = out.maybe_more();
            self.record_resolved(out);
            if !more {
                break;
            }
        }
    }

    fn record_resolved(&self, mut out: Resolved<Waiting>) {
        for ((mut seen, duration, _), how, end) in out.drain() {
            if end.is_none() {
                continue;
            }
            hook::deferred_add(-1);
            seen.late_failure |= how == Resolution::Failed;
            if let Some(tool) = seen.tool_name() {
                let outcome = self.classify(&seen, tool);
                self.record(&seen, tool, outcome, duration);
            }
        }
    }
}

impl hook::DeferredFlush for ProcessorCore {
    fn flush_due(&self, registry: usize) {
        if self.registry.address() == registry {
            let _calling_out = CallingOut::enter();
            ProcessorCore::flush_due(self);
        }
    }
}
