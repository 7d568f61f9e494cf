//! Hostile input: odd names, huge durations, extreme configs. No panic, no overflow.

use std::time::Duration;

use tool_health::{
    BreakerState, CircuitBreakerConfig, GateDecision, HealthStatus, ManualClock, ToolHealthRegistry,
};

#[test]
fn any_name_is_a_distinct_tool_compared_byte_wise() {
    let r = ToolHealthRegistry::new();
    let long = "x".repeat(64 * 1024);
    let names = [
        "",
        long.as_str(),
        "\0\u{1}\n\t\u{7f}",
        "ツール",
        "🔧 search",
        "Search",
        "search",
        "e\u{301}",
        "\u{e9}",
        "\u{202e}rtl",
    ];
    for n in names {
        assert!(r.allow_request(n));
        r.record_success(n, Duration::from_millis(1));
        r.record_failure(n, Duration::from_millis(2));
    }
    assert_eq!(
        r.tracked_tools(),
        names.len(),
        "case and normalisation differ byte-wise"
    );
    for n in names {
        let s = r.snapshot(n).unwrap();
        assert_eq!(s.tool, n);
        assert_eq!(s.total_calls, 2);
    }
}

#[test]
fn duration_max_in_records_saturates() {
    let r = ToolHealthRegistry::new();
    r.record_success("t", Duration::MAX);
    r.record_failure("t", Duration::MAX);
    r.record_success("t", Duration::MAX);
    let s = r.snapshot("t").unwrap();
    assert_eq!(s.max_duration, Duration::from_nanos(u64::MAX));
    assert_eq!(s.avg_duration, Duration::from_nanos(u64::MAX / 3));
}

#[test]
fn duration_max_in_every_config_field_means_never() {
    let clock = ManualClock::new();
    let r = ToolHealthRegistry::builder()
        .clock(clock.clone())
        .config(CircuitBreakerConfig {
            failure_threshold: 1,
            recovery_duration: Duration::MAX,
            probe_timeout: Duration::MAX,
        })
        .build();
    r.record_failure("t", Duration::MAX);
    assert_eq!(r.breaker_state("t"), BreakerState::Open);
    clock.advance(Duration::from_secs(100 * 365 * 86_400));
    assert_eq!(
        r.check("t"),
        GateDecision::Refused {
            retry_after: Duration::MAX
        }
    );
    assert_eq!(r.snapshot("t").unwrap().retry_after, Some(Duration::MAX));
    clock.advance(Duration::MAX);
    assert!(
        !r.allow_request("t"),
        "a cooldown of Duration::MAX never ends"
    );
}

#[test]
fn huge_lease_with_short_recovery_keeps_the_probe() {
    let clock = ManualClock::new();
    let r = ToolHealthRegistry::builder()
        .clock(clock.clone())
        .config(CircuitBreakerConfig {
            failure_threshold: 1,
            recovery_duration: Duration::ZERO,
            probe_timeout: Duration::MAX,
        })
        .build();
    r.record_failure("t", Duration::ZERO);
    assert!(r.allow_request("t"));
    clock.advance(Duration::MAX);
    assert_eq!(r.breaker_state("t"), BreakerState::HalfOpen);
    assert!(!r.allow_request("t"));
}

#[test]
fn threshold_at_the_integer_maximum_does_not_trip_early() {
    let r = ToolHealthRegistry::with_config(CircuitBreakerConfig {
        failure_threshold: u32::MAX,
        ..Default::default()
    });
    for _ in 0..10_000 {
        r.record_failure("t", Duration::ZERO);
    }
    assert_eq!(r.breaker_state("t"), BreakerState::Closed);
    assert_eq!(r.get_health_status("t"), HealthStatus::Unhealthy);
    assert_eq!(r.snapshot("t").unwrap().consecutive_failures, 10_000);
}

#[test]
fn a_clock_at_its_end_keeps_working() {
    let clock = ManualClock::new();
    clock.advance(Duration::MAX);
    let r = ToolHealthRegistry::builder()
        .clock(clock.clone())
        .config(CircuitBreakerConfig {
            failure_threshold: 1,
            ..Default::default()
        })
        .build();
    r.record_failure("t", Duration::ZERO);
    assert_eq!(r.breaker_state("t"), BreakerState::Open);
    assert!(!r.allow_request("t"));
}

#[test]
fn a_zero_cap_tracks_nothing_and_allows_everything() {
    let r = ToolHealthRegistry::builder().max_tools(0).build();
    for _ in 0..10 {
        r.record_failure("t", Duration::ZERO);
    }
    assert!(r.allow_request("t"));
    assert_eq!(r.tracked_tools(), 0);
    assert_eq!(r.overflow().failure_count, 10);
}
