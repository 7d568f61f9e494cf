//! The failure-rate window: success and failure counts in a ring of time buckets of atomics.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::ticks::Ticks;

/// How many time buckets a failure-rate window has.
pub const WINDOW_BUCKETS: usize = 8;

/// A sliding window of success and failure counts in time buckets.
#[derive(Debug)]
pub(crate) struct RateWindow {
    width: u64,
    buckets: [Bucket; WINDOW_BUCKETS],
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

    fn bucket(&self, now: Ticks) -> &Bucket {
        let period = now.get() / self.width + 1;
        let b = &self.buckets[(period % WINDOW_BUCKETS as u64) as usize];
        let seen = b.period.load(Relaxed);
        if seen != period
            && b.period
                .compare_exchange(seen, period, Relaxed, Relaxed)
                .is_ok()
        {
            b.success.store(0, Relaxed);
            b.failure.store(0, Relaxed);
        }
        b
    }

    pub(crate) fn add(&self, now: Ticks, success: bool) {
        let b = self.bucket(now);
        if success {
            b.success.fetch_add(1, Relaxed);
        } else {
            b.failure.fetch_add(1, Relaxed);
        }
    }

    /// (failures, calls) over the window ending at `now`.
    pub(crate) fn counts(&self, now: Ticks) -> (u64, u64) {
        let current = now.get() / self.width + 1;
        let oldest = current.saturating_sub(WINDOW_BUCKETS as u64 - 1);
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
            w.counts(Ticks::new(8_000)),
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
    }
}
