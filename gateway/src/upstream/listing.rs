//! An upstream's tool list: listed through its client (which leaves out what refuses now),
//! under the names hosts see; its last list kept, so that a server slow to list costs its own
//! tools only ([`LIST_WAIT`]); and the tools it listed last, known to the API (a tool it no
//! longer lists is no longer known).

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use rmcp::model::{CacheScope, Tool};
use rmcp::service::ServiceError;
use tool_health::{Apply, ToolPolicy};

use super::{key, said, Upstream};
use crate::names;

/// How long a host's `tools/list` waits for one server's listing before it answers with that
/// server's last list (the listing goes on, and hosts are told when it brings a change): a
/// server whose `tools/list` hangs costs its own tools only.
pub(crate) const LIST_WAIT: Duration = Duration::from_secs(1);

/// The `_meta` key of a listed tool's health (MCP's `_meta` naming: a reverse-DNS prefix of the
/// project's own, then a name).
pub(crate) const HEALTH_META: &str = "io.github.tool-health/health";

/// The most tool names remembered per server (a server listing more is cut off there).
pub(super) const MAX_TOOLS_PER_SERVER: usize = 10_000;

/// A server's last listing: `(own name, tool as hosts see it)`, and how many listings ended.
#[derive(Debug, Clone, Default)]
pub(super) struct Listed {
    tools: Arc<Vec<(String, Tool)>>,
    done: u64,
    /// An answer was given from `tools` while a listing was late: tell hosts if it changes.
    pub(super) served_stale: bool,
    /// The server's caching hints on it (`freshness.rs`).
    pub(super) hint: Hint,
}

/// What a server said of its list (MCP 2026-07-28's caching hints): fresh until when (`None`:
/// it said nothing), and whether any client may share it (`cacheScope: "public"`).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Hint {
    pub(super) until: Option<Instant>,
    pub(super) public: bool,
}

impl Upstream {
    /// Whether this server listed `tool`.
    pub(crate) fn knows(&self, tool: &str) -> bool {
        self.known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(tool)
    }

    /// The tool hosts see as `shown`, as this server last listed it (its `inputSchema` says
    /// which arguments a host mirrors into `Mcp-Param-*` headers: rmcp checks them).
    pub(crate) fn listed_tool(&self, shown: &str) -> Option<Tool> {
        self.listed
            .borrow()
            .tools
            .iter()
            .find(|(_, t)| t.name == shown)
            .map(|(_, t)| t.clone())
    }

    /// Whether a listing of this server succeeded yet (then [`knows`](Self::knows) is its list).
    pub(crate) fn has_listed(&self) -> bool {
        self.listed_ok.load(Ordering::Acquire)
    }

    /// How many tools this server's last listing named.
    pub(crate) fn known_count(&self) -> usize {
        self.known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Remembers the tools a complete listing named (and only those: a tool the server no
    /// longer lists is no longer known), giving each new one the server's policy when it has
    /// one of its own (a tool of the config keeps its own).
    fn learn<'a>(&self, tools: impl IntoIterator<Item = &'a str>) {
        let config = self.config();
        let own = config.settings.breaker != self.registry.config();
        let mut known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        self.listed_ok.store(true, Ordering::Release);
        let before = std::mem::take(&mut *known);
        for tool in tools {
            if known.len() >= MAX_TOOLS_PER_SERVER || known.contains(tool) {
                continue;
            }
            known.insert(tool.to_owned());
            if before.contains(tool) {
                continue;
            }
            if own && !config.tools.contains_key(tool) {
                self.registry.set_tool_policy(
                    &key(&self.name, tool),
                    ToolPolicy::from(config.settings.breaker.clone()),
                    Apply::Now,
                );
            }
        }
    }

    /// Lists the server's tools through its client (which leaves out what refuses now, and
    /// does not ask a server again before its list's `ttlMs` runs out): each tool's own name
    /// and the tool as hosts see it, and the server's hints. Nothing when not connected or the
    /// listing failed (logged).
    async fn list_now(&self) -> (Vec<(String, Tool)>, Hint) {
        let nothing = (Vec::new(), Hint::default());
        let Some(conn) = self.conn.load_full().filter(|c| c.alive()) else {
            return nothing;
        };
        // The client's timeout bounds each page; this bounds a server that pages for ever.
        let deadline = self.config().settings.timeout.saturating_mul(2);
        // Counted like a call: a reload's restart or removal waits for it, then cuts it short
        // before the connection closes (its end is no evidence against the server).
        let _busy = self.busy.enter();
        let listing = tokio::time::timeout(deadline, conn.client.list_all_tools());
        let listed = tokio::select! {
            biased;
            () = conn.cut.cancelled() => return nothing,
            listed = listing => listed,
        };
        let listed = match listed {
            Ok(Ok(listed)) => listed,
            Ok(Err(e)) => {
                if matches!(
                    e,
                    ServiceError::TransportClosed | ServiceError::TransportSend(_)
                ) {
                    conn.broken.cancel();
                }
                tracing::warn!(server = %self.name, "MCP server `{}` could not list its tools: {}", self.name, said(&e));
                return nothing;
            }
            Err(_) => {
                tracing::warn!(server = %self.name, "MCP server `{}` did not list its tools within {:.1} s", self.name, deadline.as_secs_f64());
                return nothing;
            }
        };
        let hint = Hint {
            until: listed
                .result
                .ttl_ms
                .and_then(|ms| Instant::now().checked_add(Duration::from_millis(ms))),
            public: listed.result.cache_scope == Some(CacheScope::Public),
        };
        self.learn(
            listed
                .result
                .tools
                .iter()
                .map(|t| t.name.as_ref())
                .chain(listed.hidden.iter().map(|h| h.name.as_str())),
        );
        // The tools a transport failure may call again (`retryOnReconnect`): those it marks
        // read-only or idempotent, and those hidden now that were so marked before.
        let before = self.retryable.load_full();
        let retryable: HashSet<String> = listed
            .result
            .tools
            .iter()
            .filter(|t| {
                t.annotations.as_ref().is_some_and(|a| {
                    a.read_only_hint == Some(true) || a.idempotent_hint == Some(true)
                })
            })
            .map(|t| t.name.to_string())
            .chain(
                listed
                    .hidden
                    .iter()
                    .filter(|h| before.contains(&h.name))
                    .map(|h| h.name.clone()),
            )
            .collect();
        self.retryable.store(Arc::new(retryable));
        let mut tools = Vec::with_capacity(listed.result.tools.len());
        for mut tool in listed.result.tools {
            match names::shown(&self.name, &tool.name) {
                Ok(shown) => {
                    let own = tool.name.to_string();
                    tool.name = shown.into();
                    tools.push((own, tool));
                }
                // `shown` never answers `NoServer`: the server's part is given.
                Err(names::NameError::Invalid(why)) => self.warn_once(&tool.name, &why),
                Err(names::NameError::NoServer) => {}
            }
        }
        (tools, hint)
    }

    /// Starts a listing unless one is under way; it runs on a task of its own and keeps its
    /// answer as the server's last list (hosts are told when an answer given late changes).
    pub(crate) fn start_listing(self: &Arc<Self>) {
        if self.listing.swap(true, Ordering::AcqRel) {
            return;
        }
        let me = Arc::clone(self);
        tokio::spawn(async move {
            let (tools, hint) = me.list_now().await;
            let mut changed = false;
            me.listed.send_modify(|l| {
                changed = l.served_stale
                    && !l
                        .tools
                        .iter()
                        .map(|(n, _)| n)
                        .eq(tools.iter().map(|(n, _)| n));
                l.tools = Arc::new(tools);
                l.hint = hint;
                l.done += 1;
                l.served_stale = false;
            });
            me.listing.store(false, Ordering::Release);
            if changed {
                me.hosts.changed_lists(crate::notify::Lists::TOOLS);
            }
        });
    }

    /// The tools to offer hosts now, under the names hosts see: a fresh listing when it ends
    /// within `wait`, else the server's last list without what refuses now (see
    /// [`LIST_WAIT`]). Nothing when not connected.
    pub(crate) async fn list(self: &Arc<Self>, wait: Duration) -> Vec<Tool> {
        if self.conn.load_full().filter(|c| c.alive()).is_none() {
            return Vec::new();
        }
        let mut rx = self.listed.subscribe();
        let done = rx.borrow_and_update().done;
        self.start_listing();
        if let Ok(Ok(l)) = tokio::time::timeout(wait, rx.wait_for(|l| l.done > done)).await {
            let tools = Arc::clone(&l.tools);
            drop(l);
            return tools
                .iter()
                .map(|(own, t)| self.with_health(own, t))
                .collect();
        }
        let mut last = Arc::default();
        self.listed.send_if_modified(|l| {
            last = Arc::clone(&l.tools);
            l.served_stale = true;
            false
        });
        tracing::debug!(server = %self.name, "MCP server `{}` is slow to list its tools: hosts get its last list", self.name);
        if self.refused_for().is_some() {
            return Vec::new();
        }
        last.iter()
            .filter(|(own, _)| {
                self.registry
                    .snapshot(&key(&self.name, own))
                    .and_then(|s| s.retry_after)
                    .is_none()
            })
            .map(|(own, t)| self.with_health(own, t))
            .collect()
    }

    /// `tool` (named `own` on this server) with its health in `_meta` under [`HEALTH_META`]:
    /// `status` (`healthy`, `degraded`, `unhealthy`), `score` (0 to 1), `breaker` (`closed`,
    /// `open`, `half_open`), and `retryAfterMs` while it refuses — so a host or a planner may
    /// prefer healthy tools, and show a degraded one before it is left out. A tool never
    /// called is healthy, 1.0, closed.
    fn with_health(&self, own: &str, tool: &Tool) -> Tool {
        let mut tool = tool.clone();
        let snapshot = self.registry.snapshot(&key(&self.name, own));
        let mut health = serde_json::Map::new();
        let (status, score, breaker) = snapshot.as_ref().map_or(
            (
                tool_health::HealthStatus::Healthy,
                1.0,
                tool_health::BreakerState::Closed,
            ),
            |s| (s.status, s.score, s.breaker),
        );
        health.insert("status".into(), status.to_string().into());
        // Three decimals: what a host shows, without the noise of the EWMA's last digits.
        health.insert("score".into(), ((score * 1_000.0).round() / 1_000.0).into());
        health.insert("breaker".into(), breaker.to_string().into());
        if let Some(retry) = snapshot.and_then(|s| s.retry_after) {
            health.insert(
                "retryAfterMs".into(),
                u64::try_from(retry.as_millis()).unwrap_or(u64::MAX).into(),
            );
        }
        tool.meta
            .get_or_insert_with(Default::default)
            .insert(HEALTH_META.to_owned(), health.into());
        tool
    }

    fn warn_once(&self, tool: &str, why: &str) {
        let mut warned = self.warned.lock().unwrap_or_else(PoisonError::into_inner);
        if warned.len() < MAX_TOOLS_PER_SERVER && warned.insert(tool.to_owned()) {
            tracing::warn!(
                server = %self.name,
                "tool {:?} of MCP server `{}` is not offered to hosts: {why}",
                names::printable(tool, 200),
                self.name
            );
        }
    }
}
