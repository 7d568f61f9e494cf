//! The gateway with the official SDK clients as its hosts — the Python SDK's `mcp.Client`
//! (PyPI `mcp` 2.3.0, `integrations/servers/python/client.py`), the TypeScript SDK's `Client`
//! (npm `@modelcontextprotocol/sdk` 1.32.2, `integrations/servers/typescript/client.mjs`) and
//! the TypeScript SDK 2.x `Client` (`@modelcontextprotocol/client` 2.4.0,
//! `integrations/servers/typescript-2/client.mjs`) — over stdio (the client launches the
//! gateway, as a host does) and over streamable HTTP, with four real upstreams behind it: the
//! Python SDK server, the TypeScript SDK server, the TypeScript SDK 2.x server speaking only MCP
//! 2026-07-28 (`legacy: 'reject'`) and an rmcp server (this binary, `support/fixture.rs`).
//!
//! Both protocol eras, on both sides: the Python client and the 2.x client negotiate MCP
//! 2026-07-28 (`server/discover`, changes heard on `subscriptions/listen`) in their `auto`
//! mode and speak the handshake era (`initialize`, a session) in their `legacy` mode, the 1.32
//! client only the handshake era; upstream, the gateway speaks 2026-07-28 to the Python, 2.x and
//! rmcp servers and the handshake era to the 1.32 server.
//!
//! Each scenario runs for every client and transport (the `legacy` modes run the first one):
//!
//! * a failing tool trips, leaves the client's tool list (the client is told), comes back when
//!   its cooldown ends (told again, no call needed), and its next call is the probe that
//!   closes it; the HTTP API shows each step;
//! * a killed upstream leaves the list while the supervisor restarts it, the calls meanwhile
//!   count against nothing, and it comes back with its breaker closed;
//! * a hanging tool times out, and the model's bad arguments and made-up tool names never
//!   count against anything;
//! * the config file changes under the connected client (a server added, then one removed):
//!   the session stays, the client is told each time and lists what is there (issue 30);
//! * everything but tools passes through: the same survey of `server-everything` and
//!   `server-filesystem` directly and through the gateway (`passthrough.rs`, issue 30).
//!
//! The clients are driven line by line (the scripts' docs say how); what they receive is
//! what the SDKs parsed. Cooldowns are short and configured; waits for real processes are
//! bounded and generous (`support::WAIT`). Without the SDKs (`bash scripts/mcp_sdks.sh`
//! installs them) a test is ignored with the reason, and fails under `CI=true`.

// Items of the test modules are public to each other, not to any crate.
#![allow(unreachable_pub)]

#[path = "../support/mod.rs"]
mod support;

mod passthrough;

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, Notify};

use support::{
    eventually, every_server_connected, gateway_bin, http, kill, listening_port, seen_count, skip,
    trial, upstream, write_config, Log, REFUSAL, WAIT,
};

/// The SDK a client is written with, and the protocol era it speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sdk {
    /// `mcp` 2.3 in its default `auto` mode: MCP 2026-07-28.
    Python,
    /// `mcp` 2.3 in its `legacy` mode: the handshake era.
    PythonLegacy,
    /// `@modelcontextprotocol/sdk` 1.32: the handshake era.
    TypeScript,
    /// `@modelcontextprotocol/client` 2.4 in its `auto` mode: MCP 2026-07-28.
    TypeScript2,
    /// `@modelcontextprotocol/client` 2.4 in its default `legacy` mode: the handshake era.
    TypeScript2Legacy,
}

impl Sdk {
    /// Whether it negotiates MCP 2026-07-28 with the gateway.
    fn modern(self) -> bool {
        matches!(self, Self::Python | Self::TypeScript2)
    }

    /// The program, its script and the arguments before the transport.
    fn command(self) -> (PathBuf, PathBuf, Vec<&'static str>) {
        let servers = support::workspace().join("integrations/servers");
        match self {
            Self::Python | Self::PythonLegacy => (
                support::python().unwrap_or_else(|why| skip(&why)),
                servers.join("python/client.py"),
                if self == Self::Python {
                    vec!["--mode", "auto"]
                } else {
                    vec!["--mode", "legacy"]
                },
            ),
            Self::TypeScript => (
                support::node().unwrap_or_else(|why| skip(&why)),
                servers.join("typescript/client.mjs"),
                vec![],
            ),
            Self::TypeScript2 | Self::TypeScript2Legacy => (
                support::node2().unwrap_or_else(|why| skip(&why)),
                servers.join("typescript-2/client.mjs"),
                if self == Self::TypeScript2 {
                    vec!["--era", "auto"]
                } else {
                    vec!["--era", "legacy"]
                },
            ),
        }
    }
}

/// How the client reaches the gateway.
#[derive(Debug, Clone, Copy)]
enum Via {
    Stdio,
    Http,
}

/// The upstream each combination kills (every SDK's server is killed by one of them).
fn victim(sdk: Sdk, via: Via) -> &'static str {
    match (sdk, via) {
        (Sdk::Python | Sdk::PythonLegacy, Via::Stdio) => "py",
        (Sdk::Python | Sdk::PythonLegacy, Via::Http) => "ts",
        (Sdk::TypeScript, Via::Stdio) => "rs",
        (Sdk::TypeScript, Via::Http) => "py",
        (Sdk::TypeScript2 | Sdk::TypeScript2Legacy, Via::Stdio) => "ts2",
        (Sdk::TypeScript2 | Sdk::TypeScript2Legacy, Via::Http) => "rs",
    }
}

/// The four upstreams, or why they cannot run.
fn upstreams() -> Value {
    let py = upstream::python().unwrap_or_else(|why| skip(&why));
    let ts = upstream::typescript().unwrap_or_else(|why| skip(&why));
    let ts2 = upstream::typescript2(&[]).unwrap_or_else(|why| skip(&why));
    json!({"py": py, "ts": ts, "rs": upstream::rmcp(), "ts2": ts2})
}

/// A running SDK client of the gateway, and the gateway's HTTP port.
struct Host {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    answers: mpsc::UnboundedReceiver<Value>,
    changes: Arc<(AtomicU64, Notify)>,
    next_id: u64,
    /// The gateway's HTTP port (the API).
    port: u16,
    /// The client's stderr (with the gateway's log, when the client launched it).
    log: Arc<Log>,
    /// The gateway, when it was started over HTTP by the test.
    _gateway: Option<support::Gateway>,
    /// The gateway's config file (a change of it reloads the gateway).
    config: PathBuf,
    sdk: Sdk,
}

impl Host {
    /// Starts the gateway on `config` (through the client over stdio, or by itself over
    /// HTTP) and the `sdk` client, and waits until the client is connected.
    async fn start(sdk: Sdk, via: Via, config: &Value) -> Self {
        let (program, script, era) = sdk.command();
        let mut cmd = tokio::process::Command::new(program);
        cmd.arg(&script).args(era);
        let mut gateway = None;
        let path = match via {
            Via::Stdio => {
                let path: PathBuf = write_config(config);
                cmd.args(["stdio", gateway_bin(), "--config"])
                    .arg(&path)
                    .args(["--listen", "127.0.0.1:0"]);
                path
            }
            Via::Http => {
                let gw = support::Gateway::http(config, &[]).await;
                cmd.args(["http", &gw.url("/mcp")]);
                let path = gw.config.clone();
                gateway = Some(gw);
                path
            }
        };
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", script.display()));
        let log = Log::spawn(child.stderr.take().unwrap(), "[client]");
        let port = match &gateway {
            Some(gw) => gw.port,
            None => listening_port(&log).await,
        };
        let (tx, answers) = mpsc::unbounded_channel();
        let changes = Arc::new((AtomicU64::new(0), Notify::new()));
        let (ready_tx, ready) = tokio::sync::oneshot::channel();
        let c = Arc::clone(&changes);
        let stdout = child.stdout.take().unwrap();
        tokio::spawn(async move {
            let mut ready_tx = Some(ready_tx);
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| json!({"unreadable": line, "why": e.to_string()}));
                match v["event"].as_str() {
                    Some("list_changed") => {
                        c.0.fetch_add(1, Ordering::SeqCst);
                        c.1.notify_waiters();
                    }
                    Some("ready") => {
                        if let Some(t) = ready_tx.take() {
                            let _ = t.send(v);
                        }
                    }
                    _ => {
                        let _ = tx.send(v);
                    }
                }
            }
        });
        let stdin = child.stdin.take().unwrap();
        let hello = tokio::time::timeout(WAIT, ready)
            .await
            .unwrap_or_else(|_| panic!("{sdk:?} client not connected in time:\n{}", log.text()))
            .unwrap_or_else(|_| panic!("{sdk:?} client ended:\n{}", log.text()));
        assert_eq!(hello["server"], "tool-health-gateway", "{hello}");
        assert_eq!(
            hello["protocol"] == "2026-07-28",
            sdk.modern(),
            "{sdk:?} negotiated its era: {hello}"
        );
        Self {
            child,
            stdin,
            answers,
            changes,
            next_id: 1,
            port,
            log,
            _gateway: gateway,
            config: path,
            sdk,
        }
    }

    async fn ask(&mut self, mut cmd: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        cmd["id"] = json!(id);
        let line = format!("{cmd}\n");
        self.stdin
            .write_all(line.as_bytes())
            .await
            .expect("the client reads");
        self.stdin.flush().await.unwrap();
        let answer = tokio::time::timeout(WAIT, self.answers.recv())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "{:?} client: no answer to {cmd} within {WAIT:?}:\n{}",
                    self.sdk,
                    self.log.text()
                )
            })
            .unwrap_or_else(|| panic!("{:?} client ended:\n{}", self.sdk, self.log.text()));
        assert_eq!(answer["id"], json!(id), "answers come in order: {answer}");
        answer
    }

    /// The names `tools/list` gives the client.
    async fn list(&mut self) -> Vec<String> {
        let a = self.ask(json!({"op": "list"})).await;
        a["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("a list: {a}"))
            .iter()
            .filter_map(|t| t.as_str().map(str::to_owned))
            .collect()
    }

    /// Calls `name`: `Ok((is_error, text))`, or the JSON-RPC error `Err((code, message))`.
    async fn call(&mut self, name: &str, args: Value) -> Result<(bool, String), (i64, String)> {
        let a = self
            .ask(json!({"op": "call", "name": name, "arguments": args}))
            .await;
        if let Some(e) = a.get("error") {
            return Err((
                e["code"].as_i64().unwrap_or(0),
                e["message"].as_str().unwrap_or("").to_owned(),
            ));
        }
        Ok((
            a["isError"] == true,
            a["text"].as_str().unwrap_or("").to_owned(),
        ))
    }

    /// A call that answers a result (not a JSON-RPC error): its text, and whether it is an
    /// error.
    async fn result(&mut self, name: &str, args: Value) -> (bool, String) {
        self.call(name, args)
            .await
            .unwrap_or_else(|e| panic!("{name}: a result, not the error {e:?}"))
    }

    fn changes(&self) -> u64 {
        self.changes.0.load(Ordering::SeqCst)
    }

    /// Waits for a `list_changed` past `seen`, lists, and repeats until the list satisfies
    /// `pred` (a host lists again only when told): the count after which it did, and the list.
    async fn after_change(
        &mut self,
        mut seen: u64,
        what: &str,
        pred: impl Fn(&[String]) -> bool,
    ) -> (u64, Vec<String>) {
        let deadline = Instant::now() + WAIT;
        loop {
            loop {
                let notified = self.changes.1.notified();
                let n = self.changes();
                if n > seen {
                    seen = n;
                    break;
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() || tokio::time::timeout(left, notified).await.is_err() {
                    panic!(
                        "{:?} client: {what}: no list_changed past {seen} within {WAIT:?}:\n{}",
                        self.sdk,
                        self.log.text()
                    );
                }
            }
            let names = self.list().await;
            if pred(&names) {
                return (seen, names);
            }
        }
    }

    /// What the upstream `server` received, asked through the gateway.
    async fn seen(&mut self, server: &str) -> Value {
        let (is_error, text) = self.result(&format!("{server}__seen"), json!({})).await;
        assert!(!is_error, "{text}");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("seen answers JSON: {text:?}: {e}"))
    }

    async fn api(&self, path: &str) -> Value {
        let (status, v) = http(self.port, "GET", path, &[], "").await;
        assert!(status == 200 || status == 404, "{path}: {status} {v}");
        v
    }

    async fn server(&self, name: &str) -> Value {
        let v = self.api("/v1/servers").await;
        v["servers"]
            .as_array()
            .and_then(|a| a.iter().find(|s| s["server"] == name))
            .cloned()
            .unwrap_or_else(|| panic!("no server {name}: {v}"))
    }

    /// Closes the client (its session ends: over HTTP with a `DELETE`), and checks it had
    /// nothing to say about it (the Python SDK's client warns on a `DELETE` answered
    /// otherwise than 200 or 204).
    async fn stop(mut self) {
        drop(self.stdin);
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
        let log = self.log.text();
        assert!(
            !log.contains("Session termination failed"),
            "the session ended cleanly: {log}"
        );
    }
}

fn has(names: &[String], name: &str) -> bool {
    names.iter().any(|n| n == name)
}

const SERVERS: [&str; 4] = ["py", "ts", "rs", "ts2"];

/// A failing tool on each of the four upstreams trips, leaves the list, comes back at its
/// cooldown's end, and its next call is the probe that closes it.
async fn a_sick_tool_leaves_the_list_and_comes_back(sdk: Sdk, via: Via) {
    let cooldown = Duration::from_secs(3);
    let config = json!({
        "mcpServers": upstreams(),
        "health": {"failureThreshold": 3, "cooldownSeconds": 3, "probeTimeoutSeconds": 30},
    });
    let mut host = Host::start(sdk, via, &config).await;
    // The first list may come before a slow server is up (`tools/list` waits for the first
    // attempts only so long): wait until all three are.
    eventually("every server connected", WAIT, || async {
        every_server_connected(&host.api("/v1/servers").await)
    })
    .await;
    let names = host.list().await;
    for s in SERVERS {
        assert!(
            has(&names, &format!("{s}__flaky")) && has(&names, &format!("{s}__ok")),
            "{names:?}"
        );
    }
    let before = host.changes();

    let mut tripped_at = Instant::now();
    for s in SERVERS {
        for i in 0..3 {
            // Before the call that trips: its cooldown starts after this instant.
            tripped_at = Instant::now();
            let (is_error, text) = host.result(&format!("{s}__flaky"), json!({})).await;
            assert!(is_error, "{s} call {i}: {text}");
            assert!(
                !text.starts_with(REFUSAL),
                "{s} call {i} reached the server: {text}"
            );
        }
    }
    let (seen_hidden, names) = host
        .after_change(before, "the flaky tools hidden", |n| {
            SERVERS.iter().all(|s| !has(n, &format!("{s}__flaky")))
        })
        .await;
    for s in SERVERS {
        assert!(
            has(&names, &format!("{s}__ok")),
            "its siblings stay: {names:?}"
        );
        // A host may still call a tool it remembers: refused softly, never sent.
        let (is_error, text) = host.result(&format!("{s}__flaky"), json!({})).await;
        assert!(is_error && text.starts_with(REFUSAL), "{text}");
        assert_eq!(seen_count(&host.seen(s).await, "tools", "flaky"), 3, "{s}");
        let doc = host.api(&format!("/v1/tools/{s}__flaky")).await;
        assert_eq!(
            (doc["available"].as_bool(), doc["refused_by"].as_str()),
            (Some(false), Some("tool")),
            "{doc}"
        );
        // Mended meanwhile; no call is made to it, yet at the cooldown's end the host is told.
        assert_eq!(
            host.result(&format!("{s}__mend"), json!({})).await.1,
            "mended"
        );
    }
    let (_, names) = host
        .after_change(seen_hidden, "the flaky tools back", |n| {
            SERVERS.iter().all(|s| has(n, &format!("{s}__flaky")))
        })
        .await;
    assert!(
        tripped_at.elapsed() >= cooldown,
        "listed again only after the cooldown ({:?})",
        tripped_at.elapsed()
    );
    assert!(has(&names, "py__ok"));
    for s in SERVERS {
        // The next call is the probe: it reaches the server once and closes the breaker.
        let (is_error, text) = host.result(&format!("{s}__flaky"), json!({})).await;
        assert!(!is_error, "{s}: {text}");
        assert_eq!(text, "flaky works");
        assert_eq!(seen_count(&host.seen(s).await, "tools", "flaky"), 4, "{s}");
        let doc = host.api(&format!("/v1/tools/{s}%2Fflaky")).await;
        assert_eq!(doc["state"], "closed", "{doc}");
        assert_eq!(
            (
                doc["calls"]["failure"].as_u64(),
                doc["calls"]["success"].as_u64()
            ),
            (Some(3), Some(1)),
            "{doc}"
        );
        let reasons: Vec<&str> = doc["transitions"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["reason"].as_str())
            .collect();
        assert_eq!(
            reasons,
            ["tripped", "probe_granted", "probe_succeeded"],
            "{doc}"
        );
    }
    host.stop().await;
}

/// A killed upstream leaves the list (the client is told) while it restarts; the calls made
/// meanwhile are answered "not connected … was not called", reach nothing and count against
/// nothing; it comes back (told again) with its breaker closed, no probe needed.
async fn a_dead_upstream_leaves_the_list_restarts_and_comes_back(sdk: Sdk, via: Via) {
    let dead = victim(sdk, via);
    let config = json!({
        "mcpServers": upstreams(),
        "health": {"failureThreshold": 3, "cooldownSeconds": 30,
                   // Longer than a call waits for a restart: the calls below are answered.
                   "servers": {dead: {"restart": {"initialBackoffSeconds": 3}}}},
    });
    let mut host = Host::start(sdk, via, &config).await;
    eventually("every server connected", WAIT, || async {
        every_server_connected(&host.api("/v1/servers").await)
    })
    .await;
    let names = host.list().await;
    assert!(has(&names, &format!("{dead}__ok")), "{names:?}");
    let pid = host.server(dead).await["pid"].as_u64().expect("a pid");
    let before = host.changes();
    kill(pid);
    eventually("the gateway saw it exit", WAIT, || async {
        (host.server(dead).await["connected"] == false).then_some(())
    })
    .await;
    for tool in ["ok", "flaky", "needs_int", "ok"] {
        let (is_error, text) = host
            .result(&format!("{dead}__{tool}"), json!({"n": 1}))
            .await;
        assert!(
            is_error
                && text.contains(&format!("MCP server `{dead}` is not connected"))
                && text.contains("was not called"),
            "{text}"
        );
    }
    let (seen_hidden, names) = host
        .after_change(before, "the dead server's tools gone", |n| {
            !n.iter().any(|t| t.starts_with(&format!("{dead}__")))
        })
        .await;
    for other in SERVERS.iter().filter(|s| **s != dead) {
        assert!(
            has(&names, &format!("{other}__ok")),
            "the other servers stay: {names:?}"
        );
        assert_eq!(
            host.result(&format!("{other}__ok"), json!({})).await.1,
            "fine"
        );
    }
    let server = host.server(dead).await;
    assert_eq!(
        server["breaker"].as_str(),
        Some("closed"),
        "the calls meanwhile counted nothing: {server}"
    );

    eventually("restarted", WAIT, || async {
        let s = host.server(dead).await;
        (s["restarts"] == 1 && s["connected"] == true && s["pid"].as_u64() != Some(pid))
            .then_some(())
    })
    .await;
    let (_, names) = host
        .after_change(seen_hidden, "the server's tools back", |n| {
            has(n, &format!("{dead}__ok"))
        })
        .await;
    assert!(has(&names, &format!("{dead}__flaky")));
    let seen = host.seen(dead).await;
    assert_eq!(
        seen_count(&seen, "methods", "ping"),
        0,
        "no probe was needed: {seen}"
    );
    assert!(
        seen_count(&seen, "methods", "server/discover") <= 1,
        "no probe was needed (a 2026-07-28 server's one server/discover opened the connection): {seen}"
    );
    assert_eq!(
        seen_count(&seen, "methods", "tools/call"),
        0,
        "no call reached it before: {seen}"
    );
    assert_eq!(
        host.result(&format!("{dead}__ok"), json!({})).await.1,
        "fine"
    );
    assert_eq!(host.server(dead).await["breaker"], "closed");
    host.stop().await;
}

/// A hanging tool times out (its server answers the ping after it: the tool's fault, not the
/// server's); the model's bad arguments and made-up names never count.
async fn a_hang_times_out_and_mistakes_never_count(sdk: Sdk, via: Via) {
    let config = json!({
        "mcpServers": upstreams(),
        "health": {"failureThreshold": 2, "cooldownSeconds": 60,
                   "servers": {
                       "py": {"tools": {"hang": {"timeoutSeconds": 1}}},
                       "ts": {"tools": {"hang": {"timeoutSeconds": 1}}},
                       "rs": {"tools": {"hang": {"timeoutSeconds": 1}}},
                       "ts2": {"tools": {"hang": {"timeoutSeconds": 1}}},
                   }},
    });
    let mut host = Host::start(sdk, via, &config).await;
    eventually("every server connected", WAIT, || async {
        every_server_connected(&host.api("/v1/servers").await)
    })
    .await;
    let _ = host.list().await;
    for s in SERVERS {
        let started = Instant::now();
        let (is_error, text) = host.result(&format!("{s}__hang"), json!({})).await;
        assert!(
            is_error && text.contains("did not answer within 1.0 s"),
            "{s}: {text}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "bounded by the timeout"
        );
        assert_eq!(
            host.result(&format!("{s}__ok"), json!({})).await.1,
            "fine",
            "{s}: a sibling works"
        );

        // Wrong type, missing, fractional: answered to the model, never sent, never counted —
        // more of them than the threshold.
        for args in [json!({"n": "twenty-one"}), json!({}), json!({"n": 2.5})] {
            let (is_error, text) = host.result(&format!("{s}__needs_int"), args.clone()).await;
            assert!(is_error, "{s} {args}: {text}");
            assert!(
                text.starts_with(&format!("invalid arguments for tool `{s}__needs_int`")),
                "{s} {args}: {text}"
            );
        }
        let (is_error, text) = host
            .result(&format!("{s}__needs_int"), json!({"n": 21}))
            .await;
        assert!(!is_error && text == "twice 21 is 42", "{s}: {text}");
        // A made-up tool of a real server: the model's mistake, answered -32602 by the gateway
        // with the name the model called, and never sent (the SDK would have answered with the
        // server's own name for it).
        for _ in 0..3 {
            match host.call(&format!("{s}__no_such_tool"), json!({})).await {
                Err((code, message)) => {
                    assert_eq!(code, -32602, "{s}");
                    assert!(
                        message.contains(&format!("unknown tool `{s}__no_such_tool`")),
                        "{s}: {message}"
                    );
                }
                Ok((is_error, text)) => panic!("{s}: sent to the server ({is_error}): {text}"),
            }
        }
        let doc = host.api(&format!("/v1/tools/{s}__needs_int")).await;
        assert_eq!(
            (
                doc["calls"]["failure"].as_u64(),
                doc["calls"]["success"].as_u64()
            ),
            (Some(0), Some(1)),
            "{doc}"
        );
        assert_eq!(doc["breaker"], "closed", "{doc}");
        let (status, doc) = http(
            host.port,
            "GET",
            &format!("/v1/tools/{s}__no_such_tool"),
            &[],
            "",
        )
        .await;
        assert_eq!(status, 404, "a made-up name creates no breaker: {doc}");
        let seen = host.seen(s).await;
        assert_eq!(
            seen_count(&seen, "tools", "needs_int"),
            1,
            "{s}: wrong arguments never reached the server: {seen}"
        );
        let doc = host.api(&format!("/v1/tools/{s}__hang")).await;
        assert_eq!(
            doc["calls"]["failure"], 1,
            "the timeout counted against the tool: {doc}"
        );
        let server = host.server(s).await;
        assert_eq!(
            server["breaker"], "closed",
            "the server answered the ping after the timeout: {server}"
        );
    }
    host.stop().await;
}

/// Issue 30, item 3: the config file changes twice under a connected host — a Python SDK
/// server added, then the rmcp server removed — and the host, on the same session throughout,
/// is told each time and lists and calls what is there.
async fn a_reload_adds_and_removes_servers_under_the_same_session(sdk: Sdk, via: Via) {
    let py = upstream::python().unwrap_or_else(|why| skip(&why));
    let mut config = json!({"mcpServers": {"rs": upstream::rmcp()}});
    let mut host = Host::start(sdk, via, &config).await;
    assert!(has(&host.list().await, "rs__ok"));
    let before = host.changes();

    config["mcpServers"]["py"] = py;
    std::fs::write(&host.config, config.to_string()).unwrap();
    let (seen, names) = host
        .after_change(before, "py's tools listed", |n| has(n, "py__ok"))
        .await;
    assert!(has(&names, "rs__ok"), "{names:?}");
    assert_eq!(
        host.result("py__ok", json!({})).await,
        (false, "fine".into())
    );

    config["mcpServers"].as_object_mut().unwrap().remove("rs");
    std::fs::write(&host.config, config.to_string()).unwrap();
    let (_, names) = host
        .after_change(seen, "rs's tools gone", |n| !has(n, "rs__ok"))
        .await;
    assert!(has(&names, "py__ok"), "{names:?}");
    assert_eq!(
        host.result("py__ok", json!({})).await,
        (false, "fine".into())
    );
    // The reload is counted once the removed server stopped: hosts are told before (an rmcp
    // server with a listen stream open outlives its closed stdin until SIGTERM, 2 s later).
    let reloads = eventually("the removal applied", WAIT, || async {
        let reloads = host.api("/v1/servers").await["reloads"].clone();
        (reloads["applied"] == 2).then_some(reloads)
    })
    .await;
    assert_eq!(
        reloads["last"]["changes"], "removed `rs`; 1 server unchanged",
        "{reloads}"
    );
    host.stop().await;
}

fn main() {
    support::main(|| {
        let mut trials = Vec::new();
        for (sdk, sdk_name) in [
            (Sdk::PythonLegacy, "python_legacy"),
            (Sdk::TypeScript2Legacy, "typescript2_legacy"),
        ] {
            for (via, via_name) in [(Via::Stdio, "stdio"), (Via::Http, "http")] {
                trials.push(trial(
                    &format!("{sdk_name}_client::{via_name}::a_sick_tool_leaves_the_list_and_comes_back_through_one_probe"),
                    move || a_sick_tool_leaves_the_list_and_comes_back(sdk, via),
                ));
            }
        }
        for (sdk, sdk_name) in [
            (Sdk::Python, "python"),
            (Sdk::TypeScript, "typescript"),
            (Sdk::TypeScript2, "typescript2"),
        ] {
            for (via, via_name) in [(Via::Stdio, "stdio"), (Via::Http, "http")] {
                let name = |what: &str| format!("{sdk_name}_client::{via_name}::{what}");
                trials.push(trial(
                    &name("a_sick_tool_leaves_the_list_and_comes_back_through_one_probe"),
                    move || a_sick_tool_leaves_the_list_and_comes_back(sdk, via),
                ));
                trials.push(trial(
                    &format!(
                        "{}_{}",
                        name("a_dead_upstream_leaves_the_list_restarts_and_comes_back"),
                        victim(sdk, via)
                    ),
                    move || a_dead_upstream_leaves_the_list_restarts_and_comes_back(sdk, via),
                ));
                trials.push(trial(
                    &name("a_hang_times_out_and_bad_arguments_never_count"),
                    move || a_hang_times_out_and_mistakes_never_count(sdk, via),
                ));
                trials.push(trial(
                    &name("a_reload_adds_and_removes_servers_under_the_same_session"),
                    move || a_reload_adds_and_removes_servers_under_the_same_session(sdk, via),
                ));
            }
        }
        trials.push(trial(
            "typescript_client::passthrough::a_host_sees_the_same_through_the_gateway_as_without_it",
            passthrough::typescript_host_sees_the_same_through_the_gateway,
        ));
        trials.push(trial(
            "python_client::passthrough::on_2026_07_28_a_host_sees_the_same_through_the_gateway",
            passthrough::python_host_on_2026_07_28_sees_the_same_through_the_gateway,
        ));
        trials
    });
}
