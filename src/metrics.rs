//! OpenTelemetry metrics (work in progress).

use std::sync::Arc;

use crate::registry::ToolHealthRegistry;

/// Registers the tool-health instruments on `meter`.
pub fn publish_metrics(registry: &Arc<ToolHealthRegistry>, meter: &opentelemetry::metrics::Meter) {
    let _ = (registry, meter);
}
