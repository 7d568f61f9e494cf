//! What the model reads about a call the client answered itself, in one voice: the tool as the
//! model knows it ([`ToolHealthClient::shown_names`](super::ToolHealthClient::shown_names)),
//! what happened, and when to try again.
//!
//! | case | text (JSON-RPC error for an unknown tool, else an `isError` result) |
//! |---|---|
//! | the tool's breaker | `tool temporarily unavailable: circuit breaker open (tool `py__add` was not called: it keeps failing; retry in 29.5 s)` |
//! | … its probe is out | `… (tool `py__add` was not called: another call is trying it right now; retry in 4.2 s)` |
//! | … forced open | `… (tool `py__add` was not called: the operator switched it off; retry in 600.0 s)` |
//! | the server's breaker | `… (tool `py__add` was not called: its MCP server `py` is not answering; retry in 12.0 s)` |
//! | … forced open | `… (tool `py__add` was not called: the operator switched off its MCP server `py`; retry when the operator turns it back on)` |
//! | arguments the check refused | `invalid arguments for tool `py__add` (checked against its inputSchema; it was not called): /n: "x" is not of type "integer". Correct them and call it again.` |
//! | a tool the server does not list | `-32602`: `unknown tool `py__nope`: it is not in tools/list (it was not called)` |
//!
//! Every refusal begins with [`REFUSAL_MESSAGE`] ([`is_refusal`](super::is_refusal)), every
//! argument error with [`INVALID_ARGUMENTS_MESSAGE`]
//! ([`is_invalid_arguments`](super::is_invalid_arguments)).

use std::time::Duration;

use rmcp::model::{CallToolResult, ContentBlock, ErrorData};

use crate::breaker::BreakerState;
use crate::call::REFUSAL_MESSAGE;
use crate::control::ToolControl;
use crate::registry::ToolHealthSnapshot;

use super::INVALID_ARGUMENTS_MESSAGE;

/// Whose breaker refused a call, and in what state.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Refused<'a> {
    /// The tool's own.
    Tool(Why),
    /// The server's (its name).
    Server(&'a str, Why),
}

/// Why a breaker refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Why {
    /// Open: it kept failing (or not answering).
    Failing,
    /// Half-open: its one probe is out.
    Probing,
    /// Forced open by an operator.
    Forced,
}

impl Why {
    /// Why the breaker whose snapshot this is refuses (`None`: never tracked).
    pub(crate) fn of(snapshot: Option<&ToolHealthSnapshot>) -> Self {
        match snapshot {
            Some(s) if matches!(s.control, ToolControl::ForcedOpen { .. }) => Self::Forced,
            Some(s) if s.breaker == BreakerState::HalfOpen => Self::Probing,
            _ => Self::Failing,
        }
    }
}

/// When to try again.
fn when(retry_after: Duration) -> String {
    if retry_after == Duration::MAX {
        "retry when the operator turns it back on".to_owned()
    } else {
        format!("retry in {:.1} s", retry_after.as_secs_f64())
    }
}

/// A refusal of `tool` (as the model knows it).
pub(crate) fn refused(tool: &str, by: Refused<'_>, retry_after: Duration) -> CallToolResult {
    let why = match by {
        Refused::Tool(Why::Failing) => "it keeps failing".to_owned(),
        Refused::Tool(Why::Probing) => "another call is trying it right now".to_owned(),
        Refused::Tool(Why::Forced) => "the operator switched it off".to_owned(),
        Refused::Server(server, Why::Failing) => {
            format!("its MCP server `{server}` is not answering")
        }
        Refused::Server(server, Why::Probing) => {
            format!("its MCP server `{server}` is being tried again right now")
        }
        Refused::Server(server, Why::Forced) => {
            format!("the operator switched off its MCP server `{server}`")
        }
    };
    CallToolResult::error(vec![ContentBlock::text(format!(
        "{REFUSAL_MESSAGE} (tool `{tool}` was not called: {why}; {})",
        when(retry_after)
    ))])
}

/// A request other than `tools/call` refused by the server's breaker: `-32603` (no answer
/// a host could show as a result exists for a read or a get), the message in the voice of the
/// tools' refusals, `data.retryAfterMs` for a program.
pub(crate) fn refused_request(
    method: &str,
    server: &str,
    why: Why,
    retry_after: Duration,
) -> ErrorData {
    let why = match why {
        Why::Failing => format!("its MCP server `{server}` is not answering"),
        Why::Probing => format!("its MCP server `{server}` is being tried again right now"),
        Why::Forced => format!("the operator switched off its MCP server `{server}`"),
    };
    let retry_after_ms = u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX);
    ErrorData::internal_error(
        format!(
            "{REFUSAL_MESSAGE} (`{method}` was not sent: {why}; {})",
            when(retry_after)
        ),
        Some(serde_json::json!({"server": server, "retryAfterMs": retry_after_ms})),
    )
}

/// Arguments of `tool` the check refused, with the problems it found.
pub(crate) fn invalid_arguments(tool: &str, problems: &[String]) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!(
        "{INVALID_ARGUMENTS_MESSAGE} for tool `{tool}` (checked against its inputSchema; it was \
         not called): {}. Correct them and call it again.",
        problems.join("; ")
    ))])
}

/// A call of a tool the server does not list: `-32602`, as MCP asks for an unknown tool.
pub(crate) fn unknown_tool(tool: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!("unknown tool `{tool}`: it is not in tools/list (it was not called)"),
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(r: &CallToolResult) -> &str {
        &r.content[0].as_text().unwrap().text
    }

    #[test]
    fn every_text_names_the_tool_as_the_model_knows_it_and_when_to_retry() {
        let s = Duration::from_millis(29_500);
        let r = refused("py__add", Refused::Tool(Why::Failing), s);
        assert_eq!(
            text(&r),
            "tool temporarily unavailable: circuit breaker open (tool `py__add` was not called: \
             it keeps failing; retry in 29.5 s)"
        );
        let r = refused("py__add", Refused::Server("py", Why::Forced), Duration::MAX);
        assert!(text(&r).starts_with(REFUSAL_MESSAGE));
        assert!(text(&r).contains("the operator switched off its MCP server `py`"));
        assert!(text(&r).ends_with("retry when the operator turns it back on)"));
        let r = invalid_arguments("py__add", &["/n: \"x\" is not of type \"integer\"".into()]);
        assert!(text(&r).starts_with("invalid arguments for tool `py__add`"));
        let e = refused_request("resources/read", "py", Why::Failing, s);
        assert!(e.message.starts_with(REFUSAL_MESSAGE));
        assert!(e.message.contains(
            "`resources/read` was not sent: its MCP server `py` is not answering; retry in 29.5 s"
        ));
        assert_eq!(e.data.unwrap()["retryAfterMs"], 29_500);
        let e = unknown_tool("py__nope");
        assert_eq!(e.code.0, -32602);
        assert!(e.message.contains("`py__nope`"));
    }
}
