//! The advisory gate over HTTP, for agents that learn their tools' health from their own
//! spans and want to ask before dispatching. The same contract as `tool-health-gateway`'s
//! gate (`docs/receiver.md`, "The advisory gate"; the gateway's tests run one suite against
//! both):
//!
//! | request | answer (JSON) |
//! |---|---|
//! | `GET /v1/tools/{tool}` | the pure oracle: `200` with the tool's object (the status page's shape: `available`, `retry_after_ms`, `state`, `status`, `score`, `calls`…) — never takes the probe; `404` for a tool never seen, with the same object, fresh and `"tracked": false` (nothing is created) |
//! | `POST /v1/tools/{tool}/claim` (`Content-Type: application/json`, body empty or `{}`) | the gate ([`ToolHealthRegistry::check`]): `200` with `decision` = `allowed` or `probe` (with its `probe_id` and `lease_ms`); `503` with `decision` = `refused`, `retry_after_ms`, `refused_by`, `message` and a `Retry-After` header |
//!
//! `400` for a tool name longer than the limit (the smaller of
//! [`Limits::max_name_len`](super::Limits::max_name_len) and the registry's) or empty, or a
//! claim body that is not a JSON object; `415` for a claim without its content type (a web
//! page could send it without a preflight).
//!
//! A claimed probe is resolved by the call's own span when it reaches the receiver (a span
//! that ended after the claim is the probe's verdict), or given back by the probe lease
//! (`probe_timeout`) when it never comes.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};

use crate::call::GateDecision;
use crate::registry::ToolHealthRegistry;
use crate::status::snapshot;

#[derive(Debug, Clone)]
struct Gate {
    registry: Arc<ToolHealthRegistry>,
    max_name_len: usize,
}

/// Milliseconds, rounded up (a retry time is never early); `null` for "not foreseeable".
fn millis(d: Duration) -> Value {
    if d == Duration::MAX {
        Value::Null
    } else {
        let n = d.as_nanos().div_ceil(1_000_000);
        Value::from(u64::try_from(n).unwrap_or(u64::MAX))
    }
}

fn json_response(status: StatusCode, body: String) -> Response {
    (
        status,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        body,
    )
        .into_response()
}

fn error(status: StatusCode, message: &str) -> Response {
    json_response(status, json!({ "error": message }).to_string())
}

impl Gate {
    /// `None` for a name in bounds, else the `400` answer.
    fn bad_name(&self, tool: &str) -> Option<Response> {
        (tool.is_empty() || tool.len() > self.max_name_len).then(|| {
            error(
                StatusCode::BAD_REQUEST,
                &format!("tool name: 1 to {} bytes", self.max_name_len),
            )
        })
    }
}

/// `GET /v1/tools/{tool}`: the pure oracle.
async fn oracle(State(gate): State<Gate>, Path(tool): Path<String>) -> Response {
    if let Some(r) = gate.bad_name(&tool) {
        return r;
    }
    match snapshot::tool_object(&gate.registry, &tool) {
        Some(mut object) => {
            // `"tracked": true` last, as in the gateway's documents.
            object.insert_str(object.len() - 1, ",\"tracked\":true");
            json_response(StatusCode::OK, object)
        }
        // Never seen: fresh, and nothing is created for it.
        None => json_response(
            StatusCode::NOT_FOUND,
            crate::status::untracked_tool_json(&tool),
        ),
    }
}

/// `POST /v1/tools/{tool}/claim`: the gate.
async fn claim(
    State(gate): State<Gate>,
    Path(tool): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(refusal) = crate::web::require_json(&headers) {
        return refusal.into_response();
    }
    if let Some(r) = gate.bad_name(&tool) {
        return r;
    }
    if !body.iter().all(u8::is_ascii_whitespace)
        && !matches!(serde_json::from_slice::<Value>(&body), Ok(Value::Object(_)))
    {
        return error(
            StatusCode::BAD_REQUEST,
            "the body of a claim is empty or a JSON object (`{}`)",
        );
    }
    match gate.registry.check(&tool) {
        GateDecision::Allowed(_) => json_response(
            StatusCode::OK,
            json!({"tool": tool, "decision": "allowed"}).to_string(),
        ),
        GateDecision::Probe(permit) => {
            let lease = gate.registry.tool_policy(&tool).breaker.probe_timeout;
            json_response(
                StatusCode::OK,
                json!({
                    "tool": tool,
                    "decision": "probe",
                    "probe_id": permit.generation().to_string(),
                    "lease_ms": millis(lease),
                })
                .to_string(),
            )
        }
        GateDecision::Refused { retry_after } => {
            let mut r = json_response(
                StatusCode::SERVICE_UNAVAILABLE,
                json!({
                    "tool": tool,
                    "decision": "refused",
                    "refused_by": "tool",
                    "retry_after_ms": millis(retry_after),
                    "message": crate::call::REFUSAL_MESSAGE,
                })
                .to_string(),
            );
            if retry_after != Duration::MAX {
                // Whole seconds, rounded up: never earlier than the gate's instant.
                let secs = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
                if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
                    r.headers_mut().insert(header::RETRY_AFTER, v);
                }
            }
            r
        }
    }
}

/// The advisory gate's router (see the [module docs](self)): `GET /v1/tools/{tool}` and
/// `POST /v1/tools/{tool}/claim` on `registry`, tool names bounded by `max_name_len` bytes.
pub(super) fn router(registry: Arc<ToolHealthRegistry>, max_name_len: usize) -> Router {
    let max_name_len = max_name_len.min(registry.max_name_len());
    Router::new()
        .route("/v1/tools/{tool}", get(oracle))
        .route("/v1/tools/{tool}/claim", post(claim))
        .with_state(Gate {
            registry,
            max_name_len,
        })
}
