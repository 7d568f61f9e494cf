//! Per-tool breaking policy: what trips a breaker, how long it stays open, what counts as slow.
//!
//! The registry has a default [`ToolPolicy`] (its breaker part is the [`CircuitBreakerConfig`]
//! of [`ToolHealthRegistry::set_config`](crate::ToolHealthRegistry::set_config)) and may hold
//! per-tool overrides ([`ToolHealthRegistry::set_tool_policy`](crate::ToolHealthRegistry::set_tool_policy)).
//!
//! * [`TripPolicy::ConsecutiveFailures`] (the default): trip after `failure_threshold` failures
//!   in a row.
//! * [`TripPolicy::FailureRate`]: trip when, over a sliding time window, the failure ratio is at
//!   least `ratio` with at least `min_calls` calls (the resilience4j / Polly v8 model). The
//!   window is a ring of [`WINDOW_BUCKETS`] time buckets of atomics: recording and reading are
//!   O(1) (a fixed number of buckets), lock-free, and allocation-free after the policy is first
//!   applied to a tool. Under concurrent bucket rollover a few calls may land in a bucket as it
//!   is being recycled: the ratio is approximate at bucket edges, never unbounded.
//! * `slow_call`: a call slower than this counts as a *failure for the breaker* while the stats
//!   keep its true outcome (a slow success stays a success in the success rate and EWMA).
//! * [`Backoff`]: a tool that re-trips soon after closing, or fails its probe, stays open longer
//!   each time: `recovery × multiplier^level`, capped, plus optional jitter from an injectable
//!   [`JitterSource`]. A trip after `stable_after` of calm resets the level.
//!
//! ```
//! use std::time::Duration;
//! use tool_health::{Apply, Backoff, ToolHealthRegistry, ToolPolicy, TripPolicy};
//!
//! let registry = ToolHealthRegistry::new();
//! registry.set_tool_policy(
//!     "vector_db",
//!     ToolPolicy {
//!         trip: TripPolicy::FailureRate {
//!             ratio: 0.5,
//!             min_calls: 20,
//!             window: Duration::from_secs(60),
//!         },
//!         slow_call: Some(Duration::from_secs(5)),
//!         backoff: Some(Backoff::default()),
//!         ..ToolPolicy::default()
//!     },
//!     Apply::NewBreakers,
//! );
//! ```

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use crate::breaker::{ticks_of_duration, NEVER};
use crate::registry::CircuitBreakerConfig;

/// How many time buckets a failure-rate window has.
pub const WINDOW_BUCKETS: usize = 8;

/// What trips a closed breaker.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[non_exhaustive]
pub enum TripPolicy {
    /// Trip after `failure_threshold` consecutive failures (the default).
    #[default]
    ConsecutiveFailures,
    /// Trip when the failure ratio over the sliding `window` is at least `ratio` (0.0–1.0) with
    /// at least `min_calls` calls in the window. `failure_threshold` is then not used for
    /// tripping (the consecutive counter still counts).
    FailureRate {
        /// Failure ratio that trips, inclusive.
        ratio: f64,
        /// Fewest calls in the window before the ratio is trusted.
        min_calls: u64,
        /// Length of the sliding window.
        window: Duration,
    },
}

/// A source of randomness for backoff jitter, injectable so tests stay deterministic.
pub trait JitterSource: Send + Sync + fmt::Debug + 'static {
    /// A duration in `[0, max]`.
    fn jitter(&self, max: Duration) -> Duration;
}

/// Exponential backoff of the open duration.
#[derive(Debug, Clone)]
pub struct Backoff {
    /// Factor applied per level (default 2).
    pub multiplier: u32,
    /// Cap on the open duration, jitter excluded (default 10 minutes).
    pub max_recovery: Duration,
    /// A trip that comes later than this after the breaker last closed starts again at level 0
    /// (default 5 minutes).
    pub stable_after: Duration,
    /// Upper bound of the jitter added to each opening (default none).
    pub max_jitter: Duration,
    /// Where jitter comes from; `None` adds none.
    pub jitter: Option<Arc<dyn JitterSource>>,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            multiplier: 2,
            max_recovery: Duration::from_secs(600),
            stable_after: Duration::from_secs(300),
            max_jitter: Duration::ZERO,
            jitter: None,
        }
    }
}

impl PartialEq for Backoff {
    fn eq(&self, other: &Self) -> bool {
        self.multiplier == other.multiplier
            && self.max_recovery == other.max_recovery
            && self.stable_after == other.stable_after
            && self.max_jitter == other.max_jitter
            && match (&self.jitter, &other.jitter) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                _ => false,
            }
    }
}

/// Everything that decides how one tool's breaker behaves.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolPolicy {
    /// Threshold, recovery and probe lease.
    pub breaker: CircuitBreakerConfig,
    /// What trips the breaker.
    pub trip: TripPolicy,
    /// Calls slower than this count as failures for the breaker (not for the stats).
    pub slow_call: Option<Duration>,
    /// Exponential backoff of the open duration; `None`: always `recovery_duration`.
    pub backoff: Option<Backoff>,
}

impl From<CircuitBreakerConfig> for ToolPolicy {
    fn from(breaker: CircuitBreakerConfig) -> Self {
        Self {
            breaker,
            ..Self::default()
        }
    }
}

/// When a policy change reaches breakers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Apply {
    /// Only breakers created from now on (the default behaviour of config changes).
    NewBreakers,
    /// Also the tool's existing breaker, at once (its state and counters are kept).
    Now,
}

impl ToolPolicy {
    /// The slow-call threshold in nanoseconds, `u64::MAX` when disabled.
    pub(crate) fn slow_call_nanos(&self) -> u64 {
        self.slow_call
            .map_or(u64::MAX, crate::clock::duration_to_nanos)
    }

    /// Recovery in ticks at a backoff level, without jitter.
    pub(crate) fn recovery_ticks(&self, level: u32) -> u64 {
        let base = ticks_of_duration(self.breaker.recovery_duration);
        match &self.backoff {
            None => base,
            Some(b) => {
                let cap = ticks_of_duration(b.max_recovery).max(base);
                let factor = u64::from(b.multiplier.max(1))
                    .checked_pow(level)
                    .unwrap_or(u64::MAX);
                base.saturating_mul(factor).min(cap).min(NEVER)
            }
        }
    }

    /// Recovery in ticks for an opening at `level`, jitter included.
    pub(crate) fn opening_ticks(&self, level: u32) -> u64 {
        let base = self.recovery_ticks(level);
        match &self.backoff {
            Some(Backoff {
                jitter: Some(j),
                max_jitter,
                ..
            }) if !max_jitter.is_zero() => {
                let extra = j.jitter(*max_jitter).min(*max_jitter);
                if base >= NEVER {
                    NEVER
                } else {
                    base.saturating_add(ticks_of_duration(extra)).min(NEVER)
                }
            }
            _ => base,
        }
    }
}

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
        let ticks = ticks_of_duration(window).clamp(WINDOW_BUCKETS as u64, NEVER);
        Self {
            width: ticks.div_ceil(WINDOW_BUCKETS as u64),
            buckets: Default::default(),
        }
    }

    fn bucket(&self, now: u64) -> &Bucket {
        let period = now / self.width + 1;
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

    pub(crate) fn add(&self, now: u64, success: bool) {
        let b = self.bucket(now);
        if success {
            b.success.fetch_add(1, Relaxed);
        } else {
            b.failure.fetch_add(1, Relaxed);
        }
    }

    /// (failures, calls) over the window ending at `now`.
    pub(crate) fn counts(&self, now: u64) -> (u64, u64) {
        let current = now / self.width + 1;
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

impl TripPolicy {
    /// Whether a window with these counts trips.
    pub(crate) fn rate_trips(ratio: f64, min_calls: u64, failures: u64, calls: u64) -> bool {
        calls > 0 && calls >= min_calls && failures as f64 >= ratio * calls as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_forgets_old_buckets() {
        let w = RateWindow::new(Duration::from_secs(8)); // 1 s buckets
        w.add(0, false);
        w.add(500, true);
        assert_eq!(w.counts(999), (1, 2));
        w.add(3_000, false);
        assert_eq!(w.counts(7_999), (2, 3));
        assert_eq!(w.counts(8_000), (1, 1), "the first bucket slid out");
        assert_eq!(w.counts(20_000), (0, 0));
        w.add(20_000, true);
        assert_eq!(w.counts(20_000), (0, 1), "a recycled bucket starts empty");
    }

    #[test]
    fn backoff_grows_and_caps() {
        let p = ToolPolicy {
            breaker: CircuitBreakerConfig {
                recovery_duration: Duration::from_secs(10),
                ..Default::default()
            },
            backoff: Some(Backoff {
                max_recovery: Duration::from_secs(60),
                ..Default::default()
            }),
            ..Default::default()
        };
        let secs: Vec<_> = (0..5).map(|l| p.recovery_ticks(l) / 1000).collect();
        assert_eq!(secs, [10, 20, 40, 60, 60]);
        assert_eq!(p.recovery_ticks(u32::MAX), 60_000);
    }

    #[test]
    fn rate_trip_rule_is_inclusive_and_needs_min_calls() {
        assert!(TripPolicy::rate_trips(0.5, 4, 2, 4));
        assert!(!TripPolicy::rate_trips(0.5, 4, 1, 4));
        assert!(!TripPolicy::rate_trips(0.5, 5, 4, 4));
        assert!(!TripPolicy::rate_trips(0.0, 0, 0, 0));
    }
}
