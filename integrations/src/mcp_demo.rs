//! A small MCP server (rmcp 3.11) with one tool per way a tool can end: served in-process over
//! an in-memory duplex pipe by the tests, and over stdio by the `mcp-demo-server` binary.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::service::RunningService;
use rmcp::{tool, tool_router, ErrorData, RoleClient, RoleServer, ServiceExt};
use serde::Deserialize;

/// The arguments of `add`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct AddArgs {
    /// Left operand.
    pub a: i64,
    /// Right operand.
    pub b: i64,
}

/// The demo server. Clones share the call counts and the `flaky` switch.
#[derive(Debug, Clone, Default)]
pub struct Demo {
    calls: Arc<Mutex<HashMap<&'static str, u64>>>,
    broken: Arc<AtomicBool>,
}

impl Demo {
    /// A server whose `flaky` tool works.
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

    /// Fails with isError = true while the server is broken, succeeds otherwise.
    #[tool]
    async fn flaky(&self) -> Result<CallToolResult, ErrorData> {
        self.count("flaky");
        if self.broken.load(Ordering::SeqCst) {
            Ok(CallToolResult::error(vec![ContentBlock::text("down")]))
        } else {
            Ok(CallToolResult::success(vec![ContentBlock::text("up")]))
        }
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
}

/// Serves `server` in-process over an in-memory duplex pipe and connects a client to it: the
/// server task (abort it to "crash" the server) and the client.
pub async fn in_process(
    server: Demo,
) -> Result<
    (tokio::task::JoinHandle<()>, RunningService<RoleClient, ()>),
    Box<dyn std::error::Error + Send + Sync>,
> {
    let (server_io, client_io) = tokio::io::duplex(64 * 1024);
    let task = tokio::spawn(async move {
        let running: Result<RunningService<RoleServer, Demo>, _> = server.serve(server_io).await;
        if let Ok(running) = running {
            let _ = running.waiting().await;
        }
    });
    let client = ().serve(client_io).await?;
    Ok((task, client))
}
