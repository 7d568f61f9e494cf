//! The fleet-wide failure streak: each replica's failures added up in the store as they
//! happen, so that the fleet opens once the failures seen anywhere reach the threshold with no
//! success in between — not each replica after its own threshold.
//!
//! * **Failures** reach the task through the registry's outcome listener ([`PendingTools`]):
//!   the record path adds the tool to a fixed set (a hash of its name; no allocation, no lock)
//!   and wakes the task, which reads the tool's counts and reports what is new (the streak
//!   script, at once, not at the next poll).
//! * **Successes** matter only while a streak is open somewhere: the store says so (event `s`,
//!   and every poll), and only then does the task ask the registry to watch the tool's
//!   successes ([`Coordination::watch_successes`]); otherwise the success path pays its one
//!   relaxed load, as without a fleet. A success ends the streak (event `z`).
//! * **The strictest threshold**: a replica that hears of a streak whose threshold is looser
//!   than its own reports its own; the store trips at the lowest reported in the streak.
//! * A replica's own streak still trips it alone (its breaker counts as without a fleet), and a
//!   tool open fleet-wide has no streak (its probe decides). With a quorum (`k > 1`) the fleet
//!   opens only on `k` replicas' own trips: the streak is not used.
//!
//! What a report says, from the counts since the last one: the failures since — after a
//! success here, only those after it (the breaker's consecutive count) — and whether a success
//! came here *while this replica knew of the streak* (`reset`: the streak restarts). Successes
//! from before a replica heard of the streak are no news to it (they came before its first
//! failure, as far as this replica can tell): a replica's first failure in an outage adds to
//! the fleet's streak, it does not restart it. Between replicas, the store's arrival order
//! decides; a replica's own calls within one report keep their order.
//!
//! [`Coordination::watch_successes`]: crate::registry::coordination::Coordination::watch_successes

use std::hash::BuildHasher;
use std::sync::atomic::AtomicU64;

use crate::registry::coordination::OutcomeListener;

use super::*;

/// Slots of [`PendingTools`]; a tool's hash probes [`PROBES`] of them.
const SLOTS: usize = 256;
const PROBES: usize = 8;

/// Tools with news for the fleet-wide streak: the outcome listener the registry calls on each
/// failure (and, while watched, each success). A fixed set of name hashes, so the record path
/// neither allocates nor locks: a tool already pending is not added twice, and a set too full
/// to take a tool says so (the task then looks at every tool).
pub(in crate::fleet) struct PendingTools {
    slots: Box<[AtomicU64; SLOTS]>,
    overflow: AtomicBool,
    hasher: foldhash::fast::FixedState,
    wake: Arc<Notify>,
}

impl std::fmt::Debug for PendingTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PendingTools")
    }
}

impl PendingTools {
    pub(super) fn new(wake: Arc<Notify>) -> Self {
        Self {
            slots: Box::new(std::array::from_fn(|_| AtomicU64::new(0))),
            overflow: AtomicBool::new(false),
            hasher: foldhash::fast::FixedState::with_seed(0x7e11_5ea1),
            wake,
        }
    }

    /// The key of a tool: never zero (zero is an empty slot).
    pub(super) fn key(&self, tool: &str) -> u64 {
        self.hasher.hash_one(tool) | 1
    }

    /// Adds `tool` (see the type's docs).
    ///
    /// Orderings: the record that calls this wrote the tool's counts first; the slot is then
    /// written by a `Release` read-modify-write — also when the tool is pending already, so
    /// that the task's `Acquire` swap of the slot sees this record's counts too, not only the
    /// first pending one's.
    fn add(&self, tool: &str) {
        let key = self.key(tool);
        let start = (key >> 16) as usize;
        for i in 0..PROBES {
            let slot = &self.slots[(start + i) % SLOTS];
            loop {
                let cur = slot.load(Ordering::Relaxed);
                if cur != 0 && cur != key {
                    break; // another tool's: the next slot
                }
                if slot
                    .compare_exchange(cur, key, Ordering::Release, Ordering::Relaxed)
                    .is_ok()
                {
                    return;
                }
            }
        }
        self.overflow.store(true, Ordering::Release);
    }

    /// Takes every pending key into `out`; whether the set overflowed since the last drain.
    pub(super) fn drain(&self, out: &mut Vec<u64>) -> bool {
        for slot in self.slots.iter() {
            if slot.load(Ordering::Relaxed) != 0 {
                let key = slot.swap(0, Ordering::Acquire);
                if key != 0 {
                    out.push(key);
                }
            }
        }
        self.overflow.swap(false, Ordering::Acquire)
    }
}

impl OutcomeListener for PendingTools {
    fn on_outcome(&self, tool: &str, _failed: bool) {
        if tool.len() > wire::MAX_SHARED_NAME {
            return;
        }
        self.add(tool);
        self.wake.notify_one();
    }
}

/// What a replica knows of an open fleet-wide streak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct OpenStreak {
    /// The strictest threshold reported in it.
    threshold: u64,
    /// The tool's success count when this replica heard of the streak (or at its last report
    /// since): more successes than this end the streak.
    successes: u64,
}

impl Task {
    /// Reports the pending tools' news to their fleet-wide streaks.
    pub(super) async fn streaks(&mut self) {
        let mut keys = Vec::new();
        let overflow = self.outcomes.drain(&mut keys);
        if !self.settings.streaks || (keys.is_empty() && !overflow) {
            return;
        }
        let mut tools: Vec<String> = Vec::new();
        if overflow {
            self.registry
                .coordination()
                .for_each_coordination_view(|name, _| tools.push(name.to_owned()));
        } else {
            if keys.iter().any(|k| !self.names.contains_key(k)) {
                // A tool this task has not named yet (created since the last round): learn the
                // registry's names (a name is allocated for the new ones only).
                let outcomes = Arc::clone(&self.outcomes);
                let names = &mut self.names;
                self.registry.coordination().for_each_count(|name, _| {
                    names
                        .entry(outcomes.key(name))
                        .or_insert_with(|| name.to_owned());
                });
            }
            tools.extend(keys.iter().filter_map(|k| self.names.get(k).cloned()));
        }
        for tool in tools {
            self.report_streak(&tool, false).await;
        }
    }

    /// Reports `tool`'s news since its last report (`threshold`: also when there is none, to
    /// make this replica's threshold the streak's if it is stricter).
    pub(super) async fn report_streak(&mut self, tool: &str, threshold: bool) {
        let Some(view) = self.registry.coordination().coordination_view(tool) else {
            return;
        };
        let replica = self.shared.replica;
        let Some(ts) = self.tool(tool) else { return };
        let (shard, hex) = (ts.shard, ts.hex.clone());
        let connected = self.shards[shard].connected;
        let Some(ts) = self.tools.get_mut(tool) else {
            return;
        };
        let (s0, f0) = ts.streak_base(&view);
        ts.streak_sent = Some((view.incarnation, view.success, view.failure));
        let eligible = connected
            && !ts.future
            && ts.episode.is_none()
            && view.state == BreakerState::Closed
            && matches!(view.trip, TripPolicy::ConsecutiveFailures);
        if !eligible {
            return;
        }
        let (ds, df) = (view.success - s0, view.failure - f0);
        // After a success here, only the failures since it (the breaker's own count).
        let add = if ds > 0 { df.min(view.consecutive) } else { df };
        // A success since this replica heard of the streak ends it.
        let reset = ts
            .streak
            .as_mut()
            .is_some_and(|s| std::mem::replace(&mut s.successes, view.success) < view.success);
        let stricter = threshold
            && view.threshold > 0
            && ts
                .streak
                .is_some_and(|s| s.threshold == 0 || u64::from(view.threshold) < s.threshold);
        if add == 0 && !stricter && !reset {
            return; // nothing the fleet's streak needs
        }
        let args = vec![
            hex.clone(),
            if reset { "1" } else { "0" }.to_owned(),
            add.to_string(),
            view.threshold.to_string(),
            arg_ms(view.recovery).to_string(),
            replica.to_string(),
        ];
        let keys = self.keys(
            shard,
            &hex,
            &[Part::State, Part::Streak, Part::Streaks, Part::Open],
        );
        let reply = match self.store.call(shard, Which::Streak, keys, args).await {
            Ok(f) => f,
            Err(e) => {
                self.store_failed(shard, &e);
                return;
            }
        };
        let Some(r) = wire::streak_reply(&reply) else {
            self.reject(Rejected::Reply, 1);
            return;
        };
        self.note(shard, r.boot, r.corrupt);
        tracing::trace!(
            target: LOG_TARGET,
            replica = %replica,
            tool,
            reset,
            add,
            reply = ?r.value,
            "fleet: failure streak reported"
        );
        match r.value {
            StreakReply::Streak { threshold, .. } => self.streak_open(tool, threshold),
            StreakReply::None => self.streak_over(tool),
            StreakReply::Open { ep, remaining } => {
                // Open fleet-wide: an episode this replica had not heard of (its event was
                // lost) is adopted now, at the first failure it cost here.
                self.streak_over(tool);
                let state = SharedState::Open {
                    ep,
                    remaining,
                    cooldown: remaining,
                    by: ReplicaId(0),
                };
                self.apply_state(tool, state, Source::Read).await;
            }
            StreakReply::Tripped { ep, cooldown } => {
                tracing::debug!(
                    target: LOG_TARGET,
                    replica = %replica,
                    tool,
                    ep,
                    "fleet: the fleet's failure streak reached the threshold"
                );
                self.streak_over(tool);
                self.adopt(tool, ep, cooldown, true);
            }
            StreakReply::Future => {
                if let Some(ts) = self.tool(tool) {
                    ts.future = true;
                }
                self.reject(Rejected::Future, 1);
            }
        }
    }

    /// A streak of `tool` is open in the fleet (strictest threshold `threshold`): successes
    /// here count from now on.
    pub(super) fn streak_open(&mut self, tool: &str, threshold: u64) {
        // The count first, then the watch: a success in between is reported with the next
        // report (it is counted as one since), not lost.
        let successes = self
            .registry
            .coordination()
            .coordination_view(tool)
            .map_or(0, |v| v.success);
        let Some(ts) = self.tool(tool) else { return };
        match &mut ts.streak {
            Some(s) => s.threshold = threshold,
            None => {
                ts.streak = Some(OpenStreak {
                    threshold,
                    successes,
                });
                self.registry.coordination().watch_successes(tool, true);
            }
        }
    }

    /// `tool` has no open streak (any more): its successes are not watched.
    pub(super) fn streak_over(&mut self, tool: &str) {
        if let Some(ts) = self.tools.get_mut(tool) {
            if ts.streak.take().is_some() {
                self.registry.coordination().watch_successes(tool, false);
            }
        }
    }

    /// A streak another replica reported (event `s`, or a poll): watch successes, and make this
    /// replica's threshold the streak's if it is stricter.
    pub(super) async fn heard_streak(&mut self, tool: &str, threshold: u64) {
        if !self.settings.streaks {
            return;
        }
        let known = self
            .tools
            .get(tool)
            .and_then(|t| t.streak)
            .map(|s| s.threshold);
        self.streak_open(tool, threshold);
        if known != Some(threshold) {
            self.report_streak(tool, true).await;
        }
    }

    /// The open streaks a poll of shard `shard` listed (all of its own when `complete`): its
    /// others are over.
    pub(super) async fn polled_streaks(
        &mut self,
        shard: usize,
        streaks: Vec<(String, u64, u64)>,
        complete: bool,
    ) {
        if !self.settings.streaks {
            return;
        }
        if complete {
            let listed: std::collections::HashSet<&str> =
                streaks.iter().map(|(t, _, _)| t.as_str()).collect();
            let over: Vec<String> = self
                .tools
                .iter()
                .filter(|(name, t)| {
                    t.shard == shard && t.streak.is_some() && !listed.contains(name.as_str())
                })
                .map(|(name, _)| name.clone())
                .collect();
            for tool in over {
                self.streak_over(&tool);
            }
        }
        for (tool, _, threshold) in streaks {
            if self
                .registry
                .coordination()
                .coordination_view(&tool)
                .is_some()
            {
                self.heard_streak(&tool, threshold).await;
            }
        }
    }
}

impl ToolSync {
    /// The counts the next streak report starts from: the last report's, unless the tool's
    /// entry is not the one they were read from (evicted and created again: it counts from
    /// zero) — or none yet (a tool created since this replica joined: every count is new).
    fn streak_base(&self, view: &CoordinationView) -> (u64, u64) {
        match self.streak_sent {
            Some((incarnation, s, f))
                if incarnation == view.incarnation && s <= view.success && f <= view.failure =>
            {
                (s, f)
            }
            _ => (0, 0),
        }
    }
}
