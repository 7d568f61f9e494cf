//! Several feeds, one registry: a call is recorded once whatever route its span takes back in
//! (the gateway's own OTLP export reaching its own receiver, as one environment shared by the
//! gateway and an agent does), and a tool has one breaker whichever feed reports it (an agent's
//! span naming `rs__flaky` feeds the breaker the API answers for `rs__flaky`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{call, eventually, rmcp_http, text, upstream, Gateway, WAIT};

/// A free port on 127.0.0.1 (bound and let go: the gateway binds it right after).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// An OTLP/HTTP endpoint that takes every request and counts the occurrences of `needle` in
/// the bodies: the next collector of the gateway's `--forward-traces`.
async fn sink(needle: &'static [u8]) -> (u16, Arc<AtomicU64>) {
    let seen = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&seen);
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| {
            let counted = Arc::clone(&counted);
            async move {
                let n = body.windows(needle.len()).filter(|w| *w == needle).count();
                counted.fetch_add(n as u64, Ordering::SeqCst);
                axum::http::StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (port, seen)
}

pub async fn the_gateways_own_spans_coming_back_are_not_counted_again() {
    let (sink_port, forwarded) = sink(b"tools/call flaky").await;
    let port = free_port();
    // A probe lease of 1 s: a received MCP client span waits for its parent span (one call,
    // one record) at most half of it, 0.5 s, before it is recorded on its own.
    let config = json!({"mcpServers": {"rs": upstream::rmcp()},
                        "health": {"failureThreshold": 5, "cooldownSeconds": 30,
                                   "probeTimeoutSeconds": 1}});
    let listen = format!("127.0.0.1:{port}");
    let traces = format!("http://127.0.0.1:{port}/v1/traces");
    let forward = format!("http://127.0.0.1:{sink_port}/v1/traces");
    // The environment an agent beside it would share: export traces to the gateway itself.
    let gw = Gateway::http_on(
        &config,
        &listen,
        &["--forward-traces", &forward],
        &[
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", &traces),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    )
    .await;
    let (client, _) = rmcp_http(gw.port).await;
    for _ in 0..3 {
        let r = call(&client, "rs__flaky", json!({})).await.unwrap();
        assert_eq!(r.is_error, Some(true), "{}", text(&r));
    }
    // The three `tools/call flaky` spans went out over OTLP, into the gateway's own receiver
    // and on to the next collector (forwarded after they were read).
    eventually("the gateway's spans forwarded", WAIT, || async {
        (forwarded.load(Ordering::SeqCst) >= 3).then_some(())
    })
    .await;
    // Received, they wait for their parent (never exported) 0.5 s, then would record: watch
    // the count for 3 s, six times that.
    let watched = tokio::time::Instant::now();
    let mut flaky = Value::Null;
    while watched.elapsed() < Duration::from_secs(3) {
        let (status, v) = gw.get("/v1/tools/rs__flaky").await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(
            v["calls"]["failure"].as_u64(),
            Some(3),
            "each call once: {v}"
        );
        flaky = v;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(flaky["state"].as_str(), Some("closed"), "{flaky}");
    assert_eq!(flaky["available"], Value::Bool(true), "{flaky}");
}

/// An OTLP/JSON request of `n` failed GenAI tool spans of `tool`, the last ended just now.
fn failed_spans(tool: &str, n: u64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let spans: Vec<Value> = (0..n)
        .map(|i| {
            let end = now - (n - i) * 1_000_000;
            json!({
                "traceId": "0102030405060708090a0b0c0d0e0f10",
                "spanId": format!("{:016x}", 0x100 + i),
                "name": format!("execute_tool {tool}"),
                "kind": 1,
                "startTimeUnixNano": (end - 500_000).to_string(),
                "endTimeUnixNano": end.to_string(),
                "attributes": [
                    {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                    {"key": "gen_ai.tool.name", "value": {"stringValue": tool}},
                    {"key": "error.type", "value": {"stringValue": "timeout"}},
                ],
                "status": {"code": 2},
            })
        })
        .collect();
    json!({"resourceSpans": [{"scopeSpans": [{"scope": {"name": "my-agent"}, "spans": spans}]}]})
        .to_string()
}

pub async fn an_agents_span_named_like_a_gateway_tool_feeds_that_tools_breaker() {
    let config = json!({"mcpServers": {"rs": upstream::rmcp()},
                        "health": {"failureThreshold": 3, "cooldownSeconds": 30}});
    let gw = Gateway::http(&config, &[]).await;
    // An agent that calls the gateway's tool by the name it was offered, timing out on its
    // side, exports its spans here.
    let (status, _, body) = crate::support::http_raw(
        gw.port,
        "POST",
        "/v1/traces",
        &[("Content-Type", "application/json")],
        failed_spans("rs__ok", 3).as_bytes(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    // One tool, one breaker: the API's `rs__ok` is that breaker, open; there is none of its
    // own for the span's spelling.
    let (status, v) = gw.get("/v1/tools/rs__ok").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["tool"].as_str(), Some("rs/ok"), "{v}");
    assert_eq!(v["available"], Value::Bool(false), "{v}");
    assert_eq!(v["calls"]["failure"].as_u64(), Some(3), "{v}");
    let (status, v) = gw.post("/v1/tools/rs__ok/claim", "").await;
    assert_eq!(status, 503, "the gate refuses what the spans tripped: {v}");
    let (_, all) = gw.get("/v1/tools").await;
    let keys: Vec<&str> = all["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["tool"].as_str())
        .collect();
    assert!(!keys.contains(&"rs__ok"), "no breaker of its own: {keys:?}");
    // The host meets the same breaker: the call is refused, the server never called.
    let (client, _) = rmcp_http(gw.port).await;
    let r = call(&client, "rs__ok", json!({})).await.unwrap();
    assert!(
        text(&r).starts_with(crate::support::REFUSAL),
        "{}",
        text(&r)
    );
    // A name that is no gateway tool keeps its own breaker.
    let (status, _, _) = crate::support::http_raw(
        gw.port,
        "POST",
        "/v1/traces",
        &[("Content-Type", "application/json")],
        failed_spans("local_tool", 1).as_bytes(),
    )
    .await;
    assert_eq!(status, 200);
    let v = eventually("local_tool tracked", Duration::from_secs(5), || async {
        let (status, v) = gw.get("/v1/tools/local_tool").await;
        (status == 200).then_some(v)
    })
    .await;
    assert_eq!(v["tool"].as_str(), Some("local_tool"), "{v}");
}

pub async fn a_hosts_own_spans_of_calls_it_made_through_the_gateway_count_once() {
    // A Pydantic AI agent whose tools are the gateway's (the official Python MCP SDK client,
    // which sends its span's traceparent in each call's _meta) exports its spans to the same
    // gateway: its `execute_tool rs__flaky` spans are the very calls the gateway recorded.
    let python = crate::receiver::pydantic_python();
    // A probe lease of 1 s: a received span waiting for its parent waits 0.5 s at most.
    let config = json!({"mcpServers": {"rs": upstream::rmcp()},
                        "health": {"failureThreshold": 5, "cooldownSeconds": 30,
                                   "probeTimeoutSeconds": 1}});
    let gw = Gateway::http(&config, &[]).await;
    let out = tokio::process::Command::new(python)
        .arg(crate::support::workspace().join("tests/agents/python/mcp_host_agent.py"))
        .args([
            "--mcp",
            &gw.url("/mcp"),
            "--endpoint",
            &gw.url("/v1/traces"),
        ])
        .args(["--tool", "rs__flaky", "--runs", "3"])
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), out)
        .await
        .expect("the agent ends within 2 min")
        .expect("run the agent");
    let said = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the agent failed: {said}");
    // Its spans came in before it exited (the provider's shutdown exports them, the receiver
    // answers once it read them); any waiting for a parent waits 0.5 s: watch for 3 s.
    let (_, doc) = gw.get("/v1/tools/rs__flaky").await;
    assert_eq!(doc["tool"].as_str(), Some("rs/flaky"), "{doc}");
    let watched = tokio::time::Instant::now();
    while watched.elapsed() < Duration::from_secs(3) {
        let (_, v) = gw.get("/v1/tools/rs__flaky").await;
        assert_eq!(
            (
                v["calls"]["failure"].as_u64(),
                v["calls"]["ignored"].as_u64(),
                v["calls"]["success"].as_u64()
            ),
            (Some(3), Some(0), Some(0)),
            "each call once, as the gateway recorded it: {v}\n{said}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (_, all) = gw.get("/v1/tools?limit=1000").await;
    let keys: Vec<&str> = all["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["tool"].as_str())
        .collect();
    assert!(
        !keys.contains(&"rs__flaky"),
        "no breaker of its own: {keys:?}"
    );
}
