//! The health-aware router: which tool a call is routed to, pinned on the manual clock.

use std::time::Duration;

use tool_health::{
    CircuitBreakerConfig, HealthRouterBuilder, HealthStatus, ManualClock, ToolHealthRegistry,
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

#[test]
fn router_prefers_the_primary_then_fallbacks_in_order() {
    let (r, _) = registry(1, 30 * SEC, 30 * SEC);
    let router = HealthRouterBuilder::new()
        .add_fallback("primary", vec!["b1".into(), "b2".into()])
        .build();
    assert_eq!(router.resolve_tool("primary", &r), "primary");
    r.record_failure("primary", MS);
    assert_eq!(router.resolve_tool("primary", &r), "b1");
    r.record_failure("b1", MS);
    assert_eq!(router.resolve_tool("primary", &r), "b2");
    r.record_failure("b2", MS);
    assert_eq!(
        router.resolve_tool("primary", &r),
        "primary",
        "all down → primary"
    );
    assert_eq!(router.resolve_tool("unrouted", &r), "unrouted");
}

#[test]
fn router_skips_an_unhealthy_fallback_even_when_closed() {
    // b1 gets threshold 0: closed and available, but unhealthy after many failures.
    let (r, _) = registry(0, SEC, SEC);
    for _ in 0..10 {
        r.record_failure("b1", MS);
    }
    r.set_config(CircuitBreakerConfig {
        failure_threshold: 1,
        ..Default::default()
    });
    r.record_failure("primary", MS); // threshold 1: open
    assert!(r.is_tool_available("b1"));
    assert_eq!(r.get_health_status("b1"), HealthStatus::Unhealthy);
    let router = HealthRouterBuilder::new()
        .add_fallback("primary", vec!["b1".into(), "b2".into()])
        .build();
    assert_eq!(router.resolve_tool("primary", &r), "b2");
}

#[test]
fn router_keeps_a_degraded_but_available_primary() {
    let (r, _) = registry(0, SEC, SEC);
    let router = HealthRouterBuilder::new()
        .add_fallback("primary", vec!["backup".into()])
        .build();
    r.record_failure("primary", MS);
    r.record_success("primary", MS);
    r.record_success("primary", MS);
    assert_eq!(r.get_health_status("primary"), HealthStatus::Degraded);
    assert_eq!(router.resolve_tool("primary", &r), "primary");
}

#[test]
fn router_follows_one_level_only_so_cycles_are_harmless() {
    let (r, _) = registry(1, 30 * SEC, 30 * SEC);
    let router = HealthRouterBuilder::new()
        .add_fallback("a", vec!["b".into()])
        .add_fallback("b", vec!["a".into()])
        .build();
    r.record_failure("a", MS);
    r.record_failure("b", MS);
    assert_eq!(router.resolve_tool("a", &r), "a");
    assert_eq!(router.resolve_tool("b", &r), "b");
}
