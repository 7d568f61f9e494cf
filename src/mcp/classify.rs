//! What the official SDKs answer to a model's mistakes, told apart from a failing tool.
//!
//! The MCP specification asks servers to answer invalid arguments as a tool error
//! (`isError: true`) so that the model can correct itself, and the SDKs do — with the same
//! shape a raising tool gets. Only the text tells them apart, and each SDK writes its own
//! (captured from the real servers in `integrations/tests/mcp_sdk/`, table in `docs/mcp.md`):
//!
//! | SDK | invalid arguments | unknown tool |
//! |---|---|---|
//! | Python (`mcp` 2.x `MCPServer`, 1.x `FastMCP`) | `isError`, `Error executing tool {tool}: {N} validation error(s) for {function}Arguments …` | `isError`, `Unknown tool: {tool}` |
//! | TypeScript ≥ 1.21 | `isError`, `MCP error -32602: Input validation error: …` | `isError`, `MCP error -32602: Tool {tool} not found` (or `… disabled`) |
//! | TypeScript ≤ 1.20 | JSON-RPC `-32602`, `MCP error -32602: Invalid arguments for tool {tool}: …` | JSON-RPC `-32602`, `MCP error -32602: Tool {tool} not found` |
//! | rmcp 3.11 | `isError`, `failed to deserialize parameters: …` | JSON-RPC `-32602`, `tool not found` |
//!
//! Each match is exact where the SDK's text allows: a bare `Error executing tool {tool}` is
//! what Python answers for *any* exception (a failure), and `MCP error -32602: Output
//! validation error: …` is the TypeScript server's own fault (a failure).

use std::borrow::Cow;

use rmcp::model::{CallToolResult, ErrorCode, ErrorData};

use crate::call_helper::ErrorClass;

use super::TOOL_ERROR;

/// The value of `tool_health.mcp.answer` on a call an SDK (or the argument check) answered as
/// invalid arguments: a caller error.
pub const INVALID_ARGUMENTS: &str = "invalid_arguments";
/// The value of `tool_health.mcp.answer` on a call an SDK answered as an unknown tool: nothing
/// is recorded.
pub const UNKNOWN_TOOL: &str = "unknown_tool";

/// What an SDK's answer says about the call, when it is one of the model's mistakes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mistake {
    InvalidArguments,
    UnknownTool,
}

impl Mistake {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::InvalidArguments => INVALID_ARGUMENTS,
            Self::UnknownTool => UNKNOWN_TOOL,
        }
    }
}

/// The built-in classification of a `tools/call` result for `tool` (what
/// [`ToolHealthClient`](super::ToolHealthClient) uses unless
/// [`classify_results`](super::ToolHealthClient::classify_results) says otherwise):
///
/// * `isError` absent or false: a success;
/// * an SDK's answer to invalid arguments (see the module docs of [`mcp`](super) and
///   `docs/mcp.md`): a caller error, `error.type = tool_error` — never fed to the breaker;
/// * an SDK's answer to an unknown tool: [`ErrorClass::unrecorded`] — nothing is recorded and
///   no entry is created for a name the model made up;
/// * any other `isError: true`: a failure of the tool, `error.type = tool_error`.
pub fn classify_result(tool: &str, result: &CallToolResult) -> ErrorClass {
    if result.is_error != Some(true) {
        return ErrorClass::success();
    }
    match result_mistake(tool, result) {
        Some(Mistake::InvalidArguments) => ErrorClass::caller_error(TOOL_ERROR),
        Some(Mistake::UnknownTool) => ErrorClass::unrecorded(TOOL_ERROR),
        None => ErrorClass::failure(TOOL_ERROR),
    }
}

/// The built-in classification of a JSON-RPC error answered to a `tools/call` for `tool`:
/// `-32602` is the caller's (invalid params), and [`ErrorClass::unrecorded`] when its message
/// is an SDK's "tool not found"; `-32601` (method not found) is the caller's; any other code
/// is a failure of the tool. `error.type` is the code.
pub fn classify_error(tool: &str, error: &ErrorData) -> ErrorClass {
    let code = Cow::Owned(error.code.0.to_string());
    match error.code {
        ErrorCode::INVALID_PARAMS if error_mistake(tool, error) == Some(Mistake::UnknownTool) => {
            ErrorClass::unrecorded(code)
        }
        ErrorCode::INVALID_PARAMS | ErrorCode::METHOD_NOT_FOUND => ErrorClass::caller_error(code),
        _ => ErrorClass::failure(code),
    }
}

/// The mistake an `isError` result names, if it is one of the SDKs' answers.
pub(crate) fn result_mistake(tool: &str, result: &CallToolResult) -> Option<Mistake> {
    if result.is_error != Some(true) || result.content.len() != 1 {
        return None;
    }
    let text: &str = &result.content[0].as_text()?.text;
    // TypeScript SDK ≥ 1.21: the McpError's message as the text.
    if let Some(rest) = text.strip_prefix("MCP error -32602: ") {
        if rest.starts_with("Input validation error: ") {
            return Some(Mistake::InvalidArguments);
        }
        return is_ts_unknown_tool(tool, rest).then_some(Mistake::UnknownTool);
    }
    // Python SDK: pydantic's validation error for the function's arguments model.
    if let Some(rest) = text
        .strip_prefix("Error executing tool ")
        .and_then(|r| r.strip_prefix(tool))
        .and_then(|r| r.strip_prefix(": "))
    {
        return is_pydantic_arguments_error(rest).then_some(Mistake::InvalidArguments);
    }
    if text.strip_prefix("Unknown tool: ") == Some(tool) {
        return Some(Mistake::UnknownTool);
    }
    // rmcp: its arguments wrapper could not deserialize them.
    if text.starts_with("failed to deserialize parameters: ") {
        return Some(Mistake::InvalidArguments);
    }
    None
}

/// The mistake a JSON-RPC `-32602` names: an unknown tool (TypeScript ≤ 1.20, rmcp), else
/// invalid arguments.
pub(crate) fn error_mistake(tool: &str, error: &ErrorData) -> Option<Mistake> {
    if error.code != ErrorCode::INVALID_PARAMS {
        return None;
    }
    let message: &str = &error.message;
    let unknown = message == "tool not found"
        || message
            .strip_prefix("MCP error -32602: ")
            .is_some_and(|rest| is_ts_unknown_tool(tool, rest));
    Some(if unknown {
        Mistake::UnknownTool
    } else {
        Mistake::InvalidArguments
    })
}

/// `Tool {tool} not found` / `Tool {tool} disabled` (the TypeScript SDK's McpServer).
fn is_ts_unknown_tool(tool: &str, rest: &str) -> bool {
    rest.strip_prefix("Tool ")
        .and_then(|r| r.strip_prefix(tool))
        .is_some_and(|r| r == " not found" || r == " disabled")
}

/// `{N} validation error(s) for {name}Arguments` then pydantic's details.
fn is_pydantic_arguments_error(rest: &str) -> bool {
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return false;
    }
    let Some(model) = rest[digits..]
        .strip_prefix(" validation errors for ")
        .or_else(|| rest[digits..].strip_prefix(" validation error for "))
    else {
        return false;
    };
    let model = model.split(['\n', ' ']).next().unwrap_or_default();
    model.len() > "Arguments".len() && model.ends_with("Arguments")
}

#[cfg(test)]
mod tests {
    use rmcp::model::ContentBlock;

    use super::*;
    use crate::call::CallOutcome;

    fn is_error(text: &str) -> CallToolResult {
        CallToolResult::error(vec![ContentBlock::text(text)])
    }

    fn outcome(class: &ErrorClass) -> Option<CallOutcome> {
        class.is_recorded().then(|| class.outcome())
    }

    // The answers captured from the real servers (integrations/tests/mcp_sdk/ asserts them).
    const PY_RAISED: &str = "Error executing tool flaky";
    const PY_WRONG_TYPE: &str = "Error executing tool needs_int: 1 validation error for needs_intArguments\nn\n  Input should be a valid integer, unable to parse string as an integer [type=int_parsing, input_value='twenty-one', input_type=str]\n    For further information visit https://errors.pydantic.dev/2.14/v/int_parsing";
    const PY_MISSING: &str = "Error executing tool needs_int: 1 validation error for needs_intArguments\nn\n  Field required [type=missing, input_value={}, input_type=dict]\n    For further information visit https://errors.pydantic.dev/2.14/v/missing";
    const TS_WRONG_TYPE: &str = "MCP error -32602: Input validation error: Invalid arguments for tool needs_int: Invalid input: expected number, received string at n";
    const TS_OUTPUT: &str =
        "MCP error -32602: Output validation error: Invalid structured content for tool needs_int";

    #[test]
    fn the_sdks_answers_to_the_models_mistakes_are_never_the_tools_failures() {
        let cases = [
            ("flaky", PY_RAISED, Some(CallOutcome::Failure)),
            (
                "flaky",
                "flaky: upstream answered 503",
                Some(CallOutcome::Failure),
            ),
            ("needs_int", PY_WRONG_TYPE, Some(CallOutcome::Ignored)),
            ("needs_int", PY_MISSING, Some(CallOutcome::Ignored)),
            ("needs_int", TS_WRONG_TYPE, Some(CallOutcome::Ignored)),
            ("needs_int", TS_OUTPUT, Some(CallOutcome::Failure)),
            ("no_such_tool", "Unknown tool: no_such_tool", None),
            (
                "no_such_tool",
                "MCP error -32602: Tool no_such_tool not found",
                None,
            ),
            ("old", "MCP error -32602: Tool old disabled", None),
            (
                "add",
                "failed to deserialize parameters: invalid type: string \"one\", expected i64",
                Some(CallOutcome::Ignored),
            ),
            // Another tool's name in the text: not this call's unknown tool.
            (
                "search",
                "Unknown tool: no_such_tool",
                Some(CallOutcome::Failure),
            ),
            (
                "search",
                "MCP error -32602: Tool other not found",
                Some(CallOutcome::Failure),
            ),
            // A raising tool whose message mentions validation is still a failure.
            (
                "needs_int",
                "Error executing tool needs_int: upstream validation error for the request",
                Some(CallOutcome::Failure),
            ),
        ];
        for (tool, text, expected) in cases {
            let class = classify_result(tool, &is_error(text));
            assert_eq!(outcome(&class), expected, "{tool}: {text}");
            assert_eq!(class.error_type(), TOOL_ERROR);
        }
        let ok = CallToolResult::success(vec![ContentBlock::text("Unknown tool: x")]);
        assert_eq!(
            outcome(&classify_result("x", &ok)),
            Some(CallOutcome::Success)
        );
    }

    #[test]
    fn json_rpc_errors_invalid_params_are_the_callers_and_unknown_tools_record_nothing() {
        let err = |code: i32, msg: &'static str| ErrorData::new(ErrorCode(code), msg, None);
        let cases = [
            (
                err(-32602, "MCP error -32602: Tool no_such_tool not found"),
                None,
            ),
            (err(-32602, "tool not found"), None),
            (
                err(
                    -32602,
                    "MCP error -32602: Invalid arguments for tool needs_int: [ … ]",
                ),
                Some(CallOutcome::Ignored),
            ),
            (err(-32601, "Method not found"), Some(CallOutcome::Ignored)),
            (err(-32603, "database on fire"), Some(CallOutcome::Failure)),
        ];
        for (e, expected) in cases {
            let class = classify_error("no_such_tool", &e);
            assert_eq!(outcome(&class), expected, "{e:?}");
            assert_eq!(class.error_type(), e.code.0.to_string());
        }
    }
}
