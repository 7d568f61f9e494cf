//! A realistic agent loop, no LLM needed: tools that are healthy, flaky, dead-then-recovering
//! and slow-but-reliable, a fallback route, a GenAI `execute_tool` span per call with the
//! breaker's gate inside it.
//!
//! ```text
//! cargo run --example agent                      # live view + health table, ~10 s
//! cargo run --example agent -- --seconds 30      # a longer run
//! OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 cargo run --example agent
//!                                                # ... and export traces + metrics over OTLP
//! cargo run --example agent --features tool-health-demo/status -- --status 127.0.0.1:9464
//!                                                # ... and serve the live status page there
//! ```
//!
//! With `--status ADDR` (demo feature `status`) the page is at `http://ADDR/`, the tools as
//! JSON at `/tools`, the event stream at `/events` and Prometheus's `/metrics`; the page
//! stays up after the run until Ctrl-C (or `--linger SECS`). `TOOL_HEALTH_STATUS_TOKEN` turns
//! the page's controls on. `--markup-tool` adds a tool whose name is HTML, to see that the
//! page shows it as text. `--fleet redis://HOST:PORT` (demo feature `fleet`) makes the demo a
//! replica of a fleet on that Valkey or Redis.
//!
//! Outcomes come from the spans alone: the [`ToolHealthLayer`] sees each `execute_tool` span,
//! reads its `error.type` / `otel.status_code`, and records the call when the span closes. The
//! agent code below never calls `record_*`: it opens a span, asks the gate, runs the tool and
//! writes `error.type` when the tool fails — what any OpenTelemetry-instrumented agent does.
//!
//! With `OTEL_EXPORTER_OTLP_ENDPOINT` (or a per-signal endpoint) set, `tool_health::otlp::init`
//! exports traces and metrics (`OTEL_EXPORTER_OTLP_PROTOCOL`: `http/protobuf`, the default, or
//! `grpc`; service name `tool-health-demo`) and the guard flushes on exit, bounded in time
//! even when the collector is down. The example always has the `otlp` module: the crate's
//! dev-dependency on itself turns the feature on for examples and tests.

use std::env;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use tool_health::observe::HealthObserver;
use tool_health::{
    BreakerState, CircuitBreakerConfig, HealthRouter, HealthRouterBuilder, ToolHealthLayer,
    ToolHealthRegistry, Transition, REFUSAL_MESSAGE,
};
use tracing::field::Empty;
use tracing_subscriber::layer::SubscriberExt as _;

const SERVICE_NAME: &str = "tool-health-demo";
const AGENTS: usize = 2;

/// How a simulated tool behaves over the run (`at`: the fraction of the run elapsed).
#[derive(Debug, Clone, Copy)]
enum Behaviour {
    /// Fast and always fine.
    Healthy { ms: (u64, u64) },
    /// Fails `percent` of the time: a 503 or a slow timeout.
    Flaky { ms: (u64, u64), percent: u64 },
    /// Its database is down between `from` and `to` (fractions of the run): fails fast.
    DeadThenRecovering { ms: (u64, u64), from: f64, to: f64 },
    /// Slow, but never fails: latency never feeds the score.
    SlowReliable { ms: (u64, u64) },
}

#[derive(Debug)]
struct Tool {
    name: &'static str,
    behaviour: Behaviour,
}

/// A tool whose name is markup (`--markup-tool`): the status page must show it as text.
const MARKUP_TOOL: &str = "<img src=x onerror=\"window.pwned=1\"><b>markup</b>&amp;";

const TOOLS: [Tool; 6] = [
    Tool {
        name: "web_search",
        behaviour: Behaviour::Flaky {
            ms: (30, 90),
            percent: 45,
        },
    },
    Tool {
        name: "backup_search",
        behaviour: Behaviour::Healthy { ms: (60, 120) },
    },
    Tool {
        name: "weather_api",
        behaviour: Behaviour::Healthy { ms: (20, 60) },
    },
    Tool {
        name: "sql_query",
        behaviour: Behaviour::DeadThenRecovering {
            ms: (10, 40),
            from: 0.12,
            to: 0.55,
        },
    },
    Tool {
        name: "code_interpreter",
        behaviour: Behaviour::SlowReliable { ms: (250, 450) },
    },
    Tool {
        name: MARKUP_TOOL,
        behaviour: Behaviour::Healthy { ms: (5, 15) },
    },
];

/// The tools the "model" asks for (the backup is only reached through the fallback route).
const REQUESTABLE: [&str; 4] = ["web_search", "weather_api", "sql_query", "code_interpreter"];
const WEIGHTS: [u64; 4] = [3, 3, 4, 1];

impl Tool {
    fn by_name(name: &str) -> &'static Tool {
        TOOLS.iter().find(|t| t.name == name).unwrap_or(&TOOLS[0])
    }

    /// How long the call takes and whether it works (`Err`: its `error.type`).
    fn run(&self, at: f64, rng: &mut Rng) -> (Duration, Result<(), &'static str>) {
        let between = |rng: &mut Rng, (lo, hi): (u64, u64)| {
            Duration::from_millis(lo + rng.below(hi - lo + 1))
        };
        match self.behaviour {
            Behaviour::Healthy { ms } | Behaviour::SlowReliable { ms } => {
                (between(rng, ms), Ok(()))
            }
            Behaviour::Flaky { ms, percent } => {
                if rng.below(100) >= percent {
                    (between(rng, ms), Ok(()))
                } else if rng.below(2) == 0 {
                    (between(rng, ms), Err("http_503"))
                } else {
                    (between(rng, (150, 250)), Err("timeout"))
                }
            }
            Behaviour::DeadThenRecovering { ms, from, to } => {
                if (from..to).contains(&at) {
                    (between(rng, (2, 6)), Err("connection_refused"))
                } else {
                    (between(rng, ms), Ok(()))
                }
            }
        }
    }
}

/// xorshift64*: a dependency-free, seeded, good-enough generator for a demo.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
    }

    fn pick(&mut self) -> &'static str {
        let mut roll = self.below(WEIGHTS.iter().sum());
        for (tool, w) in REQUESTABLE.iter().zip(WEIGHTS) {
            if roll < w {
                return tool;
            }
            roll -= w;
        }
        REQUESTABLE[0]
    }
}

/// Prints each breaker transition as it happens (called synchronously by the registry).
#[derive(Debug)]
struct LiveView;

impl HealthObserver for LiveView {
    fn on_transition(&self, tool: &str, t: &Transition, at: Duration) {
        let mark = match t.to {
            BreakerState::Open => "✗",
            BreakerState::HalfOpen => "?",
            BreakerState::Closed => "✓",
        };
        println!(
            "{:>7.2}s  {mark} {:<17} {:>9} → {:<9}  {}",
            at.as_secs_f64(),
            tool,
            t.from.as_str(),
            t.to.as_str(),
            t.reason.as_str()
        );
    }
}

/// What the agents did, for the closing line.
#[derive(Debug, Default)]
struct Tally {
    turns: AtomicU64,
    calls: AtomicU64,
    refused: AtomicU64,
    rerouted: AtomicU64,
    gate: GateLatency,
}

/// How long the gate takes, as the agent loop sees it: a log2 histogram of nanoseconds, so
/// the e2e can check that an exporter outage does not slow the agents down.
#[derive(Debug)]
struct GateLatency {
    /// `buckets[i]` counts gates that took less than 2^i ns.
    buckets: [AtomicU64; 40],
    max_ns: AtomicU64,
}

impl Default for GateLatency {
    fn default() -> Self {
        Self {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            max_ns: AtomicU64::new(0),
        }
    }
}

impl GateLatency {
    fn record(&self, took: Duration) {
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        let i = (64 - ns.leading_zeros() as usize).min(self.buckets.len() - 1);
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.max_ns.fetch_max(ns, Ordering::Relaxed);
    }

    /// The upper bound (ns) of the bucket holding quantile `q`.
    fn quantile(&self, q: f64) -> u64 {
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        let target = (q * total as f64).ceil() as u64;
        let mut seen = 0;
        for (i, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= target.max(1) {
                return 1 << i;
            }
        }
        self.max_ns.load(Ordering::Relaxed)
    }

    fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }
}

/// One tool call the GenAI way: an `execute_tool` span, the gate inside it, the tool, and
/// `error.type` on failure. The layer records the outcome when the span closes.
fn execute_tool(
    registry: &ToolHealthRegistry,
    tool: &'static Tool,
    call_id: u64,
    at: f64,
    rng: &mut Rng,
    tally: &Tally,
) -> Result<String, String> {
    let span = tracing::info_span!(
        "execute_tool",
        otel.name = format!("execute_tool {}", tool.name),
        otel.kind = "internal",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = tool.name,
        gen_ai.tool.call.id = format!("call_{call_id:06}"),
        error.type = Empty,
        otel.status_code = Empty,
        otel.status_description = Empty,
    );
    let _inside = span.enter();
    tally.calls.fetch_add(1, Ordering::Relaxed);

    // The gate, inside the span: the layer binds the decision (allowed / probe / refused) to
    // it and annotates it; a refused span is recorded as a refusal, not a failure.
    let gate_started = Instant::now();
    let allowed = registry.allow_request(tool.name);
    tally.gate.record(gate_started.elapsed());
    if !allowed {
        tally.refused.fetch_add(1, Ordering::Relaxed);
        return Err(REFUSAL_MESSAGE.to_owned()); // soft: the model reads it and moves on
    }

    let (latency, result) = tool.run(at, rng);
    thread::sleep(latency);
    match result {
        Ok(()) => Ok(format!("{} ok", tool.name)),
        Err(error_type) => {
            let message = format!("{} failed: {error_type}", tool.name);
            span.record("error.type", error_type);
            span.record("otel.status_code", "error");
            span.record("otel.status_description", message.as_str());
            Err(message)
        }
    }
}

/// One agent: turns of 1–3 tool calls until the deadline.
fn agent(
    id: usize,
    registry: Arc<ToolHealthRegistry>,
    router: Arc<HealthRouter>,
    tally: Arc<Tally>,
    start: Instant,
    run_for: Duration,
    markup_tool: bool,
) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (id as u64 + 1).wrapping_mul(0xbf58_476d_1ce4_e5b9));
    let agent_name = format!("demo-agent-{id}");
    let mut call_id = (id as u64) * 1_000_000;
    while start.elapsed() < run_for {
        let turn = tracing::info_span!(
            "invoke_agent",
            otel.name = format!("invoke_agent {agent_name}"),
            gen_ai.operation.name = "invoke_agent",
            gen_ai.agent.name = agent_name.as_str(),
        );
        let _turn = turn.enter();
        tally.turns.fetch_add(1, Ordering::Relaxed);
        for _ in 0..=rng.below(3) {
            let requested = rng.pick();
            // Route around a sick primary: gate and record the name actually called.
            let resolved = router.resolve_tool(requested, &registry);
            if resolved != requested {
                tally.rerouted.fetch_add(1, Ordering::Relaxed);
            }
            let at = start.elapsed().as_secs_f64() / run_for.as_secs_f64();
            call_id += 1;
            let _answer = execute_tool(
                &registry,
                Tool::by_name(resolved),
                call_id,
                at,
                &mut rng,
                &tally,
            );
        }
        if markup_tool && rng.below(4) == 0 {
            let at = start.elapsed().as_secs_f64() / run_for.as_secs_f64();
            call_id += 1;
            let tool = Tool::by_name(MARKUP_TOOL);
            let _answer = execute_tool(&registry, tool, call_id, at, &mut rng, &tally);
        }
        drop(_turn);
        thread::sleep(Duration::from_millis(30 + rng.below(50))); // the model "thinks"
    }
}

fn print_table(registry: &ToolHealthRegistry) {
    // Refusals are not calls: the tool never ran. `ran` = succeeded + failed (+ caller errors
    // and cancellations, none in this demo); `refused` is counted apart.
    println!();
    println!(
        "{:<17} {:<10} {:>6}  {:<9} {:>5} {:>7} {:>7} │ {:>8} {:>9} {:>9}",
        "tool", "status", "score", "breaker", "ran", "ok", "failed", "refused", "avg", "max"
    );
    println!("{}", "─".repeat(98));
    for s in registry.health_summary() {
        println!(
            "{:<17} {:<10} {:>6.3}  {:<9} {:>5} {:>7} {:>7} │ {:>8} {:>7}ms {:>7}ms",
            s.tool,
            s.status.as_str(),
            s.score,
            s.breaker.as_str(),
            s.total_calls,
            s.success_count,
            s.failure_count,
            s.refused_count,
            s.avg_duration.as_millis(),
            s.max_duration.as_millis(),
        );
    }
    println!(
        "ran: calls that reached the tool; refused: calls the open breaker turned away (the tool \
         never ran; not failures). The score is what the calls say; the breaker decides."
    );
}

/// The OTLP endpoint from the environment, when exporting was asked for.
fn otlp_endpoint() -> Option<String> {
    [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    ]
    .iter()
    .find_map(|var| env::var(var).ok().filter(|v| !v.trim().is_empty()))
}

/// The command line.
#[derive(Debug, Default)]
struct Args {
    seconds: f64,
    /// Print the gate's latency percentiles (the e2e compares runs with them).
    gate_latency: bool,
    /// Serve the status page on this address.
    status: Option<String>,
    /// With `status`: how long the page stays up after the run (`None`: until Ctrl-C).
    linger: Option<Duration>,
    /// Also call a tool whose name is markup.
    markup_tool: bool,
    /// Join a fleet on this Valkey/Redis URL.
    fleet: Option<String>,
}

const USAGE: &str = "usage: cargo run --example agent [-- --seconds N] [--gate-latency] \
                     [--markup-tool] [--status ADDR [--linger SECS]] [--fleet redis://HOST:PORT]";

fn parse_args() -> Result<Args, String> {
    let mut args = env::args().skip(1);
    let mut parsed = Args {
        seconds: 10.0,
        ..Args::default()
    };
    let positive = |flag: &str, v: String| {
        v.parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s >= 0.0)
            .ok_or_else(|| format!("{flag}: not a number of seconds: {v}"))
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--gate-latency" => parsed.gate_latency = true,
            "--markup-tool" => parsed.markup_tool = true,
            "--status" => {
                let v = args
                    .next()
                    .ok_or("--status needs an address, e.g. 127.0.0.1:9464")?;
                if !cfg!(feature = "status") {
                    return Err(format!(
                        "--status {v}: this build has no status page; it is the demo's `status` \
                         feature: cargo run --example agent --features tool-health-demo/status \
                         -- --status {v}"
                    ));
                }
                parsed.status = Some(v);
            }
            "--linger" => {
                let v = args.next().ok_or("--linger needs a number of seconds")?;
                parsed.linger = Some(Duration::from_secs_f64(positive("--linger", v)?));
            }
            "--fleet" => {
                let v = args
                    .next()
                    .ok_or("--fleet needs a URL, e.g. redis://127.0.0.1:6379")?;
                if !cfg!(feature = "fleet") {
                    return Err(format!(
                        "--fleet {v}: this build has no fleet mode; it is the demo's `fleet` \
                         feature: cargo run --example agent --features tool-health-demo/fleet \
                         -- --fleet {v}"
                    ));
                }
                parsed.fleet = Some(v);
            }
            "--seconds" => {
                let v = args.next().ok_or("--seconds needs a value")?;
                parsed.seconds = v
                    .parse::<f64>()
                    .ok()
                    .filter(|s| s.is_finite() && *s > 0.0)
                    .ok_or_else(|| format!("--seconds: not a positive number: {v}"))?;
            }
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other:?} (try --help)")),
        }
    }
    if parsed.linger.is_some() && parsed.status.is_none() {
        return Err("--linger is for --status".to_owned());
    }
    Ok(parsed)
}

/// Serves the status page, the JSON, the events and `/metrics` on `addr` (on `runtime`);
/// returns the page's URL.
#[cfg(feature = "status")]
fn start_status(
    runtime: &tokio::runtime::Runtime,
    registry: &Arc<ToolHealthRegistry>,
    addr: &str,
    fleet: Option<&Fleet>,
) -> Result<String, String> {
    use tool_health::status::{self, PrometheusMetrics};

    let metrics = PrometheusMetrics::publish(registry).map_err(|e| format!("--status: {e}"))?;
    #[cfg(feature = "fleet")]
    if let (Some(fleet), Some(meter)) = (fleet, metrics.meter()) {
        fleet.publish_metrics(&meter);
    }
    #[cfg(not(feature = "fleet"))]
    let _ = fleet;
    let mut builder = status::builder(Arc::clone(registry)).prometheus(metrics);
    // A secret never comes from the command line (other users can read it there).
    if let Some(token) = env::var("TOOL_HEALTH_STATUS_TOKEN")
        .ok()
        .filter(|t| !t.trim().is_empty())
    {
        builder = builder.control_token(token.trim());
    }
    let status = {
        let _in_runtime = runtime.enter();
        builder.build().map_err(|e| format!("--status: {e}"))?
    };
    let listener = std::net::TcpListener::bind(addr)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|e| format!("--status {addr}: cannot listen: {e}"))?;
    let local = listener
        .local_addr()
        .map_err(|e| format!("--status {addr}: {e}"))?;
    let app = status.router();
    runtime.spawn(async move {
        match tokio::net::TcpListener::from_std(listener) {
            Ok(listener) => {
                // Answers go out when written (TCP_NODELAY: no wait for the browser's ACK).
                if let Err(e) = axum::serve(tool_health::web::nodelay(listener), app).await {
                    eprintln!("status page: {e}");
                }
            }
            Err(e) => eprintln!("status page: {e}"),
        }
    });
    Ok(format!("http://{local}/"))
}

// Named only by the status page's wiring.
#[cfg(all(feature = "fleet", feature = "status"))]
use tool_health::fleet::Fleet;
/// Without fleet mode there is no fleet to publish.
#[cfg(not(feature = "fleet"))]
#[derive(Debug)]
enum Fleet {}

fn main() -> ExitCode {
    let Args {
        seconds,
        gate_latency,
        status,
        linger,
        markup_tool,
        fleet: fleet_url,
    } = match parse_args() {
        Ok(a) => a,
        Err(msg) => {
            eprintln!("{msg}");
            return ExitCode::from(2);
        }
    };
    let run_for = Duration::from_secs_f64(seconds);
    let config = CircuitBreakerConfig {
        failure_threshold: 3,
        recovery_duration: Duration::from_millis(800),
        probe_timeout: Duration::from_secs(2),
    };
    let registry = Arc::new(ToolHealthRegistry::with_config(config.clone()));
    registry.add_observer(Arc::new(LiveView));
    let router = Arc::new(
        HealthRouterBuilder::new()
            .add_fallback("web_search", vec!["backup_search".into()])
            .build(),
    );

    println!(
        "tool-health demo: {AGENTS} agents for {seconds} s; breaker: {} failures trip it, \
         {:?} cooldown, {:?} probe lease",
        config.failure_threshold, config.recovery_duration, config.probe_timeout
    );
    println!(
        "tools: web_search (flaky; falls back to backup_search), weather_api (healthy), \
         sql_query (its database dies for a while), code_interpreter (slow but reliable)"
    );

    // Telemetry: OTLP when asked for, otherwise the layer alone (the live view and the table
    // need nothing else).
    let endpoint = otlp_endpoint();
    // gRPC exporters, the status page and the fleet run on a tokio runtime; the agents
    // themselves are plain threads.
    let mut runtime = None;
    if endpoint.is_some() || status.is_some() || fleet_url.is_some() {
        match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("demo-io")
            .enable_all()
            .build()
        {
            Ok(rt) => runtime = Some(rt),
            Err(e) => {
                eprintln!("cannot start the runtime: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let mut telemetry = None;
    match (&endpoint, &runtime) {
        (Some(endpoint), Some(rt)) => {
            let mut builder = tool_health::otlp::builder(SERVICE_NAME)
                .registry(Arc::clone(&registry))
                .shutdown_timeout(Duration::from_secs(5));
            if env::var("OTEL_METRIC_EXPORT_INTERVAL").map_or(true, |v| v.trim().is_empty()) {
                builder = builder.metric_export_interval(Duration::from_secs(2));
            }
            let guard = {
                let _in_runtime = rt.enter();
                builder.init()
            };
            match guard {
                Ok(guard) => telemetry = Some(guard),
                Err(e) => {
                    eprintln!("cannot set up OTLP export: {e}");
                    return ExitCode::FAILURE;
                }
            }
            let protocol = env::var("OTEL_EXPORTER_OTLP_PROTOCOL")
                .ok()
                .filter(|p| !p.trim().is_empty()) // empty counts as unset
                .unwrap_or_else(|| "http/protobuf".to_owned());
            println!("exporting traces and metrics over OTLP ({protocol}) to {endpoint}");
        }
        _ => {
            let subscriber =
                tracing_subscriber::registry().with(ToolHealthLayer::new(Arc::clone(&registry)));
            if let Err(e) = tracing::subscriber::set_global_default(subscriber) {
                eprintln!("cannot install the tracing subscriber: {e}");
                return ExitCode::FAILURE;
            }
            println!("not exporting (set OTEL_EXPORTER_OTLP_ENDPOINT to send traces and metrics)");
        }
    }

    #[cfg(feature = "fleet")]
    let fleet = match (&fleet_url, &runtime) {
        (Some(url), Some(rt)) => {
            let _in_runtime = rt.enter();
            match tool_health::fleet::FleetBuilder::new(url.as_str()).start(&registry) {
                Ok(fleet) => {
                    println!("fleet mode: a replica of the fleet on {url}");
                    Some(fleet)
                }
                Err(e) => {
                    eprintln!("--fleet {url}: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
        _ => None,
    };
    #[cfg(not(feature = "fleet"))]
    let fleet: Option<Fleet> = {
        let _ = &fleet_url;
        None
    };
    #[cfg(feature = "status")]
    if let (Some(addr), Some(rt)) = (&status, &runtime) {
        match start_status(rt, &registry, addr, fleet.as_ref()) {
            Ok(url) => {
                println!("status page: {url} (JSON at {url}tools, Prometheus at {url}metrics)")
            }
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::FAILURE;
            }
        }
    }
    println!();
    println!("   time    tool                   from → to         why");

    let tally = Arc::new(Tally::default());
    let start = Instant::now();
    let agents: Vec<_> = (0..AGENTS)
        .map(|id| {
            let (registry, router, tally) = (
                Arc::clone(&registry),
                Arc::clone(&router),
                Arc::clone(&tally),
            );
            thread::Builder::new()
                .name(format!("agent-{id}"))
                .spawn(move || agent(id, registry, router, tally, start, run_for, markup_tool))
        })
        .collect();
    // An operator isolates weather_api for a while mid-run (an incident elsewhere, say): every
    // call is refused softly until the isolation lapses on its own.
    let operator = {
        let registry = Arc::clone(&registry);
        thread::Builder::new()
            .name("operator".to_owned())
            .spawn(move || {
                thread::sleep(run_for.mul_f64(0.4));
                let isolate_for = run_for.mul_f64(0.15);
                registry.force_open_for("weather_api", isolate_for);
                println!(
                    "{:>7.2}s  ⊘ {:<17} operator: force open for {:.1} s (isolated; refused softly)",
                    registry.now().as_secs_f64(),
                    "weather_api",
                    isolate_for.as_secs_f64()
                );
                thread::sleep(isolate_for);
                println!(
                    "{:>7.2}s  ⊙ {:<17} operator: isolation lapsed, the breaker decides again",
                    registry.now().as_secs_f64(),
                    "weather_api"
                );
                registry.release_control("weather_api");
            })
    };
    for handle in agents.into_iter().flatten() {
        let _ = handle.join();
    }
    if let Ok(operator) = operator {
        let _ = operator.join();
    }
    let ran = start.elapsed();

    print_table(&registry);
    println!();
    let requests = tally.calls.load(Ordering::Relaxed);
    let refused = tally.refused.load(Ordering::Relaxed);
    println!(
        "{} turns in {:.1} s asked for {requests} tool calls: {} ran, {refused} refused by an \
         open breaker (the model was told \"{REFUSAL_MESSAGE}\"), {} rerouted web_search → \
         backup_search",
        tally.turns.load(Ordering::Relaxed),
        ran.as_secs_f64(),
        requests - refused,
        tally.rerouted.load(Ordering::Relaxed),
    );
    if gate_latency {
        // A debug build's figures compare runs of the same build (the e2e's use); the
        // library's speed is measured in `benches/` (BENCHMARKS.md).
        println!(
            "gate latency over {} calls ({} build, for comparing runs only): p50 < {} ns, \
             p99 < {} ns, max {} ns",
            tally.gate.count(),
            if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            },
            tally.gate.quantile(0.50),
            tally.gate.quantile(0.99),
            tally.gate.max_ns.load(Ordering::Relaxed),
        );
    }

    if let Some(url) = status.as_ref() {
        // The page stays up for a look after the run.
        match linger {
            Some(d) => {
                println!("the status page stays up for {:.0} s", d.as_secs_f64());
                thread::sleep(d);
            }
            None => {
                println!("the status page stays up at {url}: Ctrl-C to stop");
                loop {
                    thread::sleep(Duration::from_secs(3600));
                }
            }
        }
    }
    // The replica leaves the fleet before the exporters flush (without fleet mode: no fleet).
    #[cfg(feature = "fleet")]
    drop(fleet);
    #[cfg(not(feature = "fleet"))]
    let _ = fleet;

    if let (Some(guard), Some(endpoint)) = (telemetry, endpoint) {
        let flush = Instant::now();
        match guard.shutdown() {
            Ok(()) => println!(
                "flushed traces and metrics to {endpoint} in {:.2} s",
                flush.elapsed().as_secs_f64()
            ),
            Err(e) => eprintln!(
                "warning: {e} (after {:.2} s) — is a collector listening at {endpoint}?",
                flush.elapsed().as_secs_f64()
            ),
        }
    }
    if let Some(rt) = runtime {
        rt.shutdown_timeout(Duration::from_millis(500));
    }
    ExitCode::SUCCESS
}
