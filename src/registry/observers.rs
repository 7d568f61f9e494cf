//! Observers: hooks called on the record and gate paths, for metrics and live views; and the
//! transition log.
//!
//! # The transition log
//!
//! Every breaker transition is logged as a `tracing` event with target [`LOG_TARGET`]
//! (`tool_health`), on by default:
//!
//! | transition | level | fields |
//! |---|---|---|
//! | → open (tripped, probe failed, lease expired, opened by another replica) | WARN | `tool`, `reason`, `cooldown` (until the next probe may be let through) |
//! | open → half-open (probe granted) | INFO | `tool`, `reason` |
//! | → closed (probe succeeded here, or another replica's probe did) | INFO | `tool`, `reason` |
//! | half-open → open, probe given back without a verdict | INFO | `tool`, `reason` |
//!
//! Tool names are escaped in the messages (control characters, quotes and backslashes as Rust
//! escapes them): a name the model wrote can never forge a log line. The `tool` field carries
//! the name exactly; `tracing`'s formatters escape field values themselves.
//!
//! The overflow breaker (shared by the names past the cap) logs its transitions too, with
//! `tool = "_OTHER"` and `overflow = true`; observers are not told of them (they concern no
//! one tool, and a coordinator must not spread them as a tool's).
//!
//! One switch turns it off: [`RegistryBuilder::log_transitions`](super::RegistryBuilder::log_transitions)
//! (or [`ToolHealthRegistry::set_log_transitions`]); a filter directive `tool_health=off` does
//! too. These events never fail a tool span: the layer ignores this crate's events.

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::breaker::{BreakerState, Effective, Recorded, Transition, TransitionReason};
use crate::call::CallOutcome;
use crate::hook::CallingOut;

use super::entry::Entry;
use super::names::Escaped;
use super::{ToolHealthRegistry, EXTRA_OBSERVE};

/// The target of the transition log (see the module docs).
pub const LOG_TARGET: &str = "tool_health";

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

/// A tool the registry stopped tracking (idle eviction), as observers see it: what its entry
/// counted since it was created, resets ignored, for exporters that must keep counters
/// monotonic if the tool comes back.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct EvictedTool<'a> {
    /// The tool.
    pub tool: &'a str,
    /// Successful calls since the entry was created.
    pub success_count: u64,
    /// Failed calls since the entry was created.
    pub failure_count: u64,
    /// Refused calls since the entry was created.
    pub refused_count: u64,
    /// Calls a control let through that the breaker would have refused.
    pub shadow_refused_count: u64,
    /// Calls started and never finished since the entry was created.
    pub cancelled_count: u64,
    /// Of the refusals, those made while a coordinator had a say in the episode (see
    /// [`Coordination::open_remotely`](crate::coordination::Coordination::open_remotely)).
    pub coordinated_refused_count: u64,
    /// Transitions taken, per edge of [`Transition::PAIRS`].
    pub transitions: [u64; 5],
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

    /// An operator control changed whether the tool admits calls, with no transition of its
    /// breaker: forced open (for a while or until released), forced closed, released, reset.
    /// `at` is the registry clock's reading. A view of what is available reads the tool again
    /// (the MCP tools subscription does, and sets its timer for a forced-open that ends).
    fn on_control(&self, tool: &str, at: Duration) {
        let _ = (tool, at);
    }

    /// A tool was evicted ([`ToolHealthRegistry::evict_idle`]). Called after the sweep, on the
    /// sweeping thread, with no lock of the registry held. The tool may be tracked again
    /// already: a later call creates a fresh entry.
    fn on_evict(&self, evicted: &EvictedTool<'_>) {
        let _ = evicted;
    }
}

impl ToolHealthRegistry {
    /// Adds a transition-only observer (see [`Coordination::add_transition_observer`](crate::coordination::Coordination::add_transition_observer)).
    pub(crate) fn add_transition_observer(&self, observer: Arc<dyn HealthObserver>) {
        self.transition_observers.rcu(|list| {
            let mut list = Vec::clone(list);
            list.push(observer.clone());
            list
        });
    }

    /// Unregisters a transition-only observer (see
    /// [`Coordination::remove_transition_observer`](crate::coordination::Coordination::remove_transition_observer)).
    pub(crate) fn remove_transition_observer(&self, observer: &Arc<dyn HealthObserver>) -> bool {
        let mut found = false;
        self.transition_observers.rcu(|list| {
            let mut list = Vec::clone(list);
            let before = list.len();
            list.retain(|o| !Arc::ptr_eq(o, observer));
            found = list.len() != before;
            list
        });
        found
    }

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

    /// Tells observers about evicted entries (after the sweep released the insert lock).
    pub(super) fn notify_evicted(&self, evicted: &[Arc<Entry>]) {
        if evicted.is_empty() {
            return;
        }
        let transition_observers = self.transition_observers.load();
        if !self.has_observers() && transition_observers.is_empty() {
            return;
        }
        let _quiet = CallingOut::enter();
        let observers = self.observers.load();
        for e in evicted {
            let raw = e.stats.raw();
            let event = EvictedTool {
                tool: &e.name,
                success_count: raw.success,
                failure_count: raw.failure,
                refused_count: raw.refused,
                shadow_refused_count: raw.shadow_refused,
                cancelled_count: raw.cancelled,
                coordinated_refused_count: raw.coordinated_refused,
                transitions: e.breaker.transition_counts(),
            };
            for o in observers.iter().chain(transition_observers.iter()) {
                o.on_evict(&event);
            }
        }
    }

    /// [`notify_transitions`](Self::notify_transitions) for a resolved entry: the overflow
    /// breaker's transitions are logged as its own, and told to no observer.
    #[inline(always)]
    pub(super) fn notify_entry_transitions(&self, e: &Entry, recorded: &Recorded) {
        if !recorded.is_empty() {
            if Self::is_overflow(e) {
                self.log_overflow_transitions(e, recorded);
            } else {
                self.notify_transitions_slow(&e.name, recorded);
            }
        }
    }

    #[cold]
    fn log_overflow_transitions(&self, e: &Entry, recorded: &Recorded) {
        if !self.log_transitions.load(Ordering::Relaxed) {
            return;
        }
        let _quiet = CallingOut::enter();
        let tool = &*e.name;
        for t in recorded.transitions() {
            match t.to {
                BreakerState::Open => {
                    let now = self.now_ticks();
                    let cooldown = match e.breaker.effective(now) {
                        Effective::Open { ready_at, .. } => ready_at.until(now).to_duration(),
                        _ => Duration::ZERO,
                    };
                    tracing::warn!(
                        target: LOG_TARGET,
                        tool,
                        overflow = true,
                        reason = %t.reason,
                        cooldown = ?cooldown,
                        "overflow circuit breaker opened: calls to the tool names past the cap \
                         are refused for {cooldown:?} (declare the application's tools so that \
                         each keeps its own breaker)"
                    );
                }
                BreakerState::HalfOpen => tracing::info!(
                    target: LOG_TARGET,
                    tool,
                    overflow = true,
                    reason = %t.reason,
                    "overflow circuit breaker half-open: one probe call let through"
                ),
                BreakerState::Closed => tracing::info!(
                    target: LOG_TARGET,
                    tool,
                    overflow = true,
                    reason = %t.reason,
                    "overflow circuit breaker closed"
                ),
            }
        }
    }

    /// Logs the transitions a result or gate call made (see [`log_transition`]) and tells
    /// observers.
    #[inline(always)]
    pub(super) fn notify_transitions(&self, tool: &str, recorded: &Recorded) {
        if !recorded.is_empty() {
            self.notify_transitions_slow(tool, recorded);
        }
    }

    #[inline(never)]
    fn notify_transitions_slow(&self, tool: &str, recorded: &Recorded) {
        let _quiet = CallingOut::enter();
        if self.log_transitions.load(Ordering::Relaxed) {
            for t in recorded.transitions() {
                self.log_transition(tool, &t);
            }
        }
        let transition_observers = self.transition_observers.load();
        if !self.has_observers() && transition_observers.is_empty() {
            return;
        }
        let at = self.clock.now();
        let observers = self.observers.load();
        for t in recorded.transitions() {
            for o in observers.iter().chain(transition_observers.iter()) {
                o.on_transition(tool, &t, at);
            }
        }
    }

    /// Tells observers an operator control changed `tool` (see [`HealthObserver::on_control`]).
    pub(super) fn notify_control(&self, tool: &str) {
        let transition_observers = self.transition_observers.load();
        if !self.has_observers() && transition_observers.is_empty() {
            return;
        }
        let _quiet = CallingOut::enter();
        let at = self.clock.now();
        for o in self
            .observers
            .load()
            .iter()
            .chain(transition_observers.iter())
        {
            o.on_control(tool, at);
        }
    }

    /// Whether breaker transitions are logged as `tracing` events with target
    /// [`LOG_TARGET`] (default on; see
    /// [`RegistryBuilder::log_transitions`](crate::RegistryBuilder::log_transitions)).
    pub fn set_log_transitions(&self, on: bool) {
        self.log_transitions.store(on, Ordering::Relaxed);
    }

    /// One transition as a `tracing` event, target `tool_health` (see [`log_transition`]).
    fn log_transition(&self, tool: &str, t: &Transition) {
        match t.to {
            BreakerState::Open => {
                let now = self.now_ticks();
                // When the gate could next admit a call: the cooldown (and any Retry-After
                // floor or backoff), as the gate itself will apply it.
                let (cooldown, called_here) = self
                    .with_entry(tool, |e| {
                        let raw = e.stats.raw();
                        let called = raw.success
                            | raw.failure
                            | raw.ignored
                            | raw.refused
                            | raw.shadow_refused
                            | raw.cancelled
                            != 0;
                        let cooldown = match e.breaker.effective(now) {
                            Effective::Open { ready_at, .. } => {
                                Some(ready_at.until(now).to_duration())
                            }
                            _ => None,
                        };
                        (cooldown, called)
                    })
                    .map_or((None, false), |(c, called)| (c, called));
                let cooldown = cooldown.unwrap_or_default();
                if t.reason == TransitionReason::RemoteOpen && (!called_here || cooldown.is_zero())
                {
                    // Another replica's episode adopted for a tool this replica has not
                    // called (a replica starting up reads every open episode in the store,
                    // a dead replica's too), or one that already ended: it refuses none of
                    // this replica's calls, so it is no warning.
                    tracing::debug!(
                        target: LOG_TARGET,
                        tool,
                        reason = %t.reason,
                        cooldown = ?cooldown,
                        "circuit breaker opened by another replica (adopted; not called here)"
                    );
                } else if t.reason == TransitionReason::ProbeReleased {
                    tracing::info!(
                        target: LOG_TARGET,
                        tool,
                        reason = %t.reason,
                        "circuit breaker probe given back (no verdict): the next call may probe"
                    );
                } else {
                    tracing::warn!(
                        target: LOG_TARGET,
                        tool,
                        reason = %t.reason,
                        cooldown = ?cooldown,
                        "circuit breaker opened: calls to `{}` are refused for {cooldown:?}",
                        Escaped(tool)
                    );
                }
            }
            BreakerState::HalfOpen => tracing::info!(
                target: LOG_TARGET,
                tool,
                reason = %t.reason,
                "circuit breaker half-open: one probe call to `{}` let through",
                Escaped(tool)
            ),
            BreakerState::Closed => tracing::info!(
                target: LOG_TARGET,
                tool,
                reason = %t.reason,
                "circuit breaker closed: `{}` recovered",
                Escaped(tool)
            ),
        }
    }
}
