//! The gate's latency while the store fails: a thread calls a steady tool on every replica and
//! times each decision; a call that waited on the store in any way would take at least the
//! command timeout. Shared by the fault tests and the cluster's.

#![allow(dead_code, unreachable_pub)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tool_health::{CallOutcome, GateDecision, ToolHealthRegistry};

use crate::support::*;

/// A tool that always answers: calls to it must never be refused or slowed by the store.
pub const STEADY: &str = "steady";

/// The gate + record of a call while the store is away, observed around 100 µs at most in a
/// debug build: a call that waited on the store in any way would take at least the 200 ms
/// command timeout (a paused store answers nothing; while a killed one is reconnected to,
/// commands wait in fred's queue until their timeout).
pub const GATE_MAX: Duration = Duration::from_millis(5);
/// What a decision may take when its thread is preempted on a loaded machine (2 cores, other
/// builds running): rare (see `PREEMPTED_SHARE`), and still far below the command timeout.
pub const GATE_PREEMPTED_MAX: Duration = Duration::from_millis(50);
/// The share of decisions allowed between `GATE_MAX` and `GATE_PREEMPTED_MAX`.
const PREEMPTED_SHARE: f64 = 0.001;

/// Gate latencies seen, and refusals of the steady tool.
#[derive(Default)]
pub struct Gate {
    pub samples: Vec<Duration>,
    pub refused: u64,
}

impl Gate {
    pub fn add(&mut self, other: Gate) {
        self.samples.extend(other.samples);
        self.refused += other.refused;
    }

    /// Prints the distribution and asserts the bound; `what` names the phase.
    pub fn check(mut self, what: &str) {
        self.samples.sort();
        let max = self.samples.last().copied().unwrap_or_default();
        let slow = self.samples.iter().filter(|d| **d >= GATE_MAX).count();
        println!(
            "{what}: gate + record over {} calls: p50 {:?}, p99 {:?}, max {max:?}, {slow} at \
             {GATE_MAX:?} or more",
            self.samples.len(),
            percentile(&self.samples, 0.5),
            percentile(&self.samples, 0.99),
        );
        assert!(self.samples.len() > 100, "{what}: too few calls measured");
        assert_eq!(
            self.refused, 0,
            "{what}: calls to a healthy tool were refused"
        );
        assert!(
            max < GATE_PREEMPTED_MAX
                && slow as f64 <= PREEMPTED_SHARE * self.samples.len() as f64
                && percentile(&self.samples, 0.99) < GATE_MAX / 5,
            "{what}: {slow} decisions took {GATE_MAX:?} or more, the slowest {max:?}: the gate \
             waited on something"
        );
    }
}

/// A thread calling the steady tool on every replica, timing each gate + record, until
/// [`finish`](Self::finish).
pub struct Callers {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Gate>,
}

impl Callers {
    pub fn start(all: &[&Replica]) -> Self {
        let registries: Vec<Arc<ToolHealthRegistry>> =
            all.iter().map(|r| Arc::clone(&r.registry)).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = std::thread::spawn(move || {
            let mut gate = Gate::default();
            // Until told to stop, and then until enough calls were measured (bounded).
            let started = Instant::now();
            while !flag.load(Ordering::Relaxed)
                || (gate.samples.len() < 400 && started.elapsed() < 30 * SEC)
            {
                for r in &registries {
                    let t = Instant::now();
                    match r.check(STEADY) {
                        GateDecision::Allowed(p) | GateDecision::Probe(p) => {
                            let _ = r.record_with_permit(STEADY, p, CallOutcome::Success, MS);
                        }
                        GateDecision::Refused { .. } => gate.refused += 1,
                    }
                    gate.samples.push(t.elapsed());
                }
                // Pacing (2 cores: leave room for the fleet's tasks and the server).
                std::thread::sleep(Duration::from_micros(300));
            }
            gate
        });
        Callers { stop, handle }
    }

    pub fn finish(self) -> Gate {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().expect("the callers thread")
    }
}

/// `n` failed calls through the gate, each decision timed.
pub fn timed_fail(r: &Replica, tool: &str, n: usize, gate: &mut Gate) -> usize {
    let mut called = 0;
    for _ in 0..n {
        let t = Instant::now();
        let allowed = r.registry.allow_request(tool);
        if allowed {
            r.registry.record_failure(tool, MS);
            called += 1;
        }
        gate.samples.push(t.elapsed());
    }
    called
}
