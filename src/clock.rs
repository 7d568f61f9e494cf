//! Time, behind a trait.
//!
//! Every instant the registry uses (cooldowns, probe leases, call durations measured by the
//! tracing layer) comes from one [`Clock`] owned by the registry. Production code uses the
//! monotonic [`SystemClock`]; tests use [`ManualClock`] and move time by hand, so no test ever
//! sleeps and every boundary (elapsed exactly equal to a cooldown) can be pinned.
//!
//! ```
//! use std::time::Duration;
//! use tool_health::{ManualClock, ToolHealthRegistry};
//!
//! let clock = ManualClock::new();
//! let registry = ToolHealthRegistry::builder().clock(clock.clone()).build();
//! registry.record_failure("search", Duration::from_millis(5));
//! clock.advance(Duration::from_secs(30)); // the registry sees the same time line
//! ```

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Waker;
use std::time::Duration;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
use std::time::Instant;

/// A source of monotonic time.
///
/// `now` returns the time elapsed since an arbitrary, fixed origin chosen by the clock. It must
/// never go backwards; the registry tolerates a clock that does (instants are clamped, never
/// subtracted into an underflow) but its cooldowns are then only as good as the clock.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// Monotonic time since this clock's origin.
    fn now(&self) -> Duration;

    /// A cheaper reading of the same time line that may lag [`now`](Clock::now) by a bounded
    /// amount and never runs ahead of it.
    ///
    /// The registry uses it only where a late reading errs on the safe side: to find out that
    /// an open breaker is still cooling down, on every refused call. When it says a cooldown has
    /// run out, the registry reads [`now`](Clock::now) before changing anything, so a coarse
    /// reading can keep a breaker open for at most its lag past the cooldown, never end the
    /// cooldown early. The default is [`now`](Clock::now) itself (exact); [`SystemClock`]
    /// overrides it on Linux with `CLOCK_MONOTONIC_COARSE`.
    fn now_coarse(&self) -> Duration {
        self.now()
    }

    /// Asks for `waker` to be woken the next time this clock's time is moved by hand, and
    /// says whether the clock can do that.
    ///
    /// A timer that waits for an instant of the registry's time line (the end of a cooldown,
    /// for the MCP client's tool-list subscription, feature `mcp`) sleeps in real time and, on
    /// a clock that jumps, also wakes when it jumps, then reads [`now`](Clock::now) again. A
    /// clock that moves by itself has nothing to report: the default registers nothing and
    /// returns `false`. [`ManualClock`] wakes every waker registered so far on each
    /// [`advance`](ManualClock::advance) and [`set`](ManualClock::set), so tests drive such
    /// timers without sleeping.
    fn wake_when_moved(&self, waker: &Waker) -> bool {
        let _ = waker;
        false
    }
}

/// The default clock: the operating system's monotonic clock, with its origin at construction.
///
/// On Linux it reads `CLOCK_MONOTONIC` (what [`Instant`](std::time::Instant) reads) for [`Clock::now`] and
/// `CLOCK_MONOTONIC_COARSE` for [`Clock::now_coarse`]: the same time line, updated once per
/// kernel tick (1–4 ms, `clock_getres` tells), and several times cheaper to read in virtual
/// machines whose time-stamp counter is slow to read. Elsewhere both are [`Instant`](std::time::Instant)
/// readings.
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    origin: Origin,
}

#[cfg(any(target_os = "linux", target_os = "android"))]
type Origin = Duration;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
type Origin = Instant;

#[cfg(any(target_os = "linux", target_os = "android"))]
#[inline]
fn read(id: rustix::time::ClockId) -> Duration {
    let t = rustix::time::clock_gettime(id);
    // The kernel's monotonic readings are non-negative and their nanoseconds below 10^9.
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let nanos = u32::try_from(t.tv_nsec).unwrap_or(0).min(999_999_999);
    Duration::new(secs, nanos)
}

impl SystemClock {
    /// A system clock whose origin is now.
    pub fn new() -> Self {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        let origin = read(rustix::time::ClockId::Monotonic);
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        let origin = Instant::now();
        Self { origin }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
impl Clock for SystemClock {
    #[inline]
    fn now(&self) -> Duration {
        read(rustix::time::ClockId::Monotonic).saturating_sub(self.origin)
    }

    #[inline]
    fn now_coarse(&self) -> Duration {
        read(rustix::time::ClockId::MonotonicCoarse).saturating_sub(self.origin)
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
impl Clock for SystemClock {
    #[inline]
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }
}

/// A clock that only moves when told to: the test double for everything time-related.
///
/// Clones share one time line, so a test keeps a clone, hands another to the registry, and
/// advances time from outside. It starts at zero.
///
/// ```
/// use std::time::Duration;
/// use tool_health::{Clock, ManualClock};
///
/// let clock = ManualClock::new();
/// let seen_by_registry = clock.clone();
/// clock.advance(Duration::from_millis(1500));
/// assert_eq!(seen_by_registry.now(), Duration::from_millis(1500));
/// ```
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    // Nanoseconds since the origin. Relaxed is enough: the clock is one independent value and
    // callers that need happens-before between threads get it from their own synchronisation.
    nanos: Arc<AtomicU64>,
    /// Timers waiting for the time to move ([`Clock::wake_when_moved`]); woken, and forgotten,
    /// on every move. Touched only by timers and moves, never by a reading.
    waiting: Arc<Mutex<Vec<Waker>>>,
}

impl ManualClock {
    /// A manual clock at time zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves time forward by `by` (saturating at `u64::MAX` nanoseconds, about 584 years).
    pub fn advance(&self, by: Duration) {
        let by = duration_to_nanos(by);
        // fetch_update never fails with a closure that always returns Some.
        let _ = self
            .nanos
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                Some(n.saturating_add(by))
            });
        self.wake_waiting();
    }

    /// Sets the time to `to` if that is later than now; a manual clock never goes backwards.
    pub fn set(&self, to: Duration) {
        self.nanos
            .fetch_max(duration_to_nanos(to), Ordering::Relaxed);
        self.wake_waiting();
    }

    /// Wakes the timers waiting for a move (after it: a woken timer reads the new time).
    fn wake_waiting(&self) {
        let woken =
            std::mem::take(&mut *self.waiting.lock().unwrap_or_else(PoisonError::into_inner));
        for waker in woken {
            waker.wake();
        }
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::Relaxed))
    }

    fn wake_when_moved(&self, waker: &Waker) -> bool {
        let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        // One entry per task: a timer polled again replaces its own waker.
        if !waiting.iter().any(|w| w.will_wake(waker)) {
            waiting.push(waker.clone());
        }
        true
    }
}

/// Nanoseconds in `d`, clamped to `u64::MAX`.
#[inline]
pub(crate) fn duration_to_nanos(d: Duration) -> u64 {
    // 64-bit arithmetic: cheaper on the record path than `as_nanos()`'s u128.
    d.as_secs()
        .checked_mul(1_000_000_000)
        .and_then(|n| n.checked_add(u64::from(d.subsec_nanos())))
        .unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_starts_at_zero_and_clones_share_time() {
        let a = ManualClock::new();
        let b = a.clone();
        assert_eq!(b.now(), Duration::ZERO);
        a.advance(Duration::from_secs(3));
        assert_eq!(b.now(), Duration::from_secs(3));
    }

    #[test]
    fn manual_clock_saturates_and_never_goes_back() {
        let c = ManualClock::new();
        c.advance(Duration::MAX);
        c.advance(Duration::MAX);
        assert_eq!(c.now(), Duration::from_nanos(u64::MAX));
        c.set(Duration::ZERO);
        assert_eq!(c.now(), Duration::from_nanos(u64::MAX));
    }

    #[test]
    fn system_clock_coarse_reading_never_runs_ahead_and_lags_little() {
        let c = SystemClock::new();
        for _ in 0..10_000 {
            let coarse = c.now_coarse();
            let exact = c.now();
            assert!(coarse <= exact, "coarse {coarse:?} ahead of {exact:?}");
            // One kernel tick is at most 10 ms (HZ = 100); allow for descheduling between reads.
            assert!(
                exact - coarse < Duration::from_millis(100),
                "{coarse:?} vs {exact:?}"
            );
        }
    }

    #[test]
    fn manual_clock_wakes_waiting_timers_on_every_move() {
        use std::sync::atomic::AtomicUsize;
        use std::task::Wake;

        #[derive(Default)]
        struct Count(AtomicUsize);
        impl Wake for Count {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let count = Arc::new(Count::default());
        let waker = Waker::from(count.clone());
        let c = ManualClock::new();
        assert!(c.wake_when_moved(&waker));
        assert!(c.wake_when_moved(&waker), "registered once per task");
        c.advance(Duration::from_secs(1));
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        c.advance(Duration::from_secs(1));
        assert_eq!(
            count.0.load(Ordering::SeqCst),
            1,
            "woken once, then forgotten"
        );
        assert!(c.wake_when_moved(&waker));
        c.set(Duration::from_secs(10));
        assert_eq!(count.0.load(Ordering::SeqCst), 2);
        assert!(!SystemClock::new().wake_when_moved(&waker));
    }

    #[test]
    fn manual_clock_coarse_reading_is_exact() {
        let c = ManualClock::new();
        c.advance(Duration::from_nanos(1_234_567));
        assert_eq!(c.now_coarse(), c.now());
    }

    #[test]
    fn system_clock_is_monotonic() {
        let c = SystemClock::new();
        let a = c.now();
        let b = c.now();
        assert!(b >= a);
    }
}
