//! MCP servers behind the breaker (feature `mcp`): [`ToolHealthClient`] wraps an
//! [rmcp](https://docs.rs/rmcp/3.11) client peer so that every `call_tool` is gated, timed out,
//! traced as an MCP client span, and recorded.
//!
//! MCP servers are exactly the tools that go down: a process that exits, a connection that
//! closes, a server that hangs. rmcp 3.11 puts no span around a call and has no request timeout
//! by default (a frozen server hangs the caller forever), and most MCP tool failures are
//! *successful* JSON-RPC answers carrying `isError: true`. The client:
//!
//! 1. **gates** each call through the registry, keyed by the tool name (or `{server}/{tool}`
//!    with [`server`](ToolHealthClient::server), so two servers' `search` keep apart). A
//!    refused call never reaches the server: the model reads a soft result, `isError: true`
//!    with the single text [`REFUSAL_MESSAGE`] ([`is_refusal`] tells it apart);
//! 2. opens the **client span of the OpenTelemetry MCP conventions**: name `tools/call`
//!    (`otel.name` = `tools/call {tool}`, `otel.kind` = `client`), `mcp.method.name` =
//!    `tools/call`, `gen_ai.operation.name` = `execute_tool`, `gen_ai.tool.name` = the registry
//!    key, and on failure `error.type` — the JSON-RPC error code, `tool_error` when the result
//!    has `isError: true`, `timeout`, `transport_closed`, `transport_send`,
//!    `unexpected_response`, `cancelled` or `_OTHER` — and `rpc.response.status_code` (the
//!    JSON-RPC code);
//! 3. applies a **timeout** ([`DEFAULT_TIMEOUT`] unless set): a hung call ends as
//!    `ServiceError::Timeout` and rmcp tells the server the request was abandoned;
//! 4. **records** the outcome: a dead server (process exited, connection closed, timeout), a
//!    JSON-RPC error and an `isError` result are failures of the tool; JSON-RPC `-32602`
//!    (invalid params; rmcp also answers it for an unknown tool) and `-32601` are the caller's
//!    (ignored, never trip); a call dropped before it settled, or `ServiceError::Cancelled`, is
//!    a cancellation (`cancelled_count`, never fed to the breaker) and gives a probe back.
//!
//! Under the hood each call is one [`ToolHealthRegistry::call`] (the call helper) in that span:
//! with a [`ToolHealthLayer`](crate::ToolHealthLayer) for the same registry in the current
//! subscriber, the layer records the span (its MCP convention recognises it; the helper hands
//! over the exact outcome) and the gate decision is bound to it; without one, or when a filter
//! disabled the span, the helper records through the registry itself. Either way each call is
//! recorded once.
//!
//! ```no_run
//! # async fn run(running: rmcp::service::RunningService<rmcp::RoleClient, ()>) -> Result<(), rmcp::ServiceError> {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use rmcp::model::CallToolRequestParams;
//! use tool_health::mcp::{is_refusal, ToolHealthClient};
//! use tool_health::ToolHealthRegistry;
//!
//! let registry = Arc::new(ToolHealthRegistry::new());
//! let github = ToolHealthClient::new(running.peer().clone(), registry.clone())
//!     .server("github")
//!     .timeout(Duration::from_secs(20));
//! let result = github.call_tool(CallToolRequestParams::new("search_issues")).await?;
//! if is_refusal(&result) {
//!     // the breaker of `github/search_issues` is open: the model reads the refusal
//! }
//! # Ok(()) }
//! ```
//!
//! A restarted server is a new peer: [`with_peer`](ToolHealthClient::with_peer) keeps the
//! registry and settings, so the breakers opened by the dead process stay open until their
//! cooldown, then let exactly one probe through to the new one.
//!
//! Known blind spot: the MCP specification asks servers to answer invalid *arguments* as a tool
//! error (`isError: true`) so that the model can correct itself, and rmcp 3.11 servers do. Such
//! a call cannot be told apart from a failing tool and counts as a failure: a model that keeps
//! sending bad arguments to one tool can trip it.
//!
//! Needs Rust 1.88 (rmcp's minimum), above the crate's own `rust-version`.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock};
use rmcp::service::{Peer, RoleClient, ServiceError};
use tracing::field::Empty;
use tracing::Span;

use crate::call::REFUSAL_MESSAGE;
use crate::call_helper::{CallError, ErrorClass};
use crate::layer::{DefaultClassifier, CANCELLED_ERROR_TYPE};
use crate::registry::ToolHealthRegistry;
use crate::semconv;

/// How long a call may take unless [`ToolHealthClient::timeout`] says otherwise: 30 s, the
/// breaker's default probe lease (a probe that has not answered by then has lost its lease
/// anyway).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The `error.type` of a call answered with `isError: true` (the MCP conventions' value).
pub const TOOL_ERROR: &str = "tool_error";

/// An rmcp client peer whose `call_tool` is gated, timed out, traced and recorded (see the
/// [module docs](self)).
#[derive(Clone)]
pub struct ToolHealthClient {
    peer: Peer<RoleClient>,
    registry: Arc<ToolHealthRegistry>,
    server: Option<Arc<str>>,
    timeout: Duration,
}

impl fmt::Debug for ToolHealthClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolHealthClient")
            .field("server", &self.server)
            .field("timeout", &self.timeout)
            .field("registry", &self.registry)
            .finish_non_exhaustive()
    }
}

impl ToolHealthClient {
    /// Calls through `peer` (from `RunningService::peer`), keyed in `registry` by tool name,
    /// with [`DEFAULT_TIMEOUT`].
    pub fn new(peer: Peer<RoleClient>, registry: Arc<ToolHealthRegistry>) -> Self {
        Self {
            peer,
            registry,
            server: None,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// Qualifies the registry key (and the span's `gen_ai.tool.name`) with the server's name:
    /// `{server}/{tool}`.
    #[must_use]
    pub fn server(mut self, name: impl Into<Arc<str>>) -> Self {
        self.server = Some(name.into());
        self
    }

    /// How long a call may take before it fails as `ServiceError::Timeout` (a failure of the
    /// tool). There is no "no timeout": a frozen server would hang the caller forever.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The same client over another peer: a restarted server keeps its breakers.
    #[must_use]
    pub fn with_peer(&self, peer: Peer<RoleClient>) -> Self {
        Self {
            peer,
            ..self.clone()
        }
    }

    /// The rmcp peer, for everything but `call_tool`.
    pub fn peer(&self) -> &Peer<RoleClient> {
        &self.peer
    }

    /// The registry calls are gated and recorded in.
    pub fn registry(&self) -> &Arc<ToolHealthRegistry> {
        &self.registry
    }

    /// The registry key of `tool`: the tool name, or `{server}/{tool}`.
    pub fn key<'a>(&self, tool: &'a str) -> Cow<'a, str> {
        match &self.server {
            Some(server) => Cow::Owned(format!("{server}/{tool}")),
            None => Cow::Borrowed(tool),
        }
    }

    /// Calls the tool through the breaker (see the [module docs](self)).
    ///
    /// A refusal is `Ok` with [`refusal`]'s result. Errors are rmcp's, with
    /// `ServiceError::Timeout` when the timeout ran out. A tool name whose registry key is
    /// longer than the registry's [`max_name_len`](ToolHealthRegistry::max_name_len) is the
    /// model's invalid argument: `Ok` with [`invalid_tool_name`]'s result, and the server is
    /// never called, nothing is recorded, and the name is not copied.
    pub async fn call_tool(
        &self,
        params: CallToolRequestParams,
    ) -> Result<CallToolResult, ServiceError> {
        let tool: &str = &params.name;
        let key_len = self.server.as_ref().map_or(0, |s| s.len() + 1) + tool.len();
        if key_len > self.registry.max_name_len() {
            // Checked before the key, the span or the gate: a name no tool has is not copied.
            self.registry.reject_name(key_len);
            return Ok(invalid_tool_name(key_len, self.registry.max_name_len()));
        }
        let key = self.key(tool).into_owned();
        let span = tracing::info_span!(
            "tools/call",
            otel.name = %format_args!("tools/call {tool}"),
            otel.kind = "client",
            mcp.method.name = "tools/call",
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = %key,
            error.type = Empty,
            rpc.response.status_code = Empty,
            otel.status_code = Empty,
            otel.status_description = Empty,
            tool_health.gate.decision = Empty,
        );
        // The call helper gates inside the span, applies the timeout, records exactly once
        // (through a layer that reads this span with its MCP convention, or itself) and treats
        // a dropped call as cancelled.
        let peer = &self.peer;
        let answer = async {
            match peer.call_tool(params).await {
                Ok(result) if result.is_error == Some(true) => Err(Answer::IsError(result)),
                Ok(result) => Ok(result),
                Err(error) => {
                    if let ServiceError::McpError(e) = &error {
                        Span::current().record(
                            "rpc.response.status_code",
                            tracing::field::display(e.code.0),
                        );
                    }
                    Err(Answer::Service(error))
                }
            }
        };
        let caller_errors = DefaultClassifier::new();
        let result = self
            .registry
            .call(&key)
            .span(span)
            .timeout(self.timeout)
            .classify(move |answer: &Answer| classify(&caller_errors, answer))
            .run(answer)
            .await;
        match result {
            Ok(result) => Ok(result),
            Err(CallError::Refused { .. }) => Ok(refusal()),
            Err(CallError::TimedOut { after, .. }) => Err(ServiceError::Timeout { timeout: after }),
            Err(CallError::Tool(Answer::IsError(result))) => Ok(result),
            Err(CallError::Tool(Answer::Service(error))) => Err(error),
            Err(CallError::InvalidName(e)) => Ok(invalid_tool_name(e.len(), e.max())),
        }
    }
}

/// What came back, for the call helper: an error answer, or rmcp's error.
enum Answer {
    /// A result with `isError: true`.
    IsError(CallToolResult),
    Service(ServiceError),
}

/// How an answer counts: `tool_error` and every transport error are the tool's; the caller
/// errors of the default classifier (`-32602`, `-32601`) are the model's; `cancelled` is no
/// verdict.
fn classify(caller_errors: &DefaultClassifier, answer: &Answer) -> ErrorClass {
    match answer {
        Answer::IsError(_) => ErrorClass::failure(TOOL_ERROR),
        Answer::Service(e) => {
            let error_type = error_type(e);
            if error_type == CANCELLED_ERROR_TYPE {
                ErrorClass::cancelled()
            } else if caller_errors.is_caller_error(&error_type) {
                ErrorClass::caller_error(error_type)
            } else {
                ErrorClass::failure(error_type)
            }
        }
    }
}

/// The soft result a refused call answers with: `isError: true` and the single text
/// [`REFUSAL_MESSAGE`], which the model reads and works around.
pub fn refusal() -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(REFUSAL_MESSAGE)])
}

/// The soft result of a call whose tool name is longer than the registry takes (`len` bytes,
/// its key with the server's prefix; at most `max`): `isError: true` with the invalid-argument
/// text of [`NameError`](crate::NameError), never [`REFUSAL_MESSAGE`] — the model is told to
/// correct the name, not to wait.
pub fn invalid_tool_name(len: usize, max: usize) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!(
        "invalid tool name: {len} bytes, longer than the {max} allowed"
    ))])
}

/// Whether `result` is [`refusal`]'s: the breaker refused the call, the server never saw it.
pub fn is_refusal(result: &CallToolResult) -> bool {
    result.is_error == Some(true)
        && result.content.len() == 1
        && result.content[0]
            .as_text()
            .is_some_and(|t| t.text == REFUSAL_MESSAGE)
}

/// The `error.type` of a failed call: the JSON-RPC code, or a low-cardinality name.
fn error_type(error: &ServiceError) -> Cow<'static, str> {
    match error {
        ServiceError::McpError(e) => Cow::Owned(e.code.0.to_string()),
        ServiceError::Timeout { .. } => Cow::Borrowed("timeout"),
        ServiceError::TransportClosed => Cow::Borrowed("transport_closed"),
        ServiceError::TransportSend(_) => Cow::Borrowed("transport_send"),
        ServiceError::UnexpectedResponse => Cow::Borrowed("unexpected_response"),
        ServiceError::Cancelled { .. } => Cow::Borrowed(CANCELLED_ERROR_TYPE),
        _ => Cow::Borrowed(semconv::OTHER),
    }
}
