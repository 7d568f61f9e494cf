//! Waiting for a late verdict allocates nothing per call: an adk-shaped call whose outcome
//! waits for its framework's next move in the parent span (and is then failed, or settled as a
//! success) allocates exactly what the same call with no parent to wait in allocates (its span
//! state and name). The table's slots are allocated with the layer; verdict events are read
//! into stack buffers.
//!
//! A counting global allocator (`stats_alloc`) counts the process's allocations: one test per
//! file.

use std::sync::Arc;

use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use tool_health::{ToolHealthLayer, ToolHealthRegistry};
use tracing_subscriber::layer::SubscriberExt;

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

const ROUNDS: usize = 200;

fn adk_call(fail: bool) {
    let span = tracing::info_span!(
        target: "adk_agent::llm_agent",
        "",
        otel.name = "execute_tool lookup",
        tool.name = "lookup",
    );
    span.in_scope(|| {});
    if fail {
        tracing::warn!(target: "adk_agent::llm_agent", { tool.name = "lookup", error = "503" }, "tool_error");
    }
    drop(span);
}

/// Allocations per round of `f` (the fewest of three attempts: other threads may allocate).
fn per_round(mut f: impl FnMut()) -> u64 {
    f();
    (0..3)
        .map(|_| {
            let region = Region::new(GLOBAL);
            for _ in 0..ROUNDS {
                f();
            }
            let c = region.change();
            (c.allocations + c.reallocations) as u64
        })
        .min()
        .unwrap_or(u64::MAX)
}

#[test]
fn a_late_verdict_allocates_nothing_per_call() {
    let registry = Arc::new(ToolHealthRegistry::new());
    let subscriber = tracing_subscriber::registry().with(ToolHealthLayer::new(registry.clone()));
    tracing::subscriber::with_default(subscriber, || {
        // No parent: recorded at close, nothing waits.
        let plain = per_round(|| adk_call(false)) * ROUNDS as u64;
        // In the agent's span (made once, outside the count): each call waits for the next
        // move, failed ones for the verdict event.
        let agent = tracing::info_span!(target: "adk_agent", "agent.execute");
        let _in = agent.enter();
        let waiting = per_round(|| {
            adk_call(false);
            adk_call(true);
        }) * ROUNDS as u64;
        assert_eq!(
            waiting,
            2 * plain,
            "per call: {} with a parent, {} without",
            waiting as f64 / (2 * ROUNDS) as f64,
            plain as f64 / ROUNDS as f64
        );
    });
    let s = registry.snapshot("lookup").unwrap();
    assert!(s.failure_count >= ROUNDS as u64 && s.success_count >= 2 * ROUNDS as u64);
}
