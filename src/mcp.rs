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
//!    JSON-RPC code), plus `gen_ai.tool.call.outcome` = `success` / `error`;
//! 3. applies a **timeout** ([`DEFAULT_TIMEOUT`] unless set): a hung call ends as
//!    `ServiceError::Timeout` and rmcp tells the server the request was abandoned;
//! 4. **records** the outcome: a dead server (process exited, connection closed, timeout), a
//!    JSON-RPC error and an `isError` result are failures of the tool; JSON-RPC `-32602`
//!    (invalid params; rmcp also answers it for an unknown tool) and `-32601` are the caller's
//!    (ignored, never trip); a call dropped before it settled, or `ServiceError::Cancelled`, is
//!    a cancellation (`cancelled_count`, never fed to the breaker) and gives a probe back.
//!
//! With a [`ToolHealthLayer`](crate::ToolHealthLayer) for the same registry in the current
//! subscriber, the layer records the span (its MCP convention reads exactly these fields) and
//! the gate decision is bound to it, so the span shows `tool_health.gate.decision`; without
//! one, the client records through the registry itself. Either way each call is recorded once.
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
use tracing::{Instrument, Span};

use crate::call::{CallOutcome, CallReport, GateDecision, Permit, REFUSAL_MESSAGE};
use crate::layer::{self, DefaultClassifier, OutcomeClassifier, SpanFacts};
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
    /// `ServiceError::Timeout` when the timeout ran out.
    pub async fn call_tool(
        &self,
        params: CallToolRequestParams,
    ) -> Result<CallToolResult, ServiceError> {
        let tool: &str = &params.name;
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
            gen_ai.tool.call.outcome = Empty,
        );
        // Recorded by a layer for this registry (the gate, called inside the span, binds to
        // it), or by this call itself with a detached gate: never bound to another tool's span
        // around it, even when a filter disabled this one.
        let tracked = layer::tracks(&self.registry, &span);
        let decision = {
            let _entered = span.enter();
            if tracked {
                self.registry.check(&key)
            } else {
                self.registry.check_detached(&key)
            }
        };
        let permit = match decision {
            GateDecision::Allowed(permit) | GateDecision::Probe(permit) => permit,
            GateDecision::Refused { .. } => return Ok(refusal()),
        };
        let mut call = Call {
            span: span.clone(),
            registry: &self.registry,
            key: &key,
            permit,
            tracked,
            start: self.registry.now(),
            settled: false,
        };
        let answer = tokio::time::timeout(self.timeout, self.peer.call_tool(params))
            .instrument(span)
            .await;
        let result = match answer {
            Ok(result) => result,
            Err(_) => Err(ServiceError::Timeout {
                timeout: self.timeout,
            }),
        };
        call.settle(&result);
        result
    }
}

/// The soft result a refused call answers with: `isError: true` and the single text
/// [`REFUSAL_MESSAGE`], which the model reads and works around.
pub fn refusal() -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(REFUSAL_MESSAGE)])
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
        ServiceError::Cancelled { .. } => Cow::Borrowed(layer::CANCELLED_ERROR_TYPE),
        _ => Cow::Borrowed(semconv::OTHER),
    }
}

/// One admitted call: settled with its result, or given up when dropped before it settled.
struct Call<'a> {
    span: Span,
    registry: &'a Arc<ToolHealthRegistry>,
    key: &'a str,
    permit: Permit,
    /// A layer records the span; otherwise this call records itself.
    tracked: bool,
    start: Duration,
    settled: bool,
}

impl Call<'_> {
    fn settle(&mut self, result: &Result<CallToolResult, ServiceError>) {
        self.settled = true;
        let (error_type, status_code) = match result {
            Ok(r) if r.is_error == Some(true) => (Some(Cow::Borrowed(TOOL_ERROR)), None),
            Ok(_) => (None, None),
            Err(e @ ServiceError::McpError(d)) => (Some(error_type(e)), Some(d.code.0)),
            Err(e) => (Some(error_type(e)), None),
        };
        self.finish(error_type.as_deref(), status_code);
    }

    fn finish(&self, error_type: Option<&str>, status_code: Option<i32>) {
        if let Some(code) = status_code {
            self.span
                .record("rpc.response.status_code", tracing::field::display(code));
        }
        if let Some(t) = error_type {
            self.span.record("error.type", t);
        }
        let outcome = if error_type.is_some() {
            "error"
        } else {
            "success"
        };
        self.span.record("gen_ai.tool.call.outcome", outcome);
        if self.tracked {
            return; // the layer records the span when it closes
        }
        let duration = self.registry.now().saturating_sub(self.start);
        let mut facts = SpanFacts::new(self.key);
        facts.error_type = error_type;
        facts.call_outcome = Some(outcome);
        facts.completed = true;
        match DefaultClassifier::new().classify(&facts) {
            Some(outcome) => {
                // A cancelled call makes no verdict: counted without the permit, and a probe
                // given back exactly (as the layer does).
                let cancelled = outcome == CallOutcome::Cancelled;
                let mut report = CallReport::new(outcome, duration);
                if !cancelled {
                    report = report.permit(self.permit);
                }
                report.error_type = error_type;
                let _ = self.registry.record_report(self.key, &report);
                if cancelled && self.permit.is_probe() {
                    let _ = self.registry.release(self.key, self.permit);
                }
            }
            None => {
                if self.permit.is_probe() {
                    let _ = self.registry.release(self.key, self.permit);
                }
            }
        }
    }
}

impl Drop for Call<'_> {
    fn drop(&mut self) {
        // Dropped before the answer (the caller gave up): no verdict on the tool.
        if !self.settled {
            self.finish(Some(layer::CANCELLED_ERROR_TYPE), None);
        }
    }
}
