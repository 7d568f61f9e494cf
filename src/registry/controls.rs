//! Operator controls by name: force open, force closed, shadow mode, reset (see
//! [`ToolControl`]).
//!
//! A control on a tool with no entry creates it, and past the cap *declares* it (see
//! [`ToolHealthRegistry::declare_tools`]): an operator's word is the application's, so it never
//! fails because invented names filled the cap. It fails (returns `false`) only for a name
//! longer than [`max_name_len`](ToolHealthRegistry::max_name_len), or past the cap when
//! [`max_tools`](ToolHealthRegistry::max_tools) tools are declared already.
//!
//! A control is no transition of the breaker: observers hear it through
//! [`HealthObserver::on_control`](crate::HealthObserver::on_control) (a forced-open that ends
//! on its own is no event either: whoever watches availability reads the tool again then).

use std::time::Duration;

use crate::control::ToolControl;
use crate::ticks::Ticks;

use super::ToolHealthRegistry;

impl ToolHealthRegistry {
    /// Isolates the tool: every call is refused until [`release_control`](Self::release_control).
    /// Returns `false` when the tool cannot be tracked (see the module docs).
    pub fn force_open(&self, tool: &str) -> bool {
        let set = self
            .with_entry_or_declare(tool, |e| {
                e.control
                    .set_mode(ToolControl::ForcedOpen { until: None }, Ticks::NEVER)
            })
            .is_some();
        self.controlled(tool, set)
    }

    /// Tells observers when a control was set; passes `set` on.
    fn controlled(&self, tool: &str, set: bool) -> bool {
        if set {
            self.notify_control(tool);
        }
        set
    }

    #[doc(hidden)] // `force_open_for` is the documented way; kept for code written against it
    /// Isolates the tool until `until` on the registry's clock (see [`now`](Self::now)),
    /// rounded up to the millisecond: the isolation never lapses early. An instant beyond what
    /// the registry's clock can represent (about 34.8 years from its start) isolates it until
    /// released, as [`force_open`](Self::force_open) does.
    pub fn force_open_until(&self, tool: &str, until: Duration) -> bool {
        let (mode, end) = if Ticks::span(until).is_never() {
            (ToolControl::ForcedOpen { until: None }, Ticks::NEVER)
        } else {
            (
                ToolControl::ForcedOpen { until: Some(until) },
                Ticks::at_ceil(until),
            )
        };
        let set = self
            .with_entry_or_declare(tool, |e| e.control.set_mode(mode, end))
            .is_some();
        self.controlled(tool, set)
    }

    /// Isolates the tool for `duration` from now. A duration that ends beyond what the
    /// registry's clock can represent (`Duration::MAX` included) isolates it until released:
    /// its refusals carry `retry_after = Duration::MAX` and the call helper tells the model
    /// "until released", never a retry in a billion seconds.
    pub fn force_open_for(&self, tool: &str, duration: Duration) -> bool {
        let until = self.clock.now().saturating_add(duration);
        self.force_open_until(tool, until)
    }

    /// Disables the tool's breaker: every call is allowed. The breaker still decides every
    /// call as under enforcement — its own machine runs, the probe included — and only its
    /// refusals are not enforced: such a call is counted as a shadow refusal and its result
    /// goes to the stats only. So the breaker's state and the metrics show what it would do,
    /// and when the control is released the breaker is where enforcement would have left it.
    pub fn force_closed(&self, tool: &str) -> bool {
        let set = self
            .with_entry_or_declare(tool, |e| {
                e.control.set_mode(ToolControl::ForcedClosed, Ticks::ZERO)
            })
            .is_some();
        self.controlled(tool, set)
    }

    /// Back to normal: the breaker decides again (shadow mode is left as it is).
    pub fn release_control(&self, tool: &str) {
        let set = self
            .with_entry(tool, |e| {
                e.control.set_mode(ToolControl::Normal, Ticks::ZERO)
            })
            .is_some();
        self.controlled(tool, set);
    }

    /// Shadow mode on or off: refusals are decided and counted, not enforced.
    pub fn set_shadow(&self, tool: &str, on: bool) -> bool {
        if !on {
            self.with_entry(tool, |e| e.control.set_shadow(false));
            return true;
        }
        self.with_entry_or_declare(tool, |e| e.control.set_shadow(true))
            .is_some()
    }

    #[doc(hidden)] // read `snapshot(tool).control`; kept for code written against it
    /// The operator control in force for the tool (a lapsed forced-open reads as such until
    /// released; the gate no longer enforces it).
    pub fn control(&self, tool: &str) -> ToolControl {
        self.with_entry(tool, |e| e.control.state().mode)
            .unwrap_or(ToolControl::Normal)
    }

    #[doc(hidden)] // read `snapshot(tool).shadow`; kept for code written against it
    /// Whether shadow mode is on for the tool.
    pub fn is_shadow(&self, tool: &str) -> bool {
        self.with_entry(tool, |e| e.control.state().shadow)
            .unwrap_or(false)
    }

    /// Resets the tool to fresh: stats zeroed, breaker closed, backoff and failure-rate window
    /// forgotten. Permits handed out before are stale afterwards. Controls and policy are kept.
    ///
    /// What the metrics export as counters (`tool_health.calls`,
    /// `tool_health.breaker.transitions`) keeps growing across a reset: a counter never goes
    /// down. Snapshots and the score start from zero.
    pub fn reset(&self, tool: &str) {
        let set = self
            .with_entry(tool, |e| {
                e.breaker.reset(self.now_ticks());
                e.stats.reset();
                e.control.set_coordinated(false);
            })
            .is_some();
        self.controlled(tool, set);
    }
}
