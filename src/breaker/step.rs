//! The breaker's transition function: old word, event, now, timing → new word and effects.
//!
//! Pure: no atomics, no clock, no policy lookups. Everything it needs arrives as arguments
//! (the [`Timing`] and [`FailureFacts`] are computed from the tool's policy just before the
//! step), so the whole state machine is testable without threads, and reads
//! ([`effective`]) and writes ([`step`]) agree at every instant by construction.

use crate::call::{GateDecision, Permit};
use crate::ticks::{Now, Ticks};

use super::word::{next_gen, Word, GEN_MASK, HALF_OPEN, OPEN};
use super::{BreakerState, Transition, TransitionReason};

/// The durations one step works with, computed from the tool's policy just before the step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timing {
    /// Cooldown after an expired probe lease ([`Ticks::NEVER`]: never recovers).
    pub(crate) recovery: Ticks,
    /// Cooldown of an opening this step makes (backoff and jitter included).
    pub(crate) open_for: Ticks,
    /// Probe lease; zero disables the lease.
    pub(crate) lease: Ticks,
}

impl Timing {
    #[cfg(test)]
    pub(crate) fn new(recovery: std::time::Duration, lease: std::time::Duration) -> Self {
        let recovery = Ticks::span(recovery);
        Self {
            recovery,
            open_for: recovery,
            lease: Ticks::span(lease),
        }
    }
}

/// What the tool's policy concluded about a failure before the step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FailureFacts {
    /// Whether this failure trips a closed breaker (threshold or failure-rate reached).
    pub(crate) trips: bool,
    /// A retry hint from the tool: an opening lasts at least until this instant (zero: none).
    pub(crate) not_before: Ticks,
}

/// The state a word is in at an instant, with every expired lease already applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Effective {
    Closed,
    /// Refusing until `ready_at`; `expired_lease` when this is a HalfOpen word whose lease ran out.
    Open {
        ready_at: Ticks,
        expired_lease: bool,
    },
    /// A live probe; the lease ends at `lease_end` ([`Ticks::NEVER`] without a lease).
    HalfOpen {
        lease_end: Ticks,
    },
}

impl Effective {
    pub(crate) fn state(self) -> BreakerState {
        match self {
            Self::Closed => BreakerState::Closed,
            Self::Open { .. } => BreakerState::Open,
            Self::HalfOpen { .. } => BreakerState::HalfOpen,
        }
    }
}

/// Evaluates a word at `now`: pure, so reads and writes agree at every instant.
pub(crate) fn effective(w: Word, now: Ticks, t: &Timing) -> Effective {
    match w.state {
        OPEN => Effective::Open {
            ready_at: w.deadline,
            expired_lease: false,
        },
        HALF_OPEN if !w.deadline.is_never() && now >= w.deadline => Effective::Open {
            ready_at: w.deadline.after(t.recovery),
            expired_lease: true,
        },
        HALF_OPEN => Effective::HalfOpen {
            lease_end: w.deadline,
        },
        _ => Effective::Closed,
    }
}

/// What happened to a breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// A gate call (`allow_request` / `check`).
    Acquire,
    /// A successful call; `Some(generation)` when recorded through a permit.
    Success(Option<u32>),
    /// A failed call, with what the policy concluded about it.
    Failure(Option<u32>, FailureFacts),
    /// A probe given back without a verdict on the tool (a caller error, a cancelled, skipped
    /// or denied call): `Some(generation)` through the probe's permit, `None` by name (whatever
    /// probe is in flight, as a success by name is taken for the probe's).
    Release(Option<u32>),
    /// A coordinator's decision made elsewhere: stay open until at least `until`. A closed
    /// breaker opens (a new episode); an open one keeps its episode and its deadline becomes
    /// the later of the two (never earlier: a local retry hint or backoff stays a floor); a
    /// live probe here is aborted (a new episode) only with `abort_probe`.
    RemoteOpen { until: Ticks, abort_probe: bool },
    /// A coordinator's decision made elsewhere: another replica's probe succeeded. Closes an
    /// open or half-open breaker whose generation is `since` or a later one of the same run
    /// (probe grants and releases that followed it), provided `since` is of the breaker's
    /// current episode — `episode`, the generation its current open episode began with (the
    /// word that left Closed): a close about an episode that ended here since (the breaker
    /// closed, then tripped again) never closes the newer one. A breaker already closed stays
    /// as it is.
    RemoteClose { since: u32, episode: u32 },
    /// Puts back an open deadline a coordinator extended: an Open word of `generation` whose
    /// deadline is still exactly `from` gets `to`; any other word is left alone (something
    /// newer happened, and it stands).
    Restore {
        generation: u32,
        from: Ticks,
        to: Ticks,
    },
}

/// Whether generation `g` is `since` or follows it by less than half the generation space:
/// the episode a coordinator saw, or a continuation of it.
fn continues(since: u32, g: u32) -> bool {
    g.wrapping_sub(since) & GEN_MASK <= GEN_MASK / 2
}

/// The result of one pure step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Step {
    /// The word to install (equal to the old one when nothing changes).
    pub(crate) next: Word,
    /// The gate's answer, for [`Event::Acquire`] only.
    pub(crate) decision: Option<GateDecision>,
    /// Set when the step applies an expired lease (HalfOpen → Open, [`TransitionReason::LeaseExpired`]).
    pub(crate) expired_lease: bool,
    /// The event's own transition, if any.
    pub(crate) transition: Option<Transition>,
    /// The event was accepted as a success that resets the consecutive-failure counter.
    pub(crate) reset_counter: bool,
    /// The event is a failure the breaker accepts (its count stands).
    pub(crate) counts_failure: bool,
}

fn transition(
    from: BreakerState,
    to: BreakerState,
    reason: TransitionReason,
) -> Option<Transition> {
    Some(Transition { from, to, reason })
}

/// When an opening made now ends: the cooldown counted from the reading rounded up (so it is
/// never early), or the tool's retry hint if later.
fn reopen_at(now: Now, t: &Timing, facts: FailureFacts) -> Ticks {
    now.base.after(t.open_for).max(facts.not_before)
}

/// The breaker's transition function: old word, event, now, timing → new word and effects.
///
/// `clock.at` (rounded down) is compared with deadlines; deadlines are counted from `clock.base`
/// (rounded up): a cooldown or a lease never ends before its exact instant.
pub(crate) fn step(w: Word, ev: Event, clock: Now, t: &Timing) -> Step {
    use BreakerState as S;
    let now = clock.at;
    let eff = effective(w, now, t);
    let expired_lease = matches!(
        eff,
        Effective::Open {
            expired_lease: true,
            ..
        }
    );
    // The word with the expiry written in (same generation): where a step changes nothing
    // else, installing it is optional; we install it so later steps start from the truth.
    let settled = match eff {
        Effective::Open { ready_at, .. } => Word::open(w.generation, ready_at),
        _ => w,
    };
    let mut out = Step {
        next: settled,
        decision: None,
        expired_lease,
        transition: None,
        reset_counter: false,
        counts_failure: false,
    };
    let stale = |g: Option<u32>| matches!(g, Some(g) if g != w.generation);

    match (ev, eff) {
        (Event::Acquire, Effective::Closed) => {
            out.decision = Some(GateDecision::Allowed(Permit::admitted(w.generation)));
        }
        (Event::Acquire, Effective::Open { ready_at, .. }) => {
            if !ready_at.is_never() && now >= ready_at {
                let generation = next_gen(w.generation);
                let lease_end = if t.lease == Ticks::ZERO {
                    Ticks::NEVER
                } else {
                    clock.base.after(t.lease)
                };
                out.next = Word::half_open(generation, lease_end);
                out.decision = Some(GateDecision::Probe(Permit::probe(generation)));
                out.transition = transition(S::Open, S::HalfOpen, TransitionReason::ProbeGranted);
            } else {
                out.decision = Some(GateDecision::Refused {
                    retry_after: ready_at.until(now).to_duration(),
                });
            }
        }
        (Event::Acquire, Effective::HalfOpen { lease_end }) => {
            let retry = if lease_end.is_never() {
                t.recovery
            } else {
                lease_end.after(t.recovery).until(now)
            };
            out.decision = Some(GateDecision::Refused {
                retry_after: retry.to_duration(),
            });
        }

        (Event::Success(g), _) if stale(g) => {}
        (Event::Success(_), Effective::Closed) => out.reset_counter = true,
        (Event::Success(_), Effective::Open { .. }) => {} // pre-trip news, or a late probe
        (Event::Success(_), Effective::HalfOpen { .. }) => {
            out.next = Word::closed(next_gen(w.generation));
            out.reset_counter = true;
            out.transition = transition(S::HalfOpen, S::Closed, TransitionReason::ProbeSucceeded);
        }

        (Event::Failure(_, facts), Effective::Open { ready_at, .. }) => {
            // Fresh bad news, stale or not: the cooldown restarts from now. It can only extend
            // the open period, never shorten it: an earlier failure's retry hint (or a longer
            // backoff or jitter) is a floor that a later hint-less failure keeps. The word holds
            // one deadline, so the floor is the deadline itself: the max of the two.
            out.next = Word::open(w.generation, reopen_at(clock, t, facts).max(ready_at));
            out.counts_failure = true;
        }
        (Event::Failure(g, _), _) if stale(g) => {}
        (Event::Failure(_, facts), Effective::Closed) => {
            out.counts_failure = true;
            if facts.trips {
                out.next = Word::open(next_gen(w.generation), reopen_at(clock, t, facts));
                out.transition = transition(S::Closed, S::Open, TransitionReason::Tripped);
            }
        }
        (Event::Failure(_, facts), Effective::HalfOpen { .. }) => {
            out.counts_failure = true;
            out.next = Word::open(next_gen(w.generation), reopen_at(clock, t, facts));
            out.transition = transition(S::HalfOpen, S::Open, TransitionReason::ProbeFailed);
        }

        (Event::Release(g), Effective::HalfOpen { .. }) if g.is_none_or(|g| g == w.generation) => {
            out.next = Word::open(next_gen(w.generation), now);
            out.transition = transition(S::HalfOpen, S::Open, TransitionReason::ProbeReleased);
        }
        (Event::Release(_), _) => {}

        (Event::RemoteOpen { until, .. }, Effective::Closed) => {
            out.next = Word::open(next_gen(w.generation), until);
            out.transition = transition(S::Closed, S::Open, TransitionReason::RemoteOpen);
        }
        (Event::RemoteOpen { until, .. }, Effective::Open { ready_at, .. }) => {
            out.next = Word::open(w.generation, ready_at.max(until));
        }
        (
            Event::RemoteOpen {
                until,
                abort_probe: true,
            },
            Effective::HalfOpen { .. },
        ) => {
            out.next = Word::open(next_gen(w.generation), until);
            out.transition = transition(S::HalfOpen, S::Open, TransitionReason::RemoteOpen);
        }
        (Event::RemoteOpen { .. }, Effective::HalfOpen { .. }) => {}

        (Event::RemoteClose { .. }, Effective::Closed) => {}
        (Event::RemoteClose { since, episode }, eff)
            if continues(since, w.generation) && continues(episode, since) =>
        {
            out.next = Word::closed(next_gen(w.generation));
            out.reset_counter = true;
            out.transition = transition(eff.state(), S::Closed, TransitionReason::RemoteClose);
        }
        (Event::RemoteClose { .. }, _) => {}

        (
            Event::Restore {
                generation,
                from,
                to,
            },
            _,
        ) => {
            if w.state == OPEN && w.generation == generation && w.deadline == from {
                out.next = Word::open(generation, to);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use BreakerState::*;

    const T: Timing = Timing {
        recovery: Ticks::new(30_000),
        open_for: Ticks::new(30_000),
        lease: Ticks::new(10_000),
    };

    fn ticks(t: u64) -> Ticks {
        Ticks::new(t)
    }

    fn fail(generation: Option<u32>, trips: bool) -> Event {
        Event::Failure(
            generation,
            FailureFacts {
                trips,
                not_before: Ticks::ZERO,
            },
        )
    }

    fn run(w: Word, ev: Event, now: u64) -> Step {
        step(w, ev, Now::exact(ticks(now)), &T)
    }

    fn refused(ms: u64) -> Option<GateDecision> {
        Some(GateDecision::Refused {
            retry_after: Duration::from_millis(ms),
        })
    }

    #[test]
    fn closed_trips_at_the_threshold() {
        let w = Word::FRESH;
        assert_eq!(run(w, fail(None, false), 5).next, w);
        let s = run(w, fail(None, true), 5);
        assert_eq!(s.next, Word::open(1, ticks(30_005)));
        assert_eq!(s.transition.map(|t| (t.from, t.to)), Some((Closed, Open)));
    }

    #[test]
    fn open_refuses_until_the_cooldown_inclusive() {
        let w = Word::open(1, ticks(30_000));
        assert_eq!(run(w, Event::Acquire, 29_999).decision, refused(1));
        let s = run(w, Event::Acquire, 30_000);
        assert_eq!(s.decision, Some(GateDecision::Probe(Permit::probe(2))));
        assert_eq!(s.next, Word::half_open(2, ticks(40_000)));
    }

    #[test]
    fn lease_expiry_is_inclusive_and_rearms_from_the_lease_end() {
        let w = Word::half_open(2, ticks(40_000));
        assert_eq!(
            effective(w, ticks(39_999), &T),
            Effective::HalfOpen {
                lease_end: ticks(40_000)
            }
        );
        assert_eq!(
            effective(w, ticks(40_000), &T),
            Effective::Open {
                ready_at: ticks(70_000),
                expired_lease: true
            }
        );
        // A late success does not close; the expiry is written with the same generation.
        let s = run(w, Event::Success(Some(2)), 45_000);
        assert_eq!(s.next, Word::open(2, ticks(70_000)));
        assert!(s.expired_lease && s.transition.is_none());
        // The next probe comes at lease end + recovery.
        assert!(matches!(
            run(w, Event::Acquire, 69_999).decision,
            Some(GateDecision::Refused { .. })
        ));
        assert_eq!(
            run(w, Event::Acquire, 70_000).decision,
            Some(GateDecision::Probe(Permit::probe(3)))
        );
    }

    #[test]
    fn stale_results_never_touch_a_newer_episode() {
        // Probe of generation 4 in flight; a result from generation 2 arrives.
        let w = Word::half_open(4, ticks(50_000));
        assert_eq!(run(w, Event::Success(Some(2)), 45_000).next, w);
        let f = run(w, fail(Some(2), true), 45_000);
        assert_eq!(f.next, w);
        assert!(!f.counts_failure);
        // A stale failure on a Closed episode does not trip it.
        let c = Word::closed(6);
        assert_eq!(run(c, fail(Some(5), true), 1).next, c);
        // A stale failure while Open is still fresh bad news.
        let o = Word::open(7, ticks(100));
        assert_eq!(
            run(o, fail(Some(3), false), 90).next,
            Word::open(7, ticks(30_090))
        );
    }

    #[test]
    fn release_lets_the_next_call_probe_at_once() {
        let w = Word::half_open(2, ticks(40_000));
        let s = run(w, Event::Release(Some(2)), 31_000);
        assert_eq!(s.next, Word::open(3, ticks(31_000)));
        assert_eq!(
            run(s.next, Event::Acquire, 31_000).decision,
            Some(GateDecision::Probe(Permit::probe(4)))
        );
        assert_eq!(
            run(w, Event::Release(Some(1)), 31_000).next,
            w,
            "a stale release is ignored"
        );
        assert_eq!(
            run(w, Event::Release(None), 31_000).next,
            Word::open(3, ticks(31_000)),
            "by name, the probe in flight is released"
        );
        let c = Word::closed(4);
        assert_eq!(run(c, Event::Release(None), 1).next, c);
    }

    #[test]
    fn a_failure_meeting_an_open_breaker_never_shortens_its_deadline() {
        let hinted = Word::open(1, ticks(600_000)); // a retry hint: open until 600 s
        let s = run(hinted, fail(None, true), 1_000);
        assert_eq!(s.next, Word::open(1, ticks(600_000)), "the hint is a floor");
        let s = run(Word::open(1, ticks(30_000)), fail(None, true), 5_000);
        assert_eq!(
            s.next,
            Word::open(1, ticks(35_000)),
            "fresh bad news extends"
        );
    }

    #[test]
    fn deadlines_count_from_the_reading_rounded_up() {
        let now = Now {
            at: ticks(0),
            base: ticks(1),
        }; // 0.999 ms
        let s = step(Word::FRESH, fail(None, true), now, &T);
        assert_eq!(s.next, Word::open(1, ticks(30_001)));
        let probe = step(
            s.next,
            Event::Acquire,
            Now {
                at: ticks(30_001),
                base: ticks(30_002),
            },
            &T,
        );
        assert_eq!(probe.next, Word::half_open(2, ticks(40_002)));
    }

    #[test]
    fn a_remote_open_opens_closed_extends_open_and_aborts_a_probe_only_when_asked() {
        let ro = |until, abort_probe| Event::RemoteOpen {
            until: ticks(until),
            abort_probe,
        };
        // Closed: a new episode.
        let s = run(Word::closed(4), ro(20_000, false), 1_000);
        assert_eq!(s.next, Word::open(5, ticks(20_000)));
        assert_eq!(
            s.transition.map(|t| (t.from, t.to, t.reason)),
            Some((Closed, Open, TransitionReason::RemoteOpen))
        );
        // Open: the later deadline wins, the episode stays.
        let o = Word::open(5, ticks(30_000));
        assert_eq!(run(o, ro(20_000, true), 1_000).next, o, "never earlier");
        let s = run(o, ro(40_000, true), 1_000);
        assert_eq!(s.next, Word::open(5, ticks(40_000)));
        assert!(s.transition.is_none());
        // A live probe: kept unless aborted.
        let h = Word::half_open(6, ticks(50_000));
        assert_eq!(run(h, ro(60_000, false), 45_000).next, h);
        let s = run(h, ro(60_000, true), 45_000);
        assert_eq!(s.next, Word::open(7, ticks(60_000)));
        assert_eq!(s.transition.map(|t| (t.from, t.to)), Some((HalfOpen, Open)));
        // An expired lease is open: extended, with the expiry written.
        let s = run(h, ro(10, false), 55_000);
        assert_eq!(s.next, Word::open(6, ticks(80_000)));
        assert!(s.expired_lease && s.transition.is_none());
    }

    #[test]
    fn a_remote_close_closes_its_episode_and_what_followed_never_another() {
        // The open episodes below began at generation 3 or later.
        let rc = |since| Event::RemoteClose { since, episode: 3 };
        let o = Word::open(5, ticks(30_000));
        let s = run(o, rc(5), 1_000);
        assert_eq!(s.next, Word::closed(6));
        assert!(s.reset_counter);
        assert_eq!(
            s.transition.map(|t| (t.from, t.to, t.reason)),
            Some((Open, Closed, TransitionReason::RemoteClose))
        );
        // A probe granted (or released and granted again) since: still that run.
        let h = Word::half_open(7, ticks(50_000));
        assert_eq!(run(h, rc(5), 45_000).next, Word::closed(8));
        // Closed already: nothing.
        assert_eq!(run(Word::closed(9), rc(5), 1).next, Word::closed(9));
        // An episode older than the one the coordinator saw: not its to close.
        assert_eq!(
            run(Word::open(3, ticks(9)), rc(5), 1).next,
            Word::open(3, ticks(9))
        );
        // Generations wrap.
        let w = Word::open(1, ticks(9));
        let wrapped = Event::RemoteClose {
            since: GEN_MASK,
            episode: GEN_MASK - 1,
        };
        assert_eq!(run(w, wrapped, 1).next, Word::closed(2));
        // The episode `since` named ended here (closed, tripped again at 7): the newer one
        // stays open, whatever followed it.
        let newer = |since| Event::RemoteClose { since, episode: 7 };
        assert_eq!(
            run(Word::open(7, ticks(9)), newer(5), 1).next,
            Word::open(7, ticks(9))
        );
        assert_eq!(
            run(Word::half_open(8, ticks(99)), newer(5), 1).next,
            Word::half_open(8, ticks(99))
        );
        assert_eq!(
            run(Word::open(9, ticks(9)), newer(7), 1).next,
            Word::closed(10)
        );
    }

    #[test]
    fn restore_puts_back_only_the_deadline_it_was_given() {
        let restore = |generation, from, to| Event::Restore {
            generation,
            from: ticks(from),
            to: ticks(to),
        };
        let o = Word::open(5, ticks(40_000));
        assert_eq!(
            run(o, restore(5, 40_000, 30_000), 1).next,
            Word::open(5, ticks(30_000))
        );
        assert_eq!(run(o, restore(5, 39_000, 30_000), 1).next, o, "moved since");
        assert_eq!(
            run(o, restore(4, 40_000, 30_000), 1).next,
            o,
            "another episode"
        );
        let h = Word::half_open(6, ticks(50_000));
        assert_eq!(run(h, restore(6, 50_000, 1), 1).next, h, "a live probe");
    }

    #[test]
    fn huge_durations_mean_never() {
        let t = Timing::new(Duration::MAX, Duration::MAX);
        assert_eq!(t.recovery, Ticks::NEVER);
        let w = Word::open(1, ticks(5).after(t.recovery));
        assert_eq!(
            step(
                w,
                Event::Acquire,
                Now::exact(Ticks::new(Ticks::NEVER.get() - 1)),
                &t
            )
            .decision,
            Some(GateDecision::Refused {
                retry_after: Duration::MAX
            })
        );
        assert_eq!(Ticks::at(Duration::MAX), ticks(Ticks::NEVER.get() - 1));
    }
}
