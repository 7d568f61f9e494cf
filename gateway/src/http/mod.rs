//! Everything served with `--listen ADDR` (127.0.0.1 unless the address says otherwise):
//!
//! | route | serves |
//! |---|---|
//! | `/mcp` | the gateway as a streamable HTTP MCP server (rmcp's, `mcp.rs`) |
//! | `GET /v1/tools`, `GET /v1/tools/{tool}` | the tools as JSON; one tool, the pure oracle (`api.rs`) |
//! | `POST /v1/tools/{tool}/claim`, `…/report` | the mutating gate and how the call ended |
//! | `POST /v1/tools/{tool}/{force-open,force-closed,release,reset}` | operator controls, with a token (`controls.rs`) |
//! | `GET /v1/servers`, `POST /v1/servers/{server}/{action}` | the upstreams; their breakers' controls |
//! | `GET /healthz` | 200 while the gateway serves |
//! | `GET /` (the page), `/tools`, `/events`, `/metrics` | the library's status router (`tool_health::status`) |
//! | `POST /v1/traces` | agents' OTLP/HTTP traces (protobuf or JSON), fed to the same breakers (`tool_health::receiver`) |
//!
//! Every route, the fallback included, is behind one guard (`tool_health::web::HttpGuard`,
//! `Gateway::guard`): `Host` must be a loopback name or an `--allow-host`, an `Origin` must be
//! the gateway's own or an `--allow-origin` (403 otherwise). Each route that changes state
//! takes only its declared body type or the token: a claim and a report
//! `application/json`, `/v1/traces` an OTLP type, `POST /mcp` `application/json` (rmcp's
//! check), a control `Authorization: Bearer` — no web page can send those without a CORS
//! preflight, which the gateway never approves. `docs/gateway.md`, "Who can call what".

pub(crate) mod api;
pub(crate) mod controls;
mod mcp;

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::Router;

use crate::gateway::Gateway;

/// The largest body the JSON API reads (a report is a few dozen bytes).
const API_BODY_LIMIT: usize = 64 * 1024;

/// The whole HTTP surface, behind the gateway's guard. `receiver`: the OTLP trace receiver,
/// mounted at `/v1/traces` (its own body limits; built with the same guard); the gateway
/// serves the advisory gate (`/v1/tools/{tool}`, `…/claim`) itself.
pub(crate) fn router(
    gw: &Arc<Gateway>,
    receiver: Option<&tool_health::receiver::Receiver>,
) -> Router {
    let api = Router::new()
        .route("/healthz", get(api::healthz))
        .route("/v1/tools", get(api::tools))
        .route("/v1/tools/{tool}", get(api::tool))
        .route("/v1/tools/{tool}/claim", post(api::claim))
        .route("/v1/tools/{tool}/report", post(api::report))
        .route("/v1/tools/{tool}/{action}", post(controls::tool_control))
        // The status page's buttons.
        .route("/tools/{tool}/{action}", post(controls::tool_control))
        .route("/v1/servers", get(api::servers))
        .route(
            "/v1/servers/{server}/{action}",
            post(controls::server_control),
        )
        .layer(DefaultBodyLimit::max(API_BODY_LIMIT))
        .with_state(Arc::clone(gw));
    let api = api.merge(mcp::router(gw));
    let api = match receiver {
        Some(r) => api.merge(r.router()),
        None => api,
    };
    gw.guard.apply(api.fallback_service(gw.status.router()))
}
