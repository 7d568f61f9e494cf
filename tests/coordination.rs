//! The registry's coordination surface, on the manual clock: what a coordinator (the fleet)
//! applies — another replica's trip, its probe held elsewhere, its recovery — goes through the
//! breaker's own CAS, never shortens a local floor, never closes an episode it did not see, and
//! keeps every reading (oracle, `retry_after`, `unavailable_tools`) equal to the gate's.

#[path = "layer/support.rs"]
mod layer_support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use layer_support::{attr, Harness, OTEL_STACKS};
use proptest::prelude::*;
use tool_health::layer::{ToolHealthLayer, GATE_SOURCE_ATTRIBUTE};
use tool_health::observe::CallEvent;
use tool_health::observe::HealthObserver;
use tool_health::{
    Apply, BreakerState, CallOutcome, CallReport, CircuitBreakerConfig, GateDecision, ManualClock,
    ToolHealthRegistry, ToolPolicy, Transition, TransitionReason, TripPolicy,
};

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

fn setup() -> (Arc<ToolHealthRegistry>, ManualClock) {
    let clock = ManualClock::new();
    let r = ToolHealthRegistry::builder()
        .clock(clock.clone())
        .config(CircuitBreakerConfig {
            failure_threshold: 2,
            recovery_duration: 30 * SEC,
            probe_timeout: 10 * SEC,
        })
        .build();
    (Arc::new(r), clock)
}

fn retry_after(r: &ToolHealthRegistry, tool: &str) -> Duration {
    match r.check(tool) {
        GateDecision::Refused { retry_after } => retry_after,
        d => panic!("expected a refusal, got {d:?}"),
    }
}

#[derive(Debug, Default)]
struct Seen {
    transitions: Mutex<Vec<(String, Transition)>>,
    calls: AtomicUsize,
}

impl HealthObserver for Seen {
    fn on_call(&self, _: &CallEvent<'_>) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }
    fn on_transition(&self, tool: &str, t: &Transition, _: Duration) {
        self.transitions.lock().unwrap().push((tool.to_owned(), *t));
    }
}

#[test]
fn another_replicas_trip_opens_a_closed_breaker_for_its_remaining_cooldown() {
    let (r, clock) = setup();
    let seen = Arc::new(Seen::default());
    r.coordination().add_transition_observer(seen.clone());
    // A tool this replica never called: tracked from now on, so its first call is refused.
    let opened = r
        .coordination()
        .open_remotely("search", 12 * SEC, true)
        .expect("tracked");
    assert!(opened.open);
    assert_eq!(opened.ready_in, 12 * SEC);
    assert_eq!(r.breaker_state("search"), BreakerState::Open);
    assert!(!r.is_tool_available("search"));
    assert_eq!(retry_after(&r, "search"), 12 * SEC);
    assert_eq!(r.unavailable_tools()[0].retry_after, 12 * SEC);
    let t = seen.transitions.lock().unwrap().clone();
    assert_eq!(t.len(), 1);
    assert_eq!(
        (t[0].1.from, t[0].1.to, t[0].1.reason),
        (
            BreakerState::Closed,
            BreakerState::Open,
            TransitionReason::RemoteOpen
        )
    );
    // When the remaining cooldown ends, the probe is this replica's to take (or to be held).
    clock.advance(12 * SEC);
    assert!(matches!(r.check("search"), GateDecision::Probe(_)));
    assert_eq!(
        seen.calls.load(Ordering::Relaxed),
        0,
        "transition observers never see calls"
    );
}

#[test]
fn an_open_breaker_keeps_its_episode_and_the_later_deadline() {
    let (r, clock) = setup();
    let hinted = CallReport::new(CallOutcome::Failure, MS).retry_after(600 * SEC);
    r.record_failure("t", MS);
    r.record_report("t", &hinted); // trips, the hint a floor: open until 600 s
    let generation = r.coordination().coordination_view("t").unwrap().generation;
    let opened = r.coordination().open_remotely("t", 20 * SEC, true).unwrap();
    assert_eq!(opened.generation, generation, "the same episode");
    assert!(opened.recorded.is_empty());
    assert_eq!(
        retry_after(&r, "t"),
        600 * SEC,
        "a remote open never shortens"
    );
    clock.advance(SEC);
    r.coordination()
        .open_remotely("t", 900 * SEC, true)
        .unwrap();
    assert_eq!(retry_after(&r, "t"), 900 * SEC, "a longer one extends");
}

#[test]
fn a_remote_open_aborts_a_local_probe_only_when_asked_and_its_result_is_then_stale() {
    let (r, clock) = setup();
    r.record_failure("t", MS);
    r.record_failure("t", MS);
    clock.advance(30 * SEC);
    let GateDecision::Probe(permit) = r.check("t") else {
        panic!("probe expected")
    };
    let kept = r
        .coordination()
        .open_remotely("t", 20 * SEC, false)
        .unwrap();
    assert!(!kept.open, "the probe in flight is kept");
    assert_eq!(r.breaker_state("t"), BreakerState::HalfOpen);
    let aborted = r.coordination().open_remotely("t", 20 * SEC, true).unwrap();
    assert!(aborted.open);
    assert_eq!(
        aborted.recorded.transition.map(|t| (t.from, t.reason)),
        Some((BreakerState::HalfOpen, TransitionReason::RemoteOpen))
    );
    // The aborted probe's success describes a stale episode: it never closes the new one.
    r.record_with_permit("t", permit, CallOutcome::Success, MS);
    assert_eq!(r.breaker_state("t"), BreakerState::Open);
}

#[test]
fn a_probe_held_for_another_replica_refuses_until_the_hold_ends_and_release_puts_it_back() {
    let (r, clock) = setup();
    r.coordination().open_remotely("t", 10 * SEC, true).unwrap();
    let hold = r.coordination().hold_probe("t", 25 * SEC).expect("open");
    assert!(!hold.is_noop());
    clock.advance(10 * SEC);
    assert_eq!(
        retry_after(&r, "t"),
        15 * SEC,
        "the cooldown ended; the hold has not"
    );
    assert!(!r.is_tool_available("t"));
    assert_eq!(r.snapshot("t").unwrap().retry_after, Some(15 * SEC));
    // This replica won the probe after all: the hold goes, the probe is granted at once.
    assert!(r.coordination().release_hold("t", hold));
    assert!(matches!(r.check("t"), GateDecision::Probe(_)));
    // A hold on a closed breaker or a live probe does nothing.
    assert!(
        r.coordination().hold_probe("t", SEC).is_none(),
        "half-open: its own probe"
    );
    assert!(r.coordination().hold_probe("never-seen", SEC).is_none());
}

#[test]
fn releasing_a_hold_never_undoes_news_that_came_after_it() {
    let (r, clock) = setup();
    r.coordination().open_remotely("t", 10 * SEC, true).unwrap();
    let hold = r.coordination().hold_probe("t", 20 * SEC).unwrap();
    clock.advance(5 * SEC);
    // A late failure (a call admitted before the trip): fresh bad news, 30 s from now.
    r.record_failure("t", MS);
    assert!(
        !r.coordination().release_hold("t", hold),
        "the word moved: the news stands"
    );
    assert_eq!(retry_after(&r, "t"), 30 * SEC);
}

#[test]
fn a_remote_close_closes_the_episode_it_saw_and_what_followed_it_only() {
    let (r, clock) = setup();
    let opened = r.coordination().open_remotely("t", 10 * SEC, true).unwrap();
    clock.advance(10 * SEC);
    assert!(matches!(r.check("t"), GateDecision::Probe(_))); // a probe here, of that run
    let recorded = r.coordination().close_remotely("t", opened.generation);
    assert_eq!(
        recorded.transition.map(|t| (t.from, t.to, t.reason)),
        Some((
            BreakerState::HalfOpen,
            BreakerState::Closed,
            TransitionReason::RemoteClose
        ))
    );
    assert!(r.allow_request("t"));
    assert_eq!(r.snapshot("t").unwrap().consecutive_failures, 0);
    // A closed breaker stays as it is; an older episode's close changes nothing.
    assert!(r
        .coordination()
        .close_remotely("t", opened.generation)
        .is_empty());
    r.record_failure("t", MS);
    r.record_failure("t", MS); // a local trip, newer than anything the coordinator saw
    let newer = r.coordination().coordination_view("t").unwrap().generation;
    assert!(r
        .coordination()
        .close_remotely("t", newer.wrapping_add(1))
        .transition
        .is_none());
    assert_eq!(r.breaker_state("t"), BreakerState::Open);
}

/// Issue 20, item 2: a remotely opened episode ends here (its probe succeeded: closed), the
/// tool trips again, and a close naming the old episode arrives late — it used to close the new
/// episode (any later generation passed), letting calls through to a tool failing now.
#[test]
fn a_late_remote_close_never_closes_a_newer_episode() {
    let (r, clock) = setup();
    let opened = r.coordination().open_remotely("t", 10 * SEC, true).unwrap();
    clock.advance(10 * SEC);
    let GateDecision::Probe(probe) = r.check("t") else {
        panic!("the probe")
    };
    r.record_with_permit("t", probe, CallOutcome::Success, MS);
    assert_eq!(r.breaker_state("t"), BreakerState::Closed);
    // Failing again: a new episode, tripped here.
    r.record_failure("t", MS);
    r.record_failure("t", MS);
    assert_eq!(r.breaker_state("t"), BreakerState::Open);
    for late in [
        opened.generation,
        opened.generation + 1,
        opened.generation + 2,
    ] {
        let recorded = r.coordination().close_remotely("t", late);
        assert!(
            recorded.is_empty(),
            "a close of generation {late}: {recorded:?}"
        );
        assert_eq!(r.breaker_state("t"), BreakerState::Open);
        assert!(!r.allow_request("t"), "calls reach a tool failing now");
    }
    // The same with the new episode opened by another replica, and a probe granted in it: its
    // own close still closes it, the old one does not.
    clock.advance(30 * SEC);
    let again = r.coordination().open_remotely("t", 5 * SEC, false).unwrap();
    clock.advance(5 * SEC);
    assert!(matches!(r.check("t"), GateDecision::Probe(_)));
    assert!(r
        .coordination()
        .close_remotely("t", opened.generation)
        .is_empty());
    assert_eq!(r.breaker_state("t"), BreakerState::HalfOpen);
    let recorded = r.coordination().close_remotely("t", again.generation);
    assert_eq!(
        recorded.transition.map(|t| t.reason),
        Some(TransitionReason::RemoteClose)
    );
    assert_eq!(r.breaker_state("t"), BreakerState::Closed);
}

#[test]
fn coordinated_refusals_are_counted_apart_and_the_mark_ends_with_the_episode() {
    let (r, clock) = setup();
    r.coordination().mark_coordinated();
    let opened = r.coordination().open_remotely("t", 10 * SEC, true).unwrap();
    assert!(r.coordination().coordination_view("t").unwrap().coordinated);
    assert!(r.coordination().is_coordinated_decision("t"));
    for _ in 0..3 {
        assert!(!r.allow_request("t"));
    }
    assert_eq!(r.snapshot("t").unwrap().refused_count, 3);
    r.coordination().close_remotely("t", opened.generation);
    assert!(!r.coordination().is_coordinated_decision("t"));
    // A local trip is a local decision.
    r.record_failure("t", MS);
    r.record_failure("t", MS);
    assert!(!r.allow_request("t"));
    assert!(!r.coordination().is_coordinated_decision("t"));
    // A mark left on a breaker that closed here (its own probe) goes at the next gate call.
    let again = r
        .coordination()
        .open_remotely("t", Duration::ZERO, true)
        .unwrap();
    clock.advance(30 * SEC);
    assert!(matches!(r.check("t"), GateDecision::Probe(_)));
    r.record_success("t", MS);
    assert!(r.allow_request("t"));
    assert!(!r.coordination().coordination_view("t").unwrap().coordinated);
    let _ = again;
    // Reset ends it too.
    r.coordination().open_remotely("t", 10 * SEC, true).unwrap();
    r.reset("t");
    assert!(!r.coordination().coordination_view("t").unwrap().coordinated);
}

#[test]
fn without_local_rate_trips_the_window_counts_and_only_the_coordinator_trips() {
    let (r, _) = setup();
    r.set_tool_policy(
        "t",
        ToolPolicy {
            trip: TripPolicy::FailureRate {
                ratio: 0.5,
                min_calls: 4,
                window: 60 * SEC,
            },
            ..ToolPolicy::default()
        },
        Apply::NewBreakers,
    );
    r.coordination().set_local_rate_trips(false);
    for _ in 0..6 {
        r.record_failure("t", MS);
    }
    assert_eq!(r.breaker_state("t"), BreakerState::Closed);
    let view = r.coordination().coordination_view("t").unwrap();
    assert_eq!((view.success, view.failure), (0, 6));
    r.coordination().set_local_rate_trips(true);
    r.record_failure("t", MS);
    assert_eq!(
        r.breaker_state("t"),
        BreakerState::Open,
        "the window kept counting"
    );
}

#[test]
fn a_transition_observer_leaves_the_record_path_alone_and_hears_every_transition() {
    let (r, clock) = setup();
    let seen = Arc::new(Seen::default());
    r.coordination().add_transition_observer(seen.clone());
    r.record_success("t", MS);
    r.record_failure("t", MS);
    r.record_failure("t", MS);
    clock.advance(30 * SEC);
    assert!(r.allow_request("t"));
    r.record_success("t", MS);
    let reasons: Vec<_> = seen
        .transitions
        .lock()
        .unwrap()
        .iter()
        .map(|(_, t)| t.reason)
        .collect();
    assert_eq!(
        reasons,
        [
            TransitionReason::Tripped,
            TransitionReason::ProbeGranted,
            TransitionReason::ProbeSucceeded
        ]
    );
    assert_eq!(seen.calls.load(Ordering::Relaxed), 0);
}

#[test]
fn refused_and_probe_spans_of_a_coordinated_episode_say_the_fleet_decided() {
    for stack in OTEL_STACKS {
        let (r, clock) = setup();
        r.coordination().mark_coordinated();
        let h = Harness::new(stack, ToolHealthLayer::new(r.clone()));
        r.coordination()
            .open_remotely("search", 10 * SEC, true)
            .unwrap();
        h.run(|| {
            let span = tracing::info_span!(
                "execute_tool search",
                gen_ai.operation.name = "execute_tool",
                gen_ai.tool.name = "search"
            );
            let _e = span.enter();
            assert!(!r.allow_request("search"));
        });
        clock.advance(10 * SEC);
        h.run(|| {
            let span = tracing::info_span!(
                "execute_tool probe",
                gen_ai.operation.name = "execute_tool",
                gen_ai.tool.name = "search"
            );
            let _e = span.enter();
            assert!(r.allow_request("search"));
        });
        r.record_failure("local", MS);
        r.record_failure("local", MS);
        h.run(|| {
            let span = tracing::info_span!(
                "execute_tool local",
                gen_ai.operation.name = "execute_tool",
                gen_ai.tool.name = "local"
            );
            let _e = span.enter();
            assert!(!r.allow_request("local"));
        });
        let refused = h.span("execute_tool search");
        assert_eq!(
            attr(&refused, GATE_SOURCE_ATTRIBUTE).as_deref(),
            Some("fleet")
        );
        let probe = h.span("execute_tool probe");
        assert_eq!(
            attr(&probe, GATE_SOURCE_ATTRIBUTE).as_deref(),
            Some("fleet")
        );
        let local = h.span("execute_tool local");
        assert_eq!(
            attr(&local, GATE_SOURCE_ATTRIBUTE),
            None,
            "a local decision"
        );
    }
}

#[derive(Debug, Clone)]
enum Op {
    Gate,
    Fail,
    Succeed,
    Advance(u64),
    RemoteOpen(u64, bool),
    Hold(u64),
    Release,
    RemoteClose,
    ForceClosed,
    Normal,
    Reset,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// The oracle equals the gate, and the gate's `retry_after` equals what the reads report,
    /// whatever a coordinator applies in between.
    #[test]
    fn oracle_equals_gate_under_coordinator_decisions(ops in prop::collection::vec(prop_oneof![
        4 => Just(Op::Gate),
        3 => Just(Op::Fail),
        2 => Just(Op::Succeed),
        3 => (0..20_000u64).prop_map(Op::Advance),
        2 => (0..40_000u64, any::<bool>()).prop_map(|(ms, abort)| Op::RemoteOpen(ms, abort)),
        2 => (0..40_000u64).prop_map(Op::Hold),
        1 => Just(Op::Release),
        1 => Just(Op::RemoteClose),
        1 => Just(Op::ForceClosed),
        1 => Just(Op::Normal),
        1 => Just(Op::Reset),
    ], 1..100)) {
        let (r, clock) = setup();
        r.coordination().mark_coordinated();
        let mut generation = 0;
        let mut hold = None;
        for op in ops {
            match op {
                Op::Gate => {
                    let oracle = r.is_tool_available("t");
                    let reported = r.snapshot("t").and_then(|s| s.retry_after);
                    let decision = r.check("t");
                    prop_assert_eq!(oracle, decision.is_allowed());
                    if let GateDecision::Refused { retry_after } = decision {
                        prop_assert_eq!(Some(retry_after), reported);
                    }
                }
                Op::Fail => { r.record_failure("t", MS); }
                Op::Succeed => { r.record_success("t", MS); }
                Op::Advance(ms) => clock.advance(Duration::from_millis(ms)),
                Op::RemoteOpen(ms, abort) => {
                    if let Some(o) = r.coordination().open_remotely("t", Duration::from_millis(ms), abort) {
                        generation = o.generation;
                    }
                }
                Op::Hold(ms) => hold = r.coordination().hold_probe("t", Duration::from_millis(ms)).or(hold),
                Op::Release => { if let Some(h) = hold.take() { r.coordination().release_hold("t", h); } }
                Op::RemoteClose => { r.coordination().close_remotely("t", generation); }
                Op::ForceClosed => { r.force_closed("t"); }
                Op::Normal => r.release_control("t"),
                Op::Reset => r.reset("t"),
            }
        }
    }
}

#[test]
fn the_counts_pass_reads_what_the_views_read_for_every_tool() {
    let (r, _clock) = setup();
    for (tool, s, f) in [("a", 3u64, 1u64), ("b", 0, 2), ("c", 5, 0)] {
        for _ in 0..s {
            assert!(r.allow_request(tool));
            r.record_success(tool, MS);
        }
        for _ in 0..f {
            if r.allow_request(tool) {
                r.record_failure(tool, MS);
            }
        }
    }
    let mut counts = Vec::new();
    r.coordination()
        .for_each_count(|name, c| counts.push((name.to_owned(), c)));
    counts.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(counts.len(), 3);
    for (name, c) in counts {
        let v = r.coordination().coordination_view(&name).expect("tracked");
        assert_eq!(
            (c.incarnation, c.success, c.failure),
            (v.incarnation, v.success, v.failure),
            "{name}"
        );
    }
}
