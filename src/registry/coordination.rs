//! The coordination surface: what a *coordinator* reads from the registry and applies to it.
//!
//! A coordinator shares breaker decisions between the replicas of a service (the `fleet`
//! feature is one: it talks to Valkey/Redis). The registry knows nothing of networks or of any
//! particular coordinator; it offers this surface, and the coordinator runs beside it:
//!
//! * it **hears** the local breakers' transitions through
//!   [`add_transition_observer`](Coordination::add_transition_observer) (off the record
//!   path's fast path: a plain registry's hot path is unchanged);
//! * it **reads** a tool's breaker as a [`CoordinationView`] (state, generation, how long until
//!   the next probe, the raw counts a fleet-wide failure rate is built from);
//! * it **applies** what other replicas decided through the same CAS loop the gate uses:
//!   [`open_remotely`](Coordination::open_remotely) (another replica tripped),
//!   [`close_remotely`](Coordination::close_remotely) (another replica's probe
//!   succeeded), and [`hold_probe`](Coordination::hold_probe) /
//!   [`release_hold`](Coordination::release_hold) (another replica holds the episode's
//!   single probe: this one keeps refusing until the result arrives or the holder's lease
//!   ends).
//!
//! Everything here only ever *moves the breaker word*: the gate and the record paths stay
//! atomics on the tool's entry and never wait for a coordinator. Only durations cross hosts —
//! a coordinator says "open for 12 s", never "open until 10:42:07" — so a replica whose clock
//! is off applies the same decisions.
//!
//! A tool in an episode a coordinator has a say in is marked *coordinated* until the episode
//! ends here: its refusals are counted apart (the `tool_health.calls` series with
//! `tool_health.gate.source = fleet`) and the tracing layer writes the same attribute on the
//! spans it refuses or probes ([`is_coordinated_decision`](Coordination::is_coordinated_decision)).
//!
//! ```
//! use std::time::Duration;
//! use tool_health::{BreakerState, ManualClock, ToolHealthRegistry};
//!
//! let clock = ManualClock::new();
//! let replica = ToolHealthRegistry::builder().clock(clock.clone()).build();
//!
//! // Another replica tripped `search`; its cooldown has 20 s left.
//! let opened = replica.coordination().open_remotely("search", Duration::from_secs(20), true).unwrap();
//! assert_eq!(replica.breaker_state("search"), BreakerState::Open);
//! assert!(!replica.allow_request("search"));
//!
//! // A third replica won the probe: this one holds off until its lease ends (30 s from now).
//! let hold = replica.coordination().hold_probe("search", Duration::from_secs(30)).unwrap();
//! clock.advance(Duration::from_secs(20));
//! assert!(!replica.allow_request("search"), "the cooldown ended, the probe is elsewhere");
//!
//! // That probe succeeded: every replica closes.
//! replica.coordination().close_remotely("search", opened.generation);
//! assert!(replica.allow_request("search"));
//! # let _ = hold;
//! ```

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::breaker::{BreakerState, Effective, Recorded, Word};
use crate::control::Control;
use crate::policy::TripPolicy;
use crate::ticks::Ticks;

use super::entry::Entry;
use super::observers::HealthObserver;
use super::ToolHealthRegistry;

/// One tool's breaker as a coordinator reads it (see [`Coordination::coordination_view`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CoordinationView {
    /// The breaker's own state now (expiry-aware; operator controls are not looked at).
    pub state: BreakerState,
    /// The breaker's generation: the episode [`close_remotely`](Coordination::close_remotely)
    /// names.
    pub generation: u32,
    /// While open: how long until the next probe may be granted (zero once it may;
    /// `Duration::MAX`: never). `None` while closed or half-open.
    pub ready_in: Option<Duration>,
    /// The cooldown an opening would get now (the recovery at the current backoff level).
    pub recovery: Duration,
    /// The tool's probe lease (`Duration::ZERO`: no lease).
    pub probe_timeout: Duration,
    /// The tool's trip policy.
    pub trip: TripPolicy,
    /// Successful calls since the entry was created (never reset: a coordinator sends
    /// differences of it).
    pub success: u64,
    /// Failed calls since the entry was created (never reset).
    pub failure: u64,
    /// Refused calls since the entry was created (never reset): demand for the tool while it
    /// is open.
    pub refused: u64,
    /// The breaker's consecutive failures now (failures since the last accepted success).
    pub consecutive: u64,
    /// The tool's consecutive-failure threshold (`0`: its breaker never trips on a streak).
    pub threshold: u32,
    /// Which entry of the tool this is: a number the registry gives every entry it creates.
    /// Counts are "since the entry was created": a different incarnation (the tool was evicted
    /// and is tracked again) counts from zero.
    pub incarnation: u32,
    /// Whether a coordinator has a say in the current episode.
    pub coordinated: bool,
}

/// A tool's call counts since its entry was created (see [`Coordination::for_each_count`]):
/// the [`CoordinationView`] fields a coordinator that sends differences needs every round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallCounts {
    /// Which entry of the tool this is (see [`CoordinationView::incarnation`]).
    pub incarnation: u32,
    /// Successful calls since the entry was created.
    pub success: u64,
    /// Failed calls since the entry was created.
    pub failure: u64,
}

/// What [`Coordination::open_remotely`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoteOpen {
    /// The breaker's generation afterwards: the episode a later
    /// [`close_remotely`](Coordination::close_remotely) names.
    pub generation: u32,
    /// Whether the breaker is open afterwards (a live local probe that was not aborted keeps
    /// it half-open).
    pub open: bool,
    /// While open: how long until the next probe may be granted here.
    pub ready_in: Duration,
    /// The transitions made: closed → open (or a probe aborted), with
    /// [`TransitionReason::RemoteOpen`](crate::TransitionReason::RemoteOpen).
    pub recorded: Recorded,
}

/// Hears every failure the registry records (a failed call, a slow success), and the successes
/// of the tools a coordinator watches ([`Coordination::watch_successes`]) — what a fleet-wide
/// failure streak is built from. Called on the recording thread, right after the breaker took
/// the result: it must return at once and must not block (fleet mode's marks the tool in a
/// fixed set and wakes its task; it neither allocates nor locks). Set with
/// [`Coordination::set_outcome_listener`].
pub trait OutcomeListener: Send + Sync + std::fmt::Debug {
    /// A failure of `tool` (`failed`), or a success of a watched tool.
    fn on_outcome(&self, tool: &str, failed: bool);
}

/// The outcome listener in its slot (arc-swap holds sized values).
#[derive(Debug)]
pub(crate) struct Listening(pub(crate) Arc<dyn OutcomeListener>);

/// A probe held back by [`Coordination::hold_probe`]: what
/// [`release_hold`](Coordination::release_hold) puts back. Opaque; `Copy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeHold {
    installed: Word,
    previous: Ticks,
}

impl ProbeHold {
    /// The generation of the episode held.
    pub fn generation(&self) -> u32 {
        self.installed.generation
    }

    /// Whether the hold changed nothing (the breaker was already open at least that long).
    pub fn is_noop(&self) -> bool {
        self.installed.deadline == self.previous
    }
}

impl ToolHealthRegistry {
    /// The coordination surface: what a coordinator of several replicas (fleet mode is one)
    /// reads from this registry and applies to it. Applications do not need it; see the
    /// [`coordination`](crate::coordination) module.
    pub fn coordination(&self) -> Coordination<'_> {
        Coordination { registry: self }
    }
}

/// The coordination surface of one registry ([`ToolHealthRegistry::coordination`]; the
/// [module docs](crate::coordination) say what it is for).
#[derive(Debug, Clone, Copy)]
pub struct Coordination<'a> {
    registry: &'a ToolHealthRegistry,
}

impl Coordination<'_> {
    /// Registers an observer of transitions and evictions only: its
    /// [`on_call`](crate::HealthObserver::on_call) is never called. Unlike
    /// [`ToolHealthRegistry::add_observer`], this leaves the record path exactly as it is
    /// without observers — transitions are announced off its fast path — which is what a
    /// coordinator needs.
    pub fn add_transition_observer(&self, observer: Arc<dyn HealthObserver>) {
        self.registry.add_transition_observer(observer);
    }

    /// Unregisters an observer [`add_transition_observer`](Self::add_transition_observer)
    /// registered (the same `Arc`); whether it was there.
    pub fn remove_transition_observer(&self, observer: &Arc<dyn HealthObserver>) -> bool {
        self.registry.remove_transition_observer(observer)
    }

    /// The tool's breaker as a coordinator reads it; `None` for a tool not tracked.
    pub fn coordination_view(&self, tool: &str) -> Option<CoordinationView> {
        let now = self.registry.now_ticks();
        self.registry.with_entry(tool, |e| Self::view_of(e, now))
    }

    /// Visits every tracked tool's [`CallCounts`]: the cheapest pass over the tools (no
    /// policy, no breaker read; allocation-free). A coordinator that sends the differences of
    /// the counts every round reads the whole view of the tools whose counts moved only.
    pub fn for_each_count(&self, mut f: impl FnMut(&str, CallCounts)) {
        self.registry.names.for_each(|e| {
            let (success, failure) = e.stats.calls();
            f(
                &e.name,
                CallCounts {
                    incarnation: e.stats.incarnation,
                    success,
                    failure,
                },
            );
        });
    }

    /// Visits every tracked tool's [`CoordinationView`] (allocation-free per tool).
    pub fn for_each_coordination_view(&self, mut f: impl FnMut(&str, &CoordinationView)) {
        let now = self.registry.now_ticks();
        self.registry
            .names
            .for_each(|e| f(&e.name, &Self::view_of(e, now)));
    }

    fn view_of(e: &Entry, now: Ticks) -> CoordinationView {
        let eff = e.breaker.effective(now);
        let policy = e.breaker.policy();
        let raw = e.stats.raw();
        CoordinationView {
            state: eff.state(),
            generation: e.breaker.generation(),
            ready_in: match eff {
                Effective::Open { ready_at, .. } => Some(ready_at.until(now).to_duration()),
                _ => None,
            },
            recovery: e.breaker.recovery().to_duration(),
            probe_timeout: policy.breaker.probe_timeout,
            trip: policy.trip,
            success: raw.success,
            failure: raw.failure,
            refused: raw.refused,
            consecutive: e.breaker.consecutive_failures(),
            threshold: policy.breaker.failure_threshold,
            incarnation: e.stats.incarnation,
            coordinated: Control::is_coordinated(e.control.raw()),
        }
    }

    /// Applies another replica's trip: the tool's breaker is open for at least `ready_in` from
    /// now (durations only cross hosts). A closed breaker opens (a new episode, transition
    /// closed → open with [`TransitionReason::RemoteOpen`](crate::TransitionReason::RemoteOpen),
    /// logged and told to observers); an open one keeps its episode and takes the later
    /// deadline — never an earlier one, so a local retry hint or backoff stays a floor; a
    /// probe in flight here is aborted (its result is stale from then on) only with
    /// `abort_probe`. Creates the tool's entry if needed; `None` past the cap.
    ///
    /// The episode is marked coordinated until it ends here (see the module docs).
    pub fn open_remotely(
        &self,
        tool: &str,
        ready_in: Duration,
        abort_probe: bool,
    ) -> Option<RemoteOpen> {
        let now = self.registry.now_step();
        let until = now.base.after(Ticks::span(ready_in));
        let (after, recorded) = self.registry.with_entry_or_insert(tool, |e| {
            let (_, after, recorded) = e.breaker.remote_open(until, abort_probe, now);
            if after.is_open() {
                // After the word: a gate call in between is counted as a plain refusal, and
                // the mark never outlives an episode that ended before it was set.
                e.control.set_coordinated(true);
            }
            (after, recorded)
        })?;
        self.registry.notify_transitions(tool, &recorded);
        let open = after.is_open();
        Some(RemoteOpen {
            generation: after.generation,
            open,
            ready_in: if open {
                after.deadline.until(now.at).to_duration()
            } else {
                Duration::ZERO
            },
            recorded,
        })
    }

    /// Holds the tool's next probe back for at least `for_at_least` from now, because another
    /// replica holds the probe of this episode: an open breaker's deadline (when the next probe
    /// may be granted) becomes the later of the two. Refusals meanwhile say when the hold ends
    /// (every `retry_after` the registry reports agrees). `None` when the tool is not tracked
    /// or its breaker is not open (closed, or a probe of its own in flight).
    ///
    /// [`release_hold`](Self::release_hold) puts back the deadline the hold replaced — when
    /// this replica wins the probe after all.
    pub fn hold_probe(&self, tool: &str, for_at_least: Duration) -> Option<ProbeHold> {
        let now = self.registry.now_step();
        let until = now.base.after(Ticks::span(for_at_least));
        self.registry
            .with_entry(tool, |e| {
                if e.breaker.effective(now.at).state() != BreakerState::Open {
                    return None;
                }
                let (before, after, recorded) = e.breaker.remote_open(until, false, now);
                if !after.is_open() {
                    return None;
                }
                e.control.set_coordinated(true);
                // `before` may be a half-open word whose lease expired: the open deadline it stood
                // for (the lease's end plus the recovery) is what to put back.
                let previous = e.breaker.ready_at(before, now.at).unwrap_or(after.deadline);
                Some((
                    ProbeHold {
                        installed: after,
                        previous,
                    },
                    recorded,
                ))
            })
            .flatten()
            .map(|(hold, recorded)| {
                self.registry.notify_transitions(tool, &recorded);
                hold
            })
    }

    /// Puts back the deadline [`hold_probe`](Self::hold_probe) replaced, if the breaker is still
    /// exactly as the hold left it (a failure since, or any other news, stands). Whether it did.
    pub fn release_hold(&self, tool: &str, hold: ProbeHold) -> bool {
        if hold.is_noop() {
            return false;
        }
        let now = self.registry.now_step();
        self.registry
            .with_entry(tool, |e| {
                e.breaker.restore(hold.installed, hold.previous, now)
            })
            .unwrap_or(false)
    }

    /// Applies another replica's recovery (its probe succeeded): closes the tool's breaker if it
    /// is open or half-open in the episode of generation `since_generation` — the one
    /// [`open_remotely`](Self::open_remotely) answered — or a continuation of it (probes granted
    /// and given back since). The close is bound to that episode: a breaker that is closed, in
    /// an older episode, or in a newer one (the episode `since_generation` named ended here —
    /// its breaker closed — and the tool tripped again since) is left alone, so a late close
    /// never lets calls through to a tool that is failing now.
    /// Closing is what a probe's success does here: counter reset, fresh failure-rate window,
    /// transition with [`TransitionReason::RemoteClose`](crate::TransitionReason::RemoteClose).
    pub fn close_remotely(&self, tool: &str, since_generation: u32) -> Recorded {
        let now = self.registry.now_step();
        let recorded = self
            .registry
            .with_entry(tool, |e| {
                let recorded = e.breaker.remote_close(since_generation, now);
                if recorded.transition.is_some() {
                    e.control.set_coordinated(false);
                }
                recorded
            })
            .unwrap_or_default();
        self.registry.notify_transitions(tool, &recorded);
        recorded
    }

    /// Ends the coordinator's say in the tool's current episode (the episode ended here: a
    /// local probe closed it, or the coordinator lets this replica act alone). Refusals are
    /// counted as plain ones again.
    pub fn end_coordination(&self, tool: &str) {
        self.registry
            .with_entry(tool, |e| e.control.set_coordinated(false));
    }

    /// Whether the tool's current episode is one a coordinator has a say in: a refusal or a
    /// probe the gate makes now is the fleet's decision (the tracing layer writes
    /// `tool_health.gate.source = fleet` on such spans). One load per call; `false` for
    /// untracked tools and in a registry no coordinator is attached to.
    pub fn is_coordinated_decision(&self, tool: &str) -> bool {
        self.registry.coordinated.load(Ordering::Relaxed)
            && self
                .registry
                .with_entry(tool, |e| Control::is_coordinated(e.control.raw()))
                .unwrap_or(false)
    }

    /// Whether a tool's own failure-rate window may trip its breaker (default `true`). A
    /// coordinator that evaluates failure rates over the whole fleet turns it off while it is
    /// connected, and back on when it is not, so that a replica keeps breaking on its own.
    /// The window keeps counting either way.
    pub fn set_local_rate_trips(&self, on: bool) {
        self.registry.local_rate_trips.store(on, Ordering::Relaxed);
    }

    /// Sets (or, with `None`, removes) the outcome listener: from then on every failure the
    /// registry records is told to it, and so are the successes of the tools it watches
    /// ([`watch_successes`](Self::watch_successes)). A plain registry's record path is
    /// unchanged: the failure path pays one relaxed load while no listener is set, and the
    /// success path only ever leaves its fast path for a watched tool.
    pub fn set_outcome_listener(&self, listener: Option<Arc<dyn OutcomeListener>>) {
        let on = listener.is_some();
        self.registry
            .outcome_listener
            .store(listener.map(|l| Arc::new(Listening(l))));
        self.registry.outcome_listening.store(on, Ordering::Relaxed);
    }

    /// Whether the tool's successes are told to the outcome listener (`on`) — while a failure
    /// streak the coordinator keeps is open — or not (the default: a success then costs what it
    /// costs without a coordinator). Whether the tool is tracked.
    pub fn watch_successes(&self, tool: &str, on: bool) -> bool {
        self.registry
            .with_entry(tool, |e| e.breaker.watch(on))
            .is_some()
    }

    /// Marks the registry as coordinated: exporters then report, for every tool, the series
    /// only a coordinator feeds (the `open → closed` transition edge, coordinated refusals),
    /// zeros included, so they never appear mid-run. A coordinator calls it when it attaches.
    pub fn mark_coordinated(&self) {
        self.registry.coordinated.store(true, Ordering::Relaxed);
    }

    /// Whether a coordinator is attached (see [`mark_coordinated`](Self::mark_coordinated)).
    pub fn is_coordinated(&self) -> bool {
        self.registry.coordinated.load(Ordering::Relaxed)
    }
}
