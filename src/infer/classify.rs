//! Turning what was seen on a closed tool span into a [`CallOutcome`].

use std::fmt;
use std::sync::Arc;

use crate::call::CallOutcome;

/// The error types counted as caller errors by default: the model's mistakes must not trip a
/// healthy tool's breaker.
///
/// * bad arguments: `invalid_arguments`, `invalid_args` (rig), JSON-RPC `-32602` (invalid
///   params; rmcp also answers it for an unknown tool);
/// * a tool that does not exist: `not_found` (rig: the tool is not registered, or the tool
///   reported that what it was asked for does not exist — an answer, not a sickness),
///   `tool_not_found`, `unknown_tool`, JSON-RPC `-32601` (method not found).
///
/// Everything else that fails is the tool's: `timeout`, `rate_limited`, `provider`,
/// `network`, `other`, `permission_denied` (a tool that cannot be used keeps failing: the
/// breaker stops hammering it), MCP's `tool_error`, a closed transport, any other JSON-RPC
/// code. The error type `cancelled` is a cancellation, [`CallOutcome::Cancelled`] (see
/// [`DefaultClassifier`]).
pub const DEFAULT_CALLER_ERRORS: &[&str] = &[
    "invalid_arguments",
    "invalid_args",
    "-32602",
    "not_found",
    "tool_not_found",
    "unknown_tool",
    "-32601",
];

/// The error type of a call that was cancelled rather than failed: [`CallOutcome::Cancelled`],
/// no verdict on the tool.
pub const CANCELLED_ERROR_TYPE: &str = crate::semconv::CANCELLED;

/// What the layer saw on a tool span by the time it closed: the input of an
/// [`OutcomeClassifier`].
///
/// Build one with [`SpanFacts::new`] and set fields to test a classifier:
///
/// ```
/// use tool_health::CallOutcome;
/// use tool_health::layer::{DefaultClassifier, OutcomeClassifier, SpanFacts};
///
/// let mut facts = SpanFacts::new("search");
/// facts.error_type = Some("invalid_arguments");
/// assert_eq!(DefaultClassifier::new().classify(&facts), Some(CallOutcome::Ignored));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SpanFacts<'a> {
    /// The tool's name, as recorded on the span.
    pub tool: &'a str,
    /// The span's error type when recorded non-empty (`error.type`, else the convention's other
    /// error-type fields such as `gen_ai.tool.error.type`); otherwise the `error.type` field of
    /// an ERROR event attributed to the span, if any.
    pub error_type: Option<&'a str>,
    /// The framework's own verdict, when its convention has an outcome field and it was
    /// recorded: `success`, `error`, `denied`, `skipped` (rig's `gen_ai.tool.call.outcome`), or
    /// whatever else the framework wrote.
    pub call_outcome: Option<&'a str>,
    /// A failure field of the span's convention was recorded non-empty (langchain-rust's
    /// `error`, the error's text).
    pub failure_field: bool,
    /// `otel.status_code` was recorded as `error` (any case).
    pub status_error: bool,
    /// An ERROR-level event had this span as its nearest tool span, or an event with an
    /// `error` field (at any level) was emitted directly in it (OpenTelemetry's and
    /// tool-health's own events excluded).
    pub error_event: bool,
    /// The span was exited or closed while its thread was panicking.
    pub panicked: bool,
    /// The span carries a completion marker: an event with a `return` or `error` field directly
    /// in it (what `#[instrument(ret, err)]` emits), or a recorded `otel.status_code`, error
    /// type, failure field or outcome field; always true for a convention whose spans mark
    /// nothing on success ([`Convention::no_completion_marker`](crate::layer::Convention::no_completion_marker)).
    pub completed: bool,
}

impl<'a> SpanFacts<'a> {
    /// Facts of a span for `tool` on which nothing was seen.
    pub fn new(tool: &'a str) -> Self {
        Self {
            tool,
            error_type: None,
            call_outcome: None,
            failure_field: false,
            status_error: false,
            error_event: false,
            panicked: false,
            completed: false,
        }
    }
}

/// Decides a closed tool span's outcome.
///
/// `Some(outcome)` is recorded (with the span's duration); `Some(CallOutcome::Cancelled)`
/// counts a call that started and never finished (and gives a probe bound to the span back);
/// `None` means no call was made at all (a framework skipped or denied it): nothing is
/// recorded, and a probe bound to the span is released at once.
///
/// Any `Fn(&SpanFacts<'_>) -> Option<CallOutcome>` closure is a classifier. Classifiers run
/// inside a subscriber callback: they must be fast and must not panic.
///
/// ```
/// use tool_health::CallOutcome;
/// use tool_health::layer::{DefaultClassifier, OutcomeClassifier, SpanFacts};
///
/// // Timeouts of a flaky upstream are the upstream's fault, but count them as failures
/// // anyway; everything else as the default does.
/// let default = DefaultClassifier::new();
/// let classify = move |facts: &SpanFacts<'_>| match facts.error_type {
///     Some("rate_limited") => Some(CallOutcome::Ignored),
///     _ => default.classify(facts),
/// };
/// let mut facts = SpanFacts::new("search");
/// facts.error_type = Some("rate_limited");
/// assert_eq!(classify.classify(&facts), Some(CallOutcome::Ignored));
/// ```
pub trait OutcomeClassifier: Send + Sync + 'static {
    /// The outcome of the call the span describes, or `None` if no call was made.
    fn classify(&self, facts: &SpanFacts<'_>) -> Option<CallOutcome>;
}

impl<F> OutcomeClassifier for F
where
    F: Fn(&SpanFacts<'_>) -> Option<CallOutcome> + Send + Sync + 'static,
{
    fn classify(&self, facts: &SpanFacts<'_>) -> Option<CallOutcome> {
        self(facts)
    }
}

/// The default classifier.
///
/// In order:
/// 1. a span that panicked is a **failure**;
/// 2. a framework outcome of `denied` or `skipped` means no call was made: **nothing** (`None`);
/// 3. in strict mode, a span without a completion marker was **cancelled**
///    (`Some(CallOutcome::Cancelled)`: counted in `cancelled_count` and the
///    `tool_health.calls{tool_health.outcome=cancelled}` series, never fed to the breaker);
/// 4. the error type [`CANCELLED_ERROR_TYPE`] (`cancelled`, e.g. rig's or a dropped MCP call's):
///    **cancelled** too — the call started and was given up, which says nothing about the tool;
/// 5. a framework outcome of `success` is a **success**;
/// 6. a span with a non-empty error type, a framework outcome of `error`, a failure field of its
///    convention, an `otel.status_code` of `error`, an ERROR event or an event with an `error`
///    field directly in it (any level: `#[instrument(err(level = "warn"))]`) failed: it is
///    **ignored** (a caller error) when its error type is one of the caller errors (exact,
///    case-sensitive match; default [`DEFAULT_CALLER_ERRORS`]), a **failure** otherwise;
/// 7. anything else is a **success**.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultClassifier {
    strict: bool,
    caller_errors: Vec<Box<str>>,
}

impl Default for DefaultClassifier {
    fn default() -> Self {
        Self::new()
    }
}

impl DefaultClassifier {
    /// Not strict, caller errors [`DEFAULT_CALLER_ERRORS`].
    pub fn new() -> Self {
        Self {
            strict: false,
            caller_errors: DEFAULT_CALLER_ERRORS.iter().map(|&s| s.into()).collect(),
        }
    }

    /// Strict mode: a span that closes without a completion marker was cancelled
    /// ([`CallOutcome::Cancelled`]).
    #[must_use]
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// Replaces the set of `error.type` values counted as caller errors.
    #[must_use]
    pub fn caller_errors<I>(mut self, errors: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        self.caller_errors = errors.into_iter().map(|e| e.into().into()).collect();
        self
    }

    /// Whether strict mode is on.
    pub fn is_strict(&self) -> bool {
        self.strict
    }

    /// Whether `error_type` is one of the caller errors.
    pub fn is_caller_error(&self, error_type: &str) -> bool {
        self.caller_errors.iter().any(|e| &**e == error_type)
    }
}

impl OutcomeClassifier for DefaultClassifier {
    fn classify(&self, facts: &SpanFacts<'_>) -> Option<CallOutcome> {
        if facts.panicked {
            return Some(CallOutcome::Failure);
        }
        if matches!(facts.call_outcome, Some("denied" | "skipped")) {
            return None;
        }
        if self.strict && !facts.completed {
            return Some(CallOutcome::Cancelled);
        }
        // An empty error type is no error type (a completion marker at most).
        let error_type = facts.error_type.filter(|t| !t.is_empty());
        if error_type == Some(CANCELLED_ERROR_TYPE) {
            return Some(CallOutcome::Cancelled);
        }
        if facts.call_outcome == Some("success") {
            return Some(CallOutcome::Success);
        }
        let failed = error_type.is_some()
            || facts.call_outcome == Some("error")
            || facts.failure_field
            || facts.status_error
            || facts.error_event;
        if !failed {
            return Some(CallOutcome::Success);
        }
        if error_type.is_some_and(|t| self.is_caller_error(t)) {
            Some(CallOutcome::Ignored)
        } else {
            Some(CallOutcome::Failure)
        }
    }
}

/// The classifier a layer uses, shared by its clones.
#[derive(Clone)]
pub(crate) struct SharedClassifier(pub(crate) Arc<dyn OutcomeClassifier>);

impl fmt::Debug for SharedClassifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OutcomeClassifier")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_rules_in_order() {
        let c = DefaultClassifier::new();
        let mut f = SpanFacts::new("t");
        assert_eq!(c.classify(&f), Some(CallOutcome::Success));
        f.error_event = true;
        assert_eq!(c.classify(&f), Some(CallOutcome::Failure));
        f.error_type = Some("invalid_arguments");
        assert_eq!(c.classify(&f), Some(CallOutcome::Ignored));
        f.panicked = true;
        assert_eq!(c.classify(&f), Some(CallOutcome::Failure));

        let strict = DefaultClassifier::new().strict(true);
        let mut f = SpanFacts::new("t");
        assert_eq!(strict.classify(&f), Some(CallOutcome::Cancelled));
        f.completed = true;
        assert_eq!(strict.classify(&f), Some(CallOutcome::Success));
        f.status_error = true;
        assert_eq!(strict.classify(&f), Some(CallOutcome::Failure));
    }

    #[test]
    fn caller_errors_are_configurable_and_exact() {
        let c = DefaultClassifier::new().caller_errors(["bad_input"]);
        let mut f = SpanFacts::new("t");
        f.error_type = Some("invalid_arguments");
        assert_eq!(c.classify(&f), Some(CallOutcome::Failure));
        f.error_type = Some("bad_input");
        assert_eq!(c.classify(&f), Some(CallOutcome::Ignored));
        f.error_type = Some("BAD_INPUT");
        assert_eq!(c.classify(&f), Some(CallOutcome::Failure));
    }

    #[test]
    fn framework_outcomes() {
        let c = DefaultClassifier::new();
        let outcome = |o: &str, t: Option<&'static str>| {
            let mut f = SpanFacts::new("t");
            f.call_outcome = Some(o);
            f.error_type = t;
            f.completed = true;
            c.classify(&f)
        };
        assert_eq!(outcome("success", None), Some(CallOutcome::Success));
        assert_eq!(outcome("error", None), Some(CallOutcome::Failure));
        assert_eq!(outcome("error", Some("other")), Some(CallOutcome::Failure));
        assert_eq!(
            outcome("error", Some("timeout")),
            Some(CallOutcome::Failure)
        );
        assert_eq!(
            outcome("error", Some("invalid_args")),
            Some(CallOutcome::Ignored)
        );
        assert_eq!(
            outcome("error", Some("not_found")),
            Some(CallOutcome::Ignored)
        );
        assert_eq!(
            outcome("error", Some("cancelled")),
            Some(CallOutcome::Cancelled)
        );
        assert_eq!(outcome("denied", None), None);
        assert_eq!(outcome("skipped", None), None);
        // An unknown verdict is a completion marker; the other signals decide.
        assert_eq!(outcome("weird", None), Some(CallOutcome::Success));
        // denied and skipped win over strict mode and over errors; a panic wins over them.
        let strict = DefaultClassifier::new().strict(true);
        let mut f = SpanFacts::new("t");
        f.call_outcome = Some("skipped");
        f.error_event = true;
        assert_eq!(strict.classify(&f), None);
        f.panicked = true;
        assert_eq!(strict.classify(&f), Some(CallOutcome::Failure));
        // A failure field (langchain-rust's `error`) is a failure without a type.
        let mut f = SpanFacts::new("t");
        f.failure_field = true;
        assert_eq!(c.classify(&f), Some(CallOutcome::Failure));
        // The JSON-RPC codes of bad parameters and unknown methods are the caller's.
        for code in ["-32602", "-32601"] {
            f.error_type = Some(code);
            assert_eq!(c.classify(&f), Some(CallOutcome::Ignored), "{code}");
        }
        f.error_type = Some("-32603");
        assert_eq!(c.classify(&f), Some(CallOutcome::Failure));
    }

    #[test]
    fn custom_caller_errors_replace_the_defaults() {
        let c = DefaultClassifier::new().caller_errors(["bad_input"]);
        let mut f = SpanFacts::new("t");
        for replaced in DEFAULT_CALLER_ERRORS {
            f.error_type = Some(replaced);
            assert_eq!(c.classify(&f), Some(CallOutcome::Failure), "{replaced}");
        }
        // `cancelled` is not a caller error but a cancellation, whatever the caller errors are.
        f.error_type = Some(CANCELLED_ERROR_TYPE);
        assert_eq!(c.classify(&f), Some(CallOutcome::Cancelled));
    }
}
