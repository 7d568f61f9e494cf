//! The gateway as users install it: the PyPI wheel (`gateway/pyproject.toml`, built by
//! `bash scripts/wheel.sh` into `target/wheel/dist/`) installed the three ways a Python user
//! does — `pip` into a fresh venv, `uvx --from`, `pipx run --spec` (uv 0.13.8 and pipx 1.18.4,
//! pinned in `target/wheel/tools/` by the same script) — and each time launched over stdio by
//! the official Python SDK client (`mcp` 2.3.0, `integrations/servers/python/client.py`), as a
//! host launches a Python MCP server, with the Python SDK server behind it: the client lists
//! the tools and calls one. Nothing is fetched: `pip --no-index`, `UV_OFFLINE`, `PIP_NO_INDEX`
//! (the wheel has no dependencies).
//!
//! And `--healthcheck URL`, the container image's health check, against the gateway running
//! from the venv: 0 while it serves, 1 for another answer, 1 once it stopped.
//!
//! The container image (`gateway/Containerfile`, built by `bash scripts/image.sh` into buildah's
//! storage under `target/image/`) run by `buildah run` as its config says — entrypoint, command,
//! user, health check — with an upstream over streamable HTTP and the Python SDK client as its
//! host over HTTP.
//!
//! Without the wheel, the image, the tools or the SDK a test is ignored with the reason, and
//! fails under `CI=true` (`.ci/run` builds the wheel and the image before the tests).

// Items of the test modules are public to each other, not to any crate.
#![allow(unreachable_pub)]

#[path = "../support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use support::{
    eventually, listening_port, scratch, skip, trial, upstream, write_config, Log, WAIT,
};

fn main() {
    support::main(|| {
        vec![
            trial("wheel_in_a_fresh_venv_serves_a_host", venv_entry_point),
            trial("uvx_runs_the_wheel_for_a_host", uvx),
            trial("pipx_run_runs_the_wheel_for_a_host", pipx_run),
            trial(
                "image_serves_a_host_as_nonroot_and_passes_its_health_check",
                image,
            ),
        ]
    })
}

/// The one wheel `scripts/wheel.sh` left, or why there is none.
fn wheel() -> PathBuf {
    let dist = support::target_dir().join("wheel/dist");
    let wheels: Vec<PathBuf> = std::fs::read_dir(&dist)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "whl"))
        .collect();
    match wheels.as_slice() {
        [one] => one.clone(),
        [] => skip(&format!(
            "no wheel in {} (bash scripts/wheel.sh)",
            dist.display()
        )),
        _ => panic!(
            "{} holds {} wheels: scripts/wheel.sh leaves one",
            dist.display(),
            wheels.len()
        ),
    }
}

/// A packaging tool from `target/wheel/tools/bin/`, or why it is missing.
fn tool(name: &str) -> PathBuf {
    let path = support::target_dir().join("wheel/tools/bin").join(name);
    if !path.is_file() {
        skip(&format!("no {} (bash scripts/wheel.sh)", path.display()));
    }
    path
}

/// Runs `program args` to the end (bounded) and gives its status and output.
async fn run(program: &Path, args: &[&str]) -> (bool, String) {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args).stdin(Stdio::null()).kill_on_drop(true);
    let out = tokio::time::timeout(WAIT, cmd.output())
        .await
        .unwrap_or_else(|_| panic!("{} {args:?}: not done within {WAIT:?}", program.display()))
        .unwrap_or_else(|e| panic!("{} {args:?}: {e}", program.display()));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// The Python SDK client (`client.py`), connected to a gateway.
struct Host {
    child: tokio::process::Child,
    stdin: Option<tokio::process::ChildStdin>,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    log: Arc<Log>,
    /// The gateway's HTTP port (from its log).
    port: u16,
}

impl Host {
    /// The client launching the gateway over stdio (`launch`, plus `--config` with the Python
    /// SDK server as `py` and `--listen 127.0.0.1:0`), with `env`.
    async fn launch(launch: &[String], env: &[(&str, String)]) -> Self {
        let py = upstream::python().unwrap_or_else(|why| skip(&why));
        let config = write_config(&json!({"mcpServers": {"py": py}}));
        let mut args = vec!["stdio".to_owned()];
        args.extend_from_slice(launch);
        args.extend([
            "--config".to_owned(),
            config.display().to_string(),
            "--listen".to_owned(),
            "127.0.0.1:0".to_owned(),
        ]);
        let mut host = Self::start(&args, env).await;
        // The gateway's log comes through the client's stderr.
        host.port = listening_port(&host.log).await;
        host
    }

    /// The client of the gateway listening on 127.0.0.1:`port`, over streamable HTTP.
    async fn http(port: u16) -> Self {
        let url = format!("http://127.0.0.1:{port}/mcp");
        let mut host = Self::start(&["http".to_owned(), url], &[]).await;
        host.port = port;
        host
    }

    async fn start(args: &[String], env: &[(&str, String)]) -> Self {
        let python = support::python().unwrap_or_else(|why| skip(&why));
        let client = support::workspace().join("integrations/servers/python/client.py");
        let mut child = tokio::process::Command::new(python)
            .arg(&client)
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", client.display()));
        let log = Log::spawn(child.stderr.take().unwrap(), "[client]");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let stdin = child.stdin.take();
        let hello = next(&mut lines, &log, |v| v["event"] == "ready").await;
        assert_eq!(hello["server"], "tool-health-gateway", "{hello}");
        Self {
            child,
            stdin,
            lines,
            log,
            port: 0,
        }
    }

    async fn ask(&mut self, cmd: Value) -> Value {
        let stdin = self.stdin.as_mut().expect("the client is open");
        stdin
            .write_all(format!("{cmd}\n").as_bytes())
            .await
            .unwrap();
        stdin.flush().await.unwrap();
        let answer = next(&mut self.lines, &self.log, |v| v.get("id").is_some()).await;
        assert_eq!(answer["id"], cmd["id"], "{answer}");
        answer
    }

    /// Lists the tools and calls `py__ok` through the gateway.
    async fn list_and_call(&mut self) {
        let listed = self.ask(json!({"id": 1, "op": "list"})).await;
        let tools = listed["tools"].as_array().cloned().unwrap_or_default();
        assert!(tools.contains(&json!("py__ok")), "{listed}");
        let called = self
            .ask(json!({"id": 2, "op": "call", "name": "py__ok", "arguments": {}}))
            .await;
        assert_eq!(called, json!({"id": 2, "isError": false, "text": "fine"}));
    }

    /// Closes the client's stdin: the client closes the gateway's, and both end.
    async fn stop(mut self) {
        drop(self.stdin.take());
        let status = tokio::time::timeout(WAIT, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("the client did not end:\n{}", self.log.text()))
            .unwrap();
        assert!(
            status.success(),
            "the client: {status}\n{}",
            self.log.text()
        );
    }
}

/// The client's next line that is `wanted`, read as JSON (the change events it also reports
/// — the upstream connecting after the host — are not what these tests look at).
async fn next(
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    log: &Log,
    wanted: impl Fn(&Value) -> bool,
) -> Value {
    loop {
        let line = tokio::time::timeout(WAIT, lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("the client said nothing within {WAIT:?}:\n{}", log.text()))
            .unwrap_or_else(|e| panic!("the client's stdout: {e}"))
            .unwrap_or_else(|| panic!("the client ended:\n{}", log.text()));
        let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
        if wanted(&v) {
            return v;
        }
    }
}

/// `pip install --no-index` of the wheel into a fresh venv; the host launches the venv's
/// `bin/tool-health-gateway`, the entry point the wheel installs.
async fn venv_entry_point() {
    let wheel = wheel();
    let venv = scratch().join("venv");
    let (ok, out) = run(
        Path::new("python3"),
        &["-m", "venv", &venv.display().to_string()],
    )
    .await;
    assert!(ok, "python3 -m venv: {out}");
    let pip = venv.join("bin/pip");
    let (ok, out) = run(
        &pip,
        &[
            "install",
            "--no-index",
            "--disable-pip-version-check",
            "--quiet",
            &wheel.display().to_string(),
        ],
    )
    .await;
    assert!(ok, "pip install {}: {out}", wheel.display());
    let gateway = venv.join("bin/tool-health-gateway");
    let (ok, out) = run(&gateway, &["--version"]).await;
    assert!(ok, "{out}");
    assert_eq!(
        out.trim(),
        format!("tool-health-gateway {}", env!("CARGO_PKG_VERSION")),
        "the wheel carries this version's gateway"
    );

    let mut host = Host::launch(&[gateway.display().to_string()], &[]).await;
    host.list_and_call().await;

    // The health check the container image runs, from the same binary.
    let healthz = format!("http://127.0.0.1:{}/healthz", host.port);
    let (ok, out) = run(&gateway, &["--healthcheck", &healthz]).await;
    assert!(
        ok,
        "--healthcheck {healthz} while the gateway serves: {out}"
    );
    let missing = format!("http://127.0.0.1:{}/no-such-route", host.port);
    let (ok, out) = run(&gateway, &["--healthcheck", &missing]).await;
    assert!(
        !ok && out.contains("answered 404"),
        "--healthcheck {missing}: {out}"
    );

    host.stop().await;
    // Nothing outlives the host: the gateway stopped with its stdin, and the check says so.
    let out = eventually(
        "--healthcheck fails once the gateway stopped",
        WAIT,
        || async {
            let (ok, out) = run(&gateway, &["--healthcheck", &healthz]).await;
            (!ok).then_some(out)
        },
    )
    .await;
    assert!(out.contains("cannot connect"), "{out}");
}

/// `uvx --from WHEEL tool-health-gateway …`: what a host config's
/// `{"command": "uvx", "args": ["tool-health-gateway", …]}` runs, from the built wheel.
async fn uvx() {
    let home = scratch();
    let env = [
        ("UV_CACHE_DIR", home.join("uv-cache").display().to_string()),
        ("UV_TOOL_DIR", home.join("uv-tools").display().to_string()),
        ("UV_OFFLINE", "1".to_owned()),
        ("UV_PYTHON_DOWNLOADS", "never".to_owned()),
        ("UV_NO_CONFIG", "1".to_owned()),
    ];
    serve_through("uvx", &["--from"], &env).await;
}

/// `pipx run --spec WHEEL tool-health-gateway …`.
async fn pipx_run() {
    let home = scratch();
    let env = [
        ("PIPX_HOME", home.join("pipx").display().to_string()),
        ("PIPX_BIN_DIR", home.join("bin").display().to_string()),
        ("PIP_NO_INDEX", "1".to_owned()),
    ];
    serve_through("pipx", &["run", "--spec"], &env).await;
}

/// The host launches `TOOL ARGS… WHEEL tool-health-gateway`, lists and calls a tool.
async fn serve_through(tool_name: &str, args: &[&str], env: &[(&str, String)]) {
    let wheel = wheel();
    let mut launch = vec![tool(tool_name).display().to_string()];
    launch.extend(args.iter().map(|a| (*a).to_owned()));
    launch.extend([
        wheel.display().to_string(),
        "tool-health-gateway".to_owned(),
    ]);
    let mut host = Host::launch(&launch, env).await;
    host.list_and_call().await;
    host.stop().await;
}

/// A free port on 127.0.0.1 (the OS's pick, released for the process about to bind it).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// buildah on the storage scripts/image.sh built into (vfs, under `target/image/`).
fn buildah() -> std::process::Command {
    let dir = support::target_dir().join("image");
    let mut cmd = std::process::Command::new("buildah");
    cmd.args(["--storage-driver", "vfs", "--root"])
        .arg(dir.join("storage"))
        .arg("--runroot")
        .arg(dir.join("run"));
    cmd
}

/// A working container of the image, and the process group of what runs in it: both gone
/// when dropped, whatever the test did.
struct Container {
    name: String,
    group: Option<u32>,
}

impl Container {
    /// Sends `signal` to what runs in the container (its process group).
    fn signal(&self, signal: &str) {
        if let Some(pgid) = self.group {
            let _ = std::process::Command::new("kill")
                .args([signal, "--", &format!("-{pgid}")])
                .stderr(Stdio::null())
                .status();
        }
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        self.signal("-KILL");
        let _ = buildah().args(["rm", &self.name]).output();
    }
}

/// The container image scripts/image.sh built, run by `buildah run` (chroot isolation: the
/// host's network) exactly as its config says — entrypoint, command, user, health check — but
/// on a free port instead of 8080, with its config mounted where the command reads it: an
/// upstream over streamable HTTP (the Python SDK server), the Python SDK client as the host.
async fn image() {
    let image = format!("tool-health-gateway:{}", env!("CARGO_PKG_VERSION"));
    let inspect = match buildah()
        .args(["inspect", "--type", "image", &image])
        .output()
    {
        Ok(o) if o.status.success() => o.stdout,
        Ok(o) => skip(&format!(
            "no image {image} in target/image/ (bash scripts/image.sh): {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => skip(&format!("no buildah ({e}; apt-get install buildah)")),
    };
    let inspect: Value = serde_json::from_slice(&inspect).expect("buildah inspect's JSON");
    let config = &inspect["Docker"]["config"];
    assert_eq!(config["User"], "65532:65532", "not root: {config}");
    let words = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap_or_else(|| panic!("a list: {v}"))
            .iter()
            .map(|w| w.as_str().expect("a string").to_owned())
            .collect()
    };
    let entrypoint = words(&config["Entrypoint"]);
    let command = words(&config["Cmd"]);
    let check = words(&config["Healthcheck"]["Test"]);
    assert_eq!(entrypoint, ["/usr/local/bin/tool-health-gateway"]);
    assert_eq!(
        command,
        [
            "--config",
            "/etc/tool-health-gateway/gateway.json",
            "--listen",
            "0.0.0.0:8080",
            "--no-stdio"
        ]
    );
    assert_eq!(
        check,
        [
            "CMD",
            "/usr/local/bin/tool-health-gateway",
            "--healthcheck",
            "http://127.0.0.1:8080/healthz"
        ],
        "the health check asks the port the command listens on"
    );

    // The upstream, on the host's loopback (shared with the container).
    let python = support::python().unwrap_or_else(|why| skip(&why));
    let py_port = free_port();
    let mut upstream = tokio::process::Command::new(python)
        .arg(support::workspace().join("integrations/servers/python/server.py"))
        .args(["http", &py_port.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the Python SDK server");
    let etc = scratch();
    std::fs::write(
        etc.join("gateway.json"),
        json!({"mcpServers": {"py": {"url": format!("http://127.0.0.1:{py_port}/mcp")}}})
            .to_string(),
    )
    .unwrap();

    let port = free_port();
    let on_port = |w: &String| {
        w.replace(":8080", &format!(":{port}"))
            .replace("0.0.0.0", "127.0.0.1")
    };
    let out = buildah()
        .args(["from", "--quiet", &image])
        .output()
        .expect("buildah from");
    assert!(
        out.status.success(),
        "buildah from: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut container = Container {
        name: String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        group: None,
    };
    let mut run = tokio::process::Command::from(buildah());
    run.args(["run", "--isolation", "chroot", "-v"])
        .arg(format!("{}:/etc/tool-health-gateway:ro", etc.display()))
        .args([&container.name, "--"])
        .args(entrypoint.iter().chain(&command).map(on_port))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut gateway = run.spawn().expect("buildah run");
    container.group = gateway.id();
    let log = Log::spawn(gateway.stderr.take().unwrap(), "[image]");
    assert_eq!(listening_port(&log).await, port, "{}", log.text());

    // The image's own health check, run in the image.
    let health = |container: &Container| {
        let mut cmd = buildah();
        cmd.args(["run", "--isolation", "chroot", &container.name, "--"])
            .args(check[1..].iter().map(on_port))
            .stdin(Stdio::null());
        cmd.output().expect("buildah run the health check")
    };
    let out = health(&container);
    assert!(
        out.status.success(),
        "the health check: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    eventually("the image's gateway reaches its upstream", WAIT, || async {
        let (code, body) = support::http(port, "GET", "/healthz", &[], "").await;
        (code == 200 && body["servers_connected"] == 1).then_some(())
    })
    .await;

    let mut host = Host::http(port).await;
    host.list_and_call().await;
    host.stop().await;

    // Stopped (SIGTERM, as a runtime stops a container), the gateway exits and the check fails.
    container.signal("-TERM");
    let status = tokio::time::timeout(WAIT, gateway.wait())
        .await
        .unwrap_or_else(|_| panic!("the image's gateway did not stop:\n{}", log.text()))
        .unwrap();
    container.group = None;
    let out = health(&container);
    assert!(
        !out.status.success(),
        "the health check passed with the gateway stopped ({status})"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot connect"));
    upstream.kill().await.unwrap();
}
