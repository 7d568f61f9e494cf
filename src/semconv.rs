//! The vocabulary: every attribute, metric and span-field name this crate reads or writes,
//! defined once.
//!
//! Names from the OpenTelemetry semantic conventions (GenAI, errors, HTTP) sit beside the ones
//! this crate adds under `tool_health.*`. The public ones are re-exported where users meet them:
//! span names from [`layer`](crate::layer), metric names from [`metrics`](crate::metrics).

// ---------------------------------------------------------------------------------------------
// Read from tool spans (OpenTelemetry semantic conventions)
// ---------------------------------------------------------------------------------------------

/// `gen_ai.operation.name`: the GenAI operation a span describes.
pub(crate) const OPERATION_NAME: &str = "gen_ai.operation.name";
/// The value of [`OPERATION_NAME`] on a tool execution.
pub(crate) const EXECUTE_TOOL: &str = "execute_tool";
/// `gen_ai.tool.name`: the tool a span or a metric series is about.
pub const TOOL_NAME: &str = "gen_ai.tool.name";
/// `error.type`: why a call failed.
pub(crate) const ERROR_TYPE: &str = "error.type";
/// `gen_ai.tool.error.type`: an error type on a tool span (rig's; not in the GenAI registry).
pub(crate) const TOOL_ERROR_TYPE: &str = "gen_ai.tool.error.type";
/// `gen_ai.tool.call.outcome`: a framework's verdict on a tool call, `success`, `error`,
/// `denied` or `skipped` (rig's; not in the GenAI registry).
pub(crate) const TOOL_CALL_OUTCOME: &str = "gen_ai.tool.call.outcome";
/// The error type of a call given up before it finished: a cancellation, no verdict.
pub(crate) const CANCELLED: &str = "cancelled";
/// `mcp.method.name`: the MCP method a span describes.
pub(crate) const MCP_METHOD_NAME: &str = "mcp.method.name";
/// The value of [`MCP_METHOD_NAME`] on a tool call.
pub(crate) const MCP_TOOLS_CALL: &str = "tools/call";
/// `rpc.response.status_code`: the JSON-RPC error code an MCP call was answered with.
pub(crate) const RPC_RESPONSE_STATUS_CODE: &str = "rpc.response.status_code";
/// `otel.name`: tracing-opentelemetry's field for the span's name.
pub(crate) const OTEL_NAME: &str = "otel.name";

/// `otel.status_code`: tracing-opentelemetry's field for the span status.
pub(crate) const OTEL_STATUS_CODE: &str = "otel.status_code";
/// `http.response.status_code`: the HTTP status a tool's backend answered with.
pub(crate) const HTTP_STATUS_CODE: &str = "http.response.status_code";
/// The span field read as a tool's retry hint by default, in seconds.
pub const RETRY_AFTER: &str = "http.response.header.retry-after";
/// The field `#[instrument(ret)]` puts on its return event: a completion marker.
pub(crate) const RETURN_FIELD: &str = "return";
/// The field `#[instrument(err)]` puts on its error event: a completion marker.
pub(crate) const ERROR_FIELD: &str = "error";

// ---------------------------------------------------------------------------------------------
// Written on tool spans
// ---------------------------------------------------------------------------------------------

/// Span attribute: the gate decision bound to the span (`allowed`, `probe`, `refused`).
pub const GATE_DECISION: &str = "tool_health.gate.decision";
/// Span attribute written on a call shadow mode let through: `false`.
pub const GATE_ENFORCED: &str = "tool_health.gate.enforced";
/// Span attribute (on a refused or probe span) and metric attribute (on the
/// `tool_health.calls` series of such refusals): [`SOURCE_FLEET`] when the decision came from
/// the fleet — the breaker was opened for another replica's trip, or its probe is held back
/// for another replica's. Absent on local decisions.
pub const GATE_SOURCE: &str = "tool_health.gate.source";
/// Span attribute: the registry that gated the call and records it
/// ([`ToolHealthRegistry::instance_id`](crate::ToolHealthRegistry::instance_id)). A receiver
/// feeding that same registry skips the span: the call is recorded once, whatever route its
/// span takes back in (the gateway exporting its own spans to its own receiver, say).
pub const REGISTRY_ID: &str = "tool_health.registry.id";
/// The value of [`GATE_SOURCE`] on the fleet's decisions.
pub const SOURCE_FLEET: &str = "fleet";
/// Span attribute (the breaker state at admission) and metric attribute (the state a
/// `tool_health.breaker.state` series is about): `closed`, `open`, `half_open`.
pub const BREAKER_STATE: &str = "tool_health.breaker.state";
/// Span event: the span's outcome changed the breaker.
pub const TRANSITION_EVENT: &str = "tool_health.breaker.transition";
/// Attribute of [`TRANSITION_EVENT`] and of `tool_health.breaker.transitions`: the state before.
pub const TRANSITION_FROM: &str = "tool_health.breaker.from";
/// Attribute of [`TRANSITION_EVENT`] and of `tool_health.breaker.transitions`: the state after.
pub const TRANSITION_TO: &str = "tool_health.breaker.to";
/// The `error.type` written on a refused tool span.
pub const REFUSAL_ERROR_TYPE: &str = "circuit_breaker_open";

// ---------------------------------------------------------------------------------------------
// Metrics
// ---------------------------------------------------------------------------------------------

/// `tool_health.score`: the health score in `[0, 1]`.
pub const METRIC_SCORE: &str = "tool_health.score";
/// `tool_health.breaker.state`: 1 for the breaker's current state, 0 for the others.
pub const METRIC_BREAKER_STATE: &str = BREAKER_STATE;
/// `tool_health.calls`: calls by outcome.
pub const METRIC_CALLS: &str = "tool_health.calls";
/// `tool_health.breaker.transitions`: breaker state changes by edge.
pub const METRIC_TRANSITIONS: &str = "tool_health.breaker.transitions";
/// `gen_ai.execute_tool.duration`: how long each tool call took, in seconds.
pub const METRIC_DURATION: &str = "gen_ai.execute_tool.duration";
/// `tool_health.server.breaker.state`: an MCP server's breaker, 1 for its current state, 0
/// for the others (attributes `mcp.server.name`, `tool_health.breaker.state`).
#[cfg(feature = "mcp")]
pub const METRIC_SERVER_BREAKER_STATE: &str = "tool_health.server.breaker.state";
/// `mcp.server.name`: the MCP server a series or a span is about (the client's name for it).
#[cfg(feature = "mcp")]
pub(crate) const MCP_SERVER_NAME: &str = "mcp.server.name";
/// `tool_health.fleet.connected`: 1 while the fleet's store answers, 0 while it does not.
#[cfg(feature = "fleet")]
pub const METRIC_FLEET_CONNECTED: &str = "tool_health.fleet.connected";
/// `tool_health.fleet.sync_lag`: seconds since the fleet's last complete exchange with its store.
#[cfg(feature = "fleet")]
pub const METRIC_FLEET_SYNC_LAG: &str = "tool_health.fleet.sync_lag";
/// `tool_health.fleet.rejected`: values read from the store (or its channel) the fleet could
/// not trust, and ignored.
#[cfg(feature = "fleet")]
pub const METRIC_FLEET_REJECTED: &str = "tool_health.fleet.rejected";
/// `tool_health.fleet.applied`: decisions of other replicas the fleet applied here, by kind.
#[cfg(feature = "fleet")]
pub const METRIC_FLEET_APPLIED: &str = "tool_health.fleet.applied";
/// Metric attribute of `tool_health.fleet.applied`: `open`, `close`, `hold`, `control`.
#[cfg(feature = "fleet")]
pub const FLEET_ACTION: &str = "tool_health.fleet.action";
/// Metric attribute of `tool_health.fleet.rejected`: what kind of value was rejected.
#[cfg(feature = "fleet")]
pub const FLEET_VALUE: &str = "tool_health.fleet.value";

/// Metric attribute of `tool_health.calls`: `success`, `failure`, `refused`.
pub(crate) const OUTCOME: &str = "tool_health.outcome";
/// Metric attribute: `false` on the `tool_health.calls` series of refusals shadow mode did not
/// enforce.
pub(crate) const ENFORCED: &str = "enforced";
/// Metric attribute of the overflow series (the SDK's own name for it).
pub(crate) const METRIC_OVERFLOW: &str = "otel.metric.overflow";
/// The semantic conventions' fallback value: `gen_ai.tool.name` of the overflow series, and
/// `error.type` of a failed call that did not say why.
pub const OTHER: &str = "_OTHER";
