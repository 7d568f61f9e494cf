//! Goals 1 and 2: gate + record on one Closed breaker, against `recloser`, `failsafe` and the
//! floor; refusal on an Open breaker.
//!
//! Every routine is one call's worth of breaker work: gate, then record a success (or, for a
//! refusal, the gate alone). Results are ratios inside one run; see BENCHMARKS.md.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use tool_health::{CallOutcome, CircuitBreakerConfig, ToolHealthRegistry};

mod common;

const TOOL: &str = "search";
const DURATION: Duration = Duration::from_micros(1_500);

/// The floor: the atomic operations the record path must do on a Closed breaker, and nothing
/// else — no lookup, no branching on outcomes, no observers, no span binding. Laid out like a
/// tool's entry (one heap allocation behind an `Arc`).
#[derive(Debug, Default)]
struct Floor {
    word: AtomicU64,
    consecutive: AtomicU64,
    success: AtomicU64,
    total_duration_ns: AtomicU64,
    max_duration_ns: AtomicU64,
    ewma: AtomicU64,
}

impl Floor {
    #[inline]
    fn gate_and_record(&self, ns: u64) -> bool {
        // Gate: one load of the breaker word.
        let allowed = self.word.load(Ordering::Acquire) & 3 == 0;
        // Record: the word again (it may have changed), the consecutive-failure counter, the
        // success count, the duration sum, the high-water mark and the EWMA (already at 1.0).
        if self.word.load(Ordering::Acquire) & 3 == 0
            && self.consecutive.load(Ordering::Relaxed) != 0
        {
            self.consecutive.store(0, Ordering::Relaxed);
        }
        self.success.fetch_add(1, Ordering::Relaxed);
        self.total_duration_ns.fetch_add(ns, Ordering::Relaxed);
        if ns > self.max_duration_ns.load(Ordering::Relaxed) {
            self.max_duration_ns.fetch_max(ns, Ordering::Relaxed);
        }
        if self.ewma.load(Ordering::Relaxed) != 1_000_000 {
            self.ewma.store(1_000_000, Ordering::Relaxed);
        }
        allowed
    }
}

fn closed(c: &mut Criterion) {
    let mut g = c.benchmark_group("closed");

    let floor = Arc::new(Floor::default());
    g.bench_function("floor", |b| {
        b.iter(|| black_box(floor.gate_and_record(black_box(1_500_000))))
    });

    let recloser = recloser::Recloser::custom()
        .error_rate(0.5)
        .closed_len(100)
        .open_wait(Duration::from_secs(30))
        .build();
    g.bench_function("recloser", |b| {
        b.iter(|| black_box(recloser.call(|| black_box(Ok::<u32, u32>(1)))))
    });

    let failsafe = failsafe::Config::new()
        .failure_policy(failsafe::failure_policy::consecutive_failures(
            3,
            failsafe::backoff::constant(Duration::from_secs(30)),
        ))
        .build();
    g.bench_function("failsafe", |b| {
        b.iter(|| {
            use failsafe::CircuitBreaker;
            black_box(failsafe.call(|| black_box(Ok::<u32, u32>(1))))
        })
    });

    let registry = Arc::new(ToolHealthRegistry::new());
    registry.record_success(TOOL, DURATION);
    let tool = black_box(TOOL);
    g.bench_function("ours_by_name", |b| {
        b.iter(|| {
            let allowed = registry.allow_request(tool);
            black_box(registry.record_success(tool, black_box(DURATION)));
            allowed
        })
    });
    g.bench_function("ours_by_name_permit", |b| {
        b.iter(|| {
            let permit = registry.check(tool).permit();
            if let Some(p) = permit {
                black_box(registry.record_with_permit(
                    tool,
                    p,
                    CallOutcome::Success,
                    black_box(DURATION),
                ));
            }
            permit
        })
    });

    let handle = registry.handle(TOOL).expect("tracked");
    g.bench_function("ours_handle", |b| {
        b.iter(|| {
            let allowed = handle.allow_request();
            black_box(handle.record_success(black_box(DURATION)));
            allowed
        })
    });
    g.bench_function("ours_handle_permit", |b| {
        b.iter(|| {
            let permit = handle.check().permit();
            if let Some(p) = permit {
                black_box(handle.record_with_permit(p, CallOutcome::Success, black_box(DURATION)));
            }
            permit
        })
    });
    g.finish();
}

fn open(c: &mut Criterion) {
    let mut g = c.benchmark_group("open");
    // The system clock, as in production: an Open breaker reads the clock to know whether the
    // cooldown has elapsed (30 s: it never does during the run).
    let registry = Arc::new(ToolHealthRegistry::with_config(CircuitBreakerConfig {
        failure_threshold: 1,
        ..Default::default()
    }));
    registry.record_failure(TOOL, DURATION);
    assert!(!registry.allow_request(TOOL), "the breaker is open");
    let tool = black_box(TOOL);
    g.bench_function("ours_by_name_refused", |b| {
        b.iter(|| black_box(registry.allow_request(tool)))
    });
    let handle = registry.handle(TOOL).expect("tracked");
    g.bench_function("ours_handle_refused", |b| {
        b.iter(|| black_box(handle.allow_request()))
    });

    // The same refusal with a manual clock (reading it is one atomic load): the refusal path's
    // own cost, without the system clock read that bounds it.
    let manual = Arc::new(
        ToolHealthRegistry::builder()
            .config(CircuitBreakerConfig {
                failure_threshold: 1,
                ..Default::default()
            })
            .clock(tool_health::ManualClock::new())
            .build(),
    );
    manual.record_failure(TOOL, DURATION);
    assert!(!manual.allow_request(TOOL), "the breaker is open");
    g.bench_function("ours_by_name_refused_manual_clock", |b| {
        b.iter(|| black_box(manual.allow_request(tool)))
    });

    let recloser = recloser::Recloser::custom()
        .error_rate(0.5)
        .closed_len(2)
        .open_wait(Duration::from_secs(30))
        .build();
    for _ in 0..4 {
        let _ = recloser.call(|| Err::<u32, u32>(1));
    }
    assert!(matches!(
        recloser.call(|| Ok::<u32, u32>(1)),
        Err(recloser::Error::Rejected)
    ));
    g.bench_function("recloser_refused", |b| {
        b.iter(|| black_box(recloser.call(|| black_box(Ok::<u32, u32>(1)))))
    });

    // Deciding a refusal needs the time: the exact reading costs more than the rest of the
    // path in virtual machines, so the refusal reads the coarse one.
    let clock = tool_health::SystemClock::new();
    g.bench_function("system_clock_now", |b| {
        b.iter(|| black_box(tool_health::Clock::now(&clock)))
    });
    // What the refusal path reads instead (CLOCK_MONOTONIC_COARSE on Linux).
    g.bench_function("system_clock_now_coarse", |b| {
        b.iter(|| black_box(tool_health::Clock::now_coarse(&clock)))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = closed, open
}
criterion_main!(benches);
