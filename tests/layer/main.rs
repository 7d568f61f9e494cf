//! ToolHealthLayer, one binary with a module per concept. Every behaviour runs on a plain
//! `Registry` and with tracing-opentelemetry in both layer orders (`support`).
//!
//! * `spans`: which spans are tool spans, and the outcome each records
//! * `classify`: the outcome classifier and the span conventions (strict mode, caller errors,
//!   custom fields, custom classifiers)
//! * `conventions`: the built-in framework conventions on spans shaped like each framework's,
//!   the duration from the first enter, conventions added or replaced through the builder
//! * `gate`: the span-aware gate, bound to the nearest tool span
//! * `helper_runs`: the call helper inside a tool span of the same tool (each run one call)
//! * `late`: verdicts that come after the span (adk, swiftide), their bounds
//! * `robustness`: odd field values, logging from inside the layer
//! * `async_tasks`: async tools on a multi-thread tokio runtime
//! * `otel`: what the gate writes on the OpenTelemetry span

use tool_health::ToolHealthRegistry;

/// A GenAI tool span for `$tool`.
macro_rules! tool_span {
    ($tool:expr) => {
        tracing::info_span!(
            "execute_tool",
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = $tool,
            error.type = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        )
    };
}

/// `(success, failure, ignored, refused)` counts of `tool` (zeros if untracked).
pub(crate) fn calls(registry: &ToolHealthRegistry, tool: &str) -> (u64, u64, u64, u64) {
    registry.snapshot(tool).map_or((0, 0, 0, 0), |s| {
        (
            s.success_count,
            s.failure_count,
            s.ignored_count,
            s.refused_count,
        )
    })
}

/// The error every failing test tool returns.
#[derive(Debug)]
pub(crate) struct ToolError;
impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("tool failed")
    }
}

mod async_tasks;
mod classify;
mod conventions;
mod gate;
mod helper_runs;
mod late;
mod otel;
mod robustness;
mod spans;
mod support;
