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
//!
//! For what passes through besides tools (`gateway/tests/gateway/passthrough.rs`; the four
//! tools are listed with `GATEWAY_TEST_TOOLS=passthrough` in its environment): `log` sends
//! a log message at the level its `level` says (logger `fixture`); `roots` asks its host for
//! its roots and answers their URIs (or the error); `touch` says resource
//! `fixture://note` changed (to a subscriber: on MCP 2026-07-28, on the `subscriptions/listen`
//! streams that name it, whose resources `seen` reports as `listening`); `die_ro` (marked read-only) ends the process
//! mid-call every time; `die_once` (marked idempotent) ends it the first time only — the file
//! `GATEWAY_TEST_MARK` names remembers it across processes. Resources: `fixture://note`, the
//! template `fixture://notes/{id}`, `fixture://hang` (never answers); prompt `greet` (argument
//! `name`, completed with `Ada`, `Alan`); every `notifications/cancelled` it receives is counted
//! in `seen` as a method. It speaks MCP 2026-07-28 (the gateway's probe finds it), or with
//! `GATEWAY_TEST_ERA=handshake` the handshake era only: a server of 2026-07-28 sends no request
//! to its client (`roots` answers rmcp's error), so the relay of such requests is tested there.

#![allow(deprecated)] // logging and resource subscriptions: deprecated by SEP-2577, what hosts use

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelledNotificationParam,
    CompleteRequestParams, CompleteResult, CompletionInfo, ContentBlock, DiscoverResult,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, Implementation,
    InitializeRequestParams, InitializeResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, LoggingLevel, LoggingMessageNotificationParam,
    PaginatedRequestParams, Prompt, PromptArgument, PromptMessage, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate, ResourceUpdatedNotificationParam, Role, ServerCapabilities,
    ServerConfig, SetLevelRequestParams, SubscribeRequestParams, SubscriptionFilter, Tool,
    ToolAnnotations, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext, SubscriptionSink};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};

/// The environment variable that makes the test binary serve the fixture.
pub const ROLE: &str = "GATEWAY_TEST_ROLE";

/// With `passthrough` in it, the fixture also lists `log`, `touch`, `roots`, `die_ro`, `die_once`
/// (the other tests count its nine tools).
pub const TOOLS: &str = "GATEWAY_TEST_TOOLS";
/// `handshake`: the fixture speaks the protocols of the `initialize` handshake only.
pub const ERA: &str = "GATEWAY_TEST_ERA";

/// The fixture's state.
#[derive(Clone, Default)]
pub struct Fixture {
    broken: Arc<AtomicBool>,
    /// `drop_echo` was called: `echo` is no longer listed.
    dropped: Arc<AtomicBool>,
    methods: Arc<Mutex<BTreeMap<String, u64>>>,
    tools: Arc<Mutex<BTreeMap<String, u64>>>,
    /// The `subscriptions/listen` streams open now (MCP 2026-07-28), by request id.
    listens: Arc<Mutex<Vec<(String, SubscriptionSink)>>>,
}

/// `GATEWAY_TEST_ERA=handshake`.
fn handshake_era() -> bool {
    std::env::var(ERA).as_deref() == Ok("handshake")
}

fn schema(v: Value) -> Arc<serde_json::Map<String, Value>> {
    Arc::new(v.as_object().cloned().unwrap_or_default())
}

fn text(t: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(t)])
}

impl Fixture {
    /// The resources the open listen streams name, sorted.
    fn listening(&self) -> Vec<String> {
        let mut uris: Vec<String> = self
            .listens
            .lock()
            .unwrap()
            .iter()
            .flat_map(|(_, sink)| {
                sink.accepted()
                    .resource_subscriptions
                    .clone()
                    .unwrap_or_default()
            })
            .collect();
        uris.sort();
        uris
    }

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
                .enable_resources()
                .enable_resources_subscribe()
                .enable_prompts()
                .enable_completions()
                .enable_logging()
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
        if handshake_era() {
            // As a server of that era: it knows no `server/discover`.
            return Err(ErrorData::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                "server/discover",
                None,
            ));
        }
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
        let passthrough = [
            Tool::new(
                "log",
                "Sends a log message.",
                schema(
                    json!({"type": "object", "properties": {"level": {"type": "string"}, "text": {"type": "string"}}}),
                ),
            ),
            Tool::new("touch", "Says fixture://note changed.", empty()),
            Tool::new("roots", "Asks the host its roots, answers them.", empty()),
            Tool::new("die_ro", "Ends the process mid-call (read-only).", empty())
                .with_annotations(ToolAnnotations::new().read_only(true)),
            Tool::new(
                "die_once",
                "Ends the process the first time (idempotent).",
                empty(),
            )
            .with_annotations(ToolAnnotations::new().idempotent(true)),
        ];
        if std::env::var(TOOLS).as_deref() == Ok("passthrough") {
            tools.extend(passthrough);
        }
        if self.dropped.load(Ordering::SeqCst) {
            tools.retain(|t| t.name != "echo");
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(self.list_resources_of().await)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        self.count("resources/templates/list");
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new("fixture://notes/{id}", "notes"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        self.read_of(&request.uri).await
    }

    async fn subscribe(
        &self,
        _request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.count("resources/subscribe");
        Ok(())
    }

    async fn unsubscribe(
        &self,
        _request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.count("resources/unsubscribe");
        Ok(())
    }

    /// With `GATEWAY_TEST_ERA=handshake`, the handshake era only (up to 2025-11-25): the
    /// gateway's probe finds no 2026-07-28 and opens it with `initialize`.
    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        if handshake_era() {
            ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25).into()
        } else {
            ProtocolVersion::KNOWN_VERSIONS.into()
        }
    }

    /// MCP 2026-07-28's subscriptions: whatever is asked.
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.clone())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        self.count("subscriptions/listen");
        let id = context.sink().id().to_string();
        self.listens
            .lock()
            .unwrap()
            .push((id.clone(), context.sink().clone()));
        context.cancelled().await;
        self.listens.lock().unwrap().retain(|(i, _)| *i != id);
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        self.count("prompts/list");
        Ok(ListPromptsResult::with_all_items(vec![Prompt::new(
            "greet",
            Some("Greets someone."),
            Some(vec![PromptArgument::new("name").with_required(true)]),
        )]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        self.count("prompts/get");
        if request.name != "greet" {
            return Err(ErrorData::invalid_params("no such prompt", None));
        }
        let name = request
            .arguments
            .and_then(|a| a.get("name").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_default();
        Ok(GetPromptResult::new(vec![PromptMessage::new_text(
            Role::User,
            format!("Hello, {name}!"),
        )])
        .into())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        self.count("completion/complete");
        let values: Vec<String> = ["Ada", "Alan"]
            .iter()
            .filter(|v| v.starts_with(&request.argument.value))
            .map(|v| (*v).to_owned())
            .collect();
        Ok(CompleteResult::new(
            CompletionInfo::new(values).map_err(|e| ErrorData::internal_error(e, None))?,
        ))
    }

    async fn set_level(
        &self,
        _request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.count("logging/setLevel");
        Ok(())
    }

    async fn on_cancelled(
        &self,
        _notification: CancelledNotificationParam,
        _context: NotificationContext<RoleServer>,
    ) {
        self.count("notifications/cancelled");
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
            "die" | "die_ro" => {
                eprintln!("{name} started");
                std::process::exit(3);
            }
            "die_once" => {
                let mark = std::env::var("GATEWAY_TEST_MARK").unwrap_or_default();
                if !mark.is_empty() && std::fs::metadata(&mark).is_err() {
                    let _ = std::fs::write(&mark, "died once");
                    eprintln!("die_once started");
                    std::process::exit(3);
                }
                text("survived")
            }
            "log" => {
                let level: LoggingLevel = serde_json::from_value(
                    args.get("level").cloned().unwrap_or_else(|| json!("info")),
                )
                .unwrap_or(LoggingLevel::Info);
                let mut message = LoggingMessageNotificationParam::new(
                    level,
                    args.get("text").cloned().unwrap_or(json!("")),
                );
                message.logger = Some("fixture".into());
                let _ = context.peer.notify_logging_message(message).await;
                text("logged")
            }
            "roots" => match context.peer.list_roots().await {
                Ok(r) => text(
                    r.roots
                        .iter()
                        .map(|root| root.uri.clone())
                        .collect::<Vec<_>>()
                        .join(" "),
                ),
                Err(e) => CallToolResult::error(vec![ContentBlock::text(e.to_string())]),
            },
            "touch" => {
                // On MCP 2026-07-28 on the listen streams that name it; before, on the session.
                if context
                    .protocol_version()
                    .is_some_and(|v| !v.has_initialize())
                {
                    let sinks: Vec<SubscriptionSink> = self
                        .listens
                        .lock()
                        .unwrap()
                        .iter()
                        .map(|(_, sink)| sink.clone())
                        .collect();
                    for sink in sinks {
                        let _ = sink.notify_resource_updated("fixture://note").await;
                    }
                } else {
                    let _ = context
                        .peer
                        .notify_resource_updated(ResourceUpdatedNotificationParam::new(
                            "fixture://note",
                        ))
                        .await;
                }
                text("touched")
            }
            "seen" => text(
                json!({
                    "methods": *self.methods.lock().unwrap(),
                    "tools": *self.tools.lock().unwrap(),
                    "listening": self.listening(),
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

impl Fixture {
    fn note(uri: &str, text: &str) -> ReadResourceResult {
        ReadResourceResult::new(vec![ResourceContents::text(text, uri)])
    }
}

/// What passes through besides tools (see the module docs).
impl Fixture {
    async fn list_resources_of(&self) -> ListResourcesResult {
        self.count("resources/list");
        ListResourcesResult::with_all_items(vec![Resource::new("fixture://note", "note")])
    }

    async fn read_of(&self, uri: &str) -> Result<ReadResourceResponse, ErrorData> {
        self.count("resources/read");
        if uri == "fixture://hang" {
            std::future::pending::<()>().await;
        }
        if uri == "fixture://note" {
            return Ok(Self::note(uri, "a note").into());
        }
        match uri.strip_prefix("fixture://notes/") {
            Some(id) => Ok(Self::note(uri, &format!("note {id}")).into()),
            None => Err(ErrorData::resource_not_found(
                format!("no resource {uri}"),
                None,
            )),
        }
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
