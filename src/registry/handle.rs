//! A pre-resolved tool: the gate and the record paths without the name lookup.
//!
//! [`ToolHealthRegistry::handle`] resolves a tool name once and returns a [`ToolHandle`]
//! holding the tool's entry. Every method of the handle runs the *same* code as the registry's
//! method of the same name — one implementation, reached by name or by handle — so it keeps
//! every behaviour of the by-name path: observers are notified, the span-aware gate binds its
//! decision to the current tool span, refusals are counted. Only the name lookup is skipped.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use tool_health::{CircuitBreakerConfig, ToolHealthRegistry};
//!
//! let registry = Arc::new(ToolHealthRegistry::with_config(CircuitBreakerConfig {
//!     failure_threshold: 1,
//!     ..Default::default()
//! }));
//! let search = registry.handle("search").expect("below the tracking cap");
//!
//! assert!(search.allow_request());
//! search.record_success(Duration::from_millis(12));
//! search.record_failure(Duration::from_millis(900)); // trips (threshold 1)
//! assert!(!search.allow_request());
//! // The handle and the name see one breaker.
//! assert!(!registry.allow_request("search"));
//! assert_eq!(registry.snapshot("search").unwrap().total_calls, 2);
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::breaker::{BreakerState, Recorded};
use crate::call::{CallOutcome, CallReport, GateDecision, Permit};
use crate::hook;
use crate::stats::HealthStatus;

use super::entry::Entry;
use super::ToolHealthRegistry;

/// One tracked tool of a registry, resolved once (from [`ToolHealthRegistry::handle`]).
///
/// Cheap to clone (two reference counts) and `Send + Sync`: keep one per tool wherever the
/// tool is called. The handle keeps its registry and the tool's entry alive; its methods mirror
/// the registry's by-name methods exactly (same code, same observers, same span binding).
#[derive(Clone)]
pub struct ToolHandle {
    registry: Arc<ToolHealthRegistry>,
    entry: Arc<Entry>,
}

impl fmt::Debug for ToolHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolHandle")
            .field("tool", &self.tool())
            .finish_non_exhaustive()
    }
}

impl ToolHandle {
    pub(crate) fn new(registry: Arc<ToolHealthRegistry>, entry: Arc<Entry>) -> Self {
        Self { registry, entry }
    }

    /// The tool's name.
    pub fn tool(&self) -> &str {
        &self.entry.name
    }

    /// The registry this handle belongs to.
    pub fn registry(&self) -> &Arc<ToolHealthRegistry> {
        &self.registry
    }

    /// [`ToolHealthRegistry::allow_request`] on this tool: the mutating gate.
    #[inline]
    pub fn allow_request(&self) -> bool {
        self.check().is_allowed()
    }

    /// [`ToolHealthRegistry::check`] on this tool: the gate with its whole answer, bound to the
    /// current tool span when a [`ToolHealthLayer`](crate::ToolHealthLayer) watches it.
    #[inline]
    pub fn check(&self) -> GateDecision {
        if hook::installed() {
            return self.check_hooked();
        }
        self.check_detached()
    }

    #[inline(never)]
    fn check_hooked(&self) -> GateDecision {
        hook::gate(self.registry.address(), self.tool(), &mut || {
            self.check_detached()
        })
    }

    /// [`ToolHealthRegistry::check_detached`] on this tool: the gate, never bound to a span.
    #[inline]
    pub fn check_detached(&self) -> GateDecision {
        self.registry.check_on_entry(self.tool(), Some(&self.entry))
    }

    /// [`ToolHealthRegistry::is_tool_available`] on this tool: the pure oracle.
    pub fn is_tool_available(&self) -> bool {
        self.registry.available_on_entry(&self.entry)
    }

    /// [`ToolHealthRegistry::record_success`] on this tool.
    #[inline]
    pub fn record_success(&self, duration: Duration) -> Recorded {
        self.record_report(&CallReport::new(CallOutcome::Success, duration))
    }

    /// [`ToolHealthRegistry::record_failure`] on this tool.
    #[inline]
    pub fn record_failure(&self, duration: Duration) -> Recorded {
        self.record_report(&CallReport::new(CallOutcome::Failure, duration))
    }

    /// [`ToolHealthRegistry::record_with_permit`] on this tool.
    #[inline]
    pub fn record_with_permit(
        &self,
        permit: Permit,
        outcome: CallOutcome,
        duration: Duration,
    ) -> Recorded {
        self.record_report(&CallReport::new(outcome, duration).permit(permit))
    }

    /// [`ToolHealthRegistry::record_report`] on this tool: any outcome, with the permit,
    /// `error.type` and retry hint a [`CallReport`] carries.
    #[inline]
    pub fn record_report(&self, report: &CallReport<'_>) -> Recorded {
        self.registry
            .record_on_entry(self.tool(), &self.entry, report)
    }

    /// [`ToolHealthRegistry::release`] on this tool: gives a probe permit back without a result.
    pub fn release(&self, permit: Permit) -> Recorded {
        if self.entry.is_retired() {
            return self.registry.release(self.tool(), permit);
        }
        self.registry
            .release_on_entry(self.tool(), &self.entry, permit)
    }

    /// [`ToolHealthRegistry::breaker_state`] on this tool.
    pub fn breaker_state(&self) -> BreakerState {
        if self.entry.is_retired() {
            return self.registry.breaker_state(self.tool());
        }
        self.registry.state_on_entry(&self.entry)
    }

    /// [`ToolHealthRegistry::get_health_status`] on this tool.
    pub fn get_health_status(&self) -> HealthStatus {
        if self.entry.is_retired() {
            return self.registry.get_health_status(self.tool());
        }
        self.registry.status_on_entry(&self.entry)
    }
}

impl ToolHealthRegistry {
    /// A pre-resolved handle on `tool`: the gate and the record paths without the name lookup
    /// (see [`ToolHandle`]). Creates the tool's entry if it does not exist
    /// yet, exactly as its first record would, so the tool is tracked from now on (and listed
    /// by [`health_summary`](Self::health_summary)). `None` when the tool is new and the registry
    /// is at its cap ([`max_tools`](Self::max_tools)): call by name then, which counts the
    /// calls in [`overflow`](Self::overflow).
    ///
    /// Takes the registry's `Arc` because the handle keeps the registry alive (its clock and
    /// observers); share the registry behind an `Arc` to use handles. In an evicting registry a
    /// handle whose tool was evicted follows its tool: its gate, records and reads go to the
    /// live entry by name (re-resolve it to get the fast path back), and the permits it hands
    /// out are the live entry's, never the evicted one's.
    pub fn handle(self: &Arc<Self>, tool: &str) -> Option<ToolHandle> {
        let entry = match self.names.with(tool, Arc::clone) {
            Some(e) => e,
            None => self.insert_slow(tool, false)?,
        };
        Some(ToolHandle::new(Arc::clone(self), entry))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::policy::CircuitBreakerConfig;

    #[test]
    fn handle_and_name_share_one_breaker_and_one_set_of_stats() {
        let clock = ManualClock::new();
        let registry = Arc::new(
            ToolHealthRegistry::builder()
                .config(CircuitBreakerConfig {
                    failure_threshold: 2,
                    ..Default::default()
                })
                .clock(clock.clone())
                .build(),
        );
        let h = registry.handle("db").unwrap();
        assert_eq!(registry.tracked_tools(), 1, "a handle tracks its tool");
        assert_eq!(h.tool(), "db");
        h.record_failure(Duration::from_millis(5));
        registry.record_failure("db", Duration::from_millis(5));
        assert_eq!(h.breaker_state(), BreakerState::Open);
        assert_eq!(h.get_health_status(), HealthStatus::Unhealthy);
        assert!(!h.is_tool_available());
        assert!(matches!(h.check(), GateDecision::Refused { .. }));

        clock.advance(Duration::from_secs(30));
        let permit = h.check().permit().expect("the probe");
        assert!(permit.is_probe());
        assert!(!registry.allow_request("db"), "the probe is taken");
        let r = h.record_with_permit(permit, CallOutcome::Success, Duration::from_millis(1));
        assert_eq!(r.transition.map(|t| t.to), Some(BreakerState::Closed));
        let snap = registry.snapshot("db").unwrap();
        assert_eq!((snap.total_calls, snap.refused_count), (3, 2));

        let again = registry.handle("db").unwrap();
        assert!(Arc::ptr_eq(&again.entry, &h.entry));
    }

    #[test]
    fn handles_notify_observers() {
        use crate::breaker::Transition;
        use crate::registry::{CallEvent, HealthObserver};
        use std::sync::atomic::{AtomicU64, Ordering};

        #[derive(Debug, Default)]
        struct Count {
            calls: AtomicU64,
            transitions: AtomicU64,
        }
        impl HealthObserver for Count {
            fn on_call(&self, _: &CallEvent<'_>) {
                self.calls.fetch_add(1, Ordering::Relaxed);
            }
            fn on_transition(&self, _: &str, _: &Transition, _: Duration) {
                self.transitions.fetch_add(1, Ordering::Relaxed);
            }
        }

        let registry = Arc::new(ToolHealthRegistry::with_config(CircuitBreakerConfig {
            failure_threshold: 1,
            ..Default::default()
        }));
        let count = Arc::new(Count::default());
        registry.add_observer(count.clone());
        let h = registry.handle("x").unwrap();
        h.record_success(Duration::ZERO);
        h.record_failure(Duration::ZERO); // trips
        assert!(!h.allow_request()); // a refusal is a call event too
        assert_eq!(count.calls.load(Ordering::Relaxed), 3);
        assert_eq!(count.transitions.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn no_handle_past_the_cap() {
        let registry = Arc::new(ToolHealthRegistry::builder().max_tools(1).build());
        assert!(registry.handle("a").is_some());
        assert!(registry.handle("b").is_none());
        assert!(registry.handle("a").is_some());
    }
}
