//! Model-based property test: random operation sequences (with clock steps) run through the
//! real registry and through a plain reference model written from the behaviour reference;
//! every answer is compared, and before every `allow_request` the oracle must agree with it.

use std::collections::HashMap;
use std::time::Duration;

use proptest::prelude::*;
use tool_health::{
    BreakerState, CallOutcome, CircuitBreakerConfig, GateDecision, HealthStatus, ManualClock,
    Permit, ToolHealthRegistry,
};

// ------------------------------------------------------------------------------------------
// The reference model: one struct per tool, fields named after the SPEC's words.
// ------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq)]
enum MState {
    Closed,
    /// Refusing until `ready_at`.
    Open {
        ready_at: Duration,
    },
    /// The probe was granted at `granted_at`.
    HalfOpen {
        granted_at: Duration,
    },
}

#[derive(Debug, Clone)]
struct MTool {
    threshold: u64,
    recovery: Duration,
    lease: Duration,
    state: MState,
    generation: u32,
    consecutive: u64,
    success: u64,
    failure: u64,
    refused: u64,
    ignored: u64,
    ewma: u64,
}

impl MTool {
    fn new(cfg: &CircuitBreakerConfig) -> Self {
        MTool {
            threshold: u64::from(cfg.failure_threshold),
            recovery: cfg.recovery_duration,
            lease: cfg.probe_timeout,
            state: MState::Closed,
            generation: 0,
            consecutive: 0,
            success: 0,
            failure: 0,
            refused: 0,
            ignored: 0,
            ewma: 1_000_000,
        }
    }

    /// The state as the SPEC defines it at `now`: a HalfOpen whose lease expired *is* Open
    /// with the cooldown counted from the lease's end.
    fn effective(&self, now: Duration) -> MState {
        match self.state {
            MState::HalfOpen { granted_at }
                if self.lease > Duration::ZERO && now - granted_at >= self.lease =>
            {
                MState::Open {
                    ready_at: granted_at + self.lease + self.recovery,
                }
            }
            s => s,
        }
    }

    fn public_state(&self, now: Duration) -> BreakerState {
        match self.effective(now) {
            MState::Closed => BreakerState::Closed,
            MState::Open { .. } => BreakerState::Open,
            MState::HalfOpen { .. } => BreakerState::HalfOpen,
        }
    }

    fn available(&self, now: Duration) -> bool {
        match self.effective(now) {
            MState::Closed => true,
            MState::Open { ready_at } => now >= ready_at,
            MState::HalfOpen { .. } => false,
        }
    }

    /// allow_request: Some((generation, probe)) when admitted.
    fn allow(&mut self, now: Duration) -> Option<(u32, bool)> {
        match self.effective(now) {
            MState::Closed => Some((self.generation, false)),
            MState::Open { ready_at } if now >= ready_at => {
                self.generation += 1;
                self.state = MState::HalfOpen { granted_at: now };
                Some((self.generation, true))
            }
            _ => {
                self.refused += 1;
                None
            }
        }
    }

    fn ewma_toward(&mut self, target: u64) {
        // 30 % of the way toward the sample, rounded away from zero.
        let step = |gap: u64| (gap * 3).div_ceil(10);
        if target > self.ewma {
            self.ewma += step(target - self.ewma);
        } else {
            self.ewma -= step(self.ewma - target);
        }
    }

    fn success(&mut self, now: Duration, generation: Option<u32>) {
        self.success += 1;
        self.ewma_toward(1_000_000);
        if generation.is_some_and(|g| g != self.generation) {
            return; // an older episode's news
        }
        match self.effective(now) {
            MState::Closed => self.consecutive = 0,
            MState::Open { .. } => self.state = self.effective(now), // ignored
            MState::HalfOpen { .. } => {
                self.generation += 1;
                self.state = MState::Closed;
                self.consecutive = 0;
            }
        }
    }

    fn failure(&mut self, now: Duration, generation: Option<u32>) {
        self.failure += 1;
        self.ewma_toward(0);
        let stale = generation.is_some_and(|g| g != self.generation);
        match self.effective(now) {
            MState::Open { .. } => {
                // Fresh bad news, whatever episode it comes from.
                self.consecutive += 1;
                self.state = MState::Open {
                    ready_at: now + self.recovery,
                };
            }
            _ if stale => {}
            MState::Closed => {
                self.consecutive += 1;
                if self.threshold > 0 && self.consecutive >= self.threshold {
                    self.generation += 1;
                    self.state = MState::Open {
                        ready_at: now + self.recovery,
                    };
                }
            }
            MState::HalfOpen { .. } => {
                self.consecutive += 1;
                self.generation += 1;
                self.state = MState::Open {
                    ready_at: now + self.recovery,
                };
            }
        }
    }

    fn release(&mut self, now: Duration, generation: u32) {
        if generation == self.generation && matches!(self.effective(now), MState::HalfOpen { .. }) {
            self.generation += 1;
            self.state = MState::Open { ready_at: now };
        }
    }

    fn status(&self, now: Duration) -> HealthStatus {
        let total = self.success + self.failure;
        let rate = if total == 0 {
            1.0
        } else {
            self.success as f64 / total as f64
        };
        let score = 0.3 * rate + 0.7 * (self.ewma as f64 / 1e6);
        if self.public_state(now) == BreakerState::Open {
            HealthStatus::Unhealthy
        } else if score >= 0.8 {
            HealthStatus::Healthy
        } else if score >= 0.5 {
            HealthStatus::Degraded
        } else {
            HealthStatus::Unhealthy
        }
    }
}

// ------------------------------------------------------------------------------------------
// Operations
// ------------------------------------------------------------------------------------------

const TOOLS: [&str; 3] = ["alpha", "beta", ""];

#[derive(Debug, Clone)]
enum Op {
    Allow(usize),
    Available(usize),
    Success(usize, u64),
    Failure(usize, u64),
    /// Report a remembered permit's result (possibly long stale).
    PermitResult(usize, usize, bool),
    Release(usize, usize),
    /// Milliseconds.
    Advance(u64),
    Read(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let tool = 0..TOOLS.len();
    prop_oneof![
        4 => tool.clone().prop_map(Op::Allow),
        1 => tool.clone().prop_map(Op::Available),
        3 => (tool.clone(), 0..2_000u64).prop_map(|(t, d)| Op::Success(t, d)),
        4 => (tool.clone(), 0..2_000u64).prop_map(|(t, d)| Op::Failure(t, d)),
        2 => (tool.clone(), 0..16usize, any::<bool>()).prop_map(|(t, p, s)| Op::PermitResult(t, p, s)),
        1 => (tool.clone(), 0..16usize).prop_map(|(t, p)| Op::Release(t, p)),
        3 => prop_oneof![0..50u64, 0..5_000u64, Just(1_000u64), Just(2_000u64)].prop_map(Op::Advance),
        1 => tool.prop_map(Op::Read),
    ]
}

fn config() -> impl Strategy<Value = CircuitBreakerConfig> {
    (0..5u32, 0..4u64, 0..4u64).prop_map(|(t, r, l)| CircuitBreakerConfig {
        failure_threshold: t,
        recovery_duration: Duration::from_millis(r * 1_000),
        probe_timeout: Duration::from_millis(l * 1_000),
    })
}

fn check_tool(r: &ToolHealthRegistry, m: &HashMap<&str, MTool>, tool: &str, now: Duration) {
    let model = m.get(tool);
    let snap = r.snapshot(tool);
    assert_eq!(
        snap.is_some(),
        model.is_some(),
        "entry existence of {tool:?}"
    );
    let Some(model) = model else {
        assert_eq!(r.breaker_state(tool), BreakerState::Closed);
        assert!(r.is_tool_available(tool));
        return;
    };
    let s = snap.unwrap();
    assert_eq!(s.breaker, model.public_state(now), "state of {tool:?}");
    assert_eq!(r.breaker_state(tool), model.public_state(now));
    assert_eq!(s.success_count, model.success);
    assert_eq!(s.failure_count, model.failure);
    assert_eq!(s.total_calls, model.success + model.failure);
    assert_eq!(s.refused_count, model.refused);
    assert_eq!(s.ignored_count, model.ignored);
    assert_eq!(s.ewma_success, model.ewma as f64 / 1e6);
    assert_eq!(
        s.consecutive_failures, model.consecutive,
        "counter of {tool:?}"
    );
    assert_eq!(s.status, model.status(now), "status of {tool:?}");
    assert_eq!(r.is_tool_available(tool), model.available(now));
}

fn run(cfg: CircuitBreakerConfig, ops: Vec<Op>) {
    let clock = ManualClock::new();
    let r = ToolHealthRegistry::builder()
        .config(cfg.clone())
        .clock(clock.clone())
        .build();
    let mut model: HashMap<&str, MTool> = HashMap::new();
    // Permits handed out so far, per tool: (real permit, model generation).
    let mut permits: HashMap<&str, Vec<(Permit, u32)>> = HashMap::new();
    let mut now = Duration::ZERO;

    for op in ops {
        match op {
            Op::Allow(t) => {
                let tool = TOOLS[t];
                let oracle = r.is_tool_available(tool);
                let decision = r.check(tool);
                assert_eq!(oracle, decision.is_allowed(), "oracle == gate for {tool:?}");
                let expected = match model.get_mut(tool) {
                    Some(m) => m.allow(now),
                    None => Some((0, false)),
                };
                match (decision, expected) {
                    (GateDecision::Allowed(p), Some((g, false)))
                    | (GateDecision::Probe(p), Some((g, true))) => {
                        assert_eq!(p.generation(), g);
                        permits.entry(tool).or_default().push((p, g));
                    }
                    (GateDecision::Refused { .. }, None) => {}
                    (d, e) => panic!("gate {d:?} but model {e:?} for {tool:?}"),
                }
            }
            Op::Available(t) => {
                let tool = TOOLS[t];
                let expected = model.get(tool).is_none_or(|m| m.available(now));
                assert_eq!(r.is_tool_available(tool), expected);
            }
            Op::Success(t, d) => {
                let tool = TOOLS[t];
                r.record_success(tool, Duration::from_millis(d));
                model
                    .entry(tool)
                    .or_insert_with(|| MTool::new(&cfg))
                    .success(now, None);
            }
            Op::Failure(t, d) => {
                let tool = TOOLS[t];
                r.record_failure(tool, Duration::from_millis(d));
                model
                    .entry(tool)
                    .or_insert_with(|| MTool::new(&cfg))
                    .failure(now, None);
            }
            Op::PermitResult(t, i, ok) => {
                let tool = TOOLS[t];
                let Some(&(p, g)) = permits.get(tool).and_then(|v| v.get(i)) else {
                    continue;
                };
                let outcome = if ok {
                    CallOutcome::Success
                } else {
                    CallOutcome::Failure
                };
                r.record_with_permit(tool, p, outcome, Duration::from_millis(1));
                let m = model.entry(tool).or_insert_with(|| MTool::new(&cfg));
                if ok {
                    m.success(now, Some(g));
                } else {
                    m.failure(now, Some(g));
                }
            }
            Op::Release(t, i) => {
                let tool = TOOLS[t];
                let Some(&(p, g)) = permits.get(tool).and_then(|v| v.get(i)) else {
                    continue;
                };
                r.release(tool, p);
                if p.is_probe() {
                    if let Some(m) = model.get_mut(tool) {
                        m.release(now, g);
                    }
                }
            }
            Op::Advance(ms) => {
                clock.advance(Duration::from_millis(ms));
                now += Duration::from_millis(ms);
            }
            Op::Read(t) => check_tool(&r, &model, TOOLS[t], now),
        }
    }
    for tool in TOOLS {
        check_tool(&r, &model, tool, now);
    }
    assert_eq!(r.health_summary().len(), model.len());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn registry_matches_the_reference_model(cfg in config(), ops in prop::collection::vec(op(), 1..120)) {
        run(cfg, ops);
    }
}

#[test]
fn model_agrees_on_a_hand_written_episode() {
    // A fixed sequence through every state, as a readable anchor for the property above.
    let cfg = CircuitBreakerConfig {
        failure_threshold: 2,
        recovery_duration: Duration::from_secs(1),
        probe_timeout: Duration::from_secs(1),
    };
    run(
        cfg,
        vec![
            Op::Allow(0),
            Op::Failure(0, 10),
            Op::Failure(0, 10),
            Op::Allow(0),
            Op::Advance(1_000),
            Op::Allow(0),
            Op::Allow(0),
            Op::Advance(1_000),
            Op::Read(0),
            Op::PermitResult(0, 1, true),
            Op::Advance(1_000),
            Op::Allow(0),
            Op::Release(0, 2),
            Op::Allow(0),
            Op::PermitResult(0, 3, true),
            Op::Read(0),
        ],
    );
}
