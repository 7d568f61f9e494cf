//! The tracing layer (work in progress).

use std::sync::Arc;

use crate::gate::GateDecision;
use crate::registry::ToolHealthRegistry;

/// Feeds a [`ToolHealthRegistry`] from tool-call spans.
#[derive(Debug, Clone)]
pub struct ToolHealthLayer {
    registry: Arc<ToolHealthRegistry>,
}

impl ToolHealthLayer {
    /// A layer feeding `registry`.
    pub fn new(registry: Arc<ToolHealthRegistry>) -> Self {
        Self { registry }
    }

    /// The registry this layer feeds.
    pub fn registry(&self) -> &Arc<ToolHealthRegistry> {
        &self.registry
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for ToolHealthLayer {}

/// Binds a gate decision to the current tool span, if any.
#[inline]
pub(crate) fn bind_decision(registry: &ToolHealthRegistry, tool: &str, decision: &GateDecision) {
    let _ = (registry, tool, decision);
}
