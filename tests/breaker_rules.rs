//! Every rule of the behaviour reference for the breaker and the registry, pinned on the
//! manual clock. The router's rules are in `router.rs`.

use std::time::Duration;

use tool_health::{
    BreakerState, CallOutcome, CallReport, CircuitBreakerConfig, GateDecision, HealthStatus,
    ManualClock, ToolHealthRegistry, TransitionReason, REFUSAL_MESSAGE,
};

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

fn registry(
    threshold: u32,
    recovery: Duration,
    lease: Duration,
) -> (ToolHealthRegistry, ManualClock) {
    let clock = ManualClock::new();
    let r = ToolHealthRegistry::builder()
        .config(CircuitBreakerConfig {
            failure_threshold: threshold,
            recovery_duration: recovery,
            probe_timeout: lease,
        })
        .clock(clock.clone())
        .build();
    (r, clock)
}

fn default_registry() -> (ToolHealthRegistry, ManualClock) {
    registry(3, 30 * SEC, 30 * SEC)
}

fn trip(r: &ToolHealthRegistry, tool: &str) {
    while r.breaker_state(tool) != BreakerState::Open {
        r.record_failure(tool, MS);
    }
}

#[test]
fn config_defaults_are_3_30s_30s() {
    let c = CircuitBreakerConfig::default();
    assert_eq!(c.failure_threshold, 3);
    assert_eq!(c.recovery_duration, 30 * SEC);
    assert_eq!(c.probe_timeout, 30 * SEC);
    assert_eq!(
        REFUSAL_MESSAGE,
        "tool temporarily unavailable: circuit breaker open"
    );
}

#[test]
fn display_names() {
    assert_eq!(BreakerState::HalfOpen.to_string(), "half_open");
    assert_eq!(BreakerState::Closed.to_string(), "closed");
    assert_eq!(BreakerState::Open.to_string(), "open");
    assert_eq!(HealthStatus::Degraded.to_string(), "degraded");
    assert_eq!(HealthStatus::Healthy.to_string(), "healthy");
    assert_eq!(HealthStatus::Unhealthy.to_string(), "unhealthy");
}

#[test]
fn stats_follow_the_reference_formulas() {
    let (r, _) = default_registry();
    r.record_failure("t", 10 * MS);
    let s = r.snapshot("t").unwrap();
    assert_eq!(s.ewma_success, 0.7);
    assert!(
        (s.score - 0.49).abs() < 1e-12,
        "one failure on a fresh tool scores 0.49"
    );
    assert_eq!(s.status, HealthStatus::Unhealthy);
    r.record_failure("t", 30 * MS);
    assert_eq!(r.snapshot("t").unwrap().ewma_success, 0.49);
    r.record_success("t", 20 * MS);
    let s = r.snapshot("t").unwrap();
    assert_eq!(s.ewma_success, 0.643);
    assert_eq!((s.total_calls, s.success_count, s.failure_count), (3, 1, 2));
    assert_eq!(s.avg_duration, 20 * MS);
    assert_eq!(s.max_duration, 30 * MS, "max includes failed calls");
    assert!((s.success_rate - 1.0 / 3.0).abs() < 1e-12);
    assert!((s.score - (0.3 / 3.0 + 0.7 * 0.643)).abs() < 1e-12);
}

#[test]
fn a_closed_breaker_dispatches_even_with_a_terrible_score() {
    let (r, _) = registry(0, 30 * SEC, 30 * SEC);
    for _ in 0..50 {
        r.record_failure("bad", MS);
    }
    assert_eq!(r.get_health_status("bad"), HealthStatus::Unhealthy);
    assert_eq!(r.breaker_state("bad"), BreakerState::Closed);
    assert!(r.allow_request("bad"));
}

#[test]
fn trips_at_the_threshold_and_only_an_accepted_success_resets() {
    let (r, _) = default_registry();
    r.record_failure("t", MS);
    r.record_failure("t", MS);
    r.record_success("t", MS);
    r.record_failure("t", MS);
    r.record_failure("t", MS);
    assert_eq!(r.breaker_state("t"), BreakerState::Closed);
    assert_eq!(r.snapshot("t").unwrap().consecutive_failures, 2);
    let rec = r.record_failure("t", MS);
    assert_eq!(
        rec.transition.map(|t| t.reason),
        Some(TransitionReason::Tripped)
    );
    assert_eq!(r.breaker_state("t"), BreakerState::Open);
    assert_eq!(r.get_health_status("t"), HealthStatus::Unhealthy);
}

#[test]
fn threshold_one_trips_on_the_first_failure() {
    let (r, _) = registry(1, SEC, SEC);
    r.record_failure("t", MS);
    assert_eq!(r.breaker_state("t"), BreakerState::Open);
}

#[test]
fn threshold_zero_never_trips_but_keeps_counting() {
    let (r, _) = registry(0, SEC, SEC);
    for _ in 0..1000 {
        r.record_failure("t", MS);
    }
    assert_eq!(r.breaker_state("t"), BreakerState::Closed);
    assert_eq!(r.snapshot("t").unwrap().consecutive_failures, 1000);
    assert!(r.allow_request("t"));
}

#[test]
fn cooldown_boundary_is_inclusive() {
    let (r, clock) = default_registry();
    trip(&r, "t");
    clock.advance(30 * SEC - MS);
    assert!(!r.is_tool_available("t"));
    assert!(!r.allow_request("t"));
    clock.advance(MS);
    assert!(r.is_tool_available("t"));
    assert!(
        r.allow_request("t"),
        "elapsed == recovery counts as elapsed"
    );
    assert_eq!(r.breaker_state("t"), BreakerState::HalfOpen);
}

#[test]
fn cooldown_counts_from_the_last_failure_even_sub_tick() {
    let (r, clock) = default_registry();
    trip(&r, "t");
    clock.advance(30 * SEC - Duration::from_nanos(1));
    assert!(!r.allow_request("t"));
    clock.advance(Duration::from_nanos(1));
    assert!(r.allow_request("t"));
}

#[test]
fn refusal_reports_when_to_retry() {
    let (r, clock) = default_registry();
    trip(&r, "t");
    clock.advance(10 * SEC);
    assert_eq!(
        r.check("t"),
        GateDecision::Refused {
            retry_after: 20 * SEC
        }
    );
    assert_eq!(r.snapshot("t").unwrap().retry_after, Some(20 * SEC));
}

#[test]
fn half_open_admits_exactly_one_probe() {
    let (r, clock) = default_registry();
    trip(&r, "t");
    clock.advance(30 * SEC);
    assert!(matches!(r.check("t"), GateDecision::Probe(p) if p.is_probe()));
    for _ in 0..10 {
        assert!(!r.is_tool_available("t"));
        assert!(!r.allow_request("t"));
    }
    let s = r.snapshot("t").unwrap();
    assert_eq!(s.refused_count, 10);
    assert_eq!(s.total_calls, 3, "refusals are not calls of the tool");
}

#[test]
fn probe_success_closes_and_resets_the_counter() {
    let (r, clock) = default_registry();
    trip(&r, "t");
    clock.advance(30 * SEC);
    assert!(r.allow_request("t"));
    let rec = r.record_success("t", MS);
    assert_eq!(
        rec.transition.map(|t| t.reason),
        Some(TransitionReason::ProbeSucceeded)
    );
    assert_eq!(r.breaker_state("t"), BreakerState::Closed);
    assert_eq!(r.snapshot("t").unwrap().consecutive_failures, 0);
}

#[test]
fn probe_failure_reopens_with_a_fresh_cooldown() {
    let (r, clock) = default_registry();
    trip(&r, "t");
    clock.advance(30 * SEC);
    assert!(r.allow_request("t"));
    clock.advance(5 * SEC);
    r.record_failure("t", MS);
    assert_eq!(r.breaker_state("t"), BreakerState::Open);
    clock.advance(30 * SEC - MS);
    assert!(!r.allow_request("t"));
    clock.advance(MS);
    assert!(r.allow_request("t"));
}

#[test]
fn recovery_zero_probes_immediately() {
    let (r, _) = registry(1, Duration::ZERO, SEC);
    r.record_failure("t", MS);
    assert_eq!(r.breaker_state("t"), BreakerState::Open);
    assert!(r.allow_request("t"));
    assert_eq!(r.breaker_state("t"), BreakerState::HalfOpen);
    assert!(!r.allow_request("t"));
}

#[test]
fn lease_expiry_is_inclusive_seen_by_reads_and_rearms_from_the_lease_end() {
    let (r, clock) = registry(1, 10 * SEC, 5 * SEC);
    r.record_failure("t", MS);
    clock.advance(10 * SEC);
    assert!(r.allow_request("t"));
    clock.advance(5 * SEC - MS);
    assert_eq!(r.breaker_state("t"), BreakerState::HalfOpen);
    clock.advance(MS);
    // No call needed: reads see the expiry.
    assert_eq!(r.breaker_state("t"), BreakerState::Open);
    assert_eq!(r.get_health_status("t"), HealthStatus::Unhealthy);
    // Next probe at lease end + recovery.
    clock.advance(10 * SEC - MS);
    assert!(!r.is_tool_available("t"));
    assert!(!r.allow_request("t"));
    clock.advance(MS);
    assert!(r.is_tool_available("t"));
    assert!(r.allow_request("t"));
}

#[test]
fn late_success_after_lease_expiry_does_not_close() {
    let (r, clock) = registry(1, 10 * SEC, 5 * SEC);
    r.record_failure("t", MS);
    clock.advance(10 * SEC);
    assert!(r.allow_request("t"));
    clock.advance(7 * SEC);
    let rec = r.record_success("t", 7 * SEC);
    assert_eq!(
        rec.expired.map(|t| t.reason),
        Some(TransitionReason::LeaseExpired)
    );
    assert_eq!(rec.transition, None);
    assert_eq!(r.breaker_state("t"), BreakerState::Open);
    // Cooldown still counted from the lease's end (t=15 s): next probe at 25 s.
    clock.advance(8 * SEC - MS);
    assert!(!r.allow_request("t"));
    clock.advance(MS);
    assert!(r.allow_request("t"));
}

#[test]
fn failure_after_lease_expiry_restarts_the_cooldown_from_now() {
    let (r, clock) = registry(1, 10 * SEC, 5 * SEC);
    r.record_failure("t", MS);
    clock.advance(10 * SEC);
    assert!(r.allow_request("t"));
    clock.advance(7 * SEC); // lease expired at 15 s; failure at 17 s
    r.record_failure("t", MS);
    clock.advance(10 * SEC - MS);
    assert!(!r.allow_request("t"));
    clock.advance(MS);
    assert!(r.allow_request("t"));
}

#[test]
fn lease_zero_disables_the_lease() {
    let (r, clock) = registry(1, SEC, Duration::ZERO);
    r.record_failure("t", MS);
    clock.advance(SEC);
    assert!(r.allow_request("t"));
    clock.advance(Duration::from_secs(86_400 * 365));
    assert_eq!(r.breaker_state("t"), BreakerState::HalfOpen);
    assert!(!r.allow_request("t"));
    r.record_success("t", MS);
    assert_eq!(r.breaker_state("t"), BreakerState::Closed);
}

#[test]
fn failure_while_open_extends_the_cooldown() {
    let (r, clock) = default_registry();
    trip(&r, "t");
    clock.advance(20 * SEC);
    r.record_failure("t", MS); // fresh bad news at 20 s: ready at 50 s
    clock.advance(10 * SEC);
    assert!(!r.allow_request("t"));
    clock.advance(20 * SEC - MS);
    assert!(!r.allow_request("t"));
    clock.advance(MS);
    assert!(r.allow_request("t"));
}

#[test]
fn success_while_open_is_ignored_and_leaves_the_counter() {
    let (r, clock) = default_registry();
    trip(&r, "t");
    let before = r.snapshot("t").unwrap().consecutive_failures;
    clock.advance(SEC);
    let rec = r.record_success("t", MS);
    assert_eq!(rec.transition, None);
    assert_eq!(r.breaker_state("t"), BreakerState::Open);
    let after = r.snapshot("t").unwrap();
    assert_eq!(after.consecutive_failures, before);
    assert_eq!(after.success_count, 1, "the stats still count the call");
}

#[test]
fn failures_count_in_every_state() {
    let (r, clock) = registry(2, SEC, SEC);
    r.record_failure("t", MS);
    r.record_failure("t", MS); // trips: 2
    r.record_failure("t", MS); // open: 3
    clock.advance(SEC);
    assert!(r.allow_request("t"));
    r.record_failure("t", MS); // probe fails: 4
    assert_eq!(r.snapshot("t").unwrap().consecutive_failures, 4);
}

#[test]
fn permit_results_from_an_older_generation_never_touch_a_newer_episode() {
    let (r, clock) = registry(1, 10 * SEC, 5 * SEC);
    let old = r.check("t").permit().unwrap(); // admitted while closed
    r.record_failure("t", MS);
    clock.advance(10 * SEC);
    let probe = r.check("t").permit().unwrap();
    assert!(probe.is_probe());
    // The call admitted before the trip finally succeeds: it must not close the probe episode.
    r.record_with_permit("t", old, CallOutcome::Success, MS);
    assert_eq!(r.breaker_state("t"), BreakerState::HalfOpen);
    // Nor may its failure fail the probe.
    r.record_with_permit("t", old, CallOutcome::Failure, MS);
    assert_eq!(r.breaker_state("t"), BreakerState::HalfOpen);
    // The probe's own result decides.
    r.record_with_permit("t", probe, CallOutcome::Success, MS);
    assert_eq!(r.breaker_state("t"), BreakerState::Closed);
    // And a stale probe failure cannot re-open the new closed episode.
    r.record_with_permit("t", probe, CallOutcome::Failure, MS);
    assert_eq!(r.breaker_state("t"), BreakerState::Closed);
    let s = r.snapshot("t").unwrap();
    assert_eq!(
        (s.success_count, s.failure_count),
        (2, 3),
        "stats count every call"
    );
}

#[test]
fn released_probe_can_be_granted_again_at_once() {
    let (r, clock) = registry(1, 10 * SEC, 5 * SEC);
    r.record_failure("t", MS);
    clock.advance(10 * SEC);
    let probe = r.check("t").permit().unwrap();
    clock.advance(SEC);
    let rec = r.release("t", probe);
    assert_eq!(
        rec.transition.map(|t| t.reason),
        Some(TransitionReason::ProbeReleased)
    );
    assert!(r.is_tool_available("t"));
    assert!(matches!(r.check("t"), GateDecision::Probe(_)));
    // Releasing the old permit again does nothing to the new probe.
    r.release("t", probe);
    assert_eq!(r.breaker_state("t"), BreakerState::HalfOpen);
}

#[test]
fn ignored_and_refused_outcomes_are_not_failures() {
    let (r, _) = registry(1, SEC, SEC);
    for _ in 0..5 {
        r.record_report("t", &CallReport::new(CallOutcome::Ignored, SEC));
    }
    r.record_report("t", &CallReport::new(CallOutcome::Refused, SEC));
    let s = r.snapshot("t").unwrap();
    assert_eq!(s.breaker, BreakerState::Closed);
    assert_eq!((s.total_calls, s.ignored_count, s.refused_count), (0, 5, 1));
    assert_eq!(s.max_duration, Duration::ZERO);
}

#[test]
fn reads_create_no_entries() {
    let (r, _) = default_registry();
    assert_eq!(r.get_health_status("ghost"), HealthStatus::Healthy);
    assert_eq!(r.breaker_state("ghost"), BreakerState::Closed);
    assert!(r.is_tool_available("ghost"));
    assert!(r.snapshot("ghost").is_none());
    assert!(r.allow_request("ghost"), "an unknown tool is closed");
    assert_eq!(r.tracked_tools(), 0);
    assert!(r.health_summary().is_empty());
}

#[test]
fn set_config_applies_only_to_breakers_created_afterwards() {
    let (r, _) = registry(1, SEC, SEC);
    r.record_success("old", MS);
    r.set_config(CircuitBreakerConfig {
        failure_threshold: 5,
        ..CircuitBreakerConfig::default()
    });
    r.record_failure("old", MS);
    assert_eq!(
        r.breaker_state("old"),
        BreakerState::Open,
        "old keeps threshold 1"
    );
    for _ in 0..4 {
        r.record_failure("new", MS);
    }
    assert_eq!(
        r.breaker_state("new"),
        BreakerState::Closed,
        "new gets threshold 5"
    );
    r.record_failure("new", MS);
    assert_eq!(r.breaker_state("new"), BreakerState::Open);
    assert_eq!(r.config().failure_threshold, 5);
}

#[test]
fn health_summary_lists_every_tool_sorted() {
    let (r, _) = registry(1, SEC, SEC);
    r.record_success("zeta", MS);
    r.record_failure("alpha", MS);
    r.record_success("mid", MS);
    let names: Vec<_> = r.health_summary().into_iter().map(|s| s.tool).collect();
    assert_eq!(names, ["alpha", "mid", "zeta"]);
    let alpha = &r.health_summary()[0];
    assert_eq!(&*alpha.tool, "alpha");
    assert_eq!(alpha.breaker, BreakerState::Open);
    assert_eq!(alpha.status, HealthStatus::Unhealthy);
}

#[test]
fn past_the_cap_new_names_share_one_overflow_breaker() {
    let clock = ManualClock::new();
    let r = ToolHealthRegistry::builder()
        .clock(clock)
        .max_tools(2)
        .config(CircuitBreakerConfig {
            failure_threshold: 1,
            ..Default::default()
        })
        .build();
    r.record_success("a", MS);
    r.record_success("b", MS);
    for _ in 0..3 {
        r.record_failure("c", MS);
    }
    r.record_success("c", MS);
    assert_eq!(r.tracked_tools(), 2);
    assert!(r.snapshot("c").is_none());
    // The overflow breaker (threshold 1) opened at c's first failure; the success while open
    // is a stale one. Every new name past the cap meets it.
    assert!(
        !r.allow_request("c"),
        "past the cap a name is still protected"
    );
    assert!(
        !r.allow_request("d"),
        "by the one overflow breaker all new names share"
    );
    assert!(!r.is_tool_available("e"));
    assert_eq!(r.breaker_state("e"), BreakerState::Open);
    let o = r.overflow();
    assert_eq!((o.success_count, o.failure_count, o.records), (1, 3, 4));
    assert_eq!((o.breaker, o.refused_count), (BreakerState::Open, 2));
    // Known tools keep working.
    r.record_failure("a", MS);
    assert_eq!(r.breaker_state("a"), BreakerState::Open);
}

#[test]
fn the_oracle_never_consumes_the_probe() {
    let (r, clock) = default_registry();
    trip(&r, "t");
    clock.advance(30 * SEC);
    for _ in 0..100 {
        assert!(r.is_tool_available("t"));
    }
    assert_eq!(r.breaker_state("t"), BreakerState::Open);
    assert!(r.allow_request("t"));
}

/// A clock whose coarse reading lags its exact one by a fixed amount (like a kernel tick).
#[derive(Debug, Clone)]
struct LaggingClock {
    exact: ManualClock,
    lag: Duration,
}

impl tool_health::Clock for LaggingClock {
    fn now(&self) -> Duration {
        self.exact.now()
    }
    fn now_coarse(&self) -> Duration {
        self.exact.now().saturating_sub(self.lag)
    }
}

#[test]
fn a_lagging_coarse_reading_keeps_the_breaker_open_at_most_its_lag_never_less() {
    let exact = ManualClock::new();
    let clock = LaggingClock {
        exact: exact.clone(),
        lag: 4 * MS,
    };
    let r = ToolHealthRegistry::builder().clock(clock).build();
    trip(&r, "t");

    // Before the cooldown on both readings: refused, retry-after from the coarse reading
    // (over-estimated by the lag, never under).
    exact.advance(10 * SEC);
    assert_eq!(
        r.check("t"),
        GateDecision::Refused {
            retry_after: 20 * SEC + 4 * MS
        }
    );
    // The cooldown has run out on the exact clock but not on the coarse one: still refused,
    // and the oracle agrees with the gate.
    exact.advance(20 * SEC);
    assert!(!r.is_tool_available("t"));
    assert!(!r.allow_request("t"));
    exact.advance(3 * MS);
    assert!(!r.is_tool_available("t"));
    assert!(!r.allow_request("t"));
    // One lag past the cooldown: the probe, exactly once.
    exact.advance(MS);
    assert!(r.is_tool_available("t"));
    assert!(matches!(r.check("t"), GateDecision::Probe(_)));
    assert!(!r.allow_request("t"));
    assert_eq!(r.snapshot("t").unwrap().refused_count, 4);
}

#[test]
fn a_probe_ending_in_a_caller_error_is_given_back_at_once() {
    for lease in [Duration::ZERO, 10 * SEC] {
        // Through the probe's permit.
        let (r, clock) = registry(1, 30 * SEC, lease);
        r.record_failure("t", MS);
        clock.advance(30 * SEC);
        let probe = r.check("t").permit().expect("the probe");
        assert!(probe.is_probe());
        clock.advance(SEC);
        r.record_with_permit("t", probe, CallOutcome::Ignored, MS);
        // Before: half-open for good without a lease, refused for lease + cooldown with one.
        assert!(r.is_tool_available("t"), "lease {lease:?}");
        assert!(
            matches!(r.check("t"), GateDecision::Probe(_)),
            "lease {lease:?}"
        );
        let s = r.snapshot("t").unwrap();
        assert_eq!(
            (s.ignored_count, s.failure_count, s.consecutive_failures),
            (1, 1, 1)
        );

        // By name: a caller error while half-open is taken for the probe's, as a success is.
        let (r, clock) = registry(1, 30 * SEC, lease);
        r.record_failure("t", MS);
        clock.advance(30 * SEC);
        assert!(r.allow_request("t"));
        r.record_report("t", &CallReport::new(CallOutcome::Ignored, MS));
        assert!(
            r.allow_request("t"),
            "lease {lease:?}: the next call probes"
        );

        // An ordinary permit's caller error gives nothing back: it held no probe.
        let (r, clock) = registry(1, 30 * SEC, lease);
        let admitted = r.check("t").permit().unwrap();
        r.record_failure("t", MS);
        clock.advance(30 * SEC);
        assert!(r.allow_request("t")); // someone else's probe
        r.record_with_permit("t", admitted, CallOutcome::Ignored, MS);
        assert!(!r.is_tool_available("t"), "the live probe is untouched");
    }
}

#[test]
fn unavailable_tools_reports_the_gates_retry_after() {
    // Lease 10 s: a probe granted at 30 s; at 31 s another caller is refused until the lease's
    // end plus a cooldown (71 s), and so says the list.
    let (r, clock) = registry(1, 30 * SEC, 10 * SEC);
    r.record_failure("t", MS);
    clock.advance(30 * SEC);
    assert!(r.allow_request("t"));
    clock.advance(SEC);
    let gate = r.check("t");
    assert_eq!(
        gate,
        GateDecision::Refused {
            retry_after: 39 * SEC
        }
    );
    let listed = &r.unavailable_tools()[0];
    assert_eq!(listed.breaker, BreakerState::HalfOpen);
    assert_eq!(listed.retry_after, 39 * SEC, "was the lease's end: 9 s");
    assert_eq!(r.snapshot("t").unwrap().retry_after, Some(39 * SEC));

    // No lease: the gate says a cooldown, and so does the list (it said `Duration::MAX`).
    let (r, clock) = registry(1, 30 * SEC, Duration::ZERO);
    r.record_failure("t", MS);
    clock.advance(30 * SEC);
    assert!(r.allow_request("t"));
    clock.advance(SEC);
    assert_eq!(
        r.check("t"),
        GateDecision::Refused {
            retry_after: 30 * SEC
        }
    );
    assert_eq!(r.unavailable_tools()[0].retry_after, 30 * SEC);
    assert_eq!(r.snapshot("t").unwrap().retry_after, Some(30 * SEC));
}

#[test]
fn a_cooldown_never_ends_early_whatever_the_sub_millisecond_instant() {
    let (r, clock) = registry(1, 30 * SEC, 10 * SEC);
    clock.advance(Duration::from_micros(999));
    r.record_failure("t", MS); // at 0.999 ms: the cooldown ends at exactly 30.000999 s
    clock.set(30 * SEC);
    assert!(!r.is_tool_available("t"), "30 s is 0.999 ms early");
    assert!(!r.allow_request("t"));
    clock.set(30 * SEC + Duration::from_nanos(998_999));
    assert!(!r.allow_request("t"), "1 ns early");
    clock.set(30 * SEC + MS); // at most one tick late
    assert!(matches!(r.check("t"), GateDecision::Probe(_)));
    // The probe was granted at 30.001 s exactly: its lease ends at 40.001 s, not before.
    clock.set(40 * SEC + Duration::from_micros(999));
    assert_eq!(r.breaker_state("t"), BreakerState::HalfOpen);
    clock.set(40 * SEC + MS);
    assert_eq!(r.breaker_state("t"), BreakerState::Open);

    // A probe granted between ticks: its lease counts from the grant rounded up.
    let (r, clock) = registry(1, 30 * SEC, 10 * SEC);
    r.record_failure("t", MS);
    clock.set(30 * SEC + Duration::from_micros(500));
    assert!(r.allow_request("t"));
    clock.set(40 * SEC + Duration::from_micros(999));
    assert_eq!(
        r.breaker_state("t"),
        BreakerState::HalfOpen,
        "the lease's exact end is 40.0005 s"
    );

    // An isolation until a sub-millisecond instant lapses no sooner than that instant.
    let (r, clock) = registry(1, 30 * SEC, 10 * SEC);
    r.force_open_until("t", Duration::from_micros(1_500));
    clock.set(MS);
    assert!(!r.allow_request("t"), "1 ms is 0.5 ms early");
    clock.set(2 * MS);
    assert!(r.allow_request("t"));
}
