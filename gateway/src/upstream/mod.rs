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
//! | `passthrough.rs` | everything else it serves: any request through its client, its resource, template and prompt lists |
//! | `supervise.rs` | keeping it connected: start, watch, stop, start again |
//! | `set.rs` | the set of upstreams and their supervisors, changed by a reload |
//! | `reload.rs` | one upstream's part of a reload: new settings live, a new launch restarted, removal; the drain of calls under way |
//! | `connect.rs` | one connection: a child process or an HTTP endpoint, and the handshake |
//! | `listen.rs` | a MCP 2026-07-28 server's changes and the updates of the resources hosts subscribed to, on the `subscriptions/listen` stream the gateway opens |
//! | `freshness.rs` | how long its part of a host's list stays as it is (`ttlMs`, `cacheScope`) |
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
mod freshness;
mod http;
mod listen;
mod listing;
mod passthrough;
mod process;
mod reload;
mod set;
mod stderr;
mod supervise;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use std::sync::atomic::AtomicBool;

use arc_swap::{ArcSwap, ArcSwapOption};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, ProgressToken, RequestId,
    ServerCapabilities,
};
use rmcp::service::ServiceError;
use rmcp::ErrorData as McpError;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tool_health::mcp::{ToolHealthClient, ToolsSubscription};
use tool_health::{Apply, BreakerState, ToolHealthRegistry, ToolPolicy};

use crate::config::{Launch, Secrets, ServerConfig};
use crate::names;
use crate::notify::Hosts;
use crate::progress::{ProgressRoutes, Route};
use crate::relay::{Callers, Calling};

pub(crate) use freshness::Freshness;
use listing::Listed;
pub(crate) use listing::LIST_WAIT;
use reload::InFlight;
pub(crate) use set::{Supervised, Upstreams, View};

/// A call to an upstream that is not connected waits for a (re)connection under way, or due
/// within this long; otherwise it is answered at once.
pub(crate) const RECONNECT_WAIT: Duration = Duration::from_secs(2);

/// One upstream server.
pub(crate) struct Upstream {
    /// Its name in the config: its tools' prefix and its breaker's name.
    pub(crate) name: Arc<str>,
    /// Its entry of the config, swapped by a reload (`reload.rs`).
    config: ArcSwap<ServerConfig>,
    registry: Arc<ToolHealthRegistry>,
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
    /// The next connection opens with `initialize` alone, not `server/discover` first
    /// (`connect.rs`).
    opens_with_initialize: AtomicBool,
    /// The calls in flight whose host asked for progress.
    pub(crate) progress: Arc<ProgressRoutes>,
    /// The host requests under way on it (a request of the server goes to their host,
    /// `relay.rs`).
    pub(crate) callers: Callers,
    /// The capabilities it gave at its last handshake.
    caps: Mutex<Option<ServerCapabilities>>,
    /// Its resource, template and prompt lists (`passthrough.rs`).
    kept: passthrough::Kept,
    /// The tools it marks `readOnlyHint` or `idempotentHint` (its last listing): retried once
    /// on a new connection after a transport failure.
    retryable: ArcSwap<HashSet<String>>,
    /// Calls and listings under way on a connection (a restart or a removal drains them).
    busy: InFlight,
    /// A reload gave it a new launch: the supervisor restarts it.
    relaunch: tokio::sync::Notify,
    /// The resources hosts hold subscriptions to changed: a MCP 2026-07-28 server's listen
    /// stream is opened again naming them (`listen.rs`).
    relisten: tokio::sync::Notify,
    /// A reload removed it: the supervisor stops it for good.
    removed: CancellationToken,
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
            .field("launch", &self.config().launch)
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
    /// Cancelled when a reload's drain is over: what is still under way is answered, uncounted.
    cut: CancellationToken,
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
            opens_with_initialize: AtomicBool::new(false),
            progress: Arc::default(),
            callers: Callers::default(),
            caps: Mutex::new(None),
            kept: passthrough::Kept::default(),
            retryable: ArcSwap::from_pointee(HashSet::new()),
            busy: InFlight::default(),
            relaunch: tokio::sync::Notify::new(),
            relisten: tokio::sync::Notify::new(),
            removed: CancellationToken::new(),
            config: ArcSwap::from_pointee(config),
        })
    }

    /// Its entry of the config now.
    pub(crate) fn config(&self) -> Arc<ServerConfig> {
        self.config.load_full()
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
        if self.removed.is_cancelled() {
            return None;
        }
        let mut rx = self.link.subscribe();
        let started = rx.borrow().attempts;
        self.wanted.notify_one();
        let deadline =
            tokio::time::Instant::now() + RECONNECT_WAIT + self.config().settings.connect_timeout;
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
        match self.config().launch {
            Launch::Stdio { .. } => "stdio",
            Launch::Http { .. } => "http",
        }
    }

    /// The server breaker's state now.
    pub(crate) fn breaker_state(&self) -> BreakerState {
        tool_health::mcp::server_registry(&self.registry).breaker_state(&self.name)
    }

    /// The server breaker's snapshot (`None` before anything was sent to it).
    pub(crate) fn breaker_snapshot(&self) -> Option<tool_health::ToolHealthSnapshot> {
        tool_health::mcp::server_registry(&self.registry).snapshot(&self.name)
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

    /// Calls `tool` (its own name on this server) through the breakers, for the host request
    /// `calling` (its progress, when it asked for it, routed back by `progress`). Errors are
    /// JSON-RPC errors for the host; everything the model should read is a result.
    ///
    /// A tool the server marks `readOnlyHint` or `idempotentHint` whose call met the
    /// connection's end (the server exited or restarted, the connection was reset) is called
    /// once more on the next connection, when `retryOnReconnect` is on: each attempt counts
    /// as the client counts it (the first one against the server). Never after an answer
    /// (`isError` or a JSON-RPC error) nor after a timeout: the tool may be running.
    pub(crate) async fn call(
        &self,
        tool: &str,
        mut params: CallToolRequestParams,
        progress: Option<&Route>,
        calling: Option<&Calling<'_>>,
    ) -> Result<CallToolResult, McpError> {
        let shown = format!("{}{}{tool}", self.name, names::SEPARATOR);
        params.name = tool.to_owned().into();
        // A copy for the second attempt, only for a tool that may have one.
        let mut again = (self.config().settings.retry_on_reconnect
            && self.retryable.load().contains(tool))
        .then(|| params.clone());
        loop {
            let Some(conn) = self.live().await else {
                return Ok(self.not_connected(&shown, params).await);
            };
            let client = conn.per_tool.get(tool).unwrap_or(&conn.client);
            // Counted until it ends: a reload's restart or removal waits for it (`reload.rs`).
            let busy = self.busy.enter();
            let sent = calling.map(Calling::sent);
            let tell = progress.map(Route::tell);
            let told = move |id: &RequestId, token: &ProgressToken| {
                if let Some(sent) = sent {
                    sent(id);
                }
                if let Some(tell) = tell {
                    tell(token);
                }
            };
            let call = client.call_tool_told(params, told);
            let answer = tokio::select! {
                // First: once cut, the call's future is dropped before the connection closes,
                // so nothing counts it (the client's "cancelled": no verdict).
                biased;
                () = conn.cut.cancelled() => return Ok(soft(self.cut_short(&shown))),
                r = call => r,
            };
            drop(busy);
            return match answer {
                Ok(result) => Ok(result),
                Err(ServiceError::McpError(e)) => Err(e),
                Err(ServiceError::Timeout { timeout }) => Ok(soft(format!(
                    "tool `{shown}` did not answer within {:.1} s: the gateway gave up on this \
                     call (it may still have run); retry later",
                    timeout.as_secs_f64()
                ))),
                Err(ServiceError::TransportClosed | ServiceError::TransportSend(_)) => {
                    // The connection is gone: no call goes through it any more, and the
                    // supervisor reconnects.
                    conn.broken.cancel();
                    if let Some(copy) = again.take() {
                        tracing::info!(
                            server = %self.name,
                            "the call to `{shown}` met the end of its connection; it is marked \
                             read-only or idempotent: calling it once more on the new connection"
                        );
                        params = copy;
                        continue;
                    }
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
            };
        }
    }

    /// The client, when the server is not connected and its breaker refuses (a server that
    /// keeps dying): its refusal says why and when to retry, and its gate sends nothing.
    fn refusing_client(&self) -> Option<ToolHealthClient> {
        self.refused_for()?;
        self.client
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// What a call to a server that is not connected is answered (nothing is sent).
    async fn not_connected(&self, shown: &str, params: CallToolRequestParams) -> CallToolResult {
        if self.removed.is_cancelled() {
            return soft(format!(
                "MCP server `{}` was removed from the gateway's config; tool `{shown}` was not \
                 called",
                self.name
            ));
        }
        if let Some(client) = self.refusing_client() {
            if let Ok(refused) = client.call_tool(params).await {
                return refused;
            }
        }
        // Why it is not connected is the operator's to read (`/v1/servers`, the log): the
        // error of a handshake names transport types and URLs no model needs.
        soft(format!(
            "tool `{shown}` was not called: its MCP server `{}` is not connected (the gateway is \
             connecting to it); retry in a few seconds",
            self.name
        ))
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

/// `client` with the settings of `config`: timeout, ping timeout, argument check, transport.
fn tuned(client: ToolHealthClient, config: &ServerConfig) -> ToolHealthClient {
    let s = &config.settings;
    let transport = match &config.launch {
        Launch::Stdio { .. } => tool_health::mcp::Transport::stdio(),
        Launch::Http { url, .. } => tool_health::mcp::Transport::http(url),
    };
    client
        .timeout(s.timeout)
        .ping_timeout(s.ping_timeout)
        .schema_check(s.schema_check)
        .transport(transport)
}

/// The clients of the tools with a timeout of their own (the same breakers as `client`).
fn per_tool(client: &ToolHealthClient, config: &ServerConfig) -> HashMap<String, ToolHealthClient> {
    config
        .tools
        .iter()
        .filter(|(_, t)| t.timeout != config.settings.timeout)
        .map(|(tool, t)| (tool.clone(), client.clone().timeout(t.timeout)))
        .collect()
}

/// A soft failure the model reads.
fn soft(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// The registry key of `tool` of `server`.
pub(crate) fn key(server: &str, tool: &str) -> String {
    format!("{server}{}{tool}", tool_health::mcp::KEY_SEPARATOR)
}
