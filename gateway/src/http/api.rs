//! The JSON API: the tools (the status page's shape, `docs/status.md`), one tool as a pure
//! oracle, the claim (the mutating gate) and its report, the servers, `/healthz`.
//!
//! A tool is named in a path by its registry key (`py/flaky`, the `/` percent-encoded as
//! `%2F`), by the name hosts see (`py__flaky`), or — for an agent's own tool that no MCP server
//! serves — by any other name (at most 1,024 bytes).
//!
//! In the gateway, a tool's `available` and `retry_after_ms` are the whole gateway's verdict:
//! a tool of a server whose breaker refuses is not available whatever its own breaker says
//! (`refused_by` says which: `tool` or `server`). `state`, `breaker` and the counts stay the
//! tool's own.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};
use tool_health::status::ToolsQuery;
use tool_health::{CallOutcome, CallReport, GateDecision, REFUSAL_MESSAGE};

use crate::gateway::Gateway;
use crate::names;
use crate::upstream::Upstream;

/// The longest tool name a route accepts, in bytes.
const MAX_NAME: usize = 1024;

pub(crate) fn json(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        body.to_string(),
    )
        .into_response()
}

pub(crate) fn error(status: StatusCode, message: &str) -> Response {
    json(status, &json!({ "error": message }))
}

/// A tool named in a path.
pub(crate) struct Resolved {
    /// Its registry key.
    pub(crate) key: String,
    /// Its server, when it is a gateway tool.
    pub(crate) upstream: Option<Arc<Upstream>>,
}

/// The key of the tool a path names (see the module docs), or a 400: empty, or a key longer
/// than the registry takes (`ToolHealthRegistry::max_name_len`, 256 bytes) — a name the gate
/// would refuse for its length is a caller's error, never the breaker's refusal.
// The error is the handler's whole answer (a 400), built once per bad request: boxing it
// would buy nothing.
#[allow(clippy::result_large_err)]
pub(crate) fn resolve(gw: &Gateway, raw: &str) -> Result<Resolved, Response> {
    let bad = || {
        error(
            StatusCode::BAD_REQUEST,
            &format!(
                "tool name: 1 to {} bytes (as the registry keys it: `server/tool` for an MCP \
                 server's tool)",
                gw.registry.max_name_len()
            ),
        )
    };
    if raw.is_empty() || raw.len() > MAX_NAME {
        return Err(bad());
    }
    let upstreams = gw.upstreams();
    let resolved = if let Some((server, _)) = raw.split_once(tool_health::mcp::KEY_SEPARATOR) {
        Resolved {
            key: raw.to_owned(),
            upstream: upstreams.get(server).cloned(),
        }
    } else if let Some(key) = names::key_of(raw, |s| upstreams.get(s).is_some()) {
        let server = key
            .split_once(tool_health::mcp::KEY_SEPARATOR)
            .map_or("", |(s, _)| s);
        Resolved {
            upstream: upstreams.get(server).cloned(),
            key,
        }
    } else {
        Resolved {
            key: raw.to_owned(),
            upstream: None,
        }
    };
    if gw.registry.validate_name(&resolved.key).is_err() {
        return Err(bad());
    }
    Ok(resolved)
}

/// Milliseconds, rounded up (a retry time is never early); `null` for "not foreseeable".
fn ms(d: Duration) -> Value {
    if d == Duration::MAX {
        Value::Null
    } else {
        let n = d.as_nanos().div_ceil(1_000_000);
        Value::from(u64::try_from(n).unwrap_or(u64::MAX))
    }
}

/// Adds the gateway's fields to a tool object of the status JSON: `name` (as hosts see it)
/// and `server`. `available`, `retry_after_ms` and `refused_by` already count the server's
/// breaker in: the servers are the status page's groups (`crate::gateway::server_groups`).
fn augment(gw: &Gateway, obj: &mut Map<String, Value>) {
    let key = obj.get("tool").and_then(Value::as_str).unwrap_or("");
    let upstream = key
        .split_once(tool_health::mcp::KEY_SEPARATOR)
        .and_then(|(s, t)| gw.upstreams().get(s).cloned().map(|u| (u, t)));
    let (name, server) = match upstream {
        Some((u, tool)) => (
            names::shown(&u.name, tool).map_or(Value::Null, Value::from),
            Value::from(&*u.name),
        ),
        None => (Value::Null, Value::Null),
    };
    obj.insert("name".into(), name);
    obj.insert("server".into(), server);
}

/// One tool's document: the status object (augmented) when tracked, else a fresh one.
pub(crate) fn tool_document(gw: &Gateway, key: &str) -> Value {
    let mut doc: Value = match gw.status.tool_json(key) {
        Some(text) => serde_json::from_str(&text).unwrap_or(Value::Null),
        None => {
            // Never tracked: the library's fresh object (the receiver's gate answers the same),
            // and only its server's breaker can refuse it.
            let text = tool_health::status::untracked_tool_json(key);
            let mut doc: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            let refused = key
                .split_once(tool_health::mcp::KEY_SEPARATOR)
                .and_then(|(s, _)| gw.upstreams().get(s).and_then(|u| u.refused_for()));
            if let Some(obj) = doc.as_object_mut() {
                obj.insert("available".into(), Value::Bool(refused.is_none()));
                obj.insert("retry_after_ms".into(), refused.map_or(Value::Null, ms));
                obj.insert(
                    "refused_by".into(),
                    refused.map_or(Value::Null, |_| Value::from("server")),
                );
            }
            doc
        }
    };
    if let Some(obj) = doc.as_object_mut() {
        obj.entry("tracked").or_insert(Value::Bool(true));
        augment(gw, obj);
    }
    doc
}

/// `GET /v1/tools`: the status page's `/tools` document, every tool augmented.
pub(crate) async fn tools(State(gw): State<Arc<Gateway>>, uri: Uri) -> Response {
    let query = match ToolsQuery::parse(uri.query().unwrap_or("")) {
        Ok(q) => q,
        Err(e) => return error(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    let mut doc: Value = serde_json::from_str(&gw.status.tools_json(&query)).unwrap_or(Value::Null);
    if let Some(tools) = doc.get_mut("tools").and_then(Value::as_array_mut) {
        for t in tools {
            if let Some(obj) = t.as_object_mut() {
                augment(&gw, obj);
            }
        }
    }
    json(StatusCode::OK, &doc)
}

/// `GET /v1/tools/{tool}`: available or not, and until when — the pure oracle (it takes no
/// probe and creates nothing). 404 for a name that is neither tracked nor a tool an upstream
/// listed, and for a tool its server no longer lists (the body still says `available: true`:
/// nothing refuses it).
pub(crate) async fn tool(State(gw): State<Arc<Gateway>>, Path(tool): Path<String>) -> Response {
    let r = match resolve(&gw, &tool) {
        Ok(r) => r,
        Err(r) => return r,
    };
    let known = r.upstream.as_ref().is_some_and(|u| {
        r.key
            .split_once(tool_health::mcp::KEY_SEPARATOR)
            .is_some_and(|(_, t)| u.knows(t))
    });
    // A tool its server listed once and lists no more is no tool, whatever it counted.
    let dropped = !known && r.upstream.as_ref().is_some_and(|u| u.has_listed());
    let doc = tool_document(&gw, &r.key);
    if (doc.get("tracked") == Some(&Value::Bool(false)) || dropped) && !known {
        let mut doc = doc;
        if let Some(obj) = doc.as_object_mut() {
            obj.insert("error".into(), "no such tool tracked".into());
        }
        return json(StatusCode::NOT_FOUND, &doc);
    }
    json(StatusCode::OK, &doc)
}

/// `POST /v1/tools/{tool}/claim` (`Content-Type: application/json`; the body empty or a JSON
/// object, `{}`): the gate. `allowed`, `probe` (with the id to report it with) or `refused`
/// (503 with `Retry-After`). A tool of a server whose breaker refuses is refused without
/// touching the tool's breaker.
pub(crate) async fn claim(
    State(gw): State<Arc<Gateway>>,
    Path(tool): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    // A web page cannot send this content type without the browser asking first.
    if let Err(refusal) = tool_health::web::require_json(&headers) {
        return refusal.into_response();
    }
    let r = match resolve(&gw, &tool) {
        Ok(r) => r,
        Err(r) => return r,
    };
    if !body.iter().all(u8::is_ascii_whitespace)
        && !matches!(serde_json::from_slice::<Value>(&body), Ok(Value::Object(_)))
    {
        return error(
            StatusCode::BAD_REQUEST,
            "the body of a claim is empty or a JSON object (`{}`)",
        );
    }
    if let Some(wait) = r.upstream.as_ref().and_then(|u| u.refused_for()) {
        return refused(&r.key, wait, "server");
    }
    match gw.registry.check(&r.key) {
        GateDecision::Allowed(_) => json(
            StatusCode::OK,
            &json!({"tool": r.key, "decision": "allowed"}),
        ),
        GateDecision::Probe(permit) => {
            let lease = gw.registry.tool_policy(&r.key).breaker.probe_timeout;
            let id = gw.probes.hold(&gw.registry, &r.key, permit, lease);
            json(
                StatusCode::OK,
                &json!({
                    "tool": r.key,
                    "decision": "probe",
                    "probe_id": id,
                    "lease_ms": ms(lease),
                }),
            )
        }
        GateDecision::Refused { retry_after } => refused(&r.key, retry_after, "tool"),
    }
}

fn refused(key: &str, retry_after: Duration, by: &str) -> Response {
    let mut r = json(
        StatusCode::SERVICE_UNAVAILABLE,
        &json!({
            "tool": key,
            "decision": "refused",
            "refused_by": by,
            "retry_after_ms": ms(retry_after),
            "message": REFUSAL_MESSAGE,
        }),
    );
    if retry_after != Duration::MAX {
        let secs = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
        if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
            r.headers_mut().insert(header::RETRY_AFTER, v);
        }
    }
    r
}

/// `POST /v1/tools/{tool}/report` (`Content-Type: application/json`): how a call made after a
/// claim ended — `{"outcome": "success" | "failure" | "ignored" | "cancelled", "duration_ms":
/// 12, "probe_id": "…"}` (`probe_id` when the claim was a probe).
pub(crate) async fn report(
    State(gw): State<Arc<Gateway>>,
    Path(tool): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(refusal) = tool_health::web::require_json(&headers) {
        return refusal.into_response();
    }
    let r = match resolve(&gw, &tool) {
        Ok(r) => r,
        Err(r) => return r,
    };
    let bad = |m: &str| error(StatusCode::BAD_REQUEST, m);
    let Ok(Value::Object(body)) = serde_json::from_slice::<Value>(&body) else {
        return bad(
            "the body must be a JSON object: {\"outcome\": \"success\", \"duration_ms\": 12}",
        );
    };
    let outcome = match body.get("outcome").and_then(Value::as_str) {
        Some("success") => CallOutcome::Success,
        Some("failure") => CallOutcome::Failure,
        Some("ignored") => CallOutcome::Ignored,
        Some("cancelled") => CallOutcome::Cancelled,
        _ => {
            return bad("`outcome` must be \"success\", \"failure\", \"ignored\" or \"cancelled\"")
        }
    };
    let duration = match body.get("duration_ms") {
        None => Duration::ZERO,
        Some(v) => match v.as_f64() {
            Some(x) if (0.0..=86_400_000.0).contains(&x) => Duration::from_secs_f64(x / 1000.0),
            _ => return bad("`duration_ms` must be a number from 0 to 86400000"),
        },
    };
    match body.get("probe_id") {
        None => {
            gw.registry
                .record_report(&r.key, &CallReport::new(outcome, duration));
        }
        Some(Value::String(id)) => match gw.probes.take(&gw.registry, id) {
            Some((key, permit)) if key == r.key => {
                gw.registry
                    .record_with_permit(&key, permit, outcome, duration);
            }
            Some((key, permit)) => {
                // Not this tool's: give it back where it belongs, and say so.
                gw.registry.release(&key, permit);
                return error(
                    StatusCode::CONFLICT,
                    "that probe id is another tool's (its probe was given back)",
                );
            }
            None => {
                return error(
                    StatusCode::CONFLICT,
                    "unknown probe id: already reported, or its lease ended (claim again)",
                )
            }
        },
        Some(_) => return bad("`probe_id` must be the string `claim` answered"),
    }
    json(StatusCode::OK, &tool_document(&gw, &r.key))
}

/// One server's document.
pub(crate) fn server_document(u: &Upstream) -> Value {
    let state = u.state();
    let retry = u.refused_for();
    json!({
        "server": &*u.name,
        "transport": u.transport_name(),
        "connected": state.connected,
        "pid": state.pid,
        "starts": state.starts,
        "restarts": state.starts.saturating_sub(1),
        "connected_for_ms": state.since.map(|s| ms(s.elapsed())),
        "last_error": state.last_error,
        "breaker": u.breaker_state().to_string(),
        "available": retry.is_none(),
        "retry_after_ms": retry.map(ms),
        "tools_listed": u.known_count(),
        // What its breaker counted: calls, and every request besides (reads, gets, lists).
        "calls": u.breaker_snapshot().map(|s| json!({
            "success": s.success_count,
            "failure": s.failure_count,
        })),
    })
}

/// `GET /v1/servers`: every upstream, its connection and its breaker.
pub(crate) async fn servers(State(gw): State<Arc<Gateway>>) -> Response {
    let list: Vec<Value> = gw.upstreams().iter().map(|u| server_document(u)).collect();
    json(
        StatusCode::OK,
        &json!({ "servers": list, "hosts": gw.hosts.len(), "reloads": gw.reloads.document() }),
    )
}

/// `GET /healthz`: the gateway answers (200 while it serves), with how many servers are
/// connected.
pub(crate) async fn healthz(State(gw): State<Arc<Gateway>>) -> Response {
    let upstreams = gw.upstreams();
    let total = upstreams.iter().count();
    let connected = upstreams.iter().filter(|u| u.state().connected).count();
    json(
        StatusCode::OK,
        &json!({"status": "ok", "servers": total, "servers_connected": connected,
                "reloads": gw.reloads.document()}),
    )
}
