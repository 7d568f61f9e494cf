//! The rmcp upstream of the gateway's tests: an rmcp 3.11 server with the SDK fixtures' tools
//! (`integrations/servers/`), served over stdio by the test binary itself when it runs with
//! `GATEWAY_TEST_ROLE=rmcp-fixture` (the gateway starts it like any stdio server).
//!
//! Tools: `ok` succeeds; `flaky` answers `isError` while the server is broken (it starts
//! broken; `mend` mends it); `needs_int` takes an integer `n`; `hang` never answers; `die`
//! ends the process mid-call (exit 3); `seen` answers what the server received as JSON (every
//! request by method, and `tools/call` by tool name, `seen` itself left out); `echo` answers
//! its `text` (for the bench; `text` is annotated `x-mcp-header: Text`, MCP 2026-07-28's
//! mirror of an argument into a header); `drop_echo` takes `echo` out of its list and says so
//! (`notifications/tools/list_changed`). With `GATEWAY_TEST_LIST=hang` in its environment its
//! `tools/list` never answers.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, DiscoverResult,
    Implementation, InitializeRequestParams, InitializeResult, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};

/// The environment variable that makes the test binary serve the fixture.
pub const ROLE: &str = "GATEWAY_TEST_ROLE";

/// The fixture's state.
#[derive(Clone, Default)]
pub struct Fixture {
    broken: Arc<AtomicBool>,
    /// `drop_echo` was called: `echo` is no longer listed.
    dropped: Arc<AtomicBool>,
    methods: Arc<Mutex<BTreeMap<String, u64>>>,
    tools: Arc<Mutex<BTreeMap<String, u64>>>,
}

fn schema(v: Value) -> Arc<serde_json::Map<String, Value>> {
    Arc::new(v.as_object().cloned().unwrap_or_default())
}

fn text(t: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(t)])
}

impl Fixture {
    fn count(&self, method: &str) {
        *self
            .methods
            .lock()
            .unwrap()
            .entry(method.to_owned())
            .or_default() += 1;
    }
}

impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("tool-health-rmcp-fixture", "1.0.0"))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        self.count("initialize");
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn ping(&self, _context: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        self.count("ping");
        Ok(())
    }

    /// MCP 2026-07-28's opening and probe (the gateway opens with it: one per connection).
    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        self.count("server/discover");
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            self.get_info(),
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.count("tools/list");
        if std::env::var("GATEWAY_TEST_LIST").as_deref() == Ok("hang") {
            std::future::pending::<()>().await;
        }
        let empty = || schema(json!({"type": "object", "properties": {}}));
        let mut tools = vec![
            Tool::new("ok", "Succeeds.", empty()),
            Tool::new("flaky", "Fails while the server is broken.", empty()),
            Tool::new("mend", "Mends `flaky`.", empty()),
            Tool::new(
                "needs_int",
                "Doubles an integer.",
                schema(
                    json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
                ),
            ),
            Tool::new("hang", "Never answers.", empty()),
            Tool::new("die", "Ends the process mid-call.", empty()),
            Tool::new("seen", "What the server received.", empty()),
            Tool::new(
                "echo",
                "Answers its text.",
                // Mirrored into an `Mcp-Param-Text` header over HTTP (MCP 2026-07-28).
                schema(
                    json!({"type": "object", "properties": {"text": {"type": "string", "x-mcp-header": "Text"}}}),
                ),
            ),
            Tool::new("drop_echo", "Takes `echo` out of the list.", empty()),
        ];
        if self.dropped.load(Ordering::SeqCst) {
            tools.retain(|t| t.name != "echo");
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        if name != "seen" {
            self.count("tools/call");
            *self.tools.lock().unwrap().entry(name.clone()).or_default() += 1;
        }
        let args = request.arguments.unwrap_or_default();
        let result = match name.as_str() {
            "ok" => text("fine"),
            "flaky" if self.broken.load(Ordering::SeqCst) => {
                CallToolResult::error(vec![ContentBlock::text("flaky: upstream answered 503")])
            }
            "flaky" => text("flaky works"),
            "mend" => {
                self.broken.store(false, Ordering::SeqCst);
                text("mended")
            }
            "needs_int" => match args.get("n").and_then(Value::as_i64) {
                Some(n) => text(format!("twice {n} is {}", 2 * n)),
                None => CallToolResult::error(vec![ContentBlock::text(
                    "failed to deserialize parameters: `n` must be an integer",
                )]),
            },
            "hang" => {
                eprintln!("hang started");
                std::future::pending::<()>().await;
                unreachable!()
            }
            "die" => {
                eprintln!("die started");
                std::process::exit(3);
            }
            "seen" => text(
                json!({
                    "methods": *self.methods.lock().unwrap(),
                    "tools": *self.tools.lock().unwrap(),
                })
                .to_string(),
            ),
            "drop_echo" => {
                self.dropped.store(true, Ordering::SeqCst);
                let _ = context.peer.notify_tool_list_changed().await;
                text("echo dropped")
            }
            "echo" => text(
                args.get("text")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
            ),
            _ => return Err(ErrorData::invalid_params("tool not found", None)),
        };
        Ok(result.into())
    }
}

/// Serves the fixture on stdio until stdin closes (the test binary's `main` calls it when
/// [`ROLE`] is `rmcp-fixture`).
pub fn serve_stdio() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let fixture = Fixture {
            broken: Arc::new(AtomicBool::new(true)),
            ..Fixture::default()
        };
        match fixture
            .serve((tokio::io::stdin(), tokio::io::stdout()))
            .await
        {
            Ok(running) => {
                let _ = running.waiting().await;
            }
            Err(e) => eprintln!("rmcp fixture: {e}"),
        }
    });
}
