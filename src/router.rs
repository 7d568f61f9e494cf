//! Health-aware routing: send a call to a healthy substitute instead of refusing it.
//!
//! ```
//! use std::time::Duration;
//! use tool_health::{CircuitBreakerConfig, HealthRouterBuilder, ToolHealthRegistry};
//!
//! let registry = ToolHealthRegistry::with_config(CircuitBreakerConfig {
//!     failure_threshold: 1,
//!     ..Default::default()
//! });
//! let router = HealthRouterBuilder::new()
//!     .add_fallback("primary_search", vec!["backup_search".into()])
//!     .build();
//!
//! assert_eq!(router.resolve_tool("primary_search", &registry), "primary_search");
//! registry.record_failure("primary_search", Duration::from_secs(5)); // trips (threshold 1)
//! assert_eq!(router.resolve_tool("primary_search", &registry), "backup_search");
//! ```
//!
//! Only one level deep: a fallback's own fallbacks are not followed, so cycles are harmless.
//! Resolution uses the pure oracle ([`ToolHealthRegistry::is_tool_available`]): it never
//! consumes a probe. Mind the key spaces: the gate keys on the name you pass it and recording
//! keys on the name the call actually used, so gate and record the *resolved* name.

use std::collections::HashMap;

use crate::registry::ToolHealthRegistry;
use crate::stats::HealthStatus;

/// Builds a [`HealthRouter`].
#[derive(Debug, Default, Clone)]
#[must_use]
pub struct HealthRouterBuilder {
    routes: HashMap<String, Vec<String>>,
}

impl HealthRouterBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds fallbacks for `primary`, tried in the given order after any added before.
    pub fn add_fallback(mut self, primary: &str, fallbacks: Vec<String>) -> Self {
        self.routes
            .entry(primary.to_owned())
            .or_default()
            .extend(fallbacks);
        self
    }

    /// The router.
    pub fn build(self) -> HealthRouter {
        HealthRouter {
            routes: self.routes,
        }
    }
}

/// Maps a primary tool to ordered fallbacks and picks the first usable one.
#[derive(Debug, Clone, Default)]
pub struct HealthRouter {
    routes: HashMap<String, Vec<String>>,
}

impl HealthRouter {
    /// The primary when it is available; else the first fallback (in insertion order) that is
    /// available and not unhealthy; else the primary (the caller then meets the refusal).
    pub fn resolve_tool<'a>(&'a self, tool: &'a str, registry: &ToolHealthRegistry) -> &'a str {
        if registry.is_tool_available(tool) {
            return tool;
        }
        self.routes
            .get(tool)
            .into_iter()
            .flatten()
            .find(|f| {
                registry.is_tool_available(f)
                    && registry.get_health_status(f) != HealthStatus::Unhealthy
            })
            .map_or(tool, String::as_str)
    }

    /// The fallbacks configured for `tool`.
    pub fn fallbacks(&self, tool: &str) -> &[String] {
        self.routes.get(tool).map_or(&[], Vec::as_slice)
    }
}
