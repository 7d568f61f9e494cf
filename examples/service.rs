//! An async service the way people write them, with tool-health added: a multi-thread tokio
//! runtime, an `EnvFilter` from `RUST_LOG` on a `fmt` layer, tool calls spawned as tasks, a
//! retry wrapper, a tool that hangs (cut off by the call helper's timeout), a flaky tool with
//! a fallback route, and a planner that asks the router what to offer.
//!
//! ```text
//! RUST_LOG=warn cargo run --example service     # what CI runs: about 3 s
//! RUST_LOG=info cargo run --example service     # ... with the probes and recoveries
//! ```
//!
//! It checks its own outcome and exits non-zero when a check fails: the flaky tool trips,
//! the hanging tool trips, no refusal is counted as a failure (every failure the registry
//! counts is one the callers saw), and every transition was logged (target `tool_health`).

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tool_health::observe::HealthObserver;
use tool_health::observe::LOG_TARGET;
use tool_health::{
    BreakerState, CallError, CircuitBreakerConfig, ErrorClass, HealthRouter, HealthRouterBuilder,
    ToolHealthLayer, ToolHealthRegistry, Transition, TransitionReason,
};
use tracing::Instrument as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{fmt, EnvFilter, Layer};

const RUN_FOR: Duration = Duration::from_millis(2_500);
const AGENTS: u64 = 4;
const TOOL_TIMEOUT: Duration = Duration::from_millis(150);

/// The tools the model is offered; `backup_search` is only reached through the router.
const TOOLS: [&str; 3] = ["search", "slow_api", "weather"];

#[derive(Debug)]
enum ToolError {
    /// The upstream answered 503.
    Unavailable,
    /// The model asked for something that does not exist: the caller's fault.
    BadArguments,
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unavailable => f.write_str("upstream unavailable (503)"),
            Self::BadArguments => f.write_str("invalid arguments"),
        }
    }
}

/// The tools themselves: plain async functions that know nothing about tool-health.
async fn run_tool(tool: &str, call: u64) -> Result<String, ToolError> {
    match tool {
        // Flaky: two calls in three fail.
        "search" => {
            tokio::time::sleep(Duration::from_millis(10)).await;
            if call % 3 == 0 {
                Ok(format!("results #{call}"))
            } else {
                Err(ToolError::Unavailable)
            }
        }
        "backup_search" => {
            tokio::time::sleep(Duration::from_millis(25)).await;
            Ok(format!("backup results #{call}"))
        }
        // Hangs: never answers. Only a timeout inside the call makes this a failure.
        "slow_api" => std::future::pending().await,
        "weather" => {
            tokio::time::sleep(Duration::from_millis(5)).await;
            if call % 17 == 0 {
                Err(ToolError::BadArguments) // the model's fault: never trips the breaker
            } else {
                Ok("sunny".to_owned())
            }
        }
        _ => Err(ToolError::BadArguments),
    }
}

/// What the callers saw, per tool.
#[derive(Debug, Default)]
struct Seen {
    failures: BTreeMap<String, u64>,
    refusals: BTreeMap<String, u64>,
}

/// One tool call through the helper, with a retry wrapper around it: tool errors are retried
/// after a short pause; a refusal is retried only after the `retry_after` it carries, and only
/// when that is short — otherwise the model is told the tool is unavailable.
async fn call_with_retry(
    registry: &Arc<ToolHealthRegistry>,
    tool: &str,
    call: u64,
    seen: &Mutex<Seen>,
) -> String {
    for _attempt in 0..3 {
        let result = registry
            .call(tool)
            .timeout(TOOL_TIMEOUT)
            .classify(|e: &ToolError| match e {
                ToolError::BadArguments => ErrorClass::caller_error("invalid_arguments"),
                ToolError::Unavailable => ErrorClass::failure("http_503"),
            })
            .run(run_tool(tool, call))
            .await;
        match result {
            Ok(answer) => return answer,
            Err(CallError::Refused { retry_after, .. }) => {
                *seen
                    .lock()
                    .unwrap()
                    .refusals
                    .entry(tool.into())
                    .or_default() += 1;
                if retry_after > Duration::from_millis(100) {
                    return format!("{tool} is unavailable"); // soft: the model moves on
                }
                tokio::time::sleep(retry_after).await;
            }
            Err(CallError::Tool(ToolError::BadArguments)) => return "bad arguments".into(),
            Err(e) => {
                *seen
                    .lock()
                    .unwrap()
                    .failures
                    .entry(tool.into())
                    .or_default() += 1;
                tracing::debug!(%e, "retrying");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    format!("{tool} failed")
}

/// One agent turn: the planner offers what the router can serve, the "model" picks, the call
/// goes through the router (gate and record the tool actually called).
async fn agent_turn(
    registry: Arc<ToolHealthRegistry>,
    router: Arc<HealthRouter>,
    seen: Arc<Mutex<Seen>>,
    turn: u64,
) {
    let hidden: Vec<String> = router
        .unavailable_tools(&registry)
        .into_iter()
        .map(|t| t.tool)
        .collect();
    let offered: Vec<&str> = TOOLS
        .iter()
        .copied()
        .filter(|t| !hidden.iter().any(|h| h == t))
        .collect();
    let Some(&picked) = offered.get(turn as usize % offered.len().max(1)) else {
        return; // nothing to offer this turn
    };
    let tool = router.resolve_tool(picked, &registry);
    let _answer = call_with_retry(&registry, tool, turn, &seen).await;
}

/// Counts breaker openings per tool (trips and failed probes), as they happen.
#[derive(Debug, Default)]
struct Openings(Mutex<BTreeMap<String, u64>>);

impl HealthObserver for Openings {
    fn on_transition(&self, tool: &str, t: &Transition, _at: Duration) {
        if t.to == BreakerState::Open && t.reason != TransitionReason::ProbeReleased {
            *self.0.lock().unwrap().entry(tool.into()).or_default() += 1;
        }
    }
}

/// Counts the transition log's "opened" events (target `tool_health`), whatever `RUST_LOG`
/// says for the output.
#[derive(Debug, Default, Clone)]
struct LoggedOpenings(Arc<AtomicU64>);

impl<S: tracing::Subscriber> Layer<S> for LoggedOpenings {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let meta = event.metadata();
        if meta.target() == LOG_TARGET && *meta.level() == tracing::Level::WARN {
            let mut message = String::new();
            event.record(&mut |f: &tracing::field::Field, v: &dyn std::fmt::Debug| {
                if f.name() == "message" {
                    message = format!("{v:?}");
                }
            });
            if message.starts_with("circuit breaker opened") {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let registry = Arc::new(ToolHealthRegistry::with_config(CircuitBreakerConfig {
        failure_threshold: 3,
        recovery_duration: Duration::from_millis(300),
        probe_timeout: Duration::from_secs(1),
    }));
    let openings = Arc::new(Openings::default());
    registry.add_observer(openings.clone());
    let logged = LoggedOpenings::default();

    // The service's subscriber: its log output filtered by RUST_LOG, the health layer
    // unfiltered (a global `warn` filter would hide the tool spans from it).
    tracing_subscriber::registry()
        .with(fmt::layer().with_filter(EnvFilter::from_default_env()))
        .with(ToolHealthLayer::new(registry.clone()))
        .with(logged.clone())
        .init();

    let router = Arc::new(
        HealthRouterBuilder::new()
            .add_fallback("search", vec!["backup_search".into()])
            .build(),
    );
    let seen = Arc::new(Mutex::new(Seen::default()));
    let started = tokio::time::Instant::now();
    let mut turn = 0;
    while started.elapsed() < RUN_FOR {
        let mut tasks = Vec::new();
        for _ in 0..AGENTS {
            turn += 1;
            let span = tracing::info_span!("invoke_agent", turn);
            // Spawned calls: the span goes along (`.instrument`), the helper's tool span
            // is its child.
            tasks.push(tokio::spawn(
                agent_turn(registry.clone(), router.clone(), seen.clone(), turn).instrument(span),
            ));
        }
        for t in tasks {
            t.await.expect("an agent task panicked");
        }
        tokio::time::sleep(Duration::from_millis(15)).await;
    }

    // The outcome, checked.
    let seen = seen.lock().unwrap();
    let openings = openings.0.lock().unwrap().clone();
    let mut failed = Vec::new();
    let mut check = |ok: bool, what: String| {
        println!("{} {what}", if ok { "ok  " } else { "FAIL" });
        if !ok {
            failed.push(what);
        }
    };
    for tool in ["search", "slow_api"] {
        let n = openings.get(tool).copied().unwrap_or(0);
        check(
            n > 0,
            format!("{tool} tripped ({n} openings, failed probes included)"),
        );
    }
    check(
        !openings.contains_key("weather"),
        "weather never tripped (its caller errors do not count)".into(),
    );
    for s in registry.health_summary() {
        let caller_failures = seen.failures.get(&s.tool).copied().unwrap_or(0);
        let caller_refusals = seen.refusals.get(&s.tool).copied().unwrap_or(0);
        check(
            s.failure_count == caller_failures && s.refused_count == caller_refusals,
            format!(
                "{}: {} failures and {} refusals recorded = {caller_failures} and {caller_refusals} seen by the callers",
                s.tool, s.failure_count, s.refused_count
            ),
        );
    }
    let total_openings: u64 = openings.values().sum();
    let logged = logged.0.load(Ordering::Relaxed);
    check(
        logged == total_openings,
        format!("every opening logged: {logged} WARN events for {total_openings} openings"),
    );
    println!(
        "ran {:.1} s, {turn} agent turns",
        started.elapsed().as_secs_f64()
    );
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
