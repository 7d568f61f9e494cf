//! The gateway's cost per `tools/call`, against a pass-through proxy built from the same rmcp
//! parts without breakers, in the same run: both pay two hops and two JSON round trips
//! (host → proxy → upstream and back), so the ratio is what the breakers, the schema check,
//! the span, the names and the timeouts add. Client → server direct is measured for the
//! record.
//!
//! | configuration | host side | upstream side |
//! |---|---|---|
//! | `direct/stdio` | rmcp client → the upstream (a child process) | — |
//! | `proxy/stdio`, `gateway/stdio` | rmcp client → the proxy or gateway (a child process, stdio) | stdio child |
//! | `proxy/http`, `gateway/http` | rmcp client → the proxy or gateway (streamable HTTP on 127.0.0.1) | stdio child |
//!
//! The upstream is this binary serving the tests' rmcp fixture (`tests/support/fixture.rs`,
//! its `echo` tool); the proxy is this binary too (`OVERHEAD_ROLE=proxy-stdio|proxy-http`,
//! `passthrough.rs`): an rmcp `ServerHandler` whose `tools/list` and `tools/call` forward to
//! an rmcp client of the upstream, served with rmcp's stdio transport or its
//! `StreamableHttpService` in axum — the parts the gateway is built from. `sdk_clients.rs`
//! measures the same two with the official TypeScript and Python SDK clients. The gateway runs as its binary with its defaults (schema
//! check on, OTLP export off, log at `warn`).
//!
//! Criterion measures the mean time per sequential call of each configuration. With
//! `--bench`, a summary follows in the same run: p50 and p99 of single calls (rounds of each
//! configuration interleaved, so drift on a shared machine hits them alike) and throughput with
//! 16 calls in flight from one rmcp client, with the gateway/proxy ratios. The load generator
//! shares the machine's cores with the processes it measures.
//!
//!     cargo bench -p tool-health-gateway --bench overhead

use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::Criterion;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::json;

#[allow(dead_code, unreachable_pub)]
#[path = "../tests/support/fixture.rs"]
mod fixture;
#[allow(dead_code)]
mod passthrough;

use passthrough::{exe, gateway_command, http_url, serve_proxy, upstream_command, ROLE};

// ---------------------------------------------------------------------------------------
// The configurations
// ---------------------------------------------------------------------------------------

/// One configuration under test: a connected rmcp client and the tool it calls.
struct Target {
    name: &'static str,
    client: RunningService<RoleClient, ()>,
    tool: &'static str,
    /// Processes to end with the target (an HTTP server started here).
    _child: Option<tokio::process::Child>,
}

async fn over_stdio(
    name: &'static str,
    mut cmd: tokio::process::Command,
    tool: &'static str,
) -> Target {
    cmd.stderr(Stdio::null());
    let transport = TokioChildProcess::new(cmd).expect("start");
    let client = ().serve(transport).await.expect("the handshake");
    Target {
        name,
        client,
        tool,
        _child: None,
    }
}

async fn over_http(
    name: &'static str,
    mut cmd: tokio::process::Command,
    tool: &'static str,
) -> Target {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().expect("start");
    let url = http_url(&mut child).await;
    let client =
        ().serve(StreamableHttpClientTransport::from_uri(url))
            .await
            .expect("the handshake");
    Target {
        name,
        client,
        tool,
        _child: Some(child),
    }
}

async fn targets() -> Vec<Target> {
    let mut proxy_stdio = tokio::process::Command::new(exe());
    proxy_stdio.env(ROLE, "proxy-stdio");
    let mut proxy_http = tokio::process::Command::new(exe());
    proxy_http.env(ROLE, "proxy-http");
    let all = vec![
        over_stdio("direct/stdio", upstream_command(), "echo").await,
        over_stdio("proxy/stdio", proxy_stdio, "echo").await,
        over_stdio("gateway/stdio", gateway_command(false), "rs__echo").await,
        over_http("proxy/http", proxy_http, "echo").await,
        over_http("gateway/http", gateway_command(true), "rs__echo").await,
    ];
    for t in &all {
        // Warm up, and check every configuration answers what the upstream says.
        for _ in 0..200 {
            let text = call(t).await;
            assert_eq!(text, "hello", "{}", t.name);
        }
    }
    all
}

async fn call(t: &Target) -> String {
    let args = json!({"text": "hello"});
    let p = CallToolRequestParams::new(t.tool).with_arguments(args.as_object().unwrap().clone());
    let r = t.client.peer().call_tool(p).await.expect("a result");
    assert_ne!(r.is_error, Some(true), "{}: {r:?}", t.name);
    r.content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------
// The summary: percentiles and throughput, interleaved
// ---------------------------------------------------------------------------------------

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Calls per second with `inflight` calls always in flight on one client, for `span`.
async fn throughput(t: &Target, inflight: usize, span: Duration) -> f64 {
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let deadline = started + span;
    let peer = t.client.peer().clone();
    let tasks: Vec<_> = (0..inflight)
        .map(|_| {
            let peer = peer.clone();
            let done = Arc::clone(&done);
            let tool = t.tool;
            tokio::spawn(async move {
                let args = json!({"text": "hello"}).as_object().unwrap().clone();
                while Instant::now() < deadline {
                    let p = CallToolRequestParams::new(tool).with_arguments(args.clone());
                    let r = peer.call_tool(p).await.expect("a result");
                    assert_ne!(r.is_error, Some(true));
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

async fn summary(targets: &[Target]) {
    const ROUNDS: usize = 6;
    const CALLS: usize = 500;
    let mut lat: Vec<Vec<Duration>> = vec![Vec::new(); targets.len()];
    let mut tput: Vec<Vec<f64>> = vec![Vec::new(); targets.len()];
    for _ in 0..ROUNDS {
        for (i, t) in targets.iter().enumerate() {
            for _ in 0..CALLS {
                let s = Instant::now();
                call(t).await;
                lat[i].push(s.elapsed());
            }
        }
        for (i, t) in targets.iter().enumerate() {
            tput[i].push(throughput(t, 16, Duration::from_millis(1500)).await);
        }
    }
    let mut rows = Vec::new();
    for (i, t) in targets.iter().enumerate() {
        let mut l = std::mem::take(&mut lat[i]);
        l.sort_unstable();
        let mut tp = tput[i].clone();
        tp.sort_by(f64::total_cmp);
        let median_tput = tp[tp.len() / 2];
        rows.push((
            t.name,
            percentile(&l, 0.5),
            percentile(&l, 0.99),
            median_tput,
        ));
    }
    println!();
    println!(
        "summary ({ROUNDS} interleaved rounds; {CALLS} sequential calls per round for p50/p99, \
         1.5 s with 16 calls in flight per round for throughput, median of rounds)"
    );
    println!(
        "{:<14} {:>10} {:>10} {:>12}",
        "config", "p50 µs", "p99 µs", "calls/s"
    );
    for (name, p50, p99, tp) in &rows {
        println!(
            "{:<14} {:>10.1} {:>10.1} {:>12.0}",
            name,
            p50.as_secs_f64() * 1e6,
            p99.as_secs_f64() * 1e6,
            tp
        );
    }
    let find = |n: &str| rows.iter().find(|r| r.0 == n).unwrap();
    for transport in ["stdio", "http"] {
        let g = find(&format!("gateway/{transport}"));
        let p = find(&format!("proxy/{transport}"));
        println!(
            "gateway/proxy over {transport}: p50 {:.3}x, p99 {:.3}x, throughput {:.3}x",
            g.1.as_secs_f64() / p.1.as_secs_f64(),
            g.2.as_secs_f64() / p.2.as_secs_f64(),
            g.3 / p.3
        );
    }
}

fn main() {
    match std::env::var(ROLE).as_deref() {
        Ok("proxy-stdio") => return serve_proxy(false),
        Ok("proxy-http") => return serve_proxy(true),
        _ => {}
    }
    if std::env::var(fixture::ROLE).as_deref() == Ok("rmcp-fixture") {
        return fixture::serve_stdio();
    }
    let _ = rustls_graviola::default_provider().install_default();
    let bench_mode = std::env::args().any(|a| a == "--bench");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let targets = runtime.block_on(targets());
    let mut c = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    {
        let mut group = c.benchmark_group("tools_call");
        for t in &targets {
            group.bench_function(t.name, |b| {
                b.iter_custom(|iters| {
                    runtime.block_on(async {
                        let s = Instant::now();
                        for _ in 0..iters {
                            call(t).await;
                        }
                        s.elapsed()
                    })
                })
            });
        }
        group.finish();
    }
    c.final_summary();
    if bench_mode {
        runtime.block_on(summary(&targets));
    }
    runtime.block_on(async move {
        for t in targets {
            let _ = t.client.cancel().await;
        }
    });
}
