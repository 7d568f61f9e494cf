//! With fleet mode on — connected to a real Valkey, other replicas' decisions applied, the
//! fleet-wide failure streak reported — the calling thread's gate and record paths still
//! allocate nothing after the first sight of a tool: the fleet's work happens on its own task.
//!
//! The counter counts the allocations of the measuring thread only (a thread-local count in a
//! wrapper of the system allocator): the fleet's task and the client's connection tasks run on
//! the runtime's worker threads meanwhile — and do work, since a failure is reported to the
//! fleet's streak as it happens — and none of that is the calling thread's.

// The counting allocator needs `unsafe impl GlobalAlloc`; the library itself forbids unsafe.
#![allow(unsafe_code)]

#[path = "../harness/mod.rs"]
mod harness;

#[path = "../fleet/support.rs"]
mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::hint::black_box;
use std::time::Duration;

use tool_health::{BreakerState, CallOutcome, GateDecision};

use support::*;

thread_local! {
    /// Allocations (and reallocations) made by this thread so far.
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

/// The system allocator, counting each thread's allocations in [`ALLOCATIONS`] (a `const`
/// thread-local without a destructor: reading it never allocates).
struct ThreadCounting;

unsafe impl GlobalAlloc for ThreadCounting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: ThreadCounting = ThreadCounting;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// Runs `f` once (first sights), then 1,000 times, and asserts this thread allocated nothing.
fn assert_no_alloc(what: &str, mut f: impl FnMut()) {
    f();
    let before = allocations();
    for _ in 0..1_000 {
        f();
    }
    let n = allocations() - before;
    assert_eq!(
        n, 0,
        "{what}: {n} allocations on the calling thread in 1,000 calls"
    );
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
