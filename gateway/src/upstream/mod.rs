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

mod connect;
mod supervise;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock, Tool};
use rmcp::service::ServiceError;
use rmcp::ErrorData as McpError;
use tokio::sync::watch;
use tool_health::mcp::{ToolHealthClient, ToolsSubscription};
use tool_health::{Apply, BreakerState, ToolHealthRegistry, ToolPolicy};

use crate::config::{Launch, ServerConfig};
use crate::names;
use crate::notify::Hosts;

pub(crate) use supervise::supervise;

/// The most tool names remembered per server (a server listing more is cut off there).
const MAX_TOOLS_PER_SERVER: usize = 10_000;

/// One upstream server.
pub(crate) struct Upstream {
    /// Its name in the config: its tools' prefix and its breaker's name.
    pub(crate) name: Arc<str>,
    pub(crate) config: ServerConfig,
    registry: Arc<ToolHealthRegistry>,
    /// The registry's default breaker config (to know whether this server's differs).
    default_breaker: tool_health::CircuitBreakerConfig,
    conn: ArcSwapOption<Conn>,
    state: Mutex<State>,
    /// Set once the first connection attempt ended, either way.
    ready: watch::Sender<bool>,
    /// The tools this server listed (their policies are set).
    known: Mutex<HashSet<String>>,
    /// Tool names already warned about (not shown: a character MCP does not allow).
    warned: Mutex<HashSet<String>>,
    hosts: Arc<Hosts>,
    subscription: Mutex<Option<ToolsSubscription>>,
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
            state: Mutex::new(State::default()),
            ready: watch::channel(false).0,
            known: Mutex::new(HashSet::new()),
            warned: Mutex::new(HashSet::new()),
            hosts: Arc::clone(hosts),
            subscription: Mutex::new(None),
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
        let mut rx = self.ready.subscribe();
        let _ = tokio::time::timeout(timeout, rx.wait_for(|r| *r)).await;
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

    /// Whether this server listed `tool`.
    pub(crate) fn knows(&self, tool: &str) -> bool {
        self.known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(tool)
    }

    /// How many tools this server listed so far.
    pub(crate) fn known_count(&self) -> usize {
        self.known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Remembers the tools a listing named, giving each the server's policy when it has one of
    /// its own (a tool of the config keeps its own).
    fn learn<'a>(&self, tools: impl IntoIterator<Item = &'a str>) {
        let own = self.config.settings.breaker != self.default_breaker;
        let mut known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        for tool in tools {
            if known.len() >= MAX_TOOLS_PER_SERVER || known.contains(tool) {
                continue;
            }
            known.insert(tool.to_owned());
            if own && !self.config.tools.contains_key(tool) {
                self.registry.set_tool_policy(
                    &key(&self.name, tool),
                    ToolPolicy::from(self.config.settings.breaker.clone()),
                    Apply::Now,
                );
            }
        }
    }

    /// The tools to offer hosts now: the server's list without what refuses now (the client
    /// leaves it out), under the names hosts see. Nothing when not connected or the listing
    /// failed (logged).
    pub(crate) async fn list(&self) -> Vec<Tool> {
        let Some(conn) = self.conn.load_full() else {
            return Vec::new();
        };
        // The client's timeout bounds each page; this bounds a server that pages for ever.
        let deadline = self.config.settings.timeout.saturating_mul(2);
        let listed = match tokio::time::timeout(deadline, conn.client.list_all_tools()).await {
            Ok(Ok(listed)) => listed,
            Ok(Err(e)) => {
                tracing::warn!(server = %self.name, "MCP server `{}` could not list its tools: {e}", self.name);
                return Vec::new();
            }
            Err(_) => {
                tracing::warn!(server = %self.name, "MCP server `{}` did not list its tools within {:.1} s", self.name, deadline.as_secs_f64());
                return Vec::new();
            }
        };
        self.learn(
            listed
                .result
                .tools
                .iter()
                .map(|t| t.name.as_ref())
                .chain(listed.hidden.iter().map(|h| h.name.as_str())),
        );
        let mut tools = Vec::with_capacity(listed.result.tools.len());
        for mut tool in listed.result.tools {
            match names::shown(&self.name, &tool.name) {
                Ok(shown) => {
                    tool.name = shown.into();
                    tools.push(tool);
                }
                // `shown` never answers `NoServer`: the server's part is given.
                Err(names::NameError::Invalid(why)) => self.warn_once(&tool.name, &why),
                Err(names::NameError::NoServer) => {}
            }
        }
        tools
    }

    fn warn_once(&self, tool: &str, why: &str) {
        let mut warned = self.warned.lock().unwrap_or_else(PoisonError::into_inner);
        if warned.len() < MAX_TOOLS_PER_SERVER && warned.insert(tool.to_owned()) {
            tracing::warn!(
                server = %self.name,
                "tool {:?} of MCP server `{}` is not offered to hosts: {why}",
                names::printable(tool, 200),
                self.name
            );
        }
    }

    /// Calls `tool` (its own name on this server) through the breakers. Errors are JSON-RPC
    /// errors for the host; everything the model should read is a result.
    pub(crate) async fn call(
        &self,
        tool: &str,
        mut params: CallToolRequestParams,
    ) -> Result<CallToolResult, McpError> {
        let shown = format!("{}{}{tool}", self.name, names::SEPARATOR);
        if self.conn.load().is_none() {
            // A host that remembers its tools may call before the server is up: wait for the
            // first attempt (bounded by the connect timeout).
            self.wait_ready(self.config.settings.connect_timeout).await;
        }
        let Some(conn) = self.conn.load_full() else {
            let why = self
                .state()
                .last_error
                .map(|e| format!(": {e}"))
                .unwrap_or_default();
            return Ok(soft(format!(
                "MCP server `{}` is not connected yet (the gateway is starting it{why}); tool \
                 `{shown}` was not called",
                self.name
            )));
        };
        params.name = tool.to_owned().into();
        let client = conn.per_tool.get(tool).unwrap_or(&conn.client);
        match client.call_tool(params).await {
            Ok(result) => Ok(result),
            Err(ServiceError::McpError(e)) => Err(e),
            Err(ServiceError::Timeout { timeout }) => Ok(soft(format!(
                "tool `{shown}` did not answer within {:.1} s; the gateway gave up on this call",
                timeout.as_secs_f64()
            ))),
            Err(ServiceError::TransportClosed | ServiceError::TransportSend(_)) => {
                Ok(soft(format!(
                    "MCP server `{}` is not connected (its connection closed; the gateway is \
                     reconnecting); tool `{shown}` was not called",
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

    /// Every server's tools as hosts see them, listed concurrently, in server order.
    pub(crate) async fn list(&self) -> Vec<Tool> {
        let lists = futures_util::future::join_all(self.by_name.values().map(|u| u.list())).await;
        lists.into_iter().flatten().collect()
    }
}
