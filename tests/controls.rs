//! Operator controls and smarter breaking, on the manual clock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use tool_health::{
    Apply, Backoff, BreakerState, CallOutcome, CallReport, CircuitBreakerConfig, GateDecision,
    JitterSource, ManualClock, ToolControl, ToolHealthRegistry, ToolPolicy, TripPolicy,
};

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

fn setup(threshold: u32, recovery: Duration) -> (ToolHealthRegistry, ManualClock) {
    let clock = ManualClock::new();
    let r = ToolHealthRegistry::builder()
        .clock(clock.clone())
        .config(CircuitBreakerConfig {
            failure_threshold: threshold,
            recovery_duration: recovery,
            probe_timeout: 10 * SEC,
        })
        .build();
    (r, clock)
}

#[test]
fn force_open_refuses_until_released_and_survives_config_swaps() {
    let (r, _) = setup(3, 30 * SEC);
    r.record_success("t", MS);
    assert!(r.force_open("t"));
    assert_eq!(r.control("t"), ToolControl::ForcedOpen { until: None });
    r.set_config(CircuitBreakerConfig::default());
    r.set_tool_policy("t", ToolPolicy::default(), Apply::Now);
    assert!(!r.is_tool_available("t"));
    assert_eq!(
        r.check("t"),
        GateDecision::Refused {
            retry_after: Duration::MAX
        }
    );
    assert_eq!(
        r.breaker_state("t"),
        BreakerState::Closed,
        "the breaker is untouched"
    );
    assert!(r.unavailable_tools()[0].forced);
    r.release_control("t");
    assert!(r.allow_request("t"));
    assert_eq!(r.snapshot("t").unwrap().refused_count, 1);
}

#[test]
fn force_open_until_an_instant_lapses_by_itself() {
    let (r, clock) = setup(3, 30 * SEC);
    clock.advance(5 * SEC);
    r.force_open_for("t", 10 * SEC);
    assert_eq!(
        r.check("t"),
        GateDecision::Refused {
            retry_after: 10 * SEC
        }
    );
    clock.advance(10 * SEC - MS);
    assert!(!r.is_tool_available("t"));
    clock.advance(MS);
    assert!(r.is_tool_available("t"));
    assert!(r.allow_request("t"));
}

#[test]
fn force_closed_disables_the_breaker_but_keeps_learning() {
    let (r, _) = setup(1, 30 * SEC);
    r.force_closed("t");
    r.record_failure("t", MS);
    assert_eq!(r.breaker_state("t"), BreakerState::Open);
    assert!(r.is_tool_available("t"));
    assert!(r.allow_request("t"));
    r.release_control("t");
    assert!(
        !r.allow_request("t"),
        "released: the breaker's own state is back in force"
    );
}

#[test]
fn shadow_mode_decides_and_counts_but_never_refuses() {
    let (r, clock) = setup(1, 30 * SEC);
    r.set_shadow("t", true);
    r.record_failure("t", MS);
    assert_eq!(r.breaker_state("t"), BreakerState::Open);
    for _ in 0..3 {
        assert!(r.is_tool_available("t"));
        match r.check("t") {
            GateDecision::Allowed(p) => assert!(p.is_shadow_refused()),
            d => panic!("shadow mode refused: {d:?}"),
        }
    }
    let s = r.snapshot("t").unwrap();
    assert_eq!((s.shadow_refused_count, s.refused_count), (3, 0));
    assert!(s.shadow);
    // The breaker still runs its course underneath: the probe is granted for real.
    clock.advance(30 * SEC);
    assert!(matches!(r.check("t"), GateDecision::Probe(_)));
    r.set_shadow("t", false);
    assert!(
        !r.allow_request("t"),
        "enforced again: the probe is in flight"
    );
}

#[test]
fn reset_returns_a_tool_to_fresh_and_stales_old_permits() {
    let (r, clock) = setup(1, 30 * SEC);
    r.record_failure("t", MS);
    clock.advance(30 * SEC);
    let probe = r.check("t").permit().unwrap();
    r.reset("t");
    let s = r.snapshot("t").unwrap();
    assert_eq!(s.breaker, BreakerState::Closed);
    assert_eq!(
        (s.total_calls, s.consecutive_failures, s.score),
        (0, 0, 1.0)
    );
    r.record_with_permit("t", probe, CallOutcome::Failure, MS);
    assert_eq!(
        r.breaker_state("t"),
        BreakerState::Closed,
        "a pre-reset probe is stale"
    );
}

#[test]
fn per_tool_overrides_apply_to_existing_breakers_only_when_asked() {
    let (r, _) = setup(3, 30 * SEC);
    r.record_success("a", MS);
    let strict = ToolPolicy::from(CircuitBreakerConfig {
        failure_threshold: 1,
        ..Default::default()
    });
    r.set_tool_policy("a", strict.clone(), Apply::NewBreakers);
    r.record_failure("a", MS);
    assert_eq!(
        r.breaker_state("a"),
        BreakerState::Closed,
        "existing breaker kept its policy"
    );
    r.set_tool_policy("a", strict.clone(), Apply::Now);
    r.record_failure("a", MS);
    assert_eq!(r.breaker_state("a"), BreakerState::Open);
    // A tool first seen after its override gets it.
    r.set_tool_policy("b", strict, Apply::NewBreakers);
    r.record_failure("b", MS);
    assert_eq!(r.breaker_state("b"), BreakerState::Open);
    assert_eq!(r.tool_policy("b").breaker.failure_threshold, 1);
    // Others keep the default.
    r.record_failure("c", MS);
    assert_eq!(r.breaker_state("c"), BreakerState::Closed);
    r.clear_tool_policy("b", Apply::Now);
    assert_eq!(r.tool_policy("b").breaker.failure_threshold, 3);
}

#[derive(Debug)]
struct FixedJitter(AtomicU64);
impl JitterSource for FixedJitter {
    fn jitter(&self, max: Duration) -> Duration {
        Duration::from_millis(self.0.load(Ordering::Relaxed)).min(max)
    }
}

fn backoff_registry(jitter: Option<Arc<dyn JitterSource>>) -> (ToolHealthRegistry, ManualClock) {
    let (r, clock) = setup(1, 10 * SEC);
    r.set_default_policy(ToolPolicy {
        breaker: CircuitBreakerConfig {
            failure_threshold: 1,
            recovery_duration: 10 * SEC,
            probe_timeout: 5 * SEC,
        },
        backoff: Some(Backoff {
            multiplier: 2,
            max_recovery: 35 * SEC,
            stable_after: 60 * SEC,
            max_jitter: if jitter.is_some() {
                SEC
            } else {
                Duration::ZERO
            },
            jitter,
        }),
        ..ToolPolicy::default()
    });
    (r, clock)
}

/// Opens the breaker and returns how long it stays open.
fn open_for(r: &ToolHealthRegistry, clock: &ManualClock) -> Duration {
    match r.check("t") {
        GateDecision::Refused { retry_after } => {
            clock.advance(retry_after);
            assert!(matches!(r.check("t"), GateDecision::Probe(_)));
            retry_after
        }
        d => panic!("expected open, got {d:?}"),
    }
}

#[test]
fn backoff_grows_when_a_tool_re_trips_soon_and_resets_after_calm() {
    let (r, clock) = backoff_registry(None);
    r.record_failure("t", MS);
    assert_eq!(open_for(&r, &clock), 10 * SEC);
    r.record_failure("t", MS); // probe fails: level 1
    assert_eq!(open_for(&r, &clock), 20 * SEC);
    r.record_success("t", MS); // closes
    clock.advance(5 * SEC);
    r.record_failure("t", MS); // re-trips soon after closing: level 2
    assert_eq!(open_for(&r, &clock), 35 * SEC, "capped at max_recovery");
    r.record_success("t", MS);
    clock.advance(60 * SEC); // calm
    r.record_failure("t", MS);
    assert_eq!(
        open_for(&r, &clock),
        10 * SEC,
        "level reset after stable_after"
    );
}

#[test]
fn backoff_jitter_comes_from_the_injected_source() {
    let jitter = Arc::new(FixedJitter(AtomicU64::new(250)));
    let (r, clock) = backoff_registry(Some(jitter.clone()));
    r.record_failure("t", MS);
    assert_eq!(open_for(&r, &clock), 10 * SEC + 250 * MS);
    jitter.0.store(5_000, Ordering::Relaxed); // clamped to max_jitter
    r.record_failure("t", MS);
    assert_eq!(open_for(&r, &clock), 21 * SEC);
}

#[test]
fn retry_after_hint_keeps_the_breaker_open_at_least_that_long() {
    let (r, clock) = setup(1, 10 * SEC);
    let report = CallReport::new(CallOutcome::Failure, MS)
        .error_type("rate_limited")
        .retry_after(120 * SEC);
    r.record_report("t", &report);
    assert_eq!(
        r.check("t"),
        GateDecision::Refused {
            retry_after: 120 * SEC
        }
    );
    clock.advance(120 * SEC - MS);
    assert!(!r.allow_request("t"));
    clock.advance(MS);
    assert!(r.allow_request("t"));
    // A hint shorter than the cooldown changes nothing.
    r.record_report(
        "t",
        &CallReport::new(CallOutcome::Failure, MS).retry_after(SEC),
    );
    assert_eq!(
        r.check("t"),
        GateDecision::Refused {
            retry_after: 10 * SEC
        }
    );
}

#[test]
fn failure_rate_policy_trips_on_ratio_with_minimum_calls_over_a_sliding_window() {
    let (r, _) = setup(3, 30 * SEC);
    r.set_tool_policy(
        "t",
        ToolPolicy {
            trip: TripPolicy::FailureRate {
                ratio: 0.5,
                min_calls: 6,
                window: Duration::from_secs(8),
            },
            ..ToolPolicy::default()
        },
        Apply::NewBreakers,
    );
    // Alternating: 3 failures in a row never happen, but the ratio reaches 50 %.
    for i in 0..5 {
        if i % 2 == 0 {
            r.record_failure("t", MS);
        } else {
            r.record_success("t", MS);
        }
    }
    assert_eq!(
        r.breaker_state("t"),
        BreakerState::Closed,
        "5 calls < min_calls"
    );
    r.record_success("t", MS);
    r.record_failure("t", MS); // 4 of 7 failed
    assert_eq!(r.breaker_state("t"), BreakerState::Open);

    // The window slides: old failures stop counting.
    let (r, clock2) = setup(3, 30 * SEC);
    r.set_default_policy(ToolPolicy {
        trip: TripPolicy::FailureRate {
            ratio: 0.5,
            min_calls: 4,
            window: Duration::from_secs(8),
        },
        ..ToolPolicy::default()
    });
    for _ in 0..3 {
        r.record_failure("u", MS);
    }
    clock2.advance(9 * SEC);
    for _ in 0..4 {
        r.record_success("u", MS);
    }
    r.record_failure("u", MS); // 1 of 5 in the window
    assert_eq!(r.breaker_state("u"), BreakerState::Closed);
}

#[test]
fn slow_calls_fail_the_breaker_but_not_the_stats() {
    let (r, _) = setup(2, 30 * SEC);
    r.set_default_policy(ToolPolicy {
        breaker: CircuitBreakerConfig {
            failure_threshold: 2,
            ..Default::default()
        },
        slow_call: Some(2 * SEC),
        ..ToolPolicy::default()
    });
    r.record_success("t", 2 * SEC); // at the threshold: not slow
    assert_eq!(r.snapshot("t").unwrap().consecutive_failures, 0);
    r.record_success("t", 3 * SEC);
    r.record_success("t", 5 * SEC);
    let s = r.snapshot("t").unwrap();
    assert_eq!(s.breaker, BreakerState::Open);
    assert_eq!(
        (s.success_count, s.failure_count, s.success_rate),
        (3, 0, 1.0)
    );
}

#[test]
fn unavailable_tools_lists_what_to_leave_out_with_retry_times() {
    let (r, clock) = setup(1, 30 * SEC);
    r.record_failure("dead", MS);
    r.record_success("fine", MS);
    r.force_open("isolated");
    clock.advance(10 * SEC);
    let list = r.unavailable_tools();
    let names: Vec<_> = list.iter().map(|t| t.tool.as_str()).collect();
    assert_eq!(names, ["dead", "isolated"]);
    assert_eq!(list[0].retry_after, 20 * SEC);
    assert_eq!(list[0].breaker, BreakerState::Open);
    assert!(!list[0].forced);
    assert_eq!(list[1].retry_after, Duration::MAX);
    assert!(list[1].forced);
}

#[derive(Debug, Clone)]
enum Op {
    Gate,
    Fail,
    Succeed,
    Advance(u64),
    ForceOpen,
    ForceOpenFor(u64),
    ForceClosed,
    Release,
    Shadow(bool),
    Reset,
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    /// Whatever the controls, the oracle answers exactly what the gate then does.
    #[test]
    fn oracle_equals_gate_under_controls(ops in prop::collection::vec(prop_oneof![
        4 => Just(Op::Gate),
        3 => Just(Op::Fail),
        2 => Just(Op::Succeed),
        3 => (0..3_000u64).prop_map(Op::Advance),
        1 => Just(Op::ForceOpen),
        1 => (0..3_000u64).prop_map(Op::ForceOpenFor),
        1 => Just(Op::ForceClosed),
        1 => Just(Op::Release),
        1 => any::<bool>().prop_map(Op::Shadow),
        1 => Just(Op::Reset),
    ], 1..80)) {
        let (r, clock) = setup(2, Duration::from_secs(1));
        for op in ops {
            match op {
                Op::Gate => {
                    let oracle = r.is_tool_available("t");
                    prop_assert_eq!(oracle, r.allow_request("t"));
                }
                Op::Fail => { r.record_failure("t", MS); }
                Op::Succeed => { r.record_success("t", MS); }
                Op::Advance(ms) => clock.advance(Duration::from_millis(ms)),
                Op::ForceOpen => { r.force_open("t"); }
                Op::ForceOpenFor(ms) => { r.force_open_for("t", Duration::from_millis(ms)); }
                Op::ForceClosed => { r.force_closed("t"); }
                Op::Release => r.release_control("t"),
                Op::Shadow(on) => { r.set_shadow("t", on); }
                Op::Reset => r.reset("t"),
            }
        }
    }
}
