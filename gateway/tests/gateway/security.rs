//! Who can call what (docs/gateway.md): every route checks `Host` and `Origin`; a route that
//! changes state takes only its own content type (or the token); the API's gate answers one
//! contract with the library's receiver; HTTP MCP sessions are capped (the gRPC receiver's
//! bound: `flood.rs`). Each against the real binary.

use std::time::Duration;

use serde_json::{json, Value};
use tool_health::receiver::Receiver;
use tool_health::ToolHealthRegistry;

use crate::support::{http, http_raw, scratch, upstream, Gateway, REFUSAL, WAIT};

const TOKEN: &str = "s3cret-token-0123456789abcdef";

fn config() -> Value {
    json!({"mcpServers": {"rs": upstream::rmcp()},
           "health": {"failureThreshold": 3, "cooldownSeconds": 30, "probeTimeoutSeconds": 30}})
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

/// Every route of the listener, as (method, path, body, headers a legitimate caller sends).
/// `/events` is left to the status router's own tests: its 200 is a stream that never ends.
/// A request: method, path, body, the headers a legitimate caller sends.
type Route = (
    &'static str,
    &'static str,
    &'static str,
    Vec<(&'static str, &'static str)>,
);

fn routes() -> Vec<Route> {
    let json = ("content-type", "application/json");
    let mcp = vec![json, ("accept", "application/json, text/event-stream")];
    let bearer = ("authorization", "Bearer s3cret-token-0123456789abcdef");
    vec![
        ("GET", "/healthz", "", vec![]),
        ("GET", "/v1/tools", "", vec![]),
        ("GET", "/v1/tools/rs__ok", "", vec![]),
        ("GET", "/v1/servers", "", vec![]),
        ("GET", "/", "", vec![]),
        ("GET", "/tools", "", vec![]),
        ("GET", "/tools/rs%2Fok", "", vec![]),
        ("GET", "/metrics", "", vec![]),
        ("GET", "/no/such/route", "", vec![]),
        ("POST", "/mcp", INITIALIZE, mcp.clone()),
        ("GET", "/mcp", "", mcp.clone()),
        ("DELETE", "/mcp", "", mcp),
        ("POST", "/v1/tools/victim/claim", "{}", vec![json]),
        (
            "POST",
            "/v1/tools/victim/report",
            r#"{"outcome":"failure"}"#,
            vec![json],
        ),
        ("POST", "/v1/tools/rs__ok/force-open", "", vec![bearer]),
        ("POST", "/tools/rs%2Fok/force-open", "", vec![bearer]),
        ("POST", "/v1/servers/rs/force-open", "", vec![bearer]),
        (
            "POST",
            "/v1/traces",
            "",
            vec![("content-type", "application/x-protobuf")],
        ),
    ]
}

/// One request with `host` as its `Host` header and `extra` headers.
async fn with_host(
    port: u16,
    method: &str,
    path: &str,
    host: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect to the gateway");
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    stream.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    let _ = tokio::time::timeout(WAIT, stream.read_to_end(&mut raw)).await;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, text)
}

pub async fn every_route_checks_host_and_origin() {
    let file = scratch().join("token");
    std::fs::write(&file, TOKEN).unwrap();
    let gw = Gateway::http(&config(), &["--control-token-file", file.to_str().unwrap()]).await;
    let own = format!("127.0.0.1:{}", gw.port);
    let own_origin = format!("http://{own}");
    for (method, path, body, headers) in routes() {
        // DNS rebinding: a name the attacker controls, pointed at 127.0.0.1.
        let rebound = format!("rebind.evil.example:{}", gw.port);
        let (status, text) = with_host(gw.port, method, path, &rebound, &headers, body).await;
        assert_eq!(status, 403, "{method} {path} with Host {rebound}: {text}");
        // Another site's page (the browser sends its Origin).
        let mut foreign = headers.clone();
        foreign.push(("origin", "http://evil.example"));
        let (status, text) = with_host(gw.port, method, path, &own, &foreign, body).await;
        assert_eq!(status, 403, "{method} {path} from another origin: {text}");
        let mut null = headers.clone();
        null.push(("origin", "null"));
        let (status, _) = with_host(gw.port, method, path, &own, &null, body).await;
        assert_eq!(
            status, 403,
            "{method} {path} from a sandboxed page (Origin: null)"
        );
    }
    // Nothing of the above acted: the tool is closed, nothing forged was tracked.
    let (_, v) = gw.get("/v1/tools/rs__ok").await;
    assert_eq!(v["state"], "closed", "{v}");
    assert_eq!(gw.get("/v1/tools/victim").await.0, 404);

    // The gateway's own pages.
    let page = [("origin", own_origin.as_str())];
    assert_eq!(
        with_host(gw.port, "GET", "/v1/tools", &own, &page, "")
            .await
            .0,
        200
    );
    assert!(!gw.log.text().contains(TOKEN));
    // The names and origins the operator allows.
    let gw = Gateway::http(
        &config(),
        &[
            "--allow-host",
            "gw.internal",
            "--allow-origin",
            "https://dashboards.example",
        ],
    )
    .await;
    let own = format!("127.0.0.1:{}", gw.port);
    let named = format!("gw.internal:{}", gw.port);
    assert_eq!(
        with_host(
            gw.port,
            "GET",
            "/v1/tools",
            &named.replace("gw.internal", "other.internal"),
            &[],
            ""
        )
        .await
        .0,
        403
    );
    assert_eq!(
        with_host(gw.port, "GET", "/v1/tools", &named, &[], "")
            .await
            .0,
        200
    );
    let mcp = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
    ];
    let (status, text) = with_host(gw.port, "POST", "/mcp", &named, &mcp, INITIALIZE).await;
    assert_eq!(status, 200, "/mcp by the allowed name: {text}");
    // Every Host (a cluster's probes and scrapers use the pod's address); pages still not.
    let any = Gateway::http(&config(), &["--allow-host", "*"]).await;
    let pod = format!("10.1.2.3:{}", any.port);
    assert_eq!(
        with_host(any.port, "GET", "/healthz", &pod, &[], "")
            .await
            .0,
        200
    );
    let evil = [("origin", "http://evil.example")];
    assert_eq!(
        with_host(any.port, "GET", "/v1/servers", &pod, &evil, "")
            .await
            .0,
        403
    );
    let dash = [("origin", "https://dashboards.example")];
    assert_eq!(
        with_host(gw.port, "GET", "/v1/tools", &own, &dash, "")
            .await
            .0,
        200
    );
}

/// An OTLP/protobuf request with `n` failed `execute_tool` spans of `tool`, encoded by hand
/// (what a page could put in a `Blob`).
fn error_spans(tool: &str, n: u8) -> Vec<u8> {
    fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    fn field(out: &mut Vec<u8>, number: u64, bytes: &[u8]) {
        varint(out, (number << 3) | 2);
        varint(out, bytes.len() as u64);
        out.extend_from_slice(bytes);
    }
    fn attribute(key: &str, value: &str) -> Vec<u8> {
        let mut any = Vec::new();
        field(&mut any, 1, value.as_bytes());
        let mut kv = Vec::new();
        field(&mut kv, 1, key.as_bytes());
        field(&mut kv, 2, &any);
        kv
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let mut scope_spans = Vec::new();
    for i in 0..n {
        let mut span = Vec::new();
        field(&mut span, 1, &[7; 16]);
        field(&mut span, 2, &[i + 1; 8]);
        field(&mut span, 5, format!("execute_tool {tool}").as_bytes());
        for (number, t) in [
            (7u64, now - 2_000_000 + u64::from(i)),
            (8, now - 1_000_000 + u64::from(i)),
        ] {
            varint(&mut span, (number << 3) | 1);
            span.extend_from_slice(&t.to_le_bytes());
        }
        field(
            &mut span,
            9,
            &attribute("gen_ai.operation.name", "execute_tool"),
        );
        field(&mut span, 9, &attribute("gen_ai.tool.name", tool));
        field(&mut span, 15, &[0x18, 0x02]); // status { code: ERROR }
        field(&mut scope_spans, 2, &span);
    }
    let mut resource_spans = Vec::new();
    field(&mut resource_spans, 2, &scope_spans);
    let mut request = Vec::new();
    field(&mut request, 1, &resource_spans);
    request
}

pub async fn a_page_cannot_change_state_with_a_simple_request() {
    let gw = Gateway::http(&config(), &[]).await;
    // What `fetch(url, {method: "POST", mode: "no-cors", body})` sends without an Origin
    // check to stop it (a browser that omitted it): a body of a simple type, or none.
    for content_type in [
        None,
        Some("text/plain;charset=UTF-8"),
        Some("application/x-www-form-urlencoded"),
    ] {
        let headers: Vec<(&str, &str)> = content_type
            .map(|t| ("content-type", t))
            .into_iter()
            .collect();
        for _ in 0..3 {
            let (status, v) = http(
                gw.port,
                "POST",
                "/v1/tools/rs__ok/report",
                &headers,
                r#"{"outcome":"failure"}"#,
            )
            .await;
            assert_eq!(status, 415, "report as {content_type:?}: {v}");
        }
        let (status, v) = http(gw.port, "POST", "/v1/tools/rs__ok/claim", &headers, "").await;
        assert_eq!(status, 415, "claim as {content_type:?}: {v}");
        let (status, _, body) = http_raw(
            gw.port,
            "POST",
            "/v1/traces",
            &headers,
            &error_spans("victim", 3),
        )
        .await;
        assert_eq!(status, 415, "traces as {content_type:?}: {body}");
    }
    let (_, v) = gw.get("/v1/tools/rs__ok").await;
    assert_eq!(
        (v["state"].as_str(), v["calls"]["failure"].as_u64()),
        (Some("closed"), Some(0)),
        "nothing forged counted: {v}"
    );
    assert_eq!(
        gw.get("/v1/tools/victim").await.0,
        404,
        "no forged span recorded"
    );
    // The same bodies with their declared types do what they say (the refusals above were
    // the content type's, nothing else).
    let proto = [("content-type", "application/x-protobuf")];
    let (status, _, body) = http_raw(
        gw.port,
        "POST",
        "/v1/traces",
        &proto,
        &error_spans("victim", 3),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (_, v) = gw.get("/v1/tools/victim").await;
    assert_eq!(v["state"], "open", "{v}");
    for _ in 0..3 {
        let (status, v) = gw
            .post("/v1/tools/rs__ok/report", r#"{"outcome":"failure"}"#)
            .await;
        assert_eq!(status, 200, "{v}");
    }
    let (_, v) = gw.get("/v1/tools/rs__ok").await;
    assert_eq!(v["state"], "open", "{v}");
}

pub async fn a_claim_with_an_overlong_name_is_a_400_naming_the_limit() {
    let gw = Gateway::http(&config(), &[]).await;
    for name in ["x".repeat(257), format!("rs__{}", "y".repeat(300))] {
        let (status, v) = gw.post(&format!("/v1/tools/{name}/claim"), "{}").await;
        assert_eq!(status, 400, "{v}");
        let error = v["error"].as_str().unwrap_or_default();
        assert!(error.contains("256 bytes"), "{v}");
        let (status, _) = gw
            .post(
                &format!("/v1/tools/{name}/report"),
                r#"{"outcome":"failure"}"#,
            )
            .await;
        assert_eq!(status, 400);
        assert_eq!(gw.get(&format!("/v1/tools/{name}")).await.0, 400);
    }
    let (status, v) = gw
        .post(&format!("/v1/tools/{}/claim", "x".repeat(256)), "{}")
        .await;
    assert_eq!(
        (status, v["decision"].as_str()),
        (200, Some("allowed")),
        "256 bytes fit: {v}"
    );
    let (status, v) = gw.post("/v1/tools/t/claim", "[1]").await;
    assert_eq!(status, 400, "a claim's body is an object: {v}");
}

/// One gate's answers, checked the same way against the gateway and the library's receiver.
/// `trip` makes `tool` fail three times through that server's own feed.
async fn gate_contract(port: u16, tool: &str, trip: impl std::future::Future<Output = ()>) {
    let json = [("content-type", "application/json")];
    let (status, v) = http(port, "GET", &format!("/v1/tools/{tool}"), &[], "").await;
    assert_eq!(status, 404, "never seen: {v}");
    assert_eq!(
        (
            v["tool"].as_str(),
            v["tracked"].as_bool(),
            v["available"].as_bool(),
            v["state"].as_str()
        ),
        (Some(tool), Some(false), Some(true), Some("closed")),
        "{v}"
    );
    assert_eq!(v["retry_after_ms"], Value::Null, "{v}");
    let (status, v) = http(
        port,
        "POST",
        &format!("/v1/tools/{tool}/claim"),
        &json,
        "{}",
    )
    .await;
    assert_eq!(
        (status, v["decision"].as_str()),
        (200, Some("allowed")),
        "{v}"
    );
    trip.await;
    let (status, v) = http(port, "GET", &format!("/v1/tools/{tool}"), &[], "").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (
            v["tracked"].as_bool(),
            v["available"].as_bool(),
            v["state"].as_str(),
            v["calls"]["failure"].as_u64()
        ),
        (Some(true), Some(false), Some("open"), Some(3)),
        "{v}"
    );
    assert!(
        v["retry_after_ms"]
            .as_u64()
            // Never early; the coarse clock may read up to a tick late.
            .is_some_and(|ms| ms > 25_000 && ms <= 30_100),
        "{v}"
    );
    let (status, headers, body) = http_raw(
        port,
        "POST",
        &format!("/v1/tools/{tool}/claim"),
        &json,
        b"{}",
    )
    .await;
    assert_eq!(status, 503, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (
            v["decision"].as_str(),
            v["refused_by"].as_str(),
            v["message"].as_str()
        ),
        (Some("refused"), Some("tool"), Some(REFUSAL)),
        "{v}"
    );
    let ms = v["retry_after_ms"].as_u64().expect("retry_after_ms");
    let retry_after = ms.div_ceil(1000).to_string();
    assert!(
        headers
            .iter()
            .any(|(k, v)| k == "retry-after" && *v == retry_after),
        "{headers:?}"
    );
    let long = "z".repeat(300);
    let (status, v) = http(
        port,
        "POST",
        &format!("/v1/tools/{long}/claim"),
        &json,
        "{}",
    )
    .await;
    assert_eq!(status, 400, "{v}");
    assert!(v["error"].as_str().unwrap().contains("256 bytes"), "{v}");
    let (status, _) = http(port, "POST", &format!("/v1/tools/{tool}/claim"), &[], "").await;
    assert_eq!(status, 415, "a claim without its content type");
}

pub async fn the_gate_answers_one_contract_in_the_gateway_and_the_receiver() {
    let gw = Gateway::http(&config(), &[]).await;
    let port = gw.port;
    gate_contract(port, "billing_api", async {
        for _ in 0..3 {
            let (status, _) = http(
                port,
                "POST",
                "/v1/tools/billing_api/report",
                &[("content-type", "application/json")],
                r#"{"outcome":"failure"}"#,
            )
            .await;
            assert_eq!(status, 200);
        }
    })
    .await;

    let registry = std::sync::Arc::new(ToolHealthRegistry::new());
    let receiver = Receiver::new(registry.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let served = receiver.clone();
    let server = tokio::spawn(async move { served.serve(listener, std::future::pending()).await });
    gate_contract(port, "billing_api", async {
        for _ in 0..3 {
            registry.record_failure("billing_api", Duration::from_millis(5));
        }
    })
    .await;
    server.abort();
}

pub async fn http_mcp_sessions_are_capped() {
    let gw = Gateway::http(&config(), &[]).await;
    let mcp = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
    ];
    // 1,000 sessions (the cap), opened eight at a time.
    let mut ids = Vec::new();
    for _ in 0..125 {
        let batch = (0..8).map(|_| http_raw(gw.port, "POST", "/mcp", &mcp, INITIALIZE.as_bytes()));
        for (status, headers, body) in futures_util::future::join_all(batch).await {
            assert_eq!(status, 200, "{body}");
            let id = headers
                .iter()
                .find(|(k, _)| k == "mcp-session-id")
                .map(|(_, v)| v.clone());
            ids.push(id.expect("a session id"));
        }
    }
    let (status, headers, body) =
        http_raw(gw.port, "POST", "/mcp", &mcp, INITIALIZE.as_bytes()).await;
    assert_eq!(status, 503, "one session past the cap: {body}");
    assert!(
        headers.iter().any(|(k, v)| k == "retry-after" && v == "5"),
        "{headers:?}"
    );
    let v: Value = serde_json::from_str(&body).expect("a JSON-RPC error");
    assert_eq!(
        (v["id"].as_u64(), v["error"]["code"].as_i64()),
        (Some(1), Some(-32000)),
        "{v}"
    );
    // A request of a live session passes (closing it here), and the room it leaves is taken.
    let mut with_session: Vec<(&str, &str)> = mcp.to_vec();
    with_session.push(("mcp-session-id", &ids[0]));
    with_session.push(("mcp-protocol-version", "2025-06-18"));
    let (status, _, body) = http_raw(gw.port, "DELETE", "/mcp", &with_session, b"").await;
    assert!((200..300).contains(&status), "{status}: {body}");
    crate::support::eventually("room for one more session", WAIT, || async {
        let (status, _, _) = http_raw(gw.port, "POST", "/mcp", &mcp, INITIALIZE.as_bytes()).await;
        (status == 200).then_some(())
    })
    .await;
}
