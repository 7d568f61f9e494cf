//! Operator controls per tool: force open, force closed, shadow mode.
//!
//! Controls sit in front of the breaker and survive config and policy changes:
//!
//! * **Forced open** (isolate): every call is refused, until released or until an instant. The
//!   breaker underneath keeps its own state and keeps learning from any results that arrive.
//! * **Forced closed** (breaker disabled): every call is allowed; results still feed the stats
//!   and the breaker, so dashboards show what it *would* do.
//! * **Shadow mode**: the breaker decides and publishes as usual, but a refusal is not
//!   enforced — the call is allowed, and the would-be refusal is counted apart
//!   (`shadow_refused_count`, metric `tool_health.calls{outcome=refused, enforced=false}`), so a
//!   threshold can be rolled out safely. Shadow combines with the other modes; forced modes win.
//!
//! One `AtomicU64` per tool holds the control: the gate pays one relaxed load when no control
//! is set.
//!
//! ```
//! use std::time::Duration;
//! use tool_health::{ManualClock, ToolControl, ToolHealthRegistry};
//!
//! let clock = ManualClock::new();
//! let registry = ToolHealthRegistry::builder().clock(clock.clone()).build();
//!
//! registry.force_open_for("payments", Duration::from_secs(60)); // isolate during an incident
//! assert!(!registry.allow_request("payments"));
//! clock.advance(Duration::from_secs(60));
//! assert!(registry.allow_request("payments")); // the isolation lapsed
//!
//! registry.set_shadow("search", true); // observe a new policy without enforcing it
//! assert_eq!(registry.control("search"), ToolControl::Normal);
//! assert!(registry.is_shadow("search"));
//! ```

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::ticks::Ticks;

const MODE_MASK: u64 = 0b11;
const MODE_NORMAL: u64 = 0;
const MODE_FORCED_OPEN: u64 = 1;
const MODE_FORCED_CLOSED: u64 = 2;
const SHADOW_BIT: u64 = 0b100;
const UNTIL_SHIFT: u32 = 8;

/// The manual mode of a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolControl {
    /// The breaker decides.
    Normal,
    /// Every call is refused; `until` is the registry-clock instant it lapses (`None`: until
    /// released).
    ForcedOpen {
        /// When the isolation ends, on the registry's clock.
        until: Option<Duration>,
    },
    /// Every call is allowed.
    ForcedClosed,
}

/// The control word: bits 0–1 mode, bit 2 shadow, bits 8–63 the forced-open end in ticks
/// (all ones: until released).
#[derive(Debug, Default)]
pub(crate) struct Control(AtomicU64);

/// A decoded control word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ControlState {
    pub(crate) mode: ToolControl,
    pub(crate) shadow: bool,
}

impl ControlState {
    /// Until when the control refuses, seen at `now` (`None`: it does not refuse; a lapsed
    /// forced-open refuses no more; [`Ticks::NEVER`]: until released).
    pub(crate) fn forced_open_until(&self, now: Ticks) -> Option<Ticks> {
        match self.mode {
            ToolControl::ForcedOpen { until: None } => Some(Ticks::NEVER),
            ToolControl::ForcedOpen { until: Some(u) } => {
                let u = Ticks::at(u);
                (now < u).then_some(u)
            }
            _ => None,
        }
    }
}

impl Control {
    /// The raw word: 0 means "no control", the gate's fast check.
    #[inline]
    pub(crate) fn raw(&self) -> u64 {
        self.0.load(Relaxed)
    }

    pub(crate) fn decode(raw: u64) -> ControlState {
        let until = Ticks::new(raw >> UNTIL_SHIFT);
        let mode = match raw & MODE_MASK {
            MODE_FORCED_OPEN if until.is_never() => ToolControl::ForcedOpen { until: None },
            MODE_FORCED_OPEN => ToolControl::ForcedOpen {
                until: Some(until.to_duration()),
            },
            MODE_FORCED_CLOSED => ToolControl::ForcedClosed,
            _ => ToolControl::Normal,
        };
        ControlState {
            mode,
            shadow: raw & SHADOW_BIT != 0,
        }
    }

    pub(crate) fn state(&self) -> ControlState {
        Self::decode(self.raw())
    }

    /// Sets the mode, keeping the shadow bit. `until`: when a forced-open ends
    /// ([`Ticks::NEVER`]: until released).
    pub(crate) fn set_mode(&self, mode: ToolControl, until: Ticks) {
        let bits = match mode {
            ToolControl::Normal => MODE_NORMAL,
            ToolControl::ForcedOpen { .. } => MODE_FORCED_OPEN | (until.get() << UNTIL_SHIFT),
            ToolControl::ForcedClosed => MODE_FORCED_CLOSED,
        };
        let _ = self
            .0
            .fetch_update(Relaxed, Relaxed, |w| Some((w & SHADOW_BIT) | bits));
    }

    pub(crate) fn set_shadow(&self, on: bool) {
        if on {
            self.0.fetch_or(SHADOW_BIT, Relaxed);
        } else {
            self.0.fetch_and(!SHADOW_BIT, Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_and_shadow_are_independent() {
        let c = Control::default();
        assert_eq!(c.raw(), 0);
        c.set_shadow(true);
        c.set_mode(ToolControl::ForcedOpen { until: None }, Ticks::new(1_500));
        let s = c.state();
        assert!(s.shadow);
        assert_eq!(
            s.mode,
            ToolControl::ForcedOpen {
                until: Some(Duration::from_millis(1_500))
            }
        );
        assert_eq!(
            s.forced_open_until(Ticks::new(1_499)),
            Some(Ticks::new(1_500))
        );
        assert_eq!(
            s.forced_open_until(Ticks::new(1_500)),
            None,
            "the end is exclusive"
        );
        c.set_mode(ToolControl::Normal, Ticks::ZERO);
        c.set_shadow(false);
        assert_eq!(c.raw(), 0);
        c.set_mode(ToolControl::ForcedOpen { until: None }, Ticks::NEVER);
        assert_eq!(
            c.state().forced_open_until(Ticks::new(u64::MAX - 1)),
            Some(Ticks::NEVER)
        );
    }
}
