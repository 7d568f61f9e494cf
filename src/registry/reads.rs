//! Reads: status, state, snapshots, summaries, and what the gate would refuse. None of them
//! creates an entry.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::breaker::BreakerState;
use crate::call::GateDecision;
use crate::control::{Control, ToolControl};
use crate::stats::HealthStatus;
use crate::ticks::{Now, Ticks};

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
    /// `0.3 × success_rate + 0.7 × ewma_success`: what the calls recorded here say, nothing
    /// else. A breaker forced open, or opened by another replica, leaves it as the calls left
    /// it (often 1.0) beside `status` unhealthy and `breaker` open: whether calls go through is
    /// the breaker's to say (README, "The core").
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
    /// The breaker's state now (a half-open breaker whose lease expired reads open; a tool
    /// forced open reads open).
    pub breaker: BreakerState,
    /// Consecutive failures since the last accepted success.
    pub consecutive_failures: u64,
    /// While the gate refuses the tool, how long until it could next admit a call — exactly the
    /// `retry_after` the gate's refusal carries at this instant (`Duration::MAX`: not in any
    /// foreseeable time); `None` while the gate admits calls.
    pub retry_after: Option<Duration>,
    /// Calls a control (shadow mode, force-closed) let through that the breaker would have
    /// refused.
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
    /// Its breaker state (open, or half-open with a probe in flight; a tool forced open reads
    /// open).
    pub breaker: BreakerState,
    /// When a call could next be admitted if nothing else happens (`Duration::MAX`: not in any
    /// foreseeable time): the same as the `retry_after` of the gate's refusal at this instant.
    pub retry_after: Duration,
    /// Whether an operator forced it open.
    pub forced: bool,
}

/// Calls on tools past the tracking cap, counted together on their shared overflow breaker;
/// and the names refused outright.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    /// Calls on untracked tools the overflow breaker refused.
    pub refused_count: u64,
    /// Records that arrived for a name the cap kept out.
    pub records: u64,
    /// The overflow breaker's state now (closed before the first overflow).
    pub breaker: BreakerState,
    /// Gate calls and records refused for a name longer than
    /// [`max_name_len`](crate::ToolHealthRegistry::max_name_len) (never tracked, never copied).
    pub rejected_names: u64,
}

impl Default for OverflowStats {
    fn default() -> Self {
        Self {
            success_count: 0,
            failure_count: 0,
            ignored_count: 0,
            cancelled_count: 0,
            refused_count: 0,
            records: 0,
            breaker: BreakerState::Closed,
            rejected_names: 0,
        }
    }
}

impl ToolHealthRegistry {
    /// The tool's status; an unknown tool is healthy, a tool forced open unhealthy. A shortcut
    /// of [`snapshot`](Self::snapshot)`(tool).status` (with no snapshot for a tool never seen),
    /// named as in the product's first version. Past the cap, an untracked name reads the
    /// overflow breaker's status (the breaker its calls go through).
    pub fn get_health_status(&self, tool: &str) -> HealthStatus {
        self.with_entry(tool, |e| self.status_on_entry(e))
            .unwrap_or_else(|| {
                self.untracked_overflow(tool)
                    .map_or(HealthStatus::Healthy, |e| self.status_on_entry(e))
            })
    }

    /// The overflow breaker, when an untracked `tool`'s calls go through it now (past the cap,
    /// once it exists).
    fn untracked_overflow(&self, tool: &str) -> Option<&Entry> {
        if tool.len() > self.max_name_len || !self.at_cap() {
            return None;
        }
        self.overflow.get().map(|e| &**e)
    }

    /// [`get_health_status`](Self::get_health_status) on a resolved entry, allocation-free.
    pub(super) fn status_on_entry(&self, e: &Entry) -> HealthStatus {
        HealthStatus::classify(
            e.stats.snapshot().score(),
            Self::reported_state(e, self.now_ticks()) == BreakerState::Open,
        )
    }

    /// [`breaker_state`](Self::breaker_state) on a resolved entry.
    pub(super) fn state_on_entry(&self, e: &Entry) -> BreakerState {
        Self::reported_state(e, self.now_ticks())
    }

    /// The state the registry reports for a tool: its breaker's (expiry-aware), except that a
    /// tool forced open reads open — the gate refuses it as an open breaker would, so a status,
    /// a dashboard or a planner must not see it closed and healthy. Its breaker's own state
    /// shows again once the isolation is released or lapses.
    pub(super) fn reported_state(e: &Entry, now: Ticks) -> BreakerState {
        let control = e.control.raw();
        if control != 0 && Control::decode(control).forced_open_until(now).is_some() {
            return BreakerState::Open;
        }
        e.breaker.effective(now).state()
    }

    /// What the gate would answer for the entry at `now`, without changing anything: the one
    /// source of every `retry_after` the reads report (the gate's own, see
    /// `Breaker::peek`). Forced open refuses until its end; a refusal a control does not
    /// enforce admits.
    fn gate_view(e: &Entry, now: Now) -> GateDecision {
        let ctl = Control::decode(e.control.raw());
        if let Some(until) = ctl.forced_open_until(now.at) {
            return GateDecision::Refused {
                retry_after: until.until(now.at).to_duration(),
            };
        }
        match e.breaker.peek(|| now) {
            GateDecision::Refused { .. } if ctl.unenforced() => {
                GateDecision::Allowed(crate::call::Permit::admitted(e.breaker.generation()))
            }
            d => d,
        }
    }

    /// The tool's breaker state now (expiry-aware; forced open reads open); an unknown tool is
    /// closed, and past the cap an untracked name reads the overflow breaker's state. A shortcut
    /// of [`snapshot`](Self::snapshot)`(tool).breaker`.
    pub fn breaker_state(&self, tool: &str) -> BreakerState {
        self.with_entry(tool, |e| self.state_on_entry(e))
            .unwrap_or_else(|| {
                self.untracked_overflow(tool)
                    .map_or(BreakerState::Closed, |e| self.state_on_entry(e))
            })
    }

    /// Everything known about the tool, or `None` for a tool never recorded (and for a name
    /// past the cap: its calls are counted together, in [`overflow`](Self::overflow)).
    pub fn snapshot(&self, tool: &str) -> Option<ToolHealthSnapshot> {
        let now = self.now_step();
        self.with_entry(tool, |e| Self::snapshot_of(e, now))
    }

    /// Every tracked tool's snapshot, sorted by name.
    pub fn health_summary(&self) -> Vec<ToolHealthSnapshot> {
        let now = self.now_step();
        let mut all = Vec::with_capacity(self.tracked_tools());
        self.names.for_each(|e| all.push(Self::snapshot_of(e, now)));
        all.sort_unstable_by(|a, b| a.tool.cmp(&b.tool));
        all
    }

    /// Calls counted for names past the cap (on their shared overflow breaker), and the names
    /// refused for their length.
    pub fn overflow(&self) -> OverflowStats {
        let rejected_names = self.rejected_names.load(Ordering::Relaxed);
        let records = self.overflow_records.load(Ordering::Relaxed);
        let Some(e) = self.overflow.get() else {
            return OverflowStats {
                rejected_names,
                records,
                ..OverflowStats::default()
            };
        };
        let raw = e.stats.raw();
        OverflowStats {
            success_count: raw.success,
            failure_count: raw.failure,
            ignored_count: raw.ignored,
            cancelled_count: raw.cancelled,
            refused_count: raw.refused,
            records,
            breaker: self.state_on_entry(e),
            rejected_names,
        }
    }

    /// A view of the overflow breaker for the crate's exporters, once it exists.
    pub(crate) fn overflow_view(&self, f: impl FnOnce(&EntryView<'_>)) {
        if let Some(e) = self.overflow.get() {
            f(&EntryView {
                entry: e,
                now: self.now_ticks(),
            });
        }
    }

    /// Every tool the gate would refuse right now, sorted by name: what to leave out of the tool
    /// list offered to the model, with when to try again. Tracked tools only: the names past the
    /// cap share the overflow breaker, whose state is in [`overflow`](Self::overflow).
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
        let now = self.now_step();
        let mut out = Vec::new();
        self.names.for_each(|e| {
            if self.available_on_entry(e) {
                return;
            }
            let GateDecision::Refused { retry_after } = Self::gate_view(e, now) else {
                return; // admitted by the time of this reading: the gate's answer wins
            };
            let forced = Control::decode(e.control.raw())
                .forced_open_until(now.at)
                .is_some();
            out.push(UnavailableTool {
                tool: e.name.to_string(),
                breaker: Self::reported_state(e, now.at),
                retry_after,
                forced,
            });
        });
        out.sort_unstable_by(|a, b| a.tool.cmp(&b.tool));
        out
    }

    /// Visits every tracked tool without allocating per tool (for exporters).
    pub(crate) fn for_each_tool(&self, mut f: impl FnMut(&str, &EntryView<'_>)) {
        let now = self.now_ticks();
        self.names
            .for_each(|e| f(&e.name, &EntryView { entry: e, now }));
    }

    /// Whether the registry tracks `tool` now (a read: creates nothing).
    pub(crate) fn is_tracked(&self, tool: &str) -> bool {
        self.with_entry(tool, |e| !e.is_retired()).unwrap_or(false)
    }

    fn snapshot_of(e: &Entry, now: Now) -> ToolHealthSnapshot {
        let state = Self::reported_state(e, now.at);
        let stats = e.stats.snapshot();
        let score = stats.score();
        let retry_after = match Self::gate_view(e, now) {
            GateDecision::Refused { retry_after } => Some(retry_after),
            _ => None,
        };
        let control = e.control.state();
        ToolHealthSnapshot {
            tool: e.name.to_string(),
            status: HealthStatus::classify(score, state == BreakerState::Open),
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
            breaker: state,
            consecutive_failures: e.breaker.consecutive_failures(),
            retry_after,
            shadow_refused_count: stats.shadow_refused,
            control: control.mode,
            shadow: control.shadow,
        }
    }
}
