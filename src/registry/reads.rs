//! Reads: status, state, snapshots, summaries, and what the gate would refuse. None of them
//! creates an entry.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::breaker::{BreakerState, Effective};
use crate::control::{Control, ToolControl};
use crate::stats::HealthStatus;
use crate::ticks::Ticks;

use super::entry::{Entry, EntryView};
use super::ToolHealthRegistry;

/// Everything known about one tool at one instant.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ToolHealthSnapshot {
    /// The tool's name.
    pub tool: String,
    /// Healthy / degraded / unhealthy.
    pub status: HealthStatus,
    /// `0.3 × success_rate + 0.7 × ewma_success`.
    pub score: f64,
    /// `success_count / total_calls` (1.0 with no calls).
    pub success_rate: f64,
    /// The exponentially weighted success average, in `[0, 1]`.
    pub ewma_success: f64,
    /// `success_count + failure_count`.
    pub total_calls: u64,
    /// Successful calls.
    pub success_count: u64,
    /// Failed calls.
    pub failure_count: u64,
    /// Calls the gate refused (not counted in `total_calls`).
    pub refused_count: u64,
    /// Calls that failed through the caller's fault (not counted in `total_calls`).
    pub ignored_count: u64,
    /// Calls started and never finished — a dropped future, an outer timeout, a strict-mode
    /// span closed without a completion marker (not counted in `total_calls`; see
    /// [`CallOutcome::Cancelled`](crate::CallOutcome::Cancelled)).
    pub cancelled_count: u64,
    /// Total duration / total calls.
    pub avg_duration: Duration,
    /// The longest call, failed ones included.
    pub max_duration: Duration,
    /// The breaker's state now (a half-open breaker whose lease expired reads open).
    pub breaker: BreakerState,
    /// Consecutive failures since the last accepted success.
    pub consecutive_failures: u64,
    /// When an open breaker will grant its next probe (`None` unless open; `Duration::MAX`:
    /// never).
    pub retry_after: Option<Duration>,
    /// Calls shadow mode let through that the breaker would have refused.
    pub shadow_refused_count: u64,
    /// The operator control in force.
    pub control: ToolControl,
    /// Whether shadow mode is on.
    pub shadow: bool,
}

/// A tool the gate would refuse right now, for an agent's planner.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UnavailableTool {
    /// The tool's name.
    pub tool: String,
    /// Its breaker state (open, or half-open with a probe in flight).
    pub breaker: BreakerState,
    /// When a call could next be admitted if nothing else happens (`Duration::MAX`: not in any
    /// foreseeable time).
    pub retry_after: Duration,
    /// Whether an operator forced it open.
    pub forced: bool,
}

/// Calls on tools past the tracking cap, counted together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct OverflowStats {
    /// Successful calls on untracked tools.
    pub success_count: u64,
    /// Failed calls on untracked tools.
    pub failure_count: u64,
    /// Caller-error calls on untracked tools.
    pub ignored_count: u64,
    /// Cancelled calls on untracked tools.
    pub cancelled_count: u64,
    /// Records that arrived for a name the cap kept out.
    pub records: u64,
}

impl ToolHealthRegistry {
    /// The tool's status; an unknown tool is healthy.
    pub fn get_health_status(&self, tool: &str) -> HealthStatus {
        self.with_entry(tool, |e| self.status_on_entry(e))
            .unwrap_or(HealthStatus::Healthy)
    }

    /// [`get_health_status`](Self::get_health_status) on a resolved entry, allocation-free.
    pub(super) fn status_on_entry(&self, e: &Entry) -> HealthStatus {
        let eff = e.breaker.effective(self.now_ticks());
        HealthStatus::classify(
            e.stats.snapshot().score(),
            eff.state() == BreakerState::Open,
        )
    }

    /// [`breaker_state`](Self::breaker_state) on a resolved entry.
    pub(super) fn state_on_entry(&self, e: &Entry) -> BreakerState {
        e.breaker.effective(self.now_ticks()).state()
    }

    /// The tool's breaker state now (expiry-aware); an unknown tool is closed.
    pub fn breaker_state(&self, tool: &str) -> BreakerState {
        self.with_entry(tool, |e| self.state_on_entry(e))
            .unwrap_or(BreakerState::Closed)
    }

    /// Everything known about the tool, or `None` for a tool never recorded.
    pub fn snapshot(&self, tool: &str) -> Option<ToolHealthSnapshot> {
        let now = self.now_ticks();
        self.with_entry(tool, |e| Self::snapshot_of(e, now))
    }

    /// Every tracked tool's snapshot, sorted by name.
    pub fn health_summary(&self) -> Vec<ToolHealthSnapshot> {
        let now = self.now_ticks();
        let mut all = Vec::with_capacity(self.tracked_tools());
        self.names.for_each(|e| all.push(Self::snapshot_of(e, now)));
        all.sort_unstable_by(|a, b| a.tool.cmp(&b.tool));
        all
    }

    /// Calls counted for names past the cap.
    pub fn overflow(&self) -> OverflowStats {
        OverflowStats {
            success_count: self.overflow_success.load(Ordering::Relaxed),
            failure_count: self.overflow_failure.load(Ordering::Relaxed),
            ignored_count: self.overflow_ignored.load(Ordering::Relaxed),
            cancelled_count: self.overflow_cancelled.load(Ordering::Relaxed),
            records: self.overflow_records.load(Ordering::Relaxed),
        }
    }

    /// Every tool the gate would refuse right now, sorted by name: what to leave out of the tool
    /// list offered to the model, with when to try again.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tool_health::ToolHealthRegistry;
    ///
    /// let registry = ToolHealthRegistry::new();
    /// registry.force_open_for("flaky_api", Duration::from_secs(120));
    /// for t in registry.unavailable_tools() {
    ///     println!("{} unavailable, retry in {:?}", t.tool, t.retry_after);
    /// }
    /// ```
    pub fn unavailable_tools(&self) -> Vec<UnavailableTool> {
        let now = self.now_ticks();
        let mut out = Vec::new();
        self.names.for_each(|e| {
            if self.available_on_entry(e) {
                return;
            }
            let forced = Control::decode(e.control.raw()).forced_open_until(now);
            let eff = e.breaker.effective(now);
            let until = match (forced, eff) {
                (Some(until), _) => until,
                (None, Effective::Open { ready_at, .. }) => ready_at,
                (None, Effective::HalfOpen { lease_end }) => lease_end,
                (None, Effective::Closed) => now,
            };
            out.push(UnavailableTool {
                tool: e.name.to_string(),
                breaker: eff.state(),
                retry_after: until.until(now).to_duration(),
                forced: forced.is_some(),
            });
        });
        out.sort_unstable_by(|a, b| a.tool.cmp(&b.tool));
        out
    }

    /// Visits every tracked tool without allocating per tool (for exporters).
    pub(crate) fn for_each_tool(&self, mut f: impl FnMut(&str, &EntryView)) {
        let now = self.now_ticks();
        self.names.for_each(|e| {
            let view = EntryView {
                stats: e.stats.snapshot(),
                state: e.breaker.effective(now).state(),
                transitions: e.breaker.transition_counts(),
            };
            f(&e.name, &view);
        });
    }

    fn snapshot_of(e: &Entry, now: Ticks) -> ToolHealthSnapshot {
        let eff = e.breaker.effective(now);
        let stats = e.stats.snapshot();
        let score = stats.score();
        let retry_after = match eff {
            Effective::Open { ready_at, .. } => Some(ready_at.until(now).to_duration()),
            _ => None,
        };
        let control = e.control.state();
        ToolHealthSnapshot {
            tool: e.name.to_string(),
            status: HealthStatus::classify(score, eff.state() == BreakerState::Open),
            score,
            success_rate: stats.success_rate(),
            ewma_success: stats.ewma_f64(),
            total_calls: stats.total(),
            success_count: stats.success,
            failure_count: stats.failure,
            refused_count: stats.refused,
            ignored_count: stats.ignored,
            cancelled_count: stats.cancelled,
            avg_duration: stats.avg_duration(),
            max_duration: Duration::from_nanos(stats.max_duration_ns),
            breaker: eff.state(),
            consecutive_failures: e.breaker.consecutive_failures(),
            retry_after,
            shadow_refused_count: stats.shadow_refused,
            control: control.mode,
            shadow: control.shadow,
        }
    }
}
