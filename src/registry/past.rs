//! Records of calls reported after the fact: applied by the call's own clock, not by when the
//! report arrived.
//!
//! A span exported by another process (an agent's OpenTelemetry SDK, through the OTLP
//! receiver) reaches the registry seconds after the call ended — the SDK's batch delay — and
//! batches from several agents arrive in any order. [`ToolHealthRegistry::record_past`] takes
//! the call's start and end on the registry's clock and applies the breaker's rules *as of*
//! those instants:
//!
//! 1. **The span is the probe** when the breaker is open and its cooldown had ended by the
//!    instant the call *started* (and no probe is held — a gate call's probe, a claim through
//!    an API — at that instant): the probe is granted as of the start and the call's outcome
//!    is its verdict as of the end. A success closes the breaker, a failure re-opens it with a
//!    cooldown counted from the end, a call with no verdict on the tool (a caller error, a
//!    cancellation) gives the probe back. So one agent's spans alone bring a tool back.
//! 2. **Stale**: a call that ended before the breaker's current episode began (before the trip
//!    that opened it, the probe grant that made it half-open, the close that closed it) is
//!    counted in the stats and never moves the breaker: a late batch of old failures never
//!    restarts a cooldown, never fails a newer probe, never trips a recovered tool.
//! 3. **Otherwise** the outcome is applied to the current episode as of the call's end: a
//!    failure counts toward the threshold (a trip's cooldown counts from the end) or, while
//!    open, restarts the cooldown from the end (never shortening it); a success resets the
//!    counter while closed, is ignored while open, closes a half-open breaker whose probe
//!    (held through the API) it ended within; a call with no verdict goes to the stats only
//!    (it never gives back a probe someone else holds).
//!
//! Instants after now are read as now. A tool under an operator control (forced open or
//! closed, shadow mode) or a coordinator's say is recorded as [`record_report`]
//! does, at arrival: controls and fleet decisions are present-tense.
//!
//! The gate's and the record's fast paths are untouched: this is a path of its own.
//!
//! [`record_report`]: ToolHealthRegistry::record_report

use std::time::Duration;

use crate::breaker::{Effective, Recorded};
use crate::call::{CallOutcome, CallReport, GateDecision};
use crate::ticks::{Now, Ticks};

use super::entry::Entry;
use super::observers::CallEvent;
use super::ToolHealthRegistry;

/// When a call reported after the fact ran, as readings of the registry's clock
/// ([`ToolHealthRegistry::now`]): what [`ToolHealthRegistry::record_past`] applies the
/// breaker's rules at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallTimes {
    /// The instant the call started.
    pub started: Duration,
    /// The instant it ended (its outcome's instant).
    pub ended: Duration,
}

impl CallTimes {
    /// A call that ran from `started` to `ended` (registry clock readings).
    pub fn new(started: Duration, ended: Duration) -> Self {
        Self { started, ended }
    }
}

/// How a record after the fact was applied (see the [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PastApplied {
    /// To the breaker's current episode, as of the call's end.
    Breaker,
    /// The call started after the cooldown ended: it was granted the probe as of its start,
    /// and its outcome was the probe's verdict.
    Probe,
    /// It ended before the current episode began: stats only.
    Stale,
    /// No verdict on the tool (a caller error, a cancellation) outside a probe it held: stats
    /// only.
    StatsOnly,
    /// Recorded at arrival, as [`ToolHealthRegistry::record_report`] does (an operator
    /// control or a coordinator has a say in the tool, the report carries a permit, or the
    /// tool is past the tracking cap).
    AtArrival,
}

/// What [`ToolHealthRegistry::record_past`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PastRecorded {
    /// How the record was applied.
    pub applied: PastApplied,
    /// The transitions it made (a probe grant and its verdict are two: the grant is told to
    /// observers and logged, the verdict is here).
    pub recorded: Recorded,
}

/// What a past record did on an entry, before observers are told.
enum OnEntry {
    Done(PastApplied, Recorded, Recorded),
    AtArrival,
}

impl ToolHealthRegistry {
    /// Records a call that ran at `times` (registry clock readings, usually in the past): the
    /// stats as [`record_report`](Self::record_report) counts them, and the breaker by the
    /// call's own clock — the span-probe rule, stale results and the current episode as the
    /// [module docs](crate::registry::past) say. What the OTLP receiver records spans with.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tool_health::{BreakerState, CallOutcome, CallReport, CircuitBreakerConfig, ManualClock, ToolHealthRegistry};
    /// use tool_health::past::CallTimes;
    ///
    /// let clock = ManualClock::new();
    /// let registry = ToolHealthRegistry::builder()
    ///     .config(CircuitBreakerConfig { failure_threshold: 1, ..Default::default() })
    ///     .clock(clock.clone())
    ///     .build();
    /// let s = Duration::from_secs;
    /// clock.advance(s(100));
    /// let failed = CallReport::new(CallOutcome::Failure, s(1));
    /// // A failure that ended at 95 s, reported at 100 s: the cooldown (30 s) counts from 95 s.
    /// registry.record_past("search", &failed, CallTimes::new(s(94), s(95)));
    /// assert_eq!(registry.breaker_state("search"), BreakerState::Open);
    /// // An older failure arriving late is stale: it does not restart the cooldown.
    /// registry.record_past("search", &failed, CallTimes::new(s(89), s(90)));
    /// clock.advance(s(30));
    /// // A call that started at 126 s (after the cooldown's end, 125 s) is the probe; it succeeded.
    /// let ok = CallReport::new(CallOutcome::Success, s(1));
    /// registry.record_past("search", &ok, CallTimes::new(s(126), s(127)));
    /// assert_eq!(registry.breaker_state("search"), BreakerState::Closed);
    /// ```
    pub fn record_past(
        &self,
        tool: &str,
        report: &CallReport<'_>,
        times: CallTimes,
    ) -> PastRecorded {
        let at_arrival = |r: &Self| PastRecorded {
            applied: PastApplied::AtArrival,
            recorded: r.record_report(tool, report),
        };
        if report.generation.is_some() || report.outcome == CallOutcome::Refused {
            return at_arrival(self);
        }
        let now = self.now();
        let ended = times.ended.min(now);
        let started = times.started.min(ended);
        let Some(done) =
            self.with_entry_or_insert(tool, |e| self.past_on_entry(e, report, started, ended))
        else {
            return at_arrival(self); // past the cap: the overflow's count
        };
        let (applied, grant, recorded) = match done {
            OnEntry::AtArrival => return at_arrival(self),
            OnEntry::Done(applied, grant, recorded) => (applied, grant, recorded),
        };
        self.notify_transitions(tool, &grant);
        self.notify_transitions(tool, &recorded);
        self.notify_call(|| CallEvent {
            tool,
            outcome: report.outcome,
            duration: report.duration,
            error_type: report.error_type,
            overflow: false,
        });
        PastRecorded { applied, recorded }
    }

    /// [`record_past`](Self::record_past) on a resolved entry: the stats, then the breaker.
    fn past_on_entry(
        &self,
        e: &Entry,
        report: &CallReport<'_>,
        started: Duration,
        ended: Duration,
    ) -> OnEntry {
        if e.control.raw() != 0 {
            return OnEntry::AtArrival;
        }
        let duration = report.duration;
        match report.outcome {
            CallOutcome::Success | CallOutcome::Failure => e
                .stats
                .record(report.outcome == CallOutcome::Success, duration),
            CallOutcome::Cancelled => e.stats.record_cancelled(),
            _ => e.stats.record_ignored(),
        }
        // What the breaker hears: a slow success is a failure for it, as in `record_report`.
        let slow = e.breaker.is_slow(duration);
        let verdict = match report.outcome {
            CallOutcome::Success if slow => Some(false),
            CallOutcome::Success => Some(true),
            CallOutcome::Failure => Some(false),
            _ => None,
        };
        let (start, end) = (Now::of(started), Now::of(ended));
        let rate_trips = self
            .local_rate_trips
            .load(std::sync::atomic::Ordering::Relaxed);
        let failure_hint = |end: Now| {
            report
                .retry_after
                .filter(|_| report.outcome == CallOutcome::Failure)
                .map_or(Ticks::ZERO, |d| end.base.after(Ticks::span(d)))
        };

        // 1. The span-probe rule: open, and the cooldown had ended when the call started.
        if let Effective::Open { ready_at, .. } = e.breaker.effective(start.at) {
            if !ready_at.is_never() && start.at >= ready_at {
                let (decision, grant) = e.breaker.acquire(|| start);
                if let GateDecision::Probe(permit) = decision {
                    let g = Some(permit.generation());
                    let recorded = match verdict {
                        Some(true) => e.breaker.on_success(g, || end),
                        Some(false) => {
                            e.breaker
                                .on_failure_rated(g, end, failure_hint(end), rate_trips)
                        }
                        None => e.breaker.release(g, end),
                    };
                    return OnEntry::Done(PastApplied::Probe, grant, recorded);
                }
            }
        }

        // 2. Stale: it ended before the current episode began.
        let (word, began) = e.breaker.episode_start(self.now_ticks());
        if end.at < began {
            return OnEntry::Done(PastApplied::Stale, Recorded::default(), Recorded::default());
        }

        // 3. The current episode, as of the call's end.
        let g = Some(word.generation);
        let recorded = match verdict {
            Some(true) => e.breaker.on_success(g, || end),
            Some(false) => e
                .breaker
                .on_failure_rated(g, end, failure_hint(end), rate_trips),
            None => {
                return OnEntry::Done(
                    PastApplied::StatsOnly,
                    Recorded::default(),
                    Recorded::default(),
                )
            }
        };
        OnEntry::Done(PastApplied::Breaker, Recorded::default(), recorded)
    }
}
