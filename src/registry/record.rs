//! Records: a finished call's outcome into the tool's stats and breaker, and `release`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::breaker::{BreakerState, Recorded};
use crate::call::{CallOutcome, CallReport, NotRecorded, Permit, OVERFLOW_TAG};
use crate::control::Control;
use crate::ticks::Ticks;

use super::entry::Entry;
use super::names::NameIndex;
use super::observers::CallEvent;
use super::ToolHealthRegistry;

impl ToolHealthRegistry {
    /// Records a successful call by name.
    ///
    /// A success while the breaker is half-open is taken as the probe's result and closes it;
    /// a success while open (or after the probe's lease expired) is ignored by the breaker.
    #[inline]
    pub fn record_success(&self, tool: &str, duration: Duration) -> Recorded {
        self.record_report(tool, &CallReport::new(CallOutcome::Success, duration))
    }

    /// Records a failed call by name.
    #[inline]
    pub fn record_failure(&self, tool: &str, duration: Duration) -> Recorded {
        self.record_report(tool, &CallReport::new(CallOutcome::Failure, duration))
    }

    /// Records a call admitted with `permit`: a result from an older breaker generation never
    /// closes or re-opens a newer episode. A probe whose call ends as
    /// [`CallOutcome::Ignored`] (no verdict on the tool) is given back at once; a call the
    /// breaker refused and a control let through ([`Permit::is_shadow_refused`]) goes to the
    /// stats only.
    #[inline]
    pub fn record_with_permit(
        &self,
        tool: &str,
        permit: Permit,
        outcome: CallOutcome,
        duration: Duration,
    ) -> Recorded {
        self.record_report(tool, &CallReport::new(outcome, duration).permit(permit))
    }

    /// The general record: any [`CallOutcome`], with the permit, `error.type` and retry hint
    /// a [`CallReport`] carries. A [`CallOutcome::Refused`] only counts a refusal; a
    /// [`CallOutcome::Cancelled`] counts a cancellation and gives a probe permit back.
    #[inline(always)]
    pub fn record_report(&self, tool: &str, report: &CallReport<'_>) -> Recorded {
        match &self.names {
            NameIndex::AppendOnly(index) => match index.get(tool) {
                Some(e) => self.record_on_entry(tool, e, report),
                None => self.record_first_sight(tool, report),
            },
            NameIndex::Evictable(_) => self.record_evictable(tool, report),
        }
    }

    /// [`record_report`](Self::record_report) in an evicting registry: out of line, so the
    /// append-only index's path carries no owned-`Arc` slot.
    #[inline(never)]
    fn record_evictable(&self, tool: &str, report: &CallReport<'_>) -> Recorded {
        let mut slot = None;
        match self.names.get(tool, &mut slot) {
            Some(e) => self.record_on_entry(tool, e, report),
            None => self.record_first_sight(tool, report),
        }
    }

    /// A record for a name the index does not hold (yet): a name too long to be a tool's is
    /// refused (counted, never copied); else the entry is created, or past the cap the call
    /// goes to the overflow breaker.
    #[cold]
    #[inline(never)]
    fn record_first_sight(&self, tool: &str, report: &CallReport<'_>) -> Recorded {
        if tool.len() > self.max_name_len {
            self.reject_name(tool.len());
            return Recorded::refused(NotRecorded::InvalidName);
        }
        match self.insert_slow(tool, false) {
            Some(e) => self.record_on_entry(tool, &e, report),
            None => self.record_overflow(tool, report),
        }
    }

    /// A record for a name past the cap, on the shared overflow breaker. A permit of the
    /// overflow breaker is its own; one the gate handed out for this name before the cap was
    /// reached (its tag is the name's) has no breaker to belong to, and the result counts as
    /// by name; any other is another tool's and is refused.
    #[cold]
    #[inline(never)]
    fn record_overflow(&self, tool: &str, report: &CallReport<'_>) -> Recorded {
        self.warn_overflow_once(tool);
        let e = self.overflow_entry();
        let mut report = *report;
        if let Some(p) = report.permit {
            let tag = p.tag();
            if tag != OVERFLOW_TAG {
                if tag != u64::from(self.tag_of(tool)) {
                    return self.refuse_foreign(&report);
                }
                report = report.without_permit();
            }
        }
        let duration = if report.outcome == CallOutcome::Refused {
            Duration::ZERO
        } else {
            report.duration
        };
        self.overflow_records.fetch_add(1, Ordering::Relaxed);
        let recorded = self.apply_record_cold(e, &report, duration);
        self.notify_entry_transitions(e, &recorded);
        self.notify_call(|| CallEvent {
            tool,
            outcome: report.outcome,
            duration,
            error_type: report.error_type,
            overflow: true,
        });
        recorded
    }

    /// A permit recorded under the name of a tool whose breaker did not hand it out: refused,
    /// and a probe given back to the breaker that did (found by its tag), so that tool's next
    /// call may probe instead of waiting for the lease.
    #[cold]
    #[inline(never)]
    fn refuse_foreign(&self, report: &CallReport<'_>) -> Recorded {
        if let Some(p) = report.permit.filter(|p| p.is_probe()) {
            self.release_owner(p);
        }
        Recorded::refused(NotRecorded::ForeignPermit)
    }

    /// Gives the probe `permit` back to the breaker that handed it out: the overflow breaker,
    /// or the tracked tool whose tag it carries (a scan: this is the cold path of a misuse).
    #[cold]
    fn release_owner(&self, permit: Permit) {
        let generation = Some(permit.generation());
        if permit.tag() == OVERFLOW_TAG {
            if let Some(e) = self.overflow.get() {
                let recorded = e.breaker.release(generation, self.now_step());
                self.notify_entry_transitions(e, &recorded);
            }
            return;
        }
        let mut owners = Vec::new();
        self.names.for_each(|e| {
            if e.breaker.tag() == permit.tag() {
                owners.push(Arc::clone(e));
            }
        });
        for e in owners {
            let recorded = e.breaker.release(generation, self.now_step());
            self.notify_entry_transitions(&e, &recorded);
        }
    }

    /// A result through a permit another breaker handed out, met off the record's fast path:
    /// a permit of the overflow breaker for a name that has an entry now (the cap made room
    /// between gate and record) is this tool's call — its probe goes back to the overflow
    /// breaker and the result counts by name; any other is refused ([`refuse_foreign`]).
    ///
    /// [`refuse_foreign`]: Self::refuse_foreign
    #[cold]
    #[inline(never)]
    fn record_foreign(&self, e: &Entry, report: &CallReport<'_>, duration: Duration) -> Recorded {
        let overflowed = report.permit.is_some_and(|p| p.tag() == OVERFLOW_TAG);
        if !overflowed {
            return self.refuse_foreign(report);
        }
        if let Some(p) = report.permit.filter(|p| p.is_probe()) {
            self.release_owner(p);
        }
        self.apply_record_cold(e, &report.without_permit(), duration)
    }

    /// [`apply_record`](Self::apply_record) for the cold paths, out of line: one more copy of
    /// its body, not one per cold caller (each copy would weigh on the inlining of the hot one).
    #[cold]
    #[inline(never)]
    fn apply_record_cold(
        &self,
        e: &Entry,
        report: &CallReport<'_>,
        duration: Duration,
    ) -> Recorded {
        self.apply_record(e, report, duration).unwrap_or_default()
    }

    /// The record on a resolved entry: the one implementation behind the by-name records and
    /// [`ToolHandle`](crate::ToolHandle).
    #[inline(always)]
    pub(super) fn record_on_entry(
        &self,
        tool: &str,
        e: &Entry,
        report: &CallReport<'_>,
    ) -> Recorded {
        let outcome = report.outcome;
        let duration = if outcome == CallOutcome::Refused {
            Duration::ZERO
        } else {
            report.duration
        };
        if self.record_extras.load(Ordering::Acquire) == 0 {
            // A plain registry: nothing to touch, nobody to tell. One load decides both.
            return match self.apply_record(e, report, duration) {
                None => Recorded::default(),
                Some(recorded) => {
                    self.notify_transitions(&e.name, &recorded); // the transition log
                    recorded
                }
            };
        }
        self.record_with_extras(tool, e, report, duration)
    }

    /// [`record_on_entry`](Self::record_on_entry) when records touch their entry (eviction) or
    /// observers are registered.
    #[inline(never)]
    fn record_with_extras(
        &self,
        tool: &str,
        e: &Entry,
        report: &CallReport<'_>,
        duration: Duration,
    ) -> Recorded {
        let outcome = report.outcome;
        let breaker_news = if self.evicting && e.is_retired() {
            // A handle kept across eviction: its tool's record goes to the live entry.
            self.redo_record(tool, report, duration)
        } else {
            let news = self.apply_record(e, report, duration);
            // Work first, then touch: a record never lands in an evicted entry (see `touch`);
            // a retired entry's record is redone on a fresh one. A refused result did no work.
            if news.is_some_and(|r| !r.is_recorded()) || self.touch(e) {
                news
            } else {
                self.redo_record(tool, report, duration)
            }
        };
        if let Some(refused) = breaker_news.filter(|r| !r.is_recorded()) {
            return refused; // nothing happened: nothing to tell
        }
        // `None` (the hot path: a success on a Closed breaker) is known empty without looking.
        let recorded = match breaker_news {
            None => Recorded::default(),
            Some(recorded) => {
                self.notify_transitions(tool, &recorded);
                recorded
            }
        };
        self.notify_call(|| CallEvent {
            tool,
            outcome,
            duration,
            error_type: report.error_type,
            overflow: false,
        });
        recorded
    }

    /// The record of a retired entry, redone on the live one (or a fresh one).
    #[cold]
    #[inline(never)]
    fn redo_record(
        &self,
        tool: &str,
        report: &CallReport<'_>,
        duration: Duration,
    ) -> Option<Recorded> {
        self.with_entry_or_insert(tool, |live| self.apply_record(live, report, duration))
            .flatten()
    }

    /// A result on a tracked tool: its stats, then its breaker. `None` when the breaker was
    /// not asked (the hot path: a success on a Closed breaker) or has nothing to report.
    #[inline(always)]
    fn apply_record(
        &self,
        e: &Entry,
        report: &CallReport<'_>,
        duration: Duration,
    ) -> Option<Recorded> {
        // A permit another breaker handed out is checked off the fast path, in the out-of-line
        // functions below: on the fast path (a success on a Closed breaker) the permit carries
        // its breaker's tag, and the one comparison with the Closed word fails for another's.
        match (report.outcome, report.permit) {
            // By name: counted, then the breaker (a slow success is a failure for the breaker
            // only).
            (CallOutcome::Success, None) => {
                e.stats.record(true, duration);
                if e.breaker.is_slow(duration) {
                    self.breaker_failure(e, report, None)
                } else if e.breaker.success_if_closed(None) {
                    None
                } else {
                    self.breaker_success_counted(e, report)
                }
            }
            // Through a permit: the fast path's comparison proves the permit this breaker's
            // before anything is counted.
            (CallOutcome::Success, Some(permit)) => {
                if e.breaker.is_slow(duration) {
                    self.slow_success(e, report, duration)
                } else if e.breaker.success_if_closed(Some(permit)) {
                    e.stats.record(true, duration);
                    None
                } else {
                    self.breaker_success(e, report, duration)
                }
            }
            _ => self.record_other(e, report, duration),
        }
    }

    /// Every result but a success: its stats, then its breaker (after the permit's check).
    #[inline(never)]
    fn record_other(
        &self,
        e: &Entry,
        report: &CallReport<'_>,
        duration: Duration,
    ) -> Option<Recorded> {
        if e.is_foreign(report) {
            return Some(self.record_foreign(e, report, duration));
        }
        match report.outcome {
            CallOutcome::Success => self.breaker_success(e, report, duration),
            CallOutcome::Failure => {
                e.stats.record(false, duration);
                self.breaker_failure(e, report, report.retry_after)
            }
            CallOutcome::Ignored => {
                e.stats.record_ignored();
                self.release_no_verdict(e, report)
            }
            CallOutcome::Refused => {
                e.stats.record_refused();
                None
            }
            CallOutcome::Cancelled => {
                e.stats.record_cancelled();
                // No verdict on the tool, as a caller error: a probe goes back at once.
                self.release_no_verdict(e, report)
            }
        }
    }

    /// A success slower than the policy's `slow_call`: a success for the stats, a failure for
    /// the breaker.
    #[inline(never)]
    fn slow_success(
        &self,
        e: &Entry,
        report: &CallReport<'_>,
        duration: Duration,
    ) -> Option<Recorded> {
        if e.is_foreign(report) {
            return Some(self.record_foreign(e, report, duration));
        }
        e.stats.record(true, duration);
        self.breaker_failure(e, report, None)
    }

    /// Whether a result is for a call the breaker would have refused and a control let through
    /// (shadow mode, force-closed): it goes to the stats only, so the breaker moves exactly as
    /// under enforcement. Through a permit the permit says so; by name, a result arriving while
    /// the controlled tool's breaker is open is taken for such a call (see `control.rs`).
    fn unenforced(&self, e: &Entry, report: &CallReport<'_>) -> bool {
        if report.unenforced() {
            return true;
        }
        report.generation.is_none()
            && Control::decode(e.control.raw()).unenforced()
            && e.breaker.effective(self.now_ticks()).state() == BreakerState::Open
    }

    /// A success the breaker's fast path did not take: counted, then the breaker decides.
    #[inline(never)]
    fn breaker_success(
        &self,
        e: &Entry,
        report: &CallReport<'_>,
        duration: Duration,
    ) -> Option<Recorded> {
        if e.is_foreign(report) {
            return Some(self.record_foreign(e, report, duration));
        }
        e.stats.record(true, duration);
        self.breaker_success_counted(e, report)
    }

    /// [`breaker_success`](Self::breaker_success) once the success is counted.
    #[inline(never)]
    fn breaker_success_counted(&self, e: &Entry, report: &CallReport<'_>) -> Option<Recorded> {
        if self.unenforced(e, report) {
            return None;
        }
        let recorded = e.breaker.on_success(report.generation, || self.now_step());
        if e.breaker.watched() {
            self.tell_outcome(&e.name, false);
        }
        Some(recorded)
    }

    /// Tells the coordinator's outcome listener, if one is set, about a failure or a watched
    /// success (see `Coordination::set_outcome_listener`). One relaxed load when none is.
    #[inline]
    fn tell_outcome(&self, tool: &str, failed: bool) {
        if self.outcome_listening.load(Ordering::Relaxed) {
            self.tell_outcome_listener(tool, failed);
        }
    }

    #[cold]
    #[inline(never)]
    fn tell_outcome_listener(&self, tool: &str, failed: bool) {
        if let Some(listening) = &*self.outcome_listener.load() {
            listening.0.on_outcome(tool, failed);
        }
    }

    /// A failure for the breaker (a failed call, or a slow success), with the tool's retry hint.
    /// The hint's instant counts from the reading rounded up, so it is never early.
    #[inline(never)]
    fn breaker_failure(
        &self,
        e: &Entry,
        report: &CallReport<'_>,
        retry_after: Option<Duration>,
    ) -> Option<Recorded> {
        if self.unenforced(e, report) {
            return None;
        }
        let now = self.now_step();
        let not_before = retry_after.map_or(Ticks::ZERO, |d| now.base.after(Ticks::span(d)));
        let rate_trips = self.local_rate_trips.load(Ordering::Relaxed);
        let recorded = e
            .breaker
            .on_failure_rated(report.generation, now, not_before, rate_trips);
        self.tell_outcome(&e.name, true);
        Some(recorded)
    }

    /// A call that makes no verdict on the tool (a caller error, a cancellation): a probe it
    /// held is given back at once, so the breaker is not left half-open until the lease (or forever without one).
    /// Through a permit, only the probe's own permit releases; by name, whatever probe is in
    /// flight is released, as a success by name is taken for the probe's.
    #[inline(never)]
    fn release_no_verdict(&self, e: &Entry, report: &CallReport<'_>) -> Option<Recorded> {
        if e.breaker.closed_generation().is_some() {
            return None; // no probe in flight
        }
        let generation = match report.generation {
            Some(g) if report.probe() => Some(g),
            Some(_) => return None,
            None => None,
        };
        let recorded = e.breaker.release(generation, self.now_step());
        (!recorded.is_empty()).then_some(recorded)
    }

    #[doc(hidden)] // `record_with_permit(tool, permit, CallOutcome::Cancelled, d)` is the documented way
    /// Gives a probe permit back without a result (the call was cancelled): the breaker
    /// re-opens with its cooldown already elapsed, so the next gate call may probe at once
    /// instead of waiting for the lease. Does nothing for a permit that is not the live probe.
    ///
    /// A permit is given back to the breaker that handed it out, whatever `tool` says (a
    /// permit of another tool, of the overflow breaker).
    pub fn release(&self, tool: &str, permit: Permit) -> Recorded {
        self.with_entry(tool, |e| self.release_on_entry(tool, e, permit))
            .unwrap_or_else(|| {
                if permit.is_probe() && permit.tag() != u64::from(self.tag_of(tool)) {
                    self.release_owner(permit);
                }
                Recorded::default()
            })
    }

    /// [`release`](Self::release) on a resolved entry.
    pub(super) fn release_on_entry(&self, tool: &str, e: &Entry, permit: Permit) -> Recorded {
        if !permit.is_probe() {
            return Recorded::default();
        }
        if permit.tag() != e.breaker.tag() {
            self.release_owner(permit);
            return Recorded::default();
        }
        let recorded = e
            .breaker
            .release(Some(permit.generation()), self.now_step());
        self.notify_transitions(tool, &recorded);
        recorded
    }
}
