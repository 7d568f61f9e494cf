//! What the gateway's test binaries share: the harness (a missing program is an *ignored*
//! test with the reason, a failure under `CI=true`), the real gateway process, the upstreams
//! (the SDK fixture servers of `integrations/servers/`, and this binary itself as an rmcp
//! server), an HTTP client for the API, and an rmcp client that counts `list_changed`.
//!
//! Every wait is bounded and generous: real processes on a loaded machine.

#![allow(dead_code)]

pub mod fixture;
mod processes;

// Each test binary uses a part of the support (`sdk_clients` none of these).
#[allow(unused_imports)]
pub use processes::*;

use std::any::Any;
use std::future::Future;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use libtest_mimic::{Arguments, Completion, Trial};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::Notify;

/// The text every refusal begins with.
pub const REFUSAL: &str = "tool temporarily unavailable: circuit breaker open";

/// A bound for waits on real processes.
pub const WAIT: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------
// The harness
// ---------------------------------------------------------------------------------------

struct Skipped(String);

/// Whether this run is CI (`CI=true`), where a missing program fails instead of skipping.
pub fn in_ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// Ends the test as ignored because `why` (outside CI), or fails it (under `CI=true`).
pub fn skip(why: &str) -> ! {
    if in_ci() {
        panic!("this test needs what CI must provide: {why}");
    }
    panic::panic_any(Skipped(why.to_owned()))
}

fn message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "test panicked".to_owned())
}

/// A test on a multi-thread tokio runtime (two workers).
pub fn trial<F>(name: &str, test: impl FnOnce() -> F + Send + 'static) -> Trial
where
    F: Future<Output = ()> + 'static,
{
    Trial::ignorable_test(name, move || {
        let r = panic::catch_unwind(AssertUnwindSafe(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("a tokio runtime")
                .block_on(test())
        }));
        match r {
            Ok(()) => Ok(Completion::Completed),
            Err(p) => match p.downcast::<Skipped>() {
                Ok(s) => Ok(Completion::ignored_with(s.0)),
                Err(other) => Err(message(&*other).into()),
            },
        }
    })
}

/// The test binary's `main`: serves the rmcp fixture when asked to (the gateway starts this
/// binary as an upstream), else runs `trials`.
pub fn main(trials: impl FnOnce() -> Vec<Trial>) {
    if std::env::var(fixture::ROLE).as_deref() == Ok("rmcp-fixture") {
        fixture::serve_stdio();
        return;
    }
    // rmcp's HTTP client speaks TLS through rustls: the pure-Rust provider.
    let _ = rustls_graviola::default_provider().install_default();
    libtest_mimic::run(&Arguments::from_args(), trials()).exit();
}

// ---------------------------------------------------------------------------------------
// Paths and programs
// ---------------------------------------------------------------------------------------

/// The workspace's root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The workspace's target directory (`CARGO_TARGET_DIR`, else `target/`): where the scripts
/// install what the tests run.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) if Path::new(&d).is_absolute() => PathBuf::from(d),
        Some(d) => workspace().join(d),
        None => workspace().join("target"),
    }
}

/// A fresh directory for one test's files.
pub fn scratch() -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "gateway-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

/// The gateway binary.
pub fn gateway_bin() -> &'static str {
    env!("CARGO_BIN_EXE_tool-health-gateway")
}

/// The pinned SDK releases (`integrations/servers/`).
pub const PYTHON_SDK: &str = "2.3.0";
pub const TYPESCRIPT_SDK: &str = "1.32.2";
/// `@modelcontextprotocol/server` and `@modelcontextprotocol/client` (MCP 2026-07-28).
pub const TYPESCRIPT_SDK_2: &str = "2.4.0";

/// The Python with the MCP SDK, or why there is none.
pub fn python() -> Result<PathBuf, String> {
    sdk_python("TOOL_HEALTH_MCP_PYTHON", "mcp/venv", PYTHON_SDK)
}

/// The SDK's 1.x line (`FastMCP`, the handshake era only) the gateway's tests pin.
pub const PYTHON_SDK_1: &str = "1.30.0";

/// The Python with the MCP SDK's 1.x line (`target/mcp/venv1`), or why there is none.
pub fn python1() -> Result<PathBuf, String> {
    sdk_python("TOOL_HEALTH_MCP_PYTHON1", "mcp/venv1", PYTHON_SDK_1)
}

/// The Python `var` names (else the venv `venv` under the target directory) when its `mcp` is
/// `version`, or why not.
fn sdk_python(var: &str, venv: &str, version: &str) -> Result<PathBuf, String> {
    let program = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join(venv).join("bin/python"));
    let out = std::process::Command::new(&program)
        .args([
            "-c",
            "import importlib.metadata as m; print(m.version('mcp'))",
        ])
        .output();
    match out {
        Ok(o) if o.status.success() && String::from_utf8_lossy(&o.stdout).trim() == version => {
            Ok(program)
        }
        Ok(o) if o.status.success() => Err(format!(
            "{} has mcp {}, the tests pin {version} (bash scripts/mcp_sdks.sh)",
            program.display(),
            String::from_utf8_lossy(&o.stdout).trim()
        )),
        _ => Err(format!(
            "no Python with the MCP SDK {version} at {} (bash scripts/mcp_sdks.sh, or set {var})",
            program.display()
        )),
    }
}

/// `node` with the TypeScript SDK installed in `integrations/servers/typescript`, or why not.
pub fn node() -> Result<PathBuf, String> {
    let ok = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        return Err("no `node` on the PATH".into());
    }
    let manifest = workspace().join(
        "integrations/servers/typescript/node_modules/@modelcontextprotocol/sdk/package.json",
    );
    let version = std::fs::read_to_string(&manifest)
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| v.get("version").and_then(Value::as_str).map(str::to_owned));
    match version {
        Some(v) if v == TYPESCRIPT_SDK => Ok(PathBuf::from("node")),
        Some(v) => Err(format!(
            "{} is {v}, the tests pin {TYPESCRIPT_SDK} (bash scripts/mcp_sdks.sh)",
            manifest.display()
        )),
        None => Err("the TypeScript SDK is not installed (bash scripts/mcp_sdks.sh)".into()),
    }
}

/// `node` with the TypeScript SDK 2.x installed in `integrations/servers/typescript-2`, or
/// why not.
pub fn node2() -> Result<PathBuf, String> {
    node()?;
    let dir =
        workspace().join("integrations/servers/typescript-2/node_modules/@modelcontextprotocol");
    for package in ["server", "client"] {
        let manifest = dir.join(package).join("package.json");
        let version = std::fs::read_to_string(&manifest)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .and_then(|v| v.get("version").and_then(Value::as_str).map(str::to_owned));
        match version {
            Some(v) if v == TYPESCRIPT_SDK_2 => {}
            Some(v) => {
                return Err(format!(
                    "{} is {v}, the tests pin {TYPESCRIPT_SDK_2} (bash scripts/mcp_sdks.sh)",
                    manifest.display()
                ))
            }
            None => {
                return Err(
                    "the TypeScript SDK 2.x is not installed (bash scripts/mcp_sdks.sh)".into(),
                )
            }
        }
    }
    Ok(PathBuf::from("node"))
}

/// Upstream config entries.
pub mod upstream {
    use super::*;

    /// This binary as the rmcp fixture server.
    pub fn rmcp() -> Value {
        json!({
            "command": std::env::current_exe().expect("the test binary").display().to_string(),
            "args": [],
            "env": {super::fixture::ROLE: "rmcp-fixture"},
        })
    }

    /// The Python SDK fixture server over stdio.
    pub fn python() -> Result<Value, String> {
        let py = super::python()?;
        Ok(json!({
            "command": py.display().to_string(),
            "args": [workspace().join("integrations/servers/python/server.py").display().to_string(), "stdio"],
        }))
    }

    /// The Python SDK fixture server on the SDK's 1.x line (the handshake era) over stdio.
    pub fn python1() -> Result<Value, String> {
        let py = super::python1()?;
        Ok(json!({
            "command": py.display().to_string(),
            "args": [workspace().join("integrations/servers/python/server.py").display().to_string(), "stdio"],
        }))
    }

    /// The TypeScript SDK 2.x fixture server over stdio, speaking only MCP 2026-07-28
    /// (`legacy: 'reject'`), with `args` before its transport.
    pub fn typescript2(args: &[&str]) -> Result<Value, String> {
        let node = super::node2()?;
        let mut all = vec![workspace()
            .join("integrations/servers/typescript-2/server.mjs")
            .display()
            .to_string()];
        all.extend(["--legacy", "reject"].iter().map(|a| (*a).to_owned()));
        all.extend(args.iter().map(|a| (*a).to_owned()));
        all.push("stdio".to_owned());
        Ok(json!({"command": node.display().to_string(), "args": all}))
    }

    /// The TypeScript SDK fixture server over stdio.
    pub fn typescript() -> Result<Value, String> {
        let node = super::node()?;
        Ok(json!({
            "command": node.display().to_string(),
            "args": [workspace().join("integrations/servers/typescript/server.mjs").display().to_string(), "stdio"],
        }))
    }
}

// ---------------------------------------------------------------------------------------
// Logs read from a process
// ---------------------------------------------------------------------------------------

/// The lines a process wrote (stderr), kept for waits and for failure messages.
#[derive(Default)]
pub struct Log {
    lines: Mutex<Vec<String>>,
    notify: Notify,
}

impl Log {
    /// Reads `from` line by line into a new log (echoed to this process's stderr with
    /// `prefix`, so that a failing test shows what the gateway said).
    pub fn spawn(from: impl AsyncRead + Unpin + Send + 'static, prefix: &'static str) -> Arc<Self> {
        let log = Arc::new(Self::default());
        let l = Arc::clone(&log);
        tokio::spawn(async move {
            let mut lines = BufReader::new(from).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if std::env::var_os("GATEWAY_TEST_ECHO").is_some() {
                    eprintln!("{prefix} {line}");
                }
                l.lines.lock().unwrap().push(line);
                l.notify.notify_waiters();
            }
        });
        log
    }

    /// Everything so far, one line each.
    pub fn text(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// The first line containing `needle`, waiting for it at most `timeout`.
    pub async fn wait_for(&self, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let notified = self.notify.notified();
            if let Some(l) = self
                .lines
                .lock()
                .unwrap()
                .iter()
                .find(|l| l.contains(needle))
            {
                return l.clone();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || tokio::time::timeout(left, notified).await.is_err() {
                panic!(
                    "no line with {needle:?} within {timeout:?}; the log:\n{}",
                    self.text()
                );
            }
        }
    }
}

/// The port of the gateway's `listening on http://127.0.0.1:PORT` line.
pub async fn listening_port(log: &Log) -> u16 {
    let line = log.wait_for("listening on http://", WAIT).await;
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|s| s.split(':').nth(1))
        .map(|s| s.trim_end_matches(|c: char| !c.is_ascii_digit()))
        .and_then(|p| p.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|p| p.parse().ok());
    addr.unwrap_or_else(|| panic!("no port in {line:?}"))
}

// ---------------------------------------------------------------------------------------
// The gateway process
// ---------------------------------------------------------------------------------------

/// The control token of the tests that use one.
pub const TOKEN: &str = "s3cret-token-0123456789abcdef";

/// `--control-token-file FILE` with [`TOKEN`] in a scratch file.
pub fn token_args() -> [String; 2] {
    let file = scratch().join("token");
    std::fs::write(&file, format!("{TOKEN}\n")).unwrap();
    [
        "--control-token-file".to_owned(),
        file.display().to_string(),
    ]
}

/// An operator control (`POST path`) with [`TOKEN`]: the status and the answer.
pub async fn control(port: u16, path: &str) -> (u16, Value) {
    let auth = format!("Bearer {TOKEN}");
    http(port, "POST", path, &[("authorization", auth.as_str())], "").await
}

/// Writes `config` to a scratch file and gives its path.
pub fn write_config(config: &Value) -> PathBuf {
    let path = scratch().join("gateway.json");
    std::fs::write(&path, serde_json::to_string_pretty(config).unwrap()).unwrap();
    path
}

/// A gateway started with `--no-stdio --listen 127.0.0.1:0` (HTTP only).
pub struct Gateway {
    pub child: tokio::process::Child,
    pub port: u16,
    pub log: Arc<Log>,
    /// The config file it runs (a reload reads it again).
    pub config: PathBuf,
}

impl Gateway {
    /// Starts the gateway on `config` with `extra` arguments and waits until it listens.
    pub async fn http(config: &Value, extra: &[&str]) -> Self {
        Self::http_with_env(config, extra, &[]).await
    }

    pub async fn http_with_env(config: &Value, extra: &[&str], env: &[(&str, &str)]) -> Self {
        Self::http_on(config, "127.0.0.1:0", extra, env).await
    }

    /// Starts the gateway listening on `listen` (an address chosen before it starts, for an
    /// environment that points at it).
    pub async fn http_on(
        config: &Value,
        listen: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        Self::start(write_config(config), listen, extra, env).await
    }

    /// Starts the gateway on the config file at `path` (HTTP only, on `listen`) and waits
    /// until it listens.
    pub async fn start(path: PathBuf, listen: &str, extra: &[&str], env: &[(&str, &str)]) -> Self {
        let mut child = tokio::process::Command::new(gateway_bin())
            .arg("--config")
            .arg(&path)
            .args(["--no-stdio", "--listen", listen])
            .args(extra)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the gateway");
        let log = Log::spawn(child.stderr.take().unwrap(), "[gateway]");
        let port = listening_port(&log).await;
        Self {
            child,
            port,
            log,
            config: path,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        http(self.port, "GET", path, &[], "").await
    }

    /// A JSON `POST` (`Content-Type: application/json`), as every API route takes.
    pub async fn post(&self, path: &str, body: &str) -> (u16, Value) {
        http(
            self.port,
            "POST",
            path,
            &[("content-type", "application/json")],
            body,
        )
        .await
    }
}

/// `Some` when every server of a `/v1/servers` answer is connected (for [`eventually`]).
pub fn every_server_connected(answer: &Value) -> Option<()> {
    answer["servers"]
        .as_array()?
        .iter()
        .all(|s| s["connected"] == true)
        .then_some(())
}

/// Waits until `check` returns `Some`, asking every 50 ms, at most `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if Instant::now() > deadline {
            panic!("{what}: not within {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// ---------------------------------------------------------------------------------------
// HTTP
// ---------------------------------------------------------------------------------------

/// One HTTP/1.1 request to 127.0.0.1:`port`: the status and the body read as JSON (`null`
/// when it is not JSON).
pub async fn http(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Value) {
    let (status, _, text) = http_raw(port, method, path, headers, body.as_bytes()).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// One HTTP/1.1 request: the status, the headers (lowercase names) and the body as text.
pub async fn http_raw(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, Vec<(String, String)>, String) {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect to the gateway");
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    stream.write_all(req.as_bytes()).await.unwrap();
    // A refused body may close the connection early: the answer is still read.
    let _ = stream.write_all(body).await;
    let mut raw = Vec::new();
    let _ = tokio::time::timeout(WAIT, stream.read_to_end(&mut raw)).await;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_owned()
    };
    (status, headers, body)
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

// ---------------------------------------------------------------------------------------
// An rmcp client of the gateway
// ---------------------------------------------------------------------------------------

/// Counts the `notifications/tools/list_changed` a client receives.
#[derive(Clone, Default)]
pub struct Changes {
    n: Arc<AtomicU64>,
    notify: Arc<Notify>,
}

impl Changes {
    pub fn count(&self) -> u64 {
        self.n.load(Ordering::SeqCst)
    }

    /// Waits until more than `seen` arrived; the new count.
    pub async fn wait_past(&self, seen: u64, timeout: Duration) -> u64 {
        let deadline = Instant::now() + timeout;
        loop {
            let notified = self.notify.notified();
            let n = self.count();
            if n > seen {
                return n;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || tokio::time::timeout(left, notified).await.is_err() {
                panic!("no tools/list_changed past {seen} within {timeout:?}");
            }
        }
    }
}

impl ClientHandler for Changes {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.n.fetch_add(1, Ordering::SeqCst);
        self.notify.notify_waiters();
    }
}

/// An rmcp client of the gateway's `/mcp`.
pub async fn rmcp_http(port: u16) -> (RunningService<RoleClient, Changes>, Changes) {
    let changes = Changes::default();
    let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(format!(
        "http://127.0.0.1:{port}/mcp"
    ));
    let running = tokio::time::timeout(WAIT, changes.clone().serve(transport))
        .await
        .expect("the handshake in time")
        .expect("the handshake");
    (running, changes)
}

/// Calls `name` with `args`: the result, or the JSON-RPC error as `Err((code, message))`.
pub async fn call(
    client: &RunningService<RoleClient, Changes>,
    name: &str,
    args: Value,
) -> Result<CallToolResult, (i32, String)> {
    let mut p = CallToolRequestParams::new(name.to_owned());
    if let Value::Object(m) = args {
        p = p.with_arguments(m);
    }
    match tokio::time::timeout(WAIT, client.peer().call_tool(p)).await {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(rmcp::service::ServiceError::McpError(e))) => Err((e.code.0, e.message.to_string())),
        Ok(Err(e)) => panic!("calling {name}: {e}"),
        Err(_) => panic!("calling {name}: no answer within {WAIT:?}"),
    }
}

/// The names `tools/list` gives.
pub async fn list(client: &RunningService<RoleClient, Changes>) -> Vec<String> {
    let tools = tokio::time::timeout(WAIT, client.peer().list_all_tools())
        .await
        .expect("a list in time")
        .expect("a list");
    tools.into_iter().map(|t| t.name.to_string()).collect()
}

/// The text of a result's first content block.
pub fn text(r: &CallToolResult) -> String {
    r.content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default()
}

/// What an upstream received, from its `seen` tool called through the gateway.
pub fn seen_count(seen: &Value, section: &str, name: &str) -> u64 {
    seen.get(section)
        .and_then(|m| m.get(name))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

/// Kills a process by id with SIGKILL.
pub fn kill(pid: u64) {
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -KILL {pid}");
}
