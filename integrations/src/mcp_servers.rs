//! The official SDK servers of `integrations/servers/` (Python: PyPI `mcp`; TypeScript: npm
//! `@modelcontextprotocol/sdk`), found where `.ci/run` installs them and started over stdio or
//! streamable HTTP on 127.0.0.1.
//!
//! * Python: `$TOOL_HEALTH_MCP_PYTHON`, else the venv `{target}/mcp/venv` (`{target}` is
//!   `$CARGO_TARGET_DIR` or the workspace's `target/`), with `mcp` [`PYTHON_SDK`] installed
//!   (`bash scripts/mcp_sdks.sh` makes it).
//! * TypeScript: `node` on the `PATH` and `integrations/servers/typescript/node_modules` with
//!   `@modelcontextprotocol/sdk` [`TYPESCRIPT_SDK`] (and [`TYPESCRIPT_SDK_OLD`] under the alias
//!   `sdk-1-20`), from the committed `package-lock.json` (`npm ci`).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStderr, Command};
use tool_health::mcp::SessionId;

/// The Python SDK release the tests pin (`servers/python/requirements.txt`).
pub const PYTHON_SDK: &str = "2.3.0";
/// The TypeScript SDK release the tests pin (`servers/typescript/package.json`).
pub const TYPESCRIPT_SDK: &str = "1.32.2";
/// The TypeScript SDK release before 1.21 moved validation errors into `isError` results.
pub const TYPESCRIPT_SDK_OLD: &str = "1.20.2";

type Error = Box<dyn std::error::Error + Send + Sync>;

/// An SDK server fixture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sdk {
    /// `servers/python/server.py` on [`PYTHON_SDK`].
    Python,
    /// `servers/typescript/server.mjs` on [`TYPESCRIPT_SDK`].
    TypeScript,
    /// `servers/typescript/server.mjs --sdk 1.20` on [`TYPESCRIPT_SDK_OLD`].
    TypeScriptOld,
}

/// How to start one SDK's fixture server.
#[derive(Debug, Clone)]
pub struct Launcher {
    sdk: Sdk,
    program: PathBuf,
    args: Vec<String>,
}

/// The workspace's root (the parent of this crate).
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(".."))
}

fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            if dir.is_absolute() {
                dir
            } else {
                workspace().join(dir)
            }
        }
        None => workspace().join("target"),
    }
}

/// The output of `program args…`, if it ran and succeeded.
fn output(program: &Path, args: &[&str]) -> Option<String> {
    let out = std::process::Command::new(program)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The `"version"` of a `package.json`.
fn package_version(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    json.get("version")?.as_str().map(str::to_owned)
}

impl Sdk {
    /// Its name in test names: `python`, `typescript`, `typescript_1_20`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Python => "python",
            Self::TypeScript => "typescript",
            Self::TypeScriptOld => "typescript_1_20",
        }
    }

    /// Finds the installed SDK, or says why it cannot (and how to install it).
    pub fn find(self) -> Result<Launcher, String> {
        let servers = workspace().join("integrations").join("servers");
        match self {
            Self::Python => {
                let program = std::env::var_os("TOOL_HEALTH_MCP_PYTHON")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| target_dir().join("mcp/venv/bin/python"));
                let version = output(
                    &program,
                    &[
                        "-c",
                        "import importlib.metadata as m; print(m.version('mcp'))",
                    ],
                );
                match version {
                    Some(v) if v == PYTHON_SDK => Ok(Launcher {
                        sdk: self,
                        program,
                        args: vec![servers.join("python/server.py").display().to_string()],
                    }),
                    Some(v) => Err(format!(
                        "{} has mcp {v}, the tests pin {PYTHON_SDK} (bash scripts/mcp_sdks.sh)",
                        program.display()
                    )),
                    None => Err(format!(
                        "no Python with the MCP SDK at {} (bash scripts/mcp_sdks.sh, or set \
                         TOOL_HEALTH_MCP_PYTHON)",
                        program.display()
                    )),
                }
            }
            Self::TypeScript | Self::TypeScriptOld => {
                let node = PathBuf::from("node");
                if output(&node, &["--version"]).is_none() {
                    return Err("no `node` on the PATH".to_owned());
                }
                let dir = servers.join("typescript");
                let (package, pinned) = match self {
                    Self::TypeScript => ("@modelcontextprotocol/sdk", TYPESCRIPT_SDK),
                    _ => ("sdk-1-20", TYPESCRIPT_SDK_OLD),
                };
                let manifest = dir.join("node_modules").join(package).join("package.json");
                match package_version(&manifest) {
                    Some(v) if v == pinned => {
                        let mut args = vec![dir.join("server.mjs").display().to_string()];
                        if self == Self::TypeScriptOld {
                            args.extend(["--sdk".to_owned(), "1.20".to_owned()]);
                        }
                        Ok(Launcher {
                            sdk: self,
                            program: node,
                            args,
                        })
                    }
                    Some(v) => Err(format!(
                        "{} is {v}, the tests pin {pinned} (bash scripts/mcp_sdks.sh)",
                        manifest.display()
                    )),
                    None => Err(format!(
                        "the TypeScript SDK is not installed in {} (bash scripts/mcp_sdks.sh)",
                        dir.join("node_modules").display()
                    )),
                }
            }
        }
    }
}

/// A fixture server over stdio: the client, the process id, and its stderr.
#[derive(Debug)]
pub struct StdioServer {
    /// The connected rmcp client.
    pub running: RunningService<RoleClient, ()>,
    /// The server process's id.
    pub pid: u32,
    /// The server's stderr, line by line.
    pub stderr: Lines<BufReader<ChildStderr>>,
}

/// A fixture server over streamable HTTP on 127.0.0.1.
#[derive(Debug)]
pub struct HttpServer {
    /// The server process (killed on drop).
    pub child: Child,
    /// Its MCP endpoint.
    pub url: String,
    /// Its port.
    pub port: u16,
}

impl HttpServer {
    /// Connects a new client (a session of its own): the client and its session id.
    pub async fn connect(&self) -> Result<(RunningService<RoleClient, ()>, SessionId), Error> {
        crate::mcp_http::connect_http(&self.url).await
    }
}

/// A free port on 127.0.0.1 (bound and released: the server binds it right after).
fn free_port() -> Result<u16, Error> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl Launcher {
    /// Which SDK this starts.
    pub fn sdk(&self) -> Sdk {
        self.sdk
    }

    fn command(&self, mode: &[&str]) -> Command {
        let mut command = Command::new(&self.program);
        command.args(&self.args).args(mode).kill_on_drop(true);
        command
    }

    /// Starts the server over stdio and connects to it.
    pub async fn stdio(&self) -> Result<StdioServer, Error> {
        let (transport, stderr) = TokioChildProcess::builder(self.command(&["stdio"]))
            .stderr(Stdio::piped())
            .spawn()?;
        let pid = transport.id().ok_or("no pid")?;
        let running = tokio::time::timeout(Duration::from_secs(60), ().serve(transport))
            .await
            .map_err(|_| "the server did not answer initialize within 60 s")??;
        let stderr = BufReader::new(stderr.ok_or("stderr not piped")?).lines();
        Ok(StdioServer {
            running,
            pid,
            stderr,
        })
    }

    /// Starts the server over streamable HTTP on a free port of 127.0.0.1 and waits (60 s at
    /// most) until it accepts connections.
    pub async fn http(&self) -> Result<HttpServer, Error> {
        let port = free_port()?;
        let port_arg = port.to_string();
        let mut child = self
            .command(&["http", &port_arg])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = child.try_wait()? {
                return Err(format!("the HTTP server exited first: {status}").into());
            }
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                return Err("the HTTP server did not listen within 60 s".into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(HttpServer {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
            port,
        })
    }
}
