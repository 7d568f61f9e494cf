//! Checking settings: [`SettingError`], and the ranges of every policy field.
//!
//! Every setting the registry takes is checked where it is taken, the way fleet mode checks
//! its own (`fleet::FleetBuilder`, feature `fleet`): a value
//! outside its range is an error that names the field and the range, never a breaker that
//! silently never (or always) trips. Each setting has a fallible form that returns the error
//! (`try_build`, `try_set_config`, `try_set_default_policy`, `try_set_tool_policy`,
//! [`ToolPolicy::validate`]); the infallible forms of the same names panic with the same text
//! (see `RELIABILITY.md`, "Against a hostile model", for why a panic rather than a clamp).
//!
//! | field | allowed | why the rest is refused |
//! |---|---|---|
//! | `breaker.failure_threshold` | any (`0` disables tripping) | — |
//! | `breaker.recovery_duration`, `breaker.probe_timeout` | any (`0`: no cooldown / no lease; beyond ≈ 34.8 years: never) | — |
//! | `trip.ratio` (`FailureRate`) | finite, `0 < ratio ≤ 1` | NaN or above 1 never trips; 0 or below trips on successes |
//! | `trip.min_calls` | any (`0` and `1` both mean: from the first call) | — |
//! | `trip.window` | above zero | a window of no time counts nothing |
//! | `slow_call` | `None`, or above zero | zero makes every success a failure |
//! | `backoff.multiplier` | at least 1 | 0 was taken for 1 without a word |
//! | `backoff.max_jitter` | zero unless `backoff.jitter` is set | a bound without a source adds no jitter |
//! | `backoff.max_recovery`, `backoff.stable_after` | any (a cap below the recovery leaves the recovery as it is) | — |

use std::fmt;
use std::time::Duration;

use super::{Backoff, ToolPolicy, TripPolicy};

/// A setting outside its allowed range: which field, what was given, what is allowed.
///
/// ```
/// use std::time::Duration;
/// use tool_health::{ToolPolicy, TripPolicy};
///
/// let policy = ToolPolicy {
///     trip: TripPolicy::FailureRate { ratio: 1.5, min_calls: 10, window: Duration::from_secs(60) },
///     ..ToolPolicy::default()
/// };
/// let err = policy.validate().unwrap_err();
/// assert_eq!(err.field(), "trip.ratio");
/// assert_eq!(
///     err.to_string(),
///     "invalid setting `trip.ratio`: 1.5; allowed: a finite number with 0 < ratio ≤ 1"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingError {
    field: &'static str,
    found: String,
    allowed: String,
}

impl SettingError {
    /// An error for `field`: `found` was given, `allowed` says what may be.
    pub(crate) fn new(
        field: &'static str,
        found: impl fmt::Display,
        allowed: impl Into<String>,
    ) -> Self {
        Self {
            field,
            found: found.to_string(),
            allowed: allowed.into(),
        }
    }

    /// The setting's name, as a path from the value it belongs to: `max_tools`,
    /// `trip.ratio`, `backoff.multiplier`, …
    pub fn field(&self) -> &str {
        self.field
    }

    /// The value given, as text.
    pub fn found(&self) -> &str {
        &self.found
    }

    /// What the field allows.
    pub fn allowed(&self) -> &str {
        &self.allowed
    }

    /// Panics with this error's text: what the infallible forms of the settings do.
    #[track_caller]
    pub(crate) fn panic(self) -> ! {
        panic!("{self}")
    }
}

impl fmt::Display for SettingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid setting `{}`: {}; allowed: {}",
            self.field, self.found, self.allowed
        )
    }
}

impl std::error::Error for SettingError {}

impl ToolPolicy {
    /// Checks every field against its range (the table in the module docs): the error names the
    /// first field outside it.
    ///
    /// [`CircuitBreakerConfig`](crate::CircuitBreakerConfig) has no invalid value (each has a
    /// documented meaning); the trip policy, the slow-call threshold and the backoff do.
    pub fn validate(&self) -> Result<(), SettingError> {
        self.trip.validate()?;
        if let Some(slow) = self.slow_call {
            if slow.is_zero() || slow > ToolPolicy::MAX_SLOW_CALL {
                return Err(SettingError::new(
                    "slow_call",
                    format!("{slow:?}"),
                    "None, or a duration above zero and at most 4398 s (73 min)",
                ));
            }
        }
        if let Some(backoff) = &self.backoff {
            backoff.validate()?;
        }
        Ok(())
    }
}

impl TripPolicy {
    fn validate(&self) -> Result<(), SettingError> {
        match *self {
            TripPolicy::ConsecutiveFailures => Ok(()),
            TripPolicy::FailureRate { ratio, window, .. } => {
                if !(ratio.is_finite() && ratio > 0.0 && ratio <= 1.0) {
                    return Err(SettingError::new(
                        "trip.ratio",
                        ratio,
                        "a finite number with 0 < ratio ≤ 1",
                    ));
                }
                if window == Duration::ZERO {
                    return Err(SettingError::new(
                        "trip.window",
                        "0 s",
                        "a duration above zero (shorter than 8 ms counts as 8 ms)",
                    ));
                }
                Ok(())
            }
        }
    }
}

impl Backoff {
    fn validate(&self) -> Result<(), SettingError> {
        if self.multiplier == 0 {
            return Err(SettingError::new(
                "backoff.multiplier",
                0,
                "an integer of at least 1 (1: no growth)",
            ));
        }
        if !self.max_jitter.is_zero() && self.jitter.is_none() {
            return Err(SettingError::new(
                "backoff.max_jitter",
                format_args!("{:?} with no jitter source", self.max_jitter),
                "zero unless `backoff.jitter` is set (a bound without a source adds nothing)",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::CircuitBreakerConfig;

    fn rate(ratio: f64, window: Duration) -> ToolPolicy {
        ToolPolicy {
            trip: TripPolicy::FailureRate {
                ratio,
                min_calls: 0,
                window,
            },
            ..ToolPolicy::default()
        }
    }

    #[test]
    fn every_field_at_and_past_its_bounds() {
        let s = Duration::from_secs(1);
        for ok in [
            ToolPolicy::default(),
            rate(1.0, s),
            rate(f64::MIN_POSITIVE, Duration::from_nanos(1)),
            rate(0.5, Duration::MAX),
            ToolPolicy {
                slow_call: Some(Duration::from_nanos(1)),
                breaker: CircuitBreakerConfig {
                    failure_threshold: 0,
                    recovery_duration: Duration::MAX,
                    probe_timeout: Duration::ZERO,
                },
                backoff: Some(Backoff {
                    multiplier: 1,
                    max_recovery: Duration::ZERO,
                    ..Backoff::default()
                }),
                ..ToolPolicy::default()
            },
        ] {
            assert_eq!(ok.validate(), Ok(()), "{ok:?}");
        }
        let field = |p: ToolPolicy| p.validate().unwrap_err().field().to_owned();
        for bad in [f64::NAN, 1.5, 50.0, -1.0, 0.0, -0.0, f64::INFINITY] {
            assert_eq!(field(rate(bad, s)), "trip.ratio", "{bad}");
        }
        assert_eq!(field(rate(0.5, Duration::ZERO)), "trip.window");
        for bad in [
            Duration::ZERO,
            ToolPolicy::MAX_SLOW_CALL + Duration::from_nanos(1),
        ] {
            assert_eq!(
                field(ToolPolicy {
                    slow_call: Some(bad),
                    ..ToolPolicy::default()
                }),
                "slow_call",
                "{bad:?}"
            );
        }
        assert_eq!(
            ToolPolicy {
                slow_call: Some(ToolPolicy::MAX_SLOW_CALL),
                ..ToolPolicy::default()
            }
            .validate(),
            Ok(())
        );
        assert_eq!(
            field(ToolPolicy {
                backoff: Some(Backoff {
                    multiplier: 0,
                    ..Backoff::default()
                }),
                ..ToolPolicy::default()
            }),
            "backoff.multiplier"
        );
        assert_eq!(
            field(ToolPolicy {
                backoff: Some(Backoff {
                    max_jitter: s,
                    ..Backoff::default()
                }),
                ..ToolPolicy::default()
            }),
            "backoff.max_jitter"
        );
    }
}
