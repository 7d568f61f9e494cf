//! One call, from the argument check to the record: the tool's gate, the span, the request,
//! the classification of the answer, and the refusals the model reads.

use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, ServerResult,
};
use rmcp::service::ServiceError;
use tracing::Span;

use crate::call_helper::{CallError, ErrorClass};
use crate::semconv;

use super::classify;
use super::client::ToolHealthClient;
use super::requests::{error_type, is_transport_failure};
use super::schema::SchemaCheck;
use super::server::ServerOutcome;
use super::span;
use super::texts::{self, Refused, Why};
use super::{invalid_tool_name, KEY_SEPARATOR};

impl ToolHealthClient {
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
        mut params: CallToolRequestParams,
    ) -> Result<CallToolResult, ServiceError> {
        // Checked before the key, the span or any gate: a name no tool can have is the
        // model's invalid argument, never copied, never recorded, never sent.
        let key_len = self.server.name.len() + KEY_SEPARATOR.len_utf8() + params.name.len();
        if key_len > self.registry.max_name_len() {
            self.registry.reject_name(key_len);
            return Ok(invalid_tool_name(key_len, self.registry.max_name_len()));
        }
        let tool: String = params.name.to_string();
        if self.schema_check != SchemaCheck::Off && self.shared.schemas.needs_list() {
            // The schemas come from the list: read it first (its answer counts for the
            // server), through the server's gate.
            let permit = match self.server_gate().await {
                Ok(permit) => permit,
                Err(retry_after) => return Ok(self.server_refused(&tool, retry_after)),
            };
            self.read_schemas(permit).await?;
        }
        // The model's mistakes, answered here: nothing sent, nothing recorded, no probe spent.
        if self.shared.schemas.knows(&tool) == Some(false) {
            return Err(ServiceError::McpError(self.unknown_tool(&tool)));
        }
        if let Some(problems) =
            self.shared
                .schemas
                .check(self.schema_check, &tool, &mut params.arguments)
        {
            return Ok(self.invalid_arguments(&tool, &problems));
        }
        let permit = match self.server_gate().await {
            Ok(permit) => permit,
            Err(retry_after) => return Ok(self.server_refused(&tool, retry_after)),
        };
        self.call_admitted(params, tool, permit).await
    }

    /// [`call_tool`](Self::call_tool), telling `progress` the `progressToken` the request is
    /// sent with once it is sent (rmcp numbers every request's token itself, whatever the
    /// params carry): the server's `notifications/progress` for this call arrive with it at the
    /// peer's `ClientHandler::on_progress`. For a proxy that passes a host's progress on —
    /// the gateway maps it back to the host's own token. Not called when nothing is sent (a
    /// refusal, the model's mistake).
    pub async fn call_tool_with_progress(
        &self,
        params: CallToolRequestParams,
        progress: impl FnOnce(&rmcp::model::ProgressToken) + Send + 'static,
    ) -> Result<CallToolResult, ServiceError> {
        self.call_tool_told(params, move |_, token| progress(token))
            .await
    }

    /// [`call_tool`](Self::call_tool), telling `sent` the JSON-RPC id and the `progressToken`
    /// of the request once it is sent: what a proxy needs to pass the server's progress on
    /// ([`call_tool_with_progress`](Self::call_tool_with_progress)) and to know which call a
    /// request of the server belongs to (streamable HTTP carries it on the call's stream, and
    /// rmcp's `InboundStreamOrigin` names the call by its id). Not called when nothing is sent.
    pub async fn call_tool_told(
        &self,
        params: CallToolRequestParams,
        sent: impl FnOnce(&rmcp::model::RequestId, &rmcp::model::ProgressToken) + Send + 'static,
    ) -> Result<CallToolResult, ServiceError> {
        let told: super::requests::TellProgress = Box::new(sent);
        super::requests::PROGRESS
            .scope(std::cell::RefCell::new(Some(told)), self.call_tool(params))
            .await
    }

    /// The tool's gate, the call and the records, once the server's gate admitted the call
    /// with `permit`.
    async fn call_admitted(
        &self,
        params: CallToolRequestParams,
        tool: String,
        permit: crate::call::Permit,
    ) -> Result<CallToolResult, ServiceError> {
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
            Err(CallError::Refused { retry_after, .. }) => {
                let why = Why::of(self.registry.snapshot(&key).as_ref());
                Ok(texts::refused(
                    &self.shown_name(&tool),
                    Refused::Tool(why),
                    retry_after,
                ))
            }
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
                if self.probe_once().await.is_ok() {
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

    /// The `tools/call` span of a call the client answered itself (nothing was sent), with the
    /// registry that accounts for it: entered by the caller, so that it is in the trace.
    fn answered_span(&self, tool: &str) -> Span {
        let key = self.key(tool);
        let span = span::call_span(tool, &key, &self.server.name);
        span::describe(&span, &self.transport, &self.peer);
        span.record(semconv::REGISTRY_ID, self.registry.instance_id());
        span
    }

    /// A refusal by the server's breaker (recorded nowhere else; a span says so).
    fn server_refused(&self, tool: &str, retry_after: Duration) -> CallToolResult {
        let why = Why::of(self.server.servers.snapshot(&self.server.name).as_ref());
        let result = texts::refused(
            &self.shown_name(tool),
            Refused::Server(&self.server.name, why),
            retry_after,
        );
        let span = self.answered_span(tool);
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

    /// Arguments the check refused: the result the model reads, and a span saying so — the
    /// call skipped (`gen_ai.tool.call.outcome`), so that no feed records it.
    fn invalid_arguments(&self, tool: &str, problems: &[String]) -> CallToolResult {
        let result = texts::invalid_arguments(&self.shown_name(tool), problems);
        let span = self.answered_span(tool);
        let _entered = span.enter();
        span.record(semconv::TOOL_CALL_OUTCOME, SKIPPED);
        span.record(semconv::ERROR_TYPE, classify::INVALID_ARGUMENTS);
        span.record("tool_health.mcp.answer", classify::INVALID_ARGUMENTS);
        span.record(semconv::OTEL_STATUS_CODE, "error");
        result
    }

    /// A tool the server does not list: `-32602` for the model, and a span saying so (skipped:
    /// no feed records it, no entry is made for a name the model made up).
    fn unknown_tool(&self, tool: &str) -> rmcp::model::ErrorData {
        let error = texts::unknown_tool(&self.shown_name(tool));
        let span = self.answered_span(tool);
        let _entered = span.enter();
        span.record(semconv::TOOL_CALL_OUTCOME, SKIPPED);
        span.record(semconv::ERROR_TYPE, "-32602");
        span.record(semconv::RPC_RESPONSE_STATUS_CODE, -32602_i64);
        span.record("tool_health.mcp.answer", classify::UNKNOWN_TOOL);
        span.record(semconv::OTEL_STATUS_CODE, "error");
        error
    }
}

/// `gen_ai.tool.call.outcome` of a call the client answered itself: it was not made.
const SKIPPED: &str = "skipped";

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
