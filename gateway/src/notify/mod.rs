//! The connected hosts, and the list changes they are told of: `notifications/tools/list_changed`
//! (and `resources/list_changed`, `prompts/list_changed` to the hosts told those capabilities).
//! Each host's logging level and resource subscriptions live beside it (`logging.rs`,
//! `subscriptions.rs`).
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
//! sends per host: told at least once after the last change, never flooded; each list that
//! changed once). A host whose connection is gone is dropped from the list.

mod logging;
pub(crate) mod subscriptions;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::service::{Peer, SubscriptionSendError, SubscriptionSink};
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

/// Which lists changed (a set of bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Lists(u8);

impl Lists {
    /// None.
    pub(crate) const NONE: Self = Self(0);
    /// `tools/list`.
    pub(crate) const TOOLS: Self = Self(1);
    /// `resources/list` (and the templates).
    pub(crate) const RESOURCES: Self = Self(2);
    /// `prompts/list`.
    pub(crate) const PROMPTS: Self = Self(4);
    /// Every list: a server came, went, or its breaker moved.
    pub(crate) const ALL: Self = Self(7);

    /// Both sets.
    pub(crate) fn with(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// Whether `other` is in this set.
    pub(crate) fn has(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
}

/// One host: where to send, which lists it hears of, what is left to send it, its logging
/// level.
struct Host {
    sink: Sink,
    /// The lists this host is told of (what its capabilities or its subscription said).
    hears: Lists,
    /// The lists changed and not yet sent to it.
    pending: AtomicU8,
    /// A send to it is under way.
    sending: AtomicBool,
    /// The level it asked for with `logging/setLevel` (`logging.rs`; 0: none asked).
    level: AtomicU8,
    /// Log messages being sent to it (`logging.rs`: past a bound, messages are dropped).
    logs_in_flight: AtomicU64,
}

/// The connected hosts, told when their lists change.
pub(crate) struct Hosts {
    sinks: Mutex<Vec<(u64, Arc<Host>)>>,
    next_id: AtomicU64,
    /// The lists changed since the notifier last woke.
    wanted: AtomicU8,
    wake: Notify,
    /// Rounds of notifications sent (for tests and `/v1/servers`).
    rounds: AtomicU64,
    /// Who is subscribed to which resource (`subscriptions.rs`).
    pub(crate) subscriptions: subscriptions::Subscriptions,
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
            wanted: AtomicU8::new(0),
            wake: Notify::new(),
            rounds: AtomicU64::new(0),
            subscriptions: subscriptions::Subscriptions::default(),
        })
    }

    /// A new host's id (a session's handler takes one when it is made).
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn add(&self, id: u64, sink: Sink, hears: Lists) {
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
                hears,
                pending: AtomicU8::new(0),
                sending: AtomicBool::new(false),
                level: AtomicU8::new(0),
                logs_in_flight: AtomicU64::new(0),
            }),
        ));
    }

    /// A host that finished the `initialize` handshake (`id` from [`next_id`](Self::next_id)),
    /// told of the changes of `hears`.
    pub(crate) fn add_session(&self, id: u64, peer: Peer<RoleServer>, hears: Lists) {
        self.add(id, Sink::Session(peer), hears);
    }

    /// A host's `subscriptions/listen` stream, told of the changes of `hears` (what it asked
    /// for and was granted); its id.
    pub(crate) fn add_listen(&self, sink: SubscriptionSink, hears: Lists) -> u64 {
        let id = self.next_id();
        self.add(id, Sink::Listen(sink), hears);
        id
    }

    /// Forgets a host (its subscription ended), with its resource subscriptions.
    pub(crate) fn remove(&self, id: u64) {
        self.sinks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(i, _)| *i != id);
        self.subscriptions.forget_host(id);
    }

    /// The host `id`, while it is connected.
    fn host(&self, id: u64) -> Option<Arc<Host>> {
        self.sinks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, h)| Arc::clone(h))
    }

    /// The hosts connected by a session (the `initialize` handshake), with their ids.
    pub(crate) fn sessions(&self) -> Vec<(u64, Peer<RoleServer>)> {
        self.sinks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter_map(|(id, h)| match &h.sink {
                Sink::Session(peer) if !peer.is_transport_closed() => Some((*id, peer.clone())),
                _ => None,
            })
            .collect()
    }

    /// How many hosts are connected.
    pub(crate) fn len(&self) -> usize {
        self.sinks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Every list changed (a server came or went, its breaker moved): tell every host (soon,
    /// from the notifier task; never waits).
    pub(crate) fn changed(&self) {
        self.changed_lists(Lists::ALL);
    }

    /// The lists of `lists` changed: tell every host that hears of them (never waits).
    pub(crate) fn changed_lists(&self, lists: Lists) {
        self.wanted.fetch_or(lists.0, Ordering::AcqRel);
        self.wake.notify_one();
    }

    /// The notifier: at each wake-up, a send to every host on a task of its own (one more
    /// after the one under way for a host being sent to), until the process ends.
    pub(crate) async fn run(self: Arc<Self>) {
        loop {
            self.wake.notified().await;
            let lists = self.wanted.swap(0, Ordering::AcqRel);
            let hosts: Vec<(u64, Arc<Host>)> = self
                .sinks
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            for (id, host) in hosts {
                let lists = lists & host.hears.0;
                if lists == 0 {
                    continue;
                }
                // Orderings: `SeqCst` here and where a send ends, a Dekker handshake — this
                // sets `pending` then reads `sending`, the sender clears `sending` then reads
                // `pending`: one of the two sees the other's write, so a change is never left
                // unsent.
                host.pending.fetch_or(lists, Ordering::SeqCst);
                // Not sending → sending starts a send; one under way takes what is pending
                // when it ends.
                if !host.sending.swap(true, Ordering::SeqCst) {
                    tokio::spawn(Arc::clone(&self).send(id, host));
                }
            }
            self.rounds.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Sends to one host until no change is left for it (see [`run`](Self::run)).
    async fn send(self: Arc<Self>, id: u64, host: Arc<Host>) {
        loop {
            let lists = Lists(host.pending.swap(0, Ordering::SeqCst));
            for list in [Lists::TOOLS, Lists::RESOURCES, Lists::PROMPTS] {
                if !lists.has(list) {
                    continue;
                }
                match tokio::time::timeout(SEND_TIMEOUT, send_one(&host.sink, list)).await {
                    Ok(true) => {}
                    Ok(false) => {
                        self.remove(id);
                        return;
                    }
                    Err(_) => tracing::debug!("a host took over 5 s to accept a notification"),
                }
            }
            // Done, unless a change came meanwhile (it set `pending` before looking at
            // `sending`, so one of the two sees the other).
            host.sending.store(false, Ordering::SeqCst);
            if host.pending.load(Ordering::SeqCst) == 0 || host.sending.swap(true, Ordering::SeqCst)
            {
                return;
            }
        }
    }
}

/// Sends `list`'s change to one host: whether the host is still there.
async fn send_one(sink: &Sink, list: Lists) -> bool {
    match sink {
        Sink::Session(peer) => {
            if peer.is_transport_closed() {
                return false;
            }
            let sent = if list == Lists::TOOLS {
                peer.notify_tool_list_changed().await
            } else if list == Lists::RESOURCES {
                peer.notify_resource_list_changed().await
            } else {
                peer.notify_prompt_list_changed().await
            };
            // A session stays listed until its transport closes: over HTTP a host may open
            // its notification stream after a failed send.
            sent.is_ok() || !peer.is_transport_closed()
        }
        Sink::Listen(sink) => {
            let sent = if list == Lists::TOOLS {
                sink.notify_tool_list_changed().await
            } else if list == Lists::RESOURCES {
                sink.notify_resource_list_changed().await
            } else {
                sink.notify_prompt_list_changed().await
            };
            // A list it did not ask for is no reason to drop it; a closed stream is.
            matches!(
                sent,
                Ok(())
                    | Err(SubscriptionSendError::NotificationNotAccepted(_)
                        | SubscriptionSendError::UnsupportedNotification(_))
            )
        }
    }
}
