//! Processes the tests look at or start: signals, whether a process is alive, the ids a
//! launcher wrote, a free port, and `server-everything` (the reference MCP server) over
//! streamable HTTP.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;

use serde_json::Value;

use super::{node, workspace, Log, WAIT};

/// Sends `signal` (`TERM`, `HUP`, `INT`, `KILL`) to a process.
pub fn signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{signal} {pid}");
}

/// Whether a process is alive (exists and is no zombie), from `/proc`.
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // `pid (comm) S …`: the state follows the last `)`.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// The process ids a launcher wrote into `file`, one a line.
pub fn pids_in(file: &Path) -> Vec<u32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// A free port on 127.0.0.1 (bound, then let go).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind 127.0.0.1:0")
        .local_addr()
        .expect("its address")
        .port()
}

/// The pinned `@modelcontextprotocol/server-everything` (`integrations/servers/everything`).
pub const EVERYTHING: &str = "2026.8.31";

/// `server-everything streamableHttp` on 127.0.0.1:`port` (the reference MCP server), or why
/// it cannot run here.
pub struct Everything {
    pub child: tokio::process::Child,
    pub log: Arc<Log>,
    pub port: u16,
}

impl Everything {
    /// Starts it and waits until it listens.
    pub async fn start(port: u16) -> Result<Self, String> {
        let node = node()?;
        let dir = workspace().join(
            "integrations/servers/everything/node_modules/@modelcontextprotocol/server-everything",
        );
        let version = std::fs::read_to_string(dir.join("package.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .and_then(|v| v.get("version").and_then(Value::as_str).map(str::to_owned));
        if version.as_deref() != Some(EVERYTHING) {
            return Err(format!(
                "server-everything {EVERYTHING} is not installed (bash scripts/mcp_sdks.sh)"
            ));
        }
        let preload = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/loopback.mjs");
        let mut child = tokio::process::Command::new(node)
            .arg("--import")
            .arg(&preload)
            .arg(dir.join("dist/index.js"))
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("node: {e}"))?;
        let log = Log::spawn(child.stderr.take().expect("piped"), "[everything]");
        log.wait_for(&format!("listening on port {port}"), WAIT)
            .await;
        Ok(Self { child, log, port })
    }

    /// Its MCP endpoint.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// Kills it and waits until it is gone (its port free).
    pub async fn kill(mut self) {
        let _ = self.child.kill().await;
    }
}
