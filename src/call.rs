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

    /// The same decision, its permit handed out by the breaker tagged `tag`.
    #[inline]
    pub(crate) fn tagged(self, tag: u64) -> Self {
        match self {
            Self::Allowed(p) => Self::Allowed(p.tagged(tag)),
            Self::Probe(p) => Self::Probe(p.tagged(tag)),
            refused => refused,
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

/// Proof of admission: the breaker a call was admitted by, and the generation (episode) it was
/// admitted in.
///
/// Results recorded with a permit only move the breaker when they still describe its current
/// episode: a success from an older generation is ignored, and a failure from an older
/// generation can only re-arm an open breaker's cooldown. A permit belongs to its tool: one
/// recorded under another tool's name is refused ([`NotRecorded::ForeignPermit`]) and, if it
/// is a probe, given back to its own tool. A permit is a small `Copy` value (one word); the
/// tool name is passed again when recording.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Permit(u64);

/// Bits of a permit's generation (as wide as the breaker word's generation field).
pub(crate) const PERMIT_GENERATION_BITS: u32 = 22;
/// Bits of a permit's tag: which breaker handed it out (see [`Permit`]'s layout).
pub(crate) const PERMIT_TAG_BITS: u32 = 40;
const GENERATION_MASK: u64 = (1 << PERMIT_GENERATION_BITS) - 1;
const KEY_MASK: u64 = (1 << (PERMIT_GENERATION_BITS + PERMIT_TAG_BITS)) - 1;
const PROBE: u64 = 1 << 62;
const SHADOW_REFUSED: u64 = 1 << 63;
/// The tag of the shared breaker of the names past the cap (no tool's tag is zero).
pub(crate) const OVERFLOW_TAG: u64 = 0;

// The layout of a permit, in one `u64` (so that `GateDecision` stays two words):
//
//   63       62    61                      22 21              0
//  ┌────────┬─────┬──────────────────────────┬─────────────────┐
//  │ shadow │probe│ tag: 40 bits             │ generation: 22  │
//  └────────┴─────┴──────────────────────────┴─────────────────┘
//
// The low 62 bits are the permit's *key*. A closed breaker word holds its tool's tag where an
// open one holds its deadline, so the key of an ordinary admission is the closed word shifted
// right by its two state bits: the gate's fast path makes it with one shift, and the record's
// fast path checks generation and tool at once with one comparison (`Breaker::success_if_closed`).
const _: () = assert!(PERMIT_GENERATION_BITS + PERMIT_TAG_BITS == 62);

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("generation", &self.generation())
            .field("probe", &self.is_probe())
            .field("shadow_refused", &self.is_shadow_refused())
            .finish_non_exhaustive()
    }
}

impl Permit {
    /// An ordinary admission in `generation` (no tag: the breaker adds its own).
    #[inline]
    pub(crate) const fn admitted(generation: u32) -> Self {
        Self(generation as u64 & GENERATION_MASK)
    }

    /// An ordinary admission with its whole key (generation and tag), as a closed breaker word
    /// holds it.
    #[inline(always)]
    pub(crate) const fn from_key(key: u64) -> Self {
        Self(key & KEY_MASK)
    }

    /// The single probe of `generation`.
    #[inline]
    pub(crate) const fn probe(generation: u32) -> Self {
        Self(Self::admitted(generation).0 | PROBE)
    }

    /// A call the breaker refused in `generation` and a control (shadow mode, force-closed) let
    /// through.
    #[inline]
    pub(crate) const fn shadow_refused(generation: u32) -> Self {
        Self(Self::admitted(generation).0 | SHADOW_REFUSED)
    }

    /// The same permit, handed out by the breaker tagged `tag`.
    #[inline]
    pub(crate) const fn tagged(self, tag: u64) -> Self {
        Self(
            (self.0 & !(KEY_MASK & !GENERATION_MASK))
                | ((tag << PERMIT_GENERATION_BITS) & KEY_MASK),
        )
    }

    /// Generation and tag: what a record compares with the breaker it lands on.
    #[inline(always)]
    pub(crate) const fn key(self) -> u64 {
        self.0 & KEY_MASK
    }

    /// The Closed breaker word this permit was handed out from (as an ordinary admission):
    /// the key above the word's two state bits (Closed is 0), the flags shifted out.
    #[inline(always)]
    pub(crate) const fn closed_word(self) -> u64 {
        self.0 << 2
    }

    /// The tag of the breaker that handed the permit out.
    #[inline]
    pub(crate) const fn tag(self) -> u64 {
        self.key() >> PERMIT_GENERATION_BITS
    }

    /// The breaker generation the call was admitted in.
    pub fn generation(&self) -> u32 {
        (self.0 & GENERATION_MASK) as u32
    }

    /// Whether this permit is the breaker's single probe.
    pub fn is_probe(&self) -> bool {
        self.0 & PROBE != 0
    }

    /// Whether the breaker would have refused this call and a control let it through: shadow
    /// mode, or [force-closed](crate::ToolHealthRegistry::force_closed). Its result goes to the
    /// stats only, never to the breaker, so the breaker moves exactly as it would if the
    /// refusal had been enforced.
    pub fn is_shadow_refused(&self) -> bool {
        self.0 & SHADOW_REFUSED != 0
    }
}

/// Why a record changed nothing: the result was refused (see [`Recorded::not_recorded`]).
///
/// [`Recorded::not_recorded`]: crate::Recorded::not_recorded
// Two bytes wide: see `Recorded`'s layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
#[repr(u16)]
pub enum NotRecorded {
    /// The tool name is longer than the registry's
    /// [`max_name_len`](crate::ToolHealthRegistry::max_name_len): no tool by that name can be
    /// tracked, and nothing was counted for it (see
    /// [`ToolHealthRegistry::validate_name`](crate::ToolHealthRegistry::validate_name)).
    InvalidName,
    /// The permit was handed out for another tool: the result was not recorded (neither tool's
    /// stats or breaker took it), and a probe permit was given back to its own tool, so that
    /// tool's next call may probe.
    ForeignPermit,
}

impl NotRecorded {
    /// `invalid_name` or `foreign_permit`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::InvalidName => "invalid_name",
            Self::ForeignPermit => "foreign_permit",
        }
    }
}

impl fmt::Display for NotRecorded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::InvalidName => "not recorded: the tool name is longer than the registry allows",
            Self::ForeignPermit => "not recorded: the permit was handed out for another tool",
        })
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
    /// The permit, when recorded through one (its generation is also in `generation`).
    pub(crate) permit: Option<Permit>,
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
            permit: None,
        }
    }

    /// With the permit the call was admitted with.
    #[inline(always)]
    pub fn permit(mut self, permit: Permit) -> Self {
        self.generation = Some(permit.generation());
        self.permit = Some(permit);
        self
    }

    /// The same report without its permit (as recorded by name).
    pub(crate) fn without_permit(mut self) -> Self {
        self.generation = None;
        self.permit = None;
        self
    }

    /// The permit was the probe.
    pub(crate) fn probe(&self) -> bool {
        self.permit.is_some_and(|p| p.is_probe())
    }

    /// The permit was for a call the breaker refused and a control let through.
    pub(crate) fn unenforced(&self) -> bool {
        self.permit.is_some_and(|p| p.is_shadow_refused())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gates_values_stay_small() {
        // Two words: the gate's answer is returned in registers (`BENCHMARKS.md`).
        assert_eq!(std::mem::size_of::<Permit>(), 8);
        assert_eq!(std::mem::size_of::<GateDecision>(), 16);
        assert_eq!(std::mem::size_of::<Option<NotRecorded>>(), 2);
    }

    #[test]
    fn a_permit_packs_generation_tag_and_kind() {
        let p = Permit::probe(0x3F_FFFF).tagged(0xFFFF_FFFF);
        assert_eq!(p.generation(), 0x3F_FFFF);
        assert_eq!(p.tag(), 0xFFFF_FFFF);
        assert!(p.is_probe() && !p.is_shadow_refused());
        let s = Permit::shadow_refused(7).tagged(9);
        assert_eq!((s.generation(), s.tag()), (7, 9));
        assert!(s.is_shadow_refused() && !s.is_probe());
        // Re-tagging replaces the tag, keeps the rest; the key drops the kind.
        let t = s.tagged(3);
        assert_eq!(
            (t.generation(), t.tag(), t.is_shadow_refused()),
            (7, 3, true)
        );
        assert_eq!(t.key(), 7 | 3 << PERMIT_GENERATION_BITS);
        assert_eq!(Permit::from_key(t.key()), Permit::admitted(7).tagged(3));
        // The closed word a permit came from: the key above two zero state bits.
        assert_eq!(t.closed_word(), t.key() << 2);
        let g = GateDecision::Probe(Permit::probe(1)).tagged(5);
        assert_eq!(g.permit().unwrap().tag(), 5);
        let refused = GateDecision::Refused {
            retry_after: Duration::MAX,
        };
        assert_eq!(refused.tagged(5), refused);
    }
}
