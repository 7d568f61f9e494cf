//! The set of upstreams: [`Upstreams`], one consistent view of it (what a host's `tools/list`,
//! a call or an API request reads, from start to end), and [`Supervised`], which holds the
//! current view and the supervisors, and changes both when a reload says so.
//!
//! A reload swaps the view whole: a request under way keeps the view it started with (a call to
//! a server removed meanwhile is answered that it was removed, `reload.rs`), the next one reads
//! the new view. Servers the reload does not name keep their `Upstream`, so their process,
//! session, supervisor and breakers.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use arc_swap::ArcSwap;
use rmcp::model::Tool;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tool_health::ToolHealthRegistry;

use super::passthrough::Listable;
use super::{supervise::supervise, Freshness, Phase, Upstream, LIST_WAIT};
use crate::config::{Diff, Secrets, ServerConfig};
use crate::notify::Hosts;

/// How long a reload waits for a removed server to be drained and stopped (the drain, then its
/// process group stopped gently: stdin closed, `SIGTERM`, `SIGKILL`, 2 s apart) before it
/// reports and goes on (the supervisor still finishes the stop).
const REMOVAL_WAIT: Duration = Duration::from_secs(20);

/// Every upstream, by name: one view of the set.
#[derive(Debug, Default)]
pub(crate) struct Upstreams {
    by_name: BTreeMap<String, Arc<Upstream>>,
}

impl Upstreams {
    pub(crate) fn get(&self, name: &str) -> Option<&Arc<Upstream>> {
        self.by_name.get(name)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<Upstream>> {
        self.by_name.values()
    }

    /// Waits (at most `timeout` in all) until every first connection attempt ended.
    pub(crate) async fn wait_ready(&self, timeout: Duration) {
        let deadline = tokio::time::Instant::now() + timeout;
        for u in self.by_name.values() {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            u.wait_ready(left).await;
        }
    }

    /// Every server's tools as hosts see them, listed concurrently, in server order; a server
    /// slow to list costs its own tools only ([`LIST_WAIT`]).
    pub(crate) async fn list(&self) -> Vec<Tool> {
        let lists =
            futures_util::future::join_all(self.by_name.values().map(|u| u.list(LIST_WAIT))).await;
        lists.into_iter().flatten().collect()
    }

    /// Every server's list of `T` (resources, templates, prompts) as it gave it, listed
    /// concurrently, in server order, with the server's name: a server slow to list costs its
    /// own entries only ([`LIST_WAIT`]).
    pub(crate) async fn listed<T: Listable>(&self) -> Vec<(Arc<str>, Arc<Vec<T>>)> {
        futures_util::future::join_all(
            self.by_name
                .values()
                .map(|u| async move { (Arc::clone(&u.name), u.listed::<T>().await) }),
        )
        .await
    }

    /// How long the list [`list`](Self::list) answered stays as it is, and who may keep it
    /// (`freshness.rs`).
    pub(crate) fn freshness(&self) -> Freshness {
        self.by_name
            .values()
            .map(|u| u.freshness())
            .fold(Freshness::default(), Freshness::and)
    }
}

/// A handle on the set as it is now, for what lives as long as the gateway (metrics
/// callbacks, the status page's groups): each read sees the set of that moment.
#[derive(Debug, Clone)]
pub(crate) struct View(Arc<ArcSwap<Upstreams>>);

impl View {
    /// The set now.
    pub(crate) fn now(&self) -> Arc<Upstreams> {
        self.0.load_full()
    }
}

/// The current view of the set, and a supervisor per upstream.
pub(crate) struct Supervised {
    current: View,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    registry: Arc<ToolHealthRegistry>,
    hosts: Arc<Hosts>,
    secrets: Arc<Secrets>,
    /// The gateway's: every supervisor ends with it.
    shutdown: CancellationToken,
}

impl std::fmt::Debug for Supervised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervised")
            .field("upstreams", &self.current.now())
            .finish_non_exhaustive()
    }
}

impl Supervised {
    /// One upstream per entry of `servers`, supervised until `shutdown` once
    /// [`supervise`](Self::supervise) starts them.
    pub(crate) fn new(
        servers: &[ServerConfig],
        registry: &Arc<ToolHealthRegistry>,
        hosts: &Arc<Hosts>,
        secrets: &Arc<Secrets>,
        shutdown: &CancellationToken,
    ) -> Self {
        let set = Self {
            current: View(Arc::new(ArcSwap::from_pointee(Upstreams::default()))),
            tasks: Mutex::new(Vec::new()),
            registry: Arc::clone(registry),
            hosts: Arc::clone(hosts),
            secrets: Arc::clone(secrets),
            shutdown: shutdown.clone(),
        };
        set.current.0.store(Arc::new(Upstreams {
            by_name: servers
                .iter()
                .map(|s| (s.name.clone(), set.upstream(s)))
                .collect(),
        }));
        set
    }

    /// Starts a supervisor for each upstream (inside a tokio runtime).
    pub(crate) fn supervise(&self) {
        for u in self.now().iter() {
            self.spawn(Arc::clone(u));
        }
    }

    /// The set now (a view: a reload swaps it whole).
    pub(crate) fn now(&self) -> Arc<Upstreams> {
        self.current.now()
    }

    /// A handle on the set as it is at each read.
    pub(crate) fn view(&self) -> View {
        self.current.clone()
    }

    fn upstream(&self, config: &ServerConfig) -> Arc<Upstream> {
        Upstream::new(config.clone(), &self.registry, &self.hosts, &self.secrets)
    }

    fn spawn(&self, upstream: Arc<Upstream>) {
        let task = tokio::spawn(supervise(upstream, self.shutdown.child_token()));
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        tasks.retain(|t| !t.is_finished());
        tasks.push(task);
    }

    /// Applies a reload's `diff`: the new view first (hosts are told when servers come or go),
    /// then the servers removed are drained and stopped, those with a new launch restarted,
    /// those with new settings re-configured live, the new ones started. Returns once every
    /// removed server is stopped (at most [`REMOVAL_WAIT`]): the names of those that were not.
    pub(crate) async fn apply(&self, diff: &Diff) -> Vec<String> {
        let before = self.now();
        let mut next = before.by_name.clone();
        let mut leaving = Vec::new();
        for name in &diff.removed {
            if let Some(u) = next.remove(name) {
                leaving.push(u);
            }
        }
        let added: Vec<Arc<Upstream>> = diff.added.iter().map(|s| self.upstream(s)).collect();
        for u in &added {
            next.insert(u.name.to_string(), Arc::clone(u));
        }
        self.current.0.store(Arc::new(Upstreams { by_name: next }));
        for u in &leaving {
            u.remove();
        }
        for (config, _) in &diff.restarted {
            if let Some(u) = before.get(&config.name) {
                u.relaunch(config.clone());
            }
        }
        for (config, _) in &diff.reconfigured {
            if let Some(u) = before.get(&config.name) {
                u.reconfigure(config.clone());
            }
        }
        for u in added {
            self.spawn(u);
        }
        if diff.moves_servers() {
            self.hosts.changed();
        }
        let stopped =
            futures_util::future::join_all(leaving.iter().map(|u| u.stopped(REMOVAL_WAIT))).await;
        leaving
            .iter()
            .zip(stopped)
            .filter(|(_, done)| !done)
            .map(|(u, _)| u.name.to_string())
            .collect()
    }

    /// Waits (at most `timeout`) for every supervisor to end, once the gateway's shutdown was
    /// cancelled.
    pub(crate) async fn stopped(&self, timeout: Duration) {
        let tasks: Vec<JoinHandle<()>> =
            std::mem::take(&mut *self.tasks.lock().unwrap_or_else(PoisonError::into_inner));
        let _ = tokio::time::timeout(timeout, futures_util::future::join_all(tasks)).await;
    }
}

impl Upstream {
    /// Waits (at most `timeout`) until its supervisor ended: whether it did.
    async fn stopped(&self, timeout: Duration) -> bool {
        let mut rx = self.link.subscribe();
        let stopped = tokio::time::timeout(timeout, rx.wait_for(|l| l.phase == Phase::Stopped))
            .await
            .is_ok();
        stopped
    }
}
