//! Model-based property test: random operation sequences (with clock steps, sub-millisecond
//! ones included) run through the real registry and through a plain reference model written
//! from the behaviour reference; every answer is compared, and before every gate call the
//! oracle must agree with it.
//!
//! The model covers the plain threshold / cooldown / probe path and everything that meets it:
//! per-tool policies (failure rate over a sliding window, slow calls, backoff with jitter,
//! Retry-After hints), operator controls (force open, force open for a while, force closed,
//! shadow mode, release, reset), calls with no verdict on the tool — caller errors and
//! cancellations (a probe given back) — permits kept across any number of episodes, and idle
//! eviction with handles kept across it.
//!
//! `PROPTEST_CASES` sets the number of random sequences (default 2,000; the issue-13 run used
//! 10,000 and more: see RELIABILITY.md).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use tool_health::{
    Apply, Backoff, BreakerState, CallOutcome, CallReport, CircuitBreakerConfig, GateDecision,
    HealthStatus, JitterSource, ManualClock, Permit, ToolControl, ToolHandle, ToolHealthRegistry,
    ToolPolicy, TripPolicy,
};

// ------------------------------------------------------------------------------------------
// Time, as the behaviour reference (SPEC 6.1) defines it: milliseconds; an instant compared
// with a deadline rounds down, an instant a deadline counts from rounds up, a duration rounds
// up. So a deadline is never early.
// ------------------------------------------------------------------------------------------

const NS_PER_MS: u128 = 1_000_000;

fn floor_ms(d: Duration) -> u64 {
    (d.as_nanos() / NS_PER_MS) as u64
}

fn ceil_ms(d: Duration) -> u64 {
    d.as_nanos().div_ceil(NS_PER_MS) as u64
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The jitter source of every backoff in the model: a constant, so the model knows it.
#[derive(Debug)]
struct ConstJitter;
const JITTER: Duration = Duration::from_millis(250);
impl JitterSource for ConstJitter {
    fn jitter(&self, max: Duration) -> Duration {
        JITTER.min(max)
    }
}

// ------------------------------------------------------------------------------------------
// The reference model: one struct per tool, fields named after the SPEC's words.
// ------------------------------------------------------------------------------------------

/// A tool's policy in model units (milliseconds).
#[derive(Debug, Clone)]
struct MPolicy {
    threshold: u64,
    recovery: u64,
    /// Zero: no lease.
    lease: u64,
    /// (ratio, min_calls, bucket width).
    rate: Option<(f64, u64, u64)>,
    /// Nanoseconds: a success slower than this is a failure for the breaker.
    slow: Option<u128>,
    backoff: Option<MBackoff>,
}

#[derive(Debug, Clone)]
struct MBackoff {
    multiplier: u64,
    cap: u64,
    stable_after: u64,
    jitter: u64,
}

impl MPolicy {
    fn of(p: &ToolPolicy) -> Self {
        let recovery = ceil_ms(p.breaker.recovery_duration);
        MPolicy {
            threshold: u64::from(p.breaker.failure_threshold),
            recovery,
            lease: ceil_ms(p.breaker.probe_timeout),
            rate: match p.trip {
                TripPolicy::FailureRate {
                    ratio,
                    min_calls,
                    window,
                } => Some((ratio, min_calls, ceil_ms(window).max(8).div_ceil(8))),
                _ => None,
            },
            slow: p.slow_call.map(|d| d.as_nanos()),
            backoff: p.backoff.as_ref().map(|b| MBackoff {
                multiplier: u64::from(b.multiplier.max(1)),
                cap: ceil_ms(b.max_recovery).max(recovery),
                stable_after: ceil_ms(b.stable_after),
                jitter: if b.max_jitter.is_zero() || b.jitter.is_none() {
                    0
                } else {
                    ceil_ms(JITTER.min(b.max_jitter))
                },
            }),
        }
    }

    /// The cooldown at a backoff level, without jitter.
    fn recovery_at(&self, level: u32) -> u64 {
        match &self.backoff {
            None => self.recovery,
            Some(b) => self
                .recovery
                .saturating_mul(b.multiplier.checked_pow(level).unwrap_or(u64::MAX))
                .min(b.cap),
        }
    }

    /// The cooldown of an opening at a backoff level, jitter included.
    fn opening(&self, level: u32) -> u64 {
        self.recovery_at(level) + self.backoff.as_ref().map_or(0, |b| b.jitter)
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum MState {
    Closed,
    /// Refusing until `ready_at` (ms).
    Open {
        ready_at: u64,
    },
    /// A probe in flight; the lease ends at `lease_end` (ms; `None`: no lease).
    HalfOpen {
        lease_end: Option<u64>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum MMode {
    Normal,
    /// Until `Some(ms)` (exclusive), or until released.
    ForcedOpen(Option<u64>),
    ForcedClosed,
}

/// What a permit carries, in the model.
#[derive(Debug, Clone, Copy, PartialEq)]
struct MPermit {
    generation: u32,
    probe: bool,
    unenforced: bool,
}

#[derive(Debug, Clone)]
struct MTool {
    policy: MPolicy,
    state: MState,
    generation: u32,
    consecutive: u64,
    /// Backoff: the level of the current (or last) open episode, and when the breaker last
    /// closed after a probe (ms).
    level: u32,
    closed_at: Option<u64>,
    /// The failure-rate window's calls: (bucket period, success).
    window: Vec<(u64, bool)>,
    mode: MMode,
    shadow: bool,
    success: u64,
    failure: u64,
    refused: u64,
    ignored: u64,
    cancelled: u64,
    shadow_refused: u64,
    total_ns: u128,
    max_ns: u128,
    ewma: u64,
}

/// What a gate call answers, in the model.
#[derive(Debug, Clone, Copy, PartialEq)]
enum MDecision {
    Allowed(MPermit),
    Probe(MPermit),
    /// Retry after this many milliseconds (`None`: never).
    Refused(Option<u64>),
}

impl MTool {
    fn new(policy: MPolicy, generation: u32) -> Self {
        MTool {
            policy,
            state: MState::Closed,
            generation,
            consecutive: 0,
            level: 0,
            closed_at: None,
            window: Vec::new(),
            mode: MMode::Normal,
            shadow: false,
            success: 0,
            failure: 0,
            refused: 0,
            ignored: 0,
            cancelled: 0,
            shadow_refused: 0,
            total_ns: 0,
            max_ns: 0,
            ewma: 1_000_000,
        }
    }

    /// The breaker's state at `at` (ms): a half-open breaker whose lease ended *is* open, its
    /// cooldown counted from the lease's end.
    fn effective(&self, at: u64) -> MState {
        match self.state {
            MState::HalfOpen {
                lease_end: Some(end),
            } if at >= end => MState::Open {
                ready_at: end + self.policy.recovery_at(self.level),
            },
            s => s,
        }
    }

    /// A forced-open control in force at `at`.
    fn forced_until(&self, at: u64) -> Option<Option<u64>> {
        match self.mode {
            MMode::ForcedOpen(None) => Some(None),
            MMode::ForcedOpen(Some(until)) if at < until => Some(Some(until)),
            _ => None,
        }
    }

    /// Shadow mode or force-closed: refusals are decided, not enforced.
    fn unenforced_mode(&self) -> bool {
        self.shadow || self.mode == MMode::ForcedClosed
    }

    /// The breaker's own gate decision at `now`, without changing anything.
    fn breaker_peek(&self, now: Duration) -> MDecision {
        let at = floor_ms(now);
        match self.effective(at) {
            MState::Closed => MDecision::Allowed(MPermit {
                generation: self.generation,
                probe: false,
                unenforced: false,
            }),
            MState::Open { ready_at } if at >= ready_at => MDecision::Probe(MPermit {
                generation: self.generation + 1,
                probe: true,
                unenforced: false,
            }),
            MState::Open { ready_at } => MDecision::Refused(Some(ready_at - at)),
            MState::HalfOpen { lease_end } => {
                let recovery = self.policy.recovery_at(self.level);
                MDecision::Refused(Some(match lease_end {
                    None => recovery,
                    Some(end) => (end + recovery).saturating_sub(at),
                }))
            }
        }
    }

    /// What the gate answers at `now` without changing anything (controls included).
    fn peek(&self, now: Duration) -> MDecision {
        let at = floor_ms(now);
        if let Some(until) = self.forced_until(at) {
            return MDecision::Refused(until.map(|u| u - at));
        }
        match self.breaker_peek(now) {
            MDecision::Refused(_) if self.unenforced_mode() => MDecision::Allowed(MPermit {
                generation: self.generation,
                probe: false,
                unenforced: true,
            }),
            d => d,
        }
    }

    fn available(&self, now: Duration) -> bool {
        !matches!(self.peek(now), MDecision::Refused(_))
    }

    /// The gate.
    fn gate(&mut self, now: Duration) -> MDecision {
        let at = floor_ms(now);
        let decision = self.peek(now);
        match decision {
            MDecision::Probe(p) => {
                self.generation = p.generation;
                let lease_end = (self.policy.lease > 0).then(|| ceil_ms(now) + self.policy.lease);
                self.state = MState::HalfOpen { lease_end };
            }
            MDecision::Refused(_) => self.refused += 1,
            MDecision::Allowed(p) if p.unenforced => self.shadow_refused += 1,
            MDecision::Allowed(_) => {}
        }
        // An expired lease is settled either way; the model's `effective` already says so.
        if let MState::Open { .. } = self.effective(at) {
            self.state = self.effective(at);
        }
        decision
    }

    fn reported_state(&self, now: Duration) -> BreakerState {
        let at = floor_ms(now);
        if self.forced_until(at).is_some() {
            return BreakerState::Open;
        }
        match self.effective(at) {
            MState::Closed => BreakerState::Closed,
            MState::Open { .. } => BreakerState::Open,
            MState::HalfOpen { .. } => BreakerState::HalfOpen,
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

    fn stats(&mut self, ok: bool, duration: Duration) {
        if ok {
            self.success += 1;
            self.ewma_toward(1_000_000);
        } else {
            self.failure += 1;
            self.ewma_toward(0);
        }
        let ns = duration.as_nanos().min(u128::from(u64::MAX));
        self.total_ns = (self.total_ns + ns).min(u128::from(u64::MAX));
        self.max_ns = self.max_ns.max(ns);
    }

    /// A result of a call the breaker would have refused and a control let through: the stats
    /// only (SPEC 6.5, 6.6). By name, a result arriving while the breaker is open is taken for
    /// one.
    fn unenforced(&self, now: Duration, permit: Option<MPermit>) -> bool {
        match permit {
            Some(p) => p.unenforced,
            None => {
                self.unenforced_mode()
                    && matches!(self.effective(floor_ms(now)), MState::Open { .. })
            }
        }
    }

    fn window_period(&self, at: u64) -> Option<u64> {
        self.policy.rate.map(|(_, _, width)| at / width + 1)
    }

    /// (failures, calls) in the window at `at`: the current bucket and the 8 before it.
    fn window_counts(&self, at: u64) -> (u64, u64) {
        let Some(current) = self.window_period(at) else {
            return (0, 0);
        };
        let oldest = current.saturating_sub(8).max(1);
        self.window
            .iter()
            .filter(|(p, _)| (oldest..=current).contains(p))
            .fold((0, 0), |(f, n), &(_, ok)| (f + u64::from(!ok), n + 1))
    }

    fn window_add(&mut self, at: u64, ok: bool) {
        if let Some(p) = self.window_period(at) {
            self.window.push((p, ok));
        }
    }

    fn success(&mut self, now: Duration, duration: Duration, permit: Option<MPermit>) {
        self.stats(true, duration);
        if self
            .policy
            .slow
            .is_some_and(|slow| duration.as_nanos() > slow)
        {
            return self.breaker_failure(now, permit, 0);
        }
        if self.unenforced(now, permit) {
            return;
        }
        let at = floor_ms(now);
        self.window_add(at, true);
        if permit.is_some_and(|p| p.generation != self.generation) {
            return; // an older episode's news
        }
        match self.effective(at) {
            MState::Closed => self.consecutive = 0,
            s @ MState::Open { .. } => self.state = s, // ignored (an expiry is settled)
            MState::HalfOpen { .. } => {
                self.generation += 1;
                self.state = MState::Closed;
                self.consecutive = 0;
                self.closed_at = Some(at);
                self.window.clear(); // closing starts a fresh window (SPEC 6.3)
            }
        }
    }

    /// A failure for the breaker: `hint`, a retry hint in ms (0: none).
    fn failure(&mut self, now: Duration, duration: Duration, permit: Option<MPermit>, hint: u64) {
        self.stats(false, duration);
        self.breaker_failure(now, permit, hint);
    }

    fn breaker_failure(&mut self, now: Duration, permit: Option<MPermit>, hint: u64) {
        if self.unenforced(now, permit) {
            return;
        }
        let at = floor_ms(now);
        let base = ceil_ms(now);
        let not_before = if hint == 0 { 0 } else { base + hint };
        self.window_add(at, false);
        let stale = permit.is_some_and(|p| p.generation != self.generation);
        let eff = self.effective(at);
        let opening_level = |t: &MTool| -> u32 {
            let Some(b) = &t.policy.backoff else {
                return 0;
            };
            match eff {
                MState::Closed => match t.closed_at {
                    Some(c) if at.saturating_sub(c) < b.stable_after => t.level + 1,
                    _ => 0,
                },
                MState::HalfOpen { .. } => t.level + 1,
                MState::Open { .. } => t.level,
            }
        };
        let open_until = |t: &MTool, level: u32| (base + t.policy.opening(level)).max(not_before);
        match eff {
            MState::Open { ready_at } => {
                // Fresh bad news: the cooldown restarts from now, never shortened (SPEC 6.2).
                self.consecutive += 1;
                let until = open_until(self, opening_level(self)).max(ready_at);
                self.state = MState::Open { ready_at: until };
            }
            _ if stale => {}
            MState::Closed => {
                self.consecutive += 1;
                let trips = match self.policy.rate {
                    Some((ratio, min_calls, _)) => {
                        let (f, n) = self.window_counts(at);
                        n > 0 && n >= min_calls && f as f64 >= ratio * n as f64
                    }
                    None => self.policy.threshold > 0 && self.consecutive >= self.policy.threshold,
                };
                if trips {
                    let level = opening_level(self);
                    self.generation += 1;
                    self.state = MState::Open {
                        ready_at: open_until(self, level),
                    };
                    self.level = level.min(127);
                }
            }
            MState::HalfOpen { .. } => {
                self.consecutive += 1;
                let level = opening_level(self);
                self.generation += 1;
                self.state = MState::Open {
                    ready_at: open_until(self, level),
                };
                self.level = level.min(127);
            }
        }
    }

    /// A probe given back without a verdict (SPEC 6.4): through its permit, or by name
    /// whatever probe is in flight.
    fn release(&mut self, now: Duration, generation: Option<u32>) {
        let at = floor_ms(now);
        if matches!(self.effective(at), MState::HalfOpen { .. })
            && generation.is_none_or(|g| g == self.generation)
        {
            self.generation += 1;
            self.state = MState::Open { ready_at: at };
        }
    }

    /// A caller error (or, `cancelled`, a call that never finished): counted apart; a probe it
    /// held is given back.
    fn no_verdict(&mut self, now: Duration, permit: Option<MPermit>, cancelled: bool) {
        if cancelled {
            self.cancelled += 1;
        } else {
            self.ignored += 1;
        }
        match permit {
            Some(p) if p.probe => self.release(now, Some(p.generation)),
            Some(_) => {}
            None => self.release(now, None),
        }
    }

    fn reset(&mut self) {
        self.generation += 1;
        self.state = MState::Closed;
        self.consecutive = 0;
        self.level = 0;
        self.closed_at = None;
        self.window.clear();
        self.success = 0;
        self.failure = 0;
        self.refused = 0;
        self.ignored = 0;
        self.cancelled = 0;
        self.shadow_refused = 0;
        self.total_ns = 0;
        self.max_ns = 0;
        self.ewma = 1_000_000;
    }

    fn score(&self) -> f64 {
        let total = self.success + self.failure;
        let rate = if total == 0 {
            1.0
        } else {
            self.success as f64 / total as f64
        };
        0.3 * rate + 0.7 * (self.ewma as f64 / 1e6)
    }

    fn status(&self, now: Duration) -> HealthStatus {
        let score = self.score();
        if self.reported_state(now) == BreakerState::Open {
            HealthStatus::Unhealthy
        } else if score >= 0.8 {
            HealthStatus::Healthy
        } else if score >= 0.5 {
            HealthStatus::Degraded
        } else {
            HealthStatus::Unhealthy
        }
    }

    /// What eviction takes for a fresh tool: breaker closed, no consecutive failures, no
    /// control of any kind.
    fn fresh_equivalent(&self, now: Duration) -> bool {
        self.effective(floor_ms(now)) == MState::Closed
            && self.consecutive == 0
            && self.mode == MMode::Normal
            && !self.shadow
    }
}

/// The registry in the model: the tracked tools, the policies new entries get, and where new
/// entries start their generations (the highest an evicted entry reached).
#[derive(Debug)]
struct Model {
    tools: HashMap<&'static str, MTool>,
    policies: HashMap<&'static str, MPolicy>,
    floor: u32,
}

impl Model {
    fn get_or_create(&mut self, tool: &'static str) -> &mut MTool {
        let (policy, floor) = (self.policies[tool].clone(), self.floor);
        self.tools
            .entry(tool)
            .or_insert_with(|| MTool::new(policy, floor))
    }

    fn gate(&mut self, tool: &'static str, now: Duration) -> MDecision {
        match self.tools.get_mut(tool) {
            Some(m) => m.gate(now),
            None => MDecision::Allowed(MPermit {
                generation: self.floor,
                probe: false,
                unenforced: false,
            }),
        }
    }

    fn evict(&mut self, now: Duration) -> usize {
        let evicted: Vec<_> = self
            .tools
            .iter()
            .filter(|(_, m)| m.fresh_equivalent(now))
            .map(|(t, m)| (*t, m.generation))
            .collect();
        for (tool, generation) in &evicted {
            self.tools.remove(tool);
            self.floor = self.floor.max(*generation);
        }
        evicted.len()
    }
}

// ------------------------------------------------------------------------------------------
// Operations
// ------------------------------------------------------------------------------------------

const TOOLS: [&str; 3] = ["alpha", "beta", ""];

#[derive(Debug, Clone, Copy)]
enum Outcome {
    /// Duration in ms.
    Success(u64),
    Failure,
    /// A failure with a retry hint (ms).
    Hinted(u64),
    Ignored,
    Cancelled,
}

#[derive(Debug, Clone)]
enum Op {
    Allow(usize),
    /// The gate through a handle kept since the handle was first taken (across evictions).
    HandleAllow(usize),
    Available(usize),
    Record(usize, Outcome),
    HandleRecord(usize, Outcome),
    /// Report a remembered permit's result (possibly long stale).
    PermitResult(usize, usize, Outcome),
    Release(usize, usize),
    ForceOpen(usize),
    ForceOpenFor(usize, u64),
    ForceClosed(usize),
    ReleaseControl(usize),
    Shadow(usize, bool),
    Reset(usize),
    Evict,
    /// Nanoseconds.
    Advance(u64),
    Read(usize),
    Unavailable,
}

fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        3 => (0..2_000u64).prop_map(Outcome::Success),
        3 => Just(Outcome::Failure),
        1 => prop_oneof![Just(500u64), Just(5_000), Just(60_000)].prop_map(Outcome::Hinted),
        1 => Just(Outcome::Ignored),
        1 => Just(Outcome::Cancelled),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let tool = 0..TOOLS.len();
    prop_oneof![
        5 => tool.clone().prop_map(Op::Allow),
        2 => tool.clone().prop_map(Op::HandleAllow),
        1 => tool.clone().prop_map(Op::Available),
        5 => (tool.clone(), outcome()).prop_map(|(t, o)| Op::Record(t, o)),
        1 => (tool.clone(), outcome()).prop_map(|(t, o)| Op::HandleRecord(t, o)),
        3 => (tool.clone(), 0..16usize, outcome()).prop_map(|(t, p, o)| Op::PermitResult(t, p, o)),
        1 => (tool.clone(), 0..16usize).prop_map(|(t, p)| Op::Release(t, p)),
        1 => prop_oneof![
            tool.clone().prop_map(Op::ForceOpen),
            (tool.clone(), 0..5_000u64).prop_map(|(t, d)| Op::ForceOpenFor(t, d)),
            tool.clone().prop_map(Op::ForceClosed),
            tool.clone().prop_map(Op::ReleaseControl),
            (tool.clone(), any::<bool>()).prop_map(|(t, on)| Op::Shadow(t, on)),
            tool.clone().prop_map(Op::Reset),
        ],
        1 => Just(Op::Evict),
        4 => prop_oneof![
            (0..50u64).prop_map(|m| m * 1_000_000),
            (0..5_000u64).prop_map(|m| m * 1_000_000),
            Just(1_000_000_000u64),
            Just(2_000_000_000u64),
            (0..3_000_000u64), // sub-millisecond steps: rounding at every boundary
        ].prop_map(Op::Advance),
        1 => tool.prop_map(Op::Read),
        1 => Just(Op::Unavailable),
    ]
}

fn config() -> impl Strategy<Value = CircuitBreakerConfig> {
    (
        0..5u32,
        prop_oneof![
            (0..4u64).prop_map(|s| ms(s * 1_000)),
            (1..3_000u64).prop_map(Duration::from_micros)
        ],
        prop_oneof![
            (0..4u64).prop_map(|s| ms(s * 1_000)),
            (1..3_000u64).prop_map(Duration::from_micros)
        ],
    )
        .prop_map(|(t, r, l)| CircuitBreakerConfig {
            failure_threshold: t,
            recovery_duration: r,
            probe_timeout: l,
        })
}

fn policy() -> impl Strategy<Value = ToolPolicy> {
    let trip = prop_oneof![
        3 => Just(TripPolicy::ConsecutiveFailures),
        2 => (prop_oneof![Just(0.25), Just(0.5), Just(1.0)], 1..6u64, 1..8_000u64).prop_map(
            |(ratio, min_calls, window)| TripPolicy::FailureRate {
                ratio,
                min_calls,
                window: ms(window),
            }
        ),
    ];
    let slow = prop_oneof![3 => Just(None), 1 => (500..1_500u64).prop_map(|m| Some(ms(m)))];
    let backoff = prop_oneof![
        2 => Just(None),
        1 => (1..4u32, 0..10_000u64, 0..10_000u64, prop_oneof![Just(0u64), Just(100), Just(300)])
            .prop_map(|(multiplier, cap, stable, jitter)| Some(Backoff {
                multiplier,
                max_recovery: ms(cap),
                stable_after: ms(stable),
                max_jitter: ms(jitter),
                jitter: Some(Arc::new(ConstJitter) as Arc<dyn JitterSource>),
            })),
    ];
    (config(), trip, slow, backoff).prop_map(|(breaker, trip, slow_call, backoff)| ToolPolicy {
        breaker,
        trip,
        slow_call,
        backoff,
    })
}

// ------------------------------------------------------------------------------------------
// Comparing the registry with the model
// ------------------------------------------------------------------------------------------

fn retry_after(d: MDecision) -> Option<Duration> {
    match d {
        MDecision::Refused(retry) => Some(retry.map_or(Duration::MAX, ms)),
        _ => None,
    }
}

fn check_tool(r: &ToolHealthRegistry, model: &Model, tool: &str, now: Duration) {
    let m = model.tools.get(tool);
    let snap = r.snapshot(tool);
    assert_eq!(snap.is_some(), m.is_some(), "entry existence of {tool:?}");
    let Some(m) = m else {
        assert_eq!(r.breaker_state(tool), BreakerState::Closed);
        assert_eq!(r.get_health_status(tool), HealthStatus::Healthy);
        assert!(r.is_tool_available(tool));
        return;
    };
    let s = snap.unwrap();
    let state = m.reported_state(now);
    assert_eq!(s.breaker, state, "state of {tool:?}");
    assert_eq!(r.breaker_state(tool), state);
    assert_eq!(
        (s.success_count, s.failure_count, s.total_calls),
        (m.success, m.failure, m.success + m.failure),
        "counts of {tool:?}"
    );
    assert_eq!(
        (
            s.refused_count,
            s.ignored_count,
            s.shadow_refused_count,
            s.cancelled_count
        ),
        (m.refused, m.ignored, m.shadow_refused, m.cancelled),
        "refused, ignored, shadow-refused, cancelled of {tool:?}"
    );
    assert_eq!(s.ewma_success, m.ewma as f64 / 1e6);
    assert_eq!(s.consecutive_failures, m.consecutive, "counter of {tool:?}");
    assert_eq!(s.status, m.status(now), "status of {tool:?}");
    assert_eq!(r.get_health_status(tool), m.status(now));
    assert_eq!(s.max_duration, Duration::from_nanos(m.max_ns as u64));
    let total = m.success + m.failure;
    let avg = if total == 0 {
        0
    } else {
        (m.total_ns / u128::from(total)) as u64
    };
    assert_eq!(s.avg_duration, Duration::from_nanos(avg));
    assert_eq!(
        s.retry_after,
        retry_after(m.peek(now)),
        "retry_after of {tool:?}"
    );
    assert_eq!(
        r.is_tool_available(tool),
        m.available(now),
        "oracle of {tool:?}"
    );
    let mode = match m.mode {
        MMode::Normal => ToolControl::Normal,
        MMode::ForcedOpen(None) => ToolControl::ForcedOpen { until: None },
        MMode::ForcedOpen(Some(u)) => ToolControl::ForcedOpen { until: Some(ms(u)) },
        MMode::ForcedClosed => ToolControl::ForcedClosed,
    };
    assert_eq!(
        (s.control, s.shadow),
        (mode, m.shadow),
        "control of {tool:?}"
    );
}

fn check_unavailable(r: &ToolHealthRegistry, model: &Model, now: Duration) {
    let real: Vec<_> = r
        .unavailable_tools()
        .into_iter()
        .map(|t| (t.tool, t.breaker, t.retry_after, t.forced))
        .collect();
    let mut expected: Vec<_> = model
        .tools
        .iter()
        .filter_map(|(tool, m)| {
            let retry = retry_after(m.peek(now))?;
            let forced = m.forced_until(floor_ms(now)).is_some();
            Some((tool.to_string(), m.reported_state(now), retry, forced))
        })
        .collect();
    expected.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(real, expected, "unavailable_tools");
}

/// Compares a real gate decision with the model's; returns the permit to remember.
fn compare(tool: &str, decision: GateDecision, expected: MDecision) -> Option<(Permit, MPermit)> {
    match (decision, expected) {
        (GateDecision::Allowed(p), MDecision::Allowed(e))
        | (GateDecision::Probe(p), MDecision::Probe(e)) => {
            assert_eq!(
                (p.generation(), p.is_probe(), p.is_shadow_refused()),
                (e.generation & ((1 << 22) - 1), e.probe, e.unenforced),
                "permit for {tool:?}"
            );
            Some((p, e))
        }
        (GateDecision::Refused { retry_after: r }, MDecision::Refused(e)) => {
            assert_eq!(r, e.map_or(Duration::MAX, ms), "retry_after for {tool:?}");
            None
        }
        (d, e) => panic!("gate {d:?} but model {e:?} for {tool:?}"),
    }
}

fn report(outcome: Outcome) -> (CallReport<'static>, Duration) {
    match outcome {
        Outcome::Success(d) => (CallReport::new(CallOutcome::Success, ms(d)), ms(d)),
        Outcome::Failure => (CallReport::new(CallOutcome::Failure, ms(3)), ms(3)),
        Outcome::Hinted(h) => (
            CallReport::new(CallOutcome::Failure, ms(3)).retry_after(ms(h)),
            ms(3),
        ),
        Outcome::Ignored => (CallReport::new(CallOutcome::Ignored, ms(3)), ms(3)),
        Outcome::Cancelled => (CallReport::new(CallOutcome::Cancelled, ms(3)), ms(3)),
    }
}

fn apply(m: &mut MTool, now: Duration, outcome: Outcome, permit: Option<MPermit>) {
    let (_, d) = report(outcome);
    match outcome {
        Outcome::Success(_) => m.success(now, d, permit),
        Outcome::Failure => m.failure(now, d, permit, 0),
        Outcome::Hinted(h) => m.failure(now, d, permit, h),
        Outcome::Ignored => m.no_verdict(now, permit, false),
        Outcome::Cancelled => m.no_verdict(now, permit, true),
    }
}

fn run(policies: [ToolPolicy; 3], evictable: bool, ops: Vec<Op>) {
    let clock = ManualClock::new();
    let mut builder = ToolHealthRegistry::builder().clock(clock.clone());
    if evictable {
        builder = builder.evictable();
    }
    let r = Arc::new(builder.build());
    let mut model = Model {
        tools: HashMap::new(),
        policies: HashMap::new(),
        floor: 0,
    };
    for (tool, p) in TOOLS.iter().zip(policies) {
        model.policies.insert(tool, MPolicy::of(&p));
        r.set_tool_policy(tool, p, Apply::NewBreakers);
    }
    let mut permits: HashMap<&str, Vec<(Permit, MPermit)>> = HashMap::new();
    let mut handles: HashMap<&str, ToolHandle> = HashMap::new();
    let mut now = Duration::ZERO;

    for op in ops {
        match op {
            Op::Allow(t) | Op::HandleAllow(t) => {
                let tool = TOOLS[t];
                let handle = matches!(op, Op::HandleAllow(_)).then(|| {
                    handles
                        .entry(tool)
                        .or_insert_with(|| {
                            // Taking a handle tracks the tool, as its first record would.
                            model.get_or_create(tool);
                            r.handle(tool).expect("below the cap")
                        })
                        .clone()
                });
                let oracle = match &handle {
                    Some(h) => h.is_tool_available(),
                    None => r.is_tool_available(tool),
                };
                let decision = match &handle {
                    Some(h) => h.check(),
                    None => r.check(tool),
                };
                assert_eq!(oracle, decision.is_allowed(), "oracle == gate for {tool:?}");
                let expected = model.gate(tool, now);
                if let Some(p) = compare(tool, decision, expected) {
                    permits.entry(tool).or_default().push(p);
                }
            }
            Op::Available(t) => {
                let tool = TOOLS[t];
                let expected = model.tools.get(tool).is_none_or(|m| m.available(now));
                assert_eq!(r.is_tool_available(tool), expected);
            }
            Op::Record(t, outcome) | Op::HandleRecord(t, outcome) => {
                let tool = TOOLS[t];
                let (rep, _) = report(outcome);
                match (&op, handles.get(tool)) {
                    (Op::HandleRecord(..), Some(h)) => {
                        h.record_report(&rep);
                    }
                    _ => {
                        r.record_report(tool, &rep);
                    }
                }
                apply(model.get_or_create(tool), now, outcome, None);
            }
            Op::PermitResult(t, i, outcome) => {
                let tool = TOOLS[t];
                let Some(&(p, e)) = permits.get(tool).and_then(|v| v.get(i)) else {
                    continue;
                };
                let (rep, _) = report(outcome);
                r.record_report(tool, &rep.permit(p));
                apply(model.get_or_create(tool), now, outcome, Some(e));
            }
            Op::Release(t, i) => {
                let tool = TOOLS[t];
                let Some(&(p, e)) = permits.get(tool).and_then(|v| v.get(i)) else {
                    continue;
                };
                r.release(tool, p);
                if e.probe {
                    if let Some(m) = model.tools.get_mut(tool) {
                        m.release(now, Some(e.generation));
                    }
                }
            }
            Op::ForceOpen(t) => {
                let tool = TOOLS[t];
                assert!(r.force_open(tool));
                model.get_or_create(tool).mode = MMode::ForcedOpen(None);
            }
            Op::ForceOpenFor(t, d) => {
                let tool = TOOLS[t];
                assert!(r.force_open_for(tool, ms(d)));
                model.get_or_create(tool).mode = MMode::ForcedOpen(Some(ceil_ms(now + ms(d))));
            }
            Op::ForceClosed(t) => {
                let tool = TOOLS[t];
                assert!(r.force_closed(tool));
                model.get_or_create(tool).mode = MMode::ForcedClosed;
            }
            Op::ReleaseControl(t) => {
                let tool = TOOLS[t];
                r.release_control(tool);
                if let Some(m) = model.tools.get_mut(tool) {
                    m.mode = MMode::Normal;
                }
            }
            Op::Shadow(t, on) => {
                let tool = TOOLS[t];
                assert!(r.set_shadow(tool, on));
                if on {
                    model.get_or_create(tool).shadow = true;
                } else if let Some(m) = model.tools.get_mut(tool) {
                    m.shadow = false;
                }
            }
            Op::Reset(t) => {
                let tool = TOOLS[t];
                r.reset(tool);
                if let Some(m) = model.tools.get_mut(tool) {
                    m.reset();
                }
            }
            Op::Evict => {
                let evicted = r.evict_idle(Duration::ZERO);
                let expected = if evictable { model.evict(now) } else { 0 };
                assert_eq!(evicted, expected, "evicted");
            }
            Op::Advance(ns) => {
                clock.advance(Duration::from_nanos(ns));
                now += Duration::from_nanos(ns);
            }
            Op::Read(t) => check_tool(&r, &model, TOOLS[t], now),
            Op::Unavailable => check_unavailable(&r, &model, now),
        }
    }
    for tool in TOOLS {
        check_tool(&r, &model, tool, now);
    }
    check_unavailable(&r, &model, now);
    assert_eq!(r.health_summary().len(), model.tools.len());
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn registry_matches_the_reference_model(
        policies in [policy(), policy(), policy()],
        evictable in any::<bool>(),
        ops in prop::collection::vec(op(), 1..150),
    ) {
        run(policies, evictable, ops);
    }
}

fn plain(threshold: u32, recovery: u64, lease: u64) -> ToolPolicy {
    ToolPolicy::from(CircuitBreakerConfig {
        failure_threshold: threshold,
        recovery_duration: ms(recovery),
        probe_timeout: ms(lease),
    })
}

#[test]
fn model_agrees_on_a_hand_written_episode() {
    // A fixed sequence through every state, as a readable anchor for the property above.
    let p = || plain(2, 1_000, 1_000);
    run(
        [p(), p(), p()],
        false,
        vec![
            Op::Allow(0),
            Op::Record(0, Outcome::Failure),
            Op::Record(0, Outcome::Failure),
            Op::Allow(0),
            Op::Advance(1_000_000_000),
            Op::Allow(0),
            Op::Allow(0),
            Op::Advance(1_000_000_000),
            Op::Read(0),
            Op::PermitResult(0, 1, Outcome::Success(1)),
            Op::Advance(1_000_000_000),
            Op::Allow(0),
            Op::Release(0, 2),
            Op::Allow(0),
            Op::PermitResult(0, 3, Outcome::Success(1)),
            Op::Read(0),
        ],
    );
}

#[test]
fn model_agrees_on_controls_caller_errors_and_eviction_with_handles() {
    let p = || plain(1, 30_000, 10_000);
    run(
        [p(), p(), p()],
        true,
        vec![
            // Shadow mode: the probe is granted for real; would-be refusals feed nothing.
            Op::Shadow(0, true),
            Op::Record(0, Outcome::Failure),
            Op::Allow(0),
            Op::PermitResult(0, 0, Outcome::Failure),
            Op::Advance(30_000_000_000),
            Op::Allow(0),
            Op::PermitResult(0, 1, Outcome::Ignored), // a caller error: the probe goes back
            Op::Allow(0),
            Op::PermitResult(0, 2, Outcome::Cancelled), // so does a cancelled call's
            Op::Allow(0),
            Op::PermitResult(0, 3, Outcome::Success(5)),
            Op::Shadow(0, false),
            Op::Read(0),
            // A handle kept across eviction.
            Op::HandleAllow(1),
            Op::Advance(1_000_000),
            Op::Evict,
            Op::HandleAllow(1),
            Op::HandleRecord(1, Outcome::Hinted(60_000)),
            Op::Advance(31_000_000_000),
            Op::HandleAllow(1),
            Op::Unavailable,
            Op::Read(1),
        ],
    );
}
