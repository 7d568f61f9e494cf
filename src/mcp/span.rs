//! The MCP client span: what the OpenTelemetry MCP conventions ask of it, and how the client
//! learns what the transport knows ([`Transport`], [`SessionId`]).

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::service::{Peer, RoleClient};
use tracing::field::Empty;
use tracing::Span;

/// How the client reaches its server, for the span's `network.transport`, `server.address`,
/// `server.port`, `network.protocol.name` and `mcp.session.id` (rmcp's peer does not say).
/// Without one (the default) those attributes are left out.
///
/// ```
/// use tool_health::mcp::{SessionId, Transport};
///
/// let stdio = Transport::stdio(); // network.transport = pipe
/// let session = SessionId::new(); // filled by whoever sees the Mcp-Session-Id header
/// let http = Transport::http("http://127.0.0.1:8931/mcp").session(session.clone());
/// assert_eq!(http.server_port(), Some(8931));
/// assert_eq!(http.server_address(), Some("127.0.0.1"));
/// ```
#[derive(Debug, Clone, Default)]
pub struct Transport {
    network: Option<&'static str>,
    protocol: Option<&'static str>,
    address: Option<Arc<str>>,
    port: Option<u16>,
    session: Option<SessionId>,
}

impl Transport {
    /// stdio (a child process): `network.transport = pipe`.
    pub fn stdio() -> Self {
        Self {
            network: Some("pipe"),
            ..Self::default()
        }
    }

    /// Streamable HTTP at `url`: `network.transport = tcp`, `network.protocol.name = http`,
    /// `server.address` and `server.port` from the URL (the scheme's port when it names none).
    /// A URL that does not parse keeps only the first two.
    pub fn http(url: &str) -> Self {
        let (address, port) = host_and_port(url).unzip();
        Self {
            network: Some("tcp"),
            protocol: Some("http"),
            address: address.map(Arc::from),
            port,
            session: None,
        }
    }

    /// The session's id (`mcp.session.id`), read at each call: an HTTP session is numbered by
    /// the server at `initialize`, and renumbered when it is re-established.
    #[must_use]
    pub fn session(mut self, session: SessionId) -> Self {
        self.session = Some(session);
        self
    }

    /// `server.address`, when known.
    pub fn server_address(&self) -> Option<&str> {
        self.address.as_deref()
    }

    /// `server.port`, when known.
    pub fn server_port(&self) -> Option<u16> {
        self.port
    }

    /// `network.transport`: `pipe`, `tcp`, or unknown.
    pub fn network_transport(&self) -> Option<&'static str> {
        self.network
    }

    /// The session id now, if the transport has one.
    pub fn session_id(&self) -> Option<Arc<str>> {
        self.session.as_ref().and_then(SessionId::get)
    }
}

/// `(host, port)` of an `http(s)://` URL; an IPv6 host without its brackets.
fn host_and_port(url: &str) -> Option<(String, u16)> {
    let (scheme, rest) = url.split_once("://")?;
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        (host, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return None;
    }
    let port = match port {
        Some(p) => p.parse().ok()?,
        None => default_port,
    };
    Some((host.to_owned(), port))
}

/// A session id shared between whoever learns it (an HTTP client that sees the
/// `Mcp-Session-Id` header, see `docs/mcp.md`) and the client's span. Clones share one value.
#[derive(Clone, Default)]
pub struct SessionId(Arc<Mutex<Option<Arc<str>>>>);

impl fmt::Debug for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("SessionId").field(&self.get()).finish()
    }
}

impl SessionId {
    /// No session yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets (or, with `None`, clears) the session's id.
    pub fn set(&self, id: Option<&str>) {
        let id = id.map(Arc::from);
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = id;
    }

    /// The session's id, if there is one.
    pub fn get(&self) -> Option<Arc<str>> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The negotiated protocol version of `peer`'s session (`mcp.protocol.version`).
pub(crate) fn protocol_version(peer: &Peer<RoleClient>) -> Option<String> {
    peer.peer_info()
        .map(|info| info.protocol_version.to_string())
}

/// Writes what the transport and the session say on `span` (declared by [`call_span`] and
/// [`probe_span`]).
pub(crate) fn describe(span: &Span, transport: &Transport, peer: &Peer<RoleClient>) {
    if let Some(version) = protocol_version(peer) {
        span.record("mcp.protocol.version", version.as_str());
    }
    if let Some(network) = transport.network {
        span.record("network.transport", network);
    }
    if let Some(protocol) = transport.protocol {
        span.record("network.protocol.name", protocol);
    }
    if let Some(address) = &transport.address {
        span.record("server.address", &**address);
    }
    if let Some(port) = transport.port {
        span.record("server.port", i64::from(port));
    }
    if let Some(session) = transport.session_id() {
        span.record("mcp.session.id", &*session);
    }
}

/// The `tools/call` client span (the MCP conventions' fields, the call helper's and the
/// client's own), before [`describe`].
pub(crate) fn call_span(tool: &str, key: &str, server: &str) -> Span {
    tracing::info_span!(
        "tools/call",
        otel.name = %format_args!("tools/call {tool}"),
        otel.kind = "client",
        mcp.method.name = "tools/call",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = %key,
        mcp.server.name = %server,
        jsonrpc.request.id = Empty,
        mcp.protocol.version = Empty,
        mcp.session.id = Empty,
        network.transport = Empty,
        network.protocol.name = Empty,
        server.address = Empty,
        server.port = Empty,
        error.type = Empty,
        rpc.response.status_code = Empty,
        gen_ai.tool.call.outcome = Empty,
        otel.status_code = Empty,
        otel.status_description = Empty,
        tool_health.gate.decision = Empty,
        tool_health.registry.id = Empty,
        tool_health.mcp.answer = Empty,
    )
}

/// The client span of the server's probe (and of the question after a timeout): `ping`, or
/// `server/discover` on MCP 2026-07-28, which has no `ping` ([`Probe`](super::requests::Probe)).
pub(crate) fn probe_span(server: &str, discover: bool) -> Span {
    macro_rules! span {
        ($method:literal) => {
            tracing::info_span!(
                $method,
                otel.kind = "client",
                mcp.method.name = $method,
                mcp.server.name = %server,
                jsonrpc.request.id = Empty,
                mcp.protocol.version = Empty,
                mcp.session.id = Empty,
                network.transport = Empty,
                network.protocol.name = Empty,
                server.address = Empty,
                server.port = Empty,
                error.type = Empty,
                rpc.response.status_code = Empty,
                otel.status_code = Empty,
            )
        };
    }
    if discover {
        span!("server/discover")
    } else {
        span!("ping")
    }
}

/// The client span of a request other than `tools/call` (the MCP conventions' fields).
pub(crate) fn request_span(method: &str, server: &str) -> Span {
    tracing::info_span!(
        "mcp.request",
        otel.name = %method,
        otel.kind = "client",
        mcp.method.name = %method,
        mcp.server.name = %server,
        jsonrpc.request.id = Empty,
        mcp.protocol.version = Empty,
        mcp.session.id = Empty,
        network.transport = Empty,
        network.protocol.name = Empty,
        server.address = Empty,
        server.port = Empty,
        error.type = Empty,
        rpc.response.status_code = Empty,
        otel.status_code = Empty,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_urls_give_address_and_port() {
        let cases = [
            ("http://127.0.0.1:8931/mcp", Some(("127.0.0.1", 8931))),
            (
                "https://mcp.example.com/mcp?x=1",
                Some(("mcp.example.com", 443)),
            ),
            ("http://user:pw@host/", Some(("host", 80))),
            ("http://[::1]:9000/mcp", Some(("::1", 9000))),
            ("http://[::1]/", Some(("::1", 80))),
            ("ftp://host/", None),
            ("http://:80/", None),
            ("http://host:99999/", None),
            ("not a url", None),
        ];
        for (url, expected) in cases {
            let t = Transport::http(url);
            assert_eq!(t.network_transport(), Some("tcp"));
            let got = t.server_address().zip(t.server_port());
            assert_eq!(got, expected, "{url}");
        }
        assert_eq!(Transport::stdio().network_transport(), Some("pipe"));
        assert_eq!(Transport::default().network_transport(), None);
    }

    #[test]
    fn a_session_id_is_shared_by_clones() {
        let s = SessionId::new();
        let t = Transport::http("http://127.0.0.1:1/").session(s.clone());
        assert_eq!(t.session_id(), None);
        s.set(Some("abc"));
        assert_eq!(t.session_id().as_deref(), Some("abc"));
        s.set(None);
        assert_eq!(t.session_id(), None);
    }
}
