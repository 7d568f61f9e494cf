//! MCP 2026-07-28 on both sides of the gateway (issue 30, item 1), with the TypeScript SDK 2.4
//! server (`integrations/servers/typescript-2/server.mjs`) speaking only that protocol
//! (`legacy: 'reject'`) upstream, over stdio and streamable HTTP, and rmcp's client as the host
//! (in its `server/discover` mode where the host's protocol matters):
//!
//! * a server that knows no `initialize` is reached, listed and called, and over HTTP every
//!   request carries its `Mcp-Method` header;
//! * a server that stops answering is refused as a whole, and probed back with
//!   `server/discover` (its protocol has no `ping`) once it answers again;
//! * its list changes are heard on the `subscriptions/listen` stream the gateway opens, and its
//!   `ttlMs` spares it listings;
//! * hosts of 2026-07-28 are told how long the list stays as it is (`ttlMs`, `cacheScope`);
//! * a request whose `Mcp-Method` or `Mcp-Name` header disagrees with its body is refused.
//!
//! Without the SDK (`bash scripts/mcp_sdks.sh`) a test is ignored with the reason, and fails
//! under `CI=true`.

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{
    CacheScope, ClientRequest, ListToolsRequest, ListToolsResult, ProtocolVersion, ServerResult,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt as _, RunningService};
use rmcp::RoleClient;
use serde_json::{json, Value};

use crate::breakers::{after_change, seen};
use crate::supervise::server;
use crate::support::{
    call, eventually, every_server_connected, free_port, http, list, node2, rmcp_http, seen_count,
    signal, skip, text, upstream, workspace, Changes, Gateway, Log, REFUSAL, WAIT,
};

/// An SDK's server over streamable HTTP on 127.0.0.1:`port`.
struct HttpServer {
    child: tokio::process::Child,
    port: u16,
    _log: Arc<Log>,
}

impl HttpServer {
    /// The TypeScript SDK 2.4 server, speaking only MCP 2026-07-28, with `args`.
    async fn ts2(args: &[&str]) -> Self {
        let node = node2().unwrap_or_else(|why| skip(&why));
        let mut all = vec!["--legacy", "reject"];
        all.extend_from_slice(args);
        http_server(node, "integrations/servers/typescript-2/server.mjs", &all).await
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

/// Sends `SIGCONT` to a process the test stopped, whatever happens to the test: a stopped
/// process must not outlive it.
struct Stopped(u32);

impl Stopped {
    fn stop(pid: u32) -> Self {
        signal(pid, "STOP");
        Self(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-CONT", &self.0.to_string()])
            .status();
    }
}

/// Waits until every server of the gateway is connected.
async fn all_connected(gw: &Gateway) {
    eventually("every server connected", WAIT, || async {
        let (_, v) = gw.get("/v1/servers").await;
        every_server_connected(&v)
    })
    .await;
}

/// A server that speaks only MCP 2026-07-28 (it answers `initialize` with `-32022`) is
/// reached over stdio and over HTTP, listed and called; over HTTP each request carried its
/// `Mcp-Method` header, and nothing of the handshake era was sent to either.
pub async fn a_server_that_speaks_only_2026_07_28_is_reached_over_stdio_and_http() {
    let ts2 = upstream::typescript2(&[]).unwrap_or_else(|why| skip(&why));
    let remote = HttpServer::ts2(&[]).await;
    let config = json!({"mcpServers": {"s": ts2, "h": {"url": remote.url()}}});
    let gw = Gateway::http(&config, &[]).await;
    all_connected(&gw).await;
    let (client, _) = rmcp_http(gw.port).await;
    let names = list(&client).await;
    for tool in ["s__ok", "s__needs_int", "h__ok", "h__needs_int"] {
        assert!(names.iter().any(|n| n == tool), "{tool}: {names:?}");
    }
    for s in ["s", "h"] {
        let r = call(&client, &format!("{s}__needs_int"), json!({"n": 21}))
            .await
            .expect("a result");
        assert_eq!(text(&r), "twice 21 is 42", "{s}");
        let seen = seen(&client, s).await;
        assert_eq!(seen_count(&seen, "methods", "initialize"), 0, "{s}: {seen}");
        assert_eq!(seen_count(&seen, "methods", "ping"), 0, "{s}: {seen}");
        assert_eq!(
            seen_count(&seen, "methods", "server/discover"),
            1,
            "{s}: it opened the connection: {seen}"
        );
        assert_eq!(
            seen_count(&seen, "tools", "needs_int"),
            1,
            "{s}: the call reached it: {seen}"
        );
    }
    let seen = seen(&client, "h").await;
    for method in ["server/discover", "tools/list", "tools/call"] {
        assert_eq!(
            seen_count(&seen, "headers", method),
            seen_count(&seen, "methods", method),
            "every {method} carried `Mcp-Method: {method}`: {seen}"
        );
    }
    drop(remote);
}

/// A 2026-07-28 server that stops answering (the process stopped: calls and their probes time
/// out) is refused as a whole; once it answers again and its cooldown is over, the next call's
/// probe is `server/discover` — never a `ping`, which its protocol answers `-32601` — and the
/// call goes through. Over stdio and over HTTP.
pub async fn a_hung_2026_07_28_server_is_refused_and_probed_back_with_server_discover() {
    let ts2 = upstream::typescript2(&[]).unwrap_or_else(|why| skip(&why));
    let remote = HttpServer::ts2(&[]).await;
    let remote_pid = remote.child.id().expect("a pid");
    let config = json!({
        "mcpServers": {"s": ts2, "h": {"url": remote.url()}},
        "health": {"failureThreshold": 2, "cooldownSeconds": 2, "timeoutSeconds": 1,
                   "pingTimeoutSeconds": 1},
    });
    let gw = Gateway::http(&config, &[]).await;
    all_connected(&gw).await;
    let (client, _) = rmcp_http(gw.port).await;
    let _ = list(&client).await;
    let stdio_pid = server(&gw, "s").await["pid"].as_u64().expect("a pid") as u32;
    for (s, pid) in [("s", stdio_pid), ("h", remote_pid)] {
        let tool = format!("{s}__ok");
        assert_eq!(
            text(&call(&client, &tool, json!({})).await.unwrap()),
            "fine"
        );
        let stopped = Stopped::stop(pid);
        for i in 0..2 {
            let r = call(&client, &tool, json!({})).await.expect("a result");
            assert!(
                text(&r).contains("did not answer within 1.0 s"),
                "{s} call {i}: {}",
                text(&r)
            );
        }
        let doc = server(&gw, s).await;
        assert_eq!(
            doc["breaker"], "open",
            "no answer to the calls nor to the probes after them: {doc}"
        );
        let r = call(&client, &tool, json!({})).await.expect("a result");
        assert!(
            text(&r).starts_with(REFUSAL) && text(&r).contains("is not answering"),
            "{s}: refused as a whole: {}",
            text(&r)
        );
        let opened = Instant::now();
        drop(stopped);
        // Its cooldown over, the next call sends the probe first: answered, it goes through.
        let answered = eventually("the server probed back", WAIT, || async {
            let r = call(&client, &tool, json!({})).await.ok()?;
            (text(&r) == "fine").then_some(Instant::now())
        })
        .await;
        assert!(
            answered.duration_since(opened) >= Duration::from_millis(1_500),
            "{s}: not before its cooldown"
        );
        let doc = server(&gw, s).await;
        assert_eq!(doc["breaker"], "closed", "{doc}");
        let seen = seen(&client, s).await;
        assert_eq!(
            seen_count(&seen, "methods", "ping"),
            0,
            "{s}: no ping: {seen}"
        );
        // The connection's, the two after the timeouts (answered late, once it ran again),
        // and the probe that closed the breaker.
        assert!(
            seen_count(&seen, "methods", "server/discover") >= 4,
            "{s}: probed with server/discover: {seen}"
        );
        assert!(
            gw.log
                .text()
                .contains(&format!("MCP server `{s}` answers again")),
            "{}",
            gw.log.text()
        );
    }
    drop(remote);
}

/// A 2026-07-28 server's list change is heard on the `subscriptions/listen` stream the gateway
/// opens (the host is told and lists the new tool), and while the `ttlMs` it gave its list
/// runs, the gateway does not ask it again, however often hosts list.
pub async fn a_2026_07_28_servers_changes_come_on_its_listen_stream_and_its_ttl_spares_it_lists() {
    let ts2 = upstream::typescript2(&["--tools-ttl", "600000"]).unwrap_or_else(|why| skip(&why));
    let config = json!({"mcpServers": {"s": ts2}});
    let gw = Gateway::http(&config, &[]).await;
    all_connected(&gw).await;
    let (client, changes) = rmcp_http(gw.port).await;
    for _ in 0..5 {
        assert!(list(&client).await.iter().any(|n| n == "s__grow"));
    }
    let seen_before = seen(&client, "s").await;
    assert_eq!(
        seen_count(&seen_before, "methods", "tools/list"),
        1,
        "listed once for five hosts' lists: {seen_before}"
    );
    assert_eq!(
        seen_count(&seen_before, "methods", "subscriptions/listen"),
        1,
        "{seen_before}"
    );
    let before = changes.count();
    assert_eq!(
        text(&call(&client, "s__grow", json!({})).await.unwrap()),
        "grown"
    );
    let (_, names) = after_change(&client, &changes, before, "s__grown listed", |n| {
        n.iter().any(|t| t == "s__grown")
    })
    .await;
    assert!(names.iter().any(|n| n == "s__ok"));
    assert_eq!(
        text(&call(&client, "s__grown", json!({})).await.unwrap()),
        "here"
    );
    let seen = seen(&client, "s").await;
    assert_eq!(
        seen_count(&seen, "methods", "tools/list"),
        2,
        "listed again once, when it said its list changed: {seen}"
    );
}

/// A host of MCP 2026-07-28 (rmcp's client in its `server/discover` mode).
async fn modern_host(port: u16) -> RunningService<RoleClient, Changes> {
    let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(format!(
        "http://127.0.0.1:{port}/mcp"
    ));
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    tokio::time::timeout(
        WAIT,
        Changes::default().serve_with_lifecycle(transport, lifecycle),
    )
    .await
    .expect("discovery in time")
    .expect("discovery")
}

/// One `tools/list` as it came (no client cache in between).
async fn list_raw(client: &RunningService<RoleClient, Changes>) -> ListToolsResult {
    let request = ClientRequest::ListToolsRequest(ListToolsRequest::default());
    match tokio::time::timeout(WAIT, client.peer().send_request(request)).await {
        Ok(Ok(ServerResult::ListToolsResult(r))) => r,
        other => panic!("a list: {other:?}"),
    }
}

/// `tools/list` tells a 2026-07-28 host how long it stays as it is: the gateway's minute while
/// nothing is foreseen (its server gave ten), until the cooldown's end while a tool is hidden,
/// `0` while a probe is under way; `cacheScope` is the server's `public`. A host of the
/// handshake era is given no hint.
pub async fn tools_list_tells_2026_07_28_hosts_how_long_it_stays_as_it_is() {
    let ts2 = upstream::typescript2(&["--tools-ttl", "600000"]).unwrap_or_else(|why| skip(&why));
    let config = json!({
        "mcpServers": {"s": ts2},
        "health": {"failureThreshold": 2, "cooldownSeconds": 5,
                   "servers": {"s": {"tools": {"hang": {"timeoutSeconds": 2, "cooldownSeconds": 1}}}}},
    });
    let gw = Gateway::http(&config, &[]).await;
    all_connected(&gw).await;
    let host = modern_host(gw.port).await;
    let r = list_raw(&host).await;
    assert!(r.tools.iter().any(|t| t.name == "s__flaky"));
    let ttl = r.ttl_ms.expect("a ttlMs");
    assert!(
        (50_000..=60_000).contains(&ttl),
        "nothing foreseen: the gateway's minute, under the server's ten: {ttl}"
    );
    assert_eq!(r.cache_scope, Some(CacheScope::Public));
    let (legacy, _) = rmcp_http(gw.port).await;
    let request = ClientRequest::ListToolsRequest(ListToolsRequest::default());
    match legacy.peer().send_request(request).await {
        Ok(ServerResult::ListToolsResult(r)) => {
            assert_eq!((r.ttl_ms, r.cache_scope), (None, None), "no hint")
        }
        other => panic!("a list: {other:?}"),
    }

    // A tool hidden for its cooldown: the list changes when it ends.
    for _ in 0..2 {
        let r = call(&legacy, "s__flaky", json!({}))
            .await
            .expect("a result");
        assert_eq!(r.is_error, Some(true));
    }
    // How long the gate refuses it, read just before and just after the list.
    let refused_for = || async {
        let (_, doc) = http(gw.port, "GET", "/v1/tools/s__flaky", &[], "").await;
        doc["retry_after_ms"].as_u64().expect("refused")
    };
    let before = refused_for().await;
    let r = list_raw(&host).await;
    let after = refused_for().await;
    assert!(!r.tools.iter().any(|t| t.name == "s__flaky"), "hidden");
    let ttl = r.ttl_ms.expect("a ttlMs");
    assert!(
        before <= 5_100 && after <= ttl && ttl <= before,
        "until the cooldown's end: {after} <= {ttl} <= {before}"
    );

    // A probe under way decides at any moment.
    for _ in 0..2 {
        let r = call(&legacy, "s__hang", json!({})).await.expect("a result");
        assert!(
            text(&r).contains("did not answer within 2.0 s"),
            "{}",
            text(&r)
        );
    }
    eventually("hang's cooldown over", WAIT, || async {
        let (_, doc) = http(gw.port, "GET", "/v1/tools/s__hang", &[], "").await;
        (doc["available"] == true).then_some(())
    })
    .await;
    let probe = tokio::spawn(async move { call(&legacy, "s__hang", json!({})).await });
    eventually("the probe under way", WAIT, || async {
        let (_, doc) = http(gw.port, "GET", "/v1/tools/s__hang", &[], "").await;
        (doc["state"] == "half_open").then_some(())
    })
    .await;
    let r = list_raw(&host).await;
    assert_eq!(r.ttl_ms, Some(0), "a probe under way");
    let _ = probe.await;
}

/// Over streamable HTTP a 2026-07-28 request whose `Mcp-Method` or `Mcp-Name` header
/// disagrees with its body, or that lacks one (or its `MCP-Protocol-Version`), is refused with
/// HTTP 400 and `-32020` (HeaderMismatch) and reaches nothing — and so is a call whose
/// `Mcp-Param-*` header (an argument its tool's `x-mcp-header` annotation mirrors) disagrees
/// or is missing; the same requests with the right headers are answered.
pub async fn a_request_whose_headers_disagree_with_its_body_is_refused() {
    let config = json!({"mcpServers": {"rs": upstream::rmcp()}});
    let gw = Gateway::http(&config, &[]).await;
    all_connected(&gw).await;
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let body = |id: u64, method: &str, params: Value| {
        let mut params = params;
        params["_meta"] = meta.clone();
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
    };
    let ok = body(1, "tools/call", json!({"name": "rs__ok", "arguments": {}}));
    let listing = body(2, "tools/list", json!({}));
    // `echo`'s `text` is annotated `x-mcp-header: Text`: a host mirrors it into a header.
    let echo = body(
        3,
        "tools/call",
        json!({"name": "rs__echo", "arguments": {"text": "eu"}}),
    );
    const V: (&str, &str) = ("MCP-Protocol-Version", "2026-07-28");
    const CALL: (&str, &str) = ("Mcp-Method", "tools/call");
    let refused: [(Headers<'_>, &String, &str); 8] = [
        (
            &[V, ("Mcp-Method", "tools/list"), ("Mcp-Name", "rs__ok")],
            &ok,
            "method",
        ),
        (&[V, CALL, ("Mcp-Name", "rs__flaky")], &ok, "name"),
        (&[V, CALL], &ok, "no name"),
        (&[V], &listing, "no method"),
        (&[CALL, ("Mcp-Name", "rs__ok")], &ok, "no protocol version"),
        (
            &[
                ("MCP-Protocol-Version", "2025-11-25"),
                CALL,
                ("Mcp-Name", "rs__ok"),
            ],
            &ok,
            "another protocol version",
        ),
        (
            &[V, CALL, ("Mcp-Name", "rs__echo"), ("Mcp-Param-Text", "us")],
            &echo,
            "a mirrored argument",
        ),
        (
            &[V, CALL, ("Mcp-Name", "rs__echo")],
            &echo,
            "no mirrored argument",
        ),
    ];
    for (headers, body, what) in refused {
        let (status, answer) = post_mcp(gw.port, headers, body).await;
        assert_eq!(status, 400, "{what}: {answer}");
        assert_eq!(answer["error"]["code"], -32020, "{what}: {answer}");
    }
    let (status, answer) = post_mcp(gw.port, &[V, CALL, ("Mcp-Name", "rs__ok")], &ok).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["content"][0]["text"], "fine", "{answer}");
    let headers = [V, CALL, ("Mcp-Name", "rs__echo"), ("Mcp-Param-Text", "eu")];
    let (status, answer) = post_mcp(gw.port, &headers, &echo).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["content"][0]["text"], "eu", "{answer}");
    let (client, _) = rmcp_http(gw.port).await;
    let seen = seen(&client, "rs").await;
    assert_eq!(
        (
            seen_count(&seen, "tools", "ok"),
            seen_count(&seen, "tools", "echo")
        ),
        (1, 1),
        "only the agreeing requests reached the server: {seen}"
    );
}

/// Headers of a request, `(name, value)`.
type Headers<'a> = &'a [(&'a str, &'a str)];

/// A POST of `body` to `/mcp` with `headers` (and a JSON body's content type and accept):
/// the status and the one JSON-RPC message answered.
async fn post_mcp(port: u16, headers: &[(&str, &str)], body: &str) -> (u16, Value) {
    let mut all = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    all.extend_from_slice(headers);
    http_sse(port, &all, body).await
}

/// A POST to `/mcp`: the status and the one JSON-RPC message answered (as JSON, or as the data
/// of an SSE event).
async fn http_sse(port: u16, headers: &[(&str, &str)], body: &str) -> (u16, Value) {
    let (status, _, text) =
        crate::support::http_raw(port, "POST", "/mcp", headers, body.as_bytes()).await;
    let json = serde_json::from_str(&text).ok().or_else(|| {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|v| v.get("id").is_some())
    });
    (status, json.unwrap_or(Value::Null))
}

/// A host of MCP 2026-07-28 (the TypeScript SDK 2.4 client) that lists, then closes — its
/// `subscriptions/listen` stream with it — leaves nothing in the gateway's log, rmcp's own
/// warnings and errors included (on here, as with `RUST_LOG=warn`): before, each such close logged
/// `ERROR rmcp::service: failed to send pending response during drain`. Its subscription is
/// gone from the hosts told of changes.
pub async fn a_2026_07_28_host_that_closes_its_stream_leaves_nothing_in_the_log() {
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};

    let node = node2().unwrap_or_else(|why| skip(&why));
    let config = json!({"mcpServers": {"rs": upstream::rmcp()}});
    let gw = Gateway::http_with_env(
        &config,
        &[],
        &[("TOOL_HEALTH_GATEWAY_LOG", "info,rmcp=warn")],
    )
    .await;
    all_connected(&gw).await;
    for round in 0..2 {
        let mut host = tokio::process::Command::new(&node)
            .arg(workspace().join("integrations/servers/typescript-2/client.mjs"))
            .args(["--era", "auto", "http", &gw.url("/mcp")])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the client");
        let log = Log::spawn(host.stderr.take().expect("piped"), "[ts2-client]");
        let mut stdin = host.stdin.take().expect("piped");
        let mut lines = tokio::io::BufReader::new(host.stdout.take().expect("piped")).lines();
        stdin
            .write_all(b"{\"id\": 1, \"op\": \"list\"}\n")
            .await
            .expect("the client reads");
        let mut listed = false;
        while let Ok(Ok(Some(line))) = tokio::time::timeout(WAIT, lines.next_line()).await {
            let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
            if v["event"] == "ready" {
                assert_eq!(v["protocol"], "2026-07-28", "{v}");
            }
            if v["id"] == 1 {
                assert!(v["tools"].to_string().contains("rs__ok"), "{v}");
                listed = true;
                break;
            }
        }
        assert!(listed, "round {round}: the client listed:\n{}", log.text());
        assert_eq!(
            gw.get("/v1/servers").await.1["hosts"],
            1,
            "its subscription is known"
        );
        drop(stdin);
        let status = tokio::time::timeout(WAIT, host.wait())
            .await
            .expect("the client ends")
            .expect("its status");
        assert!(status.success(), "{status}:\n{}", log.text());
        eventually("its subscription gone", WAIT, || async {
            (gw.get("/v1/servers").await.1["hosts"] == 0).then_some(())
        })
        .await;
    }
    // One more exchange after the last close: what the closes left to log is logged by then.
    let (client, _) = rmcp_http(gw.port).await;
    assert!(list(&client).await.iter().any(|n| n == "rs__ok"));
    let text = gw.log.text();
    assert!(
        !text.contains("rmcp::") && !text.contains("ERROR"),
        "nothing logged:\n{text}"
    );
}

/// An SDK server over streamable HTTP on 127.0.0.1:`port`: `program script args… http PORT`.
async fn http_server(program: std::path::PathBuf, script: &str, args: &[&str]) -> HttpServer {
    let port = free_port();
    let mut child = tokio::process::Command::new(program)
        .arg(workspace().join(script))
        .args(args)
        .args(["http", &port.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the server");
    let log = Log::spawn(child.stderr.take().expect("piped"), "[http-server]");
    log.wait_for(&format!("listening on 127.0.0.1:{port}"), WAIT)
        .await;
    HttpServer {
        child,
        port,
        _log: log,
    }
}

/// Every SDK's server, over stdio and over streamable HTTP, each in its era: the Python SDK
/// 2.3 server and the TypeScript SDK 2.4 one (only 2026-07-28) are opened with
/// `server/discover`; the Python SDK 1.30 server and the TypeScript SDK 1.32 one with
/// `initialize`, after they answered the probe with an error (`-32602`, `-32001`: servers of
/// the handshake era); each is listed and called, and the probe after a timed-out call is the
/// one its protocol has — `server/discover` to the first two, `ping` to the others — answered,
/// so the timeout is the tool's and the server stays closed.
pub async fn every_sdk_server_is_reached_in_its_era_over_stdio_and_http() {
    let python = crate::support::python().unwrap_or_else(|why| skip(&why));
    let python1 = crate::support::python1().unwrap_or_else(|why| skip(&why));
    let node = crate::support::node().unwrap_or_else(|why| skip(&why));
    let py_script = "integrations/servers/python/server.py";
    let py = http_server(python, py_script, &[]).await;
    let py1 = http_server(python1, py_script, &[]).await;
    let ts = http_server(node, "integrations/servers/typescript/server.mjs", &[]).await;
    let ts2 = HttpServer::ts2(&[]).await;
    let stdio = |r: Result<Value, String>| r.unwrap_or_else(|why| skip(&why));
    let config = json!({
        "mcpServers": {
            "pys": stdio(upstream::python()), "pyh": {"url": py.url()},
            "py1s": stdio(upstream::python1()), "py1h": {"url": py1.url()},
            "tss": stdio(upstream::typescript()), "tsh": {"url": ts.url()},
            "ts2s": stdio(upstream::typescript2(&[])), "ts2h": {"url": ts2.url()},
        },
        "health": {"timeoutSeconds": 1},
    });
    let gw = Gateway::http(&config, &[]).await;
    all_connected(&gw).await;
    let (client, _) = rmcp_http(gw.port).await;
    let names = list(&client).await;
    const DISCOVER: &str = "server/discover";
    for (s, modern) in [
        ("pys", true),
        ("pyh", true),
        ("py1s", false),
        ("py1h", false),
        ("tss", false),
        ("tsh", false),
        ("ts2s", true),
        ("ts2h", true),
    ] {
        assert!(names.iter().any(|n| *n == format!("{s}__ok")), "{names:?}");
        let r = call(&client, &format!("{s}__needs_int"), json!({"n": 2}))
            .await
            .expect("a result");
        assert_eq!(text(&r), "twice 2 is 4", "{s}");
        let before = seen(&client, s).await;
        if modern {
            assert_eq!(seen_count(&before, "methods", DISCOVER), 1, "{s}: {before}");
            assert_eq!(
                seen_count(&before, "methods", "initialize"),
                0,
                "{s}: {before}"
            );
        }
        let r = call(&client, &format!("{s}__hang"), json!({}))
            .await
            .expect("a result");
        assert!(
            text(&r).contains("did not answer within 1.0 s"),
            "{s}: {}",
            text(&r)
        );
        let after = seen(&client, s).await;
        let (probe, other) = if modern {
            (DISCOVER, "ping")
        } else {
            ("ping", DISCOVER)
        };
        assert_eq!(
            seen_count(&after, "methods", probe),
            seen_count(&before, "methods", probe) + 1,
            "{s}: one {probe} after the timeout: {after}"
        );
        assert_eq!(
            seen_count(&after, "methods", other),
            seen_count(&before, "methods", other),
            "{s}: no {other}: {after}"
        );
        assert_eq!(server(&gw, s).await["breaker"], "closed", "{s}");
        let (_, doc) = http(gw.port, "GET", &format!("/v1/tools/{s}__hang"), &[], "").await;
        assert_eq!(doc["calls"]["failure"], 1, "the tool's timeout: {doc}");
    }
    drop((py, py1, ts, ts2));
}

/// A server of the handshake era that ends at any request before `initialize` (as servers built
/// on rmcp before its 2026-07-28 support do: here the Python SDK 1.30 server behind a launcher
/// that exits when the first line is `server/discover`) costs one attempt: the next one opens
/// with `initialize` alone, and so does every one after it once it connected so — a restart
/// of it needs no probe.
pub async fn a_server_that_ends_at_the_discover_probe_is_opened_with_initialize_next() {
    let python1 = crate::support::python1().unwrap_or_else(|why| skip(&why));
    let script = r#"IFS= read -r first || exit 1
case "$first" in
  *'"server/discover"'*) echo "this server ends at any request before initialize" >&2; exit 1 ;;
esac
{ printf '%s\n' "$first"; exec cat; } | exec "$0" "$1" stdio"#;
    let config = json!({
        "mcpServers": {"old": {
            "command": "sh",
            "args": ["-c", script, python1.display().to_string(),
                     workspace().join("integrations/servers/python/server.py").display().to_string()],
        }},
        "health": {"restart": {"initialBackoffSeconds": 0.2}},
    });
    let gw = Gateway::http(&config, &[]).await;
    all_connected(&gw).await;
    let ended = "exited before completing the MCP handshake";
    assert_eq!(
        gw.log.text().matches(ended).count(),
        1,
        "one attempt ended at the probe:\n{}",
        gw.log.text()
    );
    let (client, _) = rmcp_http(gw.port).await;
    assert_eq!(
        text(&call(&client, "old__ok", json!({})).await.unwrap()),
        "fine"
    );
    let pid = server(&gw, "old").await["pid"].as_u64().expect("a pid");
    crate::support::kill(pid);
    eventually("started again", WAIT, || async {
        let s = server(&gw, "old").await;
        (s["connected"] == true && s["pid"].as_u64() != Some(pid)).then_some(())
    })
    .await;
    assert_eq!(
        gw.log.text().matches(ended).count(),
        1,
        "the restart opened with initialize at once:\n{}",
        gw.log.text()
    );
    assert_eq!(
        text(&call(&client, "old__ok", json!({})).await.unwrap()),
        "fine"
    );
}
