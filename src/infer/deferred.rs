//! Calls whose verdict comes after their span: the bounded table they wait in.
//!
//! A convention with a [late failure](super::conventions::Convention::late_failure) says its
//! framework reports a failed call by an event in the *parent* span, after the tool span
//! (adk, swiftide). Such a call is registered here when its span starts, under its parent's
//! key; when its span ends without a failure of its own it waits, *closed*, until one of:
//!
//! * the matching verdict event in the parent — the oldest unresolved call of that tool in
//!   that parent (the frameworks report in the order they started the calls): a **failure**;
//! * the framework's next move in the parent — another event there, a new tool span there, or
//!   the parent's end: a **success**;
//! * its due time: [`DEFERRED_VERDICT_BOUND`] after its end, or half the tool's probe lease
//!   if that is sooner, so that a probe's deferred verdict always lands before its lease
//!   expires: a **success**. Every feed callback and the gate flush what is due.
//!
//! Verdicts for *other* calls in the same parent are no move: a framework that awaits calls it
//! ran concurrently reports them one after another (swiftide).
//!
//! Bounded: [`CAPACITY`] calls per feed, in slots allocated once; registering into a full
//! table first resolves the oldest closed call (as a success), and a call that finds no room
//! is not deferred (recorded at its end by what its span showed). Nothing waits longer than its
//! parent lives or its due time. The table never holds its lock while a record runs (records
//! run observers, user code that may log): what a pass resolves is handed back in a batch
//! ([`Resolved`]), every call of it however many (16 in place, the rest spilled to the heap),
//! so that a step's end settles all its calls at once.
//!
//! A step with more calls waiting than [`CAPACITY`] (10,000 failing calls in one agent step,
//! read by a feed that sees the verdicts only when the step ends) keeps the newest 128: the
//! older ones are settled by what their spans showed as room is needed, and the verdicts
//! fail the calls still waiting (the OpenTelemetry SDK and the receiver read 128 events of a
//! span by default too). Every call is recorded once, and the breaker opens.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// The longest a closed call waits for its framework's verdict (when the tool's probe lease is
/// longer than twice this).
pub const DEFERRED_VERDICT_BOUND: Duration = Duration::from_secs(10);

/// How many calls one feed can hold waiting (open or closed).
pub(crate) const CAPACITY: usize = 128;

/// How many resolved calls a batch holds without allocating; past it (a storm: more calls of
/// one step resolved at once) it spills to the heap, never drops or overruns.
pub(crate) const BATCH: usize = 16;

/// When a call that ended at `end` is due, given its tool's probe lease.
pub(crate) fn due(end: Duration, probe_timeout: Duration) -> Duration {
    let wait = if probe_timeout.is_zero() {
        DEFERRED_VERDICT_BOUND
    } else {
        DEFERRED_VERDICT_BOUND.min(probe_timeout / 2)
    };
    end.saturating_add(wait)
}

/// What [`Deferred::close`] did with a call whose span ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Closed<T> {
    /// It waits for its verdict.
    Waits,
    /// Its verdict came while its span was open: taken out, a failure.
    Failed(T),
    /// It is not in the table (record it as usual).
    NotFound,
}

/// How a call left the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resolution {
    /// Its verdict event came: a failure.
    Failed,
    /// The framework moved on, the parent ended, or it was due: what its span showed.
    MovedOn,
}

#[derive(Debug)]
struct Slot<T> {
    parent: u64,
    /// Registration order (older calls are matched first).
    seq: u64,
    /// Its end on the feed's clock, once its span ended; due time.
    closed: Option<(Duration, Duration)>,
    /// Its verdict came while its span was still open.
    failed: bool,
    item: T,
}

/// The waiting calls of one feed. `T` is what the feed needs to record one (the layer's span
/// state, the processor's facts).
#[derive(Debug)]
pub(crate) struct Deferred<T> {
    slots: Mutex<(u64, Vec<Option<Slot<T>>>)>,
    /// Slots in use. Relaxed: a hint read on hot paths; the lock decides.
    used: AtomicUsize,
    /// The earliest due time of a closed call, in nanoseconds of the feed's clock (`u64::MAX`:
    /// none), so that a flush with nothing due takes no lock. Relaxed: written under the lock,
    /// read as a hint (a flush that misses a just-closed call flushes it next time).
    next_due: AtomicU64,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A resolved call: what to record, how it was resolved, when its span ended.
type Item<T> = (T, Resolution, Option<Duration>);

/// Resolved calls handed back: the first [`BATCH`] in place (no allocation for an ordinary
/// step), the rest spilled to the heap. A pass hands back everything it resolved, however
/// many: a step of 17, 100 or 10,000 calls is settled in one pass, none left for later.
pub(crate) struct Resolved<T> {
    items: [Option<Item<T>>; BATCH],
    len: usize,
    spill: Vec<Item<T>>,
}

impl<T> Resolved<T> {
    fn new() -> Self {
        Self {
            items: std::array::from_fn(|_| None),
            len: 0,
            spill: Vec::new(),
        }
    }

    fn push(&mut self, item: T, how: Resolution, end: Option<Duration>) {
        match self.items.get_mut(self.len) {
            Some(slot) => {
                *slot = Some((item, how, end));
                self.len += 1;
            }
            None => self.spill.push((item, how, end)),
        }
    }

    /// Whether this pass handed back nothing.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many calls this pass handed back.
    #[cfg(test)]
    fn count(&self) -> usize {
        self.len + self.spill.len()
    }

    /// The calls, in the order they were resolved: what to record, how they were resolved,
    /// and when their span ended (`None`: let go while still open, it records at its own end).
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = Item<T>> + '_ {
        self.len = 0;
        self.items
            .iter_mut()
            .filter_map(Option::take)
            .chain(self.spill.drain(..))
    }
}

impl<T> Default for Deferred<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Deferred<T> {
    /// An empty table ([`CAPACITY`] slots, allocated now).
    pub(crate) fn new() -> Self {
        Self {
            slots: Mutex::new((0, (0..CAPACITY).map(|_| None).collect())),
            used: AtomicUsize::new(0),
            next_due: AtomicU64::new(u64::MAX),
        }
    }

    fn lock(&self) -> MutexGuard<'_, (u64, Vec<Option<Slot<T>>>)> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many calls wait (a relaxed hint).
    #[cfg_attr(not(feature = "receiver"), allow(dead_code))]
    pub(crate) fn len(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// Whether any call waits (a relaxed hint).
    #[inline]
    pub(crate) fn is_idle(&self) -> bool {
        self.used.load(Ordering::Relaxed) == 0
    }

    /// Registers a call under `parent` when its span starts. A full table first resolves its
    /// oldest closed call (handed back in `out`); with no room at all the call is not
    /// registered (`Err(item)`).
    pub(crate) fn open(&self, parent: u64, item: T, out: &mut Resolved<T>) -> Result<(), T> {
        let mut guard = self.lock();
        let (seq, slots) = &mut *guard;
        let free = match slots.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                let oldest = slots
                    .iter()
                    .enumerate()
                    .filter_map(|(i, s)| {
                        s.as_ref()
                            .filter(|s| s.closed.is_some())
                            .map(|s| (i, s.seq))
                    })
                    .min_by_key(|&(_, seq)| seq)
                    .map(|(i, _)| i);
                let Some(i) = oldest else {
                    return Err(item);
                };
                if let Some(old) = slots[i].take() {
                    let end = old.closed.map(|(end, _)| end);
                    let how = if old.failed {
                        Resolution::Failed
                    } else {
                        Resolution::MovedOn
                    };
                    out.push(old.item, how, end);
                    self.used.fetch_sub(1, Ordering::Relaxed);
                }
                i
            }
        };
        *seq += 1;
        slots[free] = Some(Slot {
            parent,
            seq: *seq,
            closed: None,
            failed: false,
            item,
        });
        self.used.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// The call `is_item` picks ended at `end` (due at `due`): it waits, unless its verdict
    /// already came.
    pub(crate) fn close(
        &self,
        end: Duration,
        due: Duration,
        mut is_item: impl FnMut(&T) -> bool,
    ) -> Closed<T> {
        let mut guard = self.lock();
        let Some(slot) = guard.1.iter_mut().find(|s| {
            s.as_ref()
                .is_some_and(|s| s.closed.is_none() && is_item(&s.item))
        }) else {
            return Closed::NotFound;
        };
        if slot.as_ref().is_some_and(|s| s.failed) {
            if let Some(s) = slot.take() {
                self.used.fetch_sub(1, Ordering::Relaxed);
                return Closed::Failed(s.item);
            }
        }
        if let Some(s) = slot.as_mut() {
            s.closed = Some((end, due));
        }
        self.next_due.fetch_min(nanos(due), Ordering::Relaxed);
        Closed::Waits
    }

    /// Takes the call `is_item` picks out of the table, open or closed (it will be recorded
    /// another way). Whether its verdict had come.
    pub(crate) fn forget(&self, mut is_item: impl FnMut(&T) -> bool) -> Option<bool> {
        let mut guard = self.lock();
        let slot = guard
            .1
            .iter_mut()
            .find(|s| s.as_ref().is_some_and(|s| is_item(&s.item)))?;
        let s = slot.take()?;
        self.used.fetch_sub(1, Ordering::Relaxed);
        Some(s.failed)
    }

    /// Whether a call waits under `parent`.
    pub(crate) fn has_parent(&self, parent: u64) -> bool {
        if self.is_idle() {
            return false;
        }
        self.lock()
            .1
            .iter()
            .any(|s| s.as_ref().is_some_and(|s| s.parent == parent))
    }

    /// A verdict event in `parent` for the call `matches` accepts (by its tool name; any call
    /// when the event names none): the oldest such call without a verdict is failed — handed
    /// back at once when its span ended, marked when it is still open. Whether one was found.
    pub(crate) fn verdict(
        &self,
        parent: u64,
        mut matches: impl FnMut(&T) -> bool,
        out: &mut Resolved<T>,
    ) -> bool {
        let mut guard = self.lock();
        let oldest = guard
            .1
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                s.as_ref()
                    .filter(|s| s.parent == parent && !s.failed && matches(&s.item))
                    .map(|s| (i, s.seq))
            })
            .min_by_key(|&(_, seq)| seq)
            .map(|(i, _)| i);
        let Some(i) = oldest else {
            return false;
        };
        let slot = &mut guard.1[i];
        match slot.as_ref().and_then(|s| s.closed) {
            Some((end, _)) => {
                if let Some(s) = slot.take() {
                    self.used.fetch_sub(1, Ordering::Relaxed);
                    out.push(s.item, Resolution::Failed, Some(end));
                }
            }
            None => {
                if let Some(s) = slot.as_mut() {
                    s.failed = true;
                }
            }
        }
        true
    }

    /// The framework moved on in `parent` (another event, a new tool span): its closed calls
    /// are resolved. With `parent_ended`, its open calls are let go as well (they record at
    /// their own end, undeferred).
    pub(crate) fn moved_on(&self, parent: u64, parent_ended: bool, out: &mut Resolved<T>) {
        self.take_where(out, |s| {
            s.parent == parent && (s.closed.is_some() || parent_ended)
        });
    }

    /// Resolves the closed calls due at `now`.
    pub(crate) fn flush_due(&self, now: Duration, out: &mut Resolved<T>) {
        // No lock while nothing is due.
        if nanos(now) < self.next_due.load(Ordering::Relaxed) {
            return;
        }
        self.take_where(out, |s| s.closed.is_some_and(|(_, due)| due <= now));
    }

    fn take_where(&self, out: &mut Resolved<T>, mut pick: impl FnMut(&Slot<T>) -> bool) {
        if self.is_idle() {
            return;
        }
        let mut guard = self.lock();
        for slot in guard.1.iter_mut() {
            if slot.as_ref().is_some_and(&mut pick) {
                if let Some(s) = slot.take() {
                    self.used.fetch_sub(1, Ordering::Relaxed);
                    let how = if s.failed {
                        Resolution::Failed
                    } else {
                        Resolution::MovedOn
                    };
                    out.push(s.item, how, s.closed.map(|(end, _)| end));
                }
            }
        }
        // The earliest due time of what is left.
        let next = guard
            .1
            .iter()
            .filter_map(|s| s.as_ref().and_then(|s| s.closed).map(|(_, due)| nanos(due)))
            .min()
            .unwrap_or(u64::MAX);
        self.next_due.store(next, Ordering::Relaxed);
    }

    /// A fresh batch to resolve into.
    pub(crate) fn batch(&self) -> Resolved<T> {
        Resolved::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_verdict_fails_the_oldest_matching_call_and_spares_the_others() {
        let d: Deferred<&str> = Deferred::new();
        let mut out = d.batch();
        for name in ["a", "b", "a"] {
            d.open(1, name, &mut out).unwrap();
        }
        // Three spans end; nothing is recorded yet.
        for _ in 0..3 {
            assert_eq!(d.close(ms(10), ms(100), |_| true), Closed::Waits);
        }
        // A verdict for "a" fails the oldest "a"; the others still wait (no move).
        assert!(d.verdict(1, |n| *n == "a", &mut out));
        assert_eq!(
            out.drain().collect::<Vec<_>>(),
            vec![("a", Resolution::Failed, Some(ms(10)))]
        );
        assert!(d.has_parent(1));
        // A verdict in another parent finds nothing.
        assert!(!d.verdict(2, |_| true, &mut out));
        // The next move resolves the rest as they were.
        d.moved_on(1, false, &mut out);
        let rest: Vec<_> = out.drain().map(|(n, how, _)| (n, how)).collect();
        assert_eq!(
            rest,
            vec![("b", Resolution::MovedOn), ("a", Resolution::MovedOn)]
        );
        assert!(d.is_idle());
    }

    #[test]
    fn a_verdict_before_the_span_ends_is_kept_for_its_end() {
        let d: Deferred<u32> = Deferred::new();
        let mut out = d.batch();
        d.open(7, 1, &mut out).unwrap();
        assert!(d.verdict(7, |_| true, &mut out));
        assert!(out.is_empty(), "still open: marked, not resolved");
        assert_eq!(d.close(ms(5), ms(50), |&i| i == 1), Closed::Failed(1));
        assert!(d.is_idle());
    }

    #[test]
    fn due_calls_flush_and_the_bound_respects_the_probe_lease() {
        assert_eq!(due(ms(0), Duration::from_secs(30)), DEFERRED_VERDICT_BOUND);
        assert_eq!(due(ms(0), Duration::from_secs(4)), Duration::from_secs(2));
        assert_eq!(due(ms(0), Duration::ZERO), DEFERRED_VERDICT_BOUND);
        let d: Deferred<u32> = Deferred::new();
        let mut out = d.batch();
        d.open(1, 1, &mut out).unwrap();
        d.open(1, 2, &mut out).unwrap();
        d.close(ms(0), ms(100), |&i| i == 1);
        d.flush_due(ms(99), &mut out);
        assert!(out.is_empty());
        d.flush_due(ms(100), &mut out);
        assert_eq!(out.drain().count(), 1);
        // The open one is never flushed by time; the parent's end lets it go.
        d.flush_due(ms(1_000_000), &mut out);
        assert!(out.is_empty());
        d.moved_on(1, true, &mut out);
        assert_eq!(out.drain().count(), 1);
    }

    #[test]
    fn a_batch_takes_every_call_a_pass_resolves_past_its_sixteen_slots() {
        // 100 calls of one step: 60 verdicts, then the step's end settles the other 40. One
        // batch takes them all (it used to hold 16 and panic at the 17th verdict).
        let d: Deferred<usize> = Deferred::new();
        let mut out = d.batch();
        for i in 0..100 {
            d.open(1, i, &mut out).unwrap();
            assert_eq!(d.close(ms(1), ms(10_000), |&j| j == i), Closed::Waits);
        }
        for _ in 0..60 {
            assert!(d.verdict(1, |_| true, &mut out));
        }
        assert_eq!(out.count(), 60);
        d.moved_on(1, true, &mut out);
        assert_eq!(out.count(), 100, "nothing left for its due time");
        let got: Vec<_> = out.drain().collect();
        assert!(got[..60]
            .iter()
            .all(|(_, how, _)| *how == Resolution::Failed));
        assert!(got[60..]
            .iter()
            .all(|(_, how, _)| *how == Resolution::MovedOn));
        assert!(d.is_idle());
        assert!(out.is_empty() && out.drain().next().is_none());
    }

    #[test]
    fn a_full_table_makes_room_from_its_oldest_closed_call() {
        let d: Deferred<usize> = Deferred::new();
        let mut out = d.batch();
        for i in 0..CAPACITY {
            d.open(1, i, &mut out).unwrap();
        }
        // All open: no room.
        assert_eq!(d.open(1, 999, &mut out), Err(999));
        d.close(ms(1), ms(2), |&i| i == 5);
        d.close(ms(1), ms(2), |&i| i == 3);
        d.open(1, 1000, &mut out).unwrap();
        assert_eq!(out.drain().map(|(i, ..)| i).collect::<Vec<_>>(), vec![3]);
    }
}
