//! The probes agents hold: `POST /v1/tools/{tool}/claim` answered `probe`, by id, until the
//! agent reports how the call ended (`…/report` with the `probe_id`).
//!
//! A probe with a lease (`probeTimeoutSeconds` > 0) is kept until its lease ends plus a
//! grace ([`PROBE_GRACE`]): after that the breaker has taken the probe back itself, and a
//! report finds nothing. A probe **without** a lease (`probeTimeoutSeconds: 0`) has no end of
//! its own: the breaker waits for its verdict, so it is kept until reported — forgetting it
//! would leave the tool half-open and refused for good. At most [`MAX_PROBES`] are kept; the
//! oldest goes first, and a leaseless one pushed out is given back to its breaker (the next
//! claim may probe) rather than left out.
//!
//! Time is the registry's clock (`ToolHealthRegistry::now`): the unit tests drive it with a
//! `ManualClock`.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tool_health::{Permit, ToolHealthRegistry};

/// Probes held by agents at most at once (the oldest are dropped past it).
pub(crate) const MAX_PROBES: usize = 10_000;

/// A leased probe id is forgotten this long after its lease (a report after that finds
/// nothing: the breaker took the probe back when the lease ended).
pub(crate) const PROBE_GRACE: Duration = Duration::from_secs(60);

/// One held probe.
#[derive(Debug)]
struct Held {
    key: String,
    permit: Permit,
    /// When it is forgotten (the registry's clock); `None`: no lease, kept until reported.
    until: Option<Duration>,
    /// Its order of arrival (the oldest goes first at the cap).
    n: u64,
}

/// The probes agents hold (see the [module docs](self)).
#[derive(Debug)]
pub(crate) struct Probes {
    held: Mutex<HashMap<String, Held>>,
    counter: AtomicU64,
    seed: std::collections::hash_map::RandomState,
    cap: usize,
}

impl Default for Probes {
    fn default() -> Self {
        Self::with_cap(MAX_PROBES)
    }
}

impl Probes {
    fn with_cap(cap: usize) -> Self {
        Self {
            held: Mutex::default(),
            counter: AtomicU64::new(0),
            seed: std::collections::hash_map::RandomState::new(),
            cap,
        }
    }

    /// Holds `permit` (a probe of `key` with this `lease`; zero: none) and gives its id.
    pub(crate) fn hold(
        &self,
        registry: &ToolHealthRegistry,
        key: &str,
        permit: Permit,
        lease: Duration,
    ) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let mut h = self.seed.build_hasher();
        h.write_u64(n);
        h.write(key.as_bytes());
        let id = format!("{:016x}{n:08x}", h.finish());
        let now = registry.now();
        let until =
            (!lease.is_zero()).then(|| now.saturating_add(lease).saturating_add(PROBE_GRACE));
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.retain(|_, p| p.until.is_none_or(|u| u > now));
        while held.len() >= self.cap {
            let Some(oldest) = held.iter().min_by_key(|(_, p)| p.n).map(|(k, _)| k.clone()) else {
                break;
            };
            if let Some(p) = held.remove(&oldest) {
                if p.until.is_none() {
                    // No lease would ever give it back: the breaker gets it now.
                    registry.release(&p.key, p.permit);
                }
            }
        }
        held.insert(
            id.clone(),
            Held {
                key: key.to_owned(),
                permit,
                until,
                n,
            },
        );
        id
    }

    /// The probe held under `id` (its tool's key and permit), taken out; `None` when it was
    /// never held, already reported, or forgotten after its lease.
    pub(crate) fn take(&self, registry: &ToolHealthRegistry, id: &str) -> Option<(String, Permit)> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let p = held.remove(id)?;
        p.until
            .is_none_or(|u| u > registry.now())
            .then_some((p.key, p.permit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tool_health::{BreakerState, CallOutcome, CircuitBreakerConfig, GateDecision, ManualClock};

    fn registry(clock: &ManualClock, lease: Duration) -> ToolHealthRegistry {
        ToolHealthRegistry::builder()
            .clock(clock.clone())
            .config(CircuitBreakerConfig {
                failure_threshold: 1,
                recovery_duration: Duration::from_secs(1),
                probe_timeout: lease,
            })
            .build()
    }

    /// Trips `tool`, waits out its cooldown and claims its probe.
    fn probe(registry: &ToolHealthRegistry, clock: &ManualClock, tool: &str) -> Permit {
        registry.record_failure(tool, Duration::ZERO);
        clock.advance(Duration::from_secs(1));
        match registry.check(tool) {
            GateDecision::Probe(p) => p,
            other => panic!("no probe for {tool}: {other:?}"),
        }
    }

    #[test]
    fn a_probe_without_a_lease_is_kept_until_reported() {
        let clock = ManualClock::new();
        let registry = registry(&clock, Duration::ZERO);
        let probes = Probes::default();
        let permit = probe(&registry, &clock, "agent_tool");
        let id = probes.hold(&registry, "agent_tool", permit, Duration::ZERO);
        // Long past any grace: the breaker still waits for this verdict, so the id is kept.
        clock.advance(Duration::from_secs(3600));
        assert_eq!(registry.breaker_state("agent_tool"), BreakerState::HalfOpen);
        let (key, permit) = probes
            .take(&registry, &id)
            .expect("the late report finds its probe");
        registry.record_with_permit(&key, permit, CallOutcome::Success, Duration::ZERO);
        assert_eq!(registry.breaker_state("agent_tool"), BreakerState::Closed);
        assert!(probes.take(&registry, &id).is_none(), "reported once");
    }

    #[test]
    fn a_leased_probe_is_forgotten_after_its_lease_and_the_grace() {
        let clock = ManualClock::new();
        let registry = registry(&clock, Duration::from_secs(30));
        let probes = Probes::default();
        let permit = probe(&registry, &clock, "t");
        let id = probes.hold(&registry, "t", permit, Duration::from_secs(30));
        clock.advance(Duration::from_secs(30) + PROBE_GRACE);
        assert!(probes.take(&registry, &id).is_none());
        let permit = probe(&registry, &clock, "u");
        let id = probes.hold(&registry, "u", permit, Duration::from_secs(30));
        clock.advance(Duration::from_secs(89));
        assert!(
            probes.take(&registry, &id).is_some(),
            "within lease + grace"
        );
    }

    #[test]
    fn a_leaseless_probe_pushed_out_by_the_cap_is_given_back_to_its_breaker() {
        let clock = ManualClock::new();
        let registry = registry(&clock, Duration::ZERO);
        let probes = Probes::with_cap(2);
        let mut ids = Vec::new();
        for tool in ["a", "b", "c"] {
            let permit = probe(&registry, &clock, tool);
            ids.push(probes.hold(&registry, tool, permit, Duration::ZERO));
        }
        // `a` was the oldest: its probe went back to the breaker, which may grant it again.
        assert!(probes.take(&registry, &ids[0]).is_none());
        assert!(registry.is_tool_available("a"), "a's probe was given back");
        assert!(!registry.is_tool_available("b"), "b's probe is still out");
        assert!(probes.take(&registry, &ids[1]).is_some());
        assert!(probes.take(&registry, &ids[2]).is_some());
    }
}
