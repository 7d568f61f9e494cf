//! The default config and per-tool policies.
//!
//! Every policy is checked when it is set ([`ToolPolicy::validate`]): the `try_` forms return
//! the [`SettingError`], the plain forms panic with its text (see `builder.rs` for why). A
//! [`CircuitBreakerConfig`] has no invalid value.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::policy::{Apply, CircuitBreakerConfig, SettingError, ToolPolicy};

use super::ToolHealthRegistry;

impl ToolHealthRegistry {
    /// Replaces the default config. Breakers that already exist keep theirs; operator
    /// controls and per-tool policies are untouched. Every config is valid (see
    /// [`CircuitBreakerConfig`]).
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
    ///
    /// # Panics
    ///
    /// When the policy is outside its ranges ([`ToolPolicy::validate`]); use
    /// [`try_set_default_policy`](Self::try_set_default_policy) for a policy read from
    /// elsewhere.
    #[track_caller]
    pub fn set_default_policy(&self, policy: ToolPolicy) {
        if let Err(e) = self.try_set_default_policy(policy) {
            e.panic();
        }
    }

    /// [`set_default_policy`](Self::set_default_policy), or the first field outside its range
    /// (nothing is changed then).
    pub fn try_set_default_policy(&self, policy: ToolPolicy) -> Result<(), SettingError> {
        policy.validate()?;
        self.default_policy.store(Arc::new(policy));
        Ok(())
    }

    /// Sets a per-tool policy override. With [`Apply::Now`] the tool's existing breaker takes
    /// it at once (its state and counters are kept); with [`Apply::NewBreakers`] it is used
    /// when the tool's breaker is created, i.e. on the tool's first record.
    ///
    /// A name longer than [`max_name_len`](Self::max_name_len) is no tool's: nothing is set
    /// (and nothing copied). At most [`max_tools`](Self::max_tools) tools have overrides.
    /// [`try_set_tool_policy`](Self::try_set_tool_policy) says when either refuses.
    ///
    /// # Panics
    ///
    /// When the policy is outside its ranges ([`ToolPolicy::validate`]).
    #[track_caller]
    pub fn set_tool_policy(&self, tool: &str, policy: ToolPolicy, apply: Apply) {
        match self.try_set_tool_policy(tool, policy, apply) {
            Err(e) if e.field() != "tool" && e.field() != "tool policies" => e.panic(),
            _ => {}
        }
    }

    /// [`set_tool_policy`](Self::set_tool_policy), or why not (nothing is changed then): a
    /// field of the policy outside its range, a name longer than
    /// [`max_name_len`](Self::max_name_len) (field `tool`), or overrides for
    /// [`max_tools`](Self::max_tools) other tools already (field `tool policies`).
    pub fn try_set_tool_policy(
        &self,
        tool: &str,
        policy: ToolPolicy,
        apply: Apply,
    ) -> Result<(), SettingError> {
        policy.validate()?;
        if let Err(e) = self.validate_name(tool) {
            return Err(SettingError::new(
                "tool",
                format_args!("a name of {} bytes", e.len()),
                format!("a name of at most max_name_len = {} bytes", e.max()),
            ));
        }
        let policy = Arc::new(policy);
        let mut full = false;
        self.overrides.rcu(|map| {
            full = map.len() >= self.max_tools && !map.contains_key(tool);
            let mut map = HashMap::clone(map);
            if !full {
                map.insert(tool.into(), Arc::clone(&policy));
            }
            map
        });
        if full {
            return Err(SettingError::new(
                "tool policies",
                format_args!("{} tools with an override", self.max_tools),
                format!("overrides for at most max_tools = {} tools", self.max_tools),
            ));
        }
        if apply == Apply::Now {
            self.with_entry(tool, |e| e.set_policy(Arc::clone(&policy)));
        }
        Ok(())
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
