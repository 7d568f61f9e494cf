//! Every other request, through the server's breaker: resources, prompts, completions, the
//! logging level, resource subscriptions — what a proxy passes on besides `tools/call`.
//!
//! None of them is a tool's call, so none meets a tool's breaker or makes a tool's entry; each
//! is gated by the server's breaker and its answer counts for the server only, as the answers
//! of `tools/call` do ([`server_outcome`]): any answer (a result, a JSON-RPC error such as
//! "resource not found") is the server answering; a closed connection, a message that could
//! not be sent, and a timeout whose probe goes unanswered too are the server's failures; a
//! timeout whose probe is answered is a slow answer of a live server and counts for nothing.
//! While the server's breaker refuses, nothing is sent: the answer is a JSON-RPC error whose
//! message begins with [`REFUSAL_MESSAGE`](crate::REFUSAL_MESSAGE) and says when to retry
//! ([`is_refusal_error`]).

use rmcp::model::{ClientRequest, ErrorData, ServerResult};
use rmcp::service::ServiceError;
use tracing::Instrument as _;

use crate::call::REFUSAL_MESSAGE;
use crate::semconv;

use super::client::ToolHealthClient;
use super::requests::{error_type, server_outcome};
use super::server::ServerOutcome;
use super::span;
use super::texts::{self, Why};

impl ToolHealthClient {
    /// Sends `request` (anything but `tools/call`: use [`call_tool`](Self::call_tool)) through
    /// the server's breaker, with the client's timeout, in an MCP client span named after its
    /// method. Its answer counts for the server only, never for a tool: any answer (a result,
    /// a JSON-RPC error such as "resource not found") is the server answering; a closed
    /// connection, a message that could not be sent, and a timeout whose probe goes unanswered
    /// too are its failures; a timeout whose probe is answered counts for nothing.
    ///
    /// While the server's breaker refuses, nothing is sent and the answer is
    /// `Err(ServiceError::McpError(e))` with `e` a refusal ([`is_refusal_error`]: code
    /// `-32603`, the message begins with [`REFUSAL_MESSAGE`](crate::REFUSAL_MESSAGE), `data`
    /// carries `retryAfterMs`). A caller that drops the future before the answer has the
    /// server told (`notifications/cancelled`).
    pub async fn request(&self, request: ClientRequest) -> Result<ServerResult, ServiceError> {
        let method = request.method().to_owned();
        let permit = match self.server_gate().await {
            Ok(permit) => permit,
            Err(retry_after) => {
                let why = Why::of(self.server.servers.snapshot(&self.server.name).as_ref());
                return Err(ServiceError::McpError(texts::refused_request(
                    &method,
                    &self.server.name,
                    why,
                    retry_after,
                )));
            }
        };
        let span = span::request_span(&method, &self.server.name);
        span::describe(&span, &self.transport, &self.peer);
        let started = self.registry.now();
        let answer = self
            .send(request, self.timeout, Some(&span))
            .instrument(span.clone())
            .await;
        let outcome = match &answer {
            // A slow answer of a live server, or no server at all?
            Err(ServiceError::Timeout { .. }) => {
                if self.probe_once().await.is_ok() {
                    ServerOutcome::Answered
                } else {
                    ServerOutcome::Failed
                }
            }
            other => server_outcome(other),
        };
        if let Err(e) = &answer {
            span.record(semconv::ERROR_TYPE, &*error_type(e));
            span.record(semconv::OTEL_STATUS_CODE, "error");
            if let ServiceError::McpError(e) = e {
                span.record(
                    semconv::RPC_RESPONSE_STATUS_CODE,
                    tracing::field::display(e.code.0),
                );
            }
        }
        self.server
            .record(permit, outcome, self.registry.now().saturating_sub(started));
        answer
    }
}

impl ToolHealthClient {
    /// [`request`](Self::request), telling `sent` the JSON-RPC id of the request once it is
    /// sent (see [`call_tool_told`](Self::call_tool_told)). Not called when nothing is sent.
    pub async fn request_told(
        &self,
        request: ClientRequest,
        sent: impl FnOnce(&rmcp::model::RequestId) + Send + 'static,
    ) -> Result<ServerResult, ServiceError> {
        let told: super::requests::TellProgress = Box::new(move |id, _| sent(id));
        super::requests::PROGRESS
            .scope(std::cell::RefCell::new(Some(told)), self.request(request))
            .await
    }
}

/// Whether `error` is a refusal by a breaker ([`ToolHealthClient::request`]'s): nothing was
/// sent to the server.
pub fn is_refusal_error(error: &ErrorData) -> bool {
    error.message.starts_with(REFUSAL_MESSAGE)
}
