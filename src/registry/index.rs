//! Tool name → entry: an append-only hash index whose lookups take no lock, no guard and no
//! read-modify-write.
//!
//! The registry never forgets a tool, so its index only ever grows. That allows a structure
//! much cheaper to read than a general concurrent map (which must protect readers from entries
//! being removed and tables being freed, e.g. with an epoch guard whose release is an atomic
//! read-modify-write):
//!
//! * A **level** is an open-addressed table (linear probing, at most half full) of write-once
//!   slots (`OnceLock`), each holding the name's hash and the entry. A slot is filled once and
//!   never changes, so a lookup is plain acquire loads: hash the name, probe from `hash & mask`
//!   to the first empty slot, compare hashes, then names.
//! * **Growth** allocates the next level (twice the slots), copies every entry into it and
//!   publishes it by storing its number in `current` (release). Old levels are never freed
//!   (they cannot be: a reader may still be probing one, and there is no guard to tell), which
//!   bounds their total size by the current level's: the slot arrays cost at most twice the
//!   live table.
//! * **Inserts** are serialised by one mutex (first sight of a name is the only slow path); a
//!   reader racing with an insert or a growth either sees the new entry or reports "absent",
//!   exactly as if it had run just before, and a writer that finds a name absent re-checks
//!   under the mutex.
//!
//! # Orderings
//!
//! `current` is stored with `Release` after the new level is filled and loaded with `Acquire`,
//! so a reader that sees a level number sees that level's slots. Each slot's `OnceLock`
//! publishes its value with its own release/acquire pair. `len` is only touched under the
//! mutex.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// What the index stores: anything that knows its own name.
pub(crate) trait Named {
    /// The name the value is found by.
    fn name(&self) -> &str;
}

/// Slots of level 0; level `k` has `FIRST_LEVEL << k`.
const FIRST_LEVEL: usize = 16;
/// Enough levels for any table that fits in memory.
const LEVELS: usize = 48;

#[derive(Debug)]
struct Slot<T> {
    hash: u64,
    entry: Arc<T>,
}

type Level<T> = Box<[OnceLock<Slot<T>>]>;

/// `a == b`, without a call into `memcmp` for the short names tools have: two overlapping
/// word loads per side. Equal hashes almost always mean equal names, so this runs on hits.
#[inline(always)]
fn same_name(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let n = a.len();
    if n != b.len() {
        return false;
    }
    fn word<const W: usize>(s: &[u8], at: usize) -> [u8; W] {
        let mut w = [0; W];
        w.copy_from_slice(&s[at..at + W]);
        w
    }
    match n {
        8..=16 => {
            u64::from_ne_bytes(word(a, 0)) == u64::from_ne_bytes(word(b, 0))
                && u64::from_ne_bytes(word(a, n - 8)) == u64::from_ne_bytes(word(b, n - 8))
        }
        4..=7 => {
            u32::from_ne_bytes(word(a, 0)) == u32::from_ne_bytes(word(b, 0))
                && u32::from_ne_bytes(word(a, n - 4)) == u32::from_ne_bytes(word(b, n - 4))
        }
        _ => a == b,
    }
}

/// The registry's name → entry index (see the module docs).
#[derive(Debug)]
pub(crate) struct Index<T> {
    hasher: foldhash::fast::RandomState,
    levels: [OnceLock<Level<T>>; LEVELS],
    /// The level holding every entry.
    current: AtomicUsize,
    /// Serialises inserts and growth; never taken by a lookup.
    insert_lock: Mutex<()>,
    /// Entries in the current level (written under `insert_lock`).
    len: AtomicUsize,
}

fn new_level<T>(slots: usize) -> Level<T> {
    (0..slots).map(|_| OnceLock::new()).collect()
}

impl<T: Named> Index<T> {
    pub(crate) fn new() -> Self {
        let levels: [OnceLock<Level<T>>; LEVELS] = std::array::from_fn(|_| OnceLock::new());
        let _ = levels[0].set(new_level(FIRST_LEVEL));
        Self {
            hasher: foldhash::fast::RandomState::default(),
            levels,
            current: AtomicUsize::new(0),
            insert_lock: Mutex::new(()),
            len: AtomicUsize::new(0),
        }
    }

    #[inline(always)]
    fn current(&self) -> &[OnceLock<Slot<T>>] {
        match self.levels[self.current.load(Ordering::Acquire)].get() {
            Some(level) => level,
            None => &[], // unreachable: `current` only ever names a filled level
        }
    }

    /// The entry named `name`, if any. Lock-free: a hash, then acquire loads.
    #[inline(always)]
    pub(crate) fn get(&self, name: &str) -> Option<&Arc<T>> {
        let hash = self.hasher.hash_one(name);
        let level = self.current();
        let mask = level.len().wrapping_sub(1);
        let mut i = hash as usize & mask;
        // At most half full: the probe meets an empty slot.
        while let Some(slot) = level.get(i)?.get() {
            if slot.hash == hash && same_name(slot.entry.name(), name) {
                return Some(&slot.entry);
            }
            i = (i + 1) & mask;
        }
        None
    }

    /// The entry named `name`, creating it with `make` if it is absent (`make` may decline with
    /// `None`). Takes the insert mutex: the slow path of a first sight.
    pub(crate) fn get_or_insert_with(
        &self,
        name: &str,
        make: impl FnOnce() -> Option<Arc<T>>,
    ) -> Option<Arc<T>> {
        let _guard = self
            .insert_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(e) = self.get(name) {
            return Some(Arc::clone(e));
        }
        let entry = make()?;
        debug_assert_eq!(entry.name(), name);
        let len = self.len.load(Ordering::Relaxed) + 1;
        if len * 2 > self.current().len() {
            self.grow();
        }
        let hash = self.hasher.hash_one(name);
        Self::place(self.current(), hash, Arc::clone(&entry));
        self.len.store(len, Ordering::Relaxed);
        Some(entry)
    }

    /// Fills the first empty slot of `hash`'s probe sequence.
    fn place(level: &[OnceLock<Slot<T>>], hash: u64, entry: Arc<T>) {
        let mask = level.len() - 1;
        let mut i = hash as usize & mask;
        let mut slot = Some(Slot { hash, entry });
        while let Some(s) = slot.take() {
            // `set` hands the value back when the slot is taken: probe on.
            slot = level[i].set(s).err();
            i = (i + 1) & mask;
        }
    }

    /// Copies every entry into the next level and publishes it. Under the insert mutex.
    #[cold]
    fn grow(&self) {
        let k = self.current.load(Ordering::Relaxed);
        let old = self.current();
        let next = new_level(old.len() * 2);
        for s in old.iter().filter_map(OnceLock::get) {
            Self::place(&next, s.hash, Arc::clone(&s.entry));
        }
        // Levels are only set here, under the mutex, each once: this `set` cannot fail.
        let _ = self.levels[k + 1].set(next);
        self.current.store(k + 1, Ordering::Release);
    }

    /// Every entry, in no particular order. Entries inserted during the walk may be missed.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<T>> + '_ {
        self.current()
            .iter()
            .filter_map(|s| s.get().map(|s| &s.entry))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Tool(Box<str>);

    impl Named for Tool {
        fn name(&self) -> &str {
            &self.0
        }
    }

    fn entry(name: &str) -> Arc<Tool> {
        Arc::new(Tool(name.into()))
    }

    #[test]
    fn same_name_is_equality() {
        let words = [
            "",
            "a",
            "ab",
            "abc",
            "abcd",
            "abce",
            "bbcd",
            "search",
            "searcH",
            "Search",
            "seaxch",
            "1234567",
            "12345678",
            "12345679",
            "02345678",
            "tool-00000000001",
            "tool-00000000002",
            "xool-00000000001",
            "tool-000000000011",
            "tool-000000000012",
            "αβγδ",
            "αβγε",
        ];
        for a in words {
            for b in words {
                assert_eq!(same_name(a, b), a == b, "{a:?} vs {b:?}");
            }
        }
    }

    #[test]
    fn finds_every_name_across_growths_and_nothing_else() {
        let index = Index::new();
        let names: Vec<String> = (0..5_000).map(|i| format!("tool-{i}")).collect();
        for (i, n) in names.iter().enumerate() {
            assert!(index.get(n).is_none());
            let e = index.get_or_insert_with(n, || Some(entry(n))).unwrap();
            assert_eq!(e.name(), n.as_str());
            // Every earlier name is still found, through every growth.
            if i % 499 == 0 {
                for m in &names[..=i] {
                    assert_eq!(index.get(m).unwrap().name(), m.as_str());
                }
            }
        }
        assert_eq!(index.iter().count(), names.len());
        assert!(index.get("tool-5000").is_none());
        assert!(index.get("").is_none());
        // A second insert of a known name returns the same entry and makes nothing.
        let a = index
            .get_or_insert_with("tool-7", || unreachable!())
            .unwrap();
        assert!(Arc::ptr_eq(&a, index.get("tool-7").unwrap()));
        assert!(index.get_or_insert_with("declined", || None).is_none());
        assert!(index.get("declined").is_none());
    }

    #[test]
    fn readers_never_miss_a_published_entry_while_writers_grow_the_index() {
        let index = Index::new();
        let writers = 2;
        let per_writer = 3_000;
        std::thread::scope(|s| {
            for w in 0..writers {
                let index = &index;
                s.spawn(move || {
                    for i in 0..per_writer {
                        let n = format!("w{w}-{i}");
                        index.get_or_insert_with(&n, || Some(entry(&n))).unwrap();
                        // Once inserted, always found (by this thread, and by everyone after).
                        assert!(index.get(&n).is_some());
                        if i > 0 {
                            assert!(index.get(&format!("w{w}-{}", i - 1)).is_some());
                        }
                    }
                });
            }
            let index = &index;
            s.spawn(move || {
                for i in 0..per_writer {
                    let _ = index.get(&format!("w0-{i}"));
                }
            });
        });
        assert_eq!(index.iter().count(), writers * per_writer);
    }
}
