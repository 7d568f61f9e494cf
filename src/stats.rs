//! Per-tool health statistics: counts, durations, the EWMA of success, score and status.
//!
//! One `ToolStats` per tool, every field an `AtomicU64`: recording a call never takes a lock
//! and never allocates. The formulas are those of the behaviour reference:
//!
//! * `ewma_success` is fixed point with [`EWMA_SCALE`] = 1,000,000 meaning 1.0; a new tool starts
//!   at 1.0. Each call moves it 30 % of the way toward the sample (1.0 on success, 0.0 on
//!   failure), the step rounded up (away from zero), so from a fresh tool: failure → 0.7,
//!   failure → 0.49, success → 0.643 exactly, and long runs reach exactly 1.0 or exactly 0.0.
//! * `success_rate = success / total` (1.0 with no calls).
//! * `health_score = 0.3 × success_rate + 0.7 × ewma`.
//! * Durations: a saturating sum (never wraps; one `Duration` above `u64::MAX` ns clamps) and a
//!   high-water mark over **all** calls, failed ones included: a timeout is tail latency too.
//!   Latency never feeds the score.
//!
//! # Stripes
//!
//! The counters every call writes (successes, failures, refusals, caller errors, the duration
//! sum) are kept in `STRIPES` (2) copies, each alone on its cache line(s), and a thread always
//! writes the same stripe (threads are dealt stripes in turn). Two threads calling one tool
//! then write different lines and never steal a line from each other on the success path: the
//! other fields it touches (the high-water mark, the EWMA, the breaker word) are only read
//! there, so they stay shared in both caches. Readers add the stripes up. The stripes are one
//! separate 128-byte allocation per tool: the entry itself stays small and unaligned.
//!
//! # Orderings
//!
//! Every access is `Relaxed`. Each counter is an independent monotonic (or CAS-updated) value;
//! nothing else is published through them, so no happens-before is needed. A snapshot taken
//! while calls are being recorded may see one counter updated and another not yet; at
//! quiescence `total == success + failure` holds exactly (total is derived, not stored).

use std::cell::Cell;
use std::sync::atomic::{
    AtomicU32, AtomicU64, AtomicUsize,
    Ordering::{Relaxed, SeqCst},
};
use std::time::Duration;

use crate::clock::duration_to_nanos;

/// Fixed-point scale of the EWMA: `1_000_000` is 1.0.
pub const EWMA_SCALE: u64 = 1_000_000;

/// Score at or above which a tool is [`HealthStatus::Healthy`].
pub const HEALTHY_SCORE: f64 = 0.8;
/// Score at or above which (and below [`HEALTHY_SCORE`]) a tool is [`HealthStatus::Degraded`].
pub const DEGRADED_SCORE: f64 = 0.5;

/// How healthy a tool looks.
///
/// A tool whose breaker is open (including a half-open breaker whose probe lease expired) is
/// `Unhealthy`; otherwise the score decides: `≥ 0.8` healthy, `≥ 0.5` degraded, below that
/// unhealthy. The status informs dashboards and routing; it never blocks a call by itself —
/// only the breaker does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HealthStatus {
    /// Score ≥ 0.8 and the breaker is not open.
    Healthy,
    /// 0.5 ≤ score < 0.8 and the breaker is not open.
    Degraded,
    /// Score < 0.5, or the breaker is open.
    Unhealthy,
}

impl HealthStatus {
    /// The score at or above which a tool whose breaker is not open is [`Healthy`](Self::Healthy): 0.8.
    pub const HEALTHY_SCORE: f64 = HEALTHY_SCORE;
    /// The score at or above which (and below [`HEALTHY_SCORE`](Self::HEALTHY_SCORE)) a tool is
    /// [`Degraded`](Self::Degraded): 0.5.
    pub const DEGRADED_SCORE: f64 = DEGRADED_SCORE;

    /// The lowercase name: `healthy`, `degraded` or `unhealthy`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Healthy => "healthy",
            Self::Degraded => "degraded",
            Self::Unhealthy => "unhealthy",
        }
    }

    /// The status for a score, given whether the breaker is (effectively) open.
    pub fn classify(score: f64, breaker_open: bool) -> Self {
        if breaker_open {
            Self::Unhealthy
        } else if score >= HEALTHY_SCORE {
            Self::Healthy
        } else if score >= DEGRADED_SCORE {
            Self::Degraded
        } else {
            Self::Unhealthy
        }
    }
}

impl std::fmt::Display for HealthStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One EWMA step in fixed point: 30 % of the way toward the sample, rounded away from zero.
pub(crate) const fn ewma_step(prev: u64, success: bool) -> u64 {
    let prev = if prev > EWMA_SCALE { EWMA_SCALE } else { prev };
    if success {
        let gap = EWMA_SCALE - prev;
        prev + (gap * 3).div_ceil(10)
    } else {
        prev - (prev * 3).div_ceil(10)
    }
}

/// `0.3 × success_rate + 0.7 × ewma`.
pub(crate) fn health_score(success_rate: f64, ewma: f64) -> f64 {
    0.3 * success_rate + 0.7 * ewma
}

/// How many copies of the per-call counters each tool keeps (see "Stripes" in the module docs):
/// two, the cores of the machines this is measured on; more would cost 64 bytes per tool each.
pub(crate) const STRIPES: usize = 2;

/// The counters one thread writes, alone on a cache line.
///
/// The counters the metrics export as counters only ever grow (a counter must never go down):
/// [`ToolStats::reset`] records where they stood in `base` instead of zeroing them, and reads
/// subtract it. The bases fill the line's spare words, so they cost no memory: stripe 0 holds
/// the bases of success, failure and refused, stripe 1 those of the shadow refusals, the
/// cancellations and the coordinated refusals (whose counters are unstriped). They are written
/// only by a reset.
#[derive(Debug, Default)]
#[repr(align(64))]
struct Stripe {
    success: AtomicU64,
    failure: AtomicU64,
    /// Calls whose outcome was a caller error: neither success nor failure.
    ignored: AtomicU64,
    /// Calls refused by the breaker (zero duration, not a failure).
    refused: AtomicU64,
    /// Saturating.
    total_duration_ns: AtomicU64,
    /// Reset bases (see above).
    base: [AtomicU64; 3],
}

// Eight words: one cache line per stripe, bases included.
const _: () = assert!(std::mem::size_of::<Stripe>() == 64);

thread_local! {
    /// This thread's stripe, `usize::MAX` until its first record.
    static STRIPE: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// This thread's stripe: dealt in turn on the thread's first record, then fixed. The fixed
/// case is one thread-local load and a compare; dealing is out of line.
#[inline(always)]
fn stripe_index() -> usize {
    let i = STRIPE.get();
    if i < STRIPES {
        i
    } else {
        deal_stripe()
    }
}

#[cold]
#[inline(never)]
fn deal_stripe() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let i = NEXT.fetch_add(1, Relaxed) % STRIPES;
    STRIPE.set(i);
    i
}

/// The lock-free statistics of one tool.
#[derive(Debug)]
pub(crate) struct ToolStats {
    stripes: Box<[Stripe; STRIPES]>,
    /// Calls shadow mode let through that the breaker would have refused (rare: unstriped).
    shadow_refused: AtomicU64,
    /// Calls started and never finished (rare: unstriped).
    cancelled: AtomicU64,
    /// Of the refusals, those made while a coordinator had a say in the episode (another
    /// replica's trip, a probe held back for another replica): unstriped, counted on the
    /// coordinated gate path only, and only here (reads add them to the striped refusals).
    coordinated_refused: AtomicU64,
    /// Read on every call, written only when raised: shared between threads.
    max_duration_ns: AtomicU64,
    /// Read on every call, written only when it moves (never at 1.0 on a run of successes).
    /// 32 bits hold the fixed point (at most [`EWMA_SCALE`]).
    ewma: AtomicU32,
    /// Which entry of the tool these counters count in: the registry numbers every entry it
    /// creates (the counts are "since the entry was created", so a coordinator sending their
    /// differences tells an entry created again after an eviction from the one before). It
    /// shares the word the EWMA's 32 bits leave: the entry stays within its memory budget.
    pub(crate) incarnation: u32,
}

/// A consistent-enough copy of the counters (see the module's "Orderings").
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct StatsSnapshot {
    pub(crate) success: u64,
    pub(crate) failure: u64,
    pub(crate) ignored: u64,
    pub(crate) refused: u64,
    pub(crate) shadow_refused: u64,
    pub(crate) cancelled: u64,
    /// Included in `refused`.
    pub(crate) coordinated_refused: u64,
    pub(crate) total_duration_ns: u64,
    pub(crate) max_duration_ns: u64,
    pub(crate) ewma: u64,
}

impl StatsSnapshot {
    pub(crate) fn total(&self) -> u64 {
        self.success.saturating_add(self.failure)
    }

    pub(crate) fn success_rate(&self) -> f64 {
        match self.total() {
            0 => 1.0,
            total => self.success as f64 / total as f64,
        }
    }

    pub(crate) fn ewma_f64(&self) -> f64 {
        self.ewma as f64 / EWMA_SCALE as f64
    }

    pub(crate) fn score(&self) -> f64 {
        health_score(self.success_rate(), self.ewma_f64())
    }

    pub(crate) fn avg_duration(&self) -> Duration {
        match self.total() {
            0 => Duration::ZERO,
            total => Duration::from_nanos(self.total_duration_ns / total),
        }
    }
}

impl Default for ToolStats {
    fn default() -> Self {
        Self::counting(0)
    }
}

/// [`EWMA_SCALE`] in the EWMA's own width.
const EWMA_ONE: u32 = EWMA_SCALE as u32;
const _: () = assert!(EWMA_SCALE <= u32::MAX as u64);

impl ToolStats {
    /// Fresh counters of the tool's entry number `incarnation`.
    pub(crate) fn counting(incarnation: u32) -> Self {
        Self {
            stripes: Box::default(),
            shadow_refused: AtomicU64::new(0),
            cancelled: AtomicU64::new(0),
            coordinated_refused: AtomicU64::new(0),
            max_duration_ns: AtomicU64::new(0),
            ewma: AtomicU32::new(EWMA_ONE),
            incarnation,
        }
    }

    /// Records one finished call (inlined: it is the record path's hot part).
    #[inline(always)]
    pub(crate) fn record(&self, success: bool, duration: Duration) {
        let stripe = self.stripe();
        // SeqCst: the registry's eviction handshake orders this count against the sweep (see
        // `ToolHealthRegistry::touch`); on x86-64 it costs what Relaxed costs.
        if success {
            stripe.success.fetch_add(1, SeqCst);
        } else {
            stripe.failure.fetch_add(1, SeqCst);
        }
        self.add_duration(stripe, duration_to_nanos(duration));
        self.step_ewma(success);
    }

    #[inline(always)]
    fn stripe(&self) -> &Stripe {
        &self.stripes[stripe_index()]
    }

    /// Records a call refused by the breaker: it has no duration and is not a failure.
    #[inline]
    pub(crate) fn record_refused(&self) {
        self.stripe().refused.fetch_add(1, Relaxed);
    }

    /// Records a refusal made while a coordinator has a say in the episode: a refusal, counted
    /// apart. One write: reads add the coordinated refusals to the striped ones.
    #[inline]
    pub(crate) fn record_coordinated_refused(&self) {
        self.coordinated_refused.fetch_add(1, Relaxed);
    }

    /// Records a call shadow mode let through that the breaker would have refused.
    #[inline]
    pub(crate) fn record_shadow_refused(&self) {
        self.shadow_refused.fetch_add(1, Relaxed);
    }

    /// Records a call that started and never finished (cancelled): no duration, no verdict.
    #[inline]
    pub(crate) fn record_cancelled(&self) {
        self.cancelled.fetch_add(1, Relaxed);
    }

    /// Back to a fresh tool's numbers, as reads see them. The counters the metrics export as
    /// counters (success, failure, refused, shadow refusals, cancellations) keep growing — a
    /// counter must never go down — and the reset records where they stand as the base reads
    /// subtract; the others (caller errors, the duration sum, the high-water mark, the EWMA)
    /// are set back. Not atomic as a whole: a call recorded concurrently may survive the reset
    /// in some counters.
    pub(crate) fn reset(&self) {
        let raw = self.raw();
        let [s0, s1] = &*self.stripes;
        for (slot, value) in s0.base.iter().zip([raw.success, raw.failure, raw.refused]) {
            slot.store(value, Relaxed);
        }
        for (slot, value) in
            s1.base
                .iter()
                .zip([raw.shadow_refused, raw.cancelled, raw.coordinated_refused])
        {
            slot.store(value, Relaxed);
        }
        for s in self.stripes.iter() {
            s.ignored.store(0, Relaxed);
            s.total_duration_ns.store(0, Relaxed);
        }
        self.max_duration_ns.store(0, Relaxed);
        self.ewma.store(EWMA_ONE, Relaxed);
    }

    /// Records a call that failed through the caller's fault (e.g. invalid arguments): counted,
    /// but neither a success nor a failure of the tool, and no duration.
    #[inline]
    pub(crate) fn record_ignored(&self) {
        self.stripe().ignored.fetch_add(1, Relaxed);
    }

    #[inline]
    fn add_duration(&self, stripe: &Stripe, ns: u64) {
        if ns != 0 {
            let _ = stripe
                .total_duration_ns
                .fetch_update(Relaxed, Relaxed, |t| Some(t.saturating_add(ns)));
        }
        // Read first: in the steady state the maximum is rarely raised, and a plain load is
        // much cheaper than a read-modify-write on a shared line.
        if ns > self.max_duration_ns.load(Relaxed) {
            self.max_duration_ns.fetch_max(ns, Relaxed);
        }
    }

    #[inline]
    fn step_ewma(&self, success: bool) {
        let cur = self.ewma.load(Relaxed);
        let target = if success { EWMA_ONE } else { 0 };
        if cur == target {
            return; // already at the fixed point: no write, no contention
        }
        let _ = self.ewma.fetch_update(Relaxed, Relaxed, |prev| {
            // At most `EWMA_SCALE`: fits.
            Some(u32::try_from(ewma_step(u64::from(prev), success)).unwrap_or(EWMA_ONE))
        });
    }

    /// The numbers since the last reset.
    pub(crate) fn snapshot(&self) -> StatsSnapshot {
        let raw = self.raw();
        let [s0, s1] = &*self.stripes;
        let base = |slot: &AtomicU64| slot.load(Relaxed);
        StatsSnapshot {
            success: raw.success.saturating_sub(base(&s0.base[0])),
            failure: raw.failure.saturating_sub(base(&s0.base[1])),
            refused: raw.refused.saturating_sub(base(&s0.base[2])),
            shadow_refused: raw.shadow_refused.saturating_sub(base(&s1.base[0])),
            cancelled: raw.cancelled.saturating_sub(base(&s1.base[1])),
            coordinated_refused: raw.coordinated_refused.saturating_sub(base(&s1.base[2])),
            ..raw
        }
    }

    /// The successes and failures since the tool's entry was created, resets ignored: the two
    /// counters of [`raw`](Self::raw), read alone (a coordinator reads them every round).
    pub(crate) fn calls(&self) -> (u64, u64) {
        self.stripes.iter().fold((0u64, 0u64), |(s, f), st| {
            (
                s.saturating_add(st.success.load(Relaxed)),
                f.saturating_add(st.failure.load(Relaxed)),
            )
        })
    }

    /// The counters since the tool's entry was created, resets ignored: what the metrics export
    /// as counters (they never go down).
    pub(crate) fn raw(&self) -> StatsSnapshot {
        let coordinated_refused = self.coordinated_refused.load(Relaxed);
        let sum = |field: fn(&Stripe) -> &AtomicU64| {
            self.stripes
                .iter()
                .fold(0u64, |acc, s| acc.saturating_add(field(s).load(Relaxed)))
        };
        StatsSnapshot {
            success: sum(|s| &s.success),
            failure: sum(|s| &s.failure),
            ignored: sum(|s| &s.ignored),
            // Every refusal, the coordinated ones included (counted only apart, see
            // `record_coordinated_refused`).
            refused: sum(|s| &s.refused).saturating_add(coordinated_refused),
            shadow_refused: self.shadow_refused.load(Relaxed),
            cancelled: self.cancelled.load(Relaxed),
            coordinated_refused,
            // Each stripe saturates and so does their sum: the total never wraps.
            total_duration_ns: sum(|s| &s.total_duration_ns),
            max_duration_ns: self.max_duration_ns.load(Relaxed),
            ewma: u64::from(self.ewma.load(Relaxed)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ewma_after(seq: &[bool]) -> u64 {
        seq.iter().fold(EWMA_SCALE, |e, &s| ewma_step(e, s))
    }

    #[test]
    fn ewma_matches_the_reference_sequence() {
        assert_eq!(ewma_after(&[false]), 700_000);
        assert_eq!(ewma_after(&[false, false]), 490_000);
        assert_eq!(ewma_after(&[false, false, true]), 643_000);
    }

    #[test]
    fn ewma_long_runs_reach_the_exact_bounds() {
        assert_eq!(ewma_after(&[true; 200]), EWMA_SCALE);
        let mut e = 0;
        for _ in 0..200 {
            e = ewma_step(e, true);
        }
        assert_eq!(
            e, EWMA_SCALE,
            "from 0.0 a run of successes reaches exactly 1.0"
        );
        assert_eq!(ewma_after(&[false; 200]), 0);
    }

    #[test]
    fn ewma_step_is_total_on_out_of_range_input() {
        assert_eq!(ewma_step(u64::MAX, true), EWMA_SCALE);
        assert_eq!(ewma_step(u64::MAX, false), 700_000);
    }

    #[test]
    fn one_failure_on_a_fresh_tool_scores_0_49() {
        let s = ToolStats::default();
        s.record(false, Duration::from_millis(1));
        let snap = s.snapshot();
        assert_eq!(snap.success_rate(), 0.0);
        assert!((snap.score() - 0.49).abs() < 1e-12);
    }

    #[test]
    fn classification_bounds_are_inclusive_on_the_upper_class() {
        assert_eq!(HealthStatus::classify(0.8, false), HealthStatus::Healthy);
        assert_eq!(
            HealthStatus::classify(0.799_999, false),
            HealthStatus::Degraded
        );
        assert_eq!(HealthStatus::classify(0.5, false), HealthStatus::Degraded);
        assert_eq!(
            HealthStatus::classify(0.499_999, false),
            HealthStatus::Unhealthy
        );
        assert_eq!(HealthStatus::classify(1.0, true), HealthStatus::Unhealthy);
    }

    #[test]
    fn durations_saturate_and_max_includes_failures() {
        let s = ToolStats::default();
        s.record(true, Duration::from_millis(10));
        s.record(false, Duration::from_millis(900));
        s.record(true, Duration::MAX);
        s.record(true, Duration::MAX);
        let snap = s.snapshot();
        assert_eq!(snap.total_duration_ns, u64::MAX);
        assert_eq!(snap.max_duration_ns, u64::MAX);
        assert_eq!(snap.total(), 4);

        let s = ToolStats::default();
        s.record(true, Duration::from_millis(10));
        s.record(false, Duration::from_millis(900));
        let snap = s.snapshot();
        assert_eq!(snap.max_duration_ns, 900_000_000);
        assert_eq!(snap.avg_duration(), Duration::from_millis(455));
    }

    #[test]
    fn stripes_add_up_across_threads() {
        let s = ToolStats::default();
        std::thread::scope(|scope| {
            for t in 0..4u64 {
                let s = &s;
                scope.spawn(move || {
                    for _ in 0..1_000 {
                        s.record(t % 2 == 0, Duration::from_nanos(t + 1));
                        s.record_refused();
                    }
                    s.record_ignored();
                });
            }
        });
        let snap = s.snapshot();
        assert_eq!((snap.success, snap.failure), (2_000, 2_000));
        assert_eq!((snap.refused, snap.ignored), (4_000, 4));
        assert_eq!(snap.total_duration_ns, 10_000);
        assert_eq!(snap.max_duration_ns, 4);
    }

    #[test]
    fn a_reset_zeroes_reads_and_keeps_the_raw_counters_growing() {
        let s = ToolStats::default();
        s.record(true, Duration::from_millis(10));
        s.record(false, Duration::from_millis(20));
        s.record_refused();
        s.record_ignored();
        s.record_shadow_refused();
        s.reset();
        let snap = s.snapshot();
        assert_eq!(
            (
                snap.total(),
                snap.refused,
                snap.ignored,
                snap.shadow_refused
            ),
            (0, 0, 0, 0)
        );
        assert_eq!((snap.total_duration_ns, snap.max_duration_ns), (0, 0));
        assert_eq!((snap.ewma, snap.score()), (EWMA_SCALE, 1.0));
        s.record(false, Duration::from_millis(5));
        let (snap, raw) = (s.snapshot(), s.raw());
        assert_eq!((snap.success, snap.failure), (0, 1));
        assert_eq!((raw.success, raw.failure, raw.refused), (1, 2, 1));
        assert_eq!(snap.total_duration_ns, 5_000_000);
    }

    #[test]
    fn latency_never_feeds_the_score() {
        let fast = ToolStats::default();
        let slow = ToolStats::default();
        for _ in 0..10 {
            fast.record(true, Duration::from_micros(1));
            slow.record(true, Duration::from_secs(60));
        }
        assert_eq!(fast.snapshot().score(), slow.snapshot().score());
    }

    #[test]
    fn no_calls_means_rate_one_and_zero_average() {
        let snap = ToolStats::default().snapshot();
        assert_eq!(snap.success_rate(), 1.0);
        assert_eq!(snap.avg_duration(), Duration::ZERO);
        assert_eq!(snap.score(), 1.0);
    }
}
