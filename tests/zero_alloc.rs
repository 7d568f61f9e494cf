//! The hot path allocates nothing: after the first record of a tool, the gate, the records and
//! the allocation-free reads on it never touch the allocator, by name or through a handle, and
//! neither does a refusal by an open breaker.
//!
//! A counting global allocator (`stats_alloc`) counts every allocation of the process, so the
//! whole file is one test: libtest's other threads would otherwise allocate while we measure.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use tool_health::{
    BreakerState, CallOutcome, CallReport, CircuitBreakerConfig, GateDecision, HealthStatus,
    ManualClock, ToolHealthRegistry,
};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

const ROUNDS: usize = 1_000;

/// Runs `f` once to warm up (thread-locals, first sights), then `ROUNDS` times counting
/// allocations, and asserts there were none.
///
/// The counter is process-wide, so an allocation by another thread (the test harness) can land
/// in a measurement: an attempt that saw any is retried, up to three in all. An allocation on
/// the measured path happens in every round of every attempt, so it always fails the test.
fn assert_no_alloc(what: &str, mut f: impl FnMut()) {
    f();
    let mut seen = Vec::new();
    for _ in 0..3 {
        let region = Region::new(GLOBAL);
        for _ in 0..ROUNDS {
            f();
        }
        let change = region.change();
        if change.allocations == 0 && change.reallocations == 0 {
            return;
        }
        seen.push(change);
    }
    panic!("{what} allocated in every attempt: {seen:?}");
}

#[test]
fn the_hot_path_allocates_nothing() {
    // Closed breaker, system clock: the production configuration.
    let registry = Arc::new(ToolHealthRegistry::new());
    registry.record_success("search", Duration::from_millis(3)); // first sight: allocates
    let ms = Duration::from_millis(7);

    assert_no_alloc("allow_request + record_success by name", || {
        assert!(registry.allow_request("search"));
        black_box(registry.record_success("search", ms));
    });
    assert_no_alloc("record_failure by name", || {
        // One failure, then a success: stays closed with the default threshold of 3.
        black_box(registry.record_failure("search", ms));
        black_box(registry.record_success("search", ms));
    });
    assert_no_alloc("check + record_with_permit by name", || {
        let permit = registry.check("search").permit().expect("closed");
        black_box(registry.record_with_permit("search", permit, CallOutcome::Success, ms));
    });
    assert_no_alloc("reads by name", || {
        assert!(registry.is_tool_available("search"));
        assert_eq!(registry.breaker_state("search"), BreakerState::Closed);
        black_box(registry.get_health_status("search"));
    });
    assert_no_alloc("reads of an unknown tool", || {
        assert!(registry.is_tool_available("never-seen"));
        assert!(registry.allow_request("never-seen"));
        assert_eq!(
            registry.get_health_status("never-seen"),
            HealthStatus::Healthy
        );
    });

    let handle = registry.handle("search").expect("tracked");
    assert_no_alloc("the handle path", || {
        assert!(handle.allow_request());
        black_box(handle.record_success(ms));
        black_box(handle.record_failure(ms));
        let permit = handle.check().permit().expect("closed");
        black_box(handle.record_with_permit(permit, CallOutcome::Success, ms));
        assert!(handle.is_tool_available());
        black_box(handle.get_health_status());
        assert_eq!(handle.breaker_state(), BreakerState::Closed);
    });

    // Open breaker: refusals allocate nothing either.
    let clock = ManualClock::new();
    let open = Arc::new(
        ToolHealthRegistry::builder()
            .config(CircuitBreakerConfig {
                failure_threshold: 1,
                ..Default::default()
            })
            .clock(clock.clone())
            .build(),
    );
    open.record_failure("db", ms);
    let db = open.handle("db").expect("tracked");
    assert_no_alloc("refusal on an open breaker", || {
        assert!(!open.allow_request("db"));
        assert!(matches!(open.check("db"), GateDecision::Refused { .. }));
        assert!(!db.allow_request());
        assert!(!open.is_tool_available("db"));
        assert_eq!(open.breaker_state("db"), BreakerState::Open);
        assert_eq!(open.get_health_status("db"), HealthStatus::Unhealthy);
    });
    assert_no_alloc("failures while open", || {
        black_box(open.record_failure("db", ms));
    });

    // The Python binding's call helper (python/src/registry.rs, `_begin` / `_finish`): the
    // gate that says why it refuses, the clock, a record through the permit with an
    // `error.type`. The Python objects it makes (the permit) are Python's allocations.
    assert_no_alloc("the Python helper's gate and record", || {
        let start = registry.now();
        let permit = match registry.try_check("search") {
            Ok(GateDecision::Allowed(p) | GateDecision::Probe(p)) => p,
            other => panic!("{other:?}"),
        };
        let took = registry.now().saturating_sub(start);
        let report = CallReport::new(CallOutcome::Failure, took)
            .permit(permit)
            .error_type("ConnectionError");
        black_box(registry.record_report("search", &report));
        black_box(registry.record_success("search", took));
    });
}
