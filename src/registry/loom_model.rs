//! Exhaustive interleavings of the eviction handshake with a handle kept across it, under loom:
//! `RUSTFLAGS="--cfg tool_health_loom" cargo test --profile loom -p tool-health --lib loom_model`.
//!
//! The registry itself (papaya, arc-swap, its insert mutex) is not built on loom, so these
//! models drive the entry-level steps the registry is made of — the gate's fast path
//! ([`Entry::admit_fast`]), the evictor's claim ([`Entry::retire`]: the `seen` CAS and the
//! retired bit in the control word), the record's touch ([`Entry::touch_epoch`]) — with a loom
//! mutex standing for the insert lock and the map, and a loom atomic for the registry's
//! generation floor. The handle's path mirrors `check_slow` / `check_retired` and
//! `record_with_extras`.
//!
//! What they pin (issue 13, item 4): a handle kept across eviction follows its tool — once the
//! successor is visible to a thread, that thread's handle never admits through the evicted
//! entry — and generations never alias: every permit a handle hands out is the continuation of
//! the evicted entry's last (closed) episode or the successor's own, so a result recorded with
//! it is never taken for another episode.
//!
//! Not modelled: the record-versus-sweep Dekker handshake (a failure, or a control being set,
//! while the sweep decides). It relies on the single total order of `SeqCst` operations, which
//! loom does not model (it treats `SeqCst` loads and stores as acquire/release, so it reports
//! the store-buffering outcome `SeqCst` forbids); `tests/eviction.rs` stresses it with real
//! threads.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use loom::sync::atomic::{AtomicU32, AtomicU64};
use loom::sync::Mutex;
use loom::thread;

use crate::breaker::BreakerState;
use crate::call::{GateDecision, Permit};
use crate::policy::{CircuitBreakerConfig, ToolPolicy};
use crate::ticks::{Now, Ticks};

use super::entry::Entry;

/// The registry around one tool, in loom types: the map slot (under the insert lock), the sweep
/// epoch and the generation floor.
struct Registry {
    map: Mutex<Option<Arc<Entry>>>,
    epoch: AtomicU64,
    floor: AtomicU32,
}

fn policy() -> Arc<ToolPolicy> {
    Arc::new(ToolPolicy::from(CircuitBreakerConfig {
        failure_threshold: 1,
        recovery_duration: Duration::from_millis(10),
        probe_timeout: Duration::from_millis(100),
    }))
}

fn at(ms: u64) -> Now {
    Now::exact(Ticks::new(ms))
}

impl Registry {
    /// One tool, tracked, closed in generation `generation` (an entry past its first episode).
    fn with_tool(generation: u32) -> (Self, Arc<Entry>) {
        let e = Arc::new(Entry::new("t", policy(), 1, generation, 1, 0));
        let r = Self {
            map: Mutex::new(Some(Arc::clone(&e))),
            epoch: AtomicU64::new(1),
            floor: AtomicU32::new(0),
        };
        (r, e)
    }

    /// A sweep with an idle time of zero, then the tool's next sight (a record by name)
    /// creating its successor: both under the insert lock, as in `evict_locked` and
    /// `insert_slow`.
    fn evict_and_recreate(&self) -> Arc<Entry> {
        let mut map = self.map.lock().unwrap();
        let threshold = self.epoch.fetch_add(1, Ordering::SeqCst) + 1;
        if let Some(e) = map.as_ref() {
            let seen = e.seen.load(Ordering::SeqCst);
            if seen < threshold && e.fresh_equivalent(Ticks::new(5)) && e.retire(seen) {
                self.floor
                    .fetch_max(e.breaker.generation(), Ordering::Relaxed);
                *map = None;
            }
        }
        let floor = self.floor.load(Ordering::Relaxed);
        let epoch = self.epoch.load(Ordering::Relaxed);
        Arc::clone(
            map.get_or_insert_with(|| Arc::new(Entry::new("t", policy(), epoch, floor, 1, 1))),
        )
    }

    /// The live entry, as a by-name lookup finds it.
    fn live(&self) -> Option<Arc<Entry>> {
        self.map.lock().unwrap().clone()
    }

    /// The gate through a handle on `e`: the fast path, else (retired) the live entry decides,
    /// else the tool is untracked. Mirrors `check_on_entry` / `check_retired`.
    fn handle_gate(&self, e: &Entry, now: Now) -> GateDecision {
        if let Some(d) = e.admit_fast() {
            return d;
        }
        if e.is_retired() {
            return match self.live() {
                Some(live) if !live.is_retired() => self.handle_gate(&live, now),
                _ => GateDecision::Allowed(Permit::admitted(self.floor.load(Ordering::Relaxed))),
            };
        }
        e.breaker.acquire(|| now).0
    }
}

#[test]
fn a_handle_racing_eviction_hands_out_only_the_continuation_or_the_successors_permits() {
    loom::model(|| {
        const G0: u32 = 3;
        let (r, e1) = Registry::with_tool(G0);
        let r = Arc::new(r);
        let handle = Arc::clone(&e1);

        // The sweeper evicts the idle tool; its next sight creates the successor, whose first
        // failure trips it (threshold 1): a new episode, G0 + 1.
        let sweeper = {
            let r = Arc::clone(&r);
            thread::spawn(move || {
                let e2 = r.evict_and_recreate();
                e2.breaker.on_failure(None, at(5), Ticks::ZERO);
                e2
            })
        };
        // A caller gates through the handle taken before the eviction, twice: once blind, once
        // after looking the tool up (which synchronises with the sweeper if it sees the
        // successor).
        let caller = {
            let r = Arc::clone(&r);
            thread::spawn(move || {
                let blind = r.handle_gate(&handle, at(6));
                let seen = r.live().filter(|live| !Arc::ptr_eq(live, &handle));
                let seen_open = seen
                    .as_ref()
                    .is_some_and(|live| live.breaker.load().state != 0);
                let after = r.handle_gate(&handle, at(6));
                (blind, seen_open, after)
            })
        };
        let e2 = sweeper.join().unwrap();
        let (blind, seen_open, after) = caller.join().unwrap();

        assert!(e1.is_retired(), "the idle tool was evicted");
        assert!(!Arc::ptr_eq(&e1, &e2));
        assert_eq!(
            e2.breaker.generation(),
            G0 + 1,
            "the successor continued the evicted entry's generations, then tripped"
        );
        for d in [blind, after] {
            match d {
                // Admitted: the evicted entry's last episode, continued by the successor's
                // first — never an episode of either that the permit did not come from.
                GateDecision::Allowed(p) => assert_eq!(p.generation(), G0, "{d:?}"),
                GateDecision::Refused { .. } => {}
                GateDecision::Probe(_) => panic!("no probe is due: {d:?}"),
            }
        }
        if seen_open {
            // The successor's trip is visible to this thread: the handle follows it.
            assert!(
                !after.is_allowed(),
                "admitted through the evicted entry: {after:?}"
            );
        }
        // A result recorded with any permit handed out lands on the live entry and is stale
        // for its tripped episode: the successor stays open.
        for p in [blind, after].iter().filter_map(GateDecision::permit) {
            e2.breaker.on_success(Some(p.generation()), || at(7));
        }
        assert_eq!(
            e2.breaker.effective(Ticks::new(7)).state(),
            BreakerState::Open
        );
    });
}
