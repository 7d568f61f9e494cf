//! A small MCP server (rmcp 3.11) with one tool per way a tool can end: served in-process over
//! an in-memory duplex pipe by the tests, and over stdio by the `mcp-demo-server` binary.
//!
//! Its tools are the SDK fixtures' (`integrations/servers/`) plus two of its own: `ok`
//! succeeds; `flaky` fails with `isError: true` while the server is broken (it starts broken;
//! `mend` mends it); `needs_int` takes an integer `n`; `hang` never answers; `die` kills the
//! server mid-call (the process of the stdio binary; the serving task in-process); `seen`
//! answers what the server ran, by tool, as JSON; `fail` always answers `isError: true`, `err`
//! a JSON-RPC error (-32603), `add` adds two integers.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::service::RunningService;
use rmcp::{tool, tool_router, ErrorData, RoleClient, RoleServer, ServiceExt};
use serde::Deserialize;
use tokio::sync::Notify;

/// The arguments of `add`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct AddArgs {
    /// Left operand.
    pub a: i64,
    /// Right operand.
    pub b: i64,
}

/// The arguments of `needs_int`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct IntArgs {
    /// The integer.
    pub n: i64,
}

/// The demo server. Clones share the call counts, the `flaky` switch and the kill switch.
#[derive(Debug, Clone)]
pub struct Demo {
    calls: Arc<Mutex<HashMap<&'static str, u64>>>,
    broken: Arc<AtomicBool>,
    die: Arc<Notify>,
}

impl Default for Demo {
    fn default() -> Self {
        Self {
            calls: Arc::default(),
            broken: Arc::new(AtomicBool::new(true)),
            die: Arc::default(),
        }
    }
}

impl Demo {
    /// A server whose `flaky` tool is broken.
    pub fn new() -> Self {
        Self::default()
    }

    fn count(&self, tool: &'static str) {
        if let Ok(mut calls) = self.calls.lock() {
            *calls.entry(tool).or_default() += 1;
        }
    }

    /// How many times `tool` ran on this server.
    pub fn calls(&self, tool: &str) -> u64 {
        self.calls
            .lock()
            .map(|c| c.get(tool).copied().unwrap_or(0))
            .unwrap_or(0)
    }

    /// Breaks or mends `flaky`.
    pub fn set_broken(&self, broken: bool) {
        self.broken.store(broken, Ordering::SeqCst);
    }

    /// Completes when `die` was called (the binary exits; the in-process task stops serving).
    pub async fn died(&self) {
        self.die.notified().await;
    }
}

#[tool_router(server_handler)]
impl Demo {
    /// Succeeds.
    #[tool]
    async fn ok(&self) -> Result<CallToolResult, ErrorData> {
        self.count("ok");
        Ok(CallToolResult::success(vec![ContentBlock::text("fine")]))
    }

    /// A tool-level failure: a normal answer with isError = true.
    #[tool]
    async fn fail(&self) -> Result<CallToolResult, ErrorData> {
        self.count("fail");
        Ok(CallToolResult::error(vec![ContentBlock::text(
            "upstream 503",
        )]))
    }

    /// A protocol-level failure: a JSON-RPC error (-32603).
    #[tool]
    async fn err(&self) -> Result<CallToolResult, ErrorData> {
        self.count("err");
        Err(ErrorData::internal_error("database on fire", None))
    }

    /// Typed arguments.
    #[tool]
    async fn add(&self, Parameters(args): Parameters<AddArgs>) -> String {
        self.count("add");
        (args.a + args.b).to_string()
    }

    /// Doubles an integer.
    #[tool]
    async fn needs_int(&self, Parameters(args): Parameters<IntArgs>) -> String {
        self.count("needs_int");
        format!("twice {} is {}", args.n, 2 * args.n)
    }

    /// Fails with isError = true while the server is broken, succeeds otherwise.
    #[tool]
    async fn flaky(&self) -> Result<CallToolResult, ErrorData> {
        self.count("flaky");
        if self.broken.load(Ordering::SeqCst) {
            Ok(CallToolResult::error(vec![ContentBlock::text(
                "flaky: upstream answered 503",
            )]))
        } else {
            Ok(CallToolResult::success(vec![ContentBlock::text(
                "flaky works",
            )]))
        }
    }

    /// Mends `flaky`.
    #[tool]
    async fn mend(&self) -> String {
        self.count("mend");
        self.set_broken(false);
        "mended".to_owned()
    }

    /// Never answers (a hung backend). Says so on stderr first, so that a test can act while
    /// the call is in flight.
    #[tool]
    async fn hang(&self) -> String {
        self.count("hang");
        eprintln!("hang started");
        std::future::pending::<()>().await;
        String::new()
    }

    /// Kills the server mid-call: never answers, and the server goes away.
    #[tool]
    async fn die(&self) -> String {
        self.count("die");
        eprintln!("die started");
        self.die.notify_one();
        std::future::pending::<()>().await;
        String::new()
    }

    /// What the server ran, by tool, as JSON (`seen` itself left out).
    #[tool]
    async fn seen(&self) -> String {
        let calls = self.calls.lock().map(|c| c.clone()).unwrap_or_default();
        serde_json::json!({ "tools": calls }).to_string()
    }
}

/// Serves `server` in-process over an in-memory duplex pipe and connects a client to it: the
/// server task (abort it, or call `die`, to "crash" the server) and the client.
pub async fn in_process(
    server: Demo,
) -> Result<
    (tokio::task::JoinHandle<()>, RunningService<RoleClient, ()>),
    Box<dyn std::error::Error + Send + Sync>,
> {
    let (server_io, client_io) = tokio::io::duplex(64 * 1024);
    let task = tokio::spawn(async move {
        let died = server.clone();
        let running: Result<RunningService<RoleServer, Demo>, _> = server.serve(server_io).await;
        if let Ok(running) = running {
            tokio::select! {
                _ = running.waiting() => {}
                _ = died.died() => {}
            }
        }
    });
    let client = ().serve(client_io).await?;
    Ok((task, client))
}
