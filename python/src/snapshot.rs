//! `Snapshot`: one tool's `ToolHealthSnapshot`, durations in seconds, states as their names.

use pyo3::prelude::*;
use tool_health::ToolHealthSnapshot;

use crate::errors;

/// One tool's stats and breaker at one instant (the Rust `ToolHealthSnapshot`).
#[pyclass(module = "tool_health", frozen, get_all)]
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    /// The tool's name.
    tool: String,
    /// "healthy", "degraded" or "unhealthy".
    status: &'static str,
    /// 0.3 × success rate + 0.7 × EWMA of success.
    score: f64,
    /// Successes / calls (1.0 with no calls).
    success_rate: f64,
    /// The exponentially weighted success average, in [0, 1].
    ewma_success: f64,
    /// Successes + failures.
    total_calls: u64,
    success_count: u64,
    failure_count: u64,
    /// Calls that failed through the caller's fault (not in `total_calls`).
    ignored_count: u64,
    /// Calls the gate refused (not in `total_calls`).
    refused_count: u64,
    /// Calls started and never finished (not in `total_calls`).
    cancelled_count: u64,
    /// Calls a control let through that the breaker would have refused.
    shadow_refused_count: u64,
    /// Mean duration, seconds.
    avg_duration: f64,
    /// Longest call, failed ones included, seconds.
    max_duration: f64,
    /// "closed", "open" or "half_open".
    breaker: &'static str,
    /// Consecutive failures since the last accepted success.
    consecutive_failures: u64,
    /// While refused: seconds until the gate could next admit a call (`inf`: not in any
    /// foreseeable time); `None` while it admits calls.
    retry_after: Option<f64>,
}

impl From<ToolHealthSnapshot> for Snapshot {
    fn from(s: ToolHealthSnapshot) -> Self {
        Self {
            tool: s.tool,
            status: s.status.as_str(),
            score: s.score,
            success_rate: s.success_rate,
            ewma_success: s.ewma_success,
            total_calls: s.total_calls,
            success_count: s.success_count,
            failure_count: s.failure_count,
            ignored_count: s.ignored_count,
            refused_count: s.refused_count,
            cancelled_count: s.cancelled_count,
            shadow_refused_count: s.shadow_refused_count,
            avg_duration: s.avg_duration.as_secs_f64(),
            max_duration: s.max_duration.as_secs_f64(),
            breaker: s.breaker.as_str(),
            consecutive_failures: s.consecutive_failures,
            retry_after: s.retry_after.map(errors::seconds),
        }
    }
}

#[pymethods]
impl Snapshot {
    fn __repr__(&self) -> String {
        format!(
            "Snapshot(tool={:?}, status={:?}, score={:.3}, breaker={:?}, success_count={}, \
             failure_count={}, ignored_count={}, refused_count={})",
            self.tool,
            self.status,
            self.score,
            self.breaker,
            self.success_count,
            self.failure_count,
            self.ignored_count,
            self.refused_count
        )
    }
}
