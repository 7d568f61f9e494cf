//! Name → entry: which index a registry uses.
//!
//! By default the guard-free append-only [`Index`] (lookups are plain loads; see `index.rs`).
//! A registry built for idle eviction uses papaya instead, which can remove entries and
//! protects readers with an epoch guard (its cost per lookup is in BENCHMARKS.md).

use std::sync::Arc;

use super::entry::Entry;
use super::index::Index;

/// The evicting registry's map.
pub(super) type EvictableMap = papaya::HashMap<Box<str>, Arc<Entry>, foldhash::fast::RandomState>;

/// The registry's name index (see the module docs).
#[derive(Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "one per registry; boxing the index would add a load to every lookup"
)]
pub(super) enum NameIndex {
    /// Entries are never removed: lookups are plain loads.
    AppendOnly(Index<Entry>),
    /// Entries can be evicted: lookups pin an epoch.
    Evictable(EvictableMap),
}

impl NameIndex {
    pub(super) fn new(evictable: bool) -> Self {
        if evictable {
            Self::Evictable(
                papaya::HashMap::builder()
                    .hasher(foldhash::fast::RandomState::default())
                    .build(),
            )
        } else {
            Self::AppendOnly(Index::new())
        }
    }

    /// Runs `f` on the tool's entry. `f` has one call site, so it inlines into the caller's
    /// hot path; the evictable map hands out an owned `Arc` (two reference-count operations,
    /// part of the evictable registry's extra cost) so that no guard outlives the lookup.
    #[inline(always)]
    pub(super) fn with<R>(&self, tool: &str, f: impl FnOnce(&Arc<Entry>) -> R) -> Option<R> {
        let owned;
        let entry = match self {
            Self::AppendOnly(index) => index.get(tool)?,
            Self::Evictable(map) => {
                owned = map.pin().get(tool).cloned()?;
                &owned
            }
        };
        Some(f(entry))
    }

    /// The tool's entry, borrowed from the index, or (evictable map) from `slot`, which holds
    /// an owned `Arc` so that no guard outlives the lookup. No closure: the caller's hot path
    /// stays one function for the optimiser.
    #[inline(always)]
    pub(super) fn get<'a>(
        &'a self,
        tool: &str,
        slot: &'a mut Option<Arc<Entry>>,
    ) -> Option<&'a Arc<Entry>> {
        match self {
            Self::AppendOnly(index) => index.get(tool),
            Self::Evictable(map) => {
                *slot = map.pin().get(tool).cloned();
                slot.as_ref()
            }
        }
    }

    /// Inserts under the registry's insert lock (the caller holds it); `make` may refuse.
    pub(super) fn insert_with(
        &self,
        tool: &str,
        make: impl FnOnce() -> Option<Arc<Entry>>,
    ) -> Option<Arc<Entry>> {
        match self {
            Self::AppendOnly(index) => index.get_or_insert_with(tool, make),
            Self::Evictable(map) => {
                let map = map.pin();
                if let Some(e) = map.get(tool) {
                    return Some(Arc::clone(e));
                }
                let e = make()?;
                map.insert(tool.into(), Arc::clone(&e));
                Some(e)
            }
        }
    }

    pub(super) fn for_each(&self, f: impl FnMut(&Arc<Entry>)) {
        match self {
            Self::AppendOnly(index) => index.iter().for_each(f),
            Self::Evictable(map) => map.pin().values().for_each(f),
        }
    }
}
