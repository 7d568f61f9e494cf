//! One tracked tool: its name, stats, breaker, operator control and eviction mark.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::breaker::{Breaker, BreakerState};
use crate::control::Control;
use crate::policy::ToolPolicy;
use crate::stats::{StatsSnapshot, ToolStats};

use super::index::Named;

/// `Entry::seen` of an entry the evictor has claimed: no record may land in it any more.
pub(super) const RETIRED: u64 = u64::MAX;

/// Everything the registry keeps for one tool.
#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) name: Box<str>,
    pub(crate) stats: ToolStats,
    pub(crate) breaker: Breaker,
    pub(crate) control: Control,
    /// The sweep epoch in which the entry was last recorded; [`RETIRED`] once evicted.
    pub(super) seen: AtomicU64,
    /// Slow-call threshold in nanoseconds (`u64::MAX`: off), mirrored from the policy so the
    /// record path reads one atomic instead of the policy.
    pub(super) slow_call_ns: AtomicU64,
}

impl Named for Entry {
    #[inline(always)]
    fn name(&self) -> &str {
        &self.name
    }
}

impl Entry {
    /// A fresh entry under `policy`, marked seen in sweep epoch `epoch`, its breaker's first
    /// episode numbered `generation` (see `ToolHealthRegistry::generation_floor`).
    pub(super) fn new(name: &str, policy: Arc<ToolPolicy>, epoch: u64, generation: u32) -> Self {
        Entry {
            name: name.into(),
            stats: ToolStats::default(),
            slow_call_ns: AtomicU64::new(policy.slow_call_nanos()),
            breaker: Breaker::starting_at(policy, generation),
            control: Control::default(),
            seen: AtomicU64::new(epoch),
        }
    }

    /// Whether the evictor claimed this entry (only ever true in an evicting registry).
    #[inline(always)]
    pub(super) fn is_retired(&self) -> bool {
        self.seen.load(Ordering::Relaxed) == RETIRED
    }

    pub(super) fn set_policy(&self, policy: Arc<ToolPolicy>) {
        self.slow_call_ns
            .store(policy.slow_call_nanos(), Ordering::Relaxed);
        self.breaker.set_policy(policy);
    }
}

/// A read-only view of one entry for the crate's own exporters.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EntryView {
    /// The numbers since the last reset (score, gauges).
    pub(crate) stats: StatsSnapshot,
    /// The counters since the entry was created, resets ignored (what is exported as counters).
    pub(crate) raw: StatsSnapshot,
    /// The state the registry reports (a tool forced open reads open).
    pub(crate) state: BreakerState,
    pub(crate) transitions: [u64; 4],
}
