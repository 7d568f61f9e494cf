//! Real agents exporting their spans to the receiver over OTLP/HTTP protobuf: Pydantic AI
//! (FunctionModel, the OTel Python SDK's exporter), the Vercel AI SDK 6 (`ai/test`'s mock model,
//! the OTel Node SDK's exporter) and LangChain through OpenInference (a fake chat model). No
//! network: scripted models, everything on 127.0.0.1. The frameworks are installed, pinned, by
//! `scripts/agents.sh` into `target/agents/`; a test whose framework is missing is reported
//! ignored with the reason (failing under `CI=true`).
//!
//! Each framework: a failing tool trips its breaker (`GET /v1/tools/{tool}` says refused with a
//! `retry_after_ms`, `/metrics` shows it open and its failures), a succeeding tool counts cleanly,
//! a wrongly typed argument does not count where the framework marks it, and after the cooldown
//! (the registry's `ManualClock`, advanced by hand) the agent's next successful call — its span
//! alone, no gate call — closes the breaker. The export delay (a tool's failure → the API says
//! refused) is measured with the SDKs' default schedule and a short one and printed.

#[path = "../harness/mod.rs"]
mod harness;

use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt as _;
use tool_health::receiver::Receiver;
use tool_health::{CircuitBreakerConfig, ManualClock, ToolHealthRegistry};
use tower::ServiceExt as _;

/// Bound on any one agent run (they take about a second; installs are not part of it).
const RUN_BOUND: Duration = Duration::from_secs(120);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn agents_dir() -> PathBuf {
    root().join("target/agents")
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Framework {
    PydanticAi,
    VercelAi,
    LangChain,
}

impl Framework {
    /// The command running the agent, or why it cannot run here.
    fn command(self) -> Result<Command, String> {
        let install = "run scripts/agents.sh";
        match self {
            Self::PydanticAi | Self::LangChain => {
                let python = agents_dir().join("venv/bin/python");
                let module = if self == Self::PydanticAi {
                    "pydantic_ai"
                } else {
                    "openinference.instrumentation.langchain"
                };
                let ok = python.exists()
                    && Command::new(&python)
                        .args(["-c", &format!("import {module}")])
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .status()
                        .is_ok_and(|s| s.success());
                if !ok {
                    return Err(format!(
                        "{module} is not installed in target/agents/venv ({install})"
                    ));
                }
                let script = if self == Self::PydanticAi {
                    "pydantic_agent.py"
                } else {
                    "langchain_agent.py"
                };
                let mut c = Command::new(python);
                c.arg(root().join("tests/agents/python").join(script));
                Ok(c)
            }
            Self::VercelAi => {
                let dir = agents_dir().join("ts");
                if !dir.join("node_modules/ai/package.json").exists() {
                    return Err(format!(
                        "the Vercel AI SDK is not installed in target/agents/ts ({install})"
                    ));
                }
                if Command::new("node").arg("--version").output().is_err() {
                    return Err("node is not installed".into());
                }
                let mut c = Command::new("node");
                c.arg(root().join("tests/agents/ts/vercel_agent.mjs"))
                    .current_dir(dir);
                Ok(c)
            }
        }
    }

    /// The linger flag and its value for `secs`.
    fn linger(self, secs: f64) -> [String; 2] {
        match self {
            Self::VercelAi => ["--linger-ms".into(), format!("{}", (secs * 1000.0) as u64)],
            _ => ["--linger".into(), format!("{secs}")],
        }
    }

    fn mark(self) -> Vec<&'static str> {
        match self {
            Self::VercelAi => vec!["--mark", "1"],
            _ => vec!["--mark"],
        }
    }
}

/// A receiver, the gate and `/metrics` on 127.0.0.1, the registry on a manual clock.
struct Server {
    endpoint: String,
    clock: ManualClock,
    app: axum::Router,
    _stop: tokio::sync::oneshot::Sender<()>,
}

async fn server() -> Server {
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(1000)); // room before now for the spans' past
    let registry = Arc::new(
        ToolHealthRegistry::builder()
            .config(CircuitBreakerConfig {
                failure_threshold: 3,
                recovery_duration: Duration::from_secs(30),
                probe_timeout: Duration::from_secs(30),
            })
            .clock(clock.clone())
            .build(),
    );
    let receiver = Receiver::new(registry.clone());
    let metrics = tool_health::status::PrometheusMetrics::publish(&registry).unwrap();
    let status = tool_health::status::builder(registry.clone())
        .prometheus(metrics)
        .build()
        .unwrap();
    let app = receiver
        .router()
        .merge(receiver.gate_router())
        .merge(status.router());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = app.clone();
    tokio::spawn(async move {
        axum::serve(listener, served)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await
    });
    Server {
        endpoint: format!("http://{addr}/v1/traces"),
        clock,
        app,
        _stop: stop,
    }
}

impl Server {
    async fn get(&self, path: &str) -> (StatusCode, String) {
        let response = self
            .app
            .clone()
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    /// The gate's oracle on `tool`: its object (200), or the fresh one of a tool no span has
    /// reached yet (404, `"tracked": false`).
    async fn tool(&self, tool: &str) -> serde_json::Value {
        let (status, body) = self.get(&format!("/v1/tools/{tool}")).await;
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        let tracked = v["tracked"] == true;
        let expected = if tracked {
            StatusCode::OK
        } else {
            StatusCode::NOT_FOUND
        };
        assert_eq!(status, expected, "{body}");
        v
    }

    async fn metrics(&self) -> String {
        let (status, body) = self.get("/metrics").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body
    }
}

/// Starts the agent with `scenarios`.
fn spawn(
    fw: Framework,
    endpoint: &str,
    scenarios: &str,
    extra: &[String],
    env: &[(&str, &str)],
) -> Child {
    let mut c = fw.command().unwrap_or_else(|why| harness::skip(&why));
    c.args(["--endpoint", endpoint, "--scenarios", scenarios])
        .args(extra)
        .env("OTEL_SDK_DISABLED", "false")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    c.spawn().unwrap_or_else(|e| panic!("{fw:?}: {e}"))
}

/// Waits for the agent to end (bounded), returning its stdout.
async fn finish(fw: Framework, mut child: Child) -> String {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut out = String::new();
            let mut err = String::new();
            use std::io::Read as _;
            child
                .stdout
                .take()
                .unwrap()
                .read_to_string(&mut out)
                .unwrap();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            assert!(
                status.success(),
                "{fw:?} agent failed ({status}):\n{out}\n{err}"
            );
            return out;
        }
        if started.elapsed() > RUN_BOUND {
            let _ = child.kill();
            panic!("{fw:?} agent still running after {RUN_BOUND:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn run(fw: Framework, s: &Server, scenarios: &str, env: &[(&str, &str)]) -> String {
    let env: Vec<(&str, &str)> = [("OTEL_BSP_SCHEDULE_DELAY", "100")]
        .into_iter()
        .chain(env.iter().copied())
        .collect();
    let child = spawn(fw, &s.endpoint, scenarios, &[], &env);
    finish(fw, child).await
}

fn counts(v: &serde_json::Value) -> (u64, u64, u64) {
    let n = |k: &str| v["calls"][k].as_u64().unwrap();
    (n("success"), n("failure"), n("ignored"))
}

/// The failing tool's spans trip it; the API and the metrics say so; the others count as the
/// framework meant; after the cooldown the next successful call's span closes it.
async fn trips_counts_and_recovers(fw: Framework) {
    let s = server().await;
    let scenarios = match fw {
        Framework::PydanticAi => "ok,raises,raises,raises,bad_args,model_retry",
        Framework::VercelAi => "ok,raises,raises,raises,bad_args",
        Framework::LangChain => "ok,raises,raises,raises,bad_args,tool_exception",
    };
    run(fw, &s, scenarios, &[]).await;
    // The SDK's shutdown flushed its batch and the receiver answered it: it is all there.
    let flaky = s.tool("flaky").await;
    assert_eq!(flaky["available"], false, "{flaky}");
    assert_eq!(flaky["state"], "open", "{flaky}");
    let retry = flaky["retry_after_ms"].as_u64().unwrap();
    assert!(retry > 25_000 && retry <= 30_000, "{flaky}");
    assert_eq!(counts(&flaky), (0, 3, 0), "{flaky}");
    let weather = s.tool("weather").await;
    assert_eq!(weather["available"], true);
    match fw {
        // ok, and the corrected call after the validation error (a caller error: ignored).
        Framework::PydanticAi => {
            assert_eq!(counts(&weather), (2, 0, 1), "{weather}");
            // ModelRetry: the caller's error, then the retried call's success.
            assert_eq!(counts(&s.tool("flaky_retry").await), (1, 0, 1));
        }
        // Bad arguments make no tool span at all.
        Framework::VercelAi => assert_eq!(counts(&weather), (1, 0, 0), "{weather}"),
        Framework::LangChain => {
            assert_eq!(counts(&weather), (1, 0, 1), "{weather}");
            // The handled ToolException: status OK, "error" in the tool message.
            assert_eq!(counts(&s.tool("flaky_handled").await), (0, 1, 0));
        }
    }
    let metrics = s.metrics().await;
    let has = |needle: &str| {
        metrics
            .lines()
            .any(|l| l.contains(needle) && l.contains("gen_ai_tool_name=\"flaky\""))
    };
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("tool_health_breaker_state")
                && l.contains("gen_ai_tool_name=\"flaky\"")
                && l.contains("tool_health_breaker_state=\"open\"")
                && l.ends_with(" 1")),
        "{metrics}"
    );
    assert!(has("tool_health_outcome=\"failure\""), "{metrics}");

    // The cooldown passes (30 s on the registry's clock; 40 s leaves the agent's start-up and
    // export time out of the question). The agent calls the tool again; it works now.
    s.clock.advance(Duration::from_secs(40));
    run(fw, &s, "raises", &[("FLAKY_HEALED", "1")]).await;
    let flaky = s.tool("flaky").await;
    assert_eq!(flaky["state"], "closed", "{flaky}");
    assert_eq!(flaky["available"], true);
    assert_eq!(counts(&flaky), (1, 3, 0), "{flaky}");
}

/// How long from the third failure's end (the agent's own mark) to the API saying refused,
/// with the SDK's schedule `delay_ms` (None: its default) — the agent keeps running.
async fn export_delay(fw: Framework, delay_ms: Option<u64>) -> Duration {
    let s = server().await;
    let mut env = vec![];
    let delay;
    if let Some(ms) = delay_ms {
        delay = ms.to_string();
        env.push(("OTEL_BSP_SCHEDULE_DELAY", delay.as_str()));
    }
    let mut extra: Vec<String> = fw.mark().into_iter().map(String::from).collect();
    extra.extend(fw.linger(12.0));
    let mut child = spawn(fw, &s.endpoint, "raises,raises,raises", &extra, &env);
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<f64>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(json) = line.strip_prefix("tool-event ") {
                let v: serde_json::Value = serde_json::from_str(json).unwrap();
                let _ = tx.send(v["t"].as_f64().unwrap());
            }
        }
    });
    let started = Instant::now();
    let mut marks = Vec::new();
    let refused_at = loop {
        marks.extend(rx.try_iter());
        let flaky = s.tool("flaky").await;
        if flaky["available"] == false {
            break SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_secs_f64();
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{fw:?}: never refused"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let _ = child.kill();
    let _ = child.wait();
    marks.extend(rx.try_iter());
    assert_eq!(marks.len(), 3, "{fw:?}: three failures marked");
    let third = marks[2];
    Duration::from_secs_f64((refused_at - third).max(0.0))
}

async fn delays(fw: Framework) {
    let short = export_delay(fw, Some(100)).await;
    let default = export_delay(fw, None).await;
    println!("{fw:?}: export delay (failure → refused): default schedule {default:?}, OTEL_BSP_SCHEDULE_DELAY=100 {short:?}");
    // The SDKs' default schedule is 5 s: the breaker learns within it (plus the export).
    assert!(
        default < Duration::from_secs(8),
        "{fw:?} default: {default:?}"
    );
    assert!(short < Duration::from_secs(2), "{fw:?} short: {short:?}");
    assert!(short < default, "{fw:?}: {short:?} vs {default:?}");
}

async fn pydantic_ai() {
    trips_counts_and_recovers(Framework::PydanticAi).await;
}
/// A tool answering `ModelRetry` to a model that never corrects itself: Pydantic AI gives up
/// after the tool's retries (2) with `UnexpectedModelBehavior` in the last attempt's span. The
/// model's mistake every time — three runs of it never trip the tool (they used to: the last
/// attempt of each run counted as the tool's failure, and the third run opened it).
async fn pydantic_ai_retries_used_up_never_trip_the_tool() {
    let s = server().await;
    run(
        Framework::PydanticAi,
        &s,
        "retries_used_up,retries_used_up,retries_used_up",
        &[],
    )
    .await;
    let insists = s.tool("insists").await;
    assert_eq!(
        counts(&insists),
        (0, 0, 9),
        "three attempts a run: {insists}"
    );
    assert_eq!(insists["available"], true, "{insists}");
    assert_eq!(insists["state"], "closed", "{insists}");
}
async fn vercel_ai() {
    trips_counts_and_recovers(Framework::VercelAi).await;
}
async fn langchain_openinference() {
    trips_counts_and_recovers(Framework::LangChain).await;
}
async fn pydantic_ai_export_delay() {
    delays(Framework::PydanticAi).await;
}
async fn vercel_ai_export_delay() {
    delays(Framework::VercelAi).await;
}

/// `rotel-agent` from target/agents/rotel (scripts/agents.sh), or `ROTEL_AGENT`.
fn rotel_agent() -> PathBuf {
    if let Some(p) = std::env::var_os("ROTEL_AGENT") {
        return p.into();
    }
    let lib = agents_dir().join("rotel/lib");
    let found = std::fs::read_dir(&lib).ok().and_then(|dirs| {
        dirs.filter_map(Result::ok)
            .map(|d| d.path().join("site-packages/rotel/rotel-agent"))
            .find(|p| p.exists())
    });
    found.unwrap_or_else(|| {
        harness::skip("rotel-agent is not installed in target/agents/rotel (run scripts/agents.sh)")
    })
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The receiver forwards what Pydantic AI sent, unchanged, to a real Rotel; Rotel's detailed
/// debug log shows every span of it.
async fn forwards_to_rotel() {
    let rotel = rotel_agent();
    let (grpc, http) = (free_port(), free_port());
    let work = root().join("target/agents/work");
    std::fs::create_dir_all(&work).unwrap();
    let log = work.join(format!("rotel-forward-{http}.log"));
    let mut collector = Command::new(rotel)
        .args([
            "start",
            "--otlp-grpc-endpoint",
            &format!("127.0.0.1:{grpc}"),
        ])
        .args(["--otlp-http-endpoint", &format!("127.0.0.1:{http}")])
        .args([
            "--exporter",
            "blackhole",
            "--debug-log",
            "traces",
            "--debug-log-verbosity",
            "detailed",
        ])
        .env("NO_COLOR", "1")
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", http)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "Rotel did not listen"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let registry = Arc::new(ToolHealthRegistry::new());
    let receiver = Receiver::builder(registry.clone())
        .forward_to(format!("http://127.0.0.1:{http}/v1/traces"))
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}/v1/traces", listener.local_addr().unwrap());
    let served = receiver.clone();
    tokio::spawn(async move { served.serve(listener, std::future::pending()).await });
    let child = spawn(
        Framework::PydanticAi,
        &endpoint,
        "ok,raises",
        &[],
        &[("OTEL_BSP_SCHEDULE_DELAY", "100")],
    );
    finish(Framework::PydanticAi, child).await;
    // Rotel logs each span it received; every call id Pydantic AI sent is there.
    let deadline = Instant::now() + Duration::from_secs(30);
    let text = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if (text.contains("call_ok_0") && text.contains("call_raises_0"))
            || Instant::now() > deadline
        {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let _ = collector.kill();
    let _ = collector.wait();
    assert!(
        text.contains("call_ok_0") && text.contains("call_raises_0"),
        "Rotel's log:\n{text}"
    );
    assert!(
        text.contains("execute_tool flaky") && text.contains("invoke_agent test_agent"),
        "{text}"
    );
    assert!(receiver.stats().forwarded >= 1, "{:?}", receiver.stats());
    assert_eq!(receiver.stats().forward_failed, 0);
    // And the receiver read them on the way through.
    assert_eq!(registry.snapshot("flaky").unwrap().failure_count, 1);
}

fn main() -> std::process::ExitCode {
    harness::run(trials![
        multi pydantic_ai,
        multi pydantic_ai_retries_used_up_never_trip_the_tool,
        multi vercel_ai,
        multi langchain_openinference,
        multi pydantic_ai_export_delay,
        multi vercel_ai_export_delay,
        multi forwards_to_rotel,
    ])
}
