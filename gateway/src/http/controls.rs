//! Operator controls over HTTP, only with a bearer token configured: force a tool (or a whole
//! server) open or closed, release the control, reset its numbers.
//!
//! | route | does |
//! |---|---|
//! | `POST /v1/tools/{tool}/force-open?seconds=N` | every call refused for N seconds (1 to 604,800; 300 by default) |
//! | `POST /v1/tools/{tool}/force-closed` | every call let through (the breaker still runs, for the record) |
//! | `POST /v1/tools/{tool}/release` | the breaker decides again |
//! | `POST /v1/tools/{tool}/reset` | the tool's numbers and breaker start afresh |
//! | `POST /v1/servers/{server}/…` | the same on a server's breaker (every tool of it) |
//!
//! The status page's buttons post to `/tools/{tool}/…`, the same handler. With fleet mode a
//! tool's control reaches every replica (servers' breakers are each replica's own). The token
//! comes from `--control-token-file` or `TOOL_HEALTH_GATEWAY_TOKEN` (16 to 256 bytes of
//! visible ASCII), is compared in time that depends only on its length, and is never logged
//! or echoed. A control on a tool that is not tracked is 404: no control creates a tool.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::Response;

use tool_health::status::{DEFAULT_FORCE_OPEN_SECS, MAX_FORCE_OPEN_SECS};

use super::api::{self, error};
use crate::gateway::Gateway;

/// A control action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    ForceOpen(Duration),
    ForceClosed,
    Release,
    Reset,
}

impl Action {
    // The error is the handler's whole answer (a 404 or 400), as in `api::resolve`.
    #[allow(clippy::result_large_err)]
    fn parse(name: &str, query: Option<&str>) -> Result<Self, Response> {
        match name {
            "force-open" => {
                let mut seconds = DEFAULT_FORCE_OPEN_SECS;
                for pair in query.unwrap_or("").split('&') {
                    if let Some(v) = pair.strip_prefix("seconds=") {
                        seconds = v
                            .parse()
                            .ok()
                            .filter(|s| (1..=MAX_FORCE_OPEN_SECS).contains(s))
                            .ok_or_else(|| {
                                error(
                                    StatusCode::BAD_REQUEST,
                                    &format!("query parameter `seconds`: a whole number from 1 to {MAX_FORCE_OPEN_SECS}"),
                                )
                            })?;
                    }
                }
                Ok(Self::ForceOpen(Duration::from_secs(seconds)))
            }
            "force-closed" => Ok(Self::ForceClosed),
            "release" => Ok(Self::Release),
            "reset" => Ok(Self::Reset),
            _ => Err(error(
                StatusCode::NOT_FOUND,
                "no such route: the controls are force-open, force-closed, release and reset",
            )),
        }
    }
}

/// 404 when controls are off, 401 without the token; `None` when the request may go on.
fn authorize(gw: &Gateway, headers: &HeaderMap) -> Option<Response> {
    let Some(token) = &gw.token else {
        return Some(error(
            StatusCode::NOT_FOUND,
            "controls are off: start the gateway with --control-token-file FILE (or \
             TOOL_HEALTH_GATEWAY_TOKEN) to turn them on",
        ));
    };
    if token.authorizes(headers) {
        return None;
    }
    let mut r = error(
        StatusCode::UNAUTHORIZED,
        "controls need `Authorization: Bearer <token>`",
    );
    r.headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    Some(r)
}

/// `POST /v1/tools/{tool}/{action}` (and the page's `/tools/{tool}/{action}`).
pub(crate) async fn tool_control(
    State(gw): State<Arc<Gateway>>,
    Path((tool, action)): Path<(String, String)>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    if let Some(r) = authorize(&gw, &headers) {
        return r;
    }
    let action = match Action::parse(&action, uri.query()) {
        Ok(a) => a,
        Err(r) => return r,
    };
    let key = match api::resolve(&gw, &tool) {
        Ok(r) => r.key,
        Err(r) => return r,
    };
    if gw.registry.snapshot(&key).is_none() {
        return error(
            StatusCode::NOT_FOUND,
            "no such tool tracked (no control creates a tool)",
        );
    }
    let shown = crate::names::printable(&key, 200);
    let mut fleet_error = None;
    if let Some(fleet) = &gw.fleet {
        let r = match action {
            Action::ForceOpen(d) => fleet.force_open(&key, Some(d)).await,
            Action::ForceClosed => fleet.force_closed(&key).await,
            Action::Release => fleet.release_control(&key).await,
            Action::Reset => fleet.reset(&key).await,
        };
        if let Err(e) = r {
            tracing::warn!("the fleet did not take the control on `{shown}` (it holds on this replica only): {e}");
            fleet_error = Some(e.to_string());
        }
    } else {
        match action {
            Action::ForceOpen(d) => {
                gw.registry.force_open_for(&key, d);
            }
            Action::ForceClosed => {
                gw.registry.force_closed(&key);
            }
            Action::Release => gw.registry.release_control(&key),
            Action::Reset => gw.registry.reset(&key),
        }
    }
    tracing::info!(tool = %shown, "operator control on `{shown}`: {action:?}");
    // What hosts are offered may have changed (a control is no transition of the breaker's).
    gw.hosts.changed();
    let mut doc = api::tool_document(&gw, &key);
    if let (Some(e), Some(obj)) = (fleet_error, doc.as_object_mut()) {
        obj.insert("fleet_error".into(), e.into());
    }
    api::json(StatusCode::OK, &doc)
}

/// `POST /v1/servers/{server}/{action}`: the same on a server's breaker.
pub(crate) async fn server_control(
    State(gw): State<Arc<Gateway>>,
    Path((server, action)): Path<(String, String)>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    if let Some(r) = authorize(&gw, &headers) {
        return r;
    }
    let action = match Action::parse(&action, uri.query()) {
        Ok(a) => a,
        Err(r) => return r,
    };
    let Some(upstream) = gw.upstreams().get(&server).cloned() else {
        return error(
            StatusCode::NOT_FOUND,
            "no such MCP server behind this gateway",
        );
    };
    let servers = tool_health::mcp::server_registry(&gw.registry);
    match action {
        Action::ForceOpen(d) => {
            servers.force_open_for(&upstream.name, d);
        }
        Action::ForceClosed => {
            servers.force_closed(&upstream.name);
        }
        Action::Release => servers.release_control(&upstream.name),
        Action::Reset => servers.reset(&upstream.name),
    }
    tracing::info!(server = %upstream.name, "operator control on MCP server `{}`: {action:?}", upstream.name);
    // A forced change is no transition of the tools': tell the hosts to list again.
    gw.hosts.changed();
    api::json(StatusCode::OK, &api::server_document(&upstream))
}
