//! What goes over the wire besides the call itself: the server's gate and its probe (`ping`, or
//! `server/discover` on MCP 2026-07-28), sending a request with its timeout (and
//! `notifications/cancelled` when the caller drops it), and what an answer says about the
//! server.

use std::borrow::Cow;
use std::time::Duration;

use rmcp::model::{
    CancelledNotificationParam, ClientRequest, DiscoverRequest, DiscoverRequestParams, PingRequest,
    ProgressToken, RequestId, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient, ServiceError};
use tracing::{Instrument as _, Span};

use crate::call::REFUSAL_MESSAGE;
use crate::semconv;

use super::client::ToolHealthClient;
use super::server::{ProbeGuard, ServerGate, ServerOutcome};
use super::span;

impl ToolHealthClient {
    /// Asks the server whether it is there, through its breaker: refused while it is open
    /// (`Err` with `ServiceError::Cancelled`), and its answer (or silence) counts for the
    /// server. The request is the one its protocol has: `ping`, or `server/discover` on MCP
    /// 2026-07-28, which removed `ping`; `Ok` when the server answered it — or, from a server
    /// that implements neither, answered it with a JSON-RPC error (see `probe_once`).
    pub async fn ping(&self) -> Result<(), ServiceError> {
        match self.server_gate().await {
            Ok(permit) => {
                let started = self.registry.now();
                let r = self.probe_once().await;
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

    /// The server's gate: its permit, or how long it refuses. After a cooldown the probe is a
    /// `ping` (`server/discover` on MCP 2026-07-28): answered, the server closes and the call
    /// is admitted; not, it is refused.
    pub(super) async fn server_gate(&self) -> Result<crate::call::Permit, Duration> {
        match self.server.gate() {
            ServerGate::Allowed(permit) => Ok(permit),
            ServerGate::Refused(retry_after) => Err(retry_after),
            ServerGate::Probe(permit) => {
                let guard = ProbeGuard {
                    server: &self.server,
                    permit: Some(permit),
                };
                let started = self.registry.now();
                let answered = self.probe_once().await.is_ok();
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

    /// One probe of the server in its span, with the ping timeout; counts for nothing by
    /// itself. `Ok` when the server answered: the probe of its protocol ([`Probe`]) answered,
    /// or — from a server that implements neither `ping` nor `server/discover` — any JSON-RPC
    /// error it answers with instead (`-32601`): an answer to the request, matched to its id,
    /// is all the question "is the server there?" needs. `Err` when it did not answer within
    /// the ping timeout, or the connection could not carry the request.
    pub(super) async fn probe_once(&self) -> Result<(), ServiceError> {
        let probe = Probe::of(&self.peer);
        let span = span::probe_span(&self.server.name, probe == Probe::Discover);
        span::describe(&span, &self.transport, &self.peer);
        let result = self
            .send(probe.request(), self.ping_timeout, Some(&span))
            .instrument(span.clone())
            .await;
        match result {
            Ok(ServerResult::EmptyResult(_)) if probe == Probe::Ping => Ok(()),
            Ok(ServerResult::DiscoverResult(_)) if probe == Probe::Discover => Ok(()),
            Ok(_) => {
                // An answer of another shape is still an answer.
                span.record(semconv::ERROR_TYPE, "unexpected_response");
                span.record(semconv::OTEL_STATUS_CODE, "error");
                Ok(())
            }
            Err(e) => {
                span.record(semconv::ERROR_TYPE, &*error_type(&e));
                span.record(semconv::OTEL_STATUS_CODE, "error");
                if let ServiceError::McpError(e) = &e {
                    span.record(
                        semconv::RPC_RESPONSE_STATUS_CODE,
                        tracing::field::display(e.code.0),
                    );
                    return Ok(());
                }
                Err(e)
            }
        }
    }

    /// Sends `request` with `timeout` (rmcp cancels it at the server when it runs out), writes
    /// its id on `span`, and tells the server when the caller drops it before the answer.
    pub(super) async fn send(
        &self,
        request: ClientRequest,
        timeout: Duration,
        span: Option<&Span>,
    ) -> Result<ServerResult, ServiceError> {
        // The request a caller asked to be told of (`call_tool_told`, `request_told`): not
        // the list or the probe sent on its way.
        let told = !matches!(
            request,
            ClientRequest::ListToolsRequest(_)
                | ClientRequest::PingRequest(_)
                | ClientRequest::DiscoverRequest(_)
        );
        let handle = self
            .peer
            .send_request_with_option(request, PeerRequestOptions::with_timeout(timeout))
            .await?;
        if told {
            // rmcp numbers every request's id and progress token itself: whoever asked learns
            // them now, before the server can answer.
            let _ = PROGRESS.try_with(|told| {
                if let Some(tell) = told.borrow_mut().take() {
                    tell(&handle.id, &handle.progress_token);
                }
            });
        }
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
}

/// The request that asks a server whether it is there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Probe {
    /// `ping`: MCP up to 2025-11-25 (the `initialize` handshake's era).
    Ping,
    /// `server/discover`: MCP 2026-07-28 removed `ping`, and made `server/discover` what every
    /// server must answer (a server of that protocol answers `ping` with `-32601`).
    Discover,
}

impl Probe {
    /// The probe of the protocol version `peer` negotiated (`ping` when none is known).
    pub(super) fn of(peer: &Peer<RoleClient>) -> Self {
        match peer.peer_info() {
            Some(info) if !info.protocol_version.has_initialize() => Self::Discover,
            _ => Self::Ping,
        }
    }

    fn request(self) -> ClientRequest {
        match self {
            Self::Ping => ClientRequest::PingRequest(PingRequest::default()),
            Self::Discover => {
                ClientRequest::DiscoverRequest(DiscoverRequest::new(DiscoverRequestParams {}))
            }
        }
    }
}

/// Told the id and the progress token of the request this task sends next (not a
/// `tools/list` or a probe sent on its way).
pub(super) type TellProgress = Box<dyn FnOnce(&RequestId, &ProgressToken) + Send>;

tokio::task_local! {
    /// Set by [`ToolHealthClient::call_tool_told`] and
    /// [`ToolHealthClient::request_told`] around their request.
    pub(super) static PROGRESS: std::cell::RefCell<Option<TellProgress>>;
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

/// What an answer to a request says about the server.
pub(super) fn server_outcome<T>(r: &Result<T, ServiceError>) -> ServerOutcome {
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
pub(super) fn is_transport_failure(e: &ServiceError) -> bool {
    matches!(
        e,
        ServiceError::TransportClosed | ServiceError::TransportSend(_)
    )
}

/// The `error.type` of a failed call: the JSON-RPC code, or a low-cardinality name.
pub(super) fn error_type(error: &ServiceError) -> Cow<'static, str> {
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
