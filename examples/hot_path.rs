//! A fixed workload for instruction-level profiling of the hot paths (not a benchmark):
//!
//! ```text
//! cargo build --profile bench --example hot_path
//! valgrind --tool=callgrind --callgrind-out-file=cg.out target/release/examples/hot_path by_name 1000000
//! callgrind_annotate cg.out | head -40
//! ```
//!
//! Scenarios: `by_name`, `by_name_permit`, `handle`, `handle_permit`, `refused`, `handle_refused`, `floor`, `none` (setup only). Divide the
//! instruction count's difference with `none` by the iteration count.
//!
//! The tracing layer's scenarios run one span per iteration (new, enter, exit, close) under a
//! `Registry` with `ToolHealthLayer` (`ours_*`) or with the no-op `Identity` layer (`noop_*`):
//! `*_tool_span` (a GenAI tool span), `*_other_span` (any other span), `*_other_in_tool` (the
//! other span while a tool span is entered). Compare `ours_*` with `noop_*`.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tool_health::{CallOutcome, CircuitBreakerConfig, ToolHealthLayer, ToolHealthRegistry};
use tracing_subscriber::layer::{Identity, SubscriberExt};

fn main() {
    let mut args = std::env::args().skip(1);
    let scenario = args.next().unwrap_or_else(|| "by_name".into());
    let n: u64 = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let d = Duration::from_micros(1_500);

    let closed = Arc::new(ToolHealthRegistry::new());
    closed.record_success("search", d);
    let open = Arc::new(ToolHealthRegistry::with_config(CircuitBreakerConfig {
        failure_threshold: 1,
        ..Default::default()
    }));
    open.record_failure("search", d);
    let closed_handle = closed.handle("search").expect("tracked");
    let open_handle = open.handle("search").expect("tracked");
    let tool = black_box("search");
    let atomics: Arc<[AtomicU64; 6]> = Arc::new(Default::default());

    if let Some(kind) = scenario
        .strip_prefix("ours_")
        .or_else(|| scenario.strip_prefix("noop_"))
    {
        let dispatch = if scenario.starts_with("ours_") {
            tracing::Dispatch::new(
                tracing_subscriber::registry().with(ToolHealthLayer::new(closed.clone())),
            )
        } else {
            tracing::Dispatch::new(tracing_subscriber::registry().with(Identity::new()))
        };
        tracing::dispatcher::with_default(&dispatch, || spans(kind, n));
        println!("{scenario}: {n} spans");
        return;
    }

    let mut allowed = 0u64;
    for _ in 0..n {
        match scenario.as_str() {
            "by_name" => {
                allowed += u64::from(closed.allow_request(tool));
                black_box(closed.record_success(tool, black_box(d)));
            }
            "by_name_permit" => {
                if let Some(p) = closed.check(tool).permit() {
                    allowed += 1;
                    black_box(closed.record_with_permit(
                        tool,
                        p,
                        CallOutcome::Success,
                        black_box(d),
                    ));
                }
            }
            "handle_permit" => {
                if let Some(p) = closed_handle.check().permit() {
                    allowed += 1;
                    black_box(closed_handle.record_with_permit(
                        p,
                        CallOutcome::Success,
                        black_box(d),
                    ));
                }
            }
            "handle" => {
                allowed += u64::from(closed_handle.allow_request());
                black_box(closed_handle.record_success(black_box(d)));
            }
            "refused" => allowed += u64::from(open.allow_request(tool)),
            "handle_refused" => allowed += u64::from(open_handle.allow_request()),
            "floor" => allowed += u64::from(floor(&atomics, black_box(1_500_000))),
            "floor_cas" => allowed += u64::from(floor_cas(&atomics, black_box(1_500_000))),
            _ => allowed += u64::from(black_box(true)),
        }
    }
    println!("{scenario}: {allowed} of {n} allowed");
}

/// One span per iteration, as `benches/layer.rs` runs them.
fn spans(kind: &str, n: u64) {
    let tool = || {
        tracing::info_span!(
            "execute_tool search",
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = "search",
        )
    };
    let other = || tracing::info_span!("db.query", db.system = "postgresql");
    let around = (kind == "other_in_tool").then(tool);
    let _in_tool = around.as_ref().map(|s| s.enter());
    for _ in 0..n {
        let span = if kind == "tool_span" { tool() } else { other() };
        let entered = span.enter();
        black_box(&entered);
        drop(entered);
        drop(span);
    }
}

/// The floor of benches/gate.rs: only the atomic operations of gate + record.
#[inline(never)]
fn floor(a: &[AtomicU64; 6], ns: u64) -> bool {
    let [word, consecutive, success, total, max, ewma] = a;
    let allowed = word.load(Ordering::Acquire) & 3 == 0;
    if word.load(Ordering::Acquire) & 3 == 0 && consecutive.load(Ordering::Relaxed) != 0 {
        consecutive.store(0, Ordering::Relaxed);
    }
    success.fetch_add(1, Ordering::Relaxed);
    total.fetch_add(ns, Ordering::Relaxed);
    if ns > max.load(Ordering::Relaxed) {
        max.fetch_max(ns, Ordering::Relaxed);
    }
    if ewma.load(Ordering::Relaxed) != 1_000_000 {
        ewma.store(1_000_000, Ordering::Relaxed);
    }
    allowed
}

#[inline(never)]
fn floor_cas(a: &[AtomicU64; 6], ns: u64) -> bool {
    let [word, consecutive, success, total, max, ewma] = a;
    let allowed = word.load(Ordering::Acquire) & 3 == 0;
    if word.load(Ordering::Acquire) & 3 == 0 && consecutive.load(Ordering::Relaxed) != 0 {
        consecutive.store(0, Ordering::Relaxed);
    }
    success.fetch_add(1, Ordering::Relaxed);
    let _ = total.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
        Some(t.saturating_add(ns))
    });
    if ns > max.load(Ordering::Relaxed) {
        max.fetch_max(ns, Ordering::Relaxed);
    }
    if ewma.load(Ordering::Relaxed) != 1_000_000 {
        ewma.store(1_000_000, Ordering::Relaxed);
    }
    allowed
}
