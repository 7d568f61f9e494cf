//! `fleet_outage`: failed calls per outage and probes per recovery with **separate processes**
//! (issue 20, item 7) — each replica a process of this bench binary with its own registry (the
//! system clock) and, with fleet mode on, its own `Fleet` on the server; each calls one tool
//! sequentially every 20 ms (a random phase per process). The tool's health follows a
//! wall-clock schedule every process reads (the same machine, the same clock): healthy calls
//! answer in 1–5 ms, and during an outage every call started fails, answered within 10 ms
//! (uniformly). Outages are shorter than the cooldown, so every failure counted is one made
//! before the breakers opened (the probe comes after the outage: it succeeds).
//!
//! The parent starts the processes, waits for them, and sums what each reports per outage. It
//! also splits each outage's failed calls at the instant the threshold-th failure was answered
//! fleet-wide: the calls started before it failed whatever the fleet does (nobody could know
//! yet: the floor), those started after are what spreading the news cost.

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tool_health::fleet::FleetBuilder;
use tool_health::observe::HealthObserver;
use tool_health::{
    BreakerState, CallOutcome, CircuitBreakerConfig, GateDecision, ToolHealthRegistry, Transition,
};

/// When the breaker opened, each time (µs since the epoch).
#[derive(Debug, Default)]
struct Opens(std::sync::Mutex<Vec<u64>>);

impl HealthObserver for Opens {
    fn on_transition(&self, _tool: &str, t: &Transition, _at: Duration) {
        if t.to == BreakerState::Open {
            self.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(unix_us());
        }
    }
}

/// The environment variable that makes this binary a replica process.
pub(crate) const ROLE: &str = "TOOL_HEALTH_FLEET_BENCH_REPLICA";

const TOOL: &str = "search";
const THRESHOLD: u32 = 3;
const PERIOD: Duration = Duration::from_millis(20);
const OUTAGE: Duration = Duration::from_millis(1500);
const COOLDOWN: Duration = Duration::from_secs(3);
/// From one outage's start to the next: the outage, the cooldown, the recovery and a margin.
const CYCLE: Duration = Duration::from_secs(6);
/// From the start instant to the first outage: every process connected and calling.
const LEAD_IN: Duration = Duration::from_secs(3);

fn unix_ms() -> u64 {
    unix_us() / 1000
}

fn unix_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// A tiny deterministic generator (xorshift64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in `[0, max)`.
    fn below(&mut self, max: Duration) -> Duration {
        Duration::from_nanos(self.next() % (max.as_nanos() as u64).max(1))
    }
}

/// What one process saw in one outage (and the recovery after it).
#[derive(Debug, Default, Clone, Copy)]
struct Seen {
    /// Calls started during the outage that failed (probes included: none are expected).
    failed: u64,
    /// Probes granted during the outage (they fail: none are expected).
    failed_probes: u64,
    /// Probes granted after the outage, before the next one (the recovery's).
    recovery_probes: u64,
}

/// The replica process: reads its settings from the environment, calls the tool on schedule,
/// prints one line per outage (`outage i failed failed_probes recovery_probes`).
pub(crate) fn replica() -> std::process::ExitCode {
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let start: u64 = var("TH_BENCH_START").parse().expect("start");
    let outages: usize = var("TH_BENCH_OUTAGES").parse().expect("outages");
    let mut rng = Rng(var("TH_BENCH_SEED").parse::<u64>().expect("seed") | 1);
    let fleet_on = var("TH_BENCH_FLEET") == "on";
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
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
    let opens = Arc::new(Opens::default());
    registry.add_observer(Arc::clone(&opens) as Arc<dyn HealthObserver>);
    let fleet = fleet_on.then(|| {
        let _entered = runtime.enter();
        let fleet = FleetBuilder::new(var("TH_BENCH_URL"))
            .prefix(var("TH_BENCH_PREFIX"))
            .start(&registry)
            .expect("fleet mode starts");
        runtime
            .block_on(fleet.wait_connected(Duration::from_secs(10)))
            .expect("the store answers");
        fleet
    });
    let t = |ms: u64| Duration::from_millis(ms);
    let outage_at = |i: usize| LEAD_IN + CYCLE * i as u32;
    let end = start + (LEAD_IN + CYCLE * outages as u32).as_millis() as u64;
    // Which outage a call started at `now` (ms since the start) belongs to, and whether it
    // falls in the outage itself.
    let phase_of = |now: Duration| -> Option<(usize, bool)> {
        let since = now.checked_sub(LEAD_IN)?;
        let i = (since.as_nanos() / CYCLE.as_nanos()) as usize;
        (i < outages).then(|| (i, since - CYCLE * (i as u32) < OUTAGE))
    };
    let mut seen = vec![Seen::default(); outages];
    // Per outage: (started, answered) of each failed call, µs since the epoch.
    let mut failures: Vec<Vec<(u64, u64)>> = vec![Vec::new(); outages];
    let mut next = start + rng.below(PERIOD).as_millis() as u64;
    loop {
        let now = unix_ms();
        if now >= end {
            break;
        }
        if now < next {
            std::thread::sleep(t(next - now));
            continue;
        }
        next += PERIOD.as_millis() as u64;
        let at = t(now.saturating_sub(start));
        let phase = phase_of(at);
        let down = phase.is_some_and(|(_, d)| d);
        let (permit, probe) = match registry.check(TOOL) {
            GateDecision::Allowed(p) => (p, false),
            GateDecision::Probe(p) => (p, true),
            GateDecision::Refused { .. } => continue,
        };
        let answer = if down {
            rng.below(Duration::from_millis(10))
        } else {
            t(1) + rng.below(Duration::from_millis(4))
        };
        let started = unix_us();
        std::thread::sleep(answer);
        let answered = unix_us();
        let outcome = if down {
            CallOutcome::Failure
        } else {
            CallOutcome::Success
        };
        registry.record_with_permit(TOOL, permit, outcome, answer);
        if let Some((i, during)) = phase {
            if during {
                failures[i].push((started, answered));
            }
            let s = &mut seen[i];
            match (during, probe) {
                (true, false) => s.failed += 1,
                (true, true) => {
                    s.failed += 1;
                    s.failed_probes += 1;
                }
                (false, true) if at >= outage_at(i) + OUTAGE => s.recovery_probes += 1,
                _ => {}
            }
        }
    }
    for (i, s) in seen.iter().enumerate() {
        println!(
            "outage {i} {} {} {}",
            s.failed, s.failed_probes, s.recovery_probes
        );
        for (started, answered) in &failures[i] {
            println!("fail {i} {started} {answered}");
        }
        // When this replica's breaker opened in this outage (the first time).
        let from = start + outage_at(i).as_millis() as u64;
        let to = from + CYCLE.as_millis() as u64;
        let opened = opens
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .copied()
            .find(|us| (from * 1000..to * 1000).contains(us));
        if let Some(us) = opened {
            println!("open {i} {us}");
        }
    }
    if let Some(f) = fleet {
        runtime.block_on(f.shutdown());
    }
    std::process::ExitCode::SUCCESS
}

/// One run: `n` processes, fleet mode on or off: the sums per outage, per outage the failed
/// calls started before the threshold-th failure was answered fleet-wide (the floor), and how
/// long after that instant each replica's breaker opened (ms).
fn run(
    url: &str,
    n: usize,
    fleet: bool,
    outages: usize,
    seed: u64,
) -> (Vec<Seen>, Vec<u64>, Vec<f64>) {
    let exe = std::env::current_exe().expect("this bench's binary");
    let prefix = super::prefix(&format!("outage-{n}-{fleet}"));
    // Far enough ahead for every process to start and connect.
    let start = unix_ms() + 2_000 + 150 * n as u64;
    let children: Vec<_> = (0..n)
        .map(|i| {
            Command::new(&exe)
                .env(ROLE, "1")
                .env("TH_BENCH_URL", url)
                .env("TH_BENCH_PREFIX", &prefix)
                .env("TH_BENCH_START", start.to_string())
                .env("TH_BENCH_OUTAGES", outages.to_string())
                .env("TH_BENCH_SEED", (seed * 1000 + i as u64).to_string())
                .env("TH_BENCH_FLEET", if fleet { "on" } else { "off" })
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("a replica process starts")
        })
        .collect();
    let mut sums = vec![Seen::default(); outages];
    let mut failures: Vec<Vec<(u64, u64)>> = vec![Vec::new(); outages];
    let mut opened: Vec<Vec<u64>> = vec![Vec::new(); outages];
    for child in children {
        let out = child.wait_with_output().expect("the replica ends");
        assert!(out.status.success(), "a replica process failed");
        for line in out.stdout.lines() {
            let line = line.expect("utf-8");
            let (kind, rest) = line.split_once(' ').unwrap_or_default();
            let v: Vec<u64> = rest.split(' ').filter_map(|w| w.parse().ok()).collect();
            match (kind, &v[..]) {
                ("outage", &[i, failed, failed_probes, recovery_probes]) => {
                    let s = &mut sums[i as usize];
                    s.failed += failed;
                    s.failed_probes += failed_probes;
                    s.recovery_probes += recovery_probes;
                }
                ("fail", &[i, started, answered]) => {
                    failures[i as usize].push((started, answered));
                }
                ("open", &[i, us]) => opened[i as usize].push(us),
                _ => {}
            }
        }
    }
    let mut spread = Vec::new();
    let floors = failures
        .iter_mut()
        .zip(&opened)
        .map(|(f, opened)| {
            f.sort_by_key(|&(_, answered)| answered);
            match f.get(THRESHOLD as usize - 1) {
                Some(&(_, known)) => {
                    spread.extend(
                        opened
                            .iter()
                            .map(|us| us.saturating_sub(known) as f64 / 1000.0),
                    );
                    f.iter().filter(|&&(started, _)| started < known).count() as u64
                }
                None => f.len() as u64,
            }
        })
        .collect();
    (sums, floors, spread)
}

/// The measured part: 4 and 16 processes, fleet mode off and on.
pub(crate) fn outages(url: &str, full: bool) {
    let outages = if full { 8 } else { 2 };
    println!(
        "\nfleet_outage: separate processes, each calling `{TOOL}` every {} ms; {outages} \
         outages of {:.1} s (failures answered within 10 ms, healthy calls in 1–5 ms); threshold \
         {THRESHOLD}, cooldown {:.0} s",
        PERIOD.as_millis(),
        OUTAGE.as_secs_f64(),
        COOLDOWN.as_secs_f64()
    );
    println!(
        "  {:<9} {:<6} {:>24} {:>12} {:>7} {:>20} {:>22}",
        "processes",
        "fleet",
        "failed calls per outage",
        "(min – max)",
        "floor",
        "over the floor (max)",
        "probes per recovery"
    );
    for n in [4, 16] {
        for fleet in [false, true] {
            let started = Instant::now();
            let (sums, floors, mut spread) =
                run(url, n, fleet, outages, n as u64 * 10 + u64::from(fleet));
            spread.sort_by(f64::total_cmp);
            let at = |p: f64| {
                spread
                    .get(((spread.len() as f64 - 1.0) * p).round() as usize)
                    .copied()
                    .unwrap_or(f64::NAN)
            };
            let mean = |v: &[u64]| v.iter().sum::<u64>() as f64 / v.len().max(1) as f64;
            let failed: Vec<u64> = sums.iter().map(|s| s.failed).collect();
            let probes: Vec<u64> = sums.iter().map(|s| s.recovery_probes).collect();
            let failed_probes: u64 = sums.iter().map(|s| s.failed_probes).sum();
            // Each outage's failed calls beyond its own floor.
            let over: Vec<u64> = failed
                .iter()
                .zip(&floors)
                .map(|(f, fl)| f.saturating_sub(*fl))
                .collect();
            println!(
                "  {:<9} {:<6} {:>24.2} {:>12} {:>7.2} {:>20} {:>22}   ({failed_probes} failed probes; \
                 opened after the threshold: p50 {:.1} ms, p90 {:.1} ms, max {:.1} ms; {:.0} s)",
                n,
                if fleet { "on" } else { "off" },
                mean(&failed),
                format!(
                    "{} – {}",
                    failed.iter().min().unwrap_or(&0),
                    failed.iter().max().unwrap_or(&0)
                ),
                mean(&floors),
                format!("{:.2} ({})", mean(&over), over.iter().max().unwrap_or(&0)),
                format!("{probes:?}"),
                at(0.5),
                at(0.9),
                at(1.0),
                started.elapsed().as_secs_f64()
            );
        }
    }
    println!(
        "  (goal, fleet on: at most the floor + 1 per outage, with 4 and 16 processes; floor: the \
         failed calls started before the {THRESHOLD}rd failure was answered fleet-wide, which no \
         coordination can save)"
    );
}
