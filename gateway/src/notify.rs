//! `notifications/tools/list_changed` to every connected host.
//!
//! Hosts connect two ways, and hear of changes two ways:
//!
//! * **a session** (the `initialize` handshake, MCP ≤ 2025-11-25: what hosts speak today, the
//!   TypeScript SDK's client): the notification is sent on the session (stdio: a line on
//!   stdout; streamable HTTP: the session's standalone SSE stream);
//! * **a subscription** (MCP 2026-07-28, per-request envelopes: the Python SDK 2.x client in
//!   its default `auto` mode): the host opens `subscriptions/listen` asking for
//!   `toolsListChanged`, and the notification goes on that stream.
//!
//! [`Hosts::changed`] never waits: it wakes one task that sends to every host (a burst of
//! changes while it sends becomes one more round, so hosts are told at least once after the
//! last change, never flooded). A host whose connection is gone is dropped from the list.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::service::{Peer, SubscriptionSink};
use rmcp::RoleServer;
use tokio::sync::Notify;

/// How long one host may take to accept a notification before it is given up for this round.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// The most hosts kept (sessions and subscriptions together); the oldest go first.
const MAX_HOSTS: usize = 10_000;

enum Sink {
    Session(Peer<RoleServer>),
    Listen(SubscriptionSink),
}

/// The connected hosts, told when the tool list changes.
pub(crate) struct Hosts {
    sinks: Mutex<Vec<(u64, Arc<Sink>)>>,
    next_id: AtomicU64,
    wake: Notify,
    /// Rounds of notifications sent (for tests and `/v1/servers`).
    rounds: AtomicU64,
}

impl std::fmt::Debug for Hosts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hosts")
            .field("connected", &self.len())
            .field("rounds", &self.rounds.load(Ordering::Relaxed))
            .finish()
    }
}

impl Hosts {
    /// No hosts yet; [`run`](Self::run) must be spawned for notifications to go out.
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            sinks: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
            wake: Notify::new(),
            rounds: AtomicU64::new(0),
        })
    }

    fn add(&self, sink: Sink) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut sinks = self.sinks.lock().unwrap_or_else(PoisonError::into_inner);
        sinks.retain(|(_, s)| match &**s {
            Sink::Session(peer) => !peer.is_transport_closed(),
            Sink::Listen(_) => true,
        });
        if sinks.len() >= MAX_HOSTS {
            sinks.remove(0);
        }
        sinks.push((id, Arc::new(sink)));
        id
    }

    /// A host that finished the `initialize` handshake.
    pub(crate) fn add_session(&self, peer: Peer<RoleServer>) -> u64 {
        self.add(Sink::Session(peer))
    }

    /// A host's `subscriptions/listen` stream that asked for tool-list changes.
    pub(crate) fn add_listen(&self, sink: SubscriptionSink) -> u64 {
        self.add(Sink::Listen(sink))
    }

    /// Forgets a host (its subscription ended).
    pub(crate) fn remove(&self, id: u64) {
        self.sinks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(i, _)| *i != id);
    }

    /// How many hosts are connected.
    pub(crate) fn len(&self) -> usize {
        self.sinks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// The tool list changed: tell every host (soon, from the notifier task; never waits).
    pub(crate) fn changed(&self) {
        self.wake.notify_one();
    }

    /// The notifier: one round per wake-up, until the process ends.
    pub(crate) async fn run(self: Arc<Self>) {
        loop {
            self.wake.notified().await;
            let sinks: Vec<(u64, Arc<Sink>)> = self
                .sinks
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            let mut gone = Vec::new();
            for (id, sink) in sinks {
                let sent = match &*sink {
                    Sink::Session(peer) => {
                        if peer.is_transport_closed() {
                            gone.push(id);
                            continue;
                        }
                        // A session stays listed until its transport closes: over HTTP a
                        // host may open its notification stream after a failed send.
                        tokio::time::timeout(SEND_TIMEOUT, peer.notify_tool_list_changed())
                            .await
                            .map(|r| r.is_ok() || !peer.is_transport_closed())
                    }
                    Sink::Listen(sink) => {
                        tokio::time::timeout(SEND_TIMEOUT, sink.notify_tool_list_changed())
                            .await
                            .map(|r| r.is_ok())
                    }
                };
                match sent {
                    Ok(true) => {}
                    Ok(false) => gone.push(id),
                    Err(_) => tracing::debug!("a host took over 5 s to accept a notification"),
                }
            }
            if !gone.is_empty() {
                let mut sinks = self.sinks.lock().unwrap_or_else(PoisonError::into_inner);
                sinks.retain(|(id, _)| !gone.contains(id));
            }
            self.rounds.fetch_add(1, Ordering::Relaxed);
        }
    }
}
