//! Goal 5: aggregate throughput of gate + record by name with two threads, on one tool and on
//! two tools, against one thread.
//!
//! Each sample runs `iters` calls on every thread (started together at a barrier) and reports
//! the wall time divided by the number of threads: the time per call of the aggregate, so the
//! throughput ratio against one thread is `time(1 thread) / time(2 threads)`.
//!
//! The `reference_*` pair measures what the machine itself allows in the same run: one atomic
//! add per call on one thread, then on two threads each with its own cache line. Two threads
//! can only scale as far as the reference does (on a shared or hyper-threaded pair of cores it
//! is well below 2×).

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use tool_health::ToolHealthRegistry;

mod common;

const DURATION: Duration = Duration::from_micros(1_500);

/// Runs `op(thread)` `iters` times on each of `threads` threads started together; the wall
/// time per call of the aggregate.
fn run(threads: usize, iters: u64, op: impl Fn(usize) + Sync) -> Duration {
    let start = Barrier::new(threads + 1);
    let elapsed = std::thread::scope(|s| {
        for t in 0..threads {
            let (op, start) = (&op, &start);
            s.spawn(move || {
                start.wait();
                for _ in 0..iters {
                    op(t);
                }
            });
        }
        start.wait();
        // Leaving the scope joins every thread: the elapsed time is read after that.
        Instant::now()
    })
    .elapsed();
    elapsed / threads as u32
}

/// One counter per cache line.
#[repr(align(128))]
#[derive(Debug, Default)]
struct Line(AtomicU64);

fn contention(c: &mut Criterion) {
    let mut g = c.benchmark_group("contention");
    g.sample_size(20);

    let lines: [Line; 2] = Default::default();
    let add = |t: usize| {
        lines[t].0.fetch_add(1, Ordering::Relaxed);
    };
    g.bench_function("reference_one_thread", |b| {
        b.iter_custom(|iters| run(1, iters, add))
    });
    g.bench_function("reference_two_threads", |b| {
        b.iter_custom(|iters| run(2, iters, add))
    });

    let registry = Arc::new(ToolHealthRegistry::new());
    for tool in ["search", "fetch"] {
        registry.record_success(tool, DURATION);
    }
    let call = |tool: &str| {
        let allowed = registry.allow_request(black_box(tool));
        black_box(registry.record_success(black_box(tool), black_box(DURATION)));
        black_box(allowed);
    };
    g.bench_function("one_thread", |b| {
        b.iter_custom(|iters| run(1, iters, |_| call("search")))
    });
    g.bench_function("two_threads_same_tool", |b| {
        b.iter_custom(|iters| run(2, iters, |_| call("search")))
    });
    g.bench_function("two_threads_two_tools", |b| {
        b.iter_custom(|iters| run(2, iters, |t| call(["search", "fetch"][t])))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = contention
}
criterion_main!(benches);
