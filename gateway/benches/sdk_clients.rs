//! `tools/call` over streamable HTTP as hosts make it: the official TypeScript SDK client
//! (npm `@modelcontextprotocol/sdk` 1.32.2, `integrations/servers/typescript/client.mjs`) and
//! the Python SDK client (PyPI `mcp` 2.3.0, `integrations/servers/python/client.py`), each
//! against the gateway and against the pass-through proxy built from the same rmcp parts
//! (`passthrough.rs`, with `TCP_NODELAY` as the HTTP servers hosts meet), in the same run.
//!
//! The clients time each call themselves (the `bench` op of their line protocol: n sequential
//! calls, each one's nanoseconds), so what is measured is what the host's code waits for. An
//! rmcp client (`overhead.rs`) never showed issue 29's Nagle delay: these clients write their
//! requests and read their answers in pieces, and an answer written in pieces by a server
//! without `TCP_NODELAY` waits for the client's delayed ACK (~40 ms).
//!
//! Criterion measures the mean time per sequential call of each (client, server) pair. With
//! `--bench`, a summary follows in the same run: p50, p90 and p99 of single calls over rounds
//! of every pair interleaved (drift on a shared machine hits them alike), and the gateway's
//! p50 over the proxy's for each client. Without the SDKs (`bash scripts/mcp_sdks.sh`) the bench
//! says so and measures nothing.
//!
//!     cargo bench -p tool-health-gateway --bench sdk_clients

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use criterion::Criterion;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

#[allow(dead_code, unreachable_pub)]
#[path = "../tests/support/fixture.rs"]
mod fixture;
#[allow(dead_code)]
mod passthrough;

use passthrough::{exe, gateway_command, serve_proxy, ROLE};

/// The workspace's root.
fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default()
}

/// The Python of `scripts/mcp_sdks.sh`'s venv and `node` with the TypeScript SDK, or why not.
fn sdks() -> Result<(PathBuf, PathBuf), String> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target"));
    let python = std::env::var_os("TOOL_HEALTH_MCP_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| target.join("mcp/venv/bin/python"));
    let sdk = workspace().join(
        "integrations/servers/typescript/node_modules/@modelcontextprotocol/sdk/package.json",
    );
    if !python.exists() || !sdk.exists() {
        return Err("the MCP SDKs are not installed (bash scripts/mcp_sdks.sh)".into());
    }
    Ok((python, PathBuf::from("node")))
}

/// A server process of the bench (the proxy, the gateway), killed when this is dropped — also
/// when the bench panics (std's kill: no runtime needed).
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `cmd` (stderr piped) and waits for its `listening on http://ADDR` line: the server
/// and the URL of its `/mcp`. Its stderr is drained by a thread from then on.
fn serve_http(mut cmd: std::process::Command) -> (Server, String) {
    use std::io::BufRead as _;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("start a server");
    let stderr = child.stderr.take().expect("stderr piped");
    let server = Server(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if let Some(rest) = line.split("listening on http://").nth(1) {
                // `127.0.0.1:PORT` (the gateway's line goes on with `: MCP at /mcp, …`).
                let addr: String = rest.chars().take_while(|c| !c.is_whitespace()).collect();
                if let Some(tx) = tx.take() {
                    let _ = tx.send(addr.trim_end_matches(':').to_owned());
                }
            }
        }
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the server listens in time");
    (server, format!("http://{addr}/mcp"))
}

/// One SDK client process connected to one server.
struct Pair {
    name: String,
    tool: &'static str,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
    next_id: u64,
    _client: Child,
}

impl Pair {
    async fn start(
        name: String,
        program: &PathBuf,
        script: &str,
        url: &str,
        tool: &'static str,
    ) -> Self {
        let mut child = tokio::process::Command::new(program)
            .arg(workspace().join(script))
            .args(["http", url])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("start {script}: {e}"));
        let stdin = child.stdin.take().expect("stdin piped");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout piped")).lines();
        loop {
            let line = tokio::time::timeout(Duration::from_secs(60), stdout.next_line())
                .await
                .expect("the client connects in time")
                .expect("read the client")
                .expect("the client is ready");
            if line.contains("\"ready\"") {
                break;
            }
        }
        Self {
            name,
            tool,
            stdin,
            stdout,
            next_id: 1,
            _client: child,
        }
    }

    /// `n` sequential calls; each one's time as the client measured it.
    async fn calls(&mut self, n: u64) -> Vec<Duration> {
        let id = self.next_id;
        self.next_id += 1;
        let cmd = json!({"id": id, "op": "bench", "name": self.tool,
                         "arguments": {"text": "hello"}, "n": n});
        self.stdin
            .write_all(format!("{cmd}\n").as_bytes())
            .await
            .expect("write to the client");
        loop {
            let line = self
                .stdout
                .next_line()
                .await
                .expect("read the client")
                .expect("the client answers");
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if v["id"] != id {
                continue; // an event
            }
            let ns = v["ns"]
                .as_array()
                .unwrap_or_else(|| panic!("{}: {v}", self.name));
            return ns
                .iter()
                .map(|x| Duration::from_nanos(x.as_u64().unwrap_or(0)))
                .collect();
        }
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn summary(pairs: &mut [Pair]) {
    const ROUNDS: usize = 7;
    const CALLS: u64 = 100;
    let mut lat: Vec<Vec<Duration>> = vec![Vec::new(); pairs.len()];
    for _ in 0..ROUNDS {
        for (i, p) in pairs.iter_mut().enumerate() {
            lat[i].extend(p.calls(CALLS).await);
        }
    }
    println!();
    println!(
        "summary ({ROUNDS} interleaved rounds of {CALLS} sequential tools/call per pair, timed by \
         the client)"
    );
    println!(
        "{:<22} {:>10} {:>10} {:>10}",
        "client/server", "p50 ms", "p90 ms", "p99 ms"
    );
    let mut p50 = Vec::new();
    for (i, p) in pairs.iter().enumerate() {
        let mut l = std::mem::take(&mut lat[i]);
        l.sort_unstable();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!(
            "{:<22} {:>10.2} {:>10.2} {:>10.2}",
            p.name,
            ms(percentile(&l, 0.5)),
            ms(percentile(&l, 0.9)),
            ms(percentile(&l, 0.99))
        );
        p50.push((p.name.clone(), percentile(&l, 0.5)));
    }
    for client in ["typescript", "python"] {
        let find = |server: &str| {
            p50.iter()
                .find(|(n, _)| *n == format!("{client}/{server}"))
                .map(|(_, d)| *d)
        };
        if let (Some(g), Some(p)) = (find("gateway"), find("proxy")) {
            println!(
                "{client}: gateway p50 {:.2} ms, proxy p50 {:.2} ms: {:.2}x",
                g.as_secs_f64() * 1e3,
                p.as_secs_f64() * 1e3,
                g.as_secs_f64() / p.as_secs_f64()
            );
        }
    }
}

fn main() {
    if std::env::var(ROLE).as_deref() == Ok("proxy-http") {
        return serve_proxy(true);
    }
    if std::env::var(fixture::ROLE).as_deref() == Ok("rmcp-fixture") {
        return fixture::serve_stdio();
    }
    let (python, node) = match sdks() {
        Ok(p) => p,
        Err(why) => {
            eprintln!("sdk_clients: nothing measured: {why}");
            return;
        }
    };
    let bench_mode = std::env::args().any(|a| a == "--bench");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    // The servers live in this frame: killed on the way out, a panic included.
    let mut proxy = std::process::Command::new(exe());
    proxy.env(ROLE, "proxy-http");
    let (_proxy, proxy_url) = serve_http(proxy);
    let (_gateway, gateway_url) = serve_http(gateway_command(true).into_std());
    let mut pairs = runtime.block_on(async {
        let ts = "integrations/servers/typescript/client.mjs";
        let py = "integrations/servers/python/client.py";
        let mut pairs = Vec::new();
        for (client, program, script) in [("typescript", &node, ts), ("python", &python, py)] {
            pairs.push(
                Pair::start(
                    format!("{client}/proxy"),
                    program,
                    script,
                    &proxy_url,
                    "echo",
                )
                .await,
            );
            pairs.push(
                Pair::start(
                    format!("{client}/gateway"),
                    program,
                    script,
                    &gateway_url,
                    "rs__echo",
                )
                .await,
            );
        }
        // Warm up (and check every pair answers).
        for p in &mut pairs {
            p.calls(50).await;
        }
        pairs
    });
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .configure_from_args();
    {
        let mut group = c.benchmark_group("sdk_tools_call");
        for p in &mut pairs {
            let name = p.name.clone();
            group.bench_function(&name, |b| {
                b.iter_custom(|iters| {
                    runtime.block_on(async { p.calls(iters).await.into_iter().sum::<Duration>() })
                })
            });
        }
        group.finish();
    }
    c.final_summary();
    if bench_mode {
        runtime.block_on(summary(&mut pairs));
    }
    drop(pairs);
}
