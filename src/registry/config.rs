//! The default config and per-tool policies.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::policy::{Apply, CircuitBreakerConfig, ToolPolicy};

use super::ToolHealthRegistry;

impl ToolHealthRegistry {
    /// Replaces the default config. Breakers that already exist keep theirs; operator
    /// controls and per-tool policies are untouched.
    pub fn set_config(&self, config: CircuitBreakerConfig) {
        self.default_policy.rcu(|p| ToolPolicy {
            breaker: config.clone(),
            ..ToolPolicy::clone(p)
        });
    }

    /// The default config new breakers get.
    pub fn config(&self) -> CircuitBreakerConfig {
        self.default_policy.load().breaker.clone()
    }

    /// Replaces the whole default policy (config, trip policy, slow calls, backoff) for
    /// breakers created afterwards.
    pub fn set_default_policy(&self, policy: ToolPolicy) {
        self.default_policy.store(Arc::new(policy));
    }

    /// Sets a per-tool policy override. With [`Apply::Now`] the tool's existing breaker takes
    /// it at once (its state and counters are kept); with [`Apply::NewBreakers`] it is used
    /// when the tool's breaker is created, i.e. on the tool's first record.
    pub fn set_tool_policy(&self, tool: &str, policy: ToolPolicy, apply: Apply) {
        let policy = Arc::new(policy);
        self.overrides.rcu(|map| {
            let mut map = HashMap::clone(map);
            map.insert(tool.into(), Arc::clone(&policy));
            map
        });
        if apply == Apply::Now {
            self.with_entry(tool, |e| e.set_policy(Arc::clone(&policy)));
        }
    }

    /// Removes a per-tool override; the tool falls back to the default policy (at once with
    /// [`Apply::Now`]).
    pub fn clear_tool_policy(&self, tool: &str, apply: Apply) {
        self.overrides.rcu(|map| {
            let mut map = HashMap::clone(map);
            map.remove(tool);
            map
        });
        if apply == Apply::Now {
            let policy = self.default_policy.load_full();
            self.with_entry(tool, |e| e.set_policy(policy));
        }
    }

    /// The policy the tool's breaker uses now (or would get if created now).
    pub fn tool_policy(&self, tool: &str) -> ToolPolicy {
        self.with_entry(tool, |e| ToolPolicy::clone(&e.breaker.policy()))
            .unwrap_or_else(|| ToolPolicy::clone(&self.policy_for(tool)))
    }

    /// The probe lease of `tool`'s breaker now (no allocation: the layer asks it for calls
    /// whose verdict comes late).
    pub(crate) fn probe_timeout_of(&self, tool: &str) -> Duration {
        self.with_entry(tool, |e| e.breaker.policy().breaker.probe_timeout)
            .unwrap_or_else(|| self.policy_for(tool).breaker.probe_timeout)
    }

    /// The policy a new breaker for `tool` gets: its override, else the default.
    pub(super) fn policy_for(&self, tool: &str) -> Arc<ToolPolicy> {
        self.overrides
            .load()
            .get(tool)
            .cloned()
            .unwrap_or_else(|| self.default_policy.load_full())
    }
}
