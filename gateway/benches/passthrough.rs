//! What the gateway's benches share: the rmcp upstream (the tests' fixture, this bench binary
//! run with its role), and the pass-through proxy the gateway is measured against — an rmcp
//! `ServerHandler` whose `tools/list` and `tools/call` forward to an rmcp client of the
//! upstream, served over stdio or rmcp's `StreamableHttpService` in axum (with `TCP_NODELAY`,
//! as the HTTP servers hosts meet set it): the parts the gateway is built from, without
//! breakers.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ListToolsResult, PaginatedRequestParams, ResultType,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::{Peer, RequestContext};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService, TokioChildProcess};
use rmcp::{ErrorData, RoleClient, RoleServer, ServerHandler, ServiceExt};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

/// Which process this binary is.
pub(crate) const ROLE: &str = "OVERHEAD_ROLE";

pub(crate) fn exe() -> String {
    std::env::current_exe()
        .expect("this binary")
        .display()
        .to_string()
}

/// A command that runs this binary as the rmcp upstream.
pub(crate) fn upstream_command() -> tokio::process::Command {
    let mut c = tokio::process::Command::new(exe());
    c.env(super::fixture::ROLE, "rmcp-fixture").env_remove(ROLE);
    c
}

// ---------------------------------------------------------------------------------------
// The pass-through proxy
// ---------------------------------------------------------------------------------------

/// Forwards `tools/list` and `tools/call` to the upstream, nothing else.
#[derive(Clone)]
pub(crate) struct Proxy {
    upstream: Peer<RoleClient>,
}

pub(crate) fn forwarded(e: rmcp::service::ServiceError) -> ErrorData {
    match e {
        rmcp::service::ServiceError::McpError(e) => e,
        other => ErrorData::internal_error(other.to_string(), None),
    }
}

impl ServerHandler for Proxy {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut result = self.upstream.list_tools(request).await.map_err(forwarded)?;
        if result.result_type.is_none() {
            result.result_type = Some(ResultType::COMPLETE);
        }
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.upstream
            .call_tool(request)
            .await
            .map(|mut result| {
                // As the gateway does: a 2026-07-28 host (the Python SDK client) requires
                // `resultType`; rmcp strips it again for hosts on older versions.
                if result.result_type.is_none() {
                    result.result_type = Some(ResultType::COMPLETE);
                }
                CallToolResponse::from(result)
            })
            .map_err(forwarded)
    }
}

/// The proxy process: its upstream over stdio, its host over stdio or HTTP.
pub(crate) fn serve_proxy(http: bool) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async move {
        let transport = TokioChildProcess::new(upstream_command()).expect("start the upstream");
        let upstream = ().serve(transport).await.expect("the upstream's handshake");
        let proxy = Proxy {
            upstream: upstream.peer().clone(),
        };
        if http {
            let service = StreamableHttpService::new(
                move || Ok(proxy.clone()),
                Arc::new(LocalSessionManager::default()),
                StreamableHttpServerConfig::default(),
            );
            let router = axum::Router::new().route_service("/mcp", service);
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            eprintln!("listening on http://{}", listener.local_addr().unwrap());
            // As every HTTP server hosts meet (Node's, uvicorn, the gateway): answers go out
            // when written, not after the client's delayed ACK.
            axum::serve(tool_health::web::nodelay(listener), router)
                .await
                .unwrap();
        } else {
            let running = proxy
                .serve((tokio::io::stdin(), tokio::io::stdout()))
                .await
                .expect("the host's handshake");
            let _ = running.waiting().await;
        }
        drop(upstream);
    });
}

/// Waits for `listening on http://ADDR` on `child`'s stderr; the URL of `/mcp` there.
pub(crate) async fn http_url(child: &mut tokio::process::Child) -> String {
    let stderr = child.stderr.take().expect("stderr piped");
    let mut lines = BufReader::new(stderr).lines();
    let addr = tokio::time::timeout(Duration::from_secs(60), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(rest) = line.split("listening on http://").nth(1) {
                // `127.0.0.1:PORT` (the gateway's line goes on with `: MCP at /mcp, …`).
                let addr: String = rest.chars().take_while(|c| !c.is_whitespace()).collect();
                return addr.trim_end_matches(':').to_owned();
            }
        }
        panic!("no `listening on` line");
    })
    .await
    .expect("listening in time");
    // Keep draining stderr so the child never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    format!("http://{addr}/mcp")
}

pub(crate) fn gateway_config() -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("overhead-bench");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("gateway.json");
    // `OVERHEAD_GATEWAY_HEALTH`: a `health` section for experiments (`{"schemaCheck": "off"}`);
    // the recorded figures use the defaults.
    let health: serde_json::Value = std::env::var("OVERHEAD_GATEWAY_HEALTH")
        .ok()
        .and_then(|h| serde_json::from_str(&h).ok())
        .unwrap_or_else(|| json!({}));
    let config = json!({
        "mcpServers": {"rs": {"command": exe(), "args": [], "env": {super::fixture::ROLE: "rmcp-fixture"}}},
        "health": health,
    });
    std::fs::write(&path, config.to_string()).unwrap();
    path
}

pub(crate) fn gateway_command(http: bool) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_tool-health-gateway"));
    c.arg("--config").arg(gateway_config());
    if http {
        c.args(["--no-stdio", "--listen", "127.0.0.1:0"]);
    }
    c.env("TOOL_HEALTH_GATEWAY_LOG", "warn,tool_health_gateway=info")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
        .env_remove("TOOL_HEALTH_FLEET_URL");
    c
}
