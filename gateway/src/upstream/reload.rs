//! One upstream's part of a config reload (`crate::reload` decides what changed, `set.rs`
//! changes the set):
//!
//! * **new settings** (`health.servers.NAME`, the defaults it inherits) apply live: the same
//!   process, the same session, the same breakers. The clients over the live connection are
//!   rebuilt with the new timeouts, ping timeout and argument check (a call under way keeps the
//!   ones it started with); restart backoff and connect timeout are read at the next attempt;
//!   breaker settings reach the breakers of the server and of its tools at once, their state
//!   kept (see [`apply_policies`](Upstream::apply_policies));
//! * **a new launch** (`command`, `args`, `env`, `cwd`, `url`, `headers`) restarts it: the
//!   supervisor drains the connection, stops it (its process group, or its HTTP session) and
//!   connects with the new launch at once, with no backoff and its count of early deaths
//!   started over — its breakers stay as they are;
//! * **removed**: the supervisor drains the connection, stops it and ends.
//!
//! **The drain.** The connection is taken out first: no new call reaches it (a call to a
//! restarting server waits for the new connection, as after a crash; one to a removed server
//! is answered that it was removed), and its tools leave the hosts' lists. Calls and listings
//! already under way may finish, for at most [`DRAIN`]; what is still under way then is cut
//! short — its future dropped before the connection closes, so the server is sent a
//! `notifications/cancelled` and nothing counts the call (the library's "cancelled": no verdict)
//! — and its host reads a soft error saying why.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tool_health::{Apply, ToolPolicy};

use super::{key, Conn, Upstream};
use crate::config::ServerConfig;

/// How long a restart or a removal lets the calls under way finish before it cuts them short.
pub(crate) const DRAIN: Duration = Duration::from_secs(10);

/// How long the calls cut short may take to be answered before the connection closes anyway.
const CUT_WAIT: Duration = Duration::from_secs(1);

/// The calls and listings under way on an upstream's connection, and a drain's wait for them.
///
/// Two atomic operations a call, no lock: the last call to end wakes the drain only while one
/// waits. Orderings: `SeqCst` on the count and the flag, a Dekker handshake — the drain sets
/// the flag then reads the count, a call decrements the count then reads the flag, so one of
/// the two sees the other's write: either the drain sees the count at zero, or the last call
/// sees the flag and wakes it (the drain's wake-up is registered before it reads the count).
#[derive(Debug, Default)]
pub(super) struct InFlight {
    count: AtomicUsize,
    draining: AtomicBool,
    ended: Notify,
}

impl InFlight {
    /// One more under way, until the guard drops.
    pub(super) fn enter(&self) -> Busy<'_> {
        self.count.fetch_add(1, Ordering::SeqCst);
        Busy(self)
    }

    /// How many are under way now.
    fn count(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    /// Waits (at most `bound`) until none is under way: whether none is.
    async fn idle_within(&self, bound: Duration) -> bool {
        self.draining.store(true, Ordering::SeqCst);
        let idle = tokio::time::timeout(bound, async {
            loop {
                let ended = self.ended.notified();
                tokio::pin!(ended);
                ended.as_mut().enable();
                if self.count() == 0 {
                    return;
                }
                ended.await;
            }
        })
        .await
        .is_ok();
        self.draining.store(false, Ordering::SeqCst);
        idle
    }
}

/// One call or listing under way, counted while it lives.
pub(super) struct Busy<'a>(&'a InFlight);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::SeqCst) == 1
            && self.0.draining.load(Ordering::SeqCst)
        {
            self.0.ended.notify_waiters();
        }
    }
}

impl Upstream {
    /// A reload changed its settings, not its launch: they apply live (see the module docs).
    pub(crate) fn reconfigure(&self, new: ServerConfig) {
        let old = self.config.swap(Arc::new(new));
        let new = self.config();
        self.apply_policies(&old, &new);
        self.retune();
    }

    /// A reload changed its launch: the supervisor restarts it with the new one (see the
    /// module docs). Its settings apply as [`reconfigure`](Self::reconfigure)'s do.
    pub(crate) fn relaunch(&self, new: ServerConfig) {
        let old = self.config.swap(Arc::new(new));
        let new = self.config();
        self.apply_policies(&old, &new);
        self.retune();
        self.relaunch.notify_one();
    }

    /// A reload removed it: the supervisor drains it, stops it and ends.
    pub(crate) fn remove(&self) {
        self.removed.cancel();
    }

    /// Breaker settings that changed reach the server's breaker and its tools' at once, with
    /// the library's [`Apply::Now`]: each breaker keeps its state and counts, and the new
    /// settings act from its next event — an open breaker stays open until the end of the
    /// cooldown it was given, a probe under way keeps its lease, the consecutive failures
    /// counted so far meet the new threshold at the next failure. So a reload never opens or
    /// closes a breaker by itself. (`docs/gateway.md`, "Reload", says why not only breakers
    /// created after the reload.)
    fn apply_policies(&self, old: &ServerConfig, new: &ServerConfig) {
        let tools: BTreeSet<String> = self
            .known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .chain(old.tools.keys())
            .chain(new.tools.keys())
            .cloned()
            .collect();
        let breaker_of = |c: &ServerConfig, tool: &str| {
            c.tools
                .get(tool)
                .map_or(&c.settings.breaker, |t| &t.breaker)
                .clone()
        };
        if old.settings.breaker != new.settings.breaker {
            tool_health::mcp::server_registry(&self.registry).set_tool_policy(
                &self.name,
                ToolPolicy::from(new.settings.breaker.clone()),
                Apply::Now,
            );
        }
        for tool in &tools {
            let breaker = breaker_of(new, tool);
            if breaker != breaker_of(old, tool) {
                self.registry.set_tool_policy(
                    &key(&self.name, tool),
                    ToolPolicy::from(breaker),
                    Apply::Now,
                );
            }
        }
    }

    /// The live connection's clients rebuilt with the settings of the config now (same peer,
    /// same breakers, same subscription); the next connection's are built from it anyway.
    fn retune(&self) {
        // The lock `install` holds too: a connection installed meanwhile has them already.
        let mut last = self.client.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(client) = last.as_ref() else {
            return;
        };
        let config = self.config();
        let client = super::tuned(client.clone(), &config);
        *last = Some(client.clone());
        // Only over the connection that is there: one that ended stays ended.
        self.conn.rcu(|current| {
            current.as_ref().map(|c| {
                Arc::new(Conn {
                    per_tool: super::per_tool(&client, &config),
                    client: client.clone(),
                    broken: c.broken.clone(),
                    cut: c.cut.clone(),
                })
            })
        });
    }

    /// Waits for the calls under way on `conn` (at most [`DRAIN`]), then cuts short what is
    /// left and waits (at most [`CUT_WAIT`]) until it has been answered (see the module docs).
    pub(super) async fn drain(&self, conn: &Conn) {
        if !self.busy.idle_within(DRAIN).await {
            let left = self.busy.count();
            tracing::info!(
                server = %self.name,
                "MCP server `{}`: {left} call{} still under way after {} s are cut short (not \
                 counted)",
                self.name,
                if left == 1 { "" } else { "s" },
                DRAIN.as_secs()
            );
        }
        conn.cut.cancel();
        self.busy.idle_within(CUT_WAIT).await;
    }

    /// What a host reads of a call cut short by a reload.
    pub(super) fn cut_short(&self, shown: &str) -> String {
        if self.removed.is_cancelled() {
            format!(
                "MCP server `{}` was removed from the gateway's config before tool `{shown}` \
                 answered; the gateway stopped waiting for it (the call counts against nothing)",
                self.name
            )
        } else {
            format!(
                "MCP server `{}` was restarted with a new launch from the gateway's config before \
                 tool `{shown}` answered; the gateway stopped waiting for it (the call counts \
                 against nothing): call it again",
                self.name
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_drain_ends_when_the_last_call_ends_and_not_before() {
        let flight = Arc::new(InFlight::default());
        assert!(flight.idle_within(Duration::ZERO).await, "none under way");
        let (ended_tx, ended_rx) = tokio::sync::oneshot::channel::<()>();
        let (entered_tx, entered_rx) = tokio::sync::oneshot::channel::<()>();
        let f = Arc::clone(&flight);
        let call = tokio::spawn(async move {
            let _a = f.enter();
            let b = f.enter();
            drop(b);
            let _ = entered_tx.send(());
            let _ = ended_rx.await;
        });
        entered_rx.await.unwrap();
        assert_eq!(flight.count(), 1);
        assert!(!flight.idle_within(Duration::ZERO).await, "one under way");
        let drain = tokio::spawn({
            let f = Arc::clone(&flight);
            async move { f.idle_within(Duration::from_secs(600)).await }
        });
        ended_tx.send(()).unwrap();
        call.await.unwrap();
        assert!(drain.await.unwrap(), "woken by the last call's end");
        assert_eq!(flight.count(), 0);
        assert!(!flight.draining.load(Ordering::SeqCst));
    }
}
