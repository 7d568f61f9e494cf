//! Operator controls on the manual clock: force open (for good or until an instant), force
//! closed, shadow mode (on the registry and on tool spans), reset, the list of unavailable
//! tools, and the oracle equal to the gate under any controls.

// The layer tests' harness: subscriber stacks and a registry on the manual clock.
#[path = "layer/support.rs"]
mod layer_support;

use std::time::Duration;

use layer_support::{attr, registry, Harness, OTEL_STACKS};
use proptest::prelude::*;
use tool_health::layer::{ToolHealthLayer, GATE_DECISION_ATTRIBUTE, GATE_ENFORCED_ATTRIBUTE};
use tool_health::{
    Apply, BreakerState, CallOutcome, CircuitBreakerConfig, GateDecision, ManualClock, ToolControl,
    ToolHealthRegistry, ToolPolicy,
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
        BreakerState::Open,
        "an isolated tool reads open"
    );
    assert!(r.unavailable_tools()[0].forced);
    r.release_control("t");
    assert_eq!(
        r.breaker_state("t"),
        BreakerState::Closed,
        "the breaker underneath was untouched"
    );
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
fn shadow_mode_lets_the_call_through_and_says_so_on_the_span() {
    for stack in OTEL_STACKS {
        let (_clock, registry) = registry(1);
        registry.record_failure("search", Duration::ZERO); // open
        registry.set_shadow("search", true);
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| {
            let span = tracing::info_span!(
                "execute_tool search",
                gen_ai.operation.name = "execute_tool",
                gen_ai.tool.name = "search",
            );
            let _g = span.enter();
            assert!(registry.allow_request("search"));
        });
        let span = h.span("execute_tool search");
        assert_eq!(
            attr(&span, GATE_DECISION_ATTRIBUTE).as_deref(),
            Some("allowed")
        );
        assert_eq!(
            attr(&span, GATE_ENFORCED_ATTRIBUTE).as_deref(),
            Some("false")
        );
        let s = registry.snapshot("search").unwrap();
        assert_eq!(
            (s.shadow_refused_count, s.refused_count),
            (1, 0),
            "{stack:?}"
        );
    }
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

/// One call a second for 120 s to a tool that is down until 40 s (threshold 1, cooldown 30 s,
/// lease 10 s), on an enforcing registry and on one in shadow mode (or force-closed), in
/// lockstep: the breakers must move alike, second by second.
fn shadow_lockstep(control: impl Fn(&ToolHealthRegistry), by_permit: bool) -> (u64, u64) {
    let (enforced, clock) = setup(1, 30 * SEC);
    let shadowed = ToolHealthRegistry::builder()
        .clock(clock.clone())
        .config(enforced.config())
        .build();
    control(&shadowed);
    let call = |r: &ToolHealthRegistry, second: u64| {
        let ok = second >= 40;
        let outcome = if ok {
            CallOutcome::Success
        } else {
            CallOutcome::Failure
        };
        let decision = r.check("t");
        match (decision.permit(), by_permit) {
            (Some(p), true) => {
                r.record_with_permit("t", p, outcome, MS);
            }
            (Some(_), false) if ok => {
                r.record_success("t", MS);
            }
            (Some(_), false) => {
                r.record_failure("t", MS);
            }
            (None, _) => {}
        }
    };
    for second in 0..120 {
        call(&enforced, second);
        call(&shadowed, second);
        assert_eq!(
            shadowed.breaker_state("t"),
            enforced.breaker_state("t"),
            "second {second}"
        );
        clock.advance(SEC);
    }
    let (e, s) = (
        enforced.snapshot("t").unwrap(),
        shadowed.snapshot("t").unwrap(),
    );
    assert_eq!(s.refused_count, 0, "nothing is refused under the control");
    assert_eq!(s.consecutive_failures, e.consecutive_failures);
    (e.refused_count, s.shadow_refused_count)
}

#[test]
fn shadow_mode_moves_the_breaker_exactly_as_enforcement() {
    for by_permit in [true, false] {
        let (enforced, shadow) = shadow_lockstep(|r| assert!(r.set_shadow("t", true)), by_permit);
        assert_eq!(enforced, 58, "by permit: {by_permit}");
        assert_eq!(
            shadow, 58,
            "was 68: would-be refusals restarted the cooldown"
        );
    }
}

#[test]
fn force_closed_runs_the_breakers_own_machine_probe_included() {
    for by_permit in [true, false] {
        let (enforced, would_be) = shadow_lockstep(|r| assert!(r.force_closed("t")), by_permit);
        assert_eq!((enforced, would_be), (58, 58), "by permit: {by_permit}");
    }
    // The case: a tool force-closed after its breaker opened, then 600 successes.
    let (r, clock) = setup(1, 30 * SEC);
    r.force_closed("t");
    r.record_failure("t", MS);
    assert_eq!(r.breaker_state("t"), BreakerState::Open);
    for _ in 0..600 {
        assert!(r.allow_request("t"));
        r.record_success("t", MS);
        clock.advance(SEC);
    }
    let s = r.snapshot("t").unwrap();
    assert_eq!(
        s.breaker,
        BreakerState::Closed,
        "was open after 600 successes"
    );
    assert_eq!(s.status, tool_health::HealthStatus::Healthy);
    assert_eq!(
        s.shadow_refused_count, 30,
        "what it would have refused before its probe"
    );
    r.release_control("t");
    assert!(r.allow_request("t"));
}

#[test]
fn a_forced_open_tool_reads_open_and_unhealthy() {
    let (r, clock) = setup(3, 30 * SEC);
    r.record_success("t", MS);
    r.force_open_for("t", 60 * SEC);
    let s = r.snapshot("t").unwrap();
    assert_eq!(
        s.breaker,
        BreakerState::Open,
        "was closed while every call was refused"
    );
    assert_eq!(
        s.status,
        tool_health::HealthStatus::Unhealthy,
        "was healthy"
    );
    assert_eq!(s.retry_after, Some(60 * SEC));
    // The score stays what the calls said (README, "The core": the breaker decides, the score
    // is evidence): one success, a perfect score, beside Unhealthy and Open.
    assert_eq!(s.score, 1.0);
    assert_eq!(r.breaker_state("t"), BreakerState::Open);
    assert_eq!(
        r.get_health_status("t"),
        tool_health::HealthStatus::Unhealthy
    );
    assert_eq!(r.unavailable_tools()[0].breaker, BreakerState::Open);
    clock.advance(60 * SEC); // lapsed: the breaker's own state shows again
    assert_eq!(r.breaker_state("t"), BreakerState::Closed);
    assert_eq!(r.get_health_status("t"), tool_health::HealthStatus::Healthy);
}
