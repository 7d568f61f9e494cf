//! How long the tool list a host is given stays as it is: MCP 2026-07-28's caching hints on
//! the gateway's own `tools/list` (`ttlMs`, `cacheScope`), which a host of that protocol keeps
//! and answers from until they run out (the TypeScript SDK 2.x client does).
//!
//! **`ttlMs` is the time to the next change the gateway can foresee**, at most
//! [`LIST_TTL_MAX`]:
//!
//! * a hidden tool (its breaker, or its server's, refuses) comes back when its cooldown ends:
//!   no longer than the earliest of those ends (a tool forced open by an operator is not
//!   foreseen: the release tells the hosts);
//! * a probe under way (a breaker half-open) decides at any moment: `0`;
//! * a server not connected comes back at its next attempt: no longer than that (`0` while an
//!   attempt is under way, or while its listing is late and the host got its last list);
//! * a server that gave its own list a `ttlMs` is asked again when it runs out: no longer
//!   than what is left of it. One that gave none (the handshake era) is listed afresh at every
//!   host's `tools/list` and tells of its changes itself.
//!
//! What cannot be foreseen — a tool that trips, a server that dies or says its list changed,
//! a reload — is told to the hosts as it happens (`notifications/tools/list_changed`, on their
//! session or their `subscriptions/listen` stream), which makes what they keep stale at once;
//! a host that listens for nothing keeps a list up to [`LIST_TTL_MAX`] old, whose tools that
//! tripped meanwhile are refused softly with when to retry.
//!
//! **`cacheScope` is `"public"` only when every server said so of its own list**: the gateway
//! filters by breakers every host shares, and adds nothing of a host's; a server that says
//! `"private"`, or nothing, makes the whole list private.

use std::time::{Duration, Instant};

use tool_health::{BreakerState, ToolHealthSnapshot};

use super::{key, Phase, Upstream};

/// The longest `ttlMs` the gateway gives a host: a minute. A host that does not listen for
/// changes keeps its list no longer than this.
pub(crate) const LIST_TTL_MAX: Duration = Duration::from_secs(60);

/// The caching hints of a list made of several servers' parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Freshness {
    /// How long the list may be taken as it is.
    pub(crate) ttl: Duration,
    /// Whether every server's part may be shared by any client.
    pub(crate) public: bool,
}

impl Default for Freshness {
    /// An empty list: nothing foreseen, nothing private in it.
    fn default() -> Self {
        Self {
            ttl: LIST_TTL_MAX,
            public: true,
        }
    }
}

impl Freshness {
    /// Both parts together: the sooner change, the more private scope.
    pub(crate) fn and(self, other: Self) -> Self {
        Self {
            ttl: self.ttl.min(other.ttl),
            public: self.public && other.public,
        }
    }

    /// `ttlMs`: whole milliseconds.
    pub(crate) fn ttl_ms(self) -> u64 {
        u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX)
    }
}

impl Upstream {
    /// How long this server's part of a host's list stays as it is (see the module docs).
    pub(crate) fn freshness(&self) -> Freshness {
        let now = Instant::now();
        let listed = self.listed.borrow().clone();
        let mut ttl = LIST_TTL_MAX;
        match self.link.borrow().phase {
            Phase::Connecting => ttl = Duration::ZERO,
            Phase::Waiting(at) => ttl = ttl.min(at.into_std().saturating_duration_since(now)),
            Phase::Up | Phase::Stopped => {}
        }
        if listed.served_stale {
            ttl = Duration::ZERO;
        }
        if let Some(until) = listed.hint.until {
            ttl = ttl.min(until.saturating_duration_since(now));
        }
        let servers = tool_health::mcp::server_registry(&self.registry);
        ttl = ttl.min(until_change(servers.snapshot(&self.name).as_ref()));
        let known: Vec<String> = self
            .known
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .cloned()
            .collect();
        for tool in known {
            if ttl.is_zero() {
                break;
            }
            ttl = ttl.min(until_change(
                self.registry.snapshot(&key(&self.name, &tool)).as_ref(),
            ));
        }
        Freshness {
            ttl,
            public: listed.hint.public,
        }
    }
}

/// How long a breaker's part of the list stays as it is: until a refusing breaker's cooldown
/// ends, nothing while a probe is under way, no bound foreseen otherwise.
fn until_change(snapshot: Option<&ToolHealthSnapshot>) -> Duration {
    match snapshot {
        Some(s) if s.breaker == BreakerState::HalfOpen => Duration::ZERO,
        Some(s) => s
            .retry_after
            .filter(|r| *r != Duration::MAX)
            .unwrap_or(Duration::MAX),
        None => Duration::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_together_take_the_sooner_change_and_the_more_private_scope() {
        let a = Freshness {
            ttl: Duration::from_millis(2_500),
            public: true,
        };
        let b = Freshness {
            ttl: Duration::from_secs(30),
            public: false,
        };
        assert_eq!(
            a.and(b),
            Freshness {
                ttl: Duration::from_millis(2_500),
                public: false
            }
        );
        assert_eq!(Freshness::default().and(a), a);
        assert_eq!(a.ttl_ms(), 2_500);
    }
}
