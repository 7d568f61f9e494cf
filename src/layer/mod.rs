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
//! Each span shape the layer knows is a [`Convention`]: a small declarative description of how
//! a framework's tool spans are matched (target crate, span name, declared fields), where the
//! tool name comes from (a field, or a field such as `otel.name` minus a prefix), which field
//! values rule a span out (`gen_ai.operation.name` other than `execute_tool`), which fields
//! carry an error type or mean failure, and which field is the framework's own outcome. The
//! first convention that matches a callsite decides how its spans are read.
//!
//! With no configuration ([`Convention::builtin`]): rig, langchain-rust, adk, swiftide and genai,
//! each matched on its crate's target (so they can claim nothing else), autoagents' spans (left
//! to the span processor: [`Convention::sdk_only`]), then the OpenTelemetry MCP
//! client span (`mcp.method.name = "tools/call"`) and the OpenTelemetry GenAI convention
//! (`gen_ai.operation.name = "execute_tool"` and `gen_ai.tool.name`; a span that declares
//! `gen_ai.tool.name` and no operation field counts too; one whose operation is anything else,
//! `chat` or `invoke_agent`, does not), from any source. The name may be given at creation or
//! recorded later with [`Span::record`](tracing::Span::record) before the span closes; a span
//! that closes with no name (or an empty one) is ignored. Record the name as a string (`name`
//! or `%name`): `?name` records it with its `Debug` quotes.
//!
//! Other conventions plug in through [`ToolHealthLayer::builder`]:
//! [`convention`](ToolHealthLayerBuilder::convention) adds one (or replaces the one of its
//! name), [`conventions`](ToolHealthLayerBuilder::conventions) replaces them all, and
//! [`tool_name_field`](ToolHealthLayerBuilder::tool_name_field) (e.g. `tool.name`) and
//! [`span_filter`](ToolHealthLayerBuilder::span_filter) customise the generic GenAI one.
//!
//! Whether a callsite can be a tool span, and by which convention, is decided once per callsite
//! and cached (`callsites.rs`: no lock, no guard), so other spans cost a cache probe when they
//! open and, at close, one load while none of the layer's tool spans is open (one lookup in the
//! subscriber's span store while some is); entering a span costs one load while every tool span
//! of the layer has been entered already. The layer never disables a callsite: other layers see
//! every span and event exactly as without it.
//!
//! # Inferring the outcome
//!
//! While a tool span is open the layer gathers [`SpanFacts`]; at close an
//! [`OutcomeClassifier`] turns them into an outcome. The [`DefaultClassifier`]:
//!
//! * **failure** when an error type is recorded non-empty (`error.type`, or the convention's
//!   own, such as rig's `gen_ai.tool.error.type`); when the framework's outcome field
//!   (`gen_ai.tool.call.outcome`) says `error`; when a failure field of the convention is
//!   recorded (langchain-rust's `error`); when `otel.status_code` is recorded as `error` (any
//!   case); when an ERROR-level event's nearest tool span is this span — which covers
//!   `#[instrument(err)]` and errors logged in child spans such as an HTTP client span inside
//!   the tool — except events whose target starts with `opentelemetry` (the SDK's and
//!   exporters' own diagnostics) or is this crate's; when an event with an `error` field is
//!   emitted directly in the span, whatever its level (`#[instrument(err(level = "warn"))]`);
//!   when the span is exited or closes while its thread is panicking (a panicking async task
//!   included);
//! * **ignored** (counted apart, never trips a breaker) when the failure's error type is a
//!   caller error ([`caller_errors`](ToolHealthLayerBuilder::caller_errors), default
//!   [`DEFAULT_CALLER_ERRORS`]): the model's bad arguments or a tool that does not exist must
//!   not trip a healthy tool's breaker. An ERROR event may carry the `error.type` too;
//! * **nothing** when the framework's outcome is `denied` or `skipped` (no call was made): no
//!   record, and a probe bound to the span is released at once;
//! * **cancelled** ([`CallOutcome::Cancelled`], never fed to the breaker, a probe given back)
//!   when the error type is `cancelled`, or in strict mode without a completion marker (below);
//! * **success** otherwise, or when the framework's outcome says `success`.
//!
//! Before any of that, a **refused** call records nothing (a refused call is never a
//! failure, whether or not the gate could bind to its span): a span whose decision bound is a
//! refusal, or whose tool returned the gate's refusal as its error — an event whose `error`
//! field's text contains [`REFUSAL_MESSAGE`](crate::REFUSAL_MESSAGE) (what `#[instrument(err)]`
//! logs when the tool returns it), or `error.type` =
//! [`REFUSAL_ERROR_TYPE`] on the span or an event. The gate that
//! refused counted the refusal; a probe the span holds is given back.
//!
//! The duration runs from the span's first enter to its close on the registry clock (a span
//! never entered: from its creation), so a framework that creates the spans of a batch up front
//! and runs the calls one after another still gets each call's own latency, and tests on a
//! [`ManualClock`](crate::ManualClock) are exact.
//!
//! **Verdicts after the span.** adk and swiftide report a failed call by an event in the
//! *parent* span after the tool span ([`Convention::late_failure`]). Their calls that end
//! without a failure of their own wait — bounded, no allocation per call — for the framework's
//! next move in the parent: the matching event (by tool name, oldest call first) fails the
//! call; another event there, a new tool span there or the parent's end makes it a success; at
//! the latest [`DEFERRED_VERDICT_BOUND`] after its end, or half its tool's probe lease if
//! sooner, it is recorded as a success (every layer callback and every gate call flush what is
//! due). A call with no parent span is recorded at its close.
//!
//! **Strict mode** ([`strict`](ToolHealthLayerBuilder::strict)): a span that closes without a
//! completion marker was cancelled (a dropped future, a timeout around the call): it is
//! counted as [`CallOutcome::Cancelled`] — `cancelled_count` in the snapshot,
//! `tool_health.calls{tool_health.outcome=cancelled}` in metrics — and never fed to the
//! breaker; a probe bound to it is given back at once. What marks completion:
//!
//! | form | marks completion |
//! |---|---|
//! | `#[instrument(ret, err)]` | yes, both ways: the `return` event on `Ok`, the `error` event on `Err` |
//! | `#[instrument(err)]` alone | **only failures**: every success reads as cancelled — add `ret` |
//! | `#[instrument(ret)]` alone | yes for `Ok` (and the plain return value of a non-`Result` fn) |
//! | `span.record("error.type", "")` / `span.record("otel.status_code", "ok")` | yes (an empty `error.type` is no failure) |
//! | `span.record("error.type", "timeout")` / `otel.status_code = "error"` | yes, a failure |
//! | an event with a `return` or `error` field directly in the span | yes |
//! | a plain `info!` / ERROR event without those fields | no |
//!
//! The `return` events of `#[instrument(ret)]` are INFO: a filter that drops INFO events
//! makes every success read as cancelled (see "Pitfalls"). The call helper
//! ([`ToolHealthRegistry::call`](crate::ToolHealthRegistry::call)) settles its span's outcome
//! itself and needs no marker.
//!
//! A convention whose spans mark nothing on success (langchain-rust, adk, swiftide, genai:
//! [`Convention::no_completion_marker`]) is always taken as completed — a close without a
//! failure is a success even in strict mode; a recorded outcome
//! field (rig's `gen_ai.tool.call.outcome`), error type or failure field marks completion too.
//!
//! # The span-aware gate
//!
//! [`ToolHealthRegistry::allow_request`] and [`ToolHealthRegistry::check`] called on a thread
//! where one of the layer's tool spans is entered — the current span is a tool span, or a span
//! inside one — bind the decision to the innermost such span:
//!
//! * **refused**: the span's outcome is not recorded as a success or failure: the gate already
//!   counted a refusal with zero duration, and nothing more is recorded at close;
//! * **probe**: the span's outcome resolves exactly that probe, with its generation, so a stale
//!   result from another span can no longer close or re-open the breaker meanwhile; a probe span
//!   that ends with no verdict on the tool — a caller error, or cancelled (strict mode, or a
//!   dropped call-helper future) — releases the probe at once instead of leaving the breaker
//!   waiting for the lease;
//! * **allowed**: the outcome is recorded with the permit's generation, so a success admitted
//!   before a trip cannot touch the newer episode.
//!
//! **One call, one record.** Tool spans of the same tool nested in each other (a framework's
//! span around an `#[instrument]` tool function) are one call: the inner span records nothing
//! of its own; what was seen on it, and a decision bound to it, count for the outer span, which
//! records once. A call that already holds its tool's probe (an outer gate, say a middleware's,
//! was granted it) asking the gate again is answered that probe — not refused by it.
//!
//! A later decision in the same span replaces an earlier one, except that a refusal never
//! replaces the span's own probe, and a decision about another tool (a tool gating a sub-call
//! to another one inside its span) never replaces the span's decision about its own tool: a
//! span's probe is resolved by that span's own outcome only. A refusal's Error status stays on
//! the OpenTelemetry span even if a later decision in the same span admits the call:
//! OpenTelemetry statuses only move up.
//!
//! Outside any tool span the gate is the plain gate. The layer finds the span through its own
//! `on_enter` / `on_exit` (a stack per thread of its entered tool spans), never through the
//! dispatcher: binding works whatever wraps the layer — `reload::Layer`, a per-layer filter, a
//! subscriber wrapper. Only a layer feeding the very registry that decides (the same `Arc`)
//! binds. A tool span created on one thread and never entered on the thread that calls the
//! gate is not current there: enter it (`Instrument::instrument` does, for async code).
//!
//! # On the OpenTelemetry span
//!
//! With tracing-opentelemetry in the subscriber, the tool span shows (see the constants):
//!
//! | what | when |
//! |---|---|
//! | attribute `tool_health.gate.decision` = `allowed` / `probe` / `refused` | a decision is bound |
//! | attribute `tool_health.breaker.state` = `closed` / `open` / `half_open` | the state at admission: `closed` when allowed, `half_open` for the probe (whose grant made it half-open), `open` or `half_open` (another caller's probe in flight) when refused |
//! | status Error, description [`REFUSAL_MESSAGE`](crate::REFUSAL_MESSAGE), attribute `error.type` = [`REFUSAL_ERROR_TYPE`] | refused |
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
//!   included, and nothing is recorded: the layer then says so once, as a WARN with the fix
//!   (target `tool_health`). In strict mode the INFO `return` events of
//!   `#[instrument(ret)]` are completion markers: filtering them out makes every call look
//!   cancelled. Filter your log output per layer (`fmt::layer().with_filter(..)`) instead, or
//!   let tool spans and their events through.
//! * **Versions.** This crate uses tracing-opentelemetry 0.34, which pairs with opentelemetry
//!   0.33 (and opentelemetry_sdk 0.33): use exactly these. A tracer of another opentelemetry
//!   version is rejected by `with_tracer`; an OpenTelemetry layer of another
//!   tracing-opentelemetry version records spans but is invisible to this crate, and the
//!   annotations silently disappear (`cargo tree -d -i tracing-opentelemetry` shows it).
//! * **Requested name vs. resolved name** (see [the crate docs](crate#interactions-to-know-properties-not-bugs)).
//!   On a span, when the name the gate was asked about differs from the span's, the outcome is
//!   recorded under the span's name without the permit's generation, a probe of the requested
//!   name is released, and a refusal records nothing.
//! * **One layer per subscriber.** A second `ToolHealthLayer` in the same subscriber stays out
//!   of spans the first one claimed, and the gate only binds through the outermost one.
//! * **Wrappers.** The layer works inside `reload::Layer`, per-layer filters and subscriber
//!   wrappers: outcomes and the gate's binding both come through the `Layer` callbacks every
//!   wrapper forwards. A per-layer filter that disables the tool spans for this layer hides
//!   them from it, as from any layer.
//!
//! # Files
//!
//! | file | owns |
//! |---|---|
//! | `mod.rs` | this guide and the wiring: the `Layer` callbacks |
//! | `builder.rs` | [`ToolHealthLayerBuilder`] |
//! | `callsites.rs` | what each callsite can be (and which convention), decided once and cached |
//! | `visitor.rs` | reading field values of spans and events into the inference's neutral shape |
//! | `span_state.rs` | the per-span state kept in the span's extensions |
//! | `bind.rs` | the span-aware gate: each thread's entered tool spans, binding decisions to them |
//! | `settle.rs` | the call helper's side: joining a tool span, recording each of its runs in it |
//! | `close.rs` | a closed tool span → a record in the registry |
//! | `late.rs` | calls whose verdict comes after their span: waiting for the framework's next move |
//! | `otel.rs` | annotations on the OpenTelemetry span |

mod bind;
mod builder;
mod callsites;
mod close;
mod late;
mod otel;
mod settle;
mod span_state;
mod visitor;

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use tracing::span::{Attributes, Id, Record};
use tracing::{Dispatch, Event, Metadata, Subscriber};
use tracing_core::dispatcher::WeakDispatch;
use tracing_core::Interest;
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::{LookupSpan, SpanRef};

use crate::call::CallOutcome;
use crate::hook::{self, CallingOut};
use crate::registry::ToolHealthRegistry;

pub use crate::call_helper::{PANIC_ERROR_TYPE, TIMEOUT_ERROR_TYPE, TOOL_ERROR_TYPE};
pub use crate::semconv::{
    BREAKER_STATE as BREAKER_STATE_ATTRIBUTE, GATE_DECISION as GATE_DECISION_ATTRIBUTE,
    GATE_ENFORCED as GATE_ENFORCED_ATTRIBUTE, GATE_SOURCE as GATE_SOURCE_ATTRIBUTE,
    REFUSAL_ERROR_TYPE, REGISTRY_ID as REGISTRY_ID_ATTRIBUTE,
    RETRY_AFTER as DEFAULT_RETRY_AFTER_FIELD, SOURCE_FLEET, TOOL_NAME as DEFAULT_TOOL_NAME_FIELD,
    TRANSITION_EVENT, TRANSITION_FROM as TRANSITION_FROM_ATTRIBUTE,
    TRANSITION_TO as TRANSITION_TO_ATTRIBUTE,
};
pub use builder::ToolHealthLayerBuilder;
// The conventions and the classification are the inference's (`crate::infer`), shared with
// the span processor; they are named here, where users of the layer meet them.
pub use crate::infer::classify::{
    DefaultClassifier, OutcomeClassifier, SpanFacts, CANCELLED_ERROR_TYPE, DEFAULT_CALLER_ERRORS,
};
pub use crate::infer::conventions::{Convention, LateFailure, MAX_CONVENTIONS};
pub use crate::infer::deferred::DEFERRED_VERDICT_BOUND;

use crate::infer::classify::SharedClassifier;
use crate::infer::conventions::Compiled;
use crate::infer::facts::{EventFields, SpanFields};
use callsites::{CallsiteCache, CallsiteRole};
use span_state::{SpanCell, ToolSpan};
use visitor::{EventVisitor, SpanVisitor};

/// Everything a layer and its clones share: the registry it feeds, what it recognises, and
/// what it remembers of callsites and open tool spans.
pub(crate) struct LayerCore {
    pub(crate) registry: Arc<ToolHealthRegistry>,
    /// The conventions in the order they are tried, and the field table of each.
    conventions: Box<[Convention]>,
    compiled: Box<[Compiled]>,
    classifier: SharedClassifier,
    callsites: CallsiteCache,
    /// Tool spans this layer family holds state for and that have not closed yet. While it is
    /// zero, a closing span cannot be one of ours, and `on_close` returns without looking the
    /// span up. Relaxed is enough: a span's increment happens before its own close (the
    /// subscriber's span store orders them), so that close reads at least one.
    live_tool_spans: AtomicUsize,
    /// Tool spans of this family that have not been entered yet. While it is zero, entering a
    /// span costs one load. Relaxed is enough for the same reason as `live_tool_spans`.
    unentered_tool_spans: AtomicUsize,
    /// The ids of the live tool spans this layer family holds state for (a counting filter).
    pub(crate) ids: bind::ToolSpanIds,
    /// Calls waiting for a late verdict (`late.rs`), when a convention has late failures.
    /// A waiting call counts in `live_tool_spans` (its parent's close must be seen).
    late: Option<crate::infer::deferred::Deferred<late::Waiting>>,
    /// This core, for a flush to record through (set when built).
    me: late::SelfRef,
}

impl LayerCore {
    /// This layer family's identity, stored in the span states it owns.
    pub(crate) fn id(&self) -> usize {
        self as *const Self as usize
    }

    /// What the callsite can be, decided once per callsite.
    #[inline]
    pub(crate) fn role(&self, meta: &'static Metadata<'static>) -> CallsiteRole {
        self.callsites
            .role(meta, |meta| CallsiteRole::of(meta, &self.conventions))
    }

    /// Whether this layer family owns a span's state.
    pub(crate) fn owns(&self, state: &ToolSpan) -> bool {
        state.owner == self.id()
    }

    /// The convention a tool-span callsite matched.
    fn compiled(&self, role: CallsiteRole) -> Option<&Compiled> {
        self.compiled.get(role.convention())
    }

    /// A call starts when its span is first entered: a framework may create the spans of a
    /// whole batch up front and run the calls one after another. While every tool span of ours
    /// has been entered already, this costs one load.
    fn first_enter(&self, cell: &SpanCell) {
        if self.unentered_tool_spans.load(Ordering::Relaxed) == 0 || cell.lock().entered {
            return;
        }
        // The clock is read with no lock held (a clock may be user code).
        let now = self.registry.now();
        let mut state = cell.lock();
        if !state.entered {
            state.entered = true;
            state.start = now;
            self.unentered_tool_spans.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Whether `id` may be one of this layer family's live tool spans (false: surely not).
    #[inline]
    fn may_be_live_tool_span(&self, id: &Id) -> bool {
        self.live_tool_spans.load(Ordering::Relaxed) != 0 && self.ids.may_contain(id)
    }

    /// The shared state of a span this layer family owns.
    pub(crate) fn cell_of<S>(&self, span: &SpanRef<'_, S>) -> Option<SpanCell>
    where
        S: for<'a> LookupSpan<'a>,
    {
        let cell = span.extensions().get::<SpanCell>()?.clone();
        let owned = self.owns(&cell.lock());
        owned.then_some(cell)
    }

    /// The tool-related field values of a span's attributes or record, read the way its
    /// convention says.
    fn visit(
        &self,
        convention: &Compiled,
        values: impl FnOnce(&mut SpanVisitor<'_>),
    ) -> SpanFields {
        let mut fields = SpanFields::default();
        values(&mut SpanVisitor {
            convention,
            out: &mut fields,
            max_name_len: self.registry.max_name_len(),
        });
        if fields.rejected_name != 0 {
            // Counted (and the first logged) by the registry, with no lock of ours held.
            self.registry.reject_name(fields.rejected_name as usize);
        }
        fields
    }

    #[inline]
    fn classify(&self, facts: &SpanFacts<'_>) -> Option<CallOutcome> {
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
    pub(crate) core: Arc<LayerCore>,
    /// Set in `on_layer`: attached to a subscriber.
    pub(crate) attached: bool,
    /// Set in `on_layer`: the call helper's span walker (see `settle.rs`).
    pub(crate) span_fn: Option<settle::SpanFn>,
    /// Set in `on_register_dispatch`: where the OpenTelemetry span is reached at close.
    dispatch: OnceLock<WeakDispatch>,
}

impl fmt::Debug for ToolHealthLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolHealthLayer")
            .field("registry", &self.core.registry)
            .field(
                "conventions",
                &self
                    .core
                    .conventions
                    .iter()
                    .map(Convention::name)
                    .collect::<Vec<_>>(),
            )
            .field("attached", &self.attached)
            .finish_non_exhaustive()
    }
}

impl Clone for ToolHealthLayer {
    /// A layer with the same registry and configuration, not yet attached to any subscriber.
    fn clone(&self) -> Self {
        Self {
            core: Arc::clone(&self.core),
            attached: false,
            span_fn: None,
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

    /// The registry this layer feeds.
    pub fn registry(&self) -> &Arc<ToolHealthRegistry> {
        &self.core.registry
    }

    fn dispatch(&self) -> Option<Dispatch> {
        self.dispatch.get().and_then(WeakDispatch::upgrade)
    }

    /// A layer of `core` attached to no subscriber: records without writing on spans (the
    /// late verdicts' path: their spans are closed).
    fn detached(core: Arc<LayerCore>) -> Self {
        Self {
            core,
            attached: false,
            span_fn: None,
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
        hook::install_binder(bind::binder);
    }

    fn on_layer(&mut self, _subscriber: &mut S) {
        self.attached = true;
        hook::install_binder(bind::binder);
        self.span_fn = Some(settle::with_tool_span_in::<S>);
        hook::install_call_hooks(settle::HOOKS);
    }

    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        // Classify now so the first span pays nothing; never disable anything for other layers.
        let _ = self.core.role(metadata);
        Interest::always()
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let role = self.core.role(attrs.metadata());
        if !role.has(CallsiteRole::TOOL_SPAN) || CallingOut::active() {
            return;
        }
        let Some(convention) = self.core.compiled(role) else {
            return;
        };
        let fields = self.core.visit(convention, |v| attrs.record(v));
        let start = self.core.registry.now();
        let Some(span) = ctx.span(id) else {
            return;
        };
        let mut extensions = span.extensions_mut();
        if extensions.get_mut::<SpanCell>().is_some() {
            return; // another ToolHealthLayer in this subscriber owns the span
        }
        let mut state = ToolSpan::new(self.core.id(), start, convention.completion_marker);
        state.apply(fields);
        let is_late = late::is_late(convention);
        let name = is_late
            .then(|| state.tool_name().map(late::name_hash))
            .flatten();
        let cell = SpanCell::new(state);
        extensions.insert(cell.clone());
        drop(extensions);
        if is_late || self.core.late_busy().is_some() {
            // A late-verdict call waits under its parent; a new tool span is the framework's
            // next move in its parent.
            let parent = span.parent().map(|p| p.id());
            self.core.late_open(parent, id, &cell, name, is_late);
        }
        self.core.ids.add(id);
        // Usually entered next, on this thread: its enter then needs no lookup.
        bind::remember_new(&self.core, id, cell);
        self.core.live_tool_spans.fetch_add(1, Ordering::Relaxed);
        self.core
            .unentered_tool_spans
            .fetch_add(1, Ordering::Relaxed);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else {
            return;
        };
        let role = self.core.role(span.metadata());
        if !role.has(CallsiteRole::TOOL_SPAN) {
            return;
        }
        let Some(convention) = self.core.compiled(role) else {
            return;
        };
        let fields = self.core.visit(convention, |v| values.record(v));
        if fields.is_empty() {
            return;
        }
        if let Some(cell) = self.core.cell_of(&span) {
            cell.lock().apply(fields);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        hook::warn_if_tool_spans_filtered();
        let role = self.core.role(event.metadata());
        if let Some(late) = self.core.late_busy() {
            // One load while no call waits for a late verdict.
            if !CallingOut::active() {
                if let Some(leaf) = ctx.event_span(event) {
                    let parent = leaf.id();
                    drop(leaf);
                    self.core
                        .late_event(late, &parent, event, role.has(CallsiteRole::LATE_EVENT));
                }
                self.core.late_flush_due();
            }
        }
        let error = role.has(CallsiteRole::ERROR_EVENT);
        let marker = role.has(CallsiteRole::MARKER_EVENT);
        // An `error` field fails the span it is directly in, whatever the level.
        let error_field = role.has(CallsiteRole::ERROR_FIELD_EVENT);
        if (!error && !marker) || CallingOut::active() {
            return;
        }
        let mut fields = EventFields::default();
        if marker || role.has(CallsiteRole::EVENT_ERROR_TYPE) {
            // Visited before any lock: formatting runs user code.
            event.record(&mut EventVisitor(&mut fields));
        }
        let Some(leaf) = ctx.event_span(event) else {
            return;
        };
        for (depth, span) in leaf.scope().enumerate() {
            let direct = depth == 0;
            if !error && !fields.refusal && !direct {
                break; // a completion marker only counts directly in the tool span
            }
            if !self.core.role(span.metadata()).has(CallsiteRole::TOOL_SPAN) {
                continue;
            }
            let Some(cell) = self.core.cell_of(&span) else {
                continue;
            };
            let mut state = cell.lock();
            if !state.may_be_tool() {
                continue;
            }
            // A refusal returned as the tool's error: the call was refused, not failed.
            state.refused |= fields.refusal;
            if error || (error_field && direct) {
                let error_type = match self.core.compiled(self.core.role(span.metadata())) {
                    Some(c) => c.event_error_type(fields.error_type.take()),
                    None => fields.error_type.take(),
                };
                state.error_event(error_type);
            }
            if marker && direct {
                state.completed = true;
            }
            break;
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        // A span that is surely not one of our live tool spans costs one or two loads.
        if !self.core.may_be_live_tool_span(id) {
            return;
        }
        let cell = match bind::take_new(&self.core, id) {
            Some(cell) => cell,
            None => {
                let Some(span) = ctx.span(id) else {
                    return;
                };
                let Some(cell) = self.core.cell_of(&span) else {
                    return;
                };
                cell
            }
        };
        self.core.first_enter(&cell);
        bind::push(&self.core, id, cell);
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        if !self.core.may_be_live_tool_span(id) {
            return;
        }
        bind::pop(&self.core, id);
        // A panic unwinding out of an entered tool span. This also catches a panicking async
        // task, whose span may only close after the runtime caught the panic.
        if !std::thread::panicking() {
            return;
        }
        let Some(span) = ctx.span(id) else {
            return;
        };
        if let Some(cell) = self.core.cell_of(&span) {
            cell.lock().panicked = true;
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        // No tool span of ours is open: this one is not ours, and costs one load.
        if self.core.live_tool_spans.load(Ordering::Relaxed) == 0 {
            return;
        }
        let Some(span) = ctx.span(&id) else {
            return;
        };
        if !self.core.role(span.metadata()).has(CallsiteRole::TOOL_SPAN) {
            drop(span);
            if let Some(late) = self.core.late_busy() {
                // The parent of calls waiting for a late verdict: they are resolved now.
                self.core.late_parent_closed(late, &id);
                self.core.late_flush_due();
            }
            return;
        }
        let cell = {
            let mut extensions = span.extensions_mut();
            match extensions.get_mut::<SpanCell>() {
                Some(cell) if self.core.owns(&cell.lock()) => extensions.remove::<SpanCell>(),
                _ => None,
            }
        };
        let Some(cell) = cell else {
            return;
        };
        self.core.ids.remove(&id);
        self.core.live_tool_spans.fetch_sub(1, Ordering::Relaxed);
        bind::forget_new(&id);
        let mut state = cell.lock();
        state.closed = true;
        if !state.entered {
            self.core
                .unentered_tool_spans
                .fetch_sub(1, Ordering::Relaxed);
        }
        state.panicked |= std::thread::panicking();
        // The nearest of our tool spans around this one, while the span store holds it.
        let outer = span
            .parent()
            .into_iter()
            .flat_map(|parent| parent.scope())
            .filter(|s| self.core.role(s.metadata()).has(CallsiteRole::TOOL_SPAN))
            .find_map(|s| self.core.cell_of(&s));
        drop(span);
        if hook::processor_installed() {
            // For a span processor in the same process: this call is the layer's.
            if let Some(name) = state.tool_name() {
                let now = self.core.registry.now();
                hook::mark_layer_recorded(self.core.registry.address(), name, now);
            }
        }
        if state.late {
            // The call's end: read with no lock but this span's own (the clock is user code).
            let end = self.core.registry.now();
            if self
                .core
                .late_close(&cell, &mut state, end, outer.is_some())
            {
                // Waits for its framework's verdict in the parent span (`late.rs`).
                return;
            }
        }
        self.finish(&id, &mut state, outer);
        drop(state);
        self.core.late_flush_due();
    }
}
