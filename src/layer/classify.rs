//! Turning what was seen on a closed tool span into a [`CallOutcome`].

use std::fmt;
use std::sync::Arc;

use crate::call::CallOutcome;

/// The `error.type` values counted as caller errors by default: bad arguments from the model
/// must not trip a healthy tool's breaker.
pub const DEFAULT_CALLER_ERRORS: &[&str] = &["invalid_arguments"];

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
    /// The span's `error.type` when recorded non-empty; otherwise the `error.type` field of an
    /// ERROR event attributed to the span, if any.
    pub error_type: Option<&'a str>,
    /// `otel.status_code` was recorded as `error` (any case).
    pub status_error: bool,
    /// An ERROR-level event had this span as its nearest tool span, or an event with an
    /// `error` field (at any level) was emitted directly in it (OpenTelemetry's and
    /// tool-health's own events excluded).
    pub error_event: bool,
    /// The span was exited or closed while its thread was panicking.
    pub panicked: bool,
    /// The span carries a completion marker: an event with a `return` or `error` field directly
    /// in it (what `#[instrument(ret, err)]` emits), or a recorded `otel.status_code` or
    /// `error.type`.
    pub completed: bool,
}

impl<'a> SpanFacts<'a> {
    /// Facts of a span for `tool` on which nothing was seen.
    pub fn new(tool: &'a str) -> Self {
        Self {
            tool,
            error_type: None,
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
/// 2. in strict mode, a span without a completion marker was **cancelled**
///    (`Some(CallOutcome::Cancelled)`: counted in `cancelled_count` and the
///    `tool_health.calls{tool_health.outcome=cancelled}` series, never fed to the breaker);
/// 3. a span with a non-empty `error.type`, an `otel.status_code` of `error`, an ERROR event
///    or an event with an `error` field directly in it (any level: `#[instrument(err(level =
///    "warn"))]`) failed: it is **ignored** (a caller error) when its `error.type` is one of
///    the caller errors (exact, case-sensitive match; default [`DEFAULT_CALLER_ERRORS`]), a
///    **failure** otherwise;
/// 4. anything else is a **success**.
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
        if self.strict && !facts.completed {
            return Some(CallOutcome::Cancelled);
        }
        // An empty error.type is no error type (a completion marker at most).
        let error_type = facts.error_type.filter(|t| !t.is_empty());
        let failed = error_type.is_some() || facts.status_error || facts.error_event;
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
}
