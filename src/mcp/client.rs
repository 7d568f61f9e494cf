//! [`ToolHealthClient`]: the settings, and one call from the argument check to the record.

use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientRequest, ContentBlock, ListToolsRequest, ListToolsResult, PaginatedRequestParams,
    PingRequest, RequestId, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient, ServiceError};
use tokio::sync::mpsc;
use tracing::{Instrument as _, Span};

use crate::breaker::BreakerState;
use crate::call::REFUSAL_MESSAGE;
use crate::call_helper::{CallError, ErrorClass};
use crate::registry::ToolHealthRegistry;
use crate::semconv;

use super::classify;
use super::schema::{SchemaCheck, Schemas};
use super::server::{server_registry, ProbeGuard, ServerBreaker, ServerGate, ServerOutcome};
use super::span::{self, Transport};
use super::tools::{self, Event, HiddenBy, HiddenTool, ToolList, ToolsChanged, ToolsSubscription};
use super::{
    invalid_tool_name, refusal_of, shown, DEFAULT_PING_TIMEOUT, DEFAULT_TIMEOUT,
    INVALID_ARGUMENTS_MESSAGE, KEY_SEPARATOR,
};

/// The longest server name kept (in bytes, at a character boundary).
const MAX_SERVER_NAME: usize = 128;

/// A user's classification of results ([`ToolHealthClient::classify_results`]).
type ResultClassifier = Arc<dyn Fn(&str, &CallToolResult) -> ErrorClass + Send + Sync>;

/// An rmcp client peer whose `call_tool` is checked, gated, timed out, traced and recorded,
/// and whose `list_tools` leaves out what refuses now (see the [module docs](super)).
#[derive(Clone)]
pub struct ToolHealthClient {
    peer: Peer<RoleClient>,
    registry: Arc<ToolHealthRegistry>,
    server: ServerBreaker,
    timeout: Duration,
    ping_timeout: Duration,
    schema_check: SchemaCheck,
    classify: Option<ResultClassifier>,
    transport: Transport,
    /// Shared by the clones and peers of one server: its schemas and subscriptions.
    shared: Arc<Shared>,
}

/// What every clone of a client for one server shares.
#[derive(Debug, Default)]
struct Shared {
    schemas: Schemas,
    subscribers: Mutex<Vec<mpsc::UnboundedSender<Event>>>,
    /// The list was too long to declare, and that was said (once per client).
    declare_warned: std::sync::atomic::AtomicBool,
}

impl fmt::Debug for ToolHealthClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolHealthClient")
            .field("server", &self.server)
            .field("timeout", &self.timeout)
            .field("ping_timeout", &self.ping_timeout)
            .field("schema_check", &self.schema_check)
            .field("transport", &self.transport)
            .field("registry", &self.registry)
            .finish_non_exhaustive()
    }
}

/// A server name as a key's first part: no [`KEY_SEPARATOR`] (each becomes `_`), no control
/// characters (each becomes `?`), at most [`MAX_SERVER_NAME`] bytes; empty becomes `mcp`.
fn server_key(name: &str) -> Arc<str> {
    let mut out = String::with_capacity(name.len().min(MAX_SERVER_NAME));
    for c in name.chars() {
        let c = match c {
            KEY_SEPARATOR => '_',
            c if c.is_control() => '?',
            c => c,
        };
        if out.len() + c.len_utf8() > MAX_SERVER_NAME {
            break;
        }
        out.push(c);
    }
    if out.is_empty() {
        out.push_str("mcp");
    }
    out.into()
}

impl ToolHealthClient {
    /// Calls through `peer` (from `RunningService::peer`), with breakers in `registry` (the
    /// server's in [`server_registry`]), [`DEFAULT_TIMEOUT`], [`DEFAULT_PING_TIMEOUT`] and the
    /// lax argument check. The server is named by its own `serverInfo.name` from the
    /// handshake (`mcp` if it gave none) until [`server`](Self::server) names it.
    pub fn new(peer: Peer<RoleClient>, registry: Arc<ToolHealthRegistry>) -> Self {
        let name = peer
            .peer_info()
            .and_then(|info| info.server_info.as_ref().map(|i| server_key(&i.name)))
            .unwrap_or_else(|| server_key(""));
        let servers = Arc::clone(server_registry(&registry));
        Self {
            peer,
            registry,
            server: ServerBreaker { servers, name },
            timeout: DEFAULT_TIMEOUT,
            ping_timeout: DEFAULT_PING_TIMEOUT,
            schema_check: SchemaCheck::default(),
            classify: None,
            transport: Transport::default(),
            shared: Arc::default(),
        }
    }

    /// Names the server: its breaker's entry in [`server_registry`] and the first part of its
    /// tools' keys, `{server}/{tool}` (so two servers' `search` keep apart, and a key stays the
    /// same whatever else is connected). A [`KEY_SEPARATOR`] in the name becomes `_`, a
    /// control character `?`, and the name is cut to 128 bytes: a key always splits at its
    /// first `/`.
    #[must_use]
    pub fn server(mut self, name: impl AsRef<str>) -> Self {
        self.server.name = server_key(name.as_ref());
        // Another server: its own schemas and subscriptions.
        self.shared = Arc::default();
        self
    }

    /// How long a call may take before it fails as `ServiceError::Timeout`. There is no "no
    /// timeout": a frozen server would hang the caller forever. A timed-out call is followed
    /// by a `ping`: see the [module docs](super) for where it counts.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How long a `ping` may take (the server's probe, and the question after a timeout).
    #[must_use]
    pub fn ping_timeout(mut self, timeout: Duration) -> Self {
        self.ping_timeout = timeout;
        self
    }

    /// How arguments are checked against the tool's `inputSchema` ([`SchemaCheck`]; lax by
    /// default).
    #[must_use]
    pub fn schema_check(mut self, check: SchemaCheck) -> Self {
        self.schema_check = check;
        self
    }

    /// How results count, for a server with conventions of its own: `classify(tool, result)`
    /// for every result (`isError` or not) instead of [`classify_result`](super::classify_result),
    /// which it may call for the cases it leaves to the built-in rules.
    ///
    /// ```
    /// # fn client(c: tool_health::mcp::ToolHealthClient) -> tool_health::mcp::ToolHealthClient {
    /// use tool_health::mcp::classify_result;
    /// use tool_health::ErrorClass;
    ///
    /// // This server answers "no such city" as an isError result: the model's mistake.
    /// c.classify_results(|tool, result| {
    ///     let text = result.content.first().and_then(|c| c.as_text()).map(|t| t.text.as_str());
    ///     match text {
    ///         Some(t) if t.starts_with("no such city") => ErrorClass::caller_error("tool_error"),
    ///         _ => classify_result(tool, result),
    ///     }
    /// })
    /// # }
    /// ```
    #[must_use]
    pub fn classify_results(
        mut self,
        classify: impl Fn(&str, &CallToolResult) -> ErrorClass + Send + Sync + 'static,
    ) -> Self {
        self.classify = Some(Arc::new(classify));
        self
    }

    /// How the client reaches the server, for the span's transport attributes ([`Transport`]).
    #[must_use]
    pub fn transport(mut self, transport: Transport) -> Self {
        self.transport = transport;
        self
    }

    /// The same client over another peer: a restarted server keeps its breakers (the server's
    /// and its tools'); the tool list (and so the schemas) is read again at the next call.
    #[must_use]
    pub fn with_peer(&self, peer: Peer<RoleClient>) -> Self {
        self.shared.schemas.invalidate();
        Self {
            peer,
            ..self.clone()
        }
    }

    /// The rmcp peer, for everything but `call_tool`, `list_tools` and `ping`.
    pub fn peer(&self) -> &Peer<RoleClient> {
        &self.peer
    }

    /// The registry the tools' calls are gated and recorded in.
    pub fn registry(&self) -> &Arc<ToolHealthRegistry> {
        &self.registry
    }

    /// The server's name: its entry in [`server_registry`], the first part of its tools' keys.
    pub fn server_name(&self) -> &str {
        &self.server.name
    }

    /// The server's breaker state now.
    pub fn server_state(&self) -> BreakerState {
        self.server.servers.breaker_state(&self.server.name)
    }

    /// The registry key of `tool`: `{server}/{tool}`.
    pub fn key<'a>(&self, tool: &'a str) -> Cow<'a, str> {
        Cow::Owned(format!("{}{KEY_SEPARATOR}{tool}", self.server.name))
    }

    /// Calls the tool (see the [module docs](super)).
    ///
    /// A refusal (the server's breaker, the tool's) and arguments the check refused are `Ok`
    /// results with `isError: true` ([`is_refusal`](super::is_refusal),
    /// [`is_invalid_arguments`](super::is_invalid_arguments)). So is a tool name whose registry
    /// key is longer than the registry's
    /// [`max_name_len`](crate::ToolHealthRegistry::max_name_len): the model's invalid argument
    /// ([`invalid_tool_name`](super::invalid_tool_name)), the server never called, nothing
    /// recorded, the name not copied. Errors are rmcp's, with `ServiceError::Timeout` when the
    /// timeout ran out.
    pub async fn call_tool(
        &self,
        params: CallToolRequestParams,
    ) -> Result<CallToolResult, ServiceError> {
        // Checked before the key, the span or any gate: a name no tool can have is the
        // model's invalid argument, never copied, never recorded, never sent.
        let key_len = self.server.name.len() + KEY_SEPARATOR.len_utf8() + params.name.len();
        if key_len > self.registry.max_name_len() {
            self.registry.reject_name(key_len);
            return Ok(invalid_tool_name(key_len, self.registry.max_name_len()));
        }
        let tool: String = params.name.to_string();
        let mut permit = match self.server_gate().await {
            Ok(permit) => permit,
            Err(retry_after) => return Ok(self.server_refused(&tool, retry_after)),
        };
        if self.schema_check != SchemaCheck::Off && self.shared.schemas.needs_list() {
            // The schemas come from the list: read it first (its answer counts for the
            // server), then ask the server's gate again for the call itself.
            self.read_schemas(permit).await?;
            permit = match self.server_gate().await {
                Ok(permit) => permit,
                Err(retry_after) => return Ok(self.server_refused(&tool, retry_after)),
            };
        }
        self.call_admitted(params, tool, permit).await
    }

    /// Reads the whole tool list for the argument check, through the server's admission
    /// `permit`. A server that cannot list (an error answer) leaves its tools unchecked; one
    /// that does not answer fails the call.
    async fn read_schemas(&self, permit: crate::call::Permit) -> Result<(), ServiceError> {
        let started = self.registry.now();
        let mut tools = Vec::new();
        let mut cursor = None;
        let mut outcome = ServerOutcome::Answered;
        // A server that keeps answering cursors is cut off after this many pages.
        for _ in 0..100 {
            let params = cursor.map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
            let listed = self.send(list_request(params), self.timeout, None).await;
            outcome = server_outcome(&listed);
            match listed {
                Ok(ServerResult::ListToolsResult(page)) => {
                    tools.extend(page.tools);
                    cursor = page.next_cursor;
                    if cursor.is_none() {
                        break;
                    }
                }
                Ok(_) => break,
                Err(e) if outcome == ServerOutcome::Failed => {
                    self.server.record(
                        permit,
                        outcome,
                        self.registry.now().saturating_sub(started),
                    );
                    return Err(e);
                }
                Err(_) => break,
            }
        }
        self.server
            .record(permit, outcome, self.registry.now().saturating_sub(started));
        self.shared.schemas.update(&tools, true);
        self.declare_listed(&tools);
        Ok(())
    }

    /// Declares the registry keys of the tools the server listed (issue 25): a declared tool
    /// always keeps its own breaker, whatever names the model invents. Names too long for the
    /// registry are left out; a list longer than the registry's cap is declared as far as it
    /// fits nothing (the call is all or nothing) and said once, with the fix.
    fn declare_listed(&self, tools: &[rmcp::model::Tool]) {
        let keys: Vec<String> = tools
            .iter()
            .map(|t| self.key(&t.name).into_owned())
            .filter(|k| self.registry.validate_name(k).is_ok())
            .collect();
        if let Err(e) = self.registry.declare_tools(&keys) {
            if !self
                .shared
                .declare_warned
                .swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                tracing::warn!(
                    target: crate::observe::LOG_TARGET,
                    server = %self.server.name.escape_debug(),
                    "MCP server `{}` lists {} tools, more than the registry can declare ({e}): \
                     its tools are tracked as they are called, and past the cap share the \
                     overflow breaker; raise RegistryBuilder::max_tools (said once)",
                    self.server.name.escape_debug(),
                    keys.len()
                );
            }
        }
    }

    /// The argument check, the tool's gate, the call and the records, once the server's gate
    /// admitted the call with `permit`.
    async fn call_admitted(
        &self,
        mut params: CallToolRequestParams,
        tool: String,
        permit: crate::call::Permit,
    ) -> Result<CallToolResult, ServiceError> {
        if let Some(problems) =
            self.shared
                .schemas
                .check(self.schema_check, &tool, &mut params.arguments)
        {
            // Nothing sent, nothing recorded; the server's admission needs no report.
            return Ok(invalid_arguments(&tool, &problems));
        }
        let key = self.key(&tool).into_owned();
        let span = span::call_span(&tool, &key, &self.server.name);
        span::describe(&span, &self.transport, &self.peer);
        let answer = self.answer(params, tool.clone(), permit);
        let result = self
            .registry
            .call(&key)
            .span(span)
            .classify(|answer: &Answer| answer.class().clone())
            .run(answer)
            .await;
        match result {
            Ok(result) => Ok(result),
            Err(CallError::Refused { retry_after, .. }) => Ok(refusal_of(
                &format!(
                    "tool `{}` of MCP server `{}`",
                    shown(&tool),
                    self.server.name
                ),
                retry_after,
            )),
            // The call helper applies no timeout here (the request carries it).
            Err(CallError::TimedOut { after, .. }) => Err(ServiceError::Timeout { timeout: after }),
            Err(CallError::Tool(Answer::Result(result, _))) => Ok(*result),
            Err(CallError::Tool(Answer::Service(error, _))) => Err(*error),
            Err(CallError::InvalidName(e)) => Ok(invalid_tool_name(e.len(), e.max())),
        }
    }

    /// The call itself, in its span: sends the request, asks a `ping` after a timeout,
    /// classifies the answer (on the span too) and records what it says about the server.
    async fn answer(
        &self,
        params: CallToolRequestParams,
        tool: String,
        permit: crate::call::Permit,
    ) -> Result<CallToolResult, Answer> {
        let span = Span::current();
        let started = self.registry.now();
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let sent = self.send(request, self.timeout, Some(&span)).await;
        let (answer, server) = match sent {
            Ok(ServerResult::CallToolResult(result)) => (
                self.classified(&tool, result, &span),
                ServerOutcome::Answered,
            ),
            // A reply without content (rmcp reads an empty result so).
            Ok(ServerResult::EmptyResult(_)) => (
                self.classified(&tool, CallToolResult::default(), &span),
                ServerOutcome::Answered,
            ),
            Ok(_) => (
                Err(Answer::Service(
                    Box::new(ServiceError::UnexpectedResponse),
                    ErrorClass::failure("unexpected_response"),
                )),
                ServerOutcome::Answered,
            ),
            Err(ServiceError::McpError(e)) => {
                span.record(
                    semconv::RPC_RESPONSE_STATUS_CODE,
                    tracing::field::display(e.code.0),
                );
                if let Some(mistake) = classify::error_mistake(&tool, &e) {
                    span.record("tool_health.mcp.answer", mistake.as_str());
                }
                let class = classify::classify_error(&tool, &e);
                (
                    Err(Answer::Service(Box::new(ServiceError::McpError(e)), class)),
                    ServerOutcome::Answered,
                )
            }
            Err(timeout @ ServiceError::Timeout { .. }) => {
                // Does the server answer anything at all?
                if self.ping_once().await.is_ok() {
                    (
                        Err(Answer::Service(
                            Box::new(timeout),
                            ErrorClass::failure("timeout"),
                        )),
                        ServerOutcome::Answered,
                    )
                } else {
                    (
                        Err(Answer::Service(
                            Box::new(timeout),
                            ErrorClass::unrecorded("timeout"),
                        )),
                        ServerOutcome::Failed,
                    )
                }
            }
            Err(ServiceError::Cancelled { reason }) => (
                Err(Answer::Service(
                    Box::new(ServiceError::Cancelled { reason }),
                    ErrorClass::cancelled(),
                )),
                ServerOutcome::Unknown,
            ),
            Err(e) => {
                let error_type = error_type(&e);
                let outcome = if is_transport_failure(&e) {
                    ServerOutcome::Failed
                } else {
                    ServerOutcome::Answered
                };
                let class = if outcome == ServerOutcome::Failed {
                    // The server's problem, not the tool's.
                    ErrorClass::unrecorded(error_type)
                } else {
                    ErrorClass::failure(error_type)
                };
                (Err(Answer::Service(Box::new(e), class)), outcome)
            }
        };
        self.server
            .record(permit, server, self.registry.now().saturating_sub(started));
        answer
    }

    /// `result`, classified (the user's hook, else the built-in rules) and annotated.
    fn classified(
        &self,
        tool: &str,
        result: CallToolResult,
        span: &Span,
    ) -> Result<CallToolResult, Answer> {
        if let Some(mistake) = classify::result_mistake(tool, &result) {
            span.record("tool_health.mcp.answer", mistake.as_str());
        }
        let class = match &self.classify {
            Some(classify) => classify(tool, &result),
            None => classify::classify_result(tool, &result),
        };
        if class.is_recorded() && class.outcome() == crate::call::CallOutcome::Success {
            Ok(result)
        } else {
            Err(Answer::Result(Box::new(result), class))
        }
    }

    /// Lists the server's tools (one page: `params` carries the cursor), leaving out those
    /// whose breaker — or the server's — refuses now, and naming them in
    /// [`ToolList::hidden`]. Reading the list refreshes the argument check's schemas. While
    /// the server's breaker refuses, nothing is sent: the tools last listed are all hidden.
    pub async fn list_tools(
        &self,
        params: Option<PaginatedRequestParams>,
    ) -> Result<ToolList, ServiceError> {
        let first_page = params.as_ref().is_none_or(|p| p.cursor.is_none());
        let permit = match self.server_gate().await {
            Ok(permit) => permit,
            Err(retry_after) => {
                let until = self.registry.now().saturating_add(retry_after);
                let hidden = self
                    .shared
                    .schemas
                    .names()
                    .into_iter()
                    .map(|name| HiddenTool {
                        key: self.key(&name).into_owned(),
                        name,
                        by: HiddenBy::Server,
                        retry_after,
                        until,
                    })
                    .collect();
                return Ok(ToolList {
                    result: ListToolsResult::with_all_items(Vec::new()),
                    hidden,
                });
            }
        };
        let started = self.registry.now();
        let listed = self.send(list_request(params), self.timeout, None).await;
        self.server.record(
            permit,
            server_outcome(&listed),
            self.registry.now().saturating_sub(started),
        );
        let mut result = match listed? {
            ServerResult::ListToolsResult(result) => result,
            _ => return Err(ServiceError::UnexpectedResponse),
        };
        self.shared.schemas.update(&result.tools, first_page);
        self.declare_listed(&result.tools);
        let now = self.registry.now();
        let mut hidden = Vec::new();
        result.tools.retain(|tool| {
            let key = self.key(&tool.name).into_owned();
            match self.registry.snapshot(&key).and_then(|s| s.retry_after) {
                None => true,
                Some(retry_after) => {
                    hidden.push(HiddenTool {
                        name: tool.name.to_string(),
                        key,
                        by: HiddenBy::Tool,
                        retry_after,
                        until: now.saturating_add(retry_after),
                    });
                    false
                }
            }
        });
        Ok(ToolList { result, hidden })
    }

    /// Every page of [`list_tools`](Self::list_tools), as one list.
    pub async fn list_all_tools(&self) -> Result<ToolList, ServiceError> {
        let mut all = self.list_tools(None).await?;
        let mut cursor = all.result.next_cursor.take();
        // A server that keeps answering cursors is cut off after this many pages.
        for _ in 0..1_000 {
            let Some(next) = cursor else {
                break;
            };
            let page = self
                .list_tools(Some(
                    PaginatedRequestParams::default().with_cursor(Some(next)),
                ))
                .await?;
            all.result.tools.extend(page.result.tools);
            all.hidden.extend(page.hidden);
            cursor = page.result.next_cursor;
        }
        Ok(all)
    }

    /// Pings the server through its breaker: refused while it is open (`Err` with
    /// `ServiceError::Cancelled`), and its answer (or silence) counts for the server.
    pub async fn ping(&self) -> Result<(), ServiceError> {
        match self.server_gate().await {
            Ok(permit) => {
                let started = self.registry.now();
                let r = self.ping_once().await;
                let outcome = if r.is_ok() {
                    ServerOutcome::Answered
                } else {
                    ServerOutcome::Failed
                };
                self.server
                    .record(permit, outcome, self.registry.now().saturating_sub(started));
                r
            }
            Err(retry_after) => Err(ServiceError::Cancelled {
                reason: Some(format!(
                    "{REFUSAL_MESSAGE} (MCP server `{}`; retry in {:.1} s)",
                    self.server.name,
                    retry_after.as_secs_f64()
                )),
            }),
        }
    }

    /// Tells the client the server's tool list changed (the server sent
    /// `notifications/tools/list_changed`; call this from your `ClientHandler`'s
    /// `on_tool_list_changed`): the next call reads the list again, and subscribers hear
    /// [`ToolsChanged::ServerList`].
    pub fn server_list_changed(&self) {
        self.shared.schemas.invalidate();
        let mut subscribers = self
            .shared
            .subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        subscribers.retain(|tx| tx.send(Event::ServerList).is_ok());
    }

    /// Calls `on_change` whenever what [`list_tools`](Self::list_tools) lists changes: when a
    /// breaker of this server's tools (or the server's) opens, when it closes, and when its
    /// cooldown ends — a timer on the registry's clock, with no call needed; the next call is
    /// then the probe. `on_change` runs on a task of the current tokio runtime (`Err` outside
    /// one), never on a caller's thread. Dropping the subscription ends it.
    ///
    /// A hidden tool nobody is offered is never called: without the timer it would never be
    /// probed and never come back. This is what a host turns into MCP's
    /// `notifications/tools/list_changed`.
    pub fn on_tools_changed(
        &self,
        on_change: impl Fn(&ToolsChanged) + Send + Sync + 'static,
    ) -> Result<ToolsSubscription, tokio::runtime::TryCurrentError> {
        tools::subscribe(
            tools::Watch {
                tools: Arc::clone(&self.registry),
                servers: Arc::clone(&self.server.servers),
                server: Arc::clone(&self.server.name),
                on_change: Arc::new(on_change),
            },
            &self.shared.subscribers,
        )
    }

    /// The server's gate: its permit, or how long it refuses. After a cooldown the probe is a
    /// `ping`: answered, the server closes and the call is admitted; not, it is refused.
    async fn server_gate(&self) -> Result<crate::call::Permit, Duration> {
        match self.server.gate() {
            ServerGate::Allowed(permit) => Ok(permit),
            ServerGate::Refused(retry_after) => Err(retry_after),
            ServerGate::Probe(permit) => {
                let guard = ProbeGuard {
                    server: &self.server,
                    permit: Some(permit),
                };
                let started = self.registry.now();
                let answered = self.ping_once().await.is_ok();
                let elapsed = self.registry.now().saturating_sub(started);
                if answered {
                    guard.settle(ServerOutcome::Answered, elapsed);
                    match self.server.gate() {
                        ServerGate::Allowed(permit) | ServerGate::Probe(permit) => Ok(permit),
                        ServerGate::Refused(retry_after) => Err(retry_after),
                    }
                } else {
                    guard.settle(ServerOutcome::Failed, elapsed);
                    Err(self.server.retry_after())
                }
            }
        }
    }

    /// One `ping` in its span, with the ping timeout; counts for nothing by itself.
    async fn ping_once(&self) -> Result<(), ServiceError> {
        let span = span::ping_span(&self.server.name);
        span::describe(&span, &self.transport, &self.peer);
        let request = ClientRequest::PingRequest(PingRequest::default());
        let result = self
            .send(request, self.ping_timeout, Some(&span))
            .instrument(span.clone())
            .await;
        match result {
            Ok(ServerResult::EmptyResult(_)) => Ok(()),
            Ok(_) => {
                span.record(semconv::ERROR_TYPE, "unexpected_response");
                span.record(semconv::OTEL_STATUS_CODE, "error");
                Err(ServiceError::UnexpectedResponse)
            }
            Err(e) => {
                span.record(semconv::ERROR_TYPE, &*error_type(&e));
                span.record(semconv::OTEL_STATUS_CODE, "error");
                if let ServiceError::McpError(e) = &e {
                    span.record(
                        semconv::RPC_RESPONSE_STATUS_CODE,
                        tracing::field::display(e.code.0),
                    );
                }
                Err(e)
            }
        }
    }

    /// Sends `request` with `timeout` (rmcp cancels it at the server when it runs out), writes
    /// its id on `span`, and tells the server when the caller drops it before the answer.
    async fn send(
        &self,
        request: ClientRequest,
        timeout: Duration,
        span: Option<&Span>,
    ) -> Result<ServerResult, ServiceError> {
        let handle = self
            .peer
            .send_request_with_option(request, PeerRequestOptions::with_timeout(timeout))
            .await?;
        if let Some(span) = span {
            span.record("jsonrpc.request.id", tracing::field::display(&handle.id));
        }
        let mut abandoned = Abandoned {
            peer: &self.peer,
            id: Some(handle.id.clone()),
        };
        let result = handle.await_response().await;
        abandoned.id = None;
        result
    }

    /// A refusal by the server's breaker (recorded nowhere else; a span says so).
    fn server_refused(&self, tool: &str, retry_after: Duration) -> CallToolResult {
        let text = format!(
            "MCP server `{}` is not answering, so every tool of it is refused",
            self.server.name
        );
        let result = refusal_of(&text, retry_after);
        let key = self.key(tool);
        let span = span::call_span(tool, &key, &self.server.name);
        span::describe(&span, &self.transport, &self.peer);
        // A refused span: a layer records nothing for it (the tool was not called).
        let _entered = span.enter();
        span.record(semconv::GATE_DECISION, "refused");
        span.record(semconv::ERROR_TYPE, semconv::REFUSAL_ERROR_TYPE);
        span.record(semconv::OTEL_STATUS_CODE, "error");
        if let Some(text) = result.content.first().and_then(|c| c.as_text()) {
            span.record("otel.status_description", text.text.as_str());
        }
        result
    }
}

/// Sends `notifications/cancelled` for a request dropped before its answer (rmcp's own guard
/// does so for the requests it sends itself; this client sends its own to know their ids).
struct Abandoned<'a> {
    peer: &'a Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for Abandoned<'_> {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let peer = self.peer.clone();
        runtime.spawn(async move {
            let _ = peer
                .notify_cancelled(CancelledNotificationParam::new(
                    Some(id),
                    Some("request abandoned by the caller".to_owned()),
                ))
                .await;
        });
    }
}

/// What came back, classified, for the call helper.
enum Answer {
    /// A result that is not a plain success (boxed: a result is large).
    Result(Box<CallToolResult>, ErrorClass),
    /// rmcp's error (boxed too).
    Service(Box<ServiceError>, ErrorClass),
}

impl Answer {
    fn class(&self) -> &ErrorClass {
        match self {
            Self::Result(_, class) | Self::Service(_, class) => class,
        }
    }
}

fn list_request(params: Option<PaginatedRequestParams>) -> ClientRequest {
    ClientRequest::ListToolsRequest(match params {
        Some(params) => ListToolsRequest::with_param(params),
        None => ListToolsRequest::default(),
    })
}

/// What an answer to a request says about the server.
fn server_outcome<T>(r: &Result<T, ServiceError>) -> ServerOutcome {
    match r {
        Ok(_) => ServerOutcome::Answered,
        Err(ServiceError::Cancelled { .. }) => ServerOutcome::Unknown,
        Err(e) if is_transport_failure(e) || matches!(e, ServiceError::Timeout { .. }) => {
            ServerOutcome::Failed
        }
        Err(_) => ServerOutcome::Answered,
    }
}

/// The connection is gone or could not carry the request: the server's failure.
fn is_transport_failure(e: &ServiceError) -> bool {
    matches!(
        e,
        ServiceError::TransportClosed | ServiceError::TransportSend(_)
    )
}

/// The soft result of arguments the check refused.
fn invalid_arguments(tool: &str, problems: &[String]) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!(
        "{INVALID_ARGUMENTS_MESSAGE} for tool `{}` (checked against its inputSchema; nothing \
         was sent to the server): {}",
        shown(tool),
        problems.join("; ")
    ))])
}

/// The `error.type` of a failed call: the JSON-RPC code, or a low-cardinality name.
fn error_type(error: &ServiceError) -> Cow<'static, str> {
    match error {
        ServiceError::McpError(e) => Cow::Owned(e.code.0.to_string()),
        ServiceError::Timeout { .. } => Cow::Borrowed("timeout"),
        ServiceError::TransportClosed => Cow::Borrowed("transport_closed"),
        ServiceError::TransportSend(_) => Cow::Borrowed("transport_send"),
        ServiceError::UnexpectedResponse => Cow::Borrowed("unexpected_response"),
        ServiceError::Cancelled { .. } => Cow::Borrowed(semconv::CANCELLED),
        _ => Cow::Borrowed(semconv::OTHER),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_never_split_a_key() {
        assert_eq!(&*server_key("github"), "github");
        assert_eq!(&*server_key("a/b"), "a_b");
        assert_eq!(&*server_key("x\ny"), "x?y");
        assert_eq!(&*server_key(""), "mcp");
        let long = "é".repeat(100);
        let k = server_key(&long);
        assert!(k.len() <= MAX_SERVER_NAME && k.chars().all(|c| c == 'é'));
    }
}
