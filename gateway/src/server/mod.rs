//! The gateway as one MCP server to its hosts (rmcp's server side): over stdio
//! ([`stdio::StdioTransport`]) and streamable HTTP at `/mcp` (`http/mcp.rs`).
//!
//! | request | answer |
//! |---|---|
//! | `initialize`, `server/discover`, `ping` | rmcp's, with the gateway's info: tools with `listChanged` |
//! | `tools/list` | every upstream's tools under `{server}__{tool}`, without what refuses now; to MCP 2026-07-28 hosts with `ttlMs` the time to the next change foreseen (`upstream/freshness.rs`) |
//! | `tools/call` | through the upstream's `ToolHealthClient`; a name that is no gateway tool is `-32602` and reaches nothing |
//! | `subscriptions/listen` | `toolsListChanged` accepted (MCP 2026-07-28 hosts) |
//! | resources, prompts, completion | declined: `-32601` saying the gateway serves tools only |
//!
//! **Why resources and prompts are declined.** Breakers guard calls a model makes; resources
//! and prompts are read by the host, by URI or name, with no model retry storm to stop. Passing
//! them through would need a second naming scheme (URIs of several servers in one space) for
//! no gain in health: a host that needs a server's resources connects to it directly.

pub(crate) mod gone;
#[cfg(unix)]
pub(crate) mod host_io;
pub(crate) mod stdio;

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult,
    CustomRequest, CustomResult, ErrorCode, GetPromptRequestParams, GetPromptResponse,
    Implementation, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse,
    RequestParamsMeta as _, ResultType, ServerCapabilities, ServerConfig, SubscriptionFilter, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};

use crate::gateway::Gateway;
use crate::names::{self, NameError};

/// How long `tools/list` waits at most for upstreams still making their first connection.
const FIRST_CONNECT_WAIT: Duration = Duration::from_secs(60);

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

/// The MCP server handler: cheap to clone (one per HTTP session).
#[derive(Clone, Debug)]
pub(crate) struct GatewayServer {
    gw: Arc<Gateway>,
}

impl GatewayServer {
    pub(crate) fn new(gw: Arc<Gateway>) -> Self {
        Self { gw }
    }
}

fn declined(what: &str) -> McpError {
    McpError::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!(
            "tool-health-gateway serves tools only: {what} of its MCP servers are not passed \
             through (connect the host to a server directly for them)"
        ),
        None,
    )
}

impl ServerHandler for GatewayServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new(
            "tool-health-gateway",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(INSTRUCTIONS)
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
        // Progress the host asked for goes back to it, under its own token (`progress.rs`).
        let host_token = context
            .meta
            .get_progress_token()
            .or_else(|| request.progress_token());
        let route = host_token.as_ref().map(|_| upstream.progress.route());
        let tell = route
            .as_ref()
            .zip(host_token)
            .map(|(r, token)| r.tell(context.peer.clone(), token));
        let call = async {
            let r = upstream.call(&tool, request, tell).await;
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
        self.gw.hosts.add_session(context.peer);
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::new();
        accepted.tools_list_changed = requested.tools_list_changed;
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        if context.accepted().tools_list_changed != Some(true) {
            gone::ended(&context).await;
            return Ok(());
        }
        let id = self.gw.hosts.add_listen(context.sink().clone());
        gone::ended(&context).await;
        self.gw.hosts.remove(id);
        Ok(())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        Err(declined("resources"))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Err(declined("resource templates"))
    }

    async fn read_resource(
        &self,
        _request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        Err(declined("resources"))
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        Err(declined("prompts"))
    }

    async fn get_prompt(
        &self,
        _request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        Err(declined("prompts"))
    }

    async fn complete(
        &self,
        _request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        Err(declined("completions"))
    }
}
