//! The gateway beside the MCP proxies a user would pick instead, in the same run, as a host
//! meets them: the official TypeScript SDK client (1.32, `peers/driver.mjs`) over streamable
//! HTTP, one upstream each (the tests' rmcp fixture, `echo`, a stdio child of the proxy), rounds
//! interleaved so drift on a shared machine hits every server alike.
//!
//! | server | what runs |
//! |---|---|
//! | `gateway` | `tool-health-gateway --no-stdio --listen 127.0.0.1:PORT` with its defaults (schema check on) |
//! | `mcp-proxy` | PyPI `mcp-proxy` 0.13.0: `mcp-proxy --port PORT -- UPSTREAM` |
//! | `supergateway` | npm `supergateway` 4.0.0: `--stdio UPSTREAM --outputTransport streamableHttp --stateful` |
//! | `fastmcp` | PyPI `fastmcp` 4.2.3: `create_proxy(StdioTransport(UPSTREAM))` run over HTTP (`peers/fastmcp_proxy.py`) |
//!
//! Per server: p50 and p99 of single sequential requests (timed by the client), throughput with
//! 16 requests always in flight on one client (the median of the rounds), and the resident
//! memory of the server's process at idle (connected, warmed up, nothing in flight; its
//! upstream child not counted). Ratios are against the gateway: a peer's p50 over the
//! gateway's (above 1: the gateway is faster), the gateway's throughput over the peer's.
//!
//! The peers are installed, pinned, into `target/peers` by `peers/install.sh` (never
//! committed); the client by `scripts/mcp_sdks.sh`. What is missing is said and left out.
//!
//!     bash scripts/mcp_sdks.sh && bash gateway/benches/peers/install.sh
//!     cargo bench -p tool-health-gateway --bench peers
//!
//! Without `--bench` (`cargo test --benches`) one short round checks that every server answers.
//!
//! The requests measured are [`requests`]: one `tools/call` today. A resource read or a prompt
//! is one more entry there (the driver knows `read` and `prompt`), once the fixture serves one
//! and the gateway passes them through.

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

#[allow(dead_code, unreachable_pub)]
#[path = "../tests/support/fixture.rs"]
mod fixture;

/// The argument that makes this binary the upstream (the rmcp fixture over stdio): an argument,
/// not an environment variable, because some peers start their server with a clean
/// environment.
const SERVE_FIXTURE: &str = "--serve-fixture";

/// Rounds of every server and request kind, interleaved.
const ROUNDS: usize = 7;
/// Sequential requests per server and round (p50, p99).
const SEQUENTIAL: usize = 300;
/// Requests always in flight for the throughput, and for how long per server and round.
const INFLIGHT: usize = 16;
const LOAD_FOR: Duration = Duration::from_millis(1500);
/// Requests per server before anything is measured.
const WARM_UP: usize = 200;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target"))
}

fn exe() -> String {
    std::env::current_exe()
        .expect("this binary")
        .display()
        .to_string()
}

/// One kind of request the bench measures, with what each server calls it.
struct Request {
    /// How the table names it.
    label: &'static str,
    /// The driver's request, for a server whose tools carry `prefix`.
    body: fn(prefix: &str) -> Value,
}

/// The requests measured on every server. A `resources/read` or `prompts/get` round is one more
/// entry: `{"kind": "read", "uri": …, "expect": …}` or `{"kind": "prompt", "name": …,
/// "arguments": …, "expect": …}`, with the gateway's names for it under its `prefix`.
fn requests() -> Vec<Request> {
    vec![Request {
        label: "tools/call",
        body: |prefix| {
            json!({"kind": "call", "name": format!("{prefix}echo"),
                   "arguments": {"text": "hello"}, "expect": "hello"})
        },
    }]
}

// ---------------------------------------------------------------------------------------
// The servers
// ---------------------------------------------------------------------------------------

/// A server under test: its process group, stopped when this is dropped (gently, then not),
/// a panic included.
struct Server {
    name: &'static str,
    child: Child,
    url: String,
    /// What its tools are prefixed with (`rs__` on the gateway).
    prefix: &'static str,
}

impl Drop for Server {
    fn drop(&mut self) {
        use nix::sys::signal::{killpg, Signal};
        use nix::unistd::Pid;
        let group = Pid::from_raw(self.child.id() as i32);
        let _ = killpg(group, Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = killpg(group, Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

impl Server {
    /// Resident memory of the server's own process (kB of `VmRSS`), in MiB.
    fn rss_mib(&self) -> Option<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb / 1024.0)
    }
}

/// A port free on 127.0.0.1 now (the server binds it a moment later).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Starts `cmd` in a process group of its own, its output to `target/peers/logs/NAME.log`,
/// and waits for `port` to accept a connection.
fn start(
    name: &'static str,
    mut cmd: Command,
    port: u16,
    path: &str,
    prefix: &'static str,
) -> Result<Server, String> {
    use std::os::unix::process::CommandExt as _;
    let logs = target_dir().join("peers/logs");
    std::fs::create_dir_all(&logs).map_err(|e| e.to_string())?;
    let log = std::fs::File::create(logs.join(format!("{name}.log"))).map_err(|e| e.to_string())?;
    cmd.stdin(Stdio::null())
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log)
        .process_group(0);
    let child = cmd.spawn().map_err(|e| format!("{name}: {e}"))?;
    let mut server = Server {
        name,
        child,
        url: format!("http://127.0.0.1:{port}{path}"),
        prefix,
    };
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(server);
        }
        if let Ok(Some(status)) = server.child.try_wait() {
            return Err(format!("{name} exited ({status}): see {}", logs.display()));
        }
        if Instant::now() > deadline {
            return Err(format!("{name} did not listen on {port} in time"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn gateway() -> Result<Server, String> {
    let dir = target_dir().join("peers");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let config = dir.join("gateway.json");
    let text = json!({"mcpServers": {"rs": {"command": exe(), "args": [SERVE_FIXTURE]}}});
    std::fs::write(&config, text.to_string()).map_err(|e| e.to_string())?;
    let port = free_port();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tool-health-gateway"));
    cmd.arg("--config")
        .arg(&config)
        .args(["--no-stdio", "--listen", &format!("127.0.0.1:{port}")])
        .env("TOOL_HEALTH_GATEWAY_LOG", "warn")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
        .env_remove("TOOL_HEALTH_FLEET_URL");
    start("gateway", cmd, port, "/mcp", "rs__")
}

/// A peer's executable under `target/peers`, or why it is left out.
fn installed(path: &str) -> Result<PathBuf, String> {
    let p = target_dir().join("peers").join(path);
    if p.exists() {
        Ok(p)
    } else {
        Err(format!(
            "not installed (bash gateway/benches/peers/install.sh): {}",
            p.display()
        ))
    }
}

fn mcp_proxy() -> Result<Server, String> {
    let port = free_port();
    let mut cmd = Command::new(installed("mcp-proxy/bin/mcp-proxy")?);
    cmd.args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--log-level", "WARNING", "--", &exe(), SERVE_FIXTURE]);
    start("mcp-proxy", cmd, port, "/mcp", "")
}

fn supergateway() -> Result<Server, String> {
    let port = free_port();
    let script = installed("npm/node_modules/supergateway/dist/index.js")?;
    let mut cmd = Command::new("node");
    cmd.arg("--require")
        .arg(workspace().join("gateway/benches/peers/loopback.cjs"))
        .arg(script)
        .args(["--stdio", &format!("{} {SERVE_FIXTURE}", exe())])
        .args(["--outputTransport", "streamableHttp", "--stateful"])
        .args(["--port", &port.to_string(), "--logLevel", "none"]);
    start("supergateway", cmd, port, "/mcp", "")
}

fn fastmcp() -> Result<Server, String> {
    let port = free_port();
    let mut cmd = Command::new(installed("fastmcp/bin/python")?);
    cmd.arg(workspace().join("gateway/benches/peers/fastmcp_proxy.py"))
        .args([&port.to_string(), &exe(), SERVE_FIXTURE]);
    start("fastmcp", cmd, port, "/mcp", "")
}

// ---------------------------------------------------------------------------------------
// The client
// ---------------------------------------------------------------------------------------

/// The TypeScript SDK client (`peers/driver.mjs`), one line in, one line out.
struct Driver {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Driver {
    fn start() -> Result<Self, String> {
        let sdk = workspace().join("integrations/servers/typescript");
        if !sdk
            .join("node_modules/@modelcontextprotocol/sdk/package.json")
            .exists()
        {
            return Err("the TypeScript SDK is not installed (bash scripts/mcp_sdks.sh)".into());
        }
        let mut child = Command::new("node")
            .arg(workspace().join("gateway/benches/peers/driver.mjs"))
            .arg(&sdk)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("node: {e}"))?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        Ok(Self {
            child,
            stdin,
            stdout,
        })
    }

    fn ask(&mut self, cmd: Value) -> Result<Value, String> {
        writeln!(self.stdin, "{cmd}").map_err(|e| e.to_string())?;
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        let v: Value = serde_json::from_str(&line).map_err(|e| format!("{e}: {line:?}"))?;
        match v.get("error") {
            Some(e) => Err(e.as_str().unwrap_or_default().to_owned()),
            None => Ok(v),
        }
    }

    fn sequential(&mut self, server: &Server, request: &Value, n: usize) -> Vec<Duration> {
        let v = self
            .ask(json!({"op": "seq", "name": server.name, "request": request, "n": n}))
            .unwrap_or_else(|e| panic!("{}: {e}", server.name));
        v["ns"]
            .as_array()
            .map(|ns| {
                ns.iter()
                    .map(|x| Duration::from_nanos(x.as_u64().unwrap_or(0)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Requests per second with [`INFLIGHT`] in flight for `span`.
    fn load(&mut self, server: &Server, request: &Value, span: Duration) -> f64 {
        let v = self
            .ask(
                json!({"op": "load", "name": server.name, "request": request,
                        "inflight": INFLIGHT, "ms": span.as_millis() as u64}),
            )
            .unwrap_or_else(|e| panic!("{}: {e}", server.name));
        v["done"].as_f64().unwrap_or(0.0) / v["seconds"].as_f64().unwrap_or(f64::INFINITY)
    }
}

// ---------------------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------------------

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn median(mut xs: Vec<f64>) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// What one server measured for one kind of request.
#[derive(Default)]
struct Measured {
    latencies: Vec<Duration>,
    throughput: Vec<f64>,
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some(SERVE_FIXTURE) {
        return fixture::serve_stdio();
    }
    let bench_mode = std::env::args().any(|a| a == "--bench");
    let (rounds, sequential, load_for, warm_up) = if bench_mode {
        (ROUNDS, SEQUENTIAL, LOAD_FOR, WARM_UP)
    } else {
        (1, 5, Duration::from_millis(200), 5)
    };
    let mut driver = match Driver::start() {
        Ok(d) => d,
        Err(why) => {
            eprintln!("peers: nothing measured: {why}");
            return;
        }
    };
    type Starter = fn() -> Result<Server, String>;
    let starters: [(&str, Starter); 4] = [
        ("gateway", gateway),
        ("mcp-proxy", mcp_proxy),
        ("supergateway", supergateway),
        ("fastmcp", fastmcp),
    ];
    let mut servers = Vec::new();
    for (name, start) in starters {
        match start() {
            Ok(server) => servers.push(server),
            Err(why) => eprintln!("peers: {name} left out: {why}"),
        }
    }
    assert!(
        servers.first().is_some_and(|s| s.name == "gateway"),
        "the gateway did not start"
    );
    let requests = requests();
    for server in &servers {
        let v = driver
            .ask(json!({"op": "connect", "name": server.name, "url": server.url}))
            .unwrap_or_else(|e| panic!("{}: connect: {e}", server.name));
        eprintln!(
            "peers: {} answers as {} ({})",
            server.name, v["server"], v["protocol"]
        );
        for r in &requests {
            driver.sequential(server, &(r.body)(server.prefix), warm_up);
        }
    }
    // Idle: connected, warmed up, nothing in flight.
    let rss: Vec<Option<f64>> = servers.iter().map(Server::rss_mib).collect();
    let mut measured: BTreeMap<(usize, usize), Measured> = BTreeMap::new();
    for round in 0..rounds {
        // Each round starts with another server: no one always goes first.
        let order: Vec<usize> = (0..servers.len())
            .map(|i| (i + round) % servers.len())
            .collect();
        for (k, r) in requests.iter().enumerate() {
            for &i in &order {
                let body = (r.body)(servers[i].prefix);
                let l = driver.sequential(&servers[i], &body, sequential);
                measured.entry((i, k)).or_default().latencies.extend(l);
            }
            for &i in &order {
                let body = (r.body)(servers[i].prefix);
                let t = driver.load(&servers[i], &body, load_for);
                measured.entry((i, k)).or_default().throughput.push(t);
            }
        }
    }
    println!();
    println!(
        "peers: the TypeScript SDK client over streamable HTTP, {rounds} interleaved rounds; \
         {sequential} sequential requests per server and round (p50, p99), {} ms with {INFLIGHT} \
         in flight per round (throughput, median of rounds); RSS of the server's process at idle",
        load_for.as_millis()
    );
    for (k, r) in requests.iter().enumerate() {
        println!();
        println!(
            "{:<14} {:>9} {:>9} {:>10} {:>9} {:>12} {:>14}",
            r.label, "p50 ms", "p99 ms", "req/s", "RSS MiB", "p50 / ours", "ours / theirs"
        );
        let row = |i: usize| {
            let m = &measured[&(i, k)];
            let mut l = m.latencies.clone();
            l.sort_unstable();
            (
                percentile(&l, 0.5).as_secs_f64() * 1e3,
                percentile(&l, 0.99).as_secs_f64() * 1e3,
                median(m.throughput.clone()),
            )
        };
        let (g50, _, gtp) = row(0);
        for (i, s) in servers.iter().enumerate() {
            let (p50, p99, tp) = row(i);
            println!(
                "{:<14} {:>9.2} {:>9.2} {:>10.0} {:>9} {:>11.2}x {:>13.2}x",
                s.name,
                p50,
                p99,
                tp,
                rss[i].map_or("?".to_owned(), |m| format!("{m:.0}")),
                p50 / g50,
                gtp / tp
            );
        }
    }
    drop(driver);
    drop(servers);
}
