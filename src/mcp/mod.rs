//! MCP servers behind the breaker (feature `mcp`): [`ToolHealthClient`] wraps an
//! [rmcp](https://docs.rs/rmcp/3.11) client peer so that every `call_tool` is checked against
//! the tool's schema, gated by the server's breaker and the tool's, timed out, traced as an MCP
//! client span and recorded, and `list_tools` leaves out the tools that refuse now.
//! `docs/mcp.md` is the long guide (the classification table, what counts where, and why).
//!
//! MCP servers are exactly the tools that go down: a process that exits, a connection that
//! closes, a server that hangs. Most of them are written with the official Python or
//! TypeScript SDK, whose answers to a model's mistakes are *successful* results with
//! `isError: true`, like a failing tool's. For each call the client:
//!
//! 1. **answers the model's mistakes itself**, once it knows the server's whole list: a tool
//!    the list does not name is a JSON-RPC `-32602`; arguments that fail the tool's
//!    `inputSchema` ([`SchemaCheck`]: lax by default, strict, or off) a soft result naming
//!    what is wrong ([`is_invalid_arguments`]). Nothing reaches the server, nothing is
//!    recorded, no probe is spent; the call's span says what happened (see `texts.rs` for
//!    what the model reads, in one voice, with the tool named as the model knows it:
//!    [`shown_names`](ToolHealthClient::shown_names));
//! 2. **gates through the server's breaker** (entry [`server_name`](ToolHealthClient::server_name)
//!    of [`server_registry`]): while the server does not answer, every tool of it is refused at
//!    once with a soft result naming the server. After its cooldown the next call first sends
//!    one `ping` (the server's probe): answered, the server closes and the call goes on;
//! 3. **gates through the tool's breaker**, keyed `{server}/{tool}` ([`KEY_SEPARATOR`]). A
//!    refused call never reaches the server; every refusal's text begins with
//!    [`REFUSAL_MESSAGE`], then says what is refused and when to retry ([`is_refusal`] matches
//!    the prefix);
//! 4. opens the **client span of the OpenTelemetry MCP conventions**: name `tools/call`
//!    (`otel.name` = `tools/call {tool}`, `otel.kind` = `client`), `mcp.method.name`,
//!    `gen_ai.operation.name` = `execute_tool`, `gen_ai.tool.name` = the registry key,
//!    `jsonrpc.request.id`, `mcp.protocol.version`, `mcp.session.id` (when the transport has
//!    one, see [`Transport`]), `network.transport` (`pipe` / `tcp`), `server.address` and
//!    `server.port` over HTTP, `mcp.server.name`; on failure `error.type` (`tool_error` for an
//!    `isError` result, the JSON-RPC code, `timeout`, `transport_closed`, …) and
//!    `rpc.response.status_code`;
//! 5. applies a **timeout** ([`DEFAULT_TIMEOUT`] unless set); rmcp tells the server the request
//!    was abandoned;
//! 6. **records** the outcome where it belongs:
//!
//! | answer | the tool | the server |
//! |---|---|---|
//! | a result, `isError` false | success | success |
//! | `isError: true` from the tool | failure (`tool_error`) | success |
//! | an SDK's "invalid arguments" (`isError` or JSON-RPC `-32602`), JSON-RPC `-32601` | caller error (ignored) | success |
//! | an SDK's "unknown tool" | **nothing** (no entry is created) | success |
//! | another JSON-RPC error | failure (its code) | success |
//! | timeout, and the server answers the `ping` that follows | failure (`timeout`) | success |
//! | timeout, and the `ping` fails too | nothing | failure |
//! | transport closed or failed to send | nothing | failure |
//! | the caller dropped the call, or rmcp's `Cancelled` | cancelled (no verdict) | nothing |
//!
//! A hanging tool is that tool's problem; a server that answers nothing at all, `ping`
//! included, is the server's. One slow or failing tool never takes its siblings down, and a
//! dead server is refused as a whole after `failure_threshold` transport failures instead of
//! `failure_threshold` per tool. Servers with conventions of their own get a hook on the
//! result ([`classify_results`](ToolHealthClient::classify_results)); [`classify_result`] is
//! the built-in classification.
//!
//! Under the hood the tool's part of each call is one [`ToolHealthRegistry::call`](crate::ToolHealthRegistry::call) (the call
//! helper) in that span: with a [`ToolHealthLayer`](crate::ToolHealthLayer) for the same
//! registry in the current subscriber, the layer records the span (its MCP convention
//! recognises it; the helper hands over the exact outcome) and the gate decision is bound to
//! it; without one, or when a filter disabled the span, the helper records through the registry
//! itself. Either way each call is recorded once.
//!
//! ```no_run
//! # async fn run(running: rmcp::service::RunningService<rmcp::RoleClient, ()>) -> Result<(), rmcp::ServiceError> {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use rmcp::model::CallToolRequestParams;
//! use tool_health::mcp::{is_refusal, ToolHealthClient, Transport};
//! use tool_health::ToolHealthRegistry;
//!
//! let registry = Arc::new(ToolHealthRegistry::new());
//! let github = ToolHealthClient::new(running.peer().clone(), registry.clone())
//!     .server("github")
//!     .transport(Transport::stdio())
//!     .timeout(Duration::from_secs(20));
//! // What to offer the model: the tools that would not be refused now.
//! let listed = github.list_tools(None).await?;
//! for hidden in &listed.hidden {
//!     println!("{} left out for {:?}", hidden.name, hidden.retry_after);
//! }
//! let result = github.call_tool(CallToolRequestParams::new("search_issues")).await?;
//! if is_refusal(&result) {
//!     // `github/search_issues` (or the whole server) is refused: the model reads why and when
//! }
//! # Ok(()) }
//! ```
//!
//! Every other request a proxy passes on (resources, prompts, completions, the logging level,
//! subscriptions) goes through [`request`](ToolHealthClient::request): gated by the server's
//! breaker and counted for the server only, never for a tool ([`is_refusal_error`] tells its
//! refusal).
//!
//! A restarted server is a new peer: [`with_peer`](ToolHealthClient::with_peer) keeps the
//! registry and settings, so the breakers opened by the dead process stay open until their
//! cooldown; then one `ping` probes the server, and one call probes each open tool.
//!
//! [`on_tools_changed`](ToolHealthClient::on_tools_changed) tells a host when to list the tools
//! again (MCP's `notifications/tools/list_changed`): when a breaker opens, and when its
//! cooldown ends — a timer on the registry's clock, since a tool nobody is offered is never
//! called, and without it a hidden tool would never get its probe.
//!
//! Needs Rust 1.88 (rmcp's minimum), above the crate's own `rust-version`.

mod cache;
mod call_tool;
mod classify;
mod client;
mod forward;
mod list_tools;
mod requests;
mod schema;
mod server;
mod span;
mod texts;
mod tools;

use std::time::Duration;

use rmcp::model::{CallToolResult, ContentBlock};

use crate::call::REFUSAL_MESSAGE;

pub use classify::{classify_error, classify_result, INVALID_ARGUMENTS, UNKNOWN_TOOL};
pub use client::ToolHealthClient;
pub use forward::is_refusal_error;
pub use schema::{SchemaCheck, MAX_PROBLEMS, MAX_PROBLEM_LEN};
pub use server::server_registry;
pub use span::{SessionId, Transport};
pub use tools::{HiddenBy, HiddenTool, ToolList, ToolsChanged, ToolsSubscription};

/// How long a call may take unless [`ToolHealthClient::timeout`] says otherwise: 30 s, the
/// breaker's default probe lease (a probe that has not answered by then has lost its lease
/// anyway).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a `ping` may take unless [`ToolHealthClient::ping_timeout`] says otherwise: the
/// server's probe, and the question asked after a call timed out ("is the server there at
/// all?").
pub const DEFAULT_PING_TIMEOUT: Duration = Duration::from_secs(5);

/// The `error.type` of a call answered with `isError: true` (the MCP conventions' value).
pub const TOOL_ERROR: &str = "tool_error";

/// Between the server's name and the tool's in a registry key: `{server}/{tool}`. A server's
/// name never contains it (see [`ToolHealthClient::server`]), so a key splits at its first
/// separator.
pub const KEY_SEPARATOR: char = '/';

/// What the text of a result refused by the argument check begins with
/// ([`is_invalid_arguments`]); the problems follow.
pub const INVALID_ARGUMENTS_MESSAGE: &str = "invalid arguments";

/// The soft result a refused call answers with: `isError: true` and the text
/// [`REFUSAL_MESSAGE`]. The client's own refusals add what is refused and when to retry after
/// it; [`is_refusal`] matches them all.
pub fn refusal() -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(REFUSAL_MESSAGE)])
}

/// The soft result of a call whose tool name is longer than the registry takes (`len` bytes,
/// its key with the server's prefix; at most `max`): `isError: true` with an invalid-argument
/// text, never [`REFUSAL_MESSAGE`] — the model is told to correct the name, not to wait.
pub fn invalid_tool_name(len: usize, max: usize) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!(
        "invalid tool name: {len} bytes, longer than the {max} allowed"
    ))])
}

/// Whether `result` is a refusal ([`refusal`], or one of the client's, whose text begins with
/// [`REFUSAL_MESSAGE`]): a breaker refused the call, the server never saw it.
pub fn is_refusal(result: &CallToolResult) -> bool {
    first_text_starts_with(result, REFUSAL_MESSAGE)
}

/// Whether `result` is the argument check's: the arguments did not match the tool's
/// `inputSchema`, the server never saw them, nothing was recorded.
pub fn is_invalid_arguments(result: &CallToolResult) -> bool {
    first_text_starts_with(result, INVALID_ARGUMENTS_MESSAGE)
}

fn first_text_starts_with(result: &CallToolResult, prefix: &str) -> bool {
    result.is_error == Some(true)
        && result
            .content
            .first()
            .and_then(|c| c.as_text())
            .is_some_and(|t| t.text.starts_with(prefix))
}

/// `name` as shown to the model: control characters replaced, at most 128 characters.
pub(crate) fn shown(name: &str) -> String {
    let mut out: String = name
        .chars()
        .take(128)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if name.chars().nth(128).is_some() {
        out.push('…');
    }
    out
}
