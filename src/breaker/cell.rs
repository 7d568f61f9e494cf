//! One tool's breaker in memory: the word in an `AtomicU64`, the consecutive-failure counter,
//! per-edge tallies, what it remembers between episodes, and the policy that turns events into
//! timings and trip decisions. [`Breaker::apply`] is the one CAS loop: it evaluates the pure
//! [`step`] on the current word and installs the result.

// Loom's atomics only in the library's own test build: the crate is also built as a normal
// dependency (its dev-dependency on itself), where loom is not available.
#[cfg(all(test, tool_health_loom))]
use loom::sync::atomic::{AtomicU32, AtomicU64};
use std::sync::atomic::Ordering;
#[cfg(not(all(test, tool_health_loom)))]
use std::sync::atomic::{AtomicU32, AtomicU64};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::{ArcSwap, ArcSwapOption};

use crate::call::{GateDecision, Permit};
use crate::policy::{RateWindow, ToolPolicy, TripPolicy};
use crate::ticks::{Now, Ticks};

use super::step::{effective, step, Effective, Event, FailureFacts, Step, Timing};
use super::word::{next_gen, Word, CLOSED, OPEN};
use super::{BreakerState, Recorded, Transition, TransitionReason};

/// One tool's breaker (see the module docs).
#[derive(Debug)]
pub(crate) struct Breaker {
    word: AtomicU64,
    /// Consecutive failures while Closed. 32 bits (the breaker is one cache line: the episode's
    /// start and the tag fill the rest), saturating at `u32::MAX`.
    consecutive: AtomicU32,
    /// How many times each edge of [`Transition::PAIRS`] was taken, saturating at `u32::MAX`
    /// (transitions are rare events; 32 bits keep five edges in the memory four 64-bit tallies
    /// took, and the budget per tool has no room for more).
    transitions: [AtomicU32; 5],
    /// When the current episode began, as the low 32 bits of its instant in ticks (0: since
    /// the breaker was made): the instant of the last step that changed the word's generation
    /// (a trip, a probe grant, a probe's verdict, a release, a reset), written after the CAS
    /// that made it. Records of calls reported after the fact (spans from another process,
    /// [`Breaker::episode_start`]) read it to tell a result of the current episode from one
    /// that ended before it began. 32 bits (memory per tool is a budget): read against now, they place the start within the last 49 days,
    /// and a span older than that is not reported. A lease expiry keeps the generation, so
    /// the episode it opens counts from the probe's grant. Never read on the gate's or the
    /// record's fast path.
    since: AtomicU32,
    /// The policy's slow-call threshold in 1,024 ns units ([`ToolPolicy::slow_call_units`]),
    /// mirrored so that the record path reads one atomic instead of the policy. Beside the
    /// other 32-bit fields: the breaker takes the 8 bytes the entry kept for it.
    slow: AtomicU32,
    /// The generation of the word that began the current (or last) open episode — the word
    /// that left Closed — so that a coordinator's close is bound to its episode (see
    /// [`Event::RemoteClose`]). Written before the compare-and-swap that installs that word
    /// (`Release`), read after loading the word (`Acquire`): every write of the word is a
    /// read-modify-write, so a reader that sees the episode's word (or any later one) sees its
    /// start, or a later attempt's — which can only make a close refuse, never wrongly close.
    episode: AtomicU32,
    /// What the breaker remembers between episodes, in one word (memory per tool is a budget):
    /// bit 63, a failure-rate window is present (mirrors `window.is_some()`, so the success
    /// fast path pays one relaxed load); bit 62, a coordinator watches the tool's successes (the
    /// success fast path leaves for the one that tells it, on the same load); bits 56–61, the
    /// backoff level of the current (or last) open episode (64 levels: a cooldown doubled 63
    /// times is "never" long before); bits 0–55, when the breaker last closed after a probe, in
    /// ticks
    /// ([`Ticks::NEVER`]: not yet).
    history: AtomicU64,
    policy: ArcSwap<ToolPolicy>,
    /// Failure-rate window, present while the policy is [`TripPolicy::FailureRate`].
    window: ArcSwapOption<RateWindow>,
    /// Which breaker this is, for the permits it hands out (see [`Permit`]): written into every
    /// Closed word (where an Open word holds its deadline), so that an ordinary admission's
    /// permit is the closed word shifted, and a permit of another breaker never passes the
    /// record's fast path. Fixed at creation: 32 bits, which
    /// the word's 40-bit field holds zero-extended.
    tag: u32,
}

// 72 bytes: the word, the 32-bit consecutive counter, five 32-bit tallies, three 32-bit marks
// (the open episode's generation, the current episode's start, the tag), the slow-call
// threshold, the history word, the policy and the window. The gate's and the record's fast
// paths read the word, the history and the threshold.
#[cfg(not(all(test, tool_health_loom)))]
const _: () = assert!(std::mem::size_of::<Breaker>() == 72);

const HISTORY_WINDOW: u64 = 1 << 63;

/// [`Breaker::since`]'s value for an episode that began at `at` (never 0: 0 is "since the
/// breaker was made").
fn since_word(at: Ticks) -> u32 {
    (at.get() as u32).max(1)
}
const HISTORY_WATCHED: u64 = 1 << 62;
/// The bits that send a success on a Closed breaker off the fast path.
const HISTORY_SLOW_SUCCESS: u64 = HISTORY_WINDOW | HISTORY_WATCHED;
const HISTORY_LEVEL_SHIFT: u32 = 56;
const HISTORY_LEVEL_MAX: u64 = 0x3F;
const HISTORY_CLOSED_MASK: u64 = (1 << HISTORY_LEVEL_SHIFT) - 1;

impl Breaker {
    #[cfg(test)]
    pub(crate) fn new(policy: Arc<ToolPolicy>) -> Self {
        Self::starting_at(policy, 0, 1)
    }

    /// A fresh breaker whose first (closed) episode has `generation`: an evicted tool's
    /// successor starts where the registry's evicted entries left off (see
    /// `ToolHealthRegistry::evict_idle`), so a permit of the evicted entry is never taken for
    /// one of the successor's later episodes.
    ///
    /// `tag` identifies the breaker in its permits (below [`Ticks::NEVER`]).
    pub(crate) fn starting_at(policy: Arc<ToolPolicy>, generation: u32, tag: u32) -> Self {
        let b = Self {
            word: AtomicU64::new(Word::closed(generation).tagged(u64::from(tag)).encode()),
            consecutive: AtomicU32::new(0),
            transitions: std::array::from_fn(|_| AtomicU32::new(0)),
            episode: AtomicU32::new(generation),
            history: AtomicU64::new(Ticks::NEVER.get()),
            since: AtomicU32::new(0),
            slow: AtomicU32::new(crate::policy::SLOW_CALL_OFF),
            policy: ArcSwap::new(Arc::clone(&policy)),
            window: ArcSwapOption::empty(),
            tag,
        };
        b.set_policy(policy);
        b
    }

    /// Installs a policy on a live breaker; state and counters are kept.
    pub(crate) fn set_policy(&self, policy: Arc<ToolPolicy>) {
        self.slow.store(policy.slow_call_units(), Ordering::Relaxed);
        match policy.trip {
            TripPolicy::FailureRate { window, .. } => {
                self.window.store(Some(Arc::new(RateWindow::new(window))));
                self.history.fetch_or(HISTORY_WINDOW, Ordering::Release);
            }
            TripPolicy::ConsecutiveFailures => {
                self.history.fetch_and(!HISTORY_WINDOW, Ordering::Release);
                self.window.store(None);
            }
        }
        self.policy.store(policy);
    }

    /// Whether a call of `duration` is slow by the policy's threshold (a failure for the
    /// breaker): its duration in 1,024 ns units, saturated to 32 bits, above the threshold's.
    #[inline(always)]
    pub(crate) fn is_slow(&self, duration: Duration) -> bool {
        let units = crate::clock::duration_to_nanos(duration) >> crate::policy::SLOW_CALL_SHIFT;
        units.min(u64::from(u32::MAX)) > u64::from(self.slow.load(Ordering::Relaxed))
    }

    pub(crate) fn policy(&self) -> Arc<ToolPolicy> {
        self.policy.load_full()
    }

    #[inline(always)]
    fn has_window(&self, order: Ordering) -> bool {
        self.history.load(order) & HISTORY_WINDOW != 0
    }

    /// Whether a coordinator watches this tool's successes (see [`Breaker::watch`]).
    #[inline]
    pub(crate) fn watched(&self) -> bool {
        self.history.load(Ordering::Relaxed) & HISTORY_WATCHED != 0
    }

    /// Sends every success off the fast path (`on`), so that the record path can tell a
    /// coordinator about it, or back onto it. Relaxed: a success racing the change may take
    /// either path, as a success just before or after it would.
    pub(crate) fn watch(&self, on: bool) {
        if on {
            self.history.fetch_or(HISTORY_WATCHED, Ordering::Relaxed);
        } else {
            self.history.fetch_and(!HISTORY_WATCHED, Ordering::Relaxed);
        }
    }

    /// Replaces the bits of `mask` in the history word with `value` (which lies within `mask`).
    fn set_history(&self, mask: u64, value: u64) {
        let _ = self
            .history
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |a| {
                Some((a & !mask) | (value & mask))
            });
    }

    fn backoff_level(&self) -> u32 {
        ((self.history.load(Ordering::Relaxed) >> HISTORY_LEVEL_SHIFT) & HISTORY_LEVEL_MAX) as u32
    }

    /// The timing of a step that makes no opening.
    fn timing(&self, p: &ToolPolicy) -> Timing {
        let recovery = p.recovery_ticks(self.backoff_level());
        Timing {
            recovery,
            open_for: recovery,
            lease: Ticks::span(p.breaker.probe_timeout),
        }
    }

    #[inline]
    pub(crate) fn load(&self) -> Word {
        Word::decode(self.word.load(Ordering::Acquire))
    }

    /// The state at `now` (expiry-aware), without writing anything.
    pub(crate) fn effective(&self, now: Ticks) -> Effective {
        let w = self.load();
        if w.state == CLOSED {
            return Effective::Closed;
        }
        effective(w, now, &self.timing(&self.policy.load()))
    }

    pub(crate) fn consecutive_failures(&self) -> u64 {
        u64::from(self.consecutive.load(Ordering::SeqCst))
    }

    /// How many times each edge of [`Transition::PAIRS`] was taken.
    pub(crate) fn transition_counts(&self) -> [u64; 5] {
        std::array::from_fn(|i| u64::from(self.transitions[i].load(Ordering::Relaxed)))
    }

    /// The generation of a Closed breaker, `None` when it is not Closed.
    #[inline]
    pub(crate) fn closed_generation(&self) -> Option<u32> {
        let w = self.load();
        (w.state == CLOSED).then_some(w.generation)
    }

    /// The permit of an ordinary admission while Closed, `None` when it is not Closed: the
    /// gate's fast path (one load and one shift; [`Breaker::acquire`] decides everything else).
    #[inline(always)]
    pub(crate) fn closed_permit(&self) -> Option<Permit> {
        Word::closed_key(self.word.load(Ordering::Acquire)).map(Permit::from_key)
    }

    /// The tag of the permits this breaker hands out.
    #[inline]
    pub(crate) fn tag(&self) -> u64 {
        u64::from(self.tag)
    }

    /// The refusal fast path: an Open breaker whose cooldown has not elapsed refuses and
    /// changes nothing — exactly what [`Breaker::acquire`] decides then, without evaluating the
    /// whole step. Answers the wait; `None` for every other case (not Open, or the cooldown has
    /// elapsed), which [`Breaker::acquire`] decides. `now` is read only for an Open breaker.
    #[inline(always)]
    pub(crate) fn refusal_while_open(&self, now: impl FnOnce() -> Ticks) -> Option<Duration> {
        let w = self.load();
        if w.state != OPEN {
            return None;
        }
        if w.deadline.is_never() {
            return Some(Duration::MAX);
        }
        let now = now();
        (now < w.deadline).then(|| Duration::from_millis(w.deadline.get() - now.get()))
    }

    /// The generation of the current episode.
    pub(crate) fn generation(&self) -> u32 {
        self.load().generation
    }

    /// The current word and when its episode began (see [`Breaker::since`]), read at `now`.
    /// For the instant while the step that began an episode has installed its word and not
    /// yet written when, the previous episode's start is read.
    pub(crate) fn episode_start(&self, now: Ticks) -> (Word, Ticks) {
        let w = self.load();
        let since = self.since.load(Ordering::Acquire);
        if since == 0 {
            return (w, Ticks::ZERO);
        }
        let ago = (now.get() as u32).wrapping_sub(since);
        // More than half the range ago: written just after our reading of now (it began now).
        let began = if ago > u32::MAX / 2 {
            now
        } else {
            Ticks::new(now.get().saturating_sub(u64::from(ago)))
        };
        (w, began)
    }

    /// Writes when an episode began, unless a newer episode's start is there already (two
    /// transitions racing may write in either order: the later instant stays).
    fn began(&self, at: Ticks) {
        let new = since_word(at);
        let _ = self
            .since
            .fetch_update(Ordering::Release, Ordering::Relaxed, |old| {
                let ahead = new.wrapping_sub(old);
                (old == 0 || (ahead != 0 && ahead <= u32::MAX / 2)).then_some(new)
            });
    }

    /// The gate: may grant the probe. `now` is read lazily: a Closed breaker never asks the clock.
    #[inline]
    pub(crate) fn acquire(&self, now: impl FnOnce() -> Now) -> (GateDecision, Recorded) {
        let w = self.load();
        if w.state == CLOSED {
            return (
                GateDecision::Allowed(Permit::admitted(w.generation).tagged(self.tag())),
                Recorded::default(),
            );
        }
        let t = self.timing(&self.policy.load());
        let (decision, recorded) = self.apply(w, now(), |_| (Event::Acquire, t), |_, _| {});
        // Every Acquire step answers; the fallback is unreachable.
        let decision = decision.unwrap_or(GateDecision::Refused {
            retry_after: Duration::MAX,
        });
        (decision.tagged(self.tag()), recorded)
    }

    /// What [`Breaker::acquire`] would answer at `now`, without changing anything.
    pub(crate) fn would_allow(&self, now: impl FnOnce() -> Now) -> bool {
        self.peek(now).is_allowed()
    }

    /// The decision [`Breaker::acquire`] would make at `now`, without changing anything: the
    /// one place a refusal's `retry_after` is computed, for the gate and every read alike.
    pub(crate) fn peek(&self, now: impl FnOnce() -> Now) -> GateDecision {
        let w = self.load();
        if w.state == CLOSED {
            return GateDecision::Allowed(Permit::admitted(w.generation).tagged(self.tag()));
        }
        let t = self.timing(&self.policy.load());
        step(w, Event::Acquire, now(), &t)
            .decision
            .unwrap_or(GateDecision::Refused {
                retry_after: Duration::MAX,
            })
            .tagged(self.tag())
    }

    /// Records a success for the breaker (`generation`: the permit's, when there is one).
    #[inline]
    pub(crate) fn on_success(
        &self,
        generation: Option<u32>,
        now: impl FnOnce() -> Now,
    ) -> Recorded {
        let permit = generation.map(|g| Permit::admitted(g).tagged(self.tag()));
        if self.success_if_closed(permit) {
            return Recorded::default();
        }
        let w = self.load();
        let now = now();
        if self.has_window(Ordering::Acquire) {
            if let Some(window) = &*self.window.load() {
                window.add(now.at, true);
            }
        }
        let t = self.timing(&self.policy.load());
        self.apply(
            w,
            now,
            |_| (Event::Success(generation), t),
            |s, _| {
                if s.next.state == CLOSED && s.transition.is_some() {
                    self.set_history(HISTORY_CLOSED_MASK, now.at.get());
                    // Closing starts a fresh failure-rate window (as resilience4j and Polly
                    // do): the failures that opened the breaker describe the episode that just
                    // ended. A call recorded by another thread between the close and this
                    // clear is forgotten with them (the window is approximate at its edges).
                    if let Some(window) = &*self.window.load() {
                        window.clear();
                    }
                }
            },
        )
        .1
    }

    /// The hot path of [`Breaker::on_success`], for callers that can return early: a success on
    /// a Closed breaker (through a permit of this breaker and of its generation, if any) with
    /// no failure-rate window and no coordinator watching only resets the counter, and this does
    /// it and answers `true`. `false`: any other case, for [`Breaker::on_success`] to decide (it
    /// re-reads the word). Through a permit, state, generation and tag are compared with the word
    /// in one comparison (the permit's [`closed_word`](Permit::closed_word)).
    #[inline(always)]
    pub(crate) fn success_if_closed(&self, permit: Option<Permit>) -> bool {
        let raw = self.word.load(Ordering::Acquire);
        let closed = match permit {
            None => Word::closed_key(raw).is_some(),
            Some(p) => raw == p.closed_word(),
        };
        if closed && self.history.load(Ordering::Relaxed) & HISTORY_SLOW_SUCCESS == 0 {
            if self.consecutive.load(Ordering::Relaxed) != 0 {
                self.consecutive.store(0, Ordering::Relaxed);
            }
            return true;
        }
        false
    }

    /// Records a failure for the breaker (`generation`: the permit's, when there is one;
    /// `not_before`: the tool's retry hint as an instant, zero for none).
    #[cfg(test)]
    pub(crate) fn on_failure(
        &self,
        generation: Option<u32>,
        clock: Now,
        not_before: Ticks,
    ) -> Recorded {
        self.on_failure_rated(generation, clock, not_before, true)
    }

    /// [`on_failure`](Self::on_failure), where `rate_trips` says whether the local failure-rate
    /// window may trip the breaker (a coordinator that evaluates the rate over the whole fleet
    /// turns it off while it is connected); its counts are kept either way.
    pub(crate) fn on_failure_rated(
        &self,
        generation: Option<u32>,
        clock: Now,
        not_before: Ticks,
        rate_trips: bool,
    ) -> Recorded {
        let now = clock.at;
        let w = self.load();
        // Count first, then decide: concurrent failures see distinct counts, so exactly one of
        // them sees the threshold. A failure the breaker rejects (stale) takes its count back.
        // SeqCst: the registry's eviction handshake reads this counter to decide that a tool is
        // fresh (see `ToolHealthRegistry::touch`).
        let before = self.consecutive.fetch_add(1, Ordering::SeqCst);
        if before == u32::MAX {
            // Saturate rather than wrap (only reachable with tripping off: threshold 0).
            self.consecutive.store(u32::MAX, Ordering::SeqCst);
        }
        let count = u64::from(before) + 1;
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
                Some(rate_trips && TripPolicy::rate_trips(ratio, min_calls, failures, calls))
            }
            _ => None,
        };
        let threshold = u64::from(p.breaker.failure_threshold);
        let trips = rate.unwrap_or(threshold != 0 && count >= threshold);
        let level = self.backoff_level();
        let stable_after = p
            .backoff
            .as_ref()
            .map_or(Ticks::ZERO, |b| Ticks::span(b.stable_after));
        let closed_at = Ticks::new(self.history.load(Ordering::Relaxed) & HISTORY_CLOSED_MASK);
        let facts = FailureFacts { trips, not_before };
        let base = self.timing(&p);
        // The backoff level an opening from this word would have, from its state at `now`: a
        // half-open word whose lease expired is open whether or not a gate call has written
        // the expiry yet, so the level never depends on who looked first.
        let opening_level = |w: Word| -> u32 {
            if p.backoff.is_none() {
                return 0;
            }
            match effective(w, now, &base) {
                Effective::Closed
                    if !closed_at.is_never() && now.saturating_sub(closed_at) < stable_after =>
                {
                    level.saturating_add(1)
                }
                Effective::Closed => 0,
                Effective::HalfOpen { .. } => level.saturating_add(1),
                Effective::Open { .. } => level,
            }
        };
        self.apply(
            w,
            clock,
            |w| {
                let t = Timing {
                    open_for: p.opening_ticks(opening_level(w)),
                    ..base
                };
                (Event::Failure(generation, facts), t)
            },
            |s, from| {
                if !s.counts_failure {
                    self.consecutive.fetch_sub(1, Ordering::Relaxed);
                }
                if matches!(s.transition, Some(t) if t.to == BreakerState::Open) {
                    // This failure opened the breaker: remember the episode's backoff level.
                    let level = u64::from(opening_level(from)).min(HISTORY_LEVEL_MAX);
                    self.set_history(
                        HISTORY_LEVEL_MAX << HISTORY_LEVEL_SHIFT,
                        level << HISTORY_LEVEL_SHIFT,
                    );
                }
            },
        )
        .1
    }

    /// Gives a probe back without a verdict on the tool: the next gate call may probe at once.
    /// `generation`: the probe permit's; `None` (by name): whatever probe is in flight.
    pub(crate) fn release(&self, generation: Option<u32>, now: Now) -> Recorded {
        let t = self.timing(&self.policy.load());
        self.apply(
            self.load(),
            now,
            |_| (Event::Release(generation), t),
            |_, _| {},
        )
        .1
    }

    /// A coordinator's decision made elsewhere: open until at least `until` (see
    /// [`Event::RemoteOpen`]). Answers the word it was applied to, the word installed (the
    /// same when nothing changed) and the transitions made.
    pub(crate) fn remote_open(
        &self,
        until: Ticks,
        abort_probe: bool,
        now: Now,
    ) -> (Word, Word, Recorded) {
        let t = self.timing(&self.policy.load());
        let words = std::cell::Cell::new((self.load(), self.load()));
        let recorded = self
            .apply(
                self.load(),
                now,
                |_| (Event::RemoteOpen { until, abort_probe }, t),
                |s, w| words.set((w, s.next)),
            )
            .1;
        let (before, after) = words.get();
        (before, after, recorded)
    }

    /// When `w` lets the next probe through, evaluated at `now`: an Open word's deadline, a
    /// half-open word's expired lease's end plus the recovery; `None` for any other word.
    pub(crate) fn ready_at(&self, w: Word, now: Ticks) -> Option<Ticks> {
        match effective(w, now, &self.timing(&self.policy.load())) {
            Effective::Open { ready_at, .. } => Some(ready_at),
            _ => None,
        }
    }

    /// The cooldown an opening would get now: the recovery at the current backoff level,
    /// jitter left out.
    pub(crate) fn recovery(&self) -> Ticks {
        self.policy.load().recovery_ticks(self.backoff_level())
    }

    /// A coordinator's decision made elsewhere: another replica's probe succeeded (see
    /// [`Event::RemoteClose`]). Closing here is what a probe's success does: a fresh
    /// failure-rate window, the backoff's calm counted from now.
    pub(crate) fn remote_close(&self, since: u32, now: Now) -> Recorded {
        let t = self.timing(&self.policy.load());
        self.apply(
            self.load(),
            now,
            // After the word was loaded (see `episode`).
            |_| {
                let episode = self.episode.load(Ordering::Acquire);
                (Event::RemoteClose { since, episode }, t)
            },
            |s, _| {
                if s.transition.is_some() {
                    self.set_history(HISTORY_CLOSED_MASK, now.at.get());
                    if let Some(window) = &*self.window.load() {
                        window.clear();
                    }
                }
            },
        )
        .1
    }

    /// Puts back a deadline a coordinator extended, if the word is still exactly what it
    /// installed (see [`Event::Restore`]). Whether it did.
    pub(crate) fn restore(&self, installed: Word, to: Ticks, now: Now) -> bool {
        let t = self.timing(&self.policy.load());
        let done = std::cell::Cell::new(false);
        self.apply(
            self.load(),
            now,
            |_| {
                (
                    Event::Restore {
                        generation: installed.generation,
                        from: installed.deadline,
                        to,
                    },
                    t,
                )
            },
            |s, w| done.set(s.next != w && s.next.deadline == to),
        );
        done.get()
    }

    /// Back to fresh: closed, counters zero, backoff forgotten. The generation still grows, so
    /// permits handed out before the reset are stale afterwards.
    pub(crate) fn reset(&self, now: Ticks) {
        let mut cur = self.word.load(Ordering::Acquire);
        loop {
            let fresh = Word::closed(next_gen(Word::decode(cur).generation))
                .tagged(self.tag())
                .encode();
            match self
                .word
                .compare_exchange_weak(cur, fresh, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    self.began(now);
                    break;
                }
                Err(actual) => cur = actual,
            }
        }
        self.consecutive.store(0, Ordering::Relaxed);
        self.set_history(
            HISTORY_LEVEL_MAX << HISTORY_LEVEL_SHIFT | HISTORY_CLOSED_MASK,
            Ticks::NEVER.get(),
        );
        if let Some(window) = &*self.window.load() {
            window.clear();
        }
    }

    /// The only concurrent code of the breaker: evaluate the pure step on the current word,
    /// install it with CAS, retry on a lost race. `make` builds the event and timing for a word
    /// (a failure's backoff depends on the state it meets); `done` runs once, after install,
    /// with the step and the word it was applied to.
    fn apply(
        &self,
        mut w: Word,
        now: Now,
        make: impl Fn(Word) -> (Event, Timing),
        done: impl FnOnce(&Step, Word),
    ) -> (Option<GateDecision>, Recorded) {
        loop {
            let (ev, t) = make(w);
            let mut s = step(w, ev, now, &t);
            // A Closed word carries the breaker's tag (see `tag`); the pure step knows nothing of it.
            s.next = s.next.tagged(self.tag());
            if w.state == CLOSED && s.next.state != CLOSED {
                // An open episode begins: its start, before its word (see `episode`).
                self.episode.store(s.next.generation, Ordering::Release);
            }
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
            if s.next.generation != w.generation {
                self.began(now.at);
            }
            done(&s, w);
            let expired = (s.expired_lease && s.next != w).then_some(Transition {
                from: BreakerState::HalfOpen,
                to: BreakerState::Open,
                reason: TransitionReason::LeaseExpired,
            });
            let recorded = Recorded {
                expired,
                transition: s.transition,
                ..Recorded::default()
            };
            for t in recorded.transitions() {
                // Saturating: a tally must never wrap (an exported counter never goes down).
                let _ = self.transitions[t.pair_index()].fetch_update(
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                    |n| n.checked_add(1),
                );
            }
            return (s.decision, recorded);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::CircuitBreakerConfig;
    use BreakerState::*;

    /// A breaker with a 30 s cooldown, a 10 s lease and threshold 3.
    fn breaker_30s_10s() -> Breaker {
        Breaker::new(Arc::new(ToolPolicy::from(CircuitBreakerConfig {
            failure_threshold: 3,
            recovery_duration: Duration::from_secs(30),
            probe_timeout: Duration::from_secs(10),
        })))
    }

    #[test]
    fn the_refusal_fast_path_agrees_with_the_step() {
        let never = Ticks::NEVER.get();
        for deadline in [0, 1, 29_999, 30_000, 30_001, never - 1, never] {
            for now in [0, 1, 29_999, 30_000, 30_001, never - 2, never - 1] {
                let (deadline, now) = (Ticks::new(deadline), Ticks::new(now));
                let w = Word::open(5, deadline);
                let b = breaker_30s_10s();
                b.word.store(w.encode(), Ordering::Relaxed);
                let s = step(
                    w,
                    Event::Acquire,
                    Now::exact(now),
                    &b.timing(&b.policy.load()),
                );
                match b.refusal_while_open(|| now) {
                    Some(retry_after) => {
                        assert_eq!(s.decision, Some(GateDecision::Refused { retry_after }));
                        assert_eq!(s.next, w, "a refusal while open changes nothing");
                        assert!(s.transition.is_none() && !s.expired_lease);
                    }
                    None => assert!(matches!(s.decision, Some(GateDecision::Probe(_)))),
                }
            }
        }
        for w in [
            Word::closed(3),
            Word::half_open(4, Ticks::new(40_000)),
            Word::half_open(4, Ticks::new(10)),
        ] {
            let b = breaker_30s_10s();
            b.word.store(w.encode(), Ordering::Relaxed);
            assert_eq!(b.refusal_while_open(|| Ticks::new(20_000)), None, "{w:?}");
        }
    }

    #[test]
    fn a_failure_after_an_expired_lease_opens_at_the_same_backoff_level_whoever_looked_first() {
        use crate::policy::Backoff;
        // Cooldown 10 s doubling, lease 5 s; trip at 0, probe at 10 s, lease ends at 15 s.
        let opened_for = |settle_first: bool| {
            let b = Breaker::new(Arc::new(ToolPolicy {
                breaker: CircuitBreakerConfig {
                    failure_threshold: 1,
                    recovery_duration: Duration::from_secs(10),
                    probe_timeout: Duration::from_secs(5),
                },
                backoff: Some(Backoff::default()),
                ..ToolPolicy::default()
            }));
            let at = |ms| Now::exact(Ticks::new(ms));
            b.on_failure(None, at(0), Ticks::ZERO);
            assert!(b.acquire(|| at(10_000)).0.is_allowed());
            if settle_first {
                // A gate call after the expiry writes it into the word.
                assert!(!b.acquire(|| at(16_000)).0.is_allowed());
            }
            b.on_failure(None, at(17_000), Ticks::ZERO);
            match b.peek(|| at(17_000)) {
                GateDecision::Refused { retry_after } => retry_after,
                d => panic!("{d:?}"),
            }
        };
        assert_eq!(opened_for(true), opened_for(false));
        assert_eq!(opened_for(false), Duration::from_secs(10));
    }

    #[test]
    fn breaker_counts_and_resets() {
        let b = Breaker::new(Arc::new(ToolPolicy::from(CircuitBreakerConfig::default())));
        let (t0, t1, t2) = (
            Now::exact(Ticks::ZERO),
            Now::exact(Ticks::new(1)),
            Now::exact(Ticks::new(2)),
        );
        b.on_failure(None, t0, Ticks::ZERO);
        b.on_failure(None, t0, Ticks::ZERO);
        assert_eq!(b.consecutive_failures(), 2);
        b.on_success(None, || t0);
        assert_eq!(b.consecutive_failures(), 0);
        for _ in 0..3 {
            b.on_failure(None, t1, Ticks::ZERO);
        }
        assert_eq!(b.effective(t1.at).state(), Open);
        b.on_success(None, || t2);
        assert_eq!(
            b.consecutive_failures(),
            3,
            "a success while open is ignored"
        );
        assert_eq!(b.transition_counts(), [1, 0, 0, 0, 0]);
    }
}
