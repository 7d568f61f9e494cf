//! With fleet mode on — connected to a real Valkey, other replicas' decisions applied — the
//! calling thread's gate and record paths still allocate nothing after the first sight of a
//! tool: the fleet's work happens on its own task.
//!
//! The counter (`stats_alloc`) is process-wide, and the fleet's task and the client's connection
//! tasks run on the runtime's worker threads while we measure (idle here: the poll interval is
//! an hour, and nothing happens in the fleet during a measurement). An attempt that saw an
//! allocation is retried, up to five in all; an allocation on the measured path happens in every
//! attempt, so it always fails the test.

#[path = "../harness/mod.rs"]
mod harness;

#[path = "../fleet/support.rs"]
mod support;

use std::hint::black_box;
use std::time::Duration;

use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use tool_health::{BreakerState, CallOutcome, GateDecision};

use support::*;

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

/// Runs `f` once (first sights), then 1,000 times per attempt, and asserts an attempt saw no
/// allocation.
fn assert_no_alloc(what: &str, mut f: impl FnMut()) {
    f();
    let mut seen = Vec::new();
    for _ in 0..5 {
        let region = Region::new(GLOBAL);
        for _ in 0..1_000 {
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

pub(crate) async fn gate_and_record_allocate_nothing_with_the_fleet_connected() {
    let Some(store) = store() else { return };
    let prefix = prefix("alloc");
    let all = replicas(&store.url(), &prefix, 2, config(3, 10 * SEC, 10 * SEC)).await;
    let (me, other) = (&all[0], &all[1]);
    let ms = Duration::from_millis(3);

    assert_no_alloc("allow_request + record_success", || {
        assert!(me.registry.allow_request("search"));
        black_box(me.registry.record_success("search", ms));
    });
    assert_no_alloc(
        "check + record_with_permit (a failure, then a success)",
        || {
            let permit = me.registry.check("search").permit().expect("closed");
            black_box(
                me.registry
                    .record_with_permit("search", permit, CallOutcome::Failure, ms),
            );
            let permit = me.registry.check("search").permit().expect("closed");
            black_box(
                me.registry
                    .record_with_permit("search", permit, CallOutcome::Success, ms),
            );
        },
    );
    let handle = me.registry.handle("search").expect("tracked");
    assert_no_alloc("through a handle", || {
        let permit = handle.check().permit().expect("closed");
        black_box(handle.record_with_permit(permit, CallOutcome::Success, ms));
    });

    // Another replica trips `db`: the refusal here is the fleet's decision.
    assert!(me.registry.allow_request("db"));
    me.registry.record_success("db", ms);
    assert_eq!(other.fail("db", 3), 3);
    wait_for("the trip to arrive", 5 * SEC, || {
        me.registry.breaker_state("db") == BreakerState::Open
    })
    .await;
    assert_no_alloc("a refusal the fleet decided", || {
        assert!(matches!(
            me.registry.check("db"),
            GateDecision::Refused { .. }
        ));
        assert!(!me.registry.allow_request("db"));
    });
    assert!(me.fleet.status().connected, "{:?}", me.fleet.status());
}

fn main() -> std::process::ExitCode {
    harness::run(trials![
        multi gate_and_record_allocate_nothing_with_the_fleet_connected,
    ])
}
