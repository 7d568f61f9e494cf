//! The gateway as one MCP server to its hosts (rmcp's server side): over stdio
//! ([`stdio::StdioTransport`]) and streamable HTTP at `/mcp` (`http/mcp.rs`). One handler per
//! host session, which knows the host by an id (its logging level, its subscriptions).
//!
//! | request | answer |
//! |---|---|
//! | `initialize`, `server/discover`, `ping` | rmcp's, with the gateway's info: tools with `listChanged`, and what at least one server has of resources, prompts, completions, logging |
//! | `tools/list` | every upstream's tools under `{server}__{tool}`, without what refuses now, each with its health in `_meta`; to MCP 2026-07-28 hosts with `ttlMs` the time to the next change foreseen (`upstream/freshness.rs`) |
//! | `tools/call` | through the upstream's `ToolHealthClient`; a name that is no gateway tool is `-32602` and reaches nothing |
//! | `resources/*`, `prompts/*`, `completion/complete` | every upstream's, under the gateway's names (`resources.rs`, `prompts.rs`), through the server's breaker |
//! | `logging/setLevel` | to every server with logging (`logging.rs`) |
//! | `subscriptions/listen` | list changes and resource updates (MCP 2026-07-28 hosts) |
//!
//! What servers send back — progress, log messages, resource updates, list changes, their own
//! requests (sampling, elicitation, roots) — reaches the host it is for (`crate::progress`,
//! `crate::notify` and its `logging.rs`, `subscriptions.rs`; `crate::relay`). A host's `notifications/cancelled`
//! reaches the server: the request's future is dropped, and the library's client tells the
//! server under the id it sent.

#![allow(deprecated)] // logging and resource subscriptions are deprecated in 2026-07-28, and still what hosts use

pub(crate) mod gone;
#[cfg(unix)]
pub(crate) mod host_io;
mod prompts;
mod resources;
pub(crate) mod stdio;

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult,
    CustomRequest, CustomResult, DiscoverResult, ErrorCode, GetPromptRequestParams,
    GetPromptResponse, Implementation, InitializeRequestParams, InitializeResult,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, PromptsCapability, ReadResourceRequestParams, ReadResourceResponse,
    RequestParamsMeta as _, ResourcesCapability, ResultType, ServerCapabilities, ServerConfig,
    SetLevelRequest, SetLevelRequestParams, SubscribeRequestParams, SubscriptionFilter, Tool,
    UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};

use crate::gateway::Gateway;
use crate::names::{self, NameError};
use crate::notify::{self, Lists};

/// How long `tools/list` waits at most for upstreams still making their first connection.
const FIRST_CONNECT_WAIT: Duration = Duration::from_secs(60);

/// How long `initialize` (and `server/discover`) waits at most for upstreams still making
/// their first connection: the capabilities the gateway tells a host are those of the servers
/// it has reached (a host learns them once per session).
const INITIALIZE_WAIT: Duration = Duration::from_secs(10);

/// What the model reads about the gateway (`initialize`'s instructions).
const INSTRUCTIONS: &str = "Tools are named {server}__{tool}. A tool that is failing is left \
out of the list until it may be tried again; a call it would refuse answers \"tool temporarily \
unavailable: circuit breaker open\" with when to retry.";

/// Methods of MCP a request may name (a request of one of them that rmcp could not read had
/// params of the wrong shape).
const STANDARD_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "subscriptions/listen",
];

/// The MCP server handler of one host (a stdio session, an HTTP session): the gateway, and the
/// host's id (its logging level, its subscriptions, the requests it has under way).
#[derive(Debug)]
pub(crate) struct GatewayServer {
    gw: Arc<Gateway>,
    host: u64,
}

impl GatewayServer {
    /// The handler of a new host.
    pub(crate) fn new(gw: Arc<Gateway>) -> Self {
        let host = gw.hosts.next_id();
        Self { gw, host }
    }

    /// What the servers reached so far offer, as the gateway's capabilities: tools always
    /// (with `listChanged`); resources (with `subscribe` when one server subscribes),
    /// prompts, completions and logging when at least one server has them.
    fn capabilities(&self) -> ServerCapabilities {
        let mut caps = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        for u in self.gw.upstreams().iter() {
            let Some(c) = u.capabilities() else {
                continue;
            };
            if let Some(r) = &c.resources {
                let mine = caps.resources.get_or_insert_with(|| {
                    let mut r = ResourcesCapability::default();
                    // Servers come and go: the gateway's list changes even when theirs do not.
                    r.list_changed = Some(true);
                    r
                });
                if r.subscribe == Some(true) {
                    mine.subscribe = Some(true);
                }
            }
            if c.prompts.is_some() {
                caps.prompts.get_or_insert_with(|| {
                    let mut p = PromptsCapability::default();
                    p.list_changed = Some(true);
                    p
                });
            }
            if c.completions.is_some() {
                caps.completions.get_or_insert_with(Default::default);
            }
            if c.logging.is_some() {
                caps.logging.get_or_insert_with(Default::default);
            }
        }
        caps
    }

    /// The lists a host told these capabilities hears of.
    fn hears(caps: &ServerCapabilities) -> Lists {
        let mut lists = Lists::TOOLS;
        if caps.resources.is_some() {
            lists = lists.with(Lists::RESOURCES);
        }
        if caps.prompts.is_some() {
            lists = lists.with(Lists::PROMPTS);
        }
        lists
    }
}

impl ServerHandler for GatewayServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(self.capabilities())
            .with_server_info(Implementation::new(
                "tool-health-gateway",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(INSTRUCTIONS)
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        context.peer.set_peer_info(request.clone());
        self.gw.upstreams().wait_ready(INITIALIZE_WAIT).await;
        self.negotiate_initialize(&request)
    }

    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, McpError> {
        self.gw.upstreams().wait_ready(INITIALIZE_WAIT).await;
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            self.get_info(),
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let upstreams = self.gw.upstreams();
        upstreams.wait_ready(FIRST_CONNECT_WAIT).await;
        let mut result = ListToolsResult::with_all_items(upstreams.list().await);
        // MCP 2026-07-28's caching hints, for the hosts of that protocol (`freshness.rs`).
        if context
            .protocol_version()
            .is_some_and(|v| !v.has_initialize())
        {
            let fresh = upstreams.freshness();
            result.ttl_ms = Some(fresh.ttl_ms());
            result.cache_scope = Some(if fresh.public {
                CacheScope::Public
            } else {
                CacheScope::Private
            });
        }
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let (server, tool) = match names::split(&request.name) {
            Ok(parts) => parts,
            Err(NameError::Invalid(why)) => {
                return Err(McpError::invalid_params(
                    format!("invalid tool name: {why}"),
                    None,
                ))
            }
            Err(NameError::NoServer) => {
                return Err(McpError::invalid_params(
                    format!(
                        "unknown tool `{}`: the gateway's tools are named {{server}}__{{tool}} \
                         (list them with tools/list)",
                        names::printable(&request.name, 128)
                    ),
                    None,
                ))
            }
        };
        let Some(upstream) = self.gw.upstreams().get(server).cloned() else {
            return Err(McpError::invalid_params(
                format!(
                    "unknown tool `{}`: no MCP server `{server}` behind this gateway",
                    request.name
                ),
                None,
            ));
        };
        let tool = tool.to_owned();
        // The host's span of this call, when it says which: recorded here, so its own export
        // of it must not count again (`served.rs`).
        if let Some(parent) = context
            .meta
            .get_traceparent()
            .or_else(|| request.traceparent())
        {
            self.gw.served.served(parent);
        }
        // Progress the host asked for goes back to it, under its own token (`crate::progress`).
        let host_token = context
            .meta
            .get_progress_token()
            .or_else(|| request.progress_token());
        let route = host_token.map(|token| upstream.progress.route(context.peer.clone(), token));
        // A request of the server while it answers goes to this host (`relay.rs`).
        let calling = upstream
            .callers
            .enter(self.host, context.peer.clone(), context.id.clone());
        let call = async {
            let r = upstream
                .call(&tool, request, route.as_ref(), Some(&calling))
                .await;
            if route.is_some() {
                // The upstream's last progress came before its answer, each to a task of its
                // own: let them go out to the host first.
                for _ in 0..4 {
                    tokio::task::yield_now().await;
                }
            }
            r
        };
        tokio::select! {
            r = call => r.map(|mut result| {
                // An upstream of an older protocol answers without `resultType`; a host on
                // 2026-07-28 requires it (the Python SDK's client rejects the result without
                // it). rmcp strips it again for hosts on older versions.
                if result.result_type.is_none() {
                    result.result_type = Some(ResultType::COMPLETE);
                }
                CallToolResponse::from(result)
            }),
            () = context.ct.cancelled() => Err(McpError::internal_error("cancelled by the host", None)),
        }
    }

    /// A gateway tool as its server last listed it: rmcp checks a 2026-07-28 host's
    /// `Mcp-Param-*` headers against the arguments its `x-mcp-header` annotations name (HTTP
    /// 400, `-32020`, when they disagree).
    fn get_tool(&self, name: &str) -> Option<Tool> {
        let (server, _) = names::split(name).ok()?;
        self.gw.upstreams().get(server)?.listed_tool(name)
    }

    /// A request rmcp could not read as any MCP method: a standard method whose params do not
    /// fit (`-32602`, saying what does not fit), or an unknown method (`-32601`).
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        let method = names::printable(&request.method, 80);
        if STANDARD_METHODS.contains(&request.method.as_str()) {
            let params = request.params.clone().unwrap_or(serde_json::Value::Null);
            let detail = match request.method.as_str() {
                "tools/call" => serde_json::from_value::<CallToolRequestParams>(params)
                    .err()
                    .map(|e| e.to_string()),
                _ => None,
            }
            .unwrap_or_else(|| "they do not have the shape the method takes".to_owned());
            return Err(McpError::invalid_params(
                format!(
                    "invalid params for `{method}`: {}",
                    names::printable(&detail, 300)
                ),
                None,
            ));
        }
        Err(McpError::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("method not found: `{method}`"),
            None,
        ))
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let hears = Self::hears(&self.capabilities());
        let roots = context
            .peer
            .peer_info()
            .is_some_and(|info| info.capabilities.roots.is_some());
        self.gw.hosts.add_session(self.host, context.peer, hears);
        // The servers' roots are this host's now, when it is the only one (a stdio gateway's
        // host, which comes after the servers started): they are told to ask again.
        if roots && self.gw.hosts.sessions().len() == 1 {
            let upstreams = self.gw.upstreams();
            futures_util::future::join_all(upstreams.iter().map(|u| u.roots_changed())).await;
        }
    }

    async fn on_roots_list_changed(&self, _context: NotificationContext<RoleServer>) {
        let upstreams = self.gw.upstreams();
        futures_util::future::join_all(upstreams.iter().map(|u| u.roots_changed())).await;
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::new();
        accepted.tools_list_changed = requested.tools_list_changed;
        accepted.resources_list_changed = requested.resources_list_changed;
        accepted.prompts_list_changed = requested.prompts_list_changed;
        accepted.resource_subscriptions = requested.resource_subscriptions.as_ref().map(|uris| {
            uris.iter()
                .take(notify::subscriptions::MAX_SUBSCRIPTIONS)
                .cloned()
                .collect()
        });
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let accepted = context.accepted().clone();
        let mut hears = Lists::NONE;
        for (asked, list) in [
            (accepted.tools_list_changed, Lists::TOOLS),
            (accepted.resources_list_changed, Lists::RESOURCES),
            (accepted.prompts_list_changed, Lists::PROMPTS),
        ] {
            if asked == Some(true) {
                hears = hears.with(list);
            }
        }
        let uris = accepted.resource_subscriptions.unwrap_or_default();
        if hears == Lists::NONE && uris.is_empty() {
            gone::ended(&context).await;
            return Ok(());
        }
        let id = self.gw.hosts.add_listen(context.sink().clone(), hears);
        // The resources it names, each subscribed as a session's `resources/subscribe` is.
        let listener = Self {
            gw: Arc::clone(&self.gw),
            host: id,
        };
        for uri in &uris {
            if let Err(e) = listener.subscribe(uri).await {
                tracing::debug!(
                    "a subscriptions/listen resource was not subscribed: {}",
                    e.message
                );
            }
        }
        gone::ended(&context).await;
        for uri in &uris {
            let _ = listener.unsubscribe(uri).await;
        }
        self.gw.hosts.remove(id);
        Ok(())
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let level = self.gw.hosts.set_level(self.host, request.level);
        let upstreams = self.gw.upstreams();
        futures_util::future::join_all(
            upstreams
                .iter()
                .filter(|u| u.capabilities().is_some_and(|c| c.logging.is_some()))
                .map(|u| async move {
                    let request = rmcp::model::ClientRequest::SetLevelRequest(
                        SetLevelRequest::new(SetLevelRequestParams::new(level)),
                    );
                    // A server not connected now is given it when it connects.
                    if let Err(e) = u.request(request, "`logging/setLevel`").await {
                        tracing::debug!(server = %u.name, "logging/setLevel: {}", e.message);
                    }
                }),
        )
        .await;
        Ok(())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        self.gw.upstreams().wait_ready(FIRST_CONNECT_WAIT).await;
        Ok(self.resources().await)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        self.gw.upstreams().wait_ready(FIRST_CONNECT_WAIT).await;
        Ok(self.templates().await)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        tokio::select! {
            r = self.read(request, &context) => r,
            () = context.ct.cancelled() => Err(McpError::internal_error("cancelled by the host", None)),
        }
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        GatewayServer::subscribe(self, &request.uri).await
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        GatewayServer::unsubscribe(self, &request.uri).await
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        self.gw.upstreams().wait_ready(FIRST_CONNECT_WAIT).await;
        Ok(self.prompts().await)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        tokio::select! {
            r = self.get_prompt_of(request, &context) => r,
            () = context.ct.cancelled() => Err(McpError::internal_error("cancelled by the host", None)),
        }
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        tokio::select! {
            r = self.complete_of(request, &context) => r,
            () = context.ct.cancelled() => Err(McpError::internal_error("cancelled by the host", None)),
        }
    }
}
