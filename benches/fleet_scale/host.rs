//! A process of this bench hosting many replicas: each a registry on the system clock with its
//! own `Fleet` (its own connections) on the store, `TOOLS` tools each. Driven by lines on stdin,
//! answering on stdout:
//!
//! * `outage TOOL MS`: every replica calls `TOOL` every 50 ms (a random phase each); calls fail
//!   for `MS` from now, then succeed; until `stop TOOL`.
//! * `report TOOL`: per replica `r INDEX OPENED_US FAILED PROBES`: when its breaker first
//!   opened for `TOOL` (µs since the epoch, 0: never), the calls that failed, the probes its
//!   gate granted.
//! * `quit`.
//!
//! Between commands every replica calls one of its tools (they answer) every 200 ms: a fleet at
//! rest is a fleet whose tools work.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tool_health::fleet::{Fleet, FleetBuilder};
use tool_health::observe::HealthObserver;
use tool_health::{
    BreakerState, CallOutcome, CircuitBreakerConfig, GateDecision, ToolHealthRegistry, Transition,
};

/// The environment variable that makes this binary a host process.
pub(crate) const ROLE: &str = "TOOL_HEALTH_FLEET_SCALE_HOST";

pub(crate) const THRESHOLD: u32 = 3;
pub(crate) const COOLDOWN: Duration = Duration::from_secs(2);

fn unix_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// When each tool's breaker first opened here (µs since the epoch), per replica.
#[derive(Debug, Default)]
struct Opened(Mutex<HashMap<String, u64>>);

#[derive(Debug)]
struct Stamper(Arc<Opened>);

impl HealthObserver for Stamper {
    fn on_transition(&self, tool: &str, t: &Transition, _at: Duration) {
        if t.to == BreakerState::Open {
            self.0
                 .0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(tool.to_owned())
                .or_insert_with(unix_us);
        }
    }
}

/// An outage being played: the tool, until when its calls fail, and per replica its counts.
struct Outage {
    tool: String,
    failing_until: Instant,
    failed: Vec<AtomicU64>,
    probes: Vec<AtomicU64>,
    stop: AtomicBool,
}

struct Replica {
    registry: Arc<ToolHealthRegistry>,
    opened: Arc<Opened>,
    _fleet: Fleet,
}

pub(crate) fn host() -> std::process::ExitCode {
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let url = var("TH_SCALE_URL");
    let prefix = var("TH_SCALE_PREFIX");
    let n: usize = var("TH_SCALE_REPLICAS").parse().expect("replicas");
    let tools: usize = var("TH_SCALE_TOOLS").parse().expect("tools");
    let shards: u16 = var("TH_SCALE_SHARDS").parse().unwrap_or(3);
    let poll: u64 = var("TH_SCALE_POLL_MS").parse().unwrap_or(1000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let names: Vec<String> = (0..tools).map(|i| format!("tool-{i:05}")).collect();
    let mut replicas = Vec::with_capacity(n);
    for _ in 0..n {
        let registry = Arc::new(
            ToolHealthRegistry::builder()
                .config(CircuitBreakerConfig {
                    failure_threshold: THRESHOLD,
                    recovery_duration: COOLDOWN,
                    probe_timeout: Duration::from_secs(5),
                })
                .log_transitions(false)
                .build(),
        );
        for name in &names {
            assert!(registry.allow_request(name));
            registry.record_success(name, Duration::from_millis(2));
        }
        let opened = Arc::new(Opened::default());
        registry.add_observer(Arc::new(Stamper(Arc::clone(&opened))));
        let fleet = {
            let _entered = runtime.enter();
            let mut b = FleetBuilder::new(url.clone());
            if var("TH_SCALE_RATE_SCOPE") == "local" {
                b = b.rate_scope(tool_health::fleet::RateScope::Local);
            }
            b.prefix(prefix.clone())
                .shards(shards)
                .poll_interval(Duration::from_millis(poll))
                .start(&registry)
                .expect("fleet mode starts")
        };
        replicas.push(Replica {
            registry,
            opened,
            _fleet: fleet,
        });
    }
    runtime.block_on(async {
        for r in &replicas {
            r._fleet
                .wait_connected(Duration::from_secs(120))
                .await
                .expect("the store answers");
        }
    });
    let replicas = Arc::new(replicas);
    let outages: Arc<Mutex<Vec<Arc<Outage>>>> = Arc::default();
    let quit = Arc::new(AtomicBool::new(false));
    let caller = {
        let (replicas, outages, quit) = (
            Arc::clone(&replicas),
            Arc::clone(&outages),
            Arc::clone(&quit),
        );
        std::thread::spawn(move || calls(&replicas, &names, &outages, &quit))
    };
    say("ready");
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("stdin");
        let words: Vec<&str> = line.split(' ').collect();
        match words[..] {
            ["outage", tool, ms] => {
                let o = Outage {
                    tool: tool.to_owned(),
                    failing_until: Instant::now() + Duration::from_millis(ms.parse().expect("ms")),
                    failed: (0..n).map(|_| AtomicU64::new(0)).collect(),
                    probes: (0..n).map(|_| AtomicU64::new(0)).collect(),
                    stop: AtomicBool::new(false),
                };
                lock(&outages).push(Arc::new(o));
                say("ok");
            }
            ["stop", tool] => {
                for o in lock(&outages).iter().filter(|o| o.tool == tool) {
                    o.stop.store(true, Ordering::Relaxed);
                }
                say("ok");
            }
            ["report", tool] => {
                let all = lock(&outages).clone();
                let o = all.iter().rev().find(|o| o.tool == tool);
                let mut out = String::new();
                for (i, r) in replicas.iter().enumerate() {
                    let opened = lock(&r.opened.0).get(tool).copied().unwrap_or(0);
                    let (failed, probes) = o.map_or((0, 0), |o| {
                        (
                            o.failed[i].load(Ordering::Relaxed),
                            o.probes[i].load(Ordering::Relaxed),
                        )
                    });
                    out.push_str(&format!("r {i} {opened} {failed} {probes}\n"));
                }
                out.push_str("end");
                say(&out);
            }
            ["quit"] => break,
            _ => say("?"),
        }
    }
    quit.store(true, Ordering::Relaxed);
    let _ = caller.join();
    std::process::ExitCode::SUCCESS
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn say(s: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{s}").expect("stdout");
    out.flush().expect("stdout");
}

/// The callers: every replica calls one of its tools every 200 ms (round robin), and every
/// outage's tool every 50 ms.
fn calls(
    replicas: &[Replica],
    names: &[String],
    outages: &Mutex<Vec<Arc<Outage>>>,
    quit: &AtomicBool,
) {
    const TICK: Duration = Duration::from_millis(10);
    let mut tick: u64 = 0;
    while !quit.load(Ordering::Relaxed) {
        let started = Instant::now();
        let active: Vec<Arc<Outage>> = lock(outages)
            .iter()
            .filter(|o| !o.stop.load(Ordering::Relaxed))
            .cloned()
            .collect();
        for (i, r) in replicas.iter().enumerate() {
            let phase = i as u64;
            // Rest traffic: one healthy call per replica per 200 ms, spread over the ticks.
            if !names.is_empty() && (tick + phase) % 20 == 0 {
                let name = &names[((tick / 20) as usize + i) % names.len()];
                if let Some(p) = r.registry.check(name).permit() {
                    r.registry
                        .record_with_permit(name, p, CallOutcome::Success, TICK);
                }
            }
            for o in &active {
                if (tick + phase) % 5 != 0 {
                    continue;
                }
                let (permit, probe) = match r.registry.check(&o.tool) {
                    GateDecision::Allowed(p) => (p, false),
                    GateDecision::Probe(p) => (p, true),
                    GateDecision::Refused { .. } => continue,
                };
                if probe {
                    o.probes[i].fetch_add(1, Ordering::Relaxed);
                }
                let failing = Instant::now() < o.failing_until;
                let outcome = if failing {
                    o.failed[i].fetch_add(1, Ordering::Relaxed);
                    CallOutcome::Failure
                } else {
                    CallOutcome::Success
                };
                r.registry
                    .record_with_permit(&o.tool, permit, outcome, TICK);
            }
        }
        tick += 1;
        if let Some(rest) = TICK.checked_sub(started.elapsed()) {
            std::thread::sleep(rest);
        }
    }
}
