//! The breaker's unit of time: whole milliseconds on the registry's clock, as a newtype.
//!
//! Every instant and duration the breaker word, the operator controls and the failure-rate
//! window hold is a [`Ticks`]. The conversions from and to [`Duration`] exist here once:
//!
//! * an **instant** (a clock reading) rounds *down* ([`Ticks::at`]) where it is compared with a
//!   deadline ("has the cooldown ended?");
//! * an instant a **deadline is counted from** (a failure that opens the breaker, a probe's
//!   grant, a retry hint's origin) rounds *up* ([`Ticks::at_ceil`]);
//! * a **duration** (a cooldown, a lease, a hint) rounds *up* ([`Ticks::span`]);
//! * [`Ticks::NEVER`] (all ones in the word's 40-bit field) means "never", and converts back to
//!   `Duration::MAX`.
//!
//! So a deadline is never early: it is at or after the exact instant (base + duration), and a
//! comparison of a rounded-down reading with it admits no sooner than that exact instant. It is
//! at most one tick late for durations of whole milliseconds (a sub-millisecond duration adds
//! its own rounding up).
//!
//! 40 bits of milliseconds cover about 34 years of clock time: a duration or instant beyond
//! that saturates to [`Ticks::NEVER`].

use std::time::Duration;

use crate::clock::duration_to_nanos;

/// Bits the breaker word gives a deadline.
pub(crate) const TICK_BITS: u32 = 40;

const NANOS_PER_TICK: u64 = 1_000_000;

/// Milliseconds on the registry's clock (an instant) or between two of its instants (a span).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub(crate) struct Ticks(u64);

impl Ticks {
    /// Zero: the clock's origin, or no time at all.
    pub(crate) const ZERO: Ticks = Ticks(0);
    /// "Never": one past the last representable instant.
    pub(crate) const NEVER: Ticks = Ticks((1 << TICK_BITS) - 1);

    /// Raw ticks, clamped to [`Ticks::NEVER`].
    #[inline]
    pub(crate) const fn new(raw: u64) -> Self {
        if raw > Self::NEVER.0 {
            Self::NEVER
        } else {
            Self(raw)
        }
    }

    /// The raw number of milliseconds.
    #[inline]
    pub(crate) const fn get(self) -> u64 {
        self.0
    }

    /// A clock reading as an instant: rounded down, and always before [`Ticks::NEVER`].
    #[inline]
    pub(crate) fn at(now: Duration) -> Self {
        Self((duration_to_nanos(now) / NANOS_PER_TICK).min(Self::NEVER.0 - 1))
    }

    /// A clock reading as the base of a deadline: rounded up, so a deadline counted from it is
    /// never early; always before [`Ticks::NEVER`].
    #[inline]
    pub(crate) fn at_ceil(now: Duration) -> Self {
        Self(
            duration_to_nanos(now)
                .div_ceil(NANOS_PER_TICK)
                .min(Self::NEVER.0 - 1),
        )
    }

    /// A configured duration: rounded up, [`Ticks::NEVER`] when too long to represent.
    #[inline]
    pub(crate) fn span(d: Duration) -> Self {
        Self::new(duration_to_nanos(d).div_ceil(NANOS_PER_TICK))
    }

    /// Whether this is [`Ticks::NEVER`].
    #[inline]
    pub(crate) const fn is_never(self) -> bool {
        self.0 >= Self::NEVER.0
    }

    /// Back to a `Duration`: [`Ticks::NEVER`] is `Duration::MAX`.
    #[inline]
    pub(crate) fn to_duration(self) -> Duration {
        if self.is_never() {
            Duration::MAX
        } else {
            Duration::from_millis(self.0)
        }
    }

    /// `self + span`: [`Ticks::NEVER`] when either is never or the sum does not fit.
    #[inline]
    pub(crate) fn after(self, span: Ticks) -> Self {
        if self.is_never() || span.is_never() {
            Self::NEVER
        } else {
            Self::new(self.0 + span.0)
        }
    }

    /// How long from `now` until this instant (zero once reached; [`Ticks::NEVER`] stays never).
    #[inline]
    pub(crate) fn until(self, now: Ticks) -> Self {
        if self.is_never() {
            Self::NEVER
        } else {
            Self(self.0.saturating_sub(now.0))
        }
    }

    /// `self - span`, stopping at zero.
    #[inline]
    pub(crate) fn saturating_sub(self, span: Ticks) -> Self {
        Self(self.0.saturating_sub(span.0))
    }
}

/// One clock reading, as a step of the breaker uses it: rounded down where it is compared with a
/// deadline, rounded up where a deadline is counted from it (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Now {
    /// The reading rounded down: "has this deadline passed?".
    pub(crate) at: Ticks,
    /// The reading rounded up: the base of a deadline counted from now.
    pub(crate) base: Ticks,
}

impl Now {
    /// A clock reading.
    #[inline]
    pub(crate) fn of(now: Duration) -> Self {
        Self {
            at: Ticks::at(now),
            base: Ticks::at_ceil(now),
        }
    }

    /// A reading on a whole tick (both roundings agree).
    #[cfg(test)]
    pub(crate) const fn exact(at: Ticks) -> Self {
        Self { at, base: at }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_round_down_and_spans_round_up() {
        assert_eq!(Ticks::at(Duration::from_micros(1_999)), Ticks(1));
        assert_eq!(Ticks::span(Duration::from_micros(1_001)), Ticks(2));
        assert_eq!(Ticks::span(Duration::ZERO), Ticks::ZERO);
        assert_eq!(Ticks::at_ceil(Duration::from_micros(999)), Ticks(1));
        assert_eq!(Ticks::at_ceil(Duration::from_millis(7)), Ticks(7));
        assert_eq!(Ticks::at_ceil(Duration::MAX), Ticks(Ticks::NEVER.0 - 1));
    }

    #[test]
    fn never_is_absorbing_and_converts_to_max() {
        assert_eq!(Ticks::at(Duration::MAX), Ticks(Ticks::NEVER.0 - 1));
        assert_eq!(Ticks::span(Duration::MAX), Ticks::NEVER);
        assert_eq!(Ticks::NEVER.to_duration(), Duration::MAX);
        assert_eq!(Ticks(5).after(Ticks::NEVER), Ticks::NEVER);
        assert_eq!(Ticks(Ticks::NEVER.0 - 1).after(Ticks(5)), Ticks::NEVER);
        assert_eq!(Ticks::NEVER.until(Ticks(3)), Ticks::NEVER);
        assert_eq!(Ticks(3).until(Ticks(5)), Ticks::ZERO);
        assert_eq!(Ticks::new(u64::MAX), Ticks::NEVER);
    }
}
