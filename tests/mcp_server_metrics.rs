//! The MCP servers' breakers (feature `mcp`): a registry of their own, never among the tools —
//! not in `health_summary`, not in `unavailable_tools`, not in the metrics' tool series — with
//! their own read and their own gauge (`tool_health.server.breaker.state`, `mcp.server.name`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use tool_health::mcp::server_registry;
use tool_health::metrics::SERVER_BREAKER_STATE;
use tool_health::{publish_metrics, BreakerState, ManualClock, ToolHealthRegistry};

/// `(metric, attributes, value)` of every gauge point of one collection.
fn gauges(
    provider: &SdkMeterProvider,
    exporter: &InMemoryMetricExporter,
) -> Vec<(String, BTreeMap<String, String>, i64)> {
    exporter.reset();
    provider.force_flush().expect("flush");
    let batches = exporter.get_finished_metrics().expect("metrics");
    let mut out = Vec::new();
    for scope in batches.last().into_iter().flat_map(|b| b.scope_metrics()) {
        for m in scope.metrics() {
            if let AggregatedMetrics::I64(MetricData::Gauge(g)) = m.data() {
                for p in g.data_points() {
                    let attrs = p
                        .attributes()
                        .map(|kv| (kv.key.to_string(), kv.value.to_string()))
                        .collect();
                    out.push((m.name().to_owned(), attrs, p.value()));
                }
            }
        }
    }
    out
}

#[test]
fn a_server_breaker_is_read_and_published_apart_from_the_tools() {
    let clock = ManualClock::new();
    let registry = Arc::new(ToolHealthRegistry::builder().clock(clock.clone()).build());
    let exporter = InMemoryMetricExporter::default();
    let reader = PeriodicReader::builder(exporter.clone())
        .with_interval(Duration::from_secs(3600))
        .build();
    let provider = SdkMeterProvider::builder().with_reader(reader).build();
    publish_metrics(&registry, &provider.meter("tool-health-test"));
    assert!(
        gauges(&provider, &exporter)
            .iter()
            .all(|(name, ..)| name != SERVER_BREAKER_STATE),
        "no series before a server is named"
    );

    // A tool of the server, and the server itself, both called `github`.
    registry.record_success("github", Duration::from_millis(3));
    let servers = server_registry(&registry);
    for _ in 0..3 {
        servers.record_failure("github", Duration::from_millis(1));
    }
    assert_eq!(servers.breaker_state("github"), BreakerState::Open);
    assert_eq!(
        registry.breaker_state("github"),
        BreakerState::Closed,
        "the tool"
    );
    assert_eq!(registry.health_summary().len(), 1);
    assert!(registry.unavailable_tools().is_empty());
    assert_eq!(servers.unavailable_tools().len(), 1);
    assert!(
        Arc::ptr_eq(servers, server_registry(&registry)),
        "one per registry"
    );

    let points = gauges(&provider, &exporter);
    let server: Vec<_> = points
        .iter()
        .filter(|(name, ..)| name == SERVER_BREAKER_STATE)
        .collect();
    assert_eq!(server.len(), 3, "one series per state: {server:?}");
    for (_, attrs, value) in &server {
        assert_eq!(
            attrs.get("mcp.server.name").map(String::as_str),
            Some("github")
        );
        assert!(!attrs.contains_key("gen_ai.tool.name"));
        let open = attrs.get("tool_health.breaker.state").map(String::as_str) == Some("open");
        assert_eq!(*value, i64::from(open), "{attrs:?}");
    }
    // The tools' gauge reports the tool only, closed.
    let tools: Vec<_> = points
        .iter()
        .filter(|(name, ..)| name == "tool_health.breaker.state")
        .collect();
    assert_eq!(tools.len(), 3);
    assert!(tools.iter().all(|(_, attrs, value)| {
        let closed = attrs.get("tool_health.breaker.state").map(String::as_str) == Some("closed");
        *value == i64::from(closed)
    }));

    clock.advance(Duration::from_secs(30));
    assert!(
        servers.is_tool_available("github"),
        "the server's cooldown, on the same clock"
    );
}
