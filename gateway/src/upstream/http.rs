//! A streamable HTTP upstream's client, watched: rmcp's reqwest client, with what it meets told
//! to the supervisor, so that `connected` says what is true and a session the server no longer
//! knows means a new one.
//!
//! rmcp's transport keeps a session alive as long as its worker runs, and its worker runs
//! whatever the server answers: a server that went away leaves every request failing on a
//! "connected" session, and one that came back under the same address answers the old
//! session id with an error for ever. What this wrapper does about each:
//!
//! | it meets | the session | what happens |
//! |---|---|---|
//! | a request that cannot reach the server (refused, reset, timed out) | lost | the supervisor reconnects: `connected` is false until a handshake is answered again |
//! | the session's event stream (`GET`) refused with 400 or 404, or unreachable | lost | the same |
//! | a `POST` on the session answered by a JSON-RPC error `-32000`/`-32001` that names the session (`Bad Request: No valid session ID provided`: the TypeScript SDK's example servers and `server-everything` answer an unknown session so, with HTTP 400) | expired | read as the 404 the MCP transport prescribes: rmcp initializes a new session and sends the request again, once; the supervisor re-reads the tools |
//! | a 404 to a `POST` on the session (the Python SDK) | expired | rmcp's own: the same |
//!
//! A session renewed by rmcp is said through [`Watch::renewed`]; a lost one through
//! [`Watch::lost`], with the reason (its text is the HTTP client's, masked by the log and by
//! `last_error` like every text that may repeat the URL).

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use futures_util::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::Sse;
use tokio_util::sync::CancellationToken;

/// What one connection's client met (shared by the supervisor and the client's clones).
#[derive(Debug, Clone, Default)]
pub(super) struct Watch {
    lost: CancellationToken,
    why: Arc<Mutex<Option<String>>>,
    /// Sessions initialized through this client (the first one included).
    sessions: Arc<AtomicU64>,
    renewed: Arc<tokio::sync::Notify>,
}

impl Watch {
    /// Completes when the session is lost (see the module docs).
    pub(super) async fn lost(&self) {
        self.lost.cancelled().await;
    }

    /// Why the session was lost.
    pub(super) fn why(&self) -> Option<String> {
        self.why
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Completes at each session rmcp initialized again after the first.
    pub(super) async fn renewed(&self) {
        self.renewed.notified().await;
    }

    fn lose(&self, why: String) {
        let mut slot = self.why.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some(why);
        }
        drop(slot);
        self.lost.cancel();
    }
}

/// rmcp's reqwest client with a [`Watch`].
#[derive(Debug, Clone)]
pub(super) struct Watched {
    inner: reqwest::Client,
    watch: Watch,
}

impl Watched {
    pub(super) fn new(inner: reqwest::Client, watch: Watch) -> Self {
        Self { inner, watch }
    }
}

/// Whether an error of the HTTP client means the server could not be reached at all.
fn unreachable(e: &StreamableHttpError<reqwest::Error>) -> bool {
    match e {
        StreamableHttpError::Client(e) => e.is_connect() || e.is_timeout() || e.is_request(),
        StreamableHttpError::Io(_) => true,
        _ => false,
    }
}

/// Whether an answer is a server saying it does not know the session (see the module docs).
fn names_unknown_session(message: &ServerJsonRpcMessage) -> bool {
    let ServerJsonRpcMessage::Error(e) = message else {
        return false;
    };
    matches!(e.error.code.0, -32000 | -32001)
        && e.error.message.to_ascii_lowercase().contains("session")
}

fn is_initialize(message: &ClientJsonRpcMessage) -> bool {
    matches!(message, ClientJsonRpcMessage::Request(r) if matches!(r.request, ClientRequest::InitializeRequest(_)))
}

impl StreamableHttpClient for Watched {
    type Error = reqwest::Error;

    fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>>>
           + Send
           + '_ {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
    }

    fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> impl Future<Output = Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>>>
           + Send
           + '_ {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
    }

    fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> impl Future<Output = Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>>>
           + Send
           + '_ {
        let initialize = is_initialize(&message);
        let on_session = session_id.is_some();
        async move {
            let response = self
                .inner
                .post_message_with_response_limits(
                    uri,
                    message,
                    session_id,
                    auth_header,
                    custom_headers,
                    limits,
                )
                .await;
            match &response {
                Err(e) if unreachable(e) => {
                    self.watch.lose(format!(
                        "the server could not be reached: {}",
                        super::chain(e)
                    ));
                }
                Ok(StreamableHttpPostResponse::Json(m, _))
                    if on_session && !initialize && names_unknown_session(m) =>
                {
                    return Err(StreamableHttpError::SessionExpired);
                }
                _ => {}
            }
            let new_session = matches!(
                &response,
                Ok(StreamableHttpPostResponse::Json(_, Some(_))
                    | StreamableHttpPostResponse::Sse(_, Some(_)))
            );
            if initialize && new_session && self.watch.sessions.fetch_add(1, Ordering::Relaxed) > 0
            {
                self.watch.renewed.notify_one();
            }
            response
        }
    }

    fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<(), StreamableHttpError<Self::Error>>> + Send + '_ {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
    }

    fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<
        Output = Result<
            BoxStream<'static, Result<Sse, SseError>>,
            StreamableHttpError<Self::Error>,
        >,
    > + Send
           + '_ {
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default().max_sse_event_size,
        )
    }

    fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> impl Future<
        Output = Result<
            BoxStream<'static, Result<Sse, SseError>>,
            StreamableHttpError<Self::Error>,
        >,
    > + Send
           + '_ {
        let on_session = session_id.is_some();
        async move {
            let stream = self
                .inner
                .get_stream_with_max_sse_event_size(
                    uri,
                    session_id,
                    last_event_id,
                    auth_header,
                    custom_headers,
                    max_sse_event_size,
                )
                .await;
            if let Err(e) = &stream {
                let gone = match e {
                    StreamableHttpError::Client(c) => {
                        matches!(c.status().map(|s| s.as_u16()), Some(400 | 404))
                    }
                    _ => false,
                };
                if unreachable(e) {
                    self.watch.lose(format!(
                        "the server could not be reached: {}",
                        super::chain(e)
                    ));
                } else if on_session && gone {
                    self.watch
                        .lose("the server no longer knows the session".to_owned());
                }
            }
            stream
        }
    }
}
