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

// Issue 14, finding 9: the planner's list and the router agree. A primary whose breaker is
// open but whose fallback is healthy stays offered (the call is routed); a tool with no usable
// fallback is left out, with the same retry time the registry gives.
#[test]
fn the_routers_unavailable_tools_keep_tools_with_a_healthy_fallback() {
    let (r, clock) = registry(1, 30 * SEC, 10 * SEC);
    let router = HealthRouterBuilder::new()
        .add_fallback("web_search", vec!["backup_search".into()])
        .add_fallback("sql_query", vec!["sql_replica".into()])
        .build();
    r.record_failure("web_search", MS); // open; its fallback is fresh
    r.record_failure("sql_query", MS); // open...
    r.record_failure("sql_replica", MS); // ...and so is its fallback
    r.record_failure("pdf_reader", MS); // open, no fallback
    clock.advance(5 * SEC);

    let registry_view: Vec<String> = r.unavailable_tools().into_iter().map(|t| t.tool).collect();
    assert_eq!(
        registry_view,
        ["pdf_reader", "sql_query", "sql_replica", "web_search"]
    );
    let planner = router.unavailable_tools(&r);
    let names: Vec<&str> = planner.iter().map(|t| t.tool.as_str()).collect();
    assert_eq!(names, ["pdf_reader", "sql_query", "sql_replica"]);
    assert_eq!(planner[0].retry_after, 25 * SEC);
    // What the planner offers is what the router can serve.
    assert_eq!(router.resolve_tool("web_search", &r), "backup_search");
    assert_eq!(router.resolve_tool("sql_query", &r), "sql_query");
}
