//! `CallOutcome::Cancelled` at the registry (issue 14; SPEC 6.4): a call that started and never
//! finished is counted apart, never feeds the breaker, and a probe recorded with it is given
//! back at once.

use std::time::Duration;

use tool_health::{
    BreakerState, CallOutcome, CircuitBreakerConfig, GateDecision, ManualClock, ToolHealthRegistry,
};

fn registry() -> (ManualClock, ToolHealthRegistry) {
    let clock = ManualClock::new();
    let r = ToolHealthRegistry::builder()
        .config(CircuitBreakerConfig {
            failure_threshold: 2,
            recovery_duration: Duration::from_secs(30),
            probe_timeout: Duration::from_secs(10),
        })
        .clock(clock.clone())
        .build();
    (clock, r)
}

#[test]
fn a_cancelled_probe_is_given_back_at_once() {
    let (clock, r) = registry();
    r.record_failure("t", Duration::ZERO);
    r.record_failure("t", Duration::ZERO);
    clock.advance(Duration::from_secs(30));
    let GateDecision::Probe(probe) = r.check("t") else {
        panic!("the probe")
    };
    assert!(!r.allow_request("t"), "the probe is out");
    let recorded = r.record_with_permit("t", probe, CallOutcome::Cancelled, Duration::from_secs(1));
    assert_eq!(
        recorded.transition.map(|t| (t.from, t.to)),
        Some((BreakerState::HalfOpen, BreakerState::Open))
    );
    // No lease to wait for: the next call probes now.
    assert!(matches!(r.check("t"), GateDecision::Probe(_)));
    let s = r.snapshot("t").unwrap();
    assert_eq!(
        (
            s.total_calls,
            s.failure_count,
            s.cancelled_count,
            s.consecutive_failures
        ),
        (2, 2, 1, 2)
    );
}

#[test]
fn cancelled_calls_never_feed_the_breaker() {
    let (_clock, r) = registry();
    r.record_failure("t", Duration::ZERO);
    for _ in 0..10 {
        let p = r.check("t").permit().unwrap();
        r.record_with_permit("t", p, CallOutcome::Cancelled, Duration::from_secs(5));
    }
    let s = r.snapshot("t").unwrap();
    assert_eq!(
        (s.total_calls, s.cancelled_count, s.consecutive_failures),
        (1, 10, 1)
    );
    assert_eq!(s.breaker, BreakerState::Closed);
    assert_eq!(
        s.max_duration,
        Duration::ZERO,
        "no duration: the call never finished"
    );
    // Past the cap, cancellations are counted in the overflow.
    let capped = ToolHealthRegistry::builder().max_tools(1).build();
    capped.record_success("first", Duration::ZERO);
    capped.record_report(
        "x",
        &tool_health::CallReport::new(CallOutcome::Cancelled, Duration::ZERO),
    );
    assert_eq!(capped.overflow().cancelled_count, 1);
}
