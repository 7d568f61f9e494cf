//! Exhaustive interleavings of the word protocol under loom:
//! `RUSTFLAGS="--cfg tool_health_loom" cargo test --profile loom -p tool-health --lib loom_model`.
//!
//! Loom replaces the breaker's `AtomicU64` (see `cell.rs`) and explores every interleaving of
//! 2–3 threads: one probe per episode, a trip counted once, a stale result never closing or
//! re-opening a newer episode, a late success after lease expiry never closing, generations
//! only growing, the oracle agreeing with the gate.

use std::sync::Arc;
use std::time::Duration;

use loom::sync::Arc as LArc;
use loom::thread;

use crate::call::GateDecision;
use crate::policy::{CircuitBreakerConfig, ToolPolicy};
use crate::ticks::{Now, Ticks};

use super::cell::Breaker;
use super::{BreakerState, Recorded};

fn breaker(threshold: u32, lease_ms: u64) -> Breaker {
    Breaker::new(Arc::new(ToolPolicy::from(CircuitBreakerConfig {
        failure_threshold: threshold,
        recovery_duration: Duration::from_millis(10),
        probe_timeout: Duration::from_millis(lease_ms),
    })))
}

fn t(ms: u64) -> Now {
    Now::exact(Ticks::new(ms))
}

fn probe_generation(a: &(GateDecision, Recorded)) -> Option<u32> {
    match a.0 {
        GateDecision::Probe(p) => Some(p.generation()),
        _ => None,
    }
}

#[test]
fn one_probe_per_episode() {
    loom::model(|| {
        let b = LArc::new(breaker(1, 100));
        b.on_failure(None, t(0), Ticks::ZERO); // open, ready at 10
        let hs: Vec<_> = (0..3)
            .map(|_| {
                let b = b.clone();
                thread::spawn(move || probe_generation(&b.acquire(|| t(10))))
            })
            .collect();
        let probes: Vec<_> = hs.into_iter().filter_map(|h| h.join().unwrap()).collect();
        assert_eq!(probes.len(), 1, "exactly one probe: {probes:?}");
        assert_eq!(b.effective(t(10).at).state(), BreakerState::HalfOpen);
        assert_eq!(b.transition_counts(), [1, 1, 0, 0, 0], "no lost transition");
    });
}

#[test]
fn concurrent_failures_trip_exactly_once() {
    loom::model(|| {
        let b = LArc::new(breaker(2, 100));
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let b = b.clone();
                thread::spawn(move || b.on_failure(None, t(5), Ticks::ZERO).transition)
            })
            .collect();
        let trips = hs.into_iter().filter_map(|h| h.join().unwrap()).count();
        assert_eq!(trips, 1, "two failures at threshold 2 trip once");
        assert_eq!(b.effective(t(5).at).state(), BreakerState::Open);
        assert_eq!(b.consecutive_failures(), 2);
    });
}

#[test]
fn probe_result_races_a_stale_result_and_the_gate() {
    loom::model(|| {
        let b = LArc::new(breaker(1, 100));
        let old = b.acquire(|| t(0)); // admitted while closed, generation 0
        let GateDecision::Allowed(old_permit) = old.0 else {
            panic!("closed breaker refused")
        };
        let old_gen = old_permit.generation();
        b.on_failure(None, t(0), Ticks::ZERO);
        let probe = probe_generation(&b.acquire(|| t(10))).expect("probe");
        let t1 = {
            let b = b.clone();
            thread::spawn(move || b.on_success(Some(probe), || t(20)).transition)
        };
        let t2 = {
            let b = b.clone();
            thread::spawn(move || b.on_failure(Some(old_gen), t(20), Ticks::ZERO).transition)
        };
        let t3 = {
            let b = b.clone();
            thread::spawn(move || b.acquire(|| t(20)).0)
        };
        let closed = t1.join().unwrap();
        let stale = t2.join().unwrap();
        let gate = t3.join().unwrap();
        assert!(closed.is_some(), "the probe's own success closes");
        assert!(
            stale.is_none(),
            "a stale failure never re-opens a newer episode"
        );
        assert_eq!(b.effective(t(20).at).state(), BreakerState::Closed);
        // The gate saw either the probe in flight (refused) or the closed breaker.
        assert!(matches!(
            gate,
            GateDecision::Refused { .. } | GateDecision::Allowed(_)
        ));
        assert!(b.load().generation > probe, "generations only grow");
    });
}

#[test]
fn expired_lease_late_success_races_a_new_probe() {
    loom::model(|| {
        let b = LArc::new(breaker(1, 5));
        b.on_failure(None, t(0), Ticks::ZERO);
        let first = probe_generation(&b.acquire(|| t(10))).expect("probe"); // lease ends at 15
                                                                            // At 25 the lease has expired (15) and the cooldown from its end elapsed (25).
        let late = {
            let b = b.clone();
            thread::spawn(move || b.on_success(Some(first), || t(25)).transition)
        };
        let gate = {
            let b = b.clone();
            thread::spawn(move || probe_generation(&b.acquire(|| t(25))))
        };
        let late = late.join().unwrap();
        let second = gate.join().unwrap();
        assert!(
            late.is_none(),
            "a success after its lease expired never closes"
        );
        let second = second.expect("the cooldown from the lease end elapsed: new probe");
        assert!(second > first);
        assert_eq!(b.effective(t(25).at).state(), BreakerState::HalfOpen);
        // The oracle agrees with the gate at the same instant.
        assert!(!b.would_allow(|| t(25)));
    });
}
