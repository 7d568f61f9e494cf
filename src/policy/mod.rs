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
//!   window counts [`WINDOW_BUCKETS`] time buckets of atomics and the one being filled, so every
//!   call of the last `window` counts (and none older than `window` plus one bucket). Closing the
//!   breaker (its probe succeeded) or resetting the tool starts a fresh window, as resilience4j
//!   and Polly do: the failures that opened it belong to the episode that ended. Recording and reading are
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

mod validate;
mod window;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::ticks::Ticks;

pub use validate::SettingError;
pub(crate) use window::RateWindow;
pub use window::WINDOW_BUCKETS;

/// Circuit breaker settings.
///
/// ```
/// use std::time::Duration;
/// use tool_health::{CircuitBreakerConfig, ToolHealthRegistry};
///
/// let registry = ToolHealthRegistry::with_config(CircuitBreakerConfig {
///     failure_threshold: 5,                       // 0 disables tripping (counting continues)
///     recovery_duration: Duration::from_secs(10), // cooldown before the probe
///     probe_timeout: Duration::from_secs(20),     // probe lease; 0 disables the lease
/// });
/// # let _ = registry;
/// ```
///
/// Durations have millisecond resolution (rounded up); a duration too long to represent
/// (beyond about 34 years, `Duration::MAX` included) means "never".
///
/// Every value of every field is valid: each has a documented meaning (a threshold of 0
/// disables tripping, a recovery of 0 probes at once, a lease of 0 disables the lease, a
/// duration beyond the representable range means never), so a config is never refused. The
/// rest of a [`ToolPolicy`] has ranges ([`ToolPolicy::validate`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CircuitBreakerConfig {
    /// Consecutive failures that trip a closed breaker. `0` disables tripping.
    pub failure_threshold: u32,
    /// How long an open breaker refuses calls after the last failure before granting a probe.
    pub recovery_duration: Duration,
    /// How long a probe may stay unanswered before its lease expires and the breaker re-opens.
    /// `Duration::ZERO` disables the lease (a probe that never reports then keeps the breaker
    /// half-open until it does).
    pub probe_timeout: Duration,
}

impl Default for CircuitBreakerConfig {
    fn default() -> Self {
        Self {
            failure_threshold: 3,
            recovery_duration: Duration::from_secs(30),
            probe_timeout: Duration::from_secs(30),
        }
    }
}

/// What trips a closed breaker.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[non_exhaustive]
pub enum TripPolicy {
    /// Trip after `failure_threshold` consecutive failures (the default).
    #[default]
    ConsecutiveFailures,
    /// Trip when the failure ratio over the sliding `window` is at least `ratio` with at least
    /// `min_calls` calls in the window. `failure_threshold` is then not used for tripping (the
    /// consecutive counter still counts).
    FailureRate {
        /// Failure ratio that trips, inclusive: finite, `0 < ratio ≤ 1` (anything else is
        /// refused: see [`ToolPolicy::validate`]).
        ratio: f64,
        /// Fewest calls in the window before the ratio is trusted (`0` and `1` both mean: from
        /// the first call).
        min_calls: u64,
        /// Length of the sliding window: above zero (shorter than 8 ms counts as 8 ms).
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
    /// Factor applied per level (default 2): at least 1 (1: no growth).
    pub multiplier: u32,
    /// Cap on the open duration, jitter excluded (default 10 minutes). A cap below the
    /// breaker's `recovery_duration` leaves the recovery as it is (no growth).
    pub max_recovery: Duration,
    /// A trip that comes later than this after the breaker last closed starts again at level 0
    /// (default 5 minutes).
    pub stable_after: Duration,
    /// Upper bound of the jitter added to each opening (default none): zero unless
    /// [`jitter`](Self::jitter) is set.
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
///
/// Fields have ranges ([`ToolPolicy::validate`] checks them; the registry's setters refuse a
/// policy outside them).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolPolicy {
    /// Threshold, recovery and probe lease.
    pub breaker: CircuitBreakerConfig,
    /// What trips the breaker.
    pub trip: TripPolicy,
    /// Calls slower than this count as failures for the breaker (not for the stats): `None`, or
    /// a duration above zero and at most [`ToolPolicy::MAX_SLOW_CALL`] (about 73 minutes). Compared at a
    /// resolution of 1.024 µs.
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

/// [`ToolPolicy::slow_call_units`] of a policy without a slow-call threshold: no duration
/// (saturated to 32 bits) exceeds it.
pub(crate) const SLOW_CALL_OFF: u32 = u32::MAX;
/// A slow-call unit is 2^10 ns.
pub(crate) const SLOW_CALL_SHIFT: u32 = 10;
impl ToolPolicy {
    /// The longest slow-call threshold, about 73 minutes (4,398 s): the breaker keeps the
    /// threshold in 32 bits of 1,024 ns units.
    pub const MAX_SLOW_CALL: Duration = Duration::from_nanos(((u32::MAX - 1) as u64) << 10);

    /// The slow-call threshold in units of 1,024 ns (rounded down: a call is slow when its
    /// duration in those units exceeds it), [`SLOW_CALL_OFF`] when disabled. 32 bits, so the
    /// breaker keeps it beside its other 32-bit fields (memory per tool is a budget).
    pub(crate) fn slow_call_units(&self) -> u32 {
        self.slow_call.map_or(SLOW_CALL_OFF, |d| {
            (crate::clock::duration_to_nanos(d) >> SLOW_CALL_SHIFT)
                .min(u64::from(SLOW_CALL_OFF - 1)) as u32
        })
    }

    /// Recovery at a backoff level, without jitter.
    pub(crate) fn recovery_ticks(&self, level: u32) -> Ticks {
        let base = Ticks::span(self.breaker.recovery_duration);
        match &self.backoff {
            None => base,
            Some(b) => {
                let cap = Ticks::span(b.max_recovery).max(base);
                let factor = u64::from(b.multiplier.max(1))
                    .checked_pow(level)
                    .unwrap_or(u64::MAX);
                Ticks::new(base.get().saturating_mul(factor)).min(cap)
            }
        }
    }

    /// Recovery for an opening at `level`, jitter included.
    pub(crate) fn opening_ticks(&self, level: u32) -> Ticks {
        let base = self.recovery_ticks(level);
        match &self.backoff {
            Some(Backoff {
                jitter: Some(j),
                max_jitter,
                ..
            }) if !max_jitter.is_zero() => {
                let extra = j.jitter(*max_jitter).min(*max_jitter);
                base.after(Ticks::span(extra))
            }
            _ => base,
        }
    }
}

impl TripPolicy {
    /// How many time buckets a [`FailureRate`](Self::FailureRate) window is counted in: 8.
    pub const WINDOW_BUCKETS: usize = WINDOW_BUCKETS;

    /// Whether a window with these counts trips.
    pub(crate) fn rate_trips(ratio: f64, min_calls: u64, failures: u64, calls: u64) -> bool {
        calls > 0 && calls >= min_calls && failures as f64 >= ratio * calls as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let secs: Vec<_> = (0..5).map(|l| p.recovery_ticks(l).get() / 1000).collect();
        assert_eq!(secs, [10, 20, 40, 60, 60]);
        assert_eq!(p.recovery_ticks(u32::MAX), Ticks::new(60_000));
    }

    #[test]
    fn rate_trip_rule_is_inclusive_and_needs_min_calls() {
        assert!(TripPolicy::rate_trips(0.5, 4, 2, 4));
        assert!(!TripPolicy::rate_trips(0.5, 4, 1, 4));
        assert!(!TripPolicy::rate_trips(0.5, 5, 4, 4));
        assert!(!TripPolicy::rate_trips(0.0, 0, 0, 0));
    }
}
