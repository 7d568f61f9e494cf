//! The call helper: one tool call wrapped — span, gate, timeout, outcome, cancellation — for
//! code without an agent framework. The guide is on [`ToolCall`] (this module is private; its
//! items are at the crate root).

use std::any::type_name;
use std::borrow::Cow;
use std::error::Error;
use std::fmt;
use std::future::{poll_fn, Future};
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use tracing::field::Empty;
use tracing::{Instrument as _, Span};

use crate::call::{CallOutcome, CallReport, GateDecision, Permit, REFUSAL_MESSAGE};
use crate::hook::{self, HelperRun};
use crate::registry::Escaped;
use crate::registry::{NameError, ToolHealthRegistry};
use crate::semconv;

/// `error.type` of a call cut off by [`ToolCall::timeout`].
pub const TIMEOUT_ERROR_TYPE: &str = "timeout";
/// `error.type` of a call that panicked.
pub const PANIC_ERROR_TYPE: &str = "panic";
/// `error.type` of a tool's error the call helper was not told how to classify
/// ([`AllFailures`]).
pub const TOOL_ERROR_TYPE: &str = "tool_error";

impl ToolHealthRegistry {
    /// One call of `tool`, wrapped: span, gate, timeout, outcome, cancellation (see [`ToolCall`]).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use tool_health::ToolHealthRegistry;
    /// # fn lookup(id: u32) -> Result<String, std::io::Error> { Ok(id.to_string()) }
    /// let registry = Arc::new(ToolHealthRegistry::new());
    /// // Sync code: the blocking variant.
    /// let row = registry.call("sql_query").run_blocking(|| lookup(7));
    /// assert_eq!(row.unwrap(), "7");
    /// ```
    ///
    /// A name longer than [`max_name_len`](Self::max_name_len) is not copied: the call answers
    /// [`CallError::InvalidName`] at once, without a span, a gate decision or a record.
    pub fn call(self: &Arc<Self>, tool: &str) -> ToolCall {
        let (tool, invalid) = match self.validate_name(tool) {
            Ok(()) => (tool.into(), None),
            Err(e) => {
                self.reject_name(e.len());
                (Box::default(), Some(e))
            }
        };
        ToolCall {
            registry: Arc::clone(self),
            tool,
            invalid,
            timeout: None,
            span: None,
            classify: AllFailures,
        }
    }
}

/// One tool call, configured: from [`ToolHealthRegistry::call`], run with [`ToolCall::run`]
/// (async) or [`ToolCall::run_blocking`] (sync).
///
/// # The call helper
///
/// One tool call, wrapped: span, gate, timeout, outcome, cancellation — for code without an
/// agent framework.
///
/// [`ToolHealthRegistry::call`] returns a `ToolCall`; [`ToolCall::run`] wraps the call's
/// future (or [`ToolCall::run_blocking`] a closure) and does everything the layer-and-gate
/// pattern asks of hand-written code, in the right order:
///
/// 1. opens the GenAI `execute_tool {tool}` span (`gen_ai.operation.name = "execute_tool"`,
///    `gen_ai.tool.name`), as a child of the span current when `run` is called — or joins the
///    current span when it is already a [`ToolHealthLayer`](crate::ToolHealthLayer) tool span
///    of the same tool (an `#[instrument]`ed tool function calling the helper), or uses the
///    span you give it ([`ToolCall::span`]);
/// 2. gates inside it: a refusal returns [`CallError::Refused`] with its `retry_after`, and the
///    tool is never called;
/// 3. applies the timeout inside the span (feature `tokio`, [`ToolCall::timeout`]): a call cut
///    off is a **failure** with `error.type = timeout` ([`CallError::TimedOut`]), so a tool that
///    hangs trips its breaker;
/// 4. records the outcome from the `Result`: `Ok` a success, `Err` a failure — or a caller
///    error, never fed to the breaker, when your classifier says so ([`ToolCall::classify`]);
/// 5. treats a future dropped before it finished (an outer `timeout`, an aborted task, a
///    `select!` that took another branch) as **cancelled**: nothing is recorded as a success or
///    a failure, the call counts in `cancelled_count`, and a probe goes back at once; a panic
///    inside the call is a failure (`error.type = panic`) and goes on unwinding.
///
/// The span is created when `run` is called and travels with the future, so
/// `tokio::spawn(registry.call("search").run(fetch(q)))` keeps the caller's span as parent and
/// needs no `.in_current_span()`.
///
/// ```
/// use std::sync::Arc;
/// use tool_health::{CallError, ToolHealthRegistry};
///
/// # #[derive(Debug)] struct SearchError;
/// # impl std::fmt::Display for SearchError {
/// #     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str("search failed") }
/// # }
/// # async fn search(q: &str) -> Result<String, SearchError> { Ok(format!("results for {q}")) }
/// async fn answer(registry: Arc<ToolHealthRegistry>) -> String {
///     match registry.call("search").run(search("rust")).await {
///         Ok(results) => results,
///         Err(CallError::Refused { retry_after, .. }) => {
///             format!("search is unavailable, retry in {retry_after:?}") // soft: tell the model
///         }
///         Err(e) => format!("search failed: {e}"),
///     }
/// }
/// # let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// # assert_eq!(rt.block_on(answer(Arc::new(ToolHealthRegistry::new()))), "results for rust");
/// ```
///
/// # Who records
///
/// Exactly one record per run: **each run of the helper is one call**, recorded when it ends.
/// When a [`ToolHealthLayer`](crate::ToolHealthLayer) for this registry sees the span, the
/// helper gates with [`check`](ToolHealthRegistry::check) (the decision is bound to the span
/// and written on it) and hands the outcome to the layer, which records it at once with the
/// permit and writes the transition events on the span. Inside a tool span of the same tool
/// (a framework's `execute_tool` span, an `#[instrument]`ed tool function) that holds for
/// every run: a retry loop of three failed runs is three failures, a probe's verdict is in the
/// breaker before the next run asks the gate (so a failed probe is never retried through it),
/// and that span — and any same-tool span around it — adds no record of its own. A run inside
/// a span that holds the tool's probe (a middleware's gate granted it) is answered that probe,
/// once: the run resolves it. Otherwise — no layer, a layer for another registry, or a
/// subscriber filter that disabled the span (a global `EnvFilter` at `warn`) — the helper
/// records through the permit itself and writes `tool_health.gate.decision`, `error.type` and
/// `otel.status_code` on the span as plain fields. Either way the registry sees the same
/// calls.
///
/// # Timeouts and the `tokio` feature
///
/// [`ToolCall::timeout`] needs the `tokio` feature (`tokio` with its `time` driver, nothing
/// else; the default features stay free of any runtime). Without it, put the timeout inside
/// your future — `registry.call(t).run(async { my_timeout(fut).await })` with an error your
/// classifier marks as a failure. A timeout *around* `run` is a cancellation, not a failure:
/// it says nothing about the tool, and the breaker does not move.
#[must_use = "a ToolCall does nothing until `run` or `run_blocking`"]
pub struct ToolCall<C = AllFailures> {
    registry: Arc<ToolHealthRegistry>,
    tool: Box<str>,
    /// The name was refused (too long): the call answers this, and does nothing else.
    invalid: Option<NameError>,
    timeout: Option<Duration>,
    span: Option<Span>,
    classify: C,
}

impl<C> fmt::Debug for ToolCall<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolCall")
            .field("tool", &self.tool)
            .field("timeout", &self.timeout)
            .field("span", &self.span)
            .field("classify", &type_name::<C>())
            .finish_non_exhaustive()
    }
}

impl<C> ToolCall<C> {
    /// Cuts the call off after `timeout`, inside its span: a failure with
    /// `error.type = timeout`, returned as [`CallError::TimedOut`]. Needs a tokio runtime with
    /// its time driver (`enable_time`, or `enable_all`). Feature `tokio`.
    #[cfg(feature = "tokio")]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Runs the call in `span` instead of opening an `execute_tool` span: for a span with
    /// fields of your own. It should be a tool span (`gen_ai.tool.name` = this tool) for the
    /// layer to feed the registry from it; any other span is used for context only and the
    /// helper records the call itself.
    pub fn span(mut self, span: Span) -> Self {
        self.span = Some(span);
        self
    }

    /// How the tool's errors count: a closure from the error to an [`ErrorClass`]. The default
    /// ([`AllFailures`]) counts every error as a failure of the tool with the error's type name
    /// as `error.type`.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// use tool_health::{ErrorClass, ToolHealthRegistry};
    ///
    /// #[derive(Debug)]
    /// enum WeatherError { UnknownCity, Upstream(u16) }
    ///
    /// let registry = Arc::new(ToolHealthRegistry::new());
    /// let call = registry.call("weather").classify(|e: &WeatherError| match e {
    ///     // The model asked for a city that does not exist: not the tool's fault.
    ///     WeatherError::UnknownCity => ErrorClass::caller_error("invalid_arguments"),
    ///     WeatherError::Upstream(_) => ErrorClass::failure("upstream_error"),
    /// });
    /// let r = call.run_blocking(|| Err::<(), _>(WeatherError::UnknownCity));
    /// assert!(r.is_err());
    /// let snap = registry.snapshot("weather").unwrap();
    /// assert_eq!((snap.failure_count, snap.ignored_count), (0, 1));
    /// ```
    pub fn classify<E, F>(self, classify: F) -> ToolCall<F>
    where
        F: Fn(&E) -> ErrorClass,
    {
        ToolCall {
            registry: self.registry,
            tool: self.tool,
            invalid: self.invalid,
            timeout: self.timeout,
            span: self.span,
            classify,
        }
    }

    /// Runs the call: see [`ToolCall`] ("The call helper"). The span is created now, as a
    /// child of the current span; the returned future carries it (spawn it as it is).
    pub fn run<T, E, F>(self, call: F) -> impl Future<Output = Result<T, CallError<E>>>
    where
        F: Future<Output = Result<T, E>>,
        C: ClassifyError<E>,
    {
        let (span, joined) = match self.invalid {
            None => self.open_span(),
            Some(_) => (Span::none(), false),
        };
        let ToolCall {
            registry,
            tool,
            invalid,
            timeout,
            classify,
            ..
        } = self;
        let fut_span = span.clone();
        async move {
            if let Some(e) = invalid {
                return Err(CallError::InvalidName(e));
            }
            let mut pending = Pending::start(registry, tool, span, joined);
            let permit = match pending.gate() {
                Ok(permit) => permit,
                Err(retry_after) => return Err(pending.refused(retry_after)),
            };
            pending.admitted(permit);
            // A panic while the call is polled is recorded as a failure right there, inside
            // the span (the runtime drops the future only after catching the panic).
            let mut call = pin!(call);
            let guarded = poll_fn(|cx| {
                let mut on_panic = OnPanic(Some(&mut pending));
                let poll = call.as_mut().poll(cx);
                on_panic.0 = None;
                poll
            });
            let result = match timeout {
                None => Some(guarded.await),
                Some(limit) => with_timeout(limit, guarded).await,
            };
            let Some(result) = result else {
                pending.finish(Some(CallOutcome::Failure), Some(TIMEOUT_ERROR_TYPE));
                return Err(CallError::TimedOut {
                    tool: pending.tool.to_string(),
                    after: timeout.unwrap_or_default(),
                });
            };
            match &result {
                Ok(_) => pending.finish(Some(CallOutcome::Success), None),
                Err(e) => {
                    let class = classify.classify(e);
                    pending.finish(class.recorded(), Some(&class.error_type));
                }
            }
            result.map_err(CallError::Tool)
        }
        .instrument(fut_span)
    }

    /// Runs a synchronous call on this thread: the blocking variant of [`run`](Self::run)
    /// (same span, gate, outcome and panic rules; no timeout — a blocking call cannot be cut
    /// off: give it a `slow_call` policy instead).
    pub fn run_blocking<T, E>(self, call: impl FnOnce() -> Result<T, E>) -> Result<T, CallError<E>>
    where
        C: ClassifyError<E>,
    {
        if let Some(e) = self.invalid {
            return Err(CallError::InvalidName(e));
        }
        let (span, joined) = self.open_span();
        let _entered = span.enter();
        let mut pending = Pending::start(self.registry, self.tool, span.clone(), joined);
        let permit = match pending.gate() {
            Ok(permit) => permit,
            Err(retry_after) => return Err(pending.refused(retry_after)),
        };
        pending.admitted(permit);
        let result = call();
        match &result {
            Ok(_) => pending.finish(Some(CallOutcome::Success), None),
            Err(e) => {
                let class = self.classify.classify(e);
                pending.finish(class.recorded(), Some(&class.error_type));
            }
        }
        result.map_err(CallError::Tool)
    }

    /// The call's span, and whether it is the current tool span the helper joined.
    fn open_span(&self) -> (Span, bool) {
        if let Some(span) = &self.span {
            return (span.clone(), false);
        }
        let current = Span::current();
        if hook::joins(self.registry.address(), &self.tool, &current) {
            return (current, true);
        }
        let tool = &*self.tool;
        let span = tracing::info_span!(
            target: "tool_health::call",
            "execute_tool",
            otel.name = format_args!("execute_tool {tool}"),
            gen_ai.operation.name = semconv::EXECUTE_TOOL,
            gen_ai.tool.name = tool,
            error.type = Empty,
            otel.status_code = Empty,
            otel.status_description = Empty,
            tool_health.gate.decision = Empty,
            tool_health.registry.id = Empty,
        );
        (span, false)
    }
}

/// `fut`, or `None` once `limit` has passed.
#[cfg(feature = "tokio")]
async fn with_timeout<F: Future>(limit: Duration, fut: F) -> Option<F::Output> {
    tokio::time::timeout(limit, fut).await.ok()
}

/// Without the `tokio` feature there is no timeout to apply (`ToolCall::timeout` is absent).
#[cfg(not(feature = "tokio"))]
async fn with_timeout<F: Future>(_limit: Duration, fut: F) -> Option<F::Output> {
    Some(fut.await)
}

/// Who records the call (see "Who records" in the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Recorder {
    /// The layer, from the span: each run recorded at once through it (one call), the span
    /// adding no record of its own.
    Layer,
    /// The helper, through the permit.
    Helper,
}

/// One call in flight: records exactly once, on [`finish`](Pending::finish) or on drop
/// (cancelled, or a failure while panicking).
struct Pending {
    registry: Arc<ToolHealthRegistry>,
    tool: Box<str>,
    span: Span,
    recorder: Recorder,
    /// Admitted and not yet finished: what a drop records.
    open: Option<(Permit, Duration)>,
}

impl Pending {
    /// Decides who records: the layer when it owns the span (or the joined one).
    fn start(registry: Arc<ToolHealthRegistry>, tool: Box<str>, span: Span, joined: bool) -> Self {
        let recorder = if joined || hook::joins(registry.address(), &tool, &span) {
            Recorder::Layer
        } else {
            Recorder::Helper
        };
        Self {
            registry,
            tool,
            span,
            recorder,
            open: None,
        }
    }

    /// The gate, inside the span: the permit, or the refusal's `retry_after`.
    fn gate(&mut self) -> Result<Permit, Duration> {
        let decision = match self.recorder {
            // Bound to the span: the layer resolves the permit and annotates the span.
            Recorder::Layer => self.registry.check(&self.tool),
            // Never bound: the current span may be another tool's.
            Recorder::Helper => {
                let d = self.registry.check_detached(&self.tool);
                self.span.record(semconv::GATE_DECISION, d.as_str());
                // The registry that records the call (a span without the field ignores it).
                self.span
                    .record(semconv::REGISTRY_ID, self.registry.instance_id());
                d
            }
        };
        match decision {
            GateDecision::Allowed(p) | GateDecision::Probe(p) => Ok(p),
            GateDecision::Refused { retry_after } => Err(retry_after),
        }
    }

    fn admitted(&mut self, permit: Permit) {
        self.open = Some((permit, self.registry.now()));
    }

    /// A refusal: the gate counted it (and the layer, when bound, annotates the span).
    fn refused<E>(&mut self, retry_after: Duration) -> CallError<E> {
        if self.recorder == Recorder::Helper {
            self.span
                .record(semconv::ERROR_TYPE, semconv::REFUSAL_ERROR_TYPE);
            self.span.record(semconv::OTEL_STATUS_CODE, "error");
            self.span.record("otel.status_description", REFUSAL_MESSAGE);
        }
        CallError::Refused {
            tool: self.tool.to_string(),
            retry_after,
        }
    }

    /// Records the call's outcome, once; `None`: the call says nothing about the tool, nothing
    /// is recorded and a probe goes back ([`ErrorClass::unrecorded`]).
    fn finish(&mut self, outcome: Option<CallOutcome>, error_type: Option<&str>) {
        let Some((permit, started)) = self.open.take() else {
            return;
        };
        let failed = matches!(
            outcome,
            None | Some(CallOutcome::Failure | CallOutcome::Ignored)
        );
        let error_type = error_type.filter(|t| failed && !t.is_empty());
        if let Some(error_type) = error_type {
            self.span.record(semconv::ERROR_TYPE, error_type);
            self.span.record(semconv::OTEL_STATUS_CODE, "error");
        }
        let duration = self.registry.now().saturating_sub(started);
        let run = HelperRun {
            outcome,
            error_type,
            permit,
            duration,
        };
        // Recorded at once by the layer (through the span's own dispatcher: the transition
        // events go on the span, and the same-tool spans around it record nothing more) —
        // or, if the span is no longer one the layer feeds this registry from, here.
        let by_layer = self.recorder == Recorder::Layer
            && hook::record(self.registry.address(), &self.tool, &self.span, &run);
        if by_layer {
            return;
        }
        let Some(outcome) = outcome else {
            // The answer says nothing about the tool: nothing recorded, a probe given back.
            if permit.is_probe() {
                self.registry.release(&self.tool, permit);
            }
            return;
        };
        let mut report = CallReport::new(outcome, duration);
        report.error_type = error_type;
        if outcome == CallOutcome::Cancelled {
            // No verdict: counted, and a probe given back exactly.
            self.registry.record_report(&self.tool, &report);
            if permit.is_probe() {
                self.registry.release(&self.tool, permit);
            }
        } else {
            self.registry
                .record_report(&self.tool, &report.permit(permit));
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if self.open.is_none() {
            return;
        }
        if std::thread::panicking() {
            self.finish(Some(CallOutcome::Failure), Some(PANIC_ERROR_TYPE));
        } else {
            self.finish(Some(CallOutcome::Cancelled), None);
        }
    }
}

/// Records a failure if dropped while its thread panics (see [`ToolCall::run`]).
struct OnPanic<'a>(Option<&'a mut Pending>);

impl Drop for OnPanic<'_> {
    fn drop(&mut self) {
        if let Some(pending) = self.0.take() {
            if std::thread::panicking() {
                pending.finish(Some(CallOutcome::Failure), Some(PANIC_ERROR_TYPE));
            }
        }
    }
}

/// How a tool's error counts: its [`CallOutcome`] and its `error.type`. Built by a
/// [`ToolCall::classify`] closure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorClass {
    outcome: CallOutcome,
    error_type: Cow<'static, str>,
    /// `false`: [`ErrorClass::unrecorded`].
    recorded: bool,
}

impl ErrorClass {
    /// The tool failed: counts toward its breaker.
    pub fn failure(error_type: impl Into<Cow<'static, str>>) -> Self {
        Self {
            outcome: CallOutcome::Failure,
            error_type: error_type.into(),
            recorded: true,
        }
    }

    /// The caller's fault (bad arguments from the model): counted apart
    /// ([`CallOutcome::Ignored`]), never fed to the breaker; a probe goes back.
    pub fn caller_error(error_type: impl Into<Cow<'static, str>>) -> Self {
        Self {
            outcome: CallOutcome::Ignored,
            error_type: error_type.into(),
            recorded: true,
        }
    }

    /// The call was given up before the tool answered (e.g. the peer cancelled the request):
    /// [`CallOutcome::Cancelled`], never fed to the breaker; a probe goes back.
    pub fn cancelled() -> Self {
        Self {
            outcome: CallOutcome::Cancelled,
            error_type: Cow::Borrowed(semconv::CANCELLED),
            recorded: true,
        }
    }

    /// An error that says the tool works (e.g. "no results"): recorded as a success.
    pub fn success() -> Self {
        Self {
            outcome: CallOutcome::Success,
            error_type: Cow::Borrowed(""),
            recorded: true,
        }
    }

    /// The answer says nothing about this tool — the call never reached it (e.g. the server
    /// does not know the name, or the connection to the server failed): **nothing** is
    /// recorded for the tool (no entry is created for a name never seen), a probe goes back at
    /// once, and `error_type` is still written on the span. [`outcome`](Self::outcome) reads
    /// [`CallOutcome::Ignored`] (neither a success nor a failure).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// use tool_health::{ErrorClass, ToolHealthRegistry};
    ///
    /// let registry = Arc::new(ToolHealthRegistry::new());
    /// let r = registry
    ///     .call("invented_by_the_model")
    ///     .classify(|_: &&str| ErrorClass::unrecorded("unknown_tool"))
    ///     .run_blocking(|| Err::<(), _>("no such tool"));
    /// assert!(r.is_err());
    /// assert!(registry.snapshot("invented_by_the_model").is_none());
    /// ```
    pub fn unrecorded(error_type: impl Into<Cow<'static, str>>) -> Self {
        Self {
            outcome: CallOutcome::Ignored,
            error_type: error_type.into(),
            recorded: false,
        }
    }

    /// The outcome recorded ([`CallOutcome::Ignored`] for an
    /// [`unrecorded`](Self::unrecorded) class, which records nothing).
    pub fn outcome(&self) -> CallOutcome {
        self.outcome
    }

    /// Whether anything is recorded for the tool: `false` only for
    /// [`unrecorded`](Self::unrecorded).
    pub fn is_recorded(&self) -> bool {
        self.recorded
    }

    /// What the call helper records: the outcome, or nothing.
    fn recorded(&self) -> Option<CallOutcome> {
        self.recorded.then_some(self.outcome)
    }

    /// The `error.type` written on the span and given to observers.
    pub fn error_type(&self) -> &str {
        &self.error_type
    }
}

/// Classifies a tool's errors for [`ToolCall`]: any `Fn(&E) -> ErrorClass`, or
/// [`AllFailures`].
pub trait ClassifyError<E> {
    /// How `error` counts.
    fn classify(&self, error: &E) -> ErrorClass;
}

impl<E, F: Fn(&E) -> ErrorClass> ClassifyError<E> for F {
    fn classify(&self, error: &E) -> ErrorClass {
        self(error)
    }
}

/// The default classification: every error is a failure of the tool, with `error.type` =
/// [`TOOL_ERROR_TYPE`] (`tool_error`).
///
/// Not the error's Rust type path (`std::any::type_name`, what the semantic conventions
/// suggest for languages whose type names are short): `my_service::tools::SearchError` or
/// `alloc::string::String` on a dashboard grouped by `error.type` shows code paths, not error
/// classes, and changes with every refactor. Name your classes with
/// [`ToolCall::classify`] (`ErrorClass::failure("upstream_503")`).
#[derive(Debug, Clone, Copy, Default)]
pub struct AllFailures;

impl<E> ClassifyError<E> for AllFailures {
    fn classify(&self, _: &E) -> ErrorClass {
        ErrorClass::failure(TOOL_ERROR_TYPE)
    }
}

/// Why a [`ToolCall`] did not return the tool's value.
#[derive(Debug)]
#[non_exhaustive]
pub enum CallError<E> {
    /// The breaker refused the call; the tool was not called. Not a failure: tell the model
    /// [`REFUSAL_MESSAGE`], and retry no sooner than `retry_after`.
    Refused {
        /// The tool.
        tool: String,
        /// When the gate could next admit a call (`Duration::MAX`: not in any foreseeable
        /// time, e.g. forced open).
        retry_after: Duration,
    },
    /// The call did not finish within the timeout: recorded as a failure with
    /// `error.type = timeout`.
    TimedOut {
        /// The tool.
        tool: String,
        /// The timeout.
        after: Duration,
    },
    /// The tool's own error, recorded as its [`ErrorClass`] says.
    Tool(E),
    /// The tool name is longer than the registry's
    /// [`max_name_len`](ToolHealthRegistry::max_name_len): no tool of the application's has
    /// it. The call was not made and nothing was recorded or copied. An invalid argument of the
    /// model's: tell it so (the text says what is wrong), never [`REFUSAL_MESSAGE`].
    InvalidName(NameError),
}

impl<E> CallError<E> {
    /// Whether the breaker refused the call (the tool was not called).
    pub fn is_refused(&self) -> bool {
        matches!(self, Self::Refused { .. })
    }

    /// For a refusal, when to retry.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Refused { retry_after, .. } => Some(*retry_after),
            _ => None,
        }
    }

    /// The tool's own error, if that is what this is.
    pub fn tool_error(&self) -> Option<&E> {
        match self {
            Self::Tool(e) => Some(e),
            _ => None,
        }
    }

    /// The tool's own error, if that is what this is.
    pub fn into_tool_error(self) -> Option<E> {
        match self {
            Self::Tool(e) => Some(e),
            _ => None,
        }
    }
}

impl<E: fmt::Display> fmt::Display for CallError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // The model-facing text first, then what a log reader needs. The tool name is the
            // model's: escaped, so it cannot write a line or a colour into a log.
            Self::Refused { tool, retry_after } => write!(
                f,
                "{REFUSAL_MESSAGE} (tool `{}`, {})",
                Escaped(tool),
                RetryIn(*retry_after)
            ),
            Self::TimedOut { tool, after } => {
                write!(f, "tool `{}` timed out after {after:?}", Escaped(tool))
            }
            Self::Tool(e) => e.fmt(f),
            Self::InvalidName(e) => e.fmt(f),
        }
    }
}

/// When to retry, as the model reads it: seconds under a minute (`retry in 2.5 s`), then
/// whole minutes, hours or days rounded up; `until released` for a refusal without an end
/// (`Duration::MAX`: forced open until released, or a cooldown too long to represent).
struct RetryIn(Duration);

impl fmt::Display for RetryIn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const MINUTE: u64 = 60;
        const HOUR: u64 = 60 * MINUTE;
        const DAY: u64 = 24 * HOUR;
        let d = self.0;
        if d == Duration::MAX {
            return f.write_str("until released");
        }
        if d < Duration::from_secs(MINUTE) {
            return write!(f, "retry in {:.1} s", d.as_secs_f64());
        }
        let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
        let (n, unit) = if secs < 2 * HOUR {
            (secs.div_ceil(MINUTE), "min")
        } else if secs < 2 * DAY {
            (secs.div_ceil(HOUR), "h")
        } else {
            (secs.div_ceil(DAY), "d")
        };
        write!(f, "retry in {n} {unit}")
    }
}

impl<E: Error + 'static> Error for CallError<E> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Self::Tool(e) => Some(e),
            _ => None,
        }
    }
}
