//! [`ToolHealthClient`]: the type, its settings and what it shares between clones. What it
//! does is a file per concern: `call_tool.rs` (one call), `list_tools.rs` (the tool list),
//! `requests.rs` (the server's gate, `ping`, sending a request), `forward.rs` (every other
//! request, through the server's breaker).

use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::CallToolResult;
use rmcp::service::{Peer, RoleClient};
use tokio::sync::mpsc;

use crate::breaker::BreakerState;
use crate::call_helper::ErrorClass;
use crate::registry::ToolHealthRegistry;

use super::cache::ListCache;
use super::schema::{SchemaCheck, Schemas};
use super::server::{server_registry, ServerBreaker};
use super::span::Transport;
use super::tools::{self, Event, ToolsChanged, ToolsSubscription};
use super::{DEFAULT_PING_TIMEOUT, DEFAULT_TIMEOUT, KEY_SEPARATOR};

/// The longest server name kept (in bytes, at a character boundary).
const MAX_SERVER_NAME: usize = 128;

/// How the model knows a tool of this server ([`ToolHealthClient::shown_names`]).
pub(super) type ShownAs = Arc<dyn Fn(&str) -> String + Send + Sync>;

/// A user's classification of results ([`ToolHealthClient::classify_results`]).
pub(super) type ResultClassifier = Arc<dyn Fn(&str, &CallToolResult) -> ErrorClass + Send + Sync>;

/// An rmcp client peer whose `call_tool` is checked, gated, timed out, traced and recorded,
/// and whose `list_tools` leaves out what refuses now (see the [module docs](super)).
#[derive(Clone)]
pub struct ToolHealthClient {
    pub(super) peer: Peer<RoleClient>,
    pub(super) registry: Arc<ToolHealthRegistry>,
    pub(super) server: ServerBreaker,
    pub(super) timeout: Duration,
    pub(super) ping_timeout: Duration,
    pub(super) schema_check: SchemaCheck,
    pub(super) classify: Option<ResultClassifier>,
    pub(super) shown_as: Option<ShownAs>,
    pub(super) transport: Transport,
    /// Shared by the clones and peers of one server: its schemas and subscriptions.
    pub(super) shared: Arc<Shared>,
}

/// What every clone of a client for one server shares.
#[derive(Debug, Default)]
pub(super) struct Shared {
    pub(super) schemas: Schemas,
    /// The pages of its tool list the server said are still fresh (`cache.rs`).
    pub(super) pages: ListCache,
    pub(super) subscribers: Mutex<Vec<mpsc::UnboundedSender<Event>>>,
    /// The list was too long to declare, and that was said (once per client).
    pub(super) declare_warned: std::sync::atomic::AtomicBool,
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
            shown_as: None,
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

    /// How the model knows this server's tools, for every text the model reads about a call —
    /// a refusal, arguments the check refused, an unknown tool: `shown(tool)` for the tool's
    /// own name. Default: the name itself. A host that shows tools under a prefix (the
    /// gateway: `github__search_issues`) says so here, so that the model reads the name it
    /// called, never another.
    ///
    /// ```
    /// # fn client(c: tool_health::mcp::ToolHealthClient) -> tool_health::mcp::ToolHealthClient {
    /// c.shown_names(|tool| format!("github__{tool}"))
    /// # }
    /// ```
    #[must_use]
    pub fn shown_names(mut self, shown: impl Fn(&str) -> String + Send + Sync + 'static) -> Self {
        self.shown_as = Some(Arc::new(shown));
        self
    }

    /// `tool` as the model knows it ([`shown_names`](Self::shown_names)), printable and
    /// bounded.
    pub(super) fn shown_name(&self, tool: &str) -> String {
        match &self.shown_as {
            Some(f) => super::shown(&f(tool)),
            None => super::shown(tool),
        }
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
        self.shared.pages.clear();
        Self {
            peer,
            ..self.clone()
        }
    }

    /// The rmcp peer, for what goes past the breakers (notifications; a request sent here is
    /// neither gated nor counted: [`request`](Self::request) is).
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

    /// Tells the client the server's tool list changed (the server sent
    /// `notifications/tools/list_changed`; call this from your `ClientHandler`'s
    /// `on_tool_list_changed`): the next call and the next [`list_tools`](Self::list_tools)
    /// read the list again (whatever `ttlMs` it was given), and subscribers hear
    /// [`ToolsChanged::ServerList`].
    pub fn server_list_changed(&self) {
        self.shared.schemas.invalidate();
        self.shared.pages.clear();
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
