//! The server's tool list, kept as long as the server says it stays fresh: MCP 2026-07-28's
//! caching hints (`ttlMs`, `cacheScope`) on each page of `tools/list`.
//!
//! A page the server answered with `ttlMs` > 0 is kept, by its cursor, until that many
//! milliseconds have passed on the registry's clock (at most [`MAX_TTL`]); until then
//! [`list_tools`](super::ToolHealthClient::list_tools) answers that cursor from here — the same
//! tools filtered by the breakers *now* — and sends nothing. What the spec asks of a client
//! keeps it honest: the server's `notifications/tools/list_changed`
//! ([`server_list_changed`](super::ToolHealthClient::server_list_changed)) and a new
//! connection ([`with_peer`](super::ToolHealthClient::with_peer)) drop every page at once, and a
//! page without a hint (every server of the handshake era, and `ttlMs: 0`) is never kept. The
//! scope is not looked at: one client is one connection, one authorization context.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{CacheScope, Cursor, ListToolsResult};

/// The longest a page is kept, whatever the server says (the TypeScript SDK's client caps it
/// the same way): a day.
pub(crate) const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// The most pages kept (a server paging for ever cannot grow it without bound).
const MAX_PAGES: usize = 1_000;

/// Pages of the server's tool list that are still fresh, by cursor (`None`: the first).
#[derive(Debug, Default)]
pub(crate) struct ListCache {
    pages: Mutex<HashMap<Option<Cursor>, Page>>,
}

#[derive(Debug)]
struct Page {
    /// The server's answer, unfiltered.
    result: ListToolsResult,
    /// Fresh until this instant on the registry's clock.
    until: Duration,
}

impl ListCache {
    /// The page for `cursor` while it is fresh at `now`: the server's answer as it was, its
    /// `ttlMs` what is left of its freshness.
    pub(crate) fn get(&self, cursor: Option<&Cursor>, now: Duration) -> Option<ListToolsResult> {
        let pages = self.pages.lock().unwrap_or_else(PoisonError::into_inner);
        let page = pages.get(&cursor.cloned())?;
        let left = page.until.checked_sub(now).filter(|d| !d.is_zero())?;
        let mut result = page.result.clone();
        result.ttl_ms = Some(millis(left));
        Some(result)
    }

    /// Keeps `result`, the server's answer for `cursor` received at `now`, for as long as its
    /// `ttlMs` says (nothing without one, or with 0).
    pub(crate) fn put(&self, cursor: Option<Cursor>, result: &ListToolsResult, now: Duration) {
        let Some(ttl) = result.ttl_ms.filter(|t| *t > 0) else {
            return;
        };
        let ttl = Duration::from_millis(ttl).min(MAX_TTL);
        let mut pages = self.pages.lock().unwrap_or_else(PoisonError::into_inner);
        pages.retain(|_, p| p.until > now);
        if pages.len() >= MAX_PAGES && !pages.contains_key(&cursor) {
            return;
        }
        pages.insert(
            cursor,
            Page {
                result: result.clone(),
                until: now.saturating_add(ttl),
            },
        );
    }

    /// The server's list changed, or the connection is new: nothing kept is fresh any more.
    pub(crate) fn clear(&self) {
        self.pages
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

/// The hints of a list read page by page: fresh as long as its least fresh page (none when a
/// page had none), private when any page was (and public only when every page said so).
pub(crate) fn merge_hints(into: &mut ListToolsResult, page: &ListToolsResult) {
    into.ttl_ms = match (into.ttl_ms, page.ttl_ms) {
        (Some(a), Some(b)) => Some(a.min(b)),
        _ => None,
    };
    into.cache_scope = match (into.cache_scope, page.cache_scope) {
        (Some(CacheScope::Public), Some(CacheScope::Public)) => Some(CacheScope::Public),
        (None, None) => None,
        _ => Some(CacheScope::Private),
    };
}

/// `d` in whole milliseconds, at least 1 (a page still fresh is never said to be stale).
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::Tool;
    use std::sync::Arc;

    fn page(ttl: Option<u64>, scope: Option<CacheScope>) -> ListToolsResult {
        let mut r = ListToolsResult::with_all_items(vec![Tool::new(
            "ok",
            "",
            Arc::new(serde_json::Map::new()),
        )]);
        r.ttl_ms = ttl;
        r.cache_scope = scope;
        r
    }

    #[test]
    fn a_page_is_kept_as_long_as_its_hint_says_and_no_longer() {
        let cache = ListCache::default();
        let t0 = Duration::from_secs(100);
        cache.put(None, &page(Some(5_000), None), t0);
        let at = |s: u64| cache.get(None, t0 + Duration::from_millis(s));
        assert_eq!(at(0).and_then(|r| r.ttl_ms), Some(5_000));
        assert_eq!(at(4_000).and_then(|r| r.ttl_ms), Some(1_000));
        assert_eq!(at(4_999).and_then(|r| r.ttl_ms), Some(1));
        assert!(at(5_000).is_none(), "stale at its end");
        assert!(cache.get(Some(&"next".into()), t0).is_none(), "by cursor");
    }

    #[test]
    fn no_hint_or_zero_is_never_kept_and_a_change_drops_everything() {
        let cache = ListCache::default();
        let t0 = Duration::from_secs(1);
        cache.put(None, &page(None, None), t0);
        cache.put(Some("z".into()), &page(Some(0), None), t0);
        assert!(cache.get(None, t0).is_none());
        assert!(cache.get(Some(&"z".into()), t0).is_none());
        cache.put(None, &page(Some(60_000), None), t0);
        assert!(cache.get(None, t0).is_some());
        cache.clear();
        assert!(cache.get(None, t0).is_none());
    }

    #[test]
    fn a_server_cannot_pin_a_page_for_ever() {
        let cache = ListCache::default();
        cache.put(None, &page(Some(u64::MAX), None), Duration::ZERO);
        assert!(cache.get(None, MAX_TTL).is_none());
    }

    #[test]
    fn merged_hints_are_the_least_fresh_and_the_most_private() {
        let mut all = page(Some(9_000), Some(CacheScope::Public));
        merge_hints(&mut all, &page(Some(3_000), Some(CacheScope::Public)));
        assert_eq!(
            (all.ttl_ms, all.cache_scope),
            (Some(3_000), Some(CacheScope::Public))
        );
        merge_hints(&mut all, &page(Some(4_000), Some(CacheScope::Private)));
        assert_eq!(
            (all.ttl_ms, all.cache_scope),
            (Some(3_000), Some(CacheScope::Private))
        );
        merge_hints(&mut all, &page(None, None));
        assert_eq!(
            (all.ttl_ms, all.cache_scope),
            (None, Some(CacheScope::Private))
        );
    }
}
