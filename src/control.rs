//! Operator controls per tool: force open, force closed, shadow mode.
//!
//! Controls sit in front of the breaker and survive config and policy changes:
//!
//! * **Forced open** (isolate): every call is refused, until released or until an instant. The
//!   breaker underneath keeps its own state and keeps learning from any results that arrive.
//!   While in force, the tool reads as open (state, status, metrics): the gate refuses it as an
//!   open breaker would.
//! * **Forced closed** (breaker disabled) and **shadow mode** (observe a policy without enforcing
//!   it): the breaker decides every call exactly as under enforcement — its own machine runs,
//!   the probe included — but its refusals are not enforced: the call is allowed, the would-be
//!   refusal is counted apart (`shadow_refused_count`, metric
//!   `tool_health.calls{outcome=refused, enforced=false}`), and the result of such a call goes
//!   to the stats only, never to the breaker. So the breaker moves exactly as it would if the
//!   refusals were enforced, and state and metrics show what it would do. Results carry that
//!   through their permit ([`Permit::is_shadow_refused`](crate::Permit::is_shadow_refused));
//!   recorded by name, a result that arrives while the breaker is open is taken for a
//!   would-be-refused call's (a call admitted before the trip and finishing late cannot be told
//!   apart by name: record through the permit for exactness). Shadow combines with the other
//!   modes; forced modes win.
//!
//! One `AtomicU64` per tool holds the control: the gate pays one relaxed load when no control
//! is set.
//!
//! # Orderings
//!
//! The gate reads the word `Relaxed`: a control is a setting, and a gate call racing its change
//! may see either value. Changes are `SeqCst` read-modify-writes and the evictor reads the word
//! `SeqCst` ([`Control::raw_for_eviction`]): setting a control on a tool is a record's work in
//! the eviction handshake (work, then touch; see `ToolHealthRegistry::touch`), and a Dekker
//! handshake needs both sides' write and read in the single total order of `SeqCst`
//! operations. (On x86-64 every read-modify-write is a full barrier and a `SeqCst` load a plain
//! load, so this costs nothing there; on weakly ordered hardware a `Relaxed` write could let a
//! sweep evict a tool that was just forced, and the control would be lost with the entry.)
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

#[cfg(all(test, tool_health_loom))]
use loom::sync::atomic::AtomicU64;
#[cfg(not(all(test, tool_health_loom)))]
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::time::Duration;

use crate::ticks::Ticks;

const MODE_MASK: u64 = 0b11;
const MODE_NORMAL: u64 = 0;
const MODE_FORCED_OPEN: u64 = 1;
const MODE_FORCED_CLOSED: u64 = 2;
const SHADOW_BIT: u64 = 0b100;
/// Set by the evictor on an entry it retired: a handle's gate then leaves the fast path and
/// follows its tool to the live entry. Not a control: never cleared, kept by every change.
const RETIRED_BIT: u64 = 0b1000;
/// Set while a coordinator has a say in the tool's current open episode (it opened the breaker
/// for another replica's trip, or holds its probe back while another replica probes): the
/// gate leaves its fast refusal path for one that counts these refusals apart and says where
/// they came from. Not a control: kept by every change, cleared when the episode ends.
const COORDINATED_BIT: u64 = 0b1_0000;
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

/// The control word: bits 0–1 mode, bit 2 shadow, bit 3 retired (see `RETIRED_BIT`), bit 4
/// coordinated (see `COORDINATED_BIT`), bits 8–63 the forced-open end in ticks (all ones:
/// until released).
#[derive(Debug)]
pub(crate) struct Control(AtomicU64);

impl Default for Control {
    fn default() -> Self {
        Self(AtomicU64::new(0))
    }
}

/// A decoded control word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ControlState {
    pub(crate) mode: ToolControl,
    pub(crate) shadow: bool,
}

impl ControlState {
    /// Whether the breaker's refusals are not enforced (shadow mode or force-closed): the call
    /// goes ahead, and its result goes to the stats only.
    pub(crate) fn unenforced(&self) -> bool {
        self.shadow || self.mode == ToolControl::ForcedClosed
    }

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
    /// The raw word: 0 means "no control" (and not retired), the gate's fast check.
    #[inline]
    pub(crate) fn raw(&self) -> u64 {
        self.0.load(Relaxed)
    }

    /// The raw word as the evictor reads it, in the eviction handshake (see the module docs).
    /// The coordinated bit is left out: the evictor only takes a tool whose breaker is closed,
    /// and a closed breaker's episode is over whatever the bit still says.
    pub(crate) fn raw_for_eviction(&self) -> u64 {
        self.0.load(SeqCst) & !COORDINATED_BIT
    }

    /// Whether `raw` holds nothing but the coordinated bit: no operator control.
    #[inline]
    pub(crate) fn only_coordinated(raw: u64) -> bool {
        raw & !COORDINATED_BIT == 0
    }

    /// Whether a coordinator has a say in the current episode (see `COORDINATED_BIT`).
    #[inline]
    pub(crate) fn is_coordinated(raw: u64) -> bool {
        raw & COORDINATED_BIT != 0
    }

    /// Clears the coordinated bit if it is the only bit set (the gate found the breaker closed:
    /// the coordinated episode is over). A concurrent change wins.
    pub(crate) fn clear_coordinated_if_alone(&self) {
        let _ = self.0.compare_exchange(COORDINATED_BIT, 0, SeqCst, Relaxed);
    }

    /// Sets or clears the coordinated bit.
    pub(crate) fn set_coordinated(&self, on: bool) {
        if on {
            self.0.fetch_or(COORDINATED_BIT, SeqCst);
        } else if self.raw() & COORDINATED_BIT != 0 {
            self.0.fetch_and(!COORDINATED_BIT, SeqCst);
        }
    }

    /// Marks the entry retired (the evictor, after it won the entry).
    pub(crate) fn retire(&self) {
        self.0.fetch_or(RETIRED_BIT, SeqCst);
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
        let _ = self.0.fetch_update(SeqCst, SeqCst, |w| {
            Some((w & (SHADOW_BIT | RETIRED_BIT | COORDINATED_BIT)) | bits)
        });
    }

    pub(crate) fn set_shadow(&self, on: bool) {
        if on {
            self.0.fetch_or(SHADOW_BIT, SeqCst);
        } else {
            self.0.fetch_and(!SHADOW_BIT, SeqCst);
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
        c.retire();
        c.set_mode(ToolControl::ForcedOpen { until: None }, Ticks::NEVER);
        assert_ne!(c.raw() & RETIRED_BIT, 0, "a change keeps the retired bit");
        assert_eq!(
            c.state().forced_open_until(Ticks::new(u64::MAX - 1)),
            Some(Ticks::NEVER)
        );
    }

    #[test]
    fn the_coordinated_bit_is_no_control_and_survives_changes() {
        let c = Control::default();
        c.set_coordinated(true);
        assert!(Control::only_coordinated(c.raw()) && Control::is_coordinated(c.raw()));
        assert_eq!(c.state().mode, ToolControl::Normal);
        assert_eq!(c.raw_for_eviction(), 0);
        c.set_mode(ToolControl::ForcedClosed, Ticks::ZERO);
        assert!(Control::is_coordinated(c.raw()) && !Control::only_coordinated(c.raw()));
        c.set_mode(ToolControl::Normal, Ticks::ZERO);
        c.set_coordinated(false);
        assert_eq!(c.raw(), 0);
    }
}
