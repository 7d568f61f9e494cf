//! The circuit breaker of one tool: one atomic word, a pure transition function, a CAS loop.
//!
//! | file | owns |
//! |---|---|
//! | `word.rs` | the word's bit layout: state, generation, deadline |
//! | `step.rs` | the pure transition function and its unit tests |
//! | `cell.rs` | the breaker in memory: the word in an `AtomicU64` and the one CAS loop |
//! | `loom_model.rs` | exhaustive interleavings of the CAS protocol (loom) |
//!
//! # States
//!
//! * **Closed**: calls are allowed; each failure adds one to the consecutive-failure counter and
//!   the breaker trips to Open when the counter reaches `failure_threshold` (0 disables
//!   tripping; the counter still counts). Only an accepted success resets the counter.
//! * **Open**: calls are refused until the cooldown (`recovery_duration`, counted from the last
//!   failure) has elapsed — elapsed time equal to the cooldown counts as elapsed. The first gate
//!   call after that is granted the single probe and the breaker becomes HalfOpen.
//! * **HalfOpen**: exactly one probe is in flight and every other gate call is refused. Probe
//!   success → Closed (counter reset); probe failure → Open with a fresh cooldown.
//!
//! A probe has a **lease** (`probe_timeout`, 0 disables it). From the instant the lease expires
//! the breaker *is* Open with its cooldown counted from the lease's end; reads see this with no
//! call needed, because every read evaluates the word against the clock.
//!
//! Stale results: a success while Open is ignored (counter untouched); a success after the
//! lease expired does not close; a failure while Open or HalfOpen re-arms the cooldown from now.
//! Results recorded through a permit carry the permit's generation: a stale success is ignored,
//! and a stale failure can only re-arm an Open breaker's cooldown ("fresh bad news"), never
//! trip a newer Closed episode nor fail a newer probe.
//!
//! # Time
//!
//! Instants and durations are ticks: milliseconds on the registry's clock (instants rounded
//! down, durations rounded up), so timing has 1 ms resolution. The consecutive-failure counter
//! lives in its own `AtomicU64` beside the word: the word alone decides every transition and
//! the counter is only read to decide a trip, after the failure's own increment (so concurrent
//! failures can never both miss the threshold).
//!
//! # Orderings
//!
//! The state machine lives in one location, so its modification order alone makes it correct.
//! Loads use `Acquire` and successful CAS `AcqRel` so that a thread observing a transition also
//! observes the stats recorded before it (a snapshot that reads the state first). On x86-64 these
//! cost the same as `Relaxed`. The consecutive-failure counter's increment and loads are
//! `SeqCst`: the registry's idle eviction reads it in a Dekker handshake with the record path
//! (see `ToolHealthRegistry::touch`); its reset and the transition tallies are `Relaxed`. Under a
//! race between a success resetting the counter and a concurrent failure tripping the breaker,
//! the counter may read lower than the failures it "should" hold; the state is always right.
//!
//! # Model checking
//!
//! `RUSTFLAGS="--cfg tool_health_loom" cargo test --profile loom -p tool-health --lib loom_model` explores every
//! interleaving of 2–3 threads over the word (see `loom_model.rs`).

mod cell;
#[cfg(all(test, tool_health_loom))]
mod loom_model;
mod step;
mod word;

use std::fmt;

use crate::call::NotRecorded;

pub(crate) use cell::Breaker;
pub(crate) use step::Effective;
pub(crate) use word::Word;

/// The state of a tool's circuit breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BreakerState {
    /// Calls flow; failures are counted.
    Closed,
    /// Calls are refused until the cooldown has elapsed.
    Open,
    /// One probe call is in flight; every other call is refused.
    HalfOpen,
}

impl BreakerState {
    /// The lowercase name: `closed`, `open` or `half_open`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Open => "open",
            Self::HalfOpen => "half_open",
        }
    }

    /// All states, in a fixed order.
    pub const ALL: [BreakerState; 3] = [Self::Closed, Self::Open, Self::HalfOpen];
}

impl fmt::Display for BreakerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a breaker changed state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransitionReason {
    /// Closed → Open: the consecutive failures reached the threshold.
    Tripped,
    /// Open → HalfOpen: the cooldown elapsed and a caller was granted the probe.
    ProbeGranted,
    /// HalfOpen → Closed: the probe succeeded.
    ProbeSucceeded,
    /// HalfOpen → Open: the probe failed.
    ProbeFailed,
    /// HalfOpen → Open: the probe did not report within its lease.
    LeaseExpired,
    /// HalfOpen → Open: the probe was cancelled and gave its slot back; the next call may probe.
    ProbeReleased,
    /// Closed or HalfOpen → Open: a coordinator applied a decision made elsewhere — another
    /// replica's breaker tripped (see `Coordination::open_remotely`). A probe in flight
    /// here is stale from then on.
    RemoteOpen,
    /// Open or HalfOpen → Closed: a coordinator applied a decision made elsewhere — another
    /// replica's probe succeeded (see `Coordination::close_remotely`).
    RemoteClose,
}

impl TransitionReason {
    /// A short human-readable explanation.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Tripped => "consecutive failures reached the threshold",
            Self::ProbeGranted => "cooldown elapsed, probe granted",
            Self::ProbeSucceeded => "probe succeeded",
            Self::ProbeFailed => "probe failed",
            Self::LeaseExpired => "probe lease expired",
            Self::ProbeReleased => "probe cancelled and released",
            Self::RemoteOpen => "opened by another replica",
            Self::RemoteClose => "closed by another replica's probe",
        }
    }
}

impl fmt::Display for TransitionReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One state change of a breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Transition {
    /// The state before.
    pub from: BreakerState,
    /// The state after.
    pub to: BreakerState,
    /// Why.
    pub reason: TransitionReason,
}

impl Transition {
    /// Index of the (from, to) pair in [`Transition::PAIRS`].
    pub(crate) fn pair_index(&self) -> usize {
        use BreakerState::*;
        match (self.from, self.to) {
            (Closed, Open) => 0,
            (Open, HalfOpen) => 1,
            (HalfOpen, Closed) => 2,
            (HalfOpen, Open) => 3,
            // (Open, Closed): only a coordinator's remote close takes it. The two remaining
            // pairs are no edge at all (a state never "changes" to itself).
            _ => 4,
        }
    }

    /// Every edge of the state machine: (closed, open), (open, half_open), (half_open, closed),
    /// (half_open, open), and (open, closed) — the edge only a coordinator takes, when another
    /// replica's probe closed the breaker while this one was still open
    /// ([`TransitionReason::RemoteClose`]).
    pub const PAIRS: [(BreakerState, BreakerState); 5] = [
        (BreakerState::Closed, BreakerState::Open),
        (BreakerState::Open, BreakerState::HalfOpen),
        (BreakerState::HalfOpen, BreakerState::Closed),
        (BreakerState::HalfOpen, BreakerState::Open),
        (BreakerState::Open, BreakerState::Closed),
    ];
}

/// What one result (or gate call) did to a breaker: at most a lease expiry it noticed and one
/// transition — or, when the result was refused, why ([`not_recorded`](Self::not_recorded)).
// Layout and `Default` are chosen for the record's fast path, which answers "nothing
// happened" for every success on a Closed breaker: eight bytes in the fields' order (two
// 3-byte transitions, the 2-byte reason), and `default()` one constant of the whole struct
// (`EMPTY`), not three field stores — the optimiser then keeps the answer in one register, and
// the fast path costs what it cost before `not_recorded` existed (`BENCHMARKS.md`, issue 25;
// a field-wise default, or a 7-byte layout, cost it 5 to 7 instructions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
#[repr(C)]
pub struct Recorded {
    /// A probe lease that had expired before this result, written by it (half_open → open).
    pub expired: Option<Transition>,
    /// The transition this result caused.
    pub transition: Option<Transition>,
    /// Why the result was not recorded (nothing counted, no breaker moved); `None` when it was.
    pub not_recorded: Option<NotRecorded>,
}

impl Default for Recorded {
    #[inline(always)]
    fn default() -> Self {
        Self::EMPTY
    }
}

impl Recorded {
    const EMPTY: Recorded = Recorded {
        expired: None,
        transition: None,
        not_recorded: None,
    };

    /// Every transition, in order.
    pub fn transitions(&self) -> impl Iterator<Item = Transition> + '_ {
        self.expired.iter().chain(self.transition.iter()).copied()
    }

    /// Whether nothing changed state.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.expired.is_none() && self.transition.is_none()
    }

    /// Whether the result was taken (counted in the tool's stats); `false` when it was refused
    /// ([`not_recorded`](Self::not_recorded) says why).
    pub fn is_recorded(&self) -> bool {
        self.not_recorded.is_none()
    }

    /// A result refused for `why`.
    pub(crate) fn refused(why: NotRecorded) -> Self {
        Self {
            not_recorded: Some(why),
            ..Self::default()
        }
    }
}
