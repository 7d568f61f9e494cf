//! The advisory gate over HTTP, for agents that learn their tools' health from their own
//! spans and want to ask before dispatching:
//!
//! | request | answer (JSON) |
//! |---|---|
//! | `GET /v1/tools/{tool}` | the pure oracle: `available`, `state`, `status`, `score`, counts and `retry_after` (seconds, when refused) — never takes the probe, never creates a tool |
//! | `POST /v1/tools/{tool}/claim` | the gate ([`ToolHealthRegistry::check`]): `decision` = `allowed`, `probe` (with its `probe_id`: the breaker generation it was granted in) or `refused` (with `retry_after` seconds and a `Retry-After` header) |
//!
//! Both answer `200` whatever the verdict (the verdict is the body's `decision` /
//! `available`; a refusal also carries `Retry-After`), `400` for a tool name longer than
//! [`Limits::max_name_len`](super::Limits::max_name_len) or empty.
//!
//! A claimed probe is resolved by the call's own span when it reaches the receiver (a span
//! that ended after the claim is the probe's verdict), or given back by the probe lease
//! (`probe_timeout`) when it never comes.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};

use crate::call::GateDecision;
use crate::registry::ToolHealthRegistry;

#[derive(Debug, Clone)]
struct Gate {
    registry: Arc<ToolHealthRegistry>,
    max_name_len: usize,
}

/// Seconds for JSON: fractional, `null` for "not in any foreseeable time".
fn seconds(d: Duration) -> Value {
    if d == Duration::MAX {
        Value::Null
    } else {
        json!(d.as_secs_f64())
    }
}

fn json_response(status: StatusCode, body: &Value, retry: Option<Duration>) -> Response {
    let mut response = (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body.to_string(),
    )
        .into_response();
    if let Some(d) = retry.filter(|d| *d != Duration::MAX) {
        // Whole seconds, rounded up: never earlier than the gate's instant.
        let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
        if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
            response.headers_mut().insert(header::RETRY_AFTER, v);
        }
    }
    response
}

impl Gate {
    /// `None` for a name in bounds, else the `400` answer.
    fn bad_name(&self, tool: &str) -> Option<Response> {
        (tool.is_empty() || tool.len() > self.max_name_len).then(|| {
            json_response(
                StatusCode::BAD_REQUEST,
                &json!({
                    "error": format!("a tool name is 1 to {} bytes long", self.max_name_len)
                }),
                None,
            )
        })
    }
}

/// `GET /v1/tools/{tool}`: the pure oracle.
async fn oracle(State(gate): State<Gate>, Path(tool): Path<String>) -> Response {
    if let Some(r) = gate.bad_name(&tool) {
        return r;
    }
    let registry = &gate.registry;
    let available = registry.is_tool_available(&tool);
    let body = match registry.snapshot(&tool) {
        Some(s) => json!({
            "tool": tool,
            "available": available,
            "state": s.breaker.to_string(),
            "status": s.status.to_string(),
            "score": s.score,
            "total_calls": s.total_calls,
            "success_count": s.success_count,
            "failure_count": s.failure_count,
            "ignored_count": s.ignored_count,
            "consecutive_failures": s.consecutive_failures,
            "retry_after": s.retry_after.map(seconds),
        }),
        // Never seen: fresh, and nothing is created for it.
        None => json!({
            "tool": tool,
            "available": available,
            "state": "closed",
            "status": "healthy",
            "score": 1.0,
            "total_calls": 0,
            "success_count": 0,
            "failure_count": 0,
            "ignored_count": 0,
            "consecutive_failures": 0,
            "retry_after": null,
        }),
    };
    json_response(StatusCode::OK, &body, None)
}

/// `POST /v1/tools/{tool}/claim`: the gate.
async fn claim(State(gate): State<Gate>, Path(tool): Path<String>) -> Response {
    if let Some(r) = gate.bad_name(&tool) {
        return r;
    }
    match gate.registry.check(&tool) {
        GateDecision::Allowed(_) => json_response(
            StatusCode::OK,
            &json!({"tool": tool, "decision": "allowed"}),
            None,
        ),
        GateDecision::Probe(permit) => json_response(
            StatusCode::OK,
            &json!({
                "tool": tool,
                "decision": "probe",
                "probe_id": permit.generation().to_string(),
            }),
            None,
        ),
        GateDecision::Refused { retry_after } => json_response(
            StatusCode::OK,
            &json!({
                "tool": tool,
                "decision": "refused",
                "retry_after": seconds(retry_after),
                "message": crate::call::REFUSAL_MESSAGE,
            }),
            Some(retry_after),
        ),
    }
}

/// The advisory gate's router (see the [module docs](self)): `GET /v1/tools/{tool}` and
/// `POST /v1/tools/{tool}/claim` on `registry`, tool names bounded by `max_name_len` bytes.
pub(super) fn router(registry: Arc<ToolHealthRegistry>, max_name_len: usize) -> Router {
    Router::new()
        .route("/v1/tools/{tool}", get(oracle))
        .route("/v1/tools/{tool}/claim", post(claim))
        .with_state(Gate {
            registry,
            max_name_len,
        })
}
