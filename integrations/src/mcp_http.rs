//! rmcp's streamable HTTP client with the session id captured for the span: rmcp 3.11 keeps the
//! `Mcp-Session-Id` header inside its transport worker, so [`SessionCapture`] wraps the HTTP
//! client the worker drives and writes every session id it sees (the `initialize` response's,
//! then each request's) into a [`SessionId`] that `ToolHealthClient`'s
//! [`Transport`](tool_health::mcp::Transport) reads at each call.
//!
//! ```no_run
//! # async fn connect() -> Result<(), Box<dyn std::error::Error>> {
//! use rmcp::ServiceExt;
//! use tool_health::mcp::Transport;
//! use tool_health_integrations::mcp_http::{connect_http, SessionCapture};
//!
//! let url = "http://127.0.0.1:8931/mcp";
//! let (running, session) = connect_http(url).await?;
//! let transport = Transport::http(url).session(session);
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceExt};
use sse_stream::Sse;
use tool_health::mcp::SessionId;

/// An rmcp streamable-HTTP client that writes the session ids it sees into a [`SessionId`].
#[derive(Debug, Clone)]
pub struct SessionCapture<C> {
    inner: C,
    session: SessionId,
}

impl<C> SessionCapture<C> {
    /// Wraps `inner`; the ids go to `session`.
    pub fn new(inner: C, session: SessionId) -> Self {
        Self { inner, session }
    }

    fn seen(&self, id: Option<&str>) {
        if let Some(id) = id {
            if self.session.get().as_deref() != Some(id) {
                self.session.set(Some(id));
            }
        }
    }
}

impl<C: StreamableHttpClient + Sync> StreamableHttpClient for SessionCapture<C> {
    type Error = C::Error;

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
        self.seen(session_id.as_deref());
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
                .await?;
            match &response {
                StreamableHttpPostResponse::Json(_, id)
                | StreamableHttpPostResponse::Sse(_, id) => {
                    self.seen(id.as_deref());
                }
                _ => {}
            }
            Ok(response)
        }
    }

    fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<(), StreamableHttpError<Self::Error>>> + Send + '_ {
        if self.session.get().as_deref() == Some(&*session_id) {
            self.session.set(None);
        }
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
        self.seen(session_id.as_deref());
        self.inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
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
        self.seen(session_id.as_deref());
        self.inner.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            max_sse_event_size,
        )
    }
}

/// Connects an rmcp client to the streamable-HTTP MCP server at `url` (reqwest, session id
/// captured): the running client and its session id.
pub async fn connect_http(
    url: &str,
) -> Result<(RunningService<RoleClient, ()>, SessionId), Box<dyn std::error::Error + Send + Sync>> {
    let session = SessionId::new();
    let client = SessionCapture::new(reqwest::Client::new(), session.clone());
    let transport = StreamableHttpClientTransport::with_client(
        client,
        StreamableHttpClientTransportConfig::with_uri(url),
    );
    let running = ().serve(transport).await?;
    Ok((running, session))
}
