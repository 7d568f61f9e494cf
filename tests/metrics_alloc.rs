//! With metrics published, a call on a known tool still allocates nothing (the duration
//! histogram borrows a cached tool-name attribute); only a failure's `error.type` allocates.
//!
//! Its own test binary: the counting allocator is global.

use std::alloc::System;
use std::sync::Arc;
use std::time::Duration;

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use tool_health::{publish_metrics, CallOutcome, CallReport, ToolHealthRegistry};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn allocations_during(f: impl FnOnce()) -> usize {
    let region = Region::new(GLOBAL);
    f();
    region.change().allocations
}

#[test]
fn a_success_on_a_known_tool_allocates_nothing_with_metrics_published() {
    let registry = Arc::new(ToolHealthRegistry::new());
    let exporter = InMemoryMetricExporter::default();
    let reader = PeriodicReader::builder(exporter)
        .with_interval(Duration::from_secs(3600))
        .build();
    let provider = SdkMeterProvider::builder().with_reader(reader).build();
    publish_metrics(&registry, &provider.meter("alloc"));

    // Warm up: the entry, the cached name and the SDK's series exist after the first call.
    registry.record_success("search", Duration::from_millis(3));
    registry.record_report(
        "search",
        &CallReport::new(CallOutcome::Failure, Duration::from_millis(3)),
    );
    registry.record_success("search", Duration::from_millis(3));
    provider.force_flush().unwrap();

    let n = allocations_during(|| {
        for i in 0..1_000u64 {
            assert!(registry.allow_request("search"));
            registry.record_success("search", Duration::from_micros(i));
        }
    });
    assert_eq!(n, 0, "allocations on the success path");

    // A failure without an error.type uses the static `_OTHER`: no allocation either.
    let n = allocations_during(|| {
        registry.record_report(
            "search",
            &CallReport::new(CallOutcome::Failure, Duration::from_millis(3)),
        );
    });
    assert_eq!(n, 0, "allocations on a failure without error.type");
}
