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

use crate::registry::{ToolHealthRegistry, UnavailableTool};
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

    /// What to leave out of the tool list offered to the model, when calls go through this
    /// router: [`ToolHealthRegistry::unavailable_tools`] minus every tool that
    /// [`resolve_tool`](Self::resolve_tool) would route to a usable fallback. A tool whose
    /// primary is refused but whose fallback is healthy stays offered; when the model calls
    /// it, resolve it and call the fallback.
    ///
    /// This is the planner's side of the router: use it instead of the registry's list
    /// whenever calls are routed, so the planner and the router agree.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tool_health::{HealthRouterBuilder, ToolHealthRegistry};
    ///
    /// let registry = ToolHealthRegistry::new();
    /// let router = HealthRouterBuilder::new()
    ///     .add_fallback("web_search", vec!["backup_search".into()])
    ///     .build();
    /// registry.force_open_for("web_search", Duration::from_secs(60));
    /// registry.force_open_for("sql_query", Duration::from_secs(60));
    ///
    /// let hidden: Vec<String> = router.unavailable_tools(&registry).into_iter().map(|t| t.tool).collect();
    /// assert_eq!(hidden, ["sql_query"]); // web_search stays offered: it routes to backup_search
    /// assert_eq!(router.resolve_tool("web_search", &registry), "backup_search");
    /// ```
    pub fn unavailable_tools(&self, registry: &ToolHealthRegistry) -> Vec<UnavailableTool> {
        let mut out = registry.unavailable_tools();
        out.retain(|t| self.resolve_tool(&t.tool, registry) == t.tool);
        out
    }

    /// The fallbacks configured for `tool`.
    pub fn fallbacks(&self, tool: &str) -> &[String] {
        self.routes.get(tool).map_or(&[], Vec::as_slice)
    }
}
