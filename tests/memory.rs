//! Memory per tracked tool: at most 512 bytes with a 16-byte name.
//!
//! A counting global allocator (`stats_alloc`) measures the net bytes (allocated − freed) that
//! tracking `N` new tools costs, after a warm-up that pays the one-time costs (the map's first
//! table, the thread's epoch reservation). The map grows by doubling, so the cost per tool
//! depends on where `N` falls relative to the table's capacity: round sizes are checked, and the
//! worst ones — one tool past a doubling of the index, so that it is at its emptiest and its
//! retired levels weigh most. The
//! whole file is one test so that no other test thread allocates while we measure.

use std::sync::Arc;
use std::time::Duration;

use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use tool_health::ToolHealthRegistry;

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

const BUDGET: f64 = 512.0;
const WARM_UP: usize = 64;

fn name(i: usize) -> String {
    let n = format!("tool-{i:011}");
    assert_eq!(n.len(), 16);
    n
}

/// Net bytes per tool for tracking `n` tools after the warm-up.
fn bytes_per_tool(n: usize, by_handle: bool) -> f64 {
    let names: Vec<String> = (0..WARM_UP + n).map(name).collect();
    let registry = Arc::new(ToolHealthRegistry::builder().max_tools(WARM_UP + n).build());
    for name in &names[..WARM_UP] {
        registry.record_success(name, Duration::from_millis(1));
    }
    let region = Region::new(GLOBAL);
    for name in &names[WARM_UP..] {
        if by_handle {
            drop(registry.handle(name));
        } else {
            registry.record_success(name, Duration::from_millis(1));
        }
    }
    let change = region.change();
    assert_eq!(registry.tracked_tools(), WARM_UP + n);
    let net = change.bytes_allocated as f64 - change.bytes_deallocated as f64
        + change.bytes_reallocated as f64;
    net / n as f64
}

#[test]
fn a_tracked_tool_costs_at_most_512_bytes() {
    let mut worst: f64 = 0.0;
    // The index doubles when it becomes more than half full: at 1,025 tracked tools (and 4,097,
    // 16,385, 65,537) it has just doubled.
    let just_grown = [1_025, 4_097, 16_385, 65_537].map(|total| total - WARM_UP);
    for n in [1_000, 3_000, 10_000, 30_000, 100_000]
        .into_iter()
        .chain(just_grown)
    {
        let by_name = bytes_per_tool(n, false);
        let by_handle = bytes_per_tool(n, true);
        println!("{n:>7} tools: {by_name:6.1} B/tool by name, {by_handle:6.1} B/tool by handle");
        worst = worst.max(by_name).max(by_handle);
    }
    println!("worst: {worst:.1} B/tool (budget {BUDGET})");
    assert!(worst <= BUDGET, "{worst:.1} bytes per tool > {BUDGET}");
}
