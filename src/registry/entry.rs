//! One tracked tool: its name, stats, breaker, operator control and eviction mark.

#[cfg(all(test, tool_health_loom))]
use loom::sync::atomic::AtomicU64 as SeenAtomic;
#[cfg(not(all(test, tool_health_loom)))]
use std::sync::atomic::AtomicU64 as SeenAtomic;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::breaker::{Breaker, BreakerState, Effective};
use crate::call::{CallReport, GateDecision};
use crate::control::Control;
use crate::policy::ToolPolicy;
use crate::stats::{StatsSnapshot, ToolStats};
use crate::ticks::Ticks;

use super::index::Named;

/// `Entry::seen` of an entry the evictor has claimed: no record may land in it any more.
pub(super) const RETIRED: u64 = u64::MAX;
/// `Entry::seen` of a declared tool: never old enough to evict, and no touch changes it.
pub(super) const PINNED: u64 = u64::MAX - 1;

/// Everything the registry keeps for one tool.
#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) name: Box<str>,
    pub(crate) stats: ToolStats,
    pub(crate) breaker: Breaker,
    pub(crate) control: Control,
    /// The sweep epoch in which the entry was last recorded; [`RETIRED`] once evicted;
    /// [`PINNED`] for a declared tool (the application's: never evicted).
    pub(super) seen: SeenAtomic,
}

impl Named for Entry {
    #[inline(always)]
    fn name(&self) -> &str {
        &self.name
    }
}

impl Entry {
    /// A fresh entry under `policy`, marked seen in sweep epoch `epoch`, its breaker's first
    /// episode numbered `generation` (see `ToolHealthRegistry::generation_floor`), its permits
    /// tagged `tag` (see `ToolHealthRegistry::tag_of`), its counters those of the tool's entry
    /// number `incarnation`.
    pub(super) fn new(
        name: &str,
        policy: Arc<ToolPolicy>,
        epoch: u64,
        generation: u32,
        tag: u32,
        incarnation: u32,
    ) -> Self {
        Entry {
            name: name.into(),
            stats: ToolStats::counting(incarnation),
            breaker: Breaker::starting_at(policy, generation, tag),
            control: Control::default(),
            seen: SeenAtomic::new(epoch),
        }
    }

    /// Whether the application declared the tool.
    #[inline]
    pub(super) fn is_declared(&self) -> bool {
        self.seen.load(Ordering::Relaxed) == PINNED
    }

    /// Declares the tool (under the registry's insert lock): pinned, unless the evictor
    /// retired it already (the caller then finds the entry gone from the index).
    pub(super) fn declare(&self) {
        let mut seen = self.seen.load(Ordering::SeqCst);
        while seen != RETIRED && seen != PINNED {
            match self
                .seen
                .compare_exchange_weak(seen, PINNED, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return,
                Err(actual) => seen = actual,
            }
        }
    }

    /// Whether the evictor claimed this entry (only ever true in an evicting registry).
    #[inline(always)]
    pub(super) fn is_retired(&self) -> bool {
        self.seen.load(Ordering::Relaxed) == RETIRED
    }

    /// The gate's fast path: no control (and not retired: retiring sets a bit in the control
    /// word) and a closed breaker admit on two loads. `None`: the slow path decides.
    #[inline(always)]
    pub(super) fn admit_fast(&self) -> Option<GateDecision> {
        if self.control.raw() != 0 {
            return None;
        }
        self.breaker.closed_permit().map(GateDecision::Allowed)
    }

    /// Whether `report`'s permit (if any) was handed out by another breaker than this entry's.
    #[inline(always)]
    pub(super) fn is_foreign(&self, report: &CallReport<'_>) -> bool {
        report.permit.is_some_and(|p| p.tag() != self.breaker.tag())
    }

    /// Marks the entry seen in sweep epoch `epoch`, after a record's work; `false` if the
    /// evictor retired it. The entry side of the handshake `ToolHealthRegistry::touch`
    /// describes.
    #[inline(always)]
    pub(super) fn touch_epoch(&self, epoch: u64) -> bool {
        let mut seen = self.seen.load(Ordering::SeqCst);
        while seen != epoch {
            if seen >= PINNED {
                return seen == PINNED; // declared: never evicted, nothing to mark
            }
            match self
                .seen
                .compare_exchange_weak(seen, epoch, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return true,
                Err(actual) => seen = actual,
            }
        }
        true
    }

    /// What the evictor takes for a fresh tool at `now`: breaker closed, no consecutive
    /// failures, no control. The control is read `SeqCst`: setting one is a record's work in
    /// the eviction handshake.
    pub(super) fn fresh_equivalent(&self, now: Ticks) -> bool {
        self.breaker.effective(now) == Effective::Closed
            && self.breaker.consecutive_failures() == 0
            && self.control.raw_for_eviction() == 0
    }

    /// The evictor claims the entry if it was last seen in epoch `seen`: no record lands in it
    /// from then on, and its gate leaves the fast path (the retired bit in the control word)
    /// so a handle on it follows its tool to the live entry. `false`: a record touched it
    /// meanwhile, the entry stays.
    pub(super) fn retire(&self, seen: u64) -> bool {
        if self
            .seen
            .compare_exchange(seen, RETIRED, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return false;
        }
        self.control.retire();
        true
    }

    pub(super) fn set_policy(&self, policy: Arc<ToolPolicy>) {
        self.breaker.set_policy(policy);
    }
}

/// A read-only view of one entry for the crate's own exporters: each part is read when asked
/// for, so a metrics callback reads only what its instrument reports.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EntryView<'a> {
    pub(super) entry: &'a Entry,
    pub(super) now: Ticks,
}

impl EntryView<'_> {
    /// The numbers since the last reset (score, gauges).
    pub(crate) fn stats(&self) -> StatsSnapshot {
        self.entry.stats.snapshot()
    }

    /// The counters since the entry was created, resets ignored (what is exported as counters).
    pub(crate) fn raw(&self) -> StatsSnapshot {
        self.entry.stats.raw()
    }

    /// The state the registry reports (a tool forced open reads open).
    pub(crate) fn state(&self) -> BreakerState {
        super::ToolHealthRegistry::reported_state(self.entry, self.now)
    }

    /// Transitions taken, per edge of `Transition::PAIRS`.
    pub(crate) fn transitions(&self) -> [u64; 5] {
        self.entry.breaker.transition_counts()
    }
}
