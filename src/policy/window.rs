//! The failure-rate window: success and failure counts in a ring of time buckets of atomics.
//!
//! A window of length `W` has [`WINDOW_BUCKETS`] buckets of `W / WINDOW_BUCKETS` each. It counts
//! the bucket `now` falls in (partly elapsed) and the [`WINDOW_BUCKETS`] full buckets before it,
//! so every call of the last `W` counts, and none older than `W` plus one bucket: the ring
//! holds one slot more than the window has buckets. (With only `WINDOW_BUCKETS` slots, the
//! current bucket and seven full ones, a window forgot calls between 7/8 and 8/8 of `W` old.)

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::ticks::Ticks;

/// How many time buckets a failure-rate window has: it counts these full buckets and the one
/// the current instant falls in.
pub const WINDOW_BUCKETS: usize = 8;

/// Slots of the ring: the full buckets and the current one.
const SLOTS: usize = WINDOW_BUCKETS + 1;

/// A sliding window of success and failure counts in time buckets.
#[derive(Debug)]
pub(crate) struct RateWindow {
    width: u64,
    buckets: [Bucket; SLOTS],
}

#[derive(Debug, Default)]
struct Bucket {
    /// Which bucket period (now / width) the counts belong to, plus one (0: never used).
    period: AtomicU64,
    success: AtomicU64,
    failure: AtomicU64,
}

impl RateWindow {
    pub(crate) fn new(window: Duration) -> Self {
        let ticks = Ticks::span(window).get().max(WINDOW_BUCKETS as u64);
        Self {
            width: ticks.div_ceil(WINDOW_BUCKETS as u64),
            buckets: Default::default(),
        }
    }

    /// The bucket of `now`, recycled for it if it held an older period; `None` when it already
    /// holds a newer one (a reading that lags a whole ring behind another thread's: too old to
    /// count, and recycling the bucket backwards would wipe newer counts).
    fn bucket(&self, now: Ticks) -> Option<&Bucket> {
        let period = now.get() / self.width + 1;
        let b = &self.buckets[(period % SLOTS as u64) as usize];
        let mut seen = b.period.load(Relaxed);
        while seen != period {
            if seen > period {
                return None;
            }
            match b.period.compare_exchange(seen, period, Relaxed, Relaxed) {
                Ok(_) => {
                    b.success.store(0, Relaxed);
                    b.failure.store(0, Relaxed);
                    break;
                }
                Err(actual) => seen = actual,
            }
        }
        Some(b)
    }

    pub(crate) fn add(&self, now: Ticks, success: bool) {
        let Some(b) = self.bucket(now) else {
            return;
        };
        if success {
            b.success.fetch_add(1, Relaxed);
        } else {
            b.failure.fetch_add(1, Relaxed);
        }
    }

    /// (failures, calls) over the window ending at `now`: the current bucket and the
    /// [`WINDOW_BUCKETS`] before it.
    pub(crate) fn counts(&self, now: Ticks) -> (u64, u64) {
        let current = now.get() / self.width + 1;
        // Periods start at 1: a cleared bucket (period 0) never counts, also within the first
        // window's length of the clock's origin.
        let oldest = current.saturating_sub(WINDOW_BUCKETS as u64).max(1);
        self.buckets
            .iter()
            .filter(|b| (oldest..=current).contains(&b.period.load(Relaxed)))
            .fold((0, 0), |(f, n), b| {
                let (s, fl) = (b.success.load(Relaxed), b.failure.load(Relaxed));
                (f + fl, n + s + fl)
            })
    }

    pub(crate) fn clear(&self) {
        for b in &self.buckets {
            b.period.store(0, Relaxed);
            b.success.store(0, Relaxed);
            b.failure.store(0, Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_forgets_old_buckets() {
        let w = RateWindow::new(Duration::from_secs(8)); // 1 s buckets
        w.add(Ticks::new(0), false);
        w.add(Ticks::new(500), true);
        assert_eq!(w.counts(Ticks::new(999)), (1, 2));
        w.add(Ticks::new(3_000), false);
        assert_eq!(w.counts(Ticks::new(7_999)), (2, 3));
        assert_eq!(
            w.counts(Ticks::new(8_999)),
            (2, 3),
            "a call younger than the window still counts"
        );
        assert_eq!(
            w.counts(Ticks::new(9_000)),
            (1, 1),
            "the first bucket slid out"
        );
        assert_eq!(w.counts(Ticks::new(20_000)), (0, 0));
        w.add(Ticks::new(20_000), true);
        assert_eq!(
            w.counts(Ticks::new(20_000)),
            (0, 1),
            "a recycled bucket starts empty"
        );
        // A cleared window counts nothing, also near the clock's origin.
        let early = RateWindow::new(Duration::from_secs(60));
        early.add(Ticks::new(1_000), false);
        early.clear();
        assert_eq!(early.counts(Ticks::new(2_000)), (0, 0));
        // A lagging reading a whole ring behind never wipes the newer bucket.
        w.add(Ticks::new(20_000 - 9_000), false);
        assert_eq!(w.counts(Ticks::new(20_000)), (0, 1));
    }
}
