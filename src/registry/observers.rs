//! Observers: hooks called on the record and gate paths, for metrics and live views.

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::breaker::{Recorded, Transition};
use crate::call::CallOutcome;
use crate::hook::CallingOut;

use super::{ToolHealthRegistry, EXTRA_OBSERVE};

/// One call, as observers see it.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct CallEvent<'a> {
    /// The tool.
    pub tool: &'a str,
    /// What happened.
    pub outcome: CallOutcome,
    /// How long it took (zero for refusals).
    pub duration: Duration,
    /// The `error.type` of a failed call, when known.
    pub error_type: Option<&'a str>,
    /// Whether the tool is past the tracking cap (not tracked individually).
    pub overflow: bool,
}

/// Hooks called synchronously on the record and gate paths, for metrics and live views.
///
/// Observers must be fast and must not panic; they run on the caller's thread. Without any
/// observer registered, the hot path pays one relaxed load.
pub trait HealthObserver: Send + Sync + fmt::Debug + 'static {
    /// A call finished (or was refused).
    fn on_call(&self, event: &CallEvent<'_>) {
        let _ = event;
    }

    /// A breaker changed state; `at` is the registry clock's reading.
    fn on_transition(&self, tool: &str, transition: &Transition, at: Duration) {
        let _ = (tool, transition, at);
    }
}

impl ToolHealthRegistry {
    /// Registers an observer, called on every later call and transition.
    pub fn add_observer(&self, observer: Arc<dyn HealthObserver>) {
        self.observers.rcu(|list| {
            let mut list = Vec::clone(list);
            list.push(observer.clone());
            list
        });
        self.record_extras
            .fetch_or(EXTRA_OBSERVE, Ordering::Release);
    }

    /// Tells observers about a call; the event is only built when there are observers.
    #[inline(always)]
    pub(super) fn notify_call<'a>(&self, event: impl FnOnce() -> CallEvent<'a>) {
        if self.has_observers() {
            self.notify_call_slow(&event());
        }
    }

    #[inline(never)]
    fn notify_call_slow(&self, event: &CallEvent<'_>) {
        // Observers that log must not fail the current tool span.
        let _quiet = CallingOut::enter();
        for o in self.observers.load().iter() {
            o.on_call(event);
        }
    }

    /// Tells observers about the transitions a result or gate call made.
    #[inline(always)]
    pub(super) fn notify_transitions(&self, tool: &str, recorded: &Recorded) {
        if !recorded.is_empty() && self.has_observers() {
            self.notify_transitions_slow(tool, recorded);
        }
    }

    #[inline(never)]
    fn notify_transitions_slow(&self, tool: &str, recorded: &Recorded) {
        let _quiet = CallingOut::enter();
        let at = self.clock.now();
        for t in recorded.transitions() {
            for o in self.observers.load().iter() {
                o.on_transition(tool, &t, at);
            }
        }
    }
}
