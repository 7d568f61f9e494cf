//! [`ToolHealthLayer`]: tool outcomes inferred from the tool-call spans your code (or your agent
//! framework) already emits, and a gate that knows which span it is deciding for.
//!
//! Add one layer to the subscriber you already have; no explicit record calls are needed:
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use tool_health::{ManualClock, ToolHealthLayer, ToolHealthRegistry};
//! use tracing_subscriber::layer::SubscriberExt;
//!
//! let clock = ManualClock::new();
//! let registry = Arc::new(ToolHealthRegistry::builder().clock(clock.clone()).build());
//! let subscriber = tracing_subscriber::registry()
//!     .with(ToolHealthLayer::new(registry.clone()));
//!     // .with(tracing_opentelemetry::layer().with_tracer(tracer)) — after this layer
//!
//! tracing::subscriber::with_default(subscriber, || {
//!     let span = tracing::info_span!(
//!         "execute_tool search",
//!         gen_ai.operation.name = "execute_tool",
//!         gen_ai.tool.name = "search",
//!     );
//!     let _entered = span.enter();
//!     if registry.allow_request("search") {
//!         clock.advance(Duration::from_millis(120)); // ... the tool runs ...
//!     }
//! });
//!
//! let search = registry.snapshot("search").unwrap();
//! assert_eq!(search.success_count, 1);
//! assert_eq!(search.avg_duration, Duration::from_millis(120));
//! ```
//!
//! # Recognising tool spans
//!
//! By default a span is a tool span when it follows the OpenTelemetry GenAI convention for tool
//! execution: `gen_ai.operation.name = "execute_tool"` and `gen_ai.tool.name = <tool>`. A span
//! that declares `gen_ai.tool.name` and no operation field counts too; one whose operation is
//! anything else (`chat`, `invoke_agent`) does not. The name may be given at creation or
//! recorded later with [`Span::record`](tracing::Span::record) before the span closes; a span
//! that closes with no name (or an empty one) is ignored. Record the name as a string (`name`
//! or `%name`): `?name` records it with its `Debug` quotes.
//!
//! Other conventions plug in through [`ToolHealthLayer::builder`]: the field that carries the
//! name ([`tool_name_field`](ToolHealthLayerBuilder::tool_name_field), e.g. `tool.name`) and a
//! predicate over the span's metadata ([`span_filter`](ToolHealthLayerBuilder::span_filter)).
//!
//! Whether a callsite can be a tool span is decided once per callsite and cached (a
//! direct-mapped cache of atomic words: no lock, no guard), so other spans cost a cache probe
//! when they open and, at close, one load while none of the layer's tool spans is open (one
//! lookup in the subscriber's span store while some is). The layer never disables a callsite:
//! other layers see every span and event exactly as without it.
//!
//! # Inferring the outcome
//!
//! While a tool span is open the layer gathers [`SpanFacts`]; at close an
//! [`OutcomeClassifier`] turns them into an outcome. The [`DefaultClassifier`]:
//!
//! * **failure** when `error.type` is recorded non-empty; when `otel.status_code` is recorded as
//!   `error` (any case); when an ERROR-level event's nearest tool span is this span — which
//!   covers `#[instrument(err)]` and errors logged in child spans such as an HTTP client span
//!   inside the tool — except events whose target starts with `opentelemetry` (the SDK's and
//!   exporters' own diagnostics) or is this crate's; when the span is exited or closes while
//!   its thread is panicking (a panicking async task included);
//! * **ignored** (counted apart, never trips a breaker) when the failure's `error.type` is a
//!   caller error ([`caller_errors`](ToolHealthLayerBuilder::caller_errors), default
//!   [`DEFAULT_CALLER_ERRORS`]): bad arguments from the model must not trip a healthy tool's
//!   breaker. An ERROR event may carry the `error.type` too;
//! * **success** otherwise.
//!
//! The duration is the registry clock at close minus at creation, so tests on a
//! [`ManualClock`](crate::ManualClock) are exact.
//!
//! **Strict mode** ([`strict`](ToolHealthLayerBuilder::strict)): a span that closes without a
//! completion marker — an event with a `return` or `error` field directly in the span (what
//! `#[instrument(ret, err)]` emits), or a recorded `otel.status_code` or `error.type` — was
//! cancelled (a dropped future, a timeout around the call): nothing is recorded for it.
//!
//! # The span-aware gate
//!
//! [`ToolHealthRegistry::allow_request`] and [`ToolHealthRegistry::check`] called while the
//! current span, or its nearest tool-span ancestor, is a tool span bind the decision to that
//! span:
//!
//! * **refused**: the span's outcome is not recorded as a success or failure: the gate already
//!   counted a refusal with zero duration, and nothing more is recorded at close;
//! * **probe**: the span's outcome resolves exactly that probe, with its generation, so a stale
//!   result from another span can no longer close or re-open the breaker meanwhile; a probe span
//!   that closes as cancelled (strict mode) releases the probe at once instead of leaving the
//!   breaker waiting for the lease;
//! * **allowed**: the outcome is recorded with the permit's generation, so a success admitted
//!   before a trip cannot touch the newer episode.
//!
//! A later decision in the same span replaces an earlier one, except that a refusal never
//! replaces the span's own probe (the probe holder asking again is refused by its own probe).
//! A refusal's Error status stays on the OpenTelemetry span even if a later decision in the
//! same span admits the call: OpenTelemetry statuses only move up.
//! Outside any tool span the gate is the plain gate. Gate calls bind only to the spans of the
//! subscriber that is the current default, and only when that subscriber's `ToolHealthLayer`
//! feeds the same registry (the same `Arc`).
//!
//! # On the OpenTelemetry span
//!
//! With tracing-opentelemetry in the subscriber, the tool span shows (see the constants):
//!
//! | what | when |
//! |---|---|
//! | attribute `tool_health.gate.decision` = `allowed` / `probe` / `refused` | a decision is bound |
//! | attribute `tool_health.breaker.state` = `closed` / `open` / `half_open` | the state at admission: `closed` when allowed, `half_open` for the probe (whose grant made it half-open), `open` or `half_open` (another caller's probe in flight) when refused |
//! | status Error, description [`REFUSAL_MESSAGE`](crate::REFUSAL_MESSAGE), attribute `error.type` = [`REFUSAL_ERROR_TYPE`](crate::REFUSAL_ERROR_TYPE) | refused |
//! | event `tool_health.breaker.transition` with `tool_health.breaker.from` and `tool_health.breaker.to` | the span's outcome changed the breaker |
//!
//! This works from a child span of the tool span too. Without tracing-opentelemetry (or when
//! it filters the span out) none of it happens, with no error. Writing a decision starts the
//! OpenTelemetry span early (its start time stays the tracing span's creation time): a sampler
//! then sees only the attributes known by that point.
//!
//! # Pitfalls
//!
//! * **Layer order.** Put this layer *before* (closer to the registry than) the OpenTelemetry
//!   layer: `registry().with(ToolHealthLayer::new(..)).with(otel_layer)`. Layers see a span
//!   close in that order, and the transition event must be written before tracing-opentelemetry
//!   ends and exports the span. In the other order everything is recorded and the decision
//!   attributes are written, but the transition event is silently lost.
//! * **A global filter that drops INFO tool spans.** `#[instrument]` spans are INFO by default;
//!   a global `EnvFilter` / `LevelFilter` at `warn` disables them for every layer, this one
//!   included, and nothing is recorded. In strict mode the INFO `return` events of
//!   `#[instrument(ret)]` are completion markers: filtering them out makes every call look
//!   cancelled. Filter your log output per layer (`fmt::layer().with_filter(..)`) instead, or
//!   let tool spans and their events through.
//! * **Versions.** This crate uses tracing-opentelemetry 0.34, which pairs with opentelemetry
//!   0.33 (and opentelemetry_sdk 0.33): use exactly these. A tracer of another opentelemetry
//!   version is rejected by `with_tracer`; an OpenTelemetry layer of another
//!   tracing-opentelemetry version records spans but is invisible to this crate, and the
//!   annotations silently disappear (`cargo tree -d -i tracing-opentelemetry` shows it).
//! * **Requested name vs. resolved name.** The gate keys on the name it is asked about; the
//!   span's outcome is recorded under the name on the span. When a renaming middleware (or a
//!   [`HealthRouter`](crate::HealthRouter) fallback) makes them differ, the outcome is recorded
//!   under the span's name without the permit's generation, a probe of the requested name is
//!   released, and a refusal records nothing. Gate and name the span with the tool actually
//!   called.
//! * **One layer per subscriber.** A second `ToolHealthLayer` in the same subscriber stays out
//!   of spans the first one claimed, and the gate only binds through the outermost one.
//! * **The gate must be reachable.** Binding works through the layer's hooks into its
//!   subscriber: a layer hidden behind `reload::Layer` or an opaque wrapper that does not
//!   forward `on_layer` and downcasting still records outcomes, but the gate stays plain.

mod bind;
mod classify;
mod otel;
mod span_state;

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use tracing::span::{Attributes, Id, Record};
use tracing::{Dispatch, Event, Metadata, Subscriber};
use tracing_core::callsite::Identifier;
use tracing_core::dispatcher::WeakDispatch;
use tracing_core::Interest;
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

use crate::breaker::Transition;
use crate::registry::{CallReport, ToolHealthRegistry};

pub(crate) use bind::bind_decision;
pub use classify::{DefaultClassifier, OutcomeClassifier, SpanFacts, DEFAULT_CALLER_ERRORS};

use classify::SharedClassifier;
use span_state::{EventFields, Kind, SpanFields, SpanVisitor, ToolSpan};

/// The field carrying the tool name by default (OpenTelemetry GenAI).
pub const DEFAULT_TOOL_NAME_FIELD: &str = "gen_ai.tool.name";

/// The span field read as a tool's retry hint, in seconds (see
/// [`ToolHealthLayerBuilder::retry_after_field`]).
pub const DEFAULT_RETRY_AFTER_FIELD: &str = "http.response.header.retry-after";

/// Span attribute written on a call shadow mode let through: `false`.
pub const GATE_ENFORCED_ATTRIBUTE: &str = "tool_health.gate.enforced";
/// Span attribute: the gate decision bound to the span (`allowed`, `probe`, `refused`).
pub const GATE_DECISION_ATTRIBUTE: &str = "tool_health.gate.decision";
/// Span attribute: the breaker state at admission (`closed`, `open`, `half_open`).
pub const BREAKER_STATE_ATTRIBUTE: &str = "tool_health.breaker.state";
/// Span event: the span's outcome changed the breaker.
pub const TRANSITION_EVENT: &str = "tool_health.breaker.transition";
/// Attribute of [`TRANSITION_EVENT`]: the state before.
pub const TRANSITION_FROM_ATTRIBUTE: &str = "tool_health.breaker.from";
/// Attribute of [`TRANSITION_EVENT`]: the state after.
pub const TRANSITION_TO_ATTRIBUTE: &str = "tool_health.breaker.to";

thread_local! {
    /// Set while the layer calls out (registry, observers, classifier, OpenTelemetry) and while
    /// the registry runs its observers, on this thread: spans created and events logged from
    /// there are not the tool's doing, and attributing them would let an observer that logs
    /// fail a healthy tool's span, or recurse into the layer.
    static CALLING_OUT: Cell<bool> = const { Cell::new(false) };
}

/// Marks this thread as calling out until dropped.
pub(crate) struct CallingOut(bool);

impl CallingOut {
    pub(crate) fn enter() -> Self {
        Self(CALLING_OUT.try_with(|c| c.replace(true)).unwrap_or(false))
    }

    fn active() -> bool {
        CALLING_OUT.try_with(Cell::get).unwrap_or(false)
    }
}

impl Drop for CallingOut {
    fn drop(&mut self) {
        let _ = CALLING_OUT.try_with(|c| c.set(self.0));
    }
}

/// Slots of the direct-mapped callsite cache in front of the callsite map.
const FAST_SLOTS: usize = 1024;
/// The address bits a fast slot keeps (56: every user-space address of a 64-bit process; a
/// static's address never differs from another's only above them).
const FAST_ADDR_MASK: u64 = (1 << 56) - 1;

fn fast_slot(addr: u64) -> usize {
    // Metadata statics are at least 8-byte aligned and often close together: mix the bits.
    (addr.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 54) as usize % FAST_SLOTS
}

/// How many callsites a layer remembers; past it, new callsites are classified on every use.
const MAX_CACHED_CALLSITES: usize = 65_536;

/// Everything a layer and its clones share.
pub(crate) struct Shared {
    pub(crate) registry: Arc<ToolHealthRegistry>,
    tool_name_field: Cow<'static, str>,
    retry_after_field: Cow<'static, str>,
    span_filter: Option<fn(&Metadata<'_>) -> bool>,
    classifier: SharedClassifier,
    callsites: papaya::HashMap<Identifier, Kind, foldhash::fast::RandomState>,
    /// `(metadata address << 8) | kind`, 0 when empty: see [`Shared::kind`].
    fast_kinds: Box<[AtomicU64; FAST_SLOTS]>,
    /// Tool spans this layer family holds state for and that have not closed yet. While it is
    /// zero, a closing span cannot be one of ours, and `on_close` returns without looking the
    /// span up. Relaxed is enough: a span's increment happens before its own close (the
    /// subscriber's span store orders them), so that close reads at least one.
    live_tool_spans: AtomicUsize,
}

impl Shared {
    /// This layer family's identity, stored in the span states it owns.
    pub(crate) fn id(&self) -> usize {
        self as *const Self as usize
    }

    /// What the callsite can be, decided once per callsite.
    #[inline]
    pub(crate) fn kind(&self, meta: &'static Metadata<'static>) -> Kind {
        // The fast path: a direct-mapped cache of plain atomic words, keyed by the metadata's
        // address (one per callsite, static). No guard, no read-modify-write.
        let addr = meta as *const Metadata<'static> as usize as u64;
        let slot = &self.fast_kinds[fast_slot(addr)];
        let cached = slot.load(Ordering::Relaxed);
        if cached != 0 && cached >> 8 == addr & FAST_ADDR_MASK {
            return Kind((cached & 0xFF) as u8);
        }
        let kind = self.kind_slow(meta);
        slot.store(
            ((addr & FAST_ADDR_MASK) << 8) | u64::from(kind.0),
            Ordering::Relaxed,
        );
        kind
    }

    #[inline(never)]
    fn kind_slow(&self, meta: &'static Metadata<'static>) -> Kind {
        let callsite = meta.callsite();
        let map = self.callsites.pin();
        if let Some(kind) = map.get(&callsite) {
            return *kind;
        }
        let kind = Kind::of(meta, &self.tool_name_field, self.span_filter);
        if map.len() < MAX_CACHED_CALLSITES {
            map.insert(callsite, kind);
        }
        kind
    }

    fn owns(&self, state: &ToolSpan) -> bool {
        state.owner == self.id()
    }

    fn classify(&self, facts: &SpanFacts<'_>) -> Option<crate::gate::CallOutcome> {
        // A classifier is user code running in a subscriber callback, maybe during unwinding:
        // its panic must not escape. Fall back on the default rules.
        catch_unwind(AssertUnwindSafe(|| self.classifier.0.classify(facts)))
            .unwrap_or_else(|_| DefaultClassifier::new().classify(facts))
    }
}

/// Feeds a [`ToolHealthRegistry`] from tool-call spans, and makes its gate span-aware.
///
/// See the [module docs](self) for what is recognised, how outcomes are inferred, what is
/// written on the OpenTelemetry span, and the pitfalls.
///
/// ```
/// use std::sync::Arc;
/// use tool_health::{ToolHealthLayer, ToolHealthRegistry};
/// use tracing_subscriber::layer::SubscriberExt;
///
/// let registry = Arc::new(ToolHealthRegistry::new());
/// let layer = ToolHealthLayer::builder(registry.clone())
///     .tool_name_field("tool.name")
///     .strict(true)
///     .caller_errors(["invalid_arguments", "unknown_tool"])
///     .build();
/// let subscriber = tracing_subscriber::registry().with(layer);
/// # drop(subscriber);
/// ```
pub struct ToolHealthLayer {
    pub(crate) shared: Arc<Shared>,
    /// Set in `on_layer`: the span walker monomorphised for the subscriber below this layer.
    pub(crate) bind_fn: Option<bind::BindFn>,
    /// Set in `on_register_dispatch`: where the OpenTelemetry span is reached at close.
    dispatch: OnceLock<WeakDispatch>,
}

impl fmt::Debug for ToolHealthLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolHealthLayer")
            .field("registry", &self.shared.registry)
            .field("tool_name_field", &self.shared.tool_name_field)
            .field("span_filter", &self.shared.span_filter.is_some())
            .field("attached", &self.bind_fn.is_some())
            .finish_non_exhaustive()
    }
}

impl Clone for ToolHealthLayer {
    /// A layer with the same registry and configuration, not yet attached to any subscriber.
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
            bind_fn: None,
            dispatch: OnceLock::new(),
        }
    }
}

impl ToolHealthLayer {
    /// A layer feeding `registry`, with the defaults: GenAI tool spans, not strict, caller errors
    /// [`DEFAULT_CALLER_ERRORS`].
    pub fn new(registry: Arc<ToolHealthRegistry>) -> Self {
        Self::builder(registry).build()
    }

    /// A builder for other span conventions and outcome rules.
    pub fn builder(registry: Arc<ToolHealthRegistry>) -> ToolHealthLayerBuilder {
        ToolHealthLayerBuilder {
            registry,
            tool_name_field: Cow::Borrowed(DEFAULT_TOOL_NAME_FIELD),
            retry_after_field: Cow::Borrowed(DEFAULT_RETRY_AFTER_FIELD),
            span_filter: None,
            default_classifier: DefaultClassifier::new(),
            classifier: None,
        }
    }

    /// The registry this layer feeds.
    pub fn registry(&self) -> &Arc<ToolHealthRegistry> {
        &self.shared.registry
    }

    fn dispatch(&self) -> Option<Dispatch> {
        self.dispatch.get().and_then(WeakDispatch::upgrade)
    }

    /// Records a closed tool span's outcome; no extensions lock is held.
    fn finish(&self, id: &Id, mut state: ToolSpan) {
        let _calling_out = CallingOut::enter();
        let registry = &self.shared.registry;
        let binding = state.binding.take();
        let Some(name) = state.tool_name() else {
            // Not a tool span after all (no name, or another operation): nothing to record,
            // and a probe bound to it goes back at once.
            if let Some((b, permit)) = binding.as_ref().and_then(|b| Some((b, b.probe()?))) {
                let _ = registry.release(&b.tool, permit);
            }
            return;
        };
        if binding.as_ref().is_some_and(|b| !b.decision.is_allowed()) {
            // Refused: the gate counted the refusal; the call was not made.
            return;
        }
        let facts = SpanFacts {
            tool: name,
            error_type: state
                .error_type
                .as_deref()
                .or(state.event_error_type.as_deref()),
            status_error: state.status_error,
            error_event: state.error_event,
            panicked: state.panicked,
            completed: state.completed,
        };
        let outcome = self.shared.classify(&facts);

        // The permit's generation applies only to the breaker it came from.
        let (permit, other_probe) = match &binding {
            Some(b) if &*b.tool == name => (b.decision.permit(), None),
            Some(b) => (None, b.probe().map(|p| (&*b.tool, p))),
            None => (None, None),
        };
        let mut transitions: Vec<Transition> = Vec::new();
        match outcome {
            Some(outcome) => {
                let duration = registry.now().saturating_sub(state.start);
                let recorded = registry.record_report(
                    name,
                    &CallReport {
                        outcome,
                        duration,
                        generation: permit.map(|p| p.generation()),
                        error_type: facts.error_type,
                        retry_after: state.retry_hint(),
                    },
                );
                transitions.extend(recorded.transitions());
            }
            None => {
                if let Some(p) = permit.filter(|p| p.is_probe()) {
                    transitions.extend(registry.release(name, p).transitions());
                }
            }
        }
        if let Some((tool, p)) = other_probe {
            let _ = registry.release(tool, p);
        }
        if !transitions.is_empty() {
            if let Some(dispatch) = self.dispatch() {
                otel::annotate_transitions(&dispatch, id, &transitions);
            }
        }
    }
}

/// Builds a [`ToolHealthLayer`].
#[must_use]
pub struct ToolHealthLayerBuilder {
    registry: Arc<ToolHealthRegistry>,
    tool_name_field: Cow<'static, str>,
    retry_after_field: Cow<'static, str>,
    span_filter: Option<fn(&Metadata<'_>) -> bool>,
    default_classifier: DefaultClassifier,
    classifier: Option<Arc<dyn OutcomeClassifier>>,
}

impl fmt::Debug for ToolHealthLayerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolHealthLayerBuilder")
            .field("registry", &self.registry)
            .field("tool_name_field", &self.tool_name_field)
            .field("span_filter", &self.span_filter.is_some())
            .field("default_classifier", &self.default_classifier)
            .field("custom_classifier", &self.classifier.is_some())
            .finish()
    }
}

impl ToolHealthLayerBuilder {
    /// The span field that carries the tool name (default [`DEFAULT_TOOL_NAME_FIELD`]).
    ///
    /// Without a [`span_filter`](Self::span_filter), a span is a tool-span candidate when it
    /// declares this field. A `gen_ai.operation.name` field, when declared, must still be
    /// `execute_tool`.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use tool_health::{ToolHealthLayer, ToolHealthRegistry};
    /// // For spans like `info_span!("tool", tool.name = "calculator")`:
    /// let layer = ToolHealthLayer::builder(Arc::new(ToolHealthRegistry::new()))
    ///     .tool_name_field("tool.name")
    ///     .build();
    /// # drop(layer);
    /// ```
    pub fn tool_name_field(mut self, field: impl Into<Cow<'static, str>>) -> Self {
        self.tool_name_field = field.into();
        self
    }

    /// The span field carrying a tool's retry hint in seconds (a number or a numeric string;
    /// default [`DEFAULT_RETRY_AFTER_FIELD`]). A failed tool span with this field — and an
    /// `http.response.status_code` of 429 or 503, or none — keeps the tool's breaker open at
    /// least that long if the failure leaves it open, and the gate's `retry_after` says so.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use tool_health::{layer::ToolHealthLayer, ToolHealthRegistry};
    /// let layer = ToolHealthLayer::builder(Arc::new(ToolHealthRegistry::new()))
    ///     .retry_after_field("tool.retry_after_s")
    ///     .build();
    /// # let _ = layer;
    /// ```
    pub fn retry_after_field(mut self, field: impl Into<Cow<'static, str>>) -> Self {
        self.retry_after_field = field.into();
        self
    }

    /// Decides from a span's metadata whether it can be a tool span, instead of "declares the
    /// tool-name field". Called once per callsite, possibly while tracing registers the
    /// callsite: it must be pure — no panics, no tracing events.
    ///
    /// The tool name still comes from the [tool-name field](Self::tool_name_field).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use tool_health::{ToolHealthLayer, ToolHealthRegistry};
    /// let layer = ToolHealthLayer::builder(Arc::new(ToolHealthRegistry::new()))
    ///     .tool_name_field("tool")
    ///     .span_filter(|meta| meta.target().starts_with("my_agent::tools") && meta.name() == "call")
    ///     .build();
    /// # drop(layer);
    /// ```
    pub fn span_filter(mut self, filter: fn(&Metadata<'_>) -> bool) -> Self {
        self.span_filter = Some(filter);
        self
    }

    /// Strict mode (default off): a span that closes without a completion marker was cancelled
    /// and records nothing; a probe bound to it is released at once. Configures the
    /// [`DefaultClassifier`]; ignored with a custom [`classifier`](Self::classifier).
    pub fn strict(mut self, strict: bool) -> Self {
        self.default_classifier = self.default_classifier.strict(strict);
        self
    }

    /// The `error.type` values that are the caller's fault (replacing
    /// [`DEFAULT_CALLER_ERRORS`]): such calls are counted as ignored, never as failures.
    /// Configures the [`DefaultClassifier`]; ignored with a custom
    /// [`classifier`](Self::classifier).
    pub fn caller_errors<I>(mut self, errors: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        self.default_classifier = self.default_classifier.caller_errors(errors);
        self
    }

    /// Replaces the outcome rules entirely (see [`OutcomeClassifier`]; a custom classifier may
    /// delegate to a [`DefaultClassifier`]).
    pub fn classifier(mut self, classifier: impl OutcomeClassifier) -> Self {
        self.classifier = Some(Arc::new(classifier));
        self
    }

    /// The layer.
    pub fn build(self) -> ToolHealthLayer {
        let classifier = self
            .classifier
            .unwrap_or_else(|| Arc::new(self.default_classifier));
        ToolHealthLayer {
            shared: Arc::new(Shared {
                registry: self.registry,
                tool_name_field: self.tool_name_field,
                retry_after_field: self.retry_after_field,
                span_filter: self.span_filter,
                classifier: SharedClassifier(classifier),
                fast_kinds: Box::new(std::array::from_fn(|_| AtomicU64::new(0))),
                live_tool_spans: AtomicUsize::new(0),
                callsites: papaya::HashMap::builder()
                    .hasher(foldhash::fast::RandomState::default())
                    .build(),
            }),
            bind_fn: None,
            dispatch: OnceLock::new(),
        }
    }
}

impl<S> Layer<S> for ToolHealthLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_register_dispatch(&self, dispatch: &Dispatch) {
        let _ = self.dispatch.set(dispatch.downgrade());
    }

    fn on_layer(&mut self, _subscriber: &mut S) {
        self.bind_fn = Some(bind::bind_with::<S>);
        bind::mark_attached();
    }

    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        // Classify now so the first span pays nothing; never disable anything for other layers.
        let _ = self.shared.kind(metadata);
        Interest::always()
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let kind = self.shared.kind(attrs.metadata());
        if !kind.has(Kind::TOOL_SPAN) || CallingOut::active() {
            return;
        }
        let mut fields = SpanFields::default();
        attrs.record(&mut SpanVisitor {
            tool_name_field: &self.shared.tool_name_field,
            retry_after_field: &self.shared.retry_after_field,
            out: &mut fields,
        });
        let start = self.shared.registry.now();
        let Some(span) = ctx.span(id) else {
            return;
        };
        let mut extensions = span.extensions_mut();
        if extensions.get_mut::<ToolSpan>().is_some() {
            return; // another ToolHealthLayer in this subscriber owns the span
        }
        let mut state = ToolSpan::new(self.shared.id(), start, kind.has(Kind::HAS_OPERATION));
        state.apply(fields);
        extensions.insert(state);
        self.shared.live_tool_spans.fetch_add(1, Ordering::Relaxed);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else {
            return;
        };
        if !self.shared.kind(span.metadata()).has(Kind::TOOL_SPAN) {
            return;
        }
        let mut fields = SpanFields::default();
        values.record(&mut SpanVisitor {
            tool_name_field: &self.shared.tool_name_field,
            retry_after_field: &self.shared.retry_after_field,
            out: &mut fields,
        });
        if fields.is_empty() {
            return;
        }
        let mut extensions = span.extensions_mut();
        if let Some(state) = extensions.get_mut::<ToolSpan>() {
            if self.shared.owns(state) {
                state.apply(fields);
            }
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let kind = self.shared.kind(event.metadata());
        let error = kind.has(Kind::ERROR_EVENT);
        let marker = kind.has(Kind::MARKER_EVENT);
        if (!error && !marker) || CallingOut::active() {
            return;
        }
        let mut fields = EventFields::default();
        if error && kind.has(Kind::EVENT_ERROR_TYPE) {
            event.record(&mut fields);
        }
        let Some(leaf) = ctx.event_span(event) else {
            return;
        };
        for (depth, span) in leaf.scope().enumerate() {
            let direct = depth == 0;
            if !error && !direct {
                break; // a completion marker only counts directly in the tool span
            }
            if !self.shared.kind(span.metadata()).has(Kind::TOOL_SPAN) {
                continue;
            }
            let mut extensions = span.extensions_mut();
            let Some(state) = extensions.get_mut::<ToolSpan>() else {
                continue;
            };
            if !self.shared.owns(state) || !state.may_be_tool() {
                continue;
            }
            if error {
                state.error_event = true;
                if state.event_error_type.is_none() {
                    state.event_error_type = fields.error_type.take();
                }
            }
            if marker && direct {
                state.completed = true;
            }
            break;
        }
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        // A panic unwinding out of an entered tool span. This also catches a panicking async
        // task, whose span may only close after the runtime caught the panic.
        if !std::thread::panicking() {
            return;
        }
        let Some(span) = ctx.span(id) else {
            return;
        };
        if !self.shared.kind(span.metadata()).has(Kind::TOOL_SPAN) {
            return;
        }
        let mut extensions = span.extensions_mut();
        if let Some(state) = extensions.get_mut::<ToolSpan>() {
            if self.shared.owns(state) {
                state.panicked = true;
            }
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        // No tool span of ours is open: this one is not ours, and costs one load.
        if self.shared.live_tool_spans.load(Ordering::Relaxed) == 0 {
            return;
        }
        let Some(span) = ctx.span(&id) else {
            return;
        };
        if !self.shared.kind(span.metadata()).has(Kind::TOOL_SPAN) {
            return;
        }
        let state = {
            let mut extensions = span.extensions_mut();
            match extensions.get_mut::<ToolSpan>() {
                Some(state) if self.shared.owns(state) => extensions.remove::<ToolSpan>(),
                _ => None,
            }
        };
        drop(span);
        if let Some(mut state) = state {
            self.shared.live_tool_spans.fetch_sub(1, Ordering::Relaxed);
            state.panicked |= std::thread::panicking();
            self.finish(&id, state);
        }
    }
}
