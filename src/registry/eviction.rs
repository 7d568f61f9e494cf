//! Tracking: a tool's first sight, the cap, and idle eviction with its handshake with records.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use crate::policy::SettingError;
use crate::ticks::Ticks;

use super::entry::Entry;
use super::names::NameIndex;
use super::ToolHealthRegistry;

impl ToolHealthRegistry {
    /// Runs `f` on the tool's entry, creating it on first sight; `None` past the cap.
    ///
    /// `f` does the record's work first, then the entry is [touched](Self::touch); if the
    /// evictor retired the entry meanwhile, the work is redone on a fresh entry, so a record is
    /// never lost in an evicted entry. Side effects that must happen once (observers) belong
    /// after this returns.
    #[inline]
    pub(super) fn with_entry_or_insert<R>(&self, tool: &str, f: impl Fn(&Entry) -> R) -> Option<R> {
        self.with_entry_or_insert_as(tool, false, f)
    }

    /// [`with_entry_or_insert`](Self::with_entry_or_insert) for an operator control: a tool
    /// with no entry gets one, and past the cap it is declared (see
    /// [`declare_tools`](Self::declare_tools)), so a control never fails for want of a slot
    /// while declarations are left. `None` for a name longer than `max_name_len`, or past the
    /// cap when every slot is declared.
    pub(super) fn with_entry_or_declare<R>(
        &self,
        tool: &str,
        f: impl Fn(&Entry) -> R,
    ) -> Option<R> {
        self.with_entry_or_insert_as(tool, true, f)
    }

    fn with_entry_or_insert_as<R>(
        &self,
        tool: &str,
        declare: bool,
        f: impl Fn(&Entry) -> R,
    ) -> Option<R> {
        if let Some(Some(r)) = self.names.with(tool, |e| {
            let r = f(e);
            self.touch(e).then_some(r)
        }) {
            return Some(r);
        }
        // First sight, or the entry was evicted under us: a new entry can be evicted between
        // its insertion and the work too, so the same work-then-touch applies.
        loop {
            let e = match self.insert_slow(tool, false) {
                Some(e) => e,
                None if declare => self.insert_slow(tool, true)?,
                None => return None,
            };
            let r = f(&e);
            if self.touch(&e) {
                return Some(r);
            }
        }
    }

    /// Declares the application's tools, at run time: each gets its entry now (if it has none)
    /// and keeps it — never evicted, never pushed out by names the model invents — so it always
    /// has its own breaker. Returns how many were not declared before.
    ///
    /// This is how a client learns an MCP server's tools: call it with the registry keys of the
    /// names its `tools/list` answered (`mcp::ToolHealthClient` keys them `{server}/{tool}`
    /// with a server name). Declarations count toward [`max_tools`](Self::max_tools): at most
    /// that many tools can be declared, and undeclared names share what is left (a declaration
    /// made after undeclared names filled the cap is still honoured, so the registry may then
    /// track up to `max_tools` more than its cap, all of them declared).
    ///
    /// Refused as a whole, before anything is declared, when a name is longer than
    /// [`max_name_len`](Self::max_name_len) or the declarations would exceed `max_tools`
    /// (field `tools` of the [`SettingError`]).
    ///
    /// ```
    /// use tool_health::ToolHealthRegistry;
    ///
    /// let registry = ToolHealthRegistry::builder().max_tools(100).build();
    /// // The names an MCP server's `tools/list` answered:
    /// let listed = ["github/search_issues", "github/create_issue"];
    /// assert_eq!(registry.declare_tools(listed).unwrap(), 2);
    /// assert_eq!(registry.declare_tools(listed).unwrap(), 0, "declaring again is a no-op");
    /// assert_eq!(registry.declared_tools(), 2);
    /// ```
    pub fn declare_tools<I, S>(&self, tools: I) -> Result<usize, SettingError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let tools: Vec<S> = tools.into_iter().collect();
        let mut new = std::collections::HashSet::new();
        for t in &tools {
            let t = t.as_ref();
            if let Err(e) = self.validate_name(t) {
                return Err(SettingError::new(
                    "tools",
                    format_args!("a name of {} bytes", e.len()),
                    format!("names of at most max_name_len = {} bytes", e.max()),
                ));
            }
            if !self
                .names
                .with(t, |e| e.is_declared() && !e.is_retired())
                .unwrap_or(false)
            {
                new.insert(t);
            }
        }
        if self.declared_tools() + new.len() > self.max_tools {
            return Err(SettingError::new(
                "tools",
                format_args!(
                    "{} more declared tools ({} already)",
                    new.len(),
                    self.declared_tools()
                ),
                format!("at most max_tools = {} declared tools", self.max_tools),
            ));
        }
        let mut declared = 0;
        for t in new {
            if self.insert_slow(t, true).is_some() {
                declared += 1;
            }
        }
        Ok(declared)
    }

    /// Marks the entry seen in the current sweep epoch, after a record's work; `false` if the
    /// evictor retired it (the caller then redoes the work on a fresh entry).
    ///
    /// # Orderings
    ///
    /// This is a Dekker handshake with [`evict_idle`](Self::evict_idle). The record's last
    /// read-modify-write before this call (the success or failure count, or the failure
    /// counter) is `SeqCst`, and so are the loads here; the evictor bumps the epoch (`SeqCst`)
    /// before it reads the consecutive-failure counter (`SeqCst`). So either the record reads
    /// the new epoch and then races the evictor for `seen` by CAS — exactly one wins — or the
    /// evictor sees the record's writes: a failure makes the tool not fresh and it is kept; a
    /// success is part of the history the eviction forgets, linearised before it. On x86-64
    /// these orderings cost nothing over `Relaxed`. In the steady state this is two loads.
    #[inline(always)]
    pub(super) fn touch(&self, e: &Entry) -> bool {
        if !self.evicting {
            return true; // nothing is ever retired
        }
        e.touch_epoch(self.sweep_epoch.load(Ordering::SeqCst))
    }

    /// A tool's first sight: creates its entry under the insert lock, or `None` past the cap
    /// (after a cap-triggered sweep, when configured, found nothing to evict) and for a name
    /// longer than `max_name_len` (never copied). `declare`: the tool is declared (created
    /// whatever the cap, while declarations are left; an existing entry becomes declared).
    #[cold]
    pub(super) fn insert_slow(&self, tool: &str, declare: bool) -> Option<Arc<Entry>> {
        if self.validate_name(tool).is_err() {
            return None;
        }
        let mut evicted = Vec::new();
        let entry = self.insert_locked(tool, declare, &mut evicted);
        self.notify_evicted(&evicted);
        entry
    }

    /// [`insert_slow`](Self::insert_slow) under the insert lock; entries a cap-triggered sweep
    /// evicts are collected in `evicted` for the observers, told after the lock is released.
    fn insert_locked(
        &self,
        tool: &str,
        declare: bool,
        evicted: &mut Vec<Arc<Entry>>,
    ) -> Option<Arc<Entry>> {
        let mut sweeps = self
            .insert_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let declarable = || self.declared.load(Ordering::Relaxed) < self.max_tools;
        if let Some(e) = self.names.with(tool, Arc::clone) {
            // Retired entries are removed under this lock, so a mapped entry is live.
            if declare && !e.is_declared() {
                if !declarable() {
                    return None;
                }
                e.declare();
                self.declared.fetch_add(1, Ordering::Relaxed);
            }
            return Some(e);
        }
        if declare {
            if !declarable() {
                return None;
            }
        } else if self.tracked.load(Ordering::Relaxed) >= self.max_tools {
            // At most one cap-triggered sweep per eighth of the idle time, so a storm of new
            // names past the cap costs a lookup each, not a scan each.
            let due = |idle_for: Duration| {
                let last = sweeps.back().map_or(Ticks::ZERO, |&(_, start)| start);
                let gap = Ticks::new((Ticks::span(idle_for).get() / 8).max(1));
                self.now_ticks().saturating_sub(last) >= gap
            };
            match self.evict_idle_after {
                Some(idle_for)
                    if due(idle_for) && self.evict_locked(&mut sweeps, idle_for, evicted) > 0 => {}
                _ => return None,
            }
        }
        let entry = Arc::new(Entry::new(
            tool,
            self.policy_for(tool),
            self.sweep_epoch.load(Ordering::Relaxed),
            self.generation_floor.load(Ordering::Relaxed),
            self.tag_of(tool),
            // Under the insert lock: one number per entry (wrapping after 2^32 creations).
            self.incarnations.fetch_add(1, Ordering::Relaxed),
        ));
        if declare {
            entry.declare();
        }
        let entry = self.names.insert_with(tool, || Some(entry))?;
        self.tracked.fetch_add(1, Ordering::Relaxed);
        if declare {
            self.declared.fetch_add(1, Ordering::Relaxed);
        }
        Some(entry)
    }

    /// Evicts tools not recorded for at least `idle_for` whose state is equivalent to fresh:
    /// breaker closed, no consecutive failures, no operator control. Returns how many. Declared
    /// tools are never evicted (see [`declare_tools`](Self::declare_tools)): only the names
    /// the application did not declare make room.
    ///
    /// An open or half-open breaker is never evicted, whatever its idleness; a tool that comes
    /// back after eviction starts fresh (its history is gone, its per-tool policy override is
    /// kept). Call it periodically (or set
    /// [`RegistryBuilder::evict_idle_after`](crate::RegistryBuilder::evict_idle_after) to run it
    /// when the cap is reached), so a long-running process with a churning tool set stays
    /// bounded.
    ///
    /// Idleness is measured in sweeps: each call starts a new sweep epoch, and a tool counts as
    /// idle when it was last recorded in an epoch that ended at least `idle_for` ago. So a tool
    /// is evicted at the latest one sweep period after it became `idle_for` idle.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tool_health::{ManualClock, ToolHealthRegistry};
    ///
    /// let clock = ManualClock::new();
    /// let registry = ToolHealthRegistry::builder()
    ///     .clock(clock.clone())
    ///     .evictable()
    ///     .build();
    /// registry.record_success("one_off_tool", Duration::from_millis(3));
    /// // Sweep periodically, e.g. every minute:
    /// for _ in 0..15 {
    ///     clock.advance(Duration::from_secs(60));
    ///     registry.evict_idle(Duration::from_secs(600));
    /// }
    /// assert!(registry.snapshot("one_off_tool").is_none());
    /// ```
    ///
    /// Only a registry built with [`RegistryBuilder::evictable`](crate::RegistryBuilder::evictable)
    /// (or `evict_idle_after`) evicts; any other returns 0.
    ///
    /// Eviction is invisible to correctness: a [`ToolHandle`](crate::ToolHandle) kept across
    /// it follows its tool to the live entry; a record racing a sweep lands on a live entry;
    /// and every new entry starts its breaker's generations where the evicted entries left off,
    /// so a permit handed out by an evicted entry is never taken for one of its successor's
    /// later episodes. Observers are told ([`HealthObserver::on_evict`](crate::HealthObserver::on_evict)).
    pub fn evict_idle(&self, idle_for: Duration) -> usize {
        let mut evicted = Vec::new();
        let count = {
            let mut sweeps = self
                .insert_lock
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            self.evict_locked(&mut sweeps, idle_for, &mut evicted)
        };
        self.notify_evicted(&evicted);
        count
    }

    fn evict_locked(
        &self,
        sweeps: &mut VecDeque<(u64, Ticks)>,
        idle_for: Duration,
        evicted_entries: &mut Vec<Arc<Entry>>,
    ) -> usize {
        let now = self.now_ticks();
        let epoch = self.sweep_epoch.fetch_add(1, Ordering::SeqCst) + 1;
        sweeps.push_back((epoch, now));
        let cutoff = now.saturating_sub(Ticks::span(idle_for));
        // The newest epoch that started at or before the cutoff: whatever was last seen before
        // it has been idle for at least `idle_for`.
        let Some(&(threshold, _)) = sweeps.iter().rev().find(|&&(_, start)| start <= cutoff) else {
            return 0;
        };
        while sweeps.len() > 1 && sweeps[1].1 <= cutoff {
            sweeps.pop_front();
        }
        let NameIndex::Evictable(map) = &self.names else {
            return 0; // built without eviction: the index only grows
        };
        let map = map.pin();
        let observed = self.has_observers();
        let mut evicted = 0;
        for (name, e) in map.iter() {
            let seen = e.seen.load(Ordering::SeqCst);
            if seen < threshold && !e.is_declared() && e.fresh_equivalent(now) && e.retire(seen) {
                // The entry was closed when won: its generation is its last episode's, and
                // the successor (created under this lock, later) starts there or beyond.
                self.generation_floor
                    .fetch_max(e.breaker.generation(), Ordering::Relaxed);
                map.remove(name);
                self.tracked.fetch_sub(1, Ordering::Relaxed);
                evicted += 1;
                if observed {
                    evicted_entries.push(Arc::clone(e));
                }
            }
        }
        evicted
    }
}
