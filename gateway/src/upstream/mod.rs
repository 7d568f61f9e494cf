//! The upstream MCP servers: one [`Upstream`] per `mcpServers` entry, each reached through the
//! library's [`ToolHealthClient`] (schema check, server and tool breakers, timeout, span, soft
//! refusals) and kept connected by its supervisor (`supervise.rs`).
//!
//! The gateway adds no breaking logic here: a call is the client's `call_tool`, a listing its
//! `list_all_tools` (which leaves out what refuses now), and a change of what it would list is
//! its `on_tools_changed` subscription, turned into `notifications/tools/list_changed` for the
//! hosts. What this module adds is the naming (`{server}__{tool}` for hosts, `names.rs`), the
//! per-tool timeouts and policies of the config, and the answers a host reads when a server is
//! not connected or a call timed out.
//!
//! | file | concern |
//! |---|---|
//! | `mod.rs` | one upstream: its client, its calls |
//! | `listing.rs` | its tool list, and what the API knows of it |
//! | `supervise.rs` | keeping it connected: start, watch, stop, start again |
//! | `connect.rs` | one connection: a child process or an HTTP endpoint, and the handshake |
//! | `process.rs` | a stdio upstream's process group, stopped gently and whole |
//! | `stderr.rs` | its stderr: to the log at DEBUG, the last lines kept for `last_error` |
//! | `http.rs` | an HTTP upstream's client, watched for a lost or expired session |
//!
//! **Only a live connection is called.** While an upstream is not connected (starting,
//! restarting, unreachable) its tools are not listed and a call is answered "not connected …
//! was not called" without reaching anything — no breaker counts it: a call the gateway never
//! sent is no evidence against the server. A call made while a (re)connection is under way or
//! due within [`RECONNECT_WAIT`] waits for it, so a quick restart costs a host nothing but the
//! wait.

mod connect;
mod http;
mod listing;
mod process;
mod stderr;
mod supervise;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use std::sync::atomic::AtomicBool;

use arc_swap::ArcSwapOption;
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock, Tool};
use rmcp::service::ServiceError;
use rmcp::ErrorData as McpError;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tool_health::mcp::{ToolHealthClient, ToolsSubscription};
use tool_health::{Apply, BreakerState, ToolHealthRegistry, ToolPolicy};

use crate::config::{Launch, Secrets, ServerConfig};
use crate::names;
use crate::server::notify::Hosts;
use crate::server::progress::ProgressRoutes;

use listing::Listed;
pub(crate) use listing::LIST_WAIT;
pub(crate) use supervise::supervise;

/// A call to an upstream that is not connected waits for a (re)connection under way, or due
/// within this long; otherwise it is answered at once.
pub(crate) const RECONNECT_WAIT: Duration = Duration::from_secs(2);

/// One upstream server.
pub(crate) struct Upstream {
    /// Its name in the config: its tools' prefix and its breaker's name.
    pub(crate) name: Arc<str>,
    pub(crate) config: ServerConfig,
    registry: Arc<ToolHealthRegistry>,
    /// The registry's default breaker config (to know whether this server's differs).
    default_breaker: tool_health::CircuitBreakerConfig,
    conn: ArcSwapOption<Conn>,
    /// The client, kept across connections (a new one is this one over the new peer: the
    /// breakers stay as they are).
    client: Mutex<Option<ToolHealthClient>>,
    state: Mutex<State>,
    /// Where the supervisor is (calls wait on it).
    link: watch::Sender<Link>,
    /// A call waits for a connection (an HTTP server is tried again at once).
    wanted: tokio::sync::Notify,
    /// The tools its last complete listing named (their policies are set).
    known: Mutex<HashSet<String>>,
    /// Tool names already warned about (not shown: a character MCP does not allow).
    warned: Mutex<HashSet<String>>,
    hosts: Arc<Hosts>,
    subscription: Mutex<Option<ToolsSubscription>>,
    /// What must never be shown (masked in `last_error`).
    secrets: Arc<Secrets>,
    /// The last listing hosts were given, and whether one is under way.
    listed: watch::Sender<Listed>,
    listing: AtomicBool,
    /// A listing succeeded at least once.
    listed_ok: AtomicBool,
    /// The calls in flight whose host asked for progress.
    pub(crate) progress: Arc<ProgressRoutes>,
}

/// The supervisor's phase, for calls that wait for a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// An attempt is under way (the first one included).
    Connecting,
    /// Connected: calls go through.
    Up,
    /// Not connected; the next attempt is due at this instant.
    Waiting(tokio::time::Instant),
    /// The gateway stops.
    Stopped,
}

/// [`Phase`], and how many attempts ended so far (a call waits for the one under way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Link {
    pub(crate) phase: Phase,
    pub(crate) attempts: u64,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("name", &self.name)
            .field("launch", &self.config.launch)
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

/// The clients of a connected server.
struct Conn {
    client: ToolHealthClient,
    /// Tools with a timeout of their own.
    per_tool: HashMap<String, ToolHealthClient>,
    /// Cancelled when a call met the connection's end: the supervisor reconnects.
    broken: CancellationToken,
}

impl Conn {
    /// Whether calls may go through it.
    fn alive(&self) -> bool {
        !self.broken.is_cancelled() && !self.client.peer().is_transport_closed()
    }
}

/// What the supervisor knows about the connection.
#[derive(Debug, Clone, Default)]
pub(crate) struct State {
    pub(crate) connected: bool,
    /// The process id of a stdio server.
    pub(crate) pid: Option<u32>,
    /// Connections made (the first one included).
    pub(crate) starts: u64,
    /// Why the last attempt failed, or how the last connection ended.
    pub(crate) last_error: Option<String>,
    /// When the current connection was made.
    pub(crate) since: Option<Instant>,
}

impl Upstream {
    pub(crate) fn new(
        config: ServerConfig,
        registry: &Arc<ToolHealthRegistry>,
        hosts: &Arc<Hosts>,
        secrets: &Arc<Secrets>,
    ) -> Arc<Self> {
        let name: Arc<str> = config.name.as_str().into();
        let servers = tool_health::mcp::server_registry(registry);
        servers.set_tool_policy(
            &name,
            ToolPolicy::from(config.settings.breaker.clone()),
            Apply::Now,
        );
        for (tool, settings) in &config.tools {
            registry.set_tool_policy(
                &key(&name, tool),
                ToolPolicy::from(settings.breaker.clone()),
                Apply::Now,
            );
        }
        Arc::new(Self {
            name,
            default_breaker: registry.config(),
            registry: Arc::clone(registry),
            conn: ArcSwapOption::empty(),
            client: Mutex::new(None),
            state: Mutex::new(State::default()),
            link: watch::channel(Link {
                phase: Phase::Connecting,
                attempts: 0,
            })
            .0,
            wanted: tokio::sync::Notify::new(),
            known: Mutex::new(HashSet::new()),
            warned: Mutex::new(HashSet::new()),
            hosts: Arc::clone(hosts),
            subscription: Mutex::new(None),
            secrets: Arc::clone(secrets),
            listed: watch::channel(Listed::default()).0,
            listing: AtomicBool::new(false),
            listed_ok: AtomicBool::new(false),
            progress: Arc::default(),
            config,
        })
    }

    /// The supervisor's view of the connection now.
    pub(crate) fn state(&self) -> State {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn update(&self, f: impl FnOnce(&mut State)) {
        f(&mut self.state.lock().unwrap_or_else(PoisonError::into_inner));
    }

    /// Waits (at most `timeout`) until the first connection attempt ended.
    pub(crate) async fn wait_ready(&self, timeout: Duration) {
        let mut rx = self.link.subscribe();
        let _ = tokio::time::timeout(
            timeout,
            rx.wait_for(|l| l.attempts > 0 || l.phase != Phase::Connecting),
        )
        .await;
    }

    /// The live connection, waiting for one under way or due within [`RECONNECT_WAIT`]
    /// (bounded by that and the connect timeout). `None`: not connected.
    async fn live(&self) -> Option<Arc<Conn>> {
        if let Some(conn) = self.conn.load_full().filter(|c| c.alive()) {
            return Some(conn);
        }
        let mut rx = self.link.subscribe();
        let started = rx.borrow().attempts;
        self.wanted.notify_one();
        let deadline =
            tokio::time::Instant::now() + RECONNECT_WAIT + self.config.settings.connect_timeout;
        loop {
            let link = *rx.borrow_and_update();
            match link.phase {
                Phase::Up => {
                    if let Some(conn) = self.conn.load_full().filter(|c| c.alive()) {
                        return Some(conn);
                    }
                }
                Phase::Stopped => return None,
                // An attempt ended since the call came, and it connected nothing.
                _ if link.attempts > started => return None,
                Phase::Waiting(at) if at > tokio::time::Instant::now() + RECONNECT_WAIT => {
                    return None
                }
                Phase::Waiting(_) | Phase::Connecting => {}
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => {}
                _ => return None,
            }
        }
    }

    /// Masks the config's secrets in `text`.
    fn masked(&self, text: &str) -> String {
        self.secrets.scrub(text).into_owned()
    }

    /// `stdio` or `http`.
    pub(crate) fn transport_name(&self) -> &'static str {
        match self.config.launch {
            Launch::Stdio { .. } => "stdio",
            Launch::Http { .. } => "http",
        }
    }

    /// The server breaker's state now.
    pub(crate) fn breaker_state(&self) -> BreakerState {
        tool_health::mcp::server_registry(&self.registry).breaker_state(&self.name)
    }

    /// How long the server's breaker refuses now (`None`: it admits).
    pub(crate) fn refused_for(&self) -> Option<Duration> {
        tool_health::mcp::server_registry(&self.registry)
            .snapshot(&self.name)
            .and_then(|s| s.retry_after)
    }

    /// The server as the status page shows it: a group of the tools keyed `{server}/…`, with
    /// its breaker, its connection, restarts and last error.
    pub(crate) fn group(&self) -> tool_health::status::Group {
        let state = self.state();
        let mut g = tool_health::status::Group::new(
            &*self.name,
            format!("{}{}", self.name, tool_health::mcp::KEY_SEPARATOR),
        )
        .connected(state.connected)
        .restarts(state.starts.saturating_sub(1))
        .tools(self.known_count() as u64);
        if let Some(s) = tool_health::mcp::server_registry(&self.registry).snapshot(&self.name) {
            g = g.breaker(&s);
        }
        if let Some(e) = state.last_error {
            g = g.last_error(e);
        }
        g
    }

    /// Calls `tool` (its own name on this server) through the breakers. Errors are JSON-RPC
    /// errors for the host; everything the model should read is a result.
    pub(crate) async fn call(
        &self,
        tool: &str,
        mut params: CallToolRequestParams,
        progress: Option<impl FnOnce(&rmcp::model::ProgressToken) + Send + 'static>,
    ) -> Result<CallToolResult, McpError> {
        let shown = format!("{}{}{tool}", self.name, names::SEPARATOR);
        params.name = tool.to_owned().into();
        let Some(conn) = self.live().await else {
            // Not connected, and its breaker refuses (a server that keeps dying): the
            // client's refusal, with when to retry; its gate sends nothing.
            let client = self
                .client
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            if let (Some(client), Some(_)) = (client, self.refused_for()) {
                if let Ok(refused) = client.call_tool(params).await {
                    return Ok(refused);
                }
            }
            // Why it is not connected is the operator's to read (`/v1/servers`, the log): the
            // error of a handshake names transport types and URLs no model needs.
            return Ok(soft(format!(
                "tool `{shown}` was not called: its MCP server `{}` is not connected (the \
                 gateway is connecting to it); retry in a few seconds",
                self.name
            )));
        };
        let client = conn.per_tool.get(tool).unwrap_or(&conn.client);
        let answer = match progress {
            Some(tell) => client.call_tool_with_progress(params, tell).await,
            None => client.call_tool(params).await,
        };
        match answer {
            Ok(result) => Ok(result),
            Err(ServiceError::McpError(e)) => Err(e),
            Err(ServiceError::Timeout { timeout }) => Ok(soft(format!(
                "tool `{shown}` did not answer within {:.1} s: the gateway gave up on this call \
                 (it may still have run); retry later",
                timeout.as_secs_f64()
            ))),
            Err(ServiceError::TransportClosed | ServiceError::TransportSend(_)) => {
                // The connection is gone: no call goes through it any more, and the
                // supervisor reconnects.
                conn.broken.cancel();
                Ok(soft(format!(
                    "tool `{shown}` was not called: its MCP server `{}` is not connected (its \
                     connection closed; the gateway is reconnecting); retry in a few seconds",
                    self.name
                )))
            }
            Err(ServiceError::Cancelled { reason }) => Err(McpError::internal_error(
                format!(
                    "the call to `{shown}` was cancelled{}",
                    reason.map(|r| format!(": {r}")).unwrap_or_default()
                ),
                None,
            )),
            Err(e) => Err(McpError::internal_error(
                format!("the call to `{shown}` failed: {e}"),
                None,
            )),
        }
    }
}

/// An rmcp error in a few words for the log and `last_error`: rmcp's own text of a transport
/// error names the transport's whole type (`rmcp::transport::worker::WorkerTransport<…>`).
pub(crate) fn said(e: &ServiceError) -> String {
    match e {
        ServiceError::TransportSend(e) => {
            format!("the request could not be sent: {}", chain(&*e.error))
        }
        ServiceError::TransportClosed => "the connection closed".to_owned(),
        other => names::printable(&other.to_string(), 300),
    }
}

/// An error and its deepest cause (`error sending request for url (…): Connection refused (os
/// error 111)`), at most 300 characters.
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let top = e.to_string();
    let mut deepest = e.source();
    while let Some(next) = deepest.and_then(std::error::Error::source) {
        deepest = Some(next);
    }
    let text = match deepest.map(ToString::to_string) {
        Some(root) if !top.contains(&root) => format!("{top}: {root}"),
        _ => top,
    };
    names::printable(&text, 300)
}

/// A soft failure the model reads.
fn soft(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// The registry key of `tool` of `server`.
pub(crate) fn key(server: &str, tool: &str) -> String {
    format!("{server}{}{tool}", tool_health::mcp::KEY_SEPARATOR)
}

/// Every upstream, by name.
#[derive(Debug, Default)]
pub(crate) struct Upstreams {
    by_name: BTreeMap<String, Arc<Upstream>>,
}

impl Upstreams {
    pub(crate) fn new(list: impl IntoIterator<Item = Arc<Upstream>>) -> Self {
        Self {
            by_name: list.into_iter().map(|u| (u.name.to_string(), u)).collect(),
        }
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Arc<Upstream>> {
        self.by_name.get(name)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<Upstream>> {
        self.by_name.values()
    }

    /// Waits (at most `timeout` in all) until every first connection attempt ended.
    pub(crate) async fn wait_ready(&self, timeout: Duration) {
        let deadline = tokio::time::Instant::now() + timeout;
        for u in self.by_name.values() {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            u.wait_ready(left).await;
        }
    }

    /// Every server's tools as hosts see them, listed concurrently, in server order; a server
    /// slow to list costs its own tools only ([`LIST_WAIT`]).
    pub(crate) async fn list(&self) -> Vec<Tool> {
        let lists =
            futures_util::future::join_all(self.by_name.values().map(|u| u.list(LIST_WAIT))).await;
        lists.into_iter().flatten().collect()
    }
}
