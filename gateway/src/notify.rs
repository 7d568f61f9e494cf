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
//! [`Hosts::changed`] never waits: it wakes the notifier, which starts a send to every host
//! **on a task of its own**, so a host slow to accept (a stalled connection, a full pipe) costs
//! its own notifications only, never another host's. A host already being sent to when a
//! change comes gets one more send after the one under way (a burst of changes is one or two
//! sends per host: told at least once after the last change, never flooded). A host whose
//! connection is gone is dropped from the list.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
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

/// No send under way to a host.
const IDLE: u8 = 0;
/// A send is under way.
const SENDING: u8 = 1;
/// A send is under way, and another change came meanwhile: one more send after it.
const AGAIN: u8 = 2;

/// One host: where to send, and whether a send is under way.
struct Host {
    sink: Sink,
    state: AtomicU8,
}

/// The connected hosts, told when the tool list changes.
pub(crate) struct Hosts {
    sinks: Mutex<Vec<(u64, Arc<Host>)>>,
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
        sinks.retain(|(_, h)| match &h.sink {
            Sink::Session(peer) => !peer.is_transport_closed(),
            Sink::Listen(_) => true,
        });
        if sinks.len() >= MAX_HOSTS {
            sinks.remove(0);
        }
        sinks.push((
            id,
            Arc::new(Host {
                sink,
                state: AtomicU8::new(IDLE),
            }),
        ));
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

    /// The notifier: at each wake-up, a send to every host on a task of its own (one more
    /// after the one under way for a host being sent to), until the process ends.
    pub(crate) async fn run(self: Arc<Self>) {
        loop {
            self.wake.notified().await;
            let hosts: Vec<(u64, Arc<Host>)> = self
                .sinks
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            for (id, host) in hosts {
                // IDLE → SENDING starts a send; SENDING → AGAIN asks one more; AGAIN stays.
                let before = host
                    .state
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                        Some(if s == IDLE { SENDING } else { AGAIN })
                    })
                    .unwrap_or(AGAIN);
                if before == IDLE {
                    tokio::spawn(Arc::clone(&self).send(id, host));
                }
            }
            self.rounds.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Sends to one host until no change is left for it (see [`run`](Self::run)).
    async fn send(self: Arc<Self>, id: u64, host: Arc<Host>) {
        loop {
            let sent = match &host.sink {
                Sink::Session(peer) => {
                    if peer.is_transport_closed() {
                        Ok(false)
                    } else {
                        // A session stays listed until its transport closes: over HTTP a
                        // host may open its notification stream after a failed send.
                        tokio::time::timeout(SEND_TIMEOUT, peer.notify_tool_list_changed())
                            .await
                            .map(|r| r.is_ok() || !peer.is_transport_closed())
                    }
                }
                Sink::Listen(sink) => {
                    tokio::time::timeout(SEND_TIMEOUT, sink.notify_tool_list_changed())
                        .await
                        .map(|r| r.is_ok())
                }
            };
            match sent {
                Ok(true) => {}
                Ok(false) => {
                    self.remove(id);
                    return;
                }
                Err(_) => tracing::debug!("a host took over 5 s to accept a notification"),
            }
            // AGAIN → SENDING: one more; SENDING → IDLE: done.
            let before = host
                .state
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                    Some(if s == AGAIN { SENDING } else { IDLE })
                })
                .unwrap_or(IDLE);
            if before != AGAIN {
                return;
            }
        }
    }
}
