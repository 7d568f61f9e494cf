//! The status router under load (feature `status`; BENCHMARKS.md, "Status page"):
//!
//! * `status_10k/*`: producing `GET /tools` with 10,000 tracked tools (every tool with a full
//!   minute of history, a tenth of them open): the whole list (`limit=10000`, the goal: ≤ 50 ms)
//!   and the page's first page (`limit=100`), against the registry's own `health_summary()`
//!   of the same tools (the floor: the JSON is built from it).
//! * `status_events/*`: 1,000 transitions (334 trip → probe → close cycles) recorded on this
//!   thread and read back from the `/events` stream as SSE bytes, in process — the stream's
//!   throughput — and the same recording with no status router (`record_plain`) and with one
//!   whose only client never reads (`record_slow_client`): what a transition costs the
//!   recording thread when the stream is attached, and that a stalled client costs no more.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use criterion::{criterion_group, criterion_main, Criterion};
use http_body_util::BodyExt as _;
use tool_health::status::{self, ToolsQuery};
use tool_health::{CircuitBreakerConfig, ManualClock, ToolHealthRegistry};
use tower::ServiceExt as _;

mod common;

const TOOLS: usize = 10_000;
const TRANSITIONS: usize = 1_000;

fn registry_10k() -> (Arc<ToolHealthRegistry>, status::Status) {
    let clock = ManualClock::new();
    let registry = Arc::new(ToolHealthRegistry::builder().clock(clock.clone()).build());
    let built = status::builder(Arc::clone(&registry)).build().unwrap();
    for i in 0..TOOLS {
        let tool = common::tool_name(i);
        registry.record_success(&tool, Duration::from_millis(20));
        if i % 10 == 0 {
            for _ in 0..3 {
                registry.record_failure(&tool, Duration::from_millis(5));
            }
        }
    }
    for _ in 0..60 {
        clock.advance(Duration::from_secs(1));
        built.sample();
    }
    (registry, built)
}

fn bench_tools_json(c: &mut Criterion) {
    let (registry, built) = registry_10k();
    let all = ToolsQuery::parse("limit=10000").unwrap();
    let first_page = ToolsQuery::default();
    let json = built.tools_json(&all);
    assert!(json.len() > 1_000_000, "{} bytes", json.len());
    println!("status_10k: the whole document is {} bytes", json.len());
    let mut g = c.benchmark_group("status_10k");
    g.bench_function("health_summary", |b| {
        b.iter(|| black_box(registry.health_summary()))
    });
    g.bench_function("tools_json_all", |b| {
        b.iter(|| black_box(built.tools_json(&all)))
    });
    g.bench_function("tools_json_first_page", |b| {
        b.iter(|| black_box(built.tools_json(&first_page)))
    });
    g.finish();
}

/// A registry whose breaker trips on one failure and may probe a millisecond later, on a
/// manual clock (each cycle advances it).
fn cycling_registry() -> (Arc<ToolHealthRegistry>, ManualClock) {
    let clock = ManualClock::new();
    let registry = ToolHealthRegistry::builder()
        .clock(clock.clone())
        .config(CircuitBreakerConfig {
            failure_threshold: 1,
            recovery_duration: Duration::from_millis(1),
            probe_timeout: Duration::from_secs(60),
        })
        .build();
    (Arc::new(registry), clock)
}

/// Three transitions: closed → open (the failure), open → half-open (the probe), half-open →
/// closed (its success).
fn cycle(registry: &ToolHealthRegistry, clock: &ManualClock) {
    registry.record_failure("search", Duration::ZERO);
    clock.advance(Duration::from_millis(1));
    assert!(registry.allow_request("search"));
    registry.record_success("search", Duration::ZERO);
}

fn bench_events(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let cycles = TRANSITIONS.div_ceil(3);
    let mut g = c.benchmark_group("status_events");

    g.bench_function("record_plain", |b| {
        let (registry, clock) = cycling_registry();
        b.iter(|| {
            for _ in 0..cycles {
                cycle(&registry, &clock);
            }
        })
    });

    g.bench_function("record_slow_client", |b| {
        let (registry, clock) = cycling_registry();
        let app = {
            let _in = runtime.enter();
            status::router(Arc::clone(&registry))
        };
        // A client connected that never reads: the channel fills and it is lagged.
        let _stalled = runtime.block_on(async {
            app.clone()
                .oneshot(Request::get("/events?limit=0").body(Body::empty()).unwrap())
                .await
                .unwrap()
        });
        b.iter(|| {
            for _ in 0..cycles {
                cycle(&registry, &clock);
            }
        })
    });

    g.bench_function("stream_1000_transitions", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let (registry, clock) = cycling_registry();
                let app = {
                    let _in = runtime.enter();
                    status::router(Arc::clone(&registry))
                };
                total += runtime.block_on(async {
                    // (`app` stays alive: the stream ends when the router is dropped.)
                    let res = app
                        .clone()
                        .oneshot(Request::get("/events?limit=0").body(Body::empty()).unwrap())
                        .await
                        .unwrap();
                    let mut body = res.into_body();
                    // The first snapshot, before the clock starts.
                    let mut seen = String::new();
                    while !seen.contains("\n\n") {
                        let frame = body.frame().await.unwrap().unwrap();
                        seen.push_str(std::str::from_utf8(&frame.into_data().unwrap()).unwrap());
                    }
                    let start = Instant::now();
                    let registry = Arc::clone(&registry);
                    let recorder = std::thread::spawn(move || {
                        for _ in 0..cycles {
                            cycle(&registry, &clock);
                        }
                    });
                    let mut transitions = 0;
                    while transitions < cycles * 3 {
                        let frame = body.frame().await.unwrap().unwrap();
                        if let Ok(data) = frame.into_data() {
                            let text = std::str::from_utf8(&data).unwrap();
                            transitions += text.matches("event: transition").count();
                            assert!(!text.contains("event: lagged"), "a reading client lagged");
                        }
                    }
                    let took = start.elapsed();
                    recorder.join().unwrap();
                    took
                });
            }
            total
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = bench_tools_json, bench_events
}
criterion_main!(benches);
