//! With metrics published, a call on a known tool still allocates nothing (the duration
//! histogram borrows a cached tool-name attribute); only a failure's `error.type` allocates.
//!
//! Its own test binary: the counting allocator is global. The calls are counted on the calling
//! thread only: the SDK's periodic reader runs a thread of its own, which may still be finishing
//! the warm-up's flush (it answers `force_flush` before it is done) while the calls are counted.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use tool_health::{publish_metrics, CallOutcome, CallReport, ToolHealthRegistry};

mod support;

#[global_allocator]
static ALLOC: support::Counting = support::Counting;

/// The heap's growth is the whole process's: the tests of this binary run one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Heap bytes the calling thread asked for while `f` ran (0: no allocation at all).
fn allocated_during(f: impl FnOnce()) -> i64 {
    let before = support::thread_allocated();
    f();
    support::thread_allocated() - before
}

#[test]
fn a_success_on_a_known_tool_allocates_nothing_with_metrics_published() {
    let _serial = serial();
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

    let n = allocated_during(|| {
        for i in 0..1_000u64 {
            assert!(registry.allow_request("search"));
            registry.record_success("search", Duration::from_micros(i));
        }
    });
    assert_eq!(n, 0, "allocations on the success path");

    // A failure without an error.type uses the static `_OTHER`: no allocation either.
    let n = allocated_during(|| {
        registry.record_report(
            "search",
            &CallReport::new(CallOutcome::Failure, Duration::from_millis(3)),
        );
    });
    assert_eq!(n, 0, "allocations on a failure without error.type");
}

#[test]
fn the_tool_name_cache_stays_bounded_by_the_live_tools_under_eviction() {
    let _serial = serial();
    // 30,000 tools come and go, at most 100 tracked at a time; metrics published, never
    // collected (the case where nothing else prunes).
    let clock = tool_health::ManualClock::new();
    let registry = Arc::new(
        ToolHealthRegistry::builder()
            .clock(clock.clone())
            .max_tools(100)
            .evict_idle_after(Duration::from_secs(60))
            .build(),
    );
    let exporter = InMemoryMetricExporter::default();
    let reader = PeriodicReader::builder(exporter)
        .with_interval(Duration::from_secs(3600))
        .build();
    let provider = SdkMeterProvider::builder().with_reader(reader).build();
    publish_metrics(&registry, &provider.meter("churn"));
    let churn = |from: usize, to: usize| {
        for i in from..to {
            registry.record_success(&format!("tool-{i}"), Duration::from_millis(1));
            if i % 50 == 49 {
                clock.advance(Duration::from_secs(60));
                registry.evict_idle(Duration::from_secs(60));
            }
        }
    };
    // Warm up past the SDK's own cardinality limit (2,000 series per instrument), whose
    // series are the SDK's memory, bounded by that limit.
    churn(0, 15_000);
    let live = support::LIVE.load(Ordering::Relaxed);
    churn(15_000, 30_000);
    let grown = support::LIVE.load(Ordering::Relaxed) - live;
    assert!(registry.tracked_tools() <= 100);
    // Was 5.8 MB over 30,000 tools (≈ 190 bytes per name ever seen): ≈ 2.9 MB for this half.
    assert!(
        grown < 64 * 1024,
        "the heap grew by {grown} bytes over 15,000 tools"
    );
}
