//! The gateway's processes and its own life, through the binary: nothing of a stdio upstream
//! launched through `sh -c` outlives it (on a restart, when its handshake hangs, when the
//! gateway exits); SIGTERM stops a stdio gateway gracefully and SIGHUP does not kill it;
//! `--listen` with stdin at its end goes on serving HTTP.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::supervise::server;
use crate::support::{
    alive, call, eventually, gateway_bin, pids_in, rmcp_http, scratch, signal, text, upstream,
    write_config, Gateway, Log, WAIT,
};

/// A launcher as `npx` or `uvx` are: `sh` writes its id to `pids`, starts two helpers in the
/// background (one of which ignores SIGTERM) and writes theirs, then runs `program` (a shell
/// command) as its child, and outlives it a moment.
pub fn launcher(pids: &Path, program: &str, mut env: Value) -> Value {
    env["PIDS"] = json!(pids.display().to_string());
    json!({
        "command": "sh",
        "args": ["-c", format!("echo $$ >> \"$PIDS\"; sleep 600 & echo $! >> \"$PIDS\"; \
                                (trap '' TERM; exec sleep 601) & echo $! >> \"$PIDS\"; \
                                {program}; echo launcher-done >&2")],
        "env": env,
    })
}

/// The rmcp fixture behind [`launcher`].
pub fn launched_fixture(pids: &Path) -> Value {
    let fixture = upstream::rmcp();
    let mut env = fixture["env"].clone();
    env["FIXTURE"] = fixture["command"].clone();
    launcher(pids, "\"$FIXTURE\"", env)
}

/// Waits until none of `pids` is alive; the ones still alive after `bound`.
pub async fn all_gone(pids: &[u32], bound: Duration) -> Vec<u32> {
    let deadline = Instant::now() + bound;
    loop {
        let left: Vec<u32> = pids.iter().copied().filter(|p| alive(*p)).collect();
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Item 10: a stdio upstream behind `sh -c` (two helpers, one deaf to SIGTERM) leaves nothing
/// behind when it dies and is restarted, when its handshake hangs and it is started again,
/// and when the gateway exits.
pub async fn nothing_of_a_stdio_upstream_outlives_it() {
    let dir = scratch();
    let rs_pids = dir.join("rs.pids");
    let hung_pids = dir.join("hung.pids");
    let config = json!({
        "mcpServers": {
            "rs": launched_fixture(&rs_pids),
            // A server that never answers its handshake (`npx` asking "Ok to proceed?").
            // (`sleep 602` too is written down: four processes a start.)
            "hung": launcher(&hung_pids, "sleep 602 & echo $! >> \"$PIDS\"; wait", json!({})),
        },
        "health": {"servers": {"hung": {"connectTimeoutSeconds": 1,
                                        "restart": {"initialBackoffSeconds": 0.2, "maxBackoffSeconds": 0.2}}}},
    });
    let mut gw = Gateway::http(&config, &[]).await;
    let (client, _changes) = rmcp_http(gw.port).await;
    assert_eq!(
        text(&call(&client, "rs__ok", json!({})).await.unwrap()),
        "fine"
    );
    let first = pids_in(&rs_pids);
    assert_eq!(first.len(), 3, "sh and its two helpers: {first:?}");
    assert!(first.iter().all(|p| alive(*p)));

    // The server dies: its launcher and helpers go with it, gently first.
    let _ = call(&client, "rs__die", json!({})).await;
    let stopped = Instant::now();
    let left = all_gone(&first, Duration::from_secs(10)).await;
    eprintln!(
        "figure: after a restart, {} of {} processes of the old start left ({:.2} s to stop them)",
        left.len(),
        first.len(),
        stopped.elapsed().as_secs_f64()
    );
    assert!(left.is_empty(), "outlived their server: {left:?}");
    eventually("rs restarted", WAIT, || async {
        (server(&gw, "rs").await["restarts"] == 1).then_some(())
    })
    .await;
    assert_eq!(
        text(&call(&client, "rs__ok", json!({})).await.unwrap()),
        "fine"
    );

    // A handshake that never comes: each start is stopped whole before the next.
    eventually("three starts of hung", WAIT, || async {
        (pids_in(&hung_pids).len() >= 12).then_some(())
    })
    .await;
    let hung_now = pids_in(&hung_pids);
    let earlier = &hung_now[..8];
    let left = all_gone(earlier, Duration::from_secs(10)).await;
    eprintln!(
        "figure: a hung handshake started 3 times: {} of {} processes of the first two starts left",
        left.len(),
        earlier.len()
    );
    assert!(left.is_empty(), "outlived their start: {left:?}");
    let last = server(&gw, "hung").await;
    assert!(
        last["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("did not complete the MCP handshake")),
        "{last}"
    );

    // The gateway exits: nothing of any upstream is left.
    signal(gw.child.id().expect("running"), "TERM");
    let status = tokio::time::timeout(WAIT, gw.child.wait())
        .await
        .expect("exits")
        .expect("a status");
    assert_eq!(status.code(), Some(0), "{}", gw.log.text());
    let every: Vec<u32> = pids_in(&rs_pids)
        .into_iter()
        .chain(pids_in(&hung_pids))
        .collect();
    let left = all_gone(&every, Duration::from_secs(1)).await;
    eprintln!(
        "figure: gateway exited: {} of {} upstream processes left",
        left.len(),
        every.len()
    );
    assert!(left.is_empty(), "outlived the gateway: {left:?}");
}

/// A gateway over stdio, as a host launches it.
struct StdioGateway {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    log: std::sync::Arc<Log>,
}

impl StdioGateway {
    async fn start(config: &Value, extra: &[&str]) -> Self {
        let path = write_config(config);
        let mut child = tokio::process::Command::new(gateway_bin())
            .arg("--config")
            .arg(&path)
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the gateway");
        let log = Log::spawn(child.stderr.take().unwrap(), "[gateway]");
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Self {
            child,
            stdin,
            lines,
            log,
        }
    }

    /// Sends `request` and reads lines until its answer.
    async fn ask(&mut self, request: Value) -> Value {
        let id = request["id"].clone();
        self.stdin
            .write_all(format!("{request}\n").as_bytes())
            .await
            .unwrap();
        loop {
            let line = tokio::time::timeout(WAIT, self.lines.next_line())
                .await
                .expect("an answer in time")
                .expect("stdout")
                .expect("a line");
            let v: Value = serde_json::from_str(&line).expect("JSON");
            if v["id"] == id {
                return v;
            }
        }
    }

    async fn initialize(&mut self) {
        let r = self
            .ask(
                json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"}}}),
            )
            .await;
        assert!(r["result"].is_object(), "{r}");
        self.stdin
            .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
            .await
            .unwrap();
    }
}

/// Item 12: in stdio mode SIGHUP reloads the config (issue 30: here an unchanged one) and does
/// not stop the gateway; SIGTERM stops it gracefully (logged, exit 0) with its upstreams'
/// processes.
pub async fn sigterm_stops_a_stdio_gateway_gracefully_and_sighup_does_not() {
    let dir = scratch();
    let pids = dir.join("rs.pids");
    let config = json!({"mcpServers": {"rs": launched_fixture(&pids)}});
    let mut gw = StdioGateway::start(&config, &[]).await;
    gw.initialize().await;
    let r = gw
        .ask(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "rs__ok", "arguments": {}}}))
        .await;
    assert_eq!(r["result"]["content"][0]["text"], "fine", "{r}");
    let pid = gw.child.id().expect("running");

    signal(pid, "HUP");
    gw.log
        .wait_for("config reloaded (SIGHUP): 1 server unchanged", WAIT)
        .await;
    let r = gw
        .ask(json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}))
        .await;
    assert!(r["result"].is_object(), "still serving after SIGHUP: {r}");

    signal(pid, "TERM");
    let status = tokio::time::timeout(WAIT, gw.child.wait())
        .await
        .expect("exits")
        .expect("a status");
    assert_eq!(status.code(), Some(0), "{}", gw.log.text());
    assert!(
        gw.log.text().contains("SIGTERM: stopping"),
        "{}",
        gw.log.text()
    );
    let left = all_gone(&pids_in(&pids), Duration::from_secs(1)).await;
    assert!(left.is_empty(), "outlived the gateway: {left:?}");
}

/// Item 13: `--listen` with stdin at its end (a service manager, `docker run` without `-i`,
/// `nohup`) goes on serving HTTP until a signal.
pub async fn listen_with_stdin_at_its_end_keeps_serving() {
    let config = json!({"mcpServers": {"rs": upstream::rmcp()}});
    let path = write_config(&config);
    let mut child = tokio::process::Command::new(gateway_bin())
        .arg("--config")
        .arg(&path)
        .args(["--listen", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the gateway");
    let log = Log::spawn(child.stderr.take().unwrap(), "[gateway]");
    let port = crate::support::listening_port(&log).await;
    log.wait_for("no MCP session on stdio", WAIT).await;
    // Still serving, well after stdin ended.
    let (client, _changes) = rmcp_http(port).await;
    assert_eq!(
        text(&call(&client, "rs__ok", json!({})).await.unwrap()),
        "fine"
    );
    assert!(
        child.try_wait().expect("a status").is_none(),
        "{}",
        log.text()
    );
    let gw = Gateway {
        child,
        port,
        log,
        config: path,
    };
    let (status, _) = gw.get("/healthz").await;
    assert_eq!(status, 200);
    let mut child = gw.child;
    signal(child.id().expect("running"), "TERM");
    let status = tokio::time::timeout(WAIT, child.wait())
        .await
        .expect("exits")
        .expect("a status");
    assert_eq!(status.code(), Some(0));
}

/// A host that stops reading (its stdout pipe full) costs its own notifications only: another
/// host hears a change at once. (Before, the notifier sent to hosts one after the other and
/// waited 5 s for the stalled one at every change.)
#[cfg(target_os = "linux")]
pub async fn a_stalled_host_delays_no_other_host() {
    let dir = scratch();
    let token_file = dir.join("token");
    std::fs::write(&token_file, "a-control-token-of-some-length\n").unwrap();
    let config = json!({"mcpServers": {"rs": upstream::rmcp()}});
    let mut stalled = StdioGateway::start(
        &config,
        &[
            "--listen",
            "127.0.0.1:0",
            "--control-token-file",
            token_file.to_str().unwrap(),
        ],
    )
    .await;
    // One page of pipe: a few dozen notifications fill it.
    let stdout = stalled.lines.get_ref().get_ref();
    nix::fcntl::fcntl(stdout, nix::fcntl::FcntlArg::F_SETPIPE_SZ(4096)).expect("a small pipe");
    stalled.initialize().await;
    // From here on the stdio host reads nothing.
    let port = crate::support::listening_port(&stalled.log).await;
    let (client, changes) = rmcp_http(port).await;
    let auth = [("Authorization", "Bearer a-control-token-of-some-length")];
    let control = |action: &'static str| async move {
        let (status, body) = crate::support::http(
            port,
            "POST",
            &format!("/v1/tools/rs__ok/{action}"),
            &auth,
            "",
        )
        .await;
        assert_eq!(status, 200, "{body}");
    };
    for _ in 0..150 {
        control("force-open").await;
        control("release").await;
    }
    // Let what is under way arrive.
    let mut last = changes.count();
    let deadline = Instant::now() + WAIT;
    loop {
        tokio::time::sleep(Duration::from_millis(700)).await;
        let now = changes.count();
        if now == last || Instant::now() > deadline {
            break;
        }
        last = now;
    }
    let before = changes.count();
    let asked = Instant::now();
    control("force-open").await;
    changes.wait_past(before, WAIT).await;
    let took = asked.elapsed();
    eprintln!(
        "figure: with a stalled host, another host heard a change after {:.3} s",
        took.as_secs_f64()
    );
    assert!(took < Duration::from_secs(2), "{took:?}");
    drop(client);
}
