//! Resource subscriptions: which host is subscribed to which resource of which server, and
//! `notifications/resources/updated` from a server to those hosts.
//!
//! The gateway holds one connection to each server for all its hosts, so a server sees one
//! subscriber — the gateway — per resource: it is subscribed upstream when the first host
//! subscribes, and unsubscribed when the last one unsubscribes (or is gone: a host that ends
//! its session without unsubscribing is noticed at the next update, which finds nobody to tell
//! and unsubscribes). An update is forwarded to every host subscribed to that resource, under
//! the URI the host subscribed with (the gateway's `tool-health://{server}/…`, or the server's
//! own). A connection made again (a restarted server) is subscribed again to every resource a
//! host still holds. Hosts on MCP 2026-07-28 name their resources in `subscriptions/listen`
//! and are told on that stream.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use super::{Hosts, Sink};

/// The most resource subscriptions kept (all hosts together): past it a subscribe is refused.
pub(crate) const MAX_SUBSCRIPTIONS: usize = 10_000;

/// How long one host may take to accept an update.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// `(server, the server's own URI)`.
type Key = (String, String);

/// The hosts subscribed to a resource: `(host, the URI it used)`.
type Subscribers = Vec<(u64, String)>;

/// Every resource some host is subscribed to, and who.
#[derive(Debug, Default)]
pub(crate) struct Subscriptions {
    by_resource: Mutex<HashMap<Key, Subscribers>>,
    /// Resources the server is subscribed to whose last host went away without
    /// unsubscribing: the server is unsubscribed at its next update.
    orphaned: Mutex<HashSet<Key>>,
}

/// What a subscribe did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Subscribed {
    /// The first host for this resource: subscribe upstream.
    First,
    /// Another host already holds it (or this one did already).
    Already,
    /// Too many subscriptions.
    Full,
}

impl Subscriptions {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Subscribers>> {
        self.by_resource
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Host `host` subscribes to `uri` of `server`, which it names `shown`.
    pub(crate) fn subscribe(&self, host: u64, server: &str, uri: &str, shown: &str) -> Subscribed {
        let mut map = self.lock();
        let total: usize = map.values().map(Vec::len).sum();
        let key = (server.to_owned(), uri.to_owned());
        let first = !map.contains_key(&key);
        let hosts = map.entry(key).or_default();
        if hosts.iter().any(|(h, _)| *h == host) {
            return Subscribed::Already;
        }
        if total >= MAX_SUBSCRIPTIONS {
            if hosts.is_empty() {
                map.remove(&(server.to_owned(), uri.to_owned()));
            }
            return Subscribed::Full;
        }
        hosts.push((host, shown.to_owned()));
        if first {
            Subscribed::First
        } else {
            Subscribed::Already
        }
    }

    /// Host `host` unsubscribes from `uri` of `server`: whether it was the last one (then
    /// unsubscribe upstream).
    pub(crate) fn unsubscribe(&self, host: u64, server: &str, uri: &str) -> bool {
        let mut map = self.lock();
        let key = (server.to_owned(), uri.to_owned());
        let Some(hosts) = map.get_mut(&key) else {
            return false;
        };
        let before = hosts.len();
        hosts.retain(|(h, _)| *h != host);
        if hosts.is_empty() {
            map.remove(&key);
            return before > 0;
        }
        false
    }

    /// Forgets every subscription of a host that is gone (the resources it was the last to
    /// hold are unsubscribed at their next update).
    pub(crate) fn forget_host(&self, host: u64) {
        let mut orphans = Vec::new();
        self.lock().retain(|key, hosts| {
            hosts.retain(|(h, _)| *h != host);
            if hosts.is_empty() {
                orphans.push(key.clone());
            }
            !hosts.is_empty()
        });
        self.orphaned
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(orphans.into_iter().take(MAX_SUBSCRIPTIONS));
    }

    /// Whether `uri` of `server` was held by a host that went away (once: the caller
    /// unsubscribes the server).
    pub(crate) fn take_orphan(&self, server: &str, uri: &str) -> bool {
        self.orphaned
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&(server.to_owned(), uri.to_owned()))
    }

    /// The URIs of `server` some host is subscribed to.
    pub(crate) fn of_server(&self, server: &str) -> Vec<String> {
        self.lock()
            .keys()
            .filter(|(s, _)| s == server)
            .map(|(_, uri)| uri.clone())
            .collect()
    }

    /// The hosts subscribed to `uri` of `server`, with the URI each used.
    fn hosts_of(&self, server: &str, uri: &str) -> Vec<(u64, String)> {
        self.lock()
            .get(&(server.to_owned(), uri.to_owned()))
            .cloned()
            .unwrap_or_default()
    }
}

impl Hosts {
    /// `server` says `uri` changed: every host subscribed to it is told (each on a task of its
    /// own, under the URI it subscribed with). Whether any host is still subscribed.
    pub(crate) fn resource_updated(&self, server: &str, uri: &str) -> bool {
        let mut anyone = false;
        for (id, shown) in self.subscriptions.hosts_of(server, uri) {
            let host = match self.host(id) {
                Some(h) if !matches!(&h.sink, Sink::Session(p) if p.is_transport_closed()) => h,
                // Gone without unsubscribing (its session ended).
                _ => {
                    self.remove(id);
                    continue;
                }
            };
            anyone = true;
            tokio::spawn(async move {
                let sent = async {
                    match &host.sink {
                        Sink::Session(peer) => peer
                            .notify_resource_updated(
                                rmcp::model::ResourceUpdatedNotificationParam::new(shown),
                            )
                            .await
                            .is_ok(),
                        Sink::Listen(sink) => sink.notify_resource_updated(shown).await.is_ok(),
                    }
                };
                if !matches!(tokio::time::timeout(SEND_TIMEOUT, sent).await, Ok(true)) {
                    tracing::debug!("a host did not take a resource update");
                }
            });
        }
        anyone
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_subscribes_upstream_and_the_last_unsubscribes() {
        let s = Subscriptions::default();
        assert_eq!(
            s.subscribe(1, "ev", "demo://a", "tool-health://ev/demo://a"),
            Subscribed::First
        );
        assert_eq!(
            s.subscribe(1, "ev", "demo://a", "tool-health://ev/demo://a"),
            Subscribed::Already
        );
        assert_eq!(
            s.subscribe(2, "ev", "demo://a", "demo://a"),
            Subscribed::Already
        );
        assert_eq!(s.of_server("ev"), ["demo://a"]);
        assert!(!s.unsubscribe(1, "ev", "demo://a"));
        assert!(s.unsubscribe(2, "ev", "demo://a"));
        assert!(!s.unsubscribe(2, "ev", "demo://a"));
        assert!(s.of_server("ev").is_empty());
        assert_eq!(
            s.subscribe(3, "ev", "demo://b", "demo://b"),
            Subscribed::First
        );
        s.forget_host(3);
        assert!(s.of_server("ev").is_empty());
        assert!(s.take_orphan("ev", "demo://b"), "its last host went away");
        assert!(!s.take_orphan("ev", "demo://b"), "once");
        assert!(
            !s.take_orphan("ev", "demo://a"),
            "unsubscribed by its hosts"
        );
    }
}
