//! Logging: each host's `logging/setLevel`, and each server's `notifications/message` to the
//! hosts, the server named.
//!
//! **Decided so.** The gateway holds one connection to each server for all its hosts, and a
//! server keeps one level per connection. So the level the gateway sets on its servers is the
//! most verbose any connected host asked for, sent to every server that has the `logging`
//! capability (and to a server that connects later, or again); each host is sent the messages
//! at or above the level it asked for itself (every message when it asked none), so a host
//! asking `error` never hears another host's `debug`. Setting the level of one server only is
//! not possible in MCP (`logging/setLevel` names none), and a level per server chosen by the
//! gateway's config would be one more setting for what hosts already say. Each message's
//! `logger` names its server: `{server}` when the server gave none, `{server}/{logger}`
//! otherwise. Messages go to hosts connected by a session (`initialize`): MCP 2026-07-28 has no
//! log notifications on `subscriptions/listen`.

#![allow(deprecated)] // logging is deprecated by SEP-2577, and still what hosts use

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};

use super::{Hosts, Sink};

/// Log messages under way to one host at most: past it, messages to that host are dropped (a
/// host that does not read its log costs its own log only).
const MAX_IN_FLIGHT: u64 = 64;

/// How long one host may take to accept a message.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// A level as a number from 1 (`debug`) to 8 (`emergency`).
fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 1,
        LoggingLevel::Info => 2,
        LoggingLevel::Notice => 3,
        LoggingLevel::Warning => 4,
        LoggingLevel::Error => 5,
        LoggingLevel::Critical => 6,
        LoggingLevel::Alert => 7,
        LoggingLevel::Emergency => 8,
    }
}

/// The level of a rank of [`rank`].
fn level(rank: u8) -> LoggingLevel {
    match rank {
        0 | 1 => LoggingLevel::Debug,
        2 => LoggingLevel::Info,
        3 => LoggingLevel::Notice,
        4 => LoggingLevel::Warning,
        5 => LoggingLevel::Error,
        6 => LoggingLevel::Critical,
        7 => LoggingLevel::Alert,
        _ => LoggingLevel::Emergency,
    }
}

impl Hosts {
    /// Host `host` asked for `asked`: the level to set on the servers now (the most verbose any
    /// connected host asked for).
    pub(crate) fn set_level(&self, host: u64, asked: LoggingLevel) -> LoggingLevel {
        match self.host(host) {
            Some(h) => h.level.store(rank(asked), Ordering::Relaxed),
            // A host without a session (MCP 2026-07-28): its level counts for this request.
            None => {
                return self
                    .servers_level()
                    .map_or(asked, |l| level(rank(l).min(rank(asked))))
            }
        }
        self.servers_level().unwrap_or(asked)
    }

    /// The level to set on the servers: the most verbose any connected host asked for (`None`:
    /// none asked).
    pub(crate) fn servers_level(&self) -> Option<LoggingLevel> {
        self.sinks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|(_, h)| h.level.load(Ordering::Relaxed))
            .filter(|r| *r > 0)
            .min()
            .map(level)
    }

    /// A server's log message: to every host connected by a session whose level admits it,
    /// `logger` naming the server (see the module docs). Never waits.
    pub(crate) fn log(&self, server: &str, mut message: LoggingMessageNotificationParam) {
        message.logger = Some(match message.logger.take() {
            Some(logger) if !logger.is_empty() => format!("{server}/{logger}"),
            _ => server.to_owned(),
        });
        let at = rank(message.level);
        let hosts: Vec<Arc<super::Host>> = self
            .sinks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|(_, h)| Arc::clone(h))
            .collect();
        for host in hosts {
            let Sink::Session(peer) = &host.sink else {
                continue;
            };
            if peer.is_transport_closed() || at < host.level.load(Ordering::Relaxed) {
                continue;
            }
            if host.logs_in_flight.fetch_add(1, Ordering::AcqRel) >= MAX_IN_FLIGHT {
                host.logs_in_flight.fetch_sub(1, Ordering::AcqRel);
                continue;
            }
            let peer = peer.clone();
            let message = message.clone();
            let host = Arc::clone(&host);
            tokio::spawn(async move {
                let _ =
                    tokio::time::timeout(SEND_TIMEOUT, peer.notify_logging_message(message)).await;
                host.logs_in_flight.fetch_sub(1, Ordering::AcqRel);
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_keep_their_order() {
        let all = [
            LoggingLevel::Debug,
            LoggingLevel::Info,
            LoggingLevel::Notice,
            LoggingLevel::Warning,
            LoggingLevel::Error,
            LoggingLevel::Critical,
            LoggingLevel::Alert,
            LoggingLevel::Emergency,
        ];
        for (i, l) in all.iter().enumerate() {
            assert_eq!(usize::from(rank(*l)), i + 1);
            assert_eq!(level(rank(*l)), *l);
        }
    }

    #[test]
    fn a_host_without_a_session_sets_its_own_level_and_keeps_none() {
        let hosts = Hosts::new();
        assert_eq!(hosts.servers_level(), None);
        assert_eq!(
            hosts.set_level(99, LoggingLevel::Error),
            LoggingLevel::Error
        );
        assert_eq!(hosts.servers_level(), None, "nothing kept for it");
    }
}
