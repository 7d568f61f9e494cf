//! Threads racing the lock-free breaker: exactly one probe per episode, nothing lost.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

mod support;

use support::XorShift;
use tool_health::{BreakerState, CircuitBreakerConfig, ManualClock, ToolHealthRegistry};

fn registry(recovery: Duration) -> (Arc<ToolHealthRegistry>, ManualClock) {
    let clock = ManualClock::new();
    let r = ToolHealthRegistry::builder()
        .config(CircuitBreakerConfig {
            failure_threshold: 1,
            recovery_duration: recovery,
            probe_timeout: Duration::from_secs(30),
        })
        .clock(clock.clone())
        .build();
    (Arc::new(r), clock)
}

#[test]
fn racing_gates_get_exactly_one_probe_per_episode() {
    const THREADS: usize = 4;
    const EPISODES: usize = 2_000;
    const TRIES: usize = 8;
    let (r, clock) = registry(Duration::from_secs(1));
    r.record_failure("t", Duration::ZERO); // open
    let start = Arc::new(Barrier::new(THREADS + 1));
    let end = Arc::new(Barrier::new(THREADS + 1));
    let granted = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let (r, start, end, granted) = (r.clone(), start.clone(), end.clone(), granted.clone());
            thread::spawn(move || {
                for _ in 0..EPISODES {
                    start.wait();
                    for _ in 0..TRIES {
                        if r.allow_request("t") {
                            granted.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    end.wait();
                }
            })
        })
        .collect();
    for episode in 0..EPISODES {
        assert_eq!(r.breaker_state("t"), BreakerState::Open);
        clock.advance(Duration::from_secs(1)); // cooldown just elapsed
        granted.store(0, Ordering::Relaxed);
        start.wait();
        end.wait();
        assert_eq!(granted.load(Ordering::Relaxed), 1, "episode {episode}");
        assert_eq!(r.breaker_state("t"), BreakerState::HalfOpen);
        r.record_failure("t", Duration::ZERO); // the probe fails: open again
    }
    for w in workers {
        w.join().unwrap();
    }
    let s = r.snapshot("t").unwrap();
    assert_eq!(s.refused_count as usize, EPISODES * (THREADS * TRIES - 1));
}

#[derive(Default, Debug, Clone, Copy, PartialEq)]
struct Tally {
    success: u64,
    failure: u64,
    refused: u64,
}

#[test]
fn a_million_mixed_operations_lose_nothing() {
    const OPS_PER_THREAD: usize = 500_000;
    const TOOLS: [&str; 3] = ["a", "b", "c"];
    let (r, clock) = registry(Duration::from_millis(2));
    let handles: Vec<_> = (0..2u64)
        .map(|seed| {
            let (r, clock) = (r.clone(), clock.clone());
            thread::spawn(move || {
                let mut rng = XorShift(0x9E37_79B9_7F4A_7C15 ^ (seed + 1));
                let mut tally = [Tally::default(); 3];
                for _ in 0..OPS_PER_THREAD {
                    let x = rng.next();
                    let t = (x % 3) as usize;
                    let d = Duration::from_micros(x >> 54);
                    match (x >> 8) % 8 {
                        0..=2 => {
                            if !r.allow_request(TOOLS[t]) {
                                tally[t].refused += 1;
                            }
                        }
                        3..=5 => {
                            r.record_success(TOOLS[t], d);
                            tally[t].success += 1;
                        }
                        6 => {
                            r.record_failure(TOOLS[t], d);
                            tally[t].failure += 1;
                        }
                        _ => {
                            if seed == 0 {
                                clock.advance(Duration::from_millis(1));
                            }
                            let _ = r.is_tool_available(TOOLS[t]);
                        }
                    }
                }
                tally
            })
        })
        .collect();
    let mut sum = [Tally::default(); 3];
    for h in handles {
        for (s, t) in sum.iter_mut().zip(h.join().unwrap()) {
            s.success += t.success;
            s.failure += t.failure;
            s.refused += t.refused;
        }
    }
    let mut ops = 0;
    for (t, tool) in TOOLS.iter().enumerate() {
        let s = r.snapshot(tool).unwrap();
        assert_eq!(s.success_count, sum[t].success, "{tool}");
        assert_eq!(s.failure_count, sum[t].failure, "{tool}");
        assert_eq!(s.total_calls, s.success_count + s.failure_count);
        assert_eq!(s.refused_count, sum[t].refused, "{tool}");
        ops += s.total_calls;
    }
    assert!(
        ops > 450_000,
        "about half the million operations were records: {ops}"
    );
}
