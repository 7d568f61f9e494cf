//! `/mcp`: rmcp's streamable HTTP server with the gateway's handler (a session per host under
//! the `initialize` handshake; per-request envelopes for MCP 2026-07-28 hosts).
//!
//! `Host` and `Origin` are the gateway's guard's (every route's, `http/mod.rs`): rmcp's own
//! checks are off, so that one rule decides. At most [`MAX_SESSIONS`] sessions live at once
//! (rmcp keeps an idle one 5 minutes): one more `initialize` is answered `503` with
//! `Retry-After` and a JSON-RPC error, without creating anything; requests of live sessions
//! and per-request envelopes are never refused for it.
//!
//! rmcp answers a body that is not JSON-RPC with `415` and a line of text, and one over the
//! limit with `413` and text. Hosts read JSON-RPC: those two answers are rewritten as a
//! JSON-RPC error (`-32700` parse error with HTTP 400, `-32600` "message too large" with HTTP
//! 413) carrying rmcp's explanation. A `DELETE` that ends a session is answered 200, as the
//! TypeScript SDK's server does (rmcp answers 202, and the Python SDK's client warns
//! "Session termination failed: 202" on every close: it accepts 200 and 204). A
//! `subscriptions/listen` stream the host closes is told to the gateway's `listen` first, and
//! what is left of it read here, so that the subscription ends without a send into a closed
//! stream (`server/gone.rs`). Everything else is rmcp's as it is.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use axum::Router;
use http_body::{Frame, SizeHint};
use http_body_util::BodyExt as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;

use crate::gateway::Gateway;
use crate::server::gone::{HostGone, DRAIN};
use crate::server::GatewayServer;

/// The most MCP sessions alive at once.
pub(crate) const MAX_SESSIONS: usize = 1_000;

/// What a host is told to wait before it tries a new session again, in seconds.
const SESSIONS_RETRY_SECS: &str = "5";

/// The `/mcp` route.
pub(super) fn router(gw: &Arc<Gateway>) -> Router {
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_max_request_body_bytes(gw.max_message_bytes)
        .with_cancellation_token(gw.shutdown.child_token());
    // A handler per session: each host is known by its own id.
    let sessions = Arc::new(LocalSessionManager::default());
    let factory = Arc::clone(gw);
    let service = StreamableHttpService::new(
        move || Ok(GatewayServer::new(Arc::clone(&factory))),
        Arc::clone(&sessions),
        config,
    );
    let cap = Cap {
        sessions,
        max_body: gw.max_message_bytes,
    };
    Router::new()
        .route_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(cap, cap_sessions))
        .layer(axum::middleware::map_response(as_json_rpc))
        .layer(axum::middleware::from_fn(session_ended))
        .layer(axum::middleware::from_fn(listen_closed))
}

/// A `subscriptions/listen` request (by its `Mcp-Method` header, which rmcp checks against
/// the body): marked with a [`HostGone`], cancelled when the host drops the stream (see the
/// module docs).
async fn listen_closed(mut request: Request, next: Next) -> Response {
    let listen = request.method() == Method::POST
        && request
            .headers()
            .get("mcp-method")
            .is_some_and(|m| m == "subscriptions/listen");
    if !listen {
        return next.run(request).await;
    }
    let gone = HostGone::default();
    request.extensions_mut().insert(gone.clone());
    let (parts, body) = next.run(request).await.into_parts();
    Response::from_parts(
        parts,
        Body::new(Closing {
            inner: Some(body),
            gone,
        }),
    )
}

/// A listen stream's body: when the host's side drops it before its end, the subscription is
/// told ([`HostGone`]) and the rest is read on a task of its own, at most [`DRAIN`].
struct Closing {
    inner: Option<Body>,
    gone: HostGone,
}

impl HttpBody for Closing {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        match self.inner.as_mut() {
            Some(body) => Pin::new(body).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(HttpBody::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner
            .as_ref()
            .map(HttpBody::size_hint)
            .unwrap_or_default()
    }
}

impl Drop for Closing {
    fn drop(&mut self) {
        self.gone.0.cancel();
        let Some(mut body) = self.inner.take() else {
            return;
        };
        if body.is_end_stream() {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = tokio::time::timeout(DRAIN, async {
                    while let Some(Ok(_)) = body.frame().await {}
                })
                .await;
            });
        }
    }
}

/// A `DELETE` that ended a session: 200 instead of rmcp's 202 (see the module docs).
async fn session_ended(request: Request, next: Next) -> Response {
    let delete = request.method() == Method::DELETE;
    let mut response = next.run(request).await;
    if delete && response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::OK;
    }
    response
}

/// What the session cap reads.
#[derive(Clone)]
struct Cap {
    sessions: Arc<LocalSessionManager>,
    max_body: usize,
}

/// Refuses an `initialize` that would open one session more than [`MAX_SESSIONS`]. The body
/// is read only then (a `POST` without a session id while the sessions are full); everything
/// else goes on untouched.
async fn cap_sessions(State(cap): State<Cap>, request: Request, next: Next) -> Response {
    if request.method() != Method::POST
        || request.headers().contains_key("mcp-session-id")
        || cap.sessions.sessions.read().await.len() < MAX_SESSIONS
    {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, cap.max_body).await else {
        // Too large or broken: rmcp answers it as it would (from an empty body).
        return next.run(Request::from_parts(parts, Body::empty())).await;
    };
    let message = serde_json::from_slice::<serde_json::Value>(&bytes).ok();
    let initialize = message
        .as_ref()
        .is_some_and(|m| m.get("method").and_then(|v| v.as_str()) == Some("initialize"));
    if !initialize {
        return next
            .run(Request::from_parts(parts, Body::from(bytes)))
            .await;
    }
    tracing::warn!(
        "an MCP session refused: {MAX_SESSIONS} are open (idle ones close after 5 minutes, or \
         when their host sends DELETE /mcp)"
    );
    let id = message
        .and_then(|m| m.get("id").cloned())
        .unwrap_or(serde_json::Value::Null);
    let body = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32000, "message":
        format!("the gateway has {MAX_SESSIONS} MCP sessions open, its limit: retry later")}});
    let mut r = Response::new(Body::from(body.to_string()));
    *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from_static(SESSIONS_RETRY_SECS),
    );
    r
}

/// Rewrites rmcp's plain-text 415 and 413 as JSON-RPC errors (see the module docs).
async fn as_json_rpc(response: Response) -> Response {
    let status = response.status();
    let (code, new_status) = match status {
        StatusCode::UNSUPPORTED_MEDIA_TYPE => (-32700, StatusCode::BAD_REQUEST),
        StatusCode::PAYLOAD_TOO_LARGE => (-32600, StatusCode::PAYLOAD_TOO_LARGE),
        _ => return response,
    };
    let (parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 64 * 1024).await else {
        return Response::from_parts(parts, Body::empty());
    };
    let text = String::from_utf8_lossy(&bytes);
    // A 415 for a wrong Content-Type stays what it is.
    if status == StatusCode::UNSUPPORTED_MEDIA_TYPE && !text.starts_with("fail to deserialize") {
        return Response::from_parts(parts, Body::from(bytes));
    }
    let message = if code == -32700 {
        format!(
            "parse error: the body is not one JSON-RPC message ({})",
            text.trim_start_matches("fail to deserialize request body")
                .trim()
        )
    } else {
        format!("message too large: {}", text.trim())
    };
    let body = json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}});
    let mut r = Response::new(Body::from(body.to_string()));
    *r.status_mut() = new_status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}
