//! One call's values: what the gate answers ([`GateDecision`], [`Permit`]) and what the call's
//! result is ([`CallOutcome`], [`CallReport`]). Plain values, never errors or panics.

use std::fmt;
use std::time::Duration;

/// The text a refused call reports to the model: soft, so the run continues.
pub const REFUSAL_MESSAGE: &str = "tool temporarily unavailable: circuit breaker open";

/// The gate's answer for one call, from [`ToolHealthRegistry::check`](crate::ToolHealthRegistry::check).
///
/// ```
/// use std::time::Duration;
/// use tool_health::{CallOutcome, GateDecision, ToolHealthRegistry, REFUSAL_MESSAGE};
///
/// let registry = ToolHealthRegistry::new();
/// match registry.check("search") {
///     GateDecision::Allowed(permit) | GateDecision::Probe(permit) => {
///         // ... call the tool, then report through the permit:
///         registry.record_with_permit("search", permit, CallOutcome::Success, Duration::from_millis(12));
///     }
///     GateDecision::Refused { retry_after } => {
///         println!("{REFUSAL_MESSAGE} (retry in {retry_after:?})");
///     }
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a gate decision says whether the call may be made"]
pub enum GateDecision {
    /// The breaker is closed: make the call.
    Allowed(Permit),
    /// The cooldown elapsed and this caller holds the single probe: make the call and report
    /// its result (or [`release`](crate::ToolHealthRegistry::release) the permit if the call is
    /// cancelled), so the breaker can close or re-open.
    Probe(Permit),
    /// The breaker is open, or another caller holds the probe. Do not call the tool; tell the
    /// model [`REFUSAL_MESSAGE`].
    Refused {
        /// When the gate could next admit a call if no more news arrives
        /// (`Duration::MAX`: not in any foreseeable time).
        retry_after: Duration,
    },
}

impl GateDecision {
    /// Whether the call may be made (allowed or probe).
    pub fn is_allowed(&self) -> bool {
        !matches!(self, Self::Refused { .. })
    }

    /// The permit, when the call may be made.
    pub fn permit(&self) -> Option<Permit> {
        match *self {
            Self::Allowed(p) | Self::Probe(p) => Some(p),
            Self::Refused { .. } => None,
        }
    }

    /// `allowed`, `probe` or `refused`: the value of the `tool_health.gate.decision` attribute.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Allowed(_) => "allowed",
            Self::Probe(_) => "probe",
            Self::Refused { .. } => "refused",
        }
    }
}

impl fmt::Display for GateDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Proof of admission: the breaker generation a call was admitted in.
///
/// Results recorded with a permit only move the breaker when they still describe its current
/// episode: a success from an older generation is ignored, and a failure from an older
/// generation can only re-arm an open breaker's cooldown. A permit is a small `Copy` value; the
/// tool name is passed again when recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Permit {
    pub(crate) generation: u32,
    pub(crate) probe: bool,
    pub(crate) shadow_refused: bool,
}

impl Permit {
    /// An ordinary admission in `generation`.
    #[inline]
    pub(crate) const fn admitted(generation: u32) -> Self {
        Self {
            generation,
            probe: false,
            shadow_refused: false,
        }
    }

    /// The single probe of `generation`.
    #[inline]
    pub(crate) const fn probe(generation: u32) -> Self {
        Self {
            generation,
            probe: true,
            shadow_refused: false,
        }
    }

    /// A call the breaker refused in `generation` and a control (shadow mode, force-closed) let
    /// through.
    #[inline]
    pub(crate) const fn shadow_refused(generation: u32) -> Self {
        Self {
            generation,
            probe: false,
            shadow_refused: true,
        }
    }

    /// The breaker generation the call was admitted in.
    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// Whether this permit is the breaker's single probe.
    pub fn is_probe(&self) -> bool {
        self.probe
    }

    /// Whether the breaker would have refused this call and a control let it through: shadow
    /// mode, or [force-closed](crate::ToolHealthRegistry::force_closed). Its result goes to the
    /// stats only, never to the breaker, so the breaker moves exactly as it would if the
    /// refusal had been enforced.
    pub fn is_shadow_refused(&self) -> bool {
        self.shadow_refused
    }
}

/// The outcome of one tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CallOutcome {
    /// The tool did its job.
    Success,
    /// The tool failed (an error, a timeout, a panic): counts toward the breaker.
    Failure,
    /// The call failed through the caller's fault (e.g. invalid arguments from the model): counted
    /// apart, neither a success nor a failure of the tool, never trips its breaker. It makes no
    /// verdict on the tool, so a probe it was made with is given back at once: the next gate
    /// call may probe.
    Ignored,
    /// The gate refused the call: zero duration, not a failure.
    Refused,
    /// The call was started and never finished: its future was dropped (an outer timeout, a
    /// cancelled task), or a strict-mode tool span closed without a completion marker. Counted
    /// apart (`cancelled_count`), never feeds the breaker, and a probe recorded with it is given
    /// back at once: the next gate call may probe.
    Cancelled,
}

impl CallOutcome {
    /// `success`, `failure`, `ignored`, `refused` or `cancelled`: the value of the
    /// `tool_health.outcome` attribute.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Failure => "failure",
            Self::Ignored => "ignored",
            Self::Refused => "refused",
            Self::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for CallOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One finished call, with everything the record path can use: the general form of a record
/// ([`ToolHealthRegistry::record_report`](crate::ToolHealthRegistry::record_report)).
///
/// ```
/// use std::time::Duration;
/// use tool_health::{CallOutcome, CallReport, ToolHealthRegistry};
///
/// let registry = ToolHealthRegistry::new();
/// // HTTP 429 with `Retry-After: 120`: if this failure leaves the breaker open, it stays open
/// // at least two minutes.
/// registry.record_report(
///     "search",
///     &CallReport::new(CallOutcome::Failure, Duration::from_millis(80))
///         .error_type("rate_limited")
///         .retry_after(Duration::from_secs(120)),
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallReport<'a> {
    /// What happened.
    pub outcome: CallOutcome,
    /// How long it took.
    pub duration: Duration,
    /// The permit's generation, when the call was admitted through
    /// [`ToolHealthRegistry::check`](crate::ToolHealthRegistry::check).
    pub generation: Option<u32>,
    /// The call's `error.type`, for observers.
    pub error_type: Option<&'a str>,
    /// A retry hint from the tool (e.g. HTTP 429 with `Retry-After`): if this failure leaves the
    /// breaker open, it stays open at least this long. The hint is a floor: a later failure
    /// without a hint (or with a shorter one) can extend the open period, never shorten it.
    pub retry_after: Option<Duration>,
    /// The permit was the probe (set by [`CallReport::permit`]).
    pub(crate) probe: bool,
    /// The permit was for a call the breaker refused and a control let through.
    pub(crate) unenforced: bool,
}

impl<'a> CallReport<'a> {
    /// A report with just an outcome and a duration.
    #[inline(always)]
    pub fn new(outcome: CallOutcome, duration: Duration) -> Self {
        Self {
            outcome,
            duration,
            generation: None,
            error_type: None,
            retry_after: None,
            probe: false,
            unenforced: false,
        }
    }

    /// With the permit the call was admitted with.
    #[inline(always)]
    pub fn permit(mut self, permit: Permit) -> Self {
        self.generation = Some(permit.generation);
        self.probe = permit.probe;
        self.unenforced = permit.shadow_refused;
        self
    }

    /// With the call's `error.type`.
    pub fn error_type(mut self, error_type: &'a str) -> Self {
        self.error_type = Some(error_type);
        self
    }

    /// With the tool's retry hint.
    pub fn retry_after(mut self, retry_after: Duration) -> Self {
        self.retry_after = Some(retry_after);
        self
    }
}
