//! The circuit breaker of one tool: one atomic word, a pure transition function, a CAS loop.
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
//! # The word
//!
//! ```text
//!  63                                    24 23                     2 1   0
//! ┌────────────────────────────────────────┬────────────────────────┬─────┐
//! │ deadline: 40 bits, milliseconds         │ generation: 22 bits    │state│
//! └────────────────────────────────────────┴────────────────────────┴─────┘
//! state      0 Closed, 1 Open, 2 HalfOpen
//! generation grows (wrapping at 2^22) on every transition made by an event: a trip, a probe
//!            grant, a probe's success or failure. A lease expiry keeps the probe's generation,
//!            so whether anyone has yet written the expiry into the word changes nothing.
//! deadline   Open: the instant the next probe may be granted (last failure + cooldown).
//!            HalfOpen: the instant the probe lease expires. All ones = never.
//!            Closed: 0.
//! ```
//!
//! Instants are milliseconds on the registry's clock (rounded down) and durations are whole
//! milliseconds (rounded up), so timing has 1 ms resolution and 40 bits cover about 34 years of
//! clock time; a deadline beyond that is "never". The consecutive-failure counter lives in its own
//! `AtomicU64` beside the word: the word alone decides every transition and the counter is only
//! read to decide a trip, after the failure's own increment (so concurrent failures can never
//! both miss the threshold).
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
//! `RUSTFLAGS="--cfg tool_health_loom" cargo test --release --lib loom_model` explores every
//! interleaving of 2–3 threads over the word: one probe per episode, a trip counted once, a
//! stale result never closing or re-opening a newer episode, a late success after lease expiry
//! never closing, generations only growing, the oracle agreeing with the gate.

// Loom's atomics only in the library's own test build: the crate is also built as a normal
// dependency (its dev-dependency on itself), where loom is not available.
#[cfg(all(test, tool_health_loom))]
use loom::sync::atomic::AtomicU64;
use std::fmt;
#[cfg(not(all(test, tool_health_loom)))]
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::{ArcSwap, ArcSwapOption};

use crate::clock::duration_to_nanos;
use crate::policy::{RateWindow, ToolPolicy, TripPolicy};

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
            _ => 3, // (HalfOpen, Open): the only other edge of the state machine
        }
    }

    /// Every edge of the state machine: (closed, open), (open, half_open), (half_open, closed),
    /// (half_open, open).
    pub const PAIRS: [(BreakerState, BreakerState); 4] = [
        (BreakerState::Closed, BreakerState::Open),
        (BreakerState::Open, BreakerState::HalfOpen),
        (BreakerState::HalfOpen, BreakerState::Closed),
        (BreakerState::HalfOpen, BreakerState::Open),
    ];
}

// ---------------------------------------------------------------------------------------------
// The word
// ---------------------------------------------------------------------------------------------

const STATE_BITS: u32 = 2;
const GEN_BITS: u32 = 22;
const TIME_SHIFT: u32 = STATE_BITS + GEN_BITS;
const STATE_MASK: u64 = (1 << STATE_BITS) - 1;
/// Generations wrap at this mask.
pub(crate) const GEN_MASK: u32 = (1 << GEN_BITS) - 1;
/// The deadline value meaning "never"; also one past the last representable instant.
pub(crate) const NEVER: u64 = (1 << (64 - TIME_SHIFT)) - 1;

const CLOSED: u64 = 0;
const OPEN: u64 = 1;
const HALF_OPEN: u64 = 2;

const NANOS_PER_TICK: u64 = 1_000_000;

/// A clock reading in breaker ticks (milliseconds, rounded down, below [`NEVER`]).
pub(crate) fn ticks_of_instant(now: Duration) -> u64 {
    (duration_to_nanos(now) / NANOS_PER_TICK).min(NEVER - 1)
}

/// A configured duration in ticks (rounded up, [`NEVER`] when too long to represent).
pub(crate) fn ticks_of_duration(d: Duration) -> u64 {
    duration_to_nanos(d).div_ceil(NANOS_PER_TICK).min(NEVER)
}

fn duration_of_ticks(t: u64) -> Duration {
    if t >= NEVER {
        Duration::MAX
    } else {
        Duration::from_millis(t)
    }
}

/// `t + d`, or [`NEVER`] when either is never or the sum does not fit.
fn deadline_after(t: u64, d: u64) -> u64 {
    if t >= NEVER || d >= NEVER {
        NEVER
    } else {
        (t + d).min(NEVER)
    }
}

/// A decoded breaker word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Word {
    state: u64,
    generation: u32,
    deadline: u64,
}

impl Word {
    pub(crate) const FRESH: Word = Word {
        state: CLOSED,
        generation: 0,
        deadline: 0,
    };

    pub(crate) fn decode(raw: u64) -> Self {
        Self {
            state: raw & STATE_MASK,
            generation: ((raw >> STATE_BITS) as u32) & GEN_MASK,
            deadline: raw >> TIME_SHIFT,
        }
    }

    pub(crate) fn encode(self) -> u64 {
        (self.deadline.min(NEVER) << TIME_SHIFT)
            | (u64::from(self.generation & GEN_MASK) << STATE_BITS)
            | (self.state & STATE_MASK)
    }

    pub(crate) fn generation(self) -> u32 {
        self.generation
    }

    fn closed(generation: u32) -> Self {
        Self {
            state: CLOSED,
            generation: generation & GEN_MASK,
            deadline: 0,
        }
    }

    fn open(generation: u32, ready_at: u64) -> Self {
        Self {
            state: OPEN,
            generation: generation & GEN_MASK,
            deadline: ready_at,
        }
    }

    fn half_open(generation: u32, lease_end: u64) -> Self {
        Self {
            state: HALF_OPEN,
            generation: generation & GEN_MASK,
            deadline: lease_end,
        }
    }
}

fn next_gen(g: u32) -> u32 {
    g.wrapping_add(1) & GEN_MASK
}

/// The durations one step works with, in ticks, computed from the tool's policy just before the
/// step (so the step itself stays a pure function of its inputs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timing {
    /// Cooldown after an expired probe lease, in ticks ([`NEVER`]: never recovers).
    pub(crate) recovery: u64,
    /// Cooldown of an opening this step makes (backoff and jitter included).
    pub(crate) open_for: u64,
    /// Probe lease in ticks; 0 disables the lease.
    pub(crate) lease: u64,
}

impl Timing {
    #[cfg(test)]
    pub(crate) fn new(recovery: Duration, lease: Duration) -> Self {
        let recovery = ticks_of_duration(recovery);
        Self {
            recovery,
            open_for: recovery,
            lease: ticks_of_duration(lease),
        }
    }
}

/// What the tool's policy concluded about a failure before the step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FailureFacts {
    /// Whether this failure trips a closed breaker (threshold or failure-rate reached).
    pub(crate) trips: bool,
    /// A retry hint from the tool: an opening lasts at least until this instant (0: none).
    pub(crate) not_before: u64,
}

/// The state a word is in at an instant, with every expired lease already applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Effective {
    Closed,
    /// Refusing until `ready_at`; `expired_lease` when this is a HalfOpen word whose lease ran out.
    Open {
        ready_at: u64,
        expired_lease: bool,
    },
    /// A live probe; the lease ends at `lease_end` ([`NEVER`] without a lease).
    HalfOpen {
        lease_end: u64,
    },
}

impl Effective {
    pub(crate) fn state(self) -> BreakerState {
        match self {
            Self::Closed => BreakerState::Closed,
            Self::Open { .. } => BreakerState::Open,
            Self::HalfOpen { .. } => BreakerState::HalfOpen,
        }
    }
}

/// Evaluates a word at `now`: pure, so reads and writes agree at every instant.
pub(crate) fn effective(w: Word, now: u64, t: &Timing) -> Effective {
    match w.state {
        OPEN => Effective::Open {
            ready_at: w.deadline,
            expired_lease: false,
        },
        HALF_OPEN if w.deadline != NEVER && now >= w.deadline => Effective::Open {
            ready_at: deadline_after(w.deadline, t.recovery),
            expired_lease: true,
        },
        HALF_OPEN => Effective::HalfOpen {
            lease_end: w.deadline,
        },
        _ => Effective::Closed,
    }
}

/// What happened to a breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// A gate call (`allow_request` / `check`).
    Acquire,
    /// A successful call; `Some(generation)` when recorded through a permit.
    Success(Option<u32>),
    /// A failed call, with what the policy concluded about it.
    Failure(Option<u32>, FailureFacts),
    /// A probe permit given back without a result (a cancelled call).
    Release(u32),
}

/// The gate's verdict for [`Event::Acquire`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Allowed {
        generation: u32,
    },
    Probe {
        generation: u32,
    },
    Refused {
        retry_after: Duration,
    },
    /// Refused by the breaker, let through by shadow mode (decided by the registry).
    ShadowRefused {
        generation: u32,
    },
    /// Not a gate event.
    None,
}

/// The result of one pure step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Step {
    /// The word to install (equal to the old one when nothing changes).
    pub(crate) next: Word,
    pub(crate) verdict: Verdict,
    /// Set when the step applies an expired lease (HalfOpen → Open, [`TransitionReason::LeaseExpired`]).
    pub(crate) expired_lease: bool,
    /// The event's own transition, if any.
    pub(crate) transition: Option<Transition>,
    /// The event was accepted as a success that resets the consecutive-failure counter.
    pub(crate) reset_counter: bool,
    /// The event is a failure the breaker accepts (its count stands).
    pub(crate) counts_failure: bool,
}

fn transition(
    from: BreakerState,
    to: BreakerState,
    reason: TransitionReason,
) -> Option<Transition> {
    Some(Transition { from, to, reason })
}

/// When an opening made at `now` ends: the cooldown, or the tool's retry hint if later.
fn reopen_at(now: u64, t: &Timing, facts: FailureFacts) -> u64 {
    deadline_after(now, t.open_for).max(facts.not_before.min(NEVER))
}

/// The breaker's transition function: old word, event, now, timing → new word and effects.
pub(crate) fn step(w: Word, ev: Event, now: u64, t: &Timing) -> Step {
    use BreakerState as S;
    let eff = effective(w, now, t);
    let expired_lease = matches!(
        eff,
        Effective::Open {
            expired_lease: true,
            ..
        }
    );
    // The word with the expiry written in (same generation): where a step changes nothing
    // else, installing it is optional; we install it so later steps start from the truth.
    let settled = match eff {
        Effective::Open { ready_at, .. } => Word::open(w.generation, ready_at),
        _ => w,
    };
    let mut out = Step {
        next: settled,
        verdict: Verdict::None,
        expired_lease,
        transition: None,
        reset_counter: false,
        counts_failure: false,
    };
    let stale = |g: Option<u32>| matches!(g, Some(g) if g != w.generation);

    match (ev, eff) {
        (Event::Acquire, Effective::Closed) => {
            out.verdict = Verdict::Allowed {
                generation: w.generation,
            };
        }
        (Event::Acquire, Effective::Open { ready_at, .. }) => {
            if ready_at != NEVER && now >= ready_at {
                let generation = next_gen(w.generation);
                let lease_end = if t.lease == 0 {
                    NEVER
                } else {
                    deadline_after(now, t.lease)
                };
                out.next = Word::half_open(generation, lease_end);
                out.verdict = Verdict::Probe { generation };
                out.transition = transition(S::Open, S::HalfOpen, TransitionReason::ProbeGranted);
            } else {
                let wait = if ready_at == NEVER {
                    NEVER
                } else {
                    ready_at.saturating_sub(now)
                };
                out.verdict = Verdict::Refused {
                    retry_after: duration_of_ticks(wait),
                };
            }
        }
        (Event::Acquire, Effective::HalfOpen { lease_end }) => {
            let next_probe = deadline_after(lease_end, t.recovery);
            let retry = if lease_end == NEVER {
                t.recovery
            } else if next_probe == NEVER {
                NEVER
            } else {
                next_probe.saturating_sub(now)
            };
            out.verdict = Verdict::Refused {
                retry_after: duration_of_ticks(retry),
            };
        }

        (Event::Success(g), _) if stale(g) => {}
        (Event::Success(_), Effective::Closed) => out.reset_counter = true,
        (Event::Success(_), Effective::Open { .. }) => {} // pre-trip news, or a late probe
        (Event::Success(_), Effective::HalfOpen { .. }) => {
            out.next = Word::closed(next_gen(w.generation));
            out.reset_counter = true;
            out.transition = transition(S::HalfOpen, S::Closed, TransitionReason::ProbeSucceeded);
        }

        (Event::Failure(_, facts), Effective::Open { .. }) => {
            // Fresh bad news, stale or not: the cooldown restarts from now.
            out.next = Word::open(w.generation, reopen_at(now, t, facts));
            out.counts_failure = true;
        }
        (Event::Failure(g, _), _) if stale(g) => {}
        (Event::Failure(_, facts), Effective::Closed) => {
            out.counts_failure = true;
            if facts.trips {
                out.next = Word::open(next_gen(w.generation), reopen_at(now, t, facts));
                out.transition = transition(S::Closed, S::Open, TransitionReason::Tripped);
            }
        }
        (Event::Failure(_, facts), Effective::HalfOpen { .. }) => {
            out.counts_failure = true;
            out.next = Word::open(next_gen(w.generation), reopen_at(now, t, facts));
            out.transition = transition(S::HalfOpen, S::Open, TransitionReason::ProbeFailed);
        }

        (Event::Release(g), Effective::HalfOpen { .. }) if g == w.generation => {
            out.next = Word::open(next_gen(w.generation), now);
            out.transition = transition(S::HalfOpen, S::Open, TransitionReason::ProbeReleased);
        }
        (Event::Release(_), _) => {}
    }
    out
}

/// What the breaker reports after an event was applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Applied {
    pub(crate) verdict: Verdict,
    /// A lease expiry this event wrote into the word (it happened before the event).
    pub(crate) expired: Option<Transition>,
    pub(crate) transition: Option<Transition>,
    /// The word the event was applied to.
    from_word: Word,
}

impl Applied {
    fn verdict(verdict: Verdict) -> Self {
        Self {
            verdict,
            expired: None,
            transition: None,
            from_word: Word::FRESH,
        }
    }

    /// Runs `f` with the word the event met when the event opened the breaker.
    fn with_level(self, f: impl FnOnce(Word)) -> Self {
        if matches!(self.transition, Some(t) if t.to == BreakerState::Open) {
            f(self.from_word);
        }
        self
    }
}

/// One tool's breaker: the word, the consecutive-failure counter, per-edge tallies, and the
/// policy that turns events into timings and trip decisions.
#[derive(Debug)]
pub(crate) struct Breaker {
    word: AtomicU64,
    consecutive: AtomicU64,
    transitions: [AtomicU64; 4],
    /// Three rarely written values in one word (memory per tool is a budget): bit 63, a
    /// failure-rate window is present (mirrors `window.is_some()`, so the success fast path pays
    /// one relaxed load); bits 56–62, the backoff level of the current (or last) open episode;
    /// bits 0–55, when the breaker last closed after a probe, in ticks ([`NEVER`]: not yet).
    aux: AtomicU64,
    policy: ArcSwap<ToolPolicy>,
    /// Failure-rate window, present while the policy is [`TripPolicy::FailureRate`].
    window: ArcSwapOption<RateWindow>,
}

const AUX_WINDOW: u64 = 1 << 63;
const AUX_LEVEL_SHIFT: u32 = 56;
const AUX_LEVEL_MAX: u64 = 0x7F;
const AUX_CLOSED_MASK: u64 = (1 << AUX_LEVEL_SHIFT) - 1;

impl Breaker {
    pub(crate) fn new(policy: Arc<ToolPolicy>) -> Self {
        let b = Self {
            word: AtomicU64::new(Word::FRESH.encode()),
            consecutive: AtomicU64::new(0),
            transitions: std::array::from_fn(|_| AtomicU64::new(0)),
            aux: AtomicU64::new(NEVER),
            policy: ArcSwap::new(Arc::clone(&policy)),
            window: ArcSwapOption::empty(),
        };
        b.set_policy(policy);
        b
    }

    /// Installs a policy on a live breaker; state and counters are kept.
    pub(crate) fn set_policy(&self, policy: Arc<ToolPolicy>) {
        match policy.trip {
            TripPolicy::FailureRate { window, .. } => {
                self.window.store(Some(Arc::new(RateWindow::new(window))));
                self.aux.fetch_or(AUX_WINDOW, Ordering::Release);
            }
            TripPolicy::ConsecutiveFailures => {
                self.aux.fetch_and(!AUX_WINDOW, Ordering::Release);
                self.window.store(None);
            }
        }
        self.policy.store(policy);
    }

    pub(crate) fn policy(&self) -> Arc<ToolPolicy> {
        self.policy.load_full()
    }

    #[inline(always)]
    fn has_window(&self, order: Ordering) -> bool {
        self.aux.load(order) & AUX_WINDOW != 0
    }

    /// Replaces the bits of `mask` in the aux word with `value` (which lies within `mask`).
    fn set_aux(&self, mask: u64, value: u64) {
        let _ = self
            .aux
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |a| {
                Some((a & !mask) | (value & mask))
            });
    }

    fn level(&self) -> u32 {
        ((self.aux.load(Ordering::Relaxed) >> AUX_LEVEL_SHIFT) & AUX_LEVEL_MAX) as u32
    }

    /// The timing of a step that makes no opening.
    fn timing(&self, p: &ToolPolicy) -> Timing {
        let recovery = p.recovery_ticks(self.level());
        Timing {
            recovery,
            open_for: recovery,
            lease: ticks_of_duration(p.breaker.probe_timeout),
        }
    }

    #[inline]
    pub(crate) fn load(&self) -> Word {
        Word::decode(self.word.load(Ordering::Acquire))
    }

    /// The state at `now` (expiry-aware), without writing anything.
    pub(crate) fn effective(&self, now: u64) -> Effective {
        let w = self.load();
        if w.state == CLOSED {
            return Effective::Closed;
        }
        effective(w, now, &self.timing(&self.policy.load()))
    }

    pub(crate) fn consecutive_failures(&self) -> u64 {
        self.consecutive.load(Ordering::SeqCst)
    }

    /// How many times each edge of [`Transition::PAIRS`] was taken.
    pub(crate) fn transition_counts(&self) -> [u64; 4] {
        std::array::from_fn(|i| self.transitions[i].load(Ordering::Relaxed))
    }

    /// The generation of a Closed breaker, `None` when it is not Closed: the gate's fast path
    /// (one load; [`Breaker::acquire`] decides everything else).
    #[inline]
    pub(crate) fn closed_generation(&self) -> Option<u32> {
        let w = self.load();
        (w.state == CLOSED).then_some(w.generation)
    }

    /// The refusal fast path: an Open breaker whose cooldown has not elapsed refuses and
    /// changes nothing — exactly what [`Breaker::acquire`] decides then, without evaluating the
    /// whole step. Answers the wait; `None` for every other case (not Open, or the cooldown has
    /// elapsed), which [`Breaker::acquire`] decides. `now` is read only for an Open breaker.
    #[inline(always)]
    pub(crate) fn refusal_while_open(&self, now: impl FnOnce() -> u64) -> Option<Duration> {
        let w = self.load();
        if w.state != OPEN {
            return None;
        }
        if w.deadline == NEVER {
            return Some(Duration::MAX);
        }
        let now = now();
        (now < w.deadline).then(|| duration_of_ticks(w.deadline - now))
    }

    /// The gate: may grant the probe. `now` is read lazily: a Closed breaker never asks the clock.
    #[inline]
    pub(crate) fn acquire(&self, now: impl FnOnce() -> u64) -> Applied {
        let w = self.load();
        if w.state == CLOSED {
            return Applied::verdict(Verdict::Allowed {
                generation: w.generation,
            });
        }
        let t = self.timing(&self.policy.load());
        self.apply(w, now(), |_| (Event::Acquire, t), |_| {})
    }

    /// What [`Breaker::acquire`] would answer at `now`, without changing anything.
    pub(crate) fn would_allow(&self, now: impl FnOnce() -> u64) -> bool {
        let w = self.load();
        if w.state == CLOSED {
            return true;
        }
        let t = self.timing(&self.policy.load());
        !matches!(
            step(w, Event::Acquire, now(), &t).verdict,
            Verdict::Refused { .. }
        )
    }

    /// Records a success for the breaker (`generation`: the permit's, when there is one).
    #[inline]
    pub(crate) fn on_success(&self, generation: Option<u32>, now: impl FnOnce() -> u64) -> Applied {
        if self.success_if_closed(generation) {
            return Applied::verdict(Verdict::None);
        }
        let w = self.load();
        let now = now();
        if self.has_window(Ordering::Acquire) {
            if let Some(window) = &*self.window.load() {
                window.add(now, true);
            }
        }
        let t = self.timing(&self.policy.load());
        self.apply(
            w,
            now,
            |_| (Event::Success(generation), t),
            |s| {
                if s.next.state == CLOSED && s.transition.is_some() {
                    self.set_aux(AUX_CLOSED_MASK, now.min(NEVER));
                }
            },
        )
    }

    /// The hot path of [`Breaker::on_success`], for callers that can return early: a success on
    /// a Closed breaker (of the permit's generation, if any) with no failure-rate window only
    /// resets the counter, and this does it and answers `true`. `false`: any other case, for
    /// [`Breaker::on_success`] to decide (it re-reads the word).
    #[inline(always)]
    pub(crate) fn success_if_closed(&self, generation: Option<u32>) -> bool {
        let w = self.load();
        if w.state == CLOSED
            && generation.is_none_or(|g| g == w.generation)
            && !self.has_window(Ordering::Relaxed)
        {
            if self.consecutive.load(Ordering::Relaxed) != 0 {
                self.consecutive.store(0, Ordering::Relaxed);
            }
            return true;
        }
        false
    }

    /// Records a failure for the breaker (`generation`: the permit's, when there is one;
    /// `not_before`: the tool's retry hint as an instant in ticks, 0 for none).
    pub(crate) fn on_failure(&self, generation: Option<u32>, now: u64, not_before: u64) -> Applied {
        let w = self.load();
        // Count first, then decide: concurrent failures see distinct counts, so exactly one of
        // them sees the threshold. A failure the breaker rejects (stale) takes its count back.
        // SeqCst: the registry's eviction handshake reads this counter to decide that a tool is
        // fresh (see `ToolHealthRegistry::touch`).
        let count = self
            .consecutive
            .fetch_add(1, Ordering::SeqCst)
            .saturating_add(1);
        let p = self.policy.load();
        let rate = match (p.trip, &*self.window.load()) {
            (
                TripPolicy::FailureRate {
                    ratio, min_calls, ..
                },
                Some(window),
            ) => {
                window.add(now, false);
                let (failures, calls) = window.counts(now);
                Some(TripPolicy::rate_trips(ratio, min_calls, failures, calls))
            }
            _ => None,
        };
        let threshold = u64::from(p.breaker.failure_threshold);
        let trips = rate.unwrap_or(threshold != 0 && count >= threshold);
        let level = self.level();
        let stable_after = p
            .backoff
            .as_ref()
            .map_or(0, |b| ticks_of_duration(b.stable_after));
        let closed_at = self.aux.load(Ordering::Relaxed) & AUX_CLOSED_MASK;
        // The backoff level an opening from this word would have.
        let opening_level = |w: Word| -> u32 {
            if p.backoff.is_none() {
                return 0;
            }
            match w.state {
                CLOSED if closed_at != NEVER && now.saturating_sub(closed_at) < stable_after => {
                    level.saturating_add(1)
                }
                CLOSED => 0,
                HALF_OPEN => level.saturating_add(1),
                _ => level,
            }
        };
        let facts = FailureFacts { trips, not_before };
        let base = self.timing(&p);
        self.apply(
            w,
            now,
            |w| {
                let t = Timing {
                    open_for: p.opening_ticks(opening_level(w)),
                    ..base
                };
                (Event::Failure(generation, facts), t)
            },
            |s| {
                if !s.counts_failure {
                    self.consecutive.fetch_sub(1, Ordering::Relaxed);
                }
            },
        )
        .with_level(|w| {
            let level = u64::from(opening_level(w)).min(AUX_LEVEL_MAX);
            self.set_aux(AUX_LEVEL_MAX << AUX_LEVEL_SHIFT, level << AUX_LEVEL_SHIFT);
        })
    }

    /// Gives a probe permit back without a result: the next gate call may probe at once.
    pub(crate) fn release(&self, generation: u32, now: u64) -> Applied {
        let t = self.timing(&self.policy.load());
        self.apply(
            self.load(),
            now,
            |_| (Event::Release(generation), t),
            |_| {},
        )
    }

    /// Back to fresh: closed, counters zero, backoff forgotten. The generation still grows, so
    /// permits handed out before the reset are stale afterwards.
    pub(crate) fn reset(&self) {
        let mut cur = self.word.load(Ordering::Acquire);
        loop {
            let fresh = Word::closed(next_gen(Word::decode(cur).generation)).encode();
            match self
                .word
                .compare_exchange_weak(cur, fresh, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => break,
                Err(actual) => cur = actual,
            }
        }
        self.consecutive.store(0, Ordering::Relaxed);
        self.set_aux(AUX_LEVEL_MAX << AUX_LEVEL_SHIFT | AUX_CLOSED_MASK, NEVER);
        if let Some(window) = &*self.window.load() {
            window.clear();
        }
    }

    /// The only concurrent code of the breaker: evaluate the pure step on the current word,
    /// install it with CAS, retry on a lost race. `make` builds the event and timing for a word
    /// (a failure's backoff depends on the state it meets); `done` runs once, after install.
    fn apply(
        &self,
        mut w: Word,
        now: u64,
        make: impl Fn(Word) -> (Event, Timing),
        done: impl FnOnce(&Step),
    ) -> Applied {
        loop {
            let (ev, t) = make(w);
            let s = step(w, ev, now, &t);
            let installed = s.next == w
                || self
                    .word
                    .compare_exchange_weak(
                        w.encode(),
                        s.next.encode(),
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    )
                    .map_err(|actual| w = Word::decode(actual))
                    .is_ok();
            if !installed {
                continue;
            }
            if s.reset_counter {
                self.consecutive.store(0, Ordering::Relaxed);
            }
            done(&s);
            let expired = (s.expired_lease && s.next != w).then_some(Transition {
                from: BreakerState::HalfOpen,
                to: BreakerState::Open,
                reason: TransitionReason::LeaseExpired,
            });
            for t in expired.iter().chain(s.transition.iter()) {
                self.transitions[t.pair_index()].fetch_add(1, Ordering::Relaxed);
            }
            return Applied {
                verdict: s.verdict,
                expired,
                transition: s.transition,
                from_word: w,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use BreakerState::*;

    const T: Timing = Timing {
        recovery: 30_000,
        open_for: 30_000,
        lease: 10_000,
    };

    fn fail(generation: Option<u32>, trips: bool) -> Event {
        Event::Failure(
            generation,
            FailureFacts {
                trips,
                not_before: 0,
            },
        )
    }

    fn run(w: Word, ev: Event, now: u64) -> Step {
        step(w, ev, now, &T)
    }

    #[test]
    fn word_roundtrips_every_field() {
        for w in [
            Word::FRESH,
            Word::open(GEN_MASK, NEVER),
            Word::half_open(12345, NEVER - 1),
            Word::closed(7),
        ] {
            assert_eq!(Word::decode(w.encode()), w);
        }
        assert_eq!(next_gen(GEN_MASK), 0, "generations wrap inside their field");
    }

    #[test]
    fn closed_trips_at_the_threshold() {
        let w = Word::FRESH;
        assert_eq!(run(w, fail(None, false), 5).next, w);
        let s = run(w, fail(None, true), 5);
        assert_eq!(s.next, Word::open(1, 30_005));
        assert_eq!(s.transition.map(|t| (t.from, t.to)), Some((Closed, Open)));
    }

    #[test]
    fn open_refuses_until_the_cooldown_inclusive() {
        let w = Word::open(1, 30_000);
        assert_eq!(
            run(w, Event::Acquire, 29_999).verdict,
            Verdict::Refused {
                retry_after: Duration::from_millis(1)
            }
        );
        let s = run(w, Event::Acquire, 30_000);
        assert_eq!(s.verdict, Verdict::Probe { generation: 2 });
        assert_eq!(s.next, Word::half_open(2, 40_000));
    }

    #[test]
    fn lease_expiry_is_inclusive_and_rearms_from_the_lease_end() {
        let w = Word::half_open(2, 40_000);
        assert_eq!(
            effective(w, 39_999, &T),
            Effective::HalfOpen { lease_end: 40_000 }
        );
        assert_eq!(
            effective(w, 40_000, &T),
            Effective::Open {
                ready_at: 70_000,
                expired_lease: true
            }
        );
        // A late success does not close; the expiry is written with the same generation.
        let s = run(w, Event::Success(Some(2)), 45_000);
        assert_eq!(s.next, Word::open(2, 70_000));
        assert!(s.expired_lease && s.transition.is_none());
        // The next probe comes at lease end + recovery.
        assert!(matches!(
            run(w, Event::Acquire, 69_999).verdict,
            Verdict::Refused { .. }
        ));
        assert_eq!(
            run(w, Event::Acquire, 70_000).verdict,
            Verdict::Probe { generation: 3 }
        );
    }

    #[test]
    fn stale_results_never_touch_a_newer_episode() {
        // Probe of generation 4 in flight; a result from generation 2 arrives.
        let w = Word::half_open(4, 50_000);
        assert_eq!(run(w, Event::Success(Some(2)), 45_000).next, w);
        let f = run(w, fail(Some(2), true), 45_000);
        assert_eq!(f.next, w);
        assert!(!f.counts_failure);
        // A stale failure on a Closed episode does not trip it.
        let c = Word::closed(6);
        assert_eq!(run(c, fail(Some(5), true), 1).next, c);
        // A stale failure while Open is still fresh bad news.
        let o = Word::open(7, 100);
        assert_eq!(run(o, fail(Some(3), false), 90).next, Word::open(7, 30_090));
    }

    #[test]
    fn release_lets_the_next_call_probe_at_once() {
        let w = Word::half_open(2, 40_000);
        let s = run(w, Event::Release(2), 31_000);
        assert_eq!(s.next, Word::open(3, 31_000));
        assert_eq!(
            run(s.next, Event::Acquire, 31_000).verdict,
            Verdict::Probe { generation: 4 }
        );
        assert_eq!(
            run(w, Event::Release(1), 31_000).next,
            w,
            "a stale release is ignored"
        );
    }

    #[test]
    fn huge_durations_mean_never() {
        let t = Timing::new(Duration::MAX, Duration::MAX);
        assert_eq!(t.recovery, NEVER);
        let w = Word::open(1, deadline_after(5, t.recovery));
        assert_eq!(
            step(w, Event::Acquire, NEVER - 1, &t).verdict,
            Verdict::Refused {
                retry_after: Duration::MAX
            }
        );
        assert_eq!(ticks_of_instant(Duration::MAX), NEVER - 1);
    }

    /// A breaker whose policy has the timings of `T`.
    fn breaker_like_t() -> Breaker {
        Breaker::new(Arc::new(ToolPolicy::from(
            crate::registry::CircuitBreakerConfig {
                failure_threshold: 3,
                recovery_duration: Duration::from_millis(T.recovery),
                probe_timeout: Duration::from_millis(T.lease),
            },
        )))
    }

    #[test]
    fn the_refusal_fast_path_agrees_with_the_step() {
        for deadline in [0, 1, 29_999, 30_000, 30_001, NEVER - 1, NEVER] {
            for now in [0, 1, 29_999, 30_000, 30_001, NEVER - 2, NEVER - 1] {
                let w = Word::open(5, deadline);
                let b = breaker_like_t();
                b.word.store(w.encode(), Ordering::Relaxed);
                let s = run(w, Event::Acquire, now);
                match b.refusal_while_open(|| now) {
                    Some(retry_after) => {
                        assert_eq!(s.verdict, Verdict::Refused { retry_after });
                        assert_eq!(s.next, w, "a refusal while open changes nothing");
                        assert!(s.transition.is_none() && !s.expired_lease);
                    }
                    None => assert!(matches!(s.verdict, Verdict::Probe { .. })),
                }
            }
        }
        for w in [
            Word::closed(3),
            Word::half_open(4, 40_000),
            Word::half_open(4, 10),
        ] {
            let b = breaker_like_t();
            b.word.store(w.encode(), Ordering::Relaxed);
            assert_eq!(b.refusal_while_open(|| 20_000), None, "{w:?}");
        }
    }

    #[test]
    fn breaker_counts_and_resets() {
        let b = Breaker::new(Arc::new(ToolPolicy::from(
            crate::registry::CircuitBreakerConfig::default(),
        )));
        b.on_failure(None, 0, 0);
        b.on_failure(None, 0, 0);
        assert_eq!(b.consecutive_failures(), 2);
        b.on_success(None, || 0);
        assert_eq!(b.consecutive_failures(), 0);
        for _ in 0..3 {
            b.on_failure(None, 1, 0);
        }
        assert_eq!(b.effective(1).state(), Open);
        b.on_success(None, || 2);
        assert_eq!(
            b.consecutive_failures(),
            3,
            "a success while open is ignored"
        );
        assert_eq!(b.transition_counts(), [1, 0, 0, 0]);
    }
}

/// Exhaustive interleavings of the word protocol under loom:
/// `RUSTFLAGS="--cfg tool_health_loom" cargo test --release --lib loom_model`.
#[cfg(all(test, tool_health_loom))]
mod loom_model {
    use super::*;
    use crate::registry::CircuitBreakerConfig;
    use loom::sync::Arc as LArc;
    use loom::thread;

    fn breaker(threshold: u32, lease_ms: u64) -> Breaker {
        Breaker::new(Arc::new(ToolPolicy::from(CircuitBreakerConfig {
            failure_threshold: threshold,
            recovery_duration: Duration::from_millis(10),
            probe_timeout: Duration::from_millis(lease_ms),
        })))
    }

    fn probe_generation(a: &Applied) -> Option<u32> {
        match a.verdict {
            Verdict::Probe { generation } => Some(generation),
            _ => None,
        }
    }

    #[test]
    fn one_probe_per_episode() {
        loom::model(|| {
            let b = LArc::new(breaker(1, 100));
            b.on_failure(None, 0, 0); // open, ready at 10
            let hs: Vec<_> = (0..3)
                .map(|_| {
                    let b = b.clone();
                    thread::spawn(move || probe_generation(&b.acquire(|| 10)))
                })
                .collect();
            let probes: Vec<_> = hs.into_iter().filter_map(|h| h.join().unwrap()).collect();
            assert_eq!(probes.len(), 1, "exactly one probe: {probes:?}");
            assert_eq!(b.effective(10).state(), BreakerState::HalfOpen);
            assert_eq!(b.transition_counts(), [1, 1, 0, 0], "no lost transition");
        });
    }

    #[test]
    fn concurrent_failures_trip_exactly_once() {
        loom::model(|| {
            let b = LArc::new(breaker(2, 100));
            let hs: Vec<_> = (0..2)
                .map(|_| {
                    let b = b.clone();
                    thread::spawn(move || b.on_failure(None, 5, 0).transition)
                })
                .collect();
            let trips = hs.into_iter().filter_map(|h| h.join().unwrap()).count();
            assert_eq!(trips, 1, "two failures at threshold 2 trip once");
            assert_eq!(b.effective(5).state(), BreakerState::Open);
            assert_eq!(b.consecutive_failures(), 2);
        });
    }

    #[test]
    fn probe_result_races_a_stale_result_and_the_gate() {
        loom::model(|| {
            let b = LArc::new(breaker(1, 100));
            let old = b.acquire(|| 0); // admitted while closed, generation 0
            let Verdict::Allowed {
                generation: old_gen,
            } = old.verdict
            else {
                panic!("closed breaker refused")
            };
            b.on_failure(None, 0, 0);
            let probe = probe_generation(&b.acquire(|| 10)).expect("probe");
            let t1 = {
                let b = b.clone();
                thread::spawn(move || b.on_success(Some(probe), || 20).transition)
            };
            let t2 = {
                let b = b.clone();
                thread::spawn(move || b.on_failure(Some(old_gen), 20, 0).transition)
            };
            let t3 = {
                let b = b.clone();
                thread::spawn(move || b.acquire(|| 20).verdict)
            };
            let closed = t1.join().unwrap();
            let stale = t2.join().unwrap();
            let gate = t3.join().unwrap();
            assert!(closed.is_some(), "the probe's own success closes");
            assert!(
                stale.is_none(),
                "a stale failure never re-opens a newer episode"
            );
            assert_eq!(b.effective(20).state(), BreakerState::Closed);
            // The gate saw either the probe in flight (refused) or the closed breaker.
            assert!(matches!(
                gate,
                Verdict::Refused { .. } | Verdict::Allowed { .. }
            ));
            assert!(b.load().generation() > probe, "generations only grow");
        });
    }

    #[test]
    fn expired_lease_late_success_races_a_new_probe() {
        loom::model(|| {
            let b = LArc::new(breaker(1, 5));
            b.on_failure(None, 0, 0);
            let first = probe_generation(&b.acquire(|| 10)).expect("probe"); // lease ends at 15
                                                                             // At 25 the lease has expired (15) and the cooldown from its end elapsed (25).
            let late = {
                let b = b.clone();
                thread::spawn(move || b.on_success(Some(first), || 25).transition)
            };
            let gate = {
                let b = b.clone();
                thread::spawn(move || probe_generation(&b.acquire(|| 25)))
            };
            let late = late.join().unwrap();
            let second = gate.join().unwrap();
            assert!(
                late.is_none(),
                "a success after its lease expired never closes"
            );
            let second = second.expect("the cooldown from the lease end elapsed: new probe");
            assert!(second > first);
            assert_eq!(b.effective(25).state(), BreakerState::HalfOpen);
            // The oracle agrees with the gate at the same instant.
            assert!(!b.would_allow(|| 25));
        });
    }
}
