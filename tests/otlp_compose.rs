//! `tool_health::otlp` in a service that already has a subscriber (issue 14, finding 7), and
//! the SDK's cardinality limit sized from the registry's cap (issue 13, item 14).
//!
//! One binary, one test for the global part: it installs the process's global subscriber
//! first, as a service does, then asks `otlp` to join it.
#![cfg(feature = "otlp-http")]

mod capture;

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use capture::Captured;
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use tool_health::otlp::{self, OtlpError};
use tool_health::{publish_metrics, CallError, CircuitBreakerConfig, ToolHealthRegistry};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{fmt, EnvFilter, Layer};

/// A 127.0.0.1 port nobody listens on (bound, then released).
fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[test]
fn with_a_subscriber_installed_init_refuses_first_and_layers_compose() {
    std::env::remove_var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL");
    std::env::remove_var("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL");
    let endpoint = format!("http://127.0.0.1:{}", closed_port());
    std::env::set_var("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint);

    // The service's own subscriber, installed first: it sees everything the SDK logs.
    let log = Captured::default();
    tracing_subscriber::registry()
        .with(fmt::layer().with_writer(log.clone()).with_ansi(false))
        .init();

    // A protocol the exporters cannot build: had `init` built providers before checking for
    // the subscriber, it would fail on this instead.
    std::env::set_var("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json");
    let err = otlp::init("svc").unwrap_err();
    assert!(matches!(err, OtlpError::SubscriberAlreadySet), "{err}");
    let message = err.to_string();
    assert!(message.contains(".layers()"), "says what to do: {message}");
    // Nothing was built, so nothing was shut down: no misleading SDK error in the log.
    assert!(
        !log.text().contains("BatchSpanProcessor") && !log.text().contains("Shutdown"),
        "{}",
        log.text()
    );

    // `layers()` joins a subscriber the service builds itself (scoped here: the global one is
    // taken), with the service's filter on the service's own output only.
    std::env::set_var("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf");
    let registry = Arc::new(ToolHealthRegistry::with_config(CircuitBreakerConfig {
        failure_threshold: 2,
        ..Default::default()
    }));
    let (layer, guard) = otlp::builder("svc")
        .registry(registry.clone())
        .shutdown_timeout(Duration::from_secs(3))
        .layers()
        .expect("layers");
    let service_log = Captured::default();
    let subscriber = tracing_subscriber::registry()
        .with(
            fmt::layer()
                .with_writer(service_log.clone())
                .with_ansi(false)
                .with_filter(EnvFilter::new("warn")),
        )
        .with(layer);
    tracing::subscriber::with_default(subscriber, || {
        for _ in 0..3 {
            let r = registry
                .call("search")
                .run_blocking(|| Err::<(), _>(std::io::Error::other("503")));
            assert!(r.is_err());
        }
        let refused = registry
            .call("search")
            .run_blocking(|| Ok::<_, std::io::Error>(()));
        assert!(matches!(refused, Err(CallError::Refused { .. })));
    });
    // Recorded through the layer (the span was seen by the health layer despite the service's
    // `warn` filter on its log output), and the opening logged to the service's log.
    let s = registry.snapshot("search").unwrap();
    assert_eq!((s.failure_count, s.refused_count), (2, 2));
    assert_eq!(
        service_log.lines_with("circuit breaker opened").len(),
        1,
        "{}",
        service_log.text()
    );

    // Shutdown with nothing listening says what failed, where.
    let err = guard.shutdown().unwrap_err();
    let message = err.to_string();
    assert!(message.contains(&endpoint), "names the endpoint: {message}");
    assert!(message.contains("traces"), "names the signal: {message}");
    assert!(
        message.contains("collector"),
        "says what to check: {message}"
    );
}

/// How many data points of `metric` a collection holds, and how many are overflow points.
fn points(
    provider: &SdkMeterProvider,
    exporter: &InMemoryMetricExporter,
    metric: &str,
) -> (usize, usize) {
    exporter.reset();
    provider.force_flush().unwrap();
    let batches = exporter.get_finished_metrics().unwrap();
    let mut total = 0;
    let mut overflow = 0;
    for scope in batches.last().unwrap().scope_metrics() {
        for m in scope.metrics().filter(|m| m.name() == metric) {
            if let AggregatedMetrics::U64(MetricData::Sum(sum)) = m.data() {
                for p in sum.data_points() {
                    total += 1;
                    if p.attributes()
                        .any(|kv| kv.key.as_str() == "otel.metric.overflow")
                    {
                        overflow += 1;
                    }
                }
            }
        }
    }
    (total, overflow)
}

// Issue 13, item 14: with the SDK's default limit (2,000 series per instrument), the four
// transition series of each of 700 tools overflow silently; with the view `otlp` installs,
// every tool keeps its series.
#[test]
fn the_cardinality_view_fits_every_tracked_tool() {
    let registry = Arc::new(ToolHealthRegistry::builder().max_tools(1_000).build());
    for i in 0..700 {
        registry.record_success(&format!("tool_{i:03}"), Duration::from_millis(1));
    }
    let collect = |with_view: bool| {
        let exporter = InMemoryMetricExporter::default();
        let reader = PeriodicReader::builder(exporter.clone())
            .with_interval(Duration::from_secs(3600))
            .build();
        let mut builder = SdkMeterProvider::builder().with_reader(reader);
        if with_view {
            builder = builder.with_view(otlp::cardinality_view(registry.max_tools()));
        }
        let provider = builder.build();
        publish_metrics(&registry, &provider.meter(otlp::METER_SCOPE));
        points(&provider, &exporter, tool_health::metrics::TRANSITIONS)
    };
    let (total, overflow) = collect(false);
    assert!(
        overflow > 0 && total < 2_800,
        "the default limit folds: {total}, {overflow}"
    );
    assert_eq!(collect(true), (2_800, 0));
    assert!(otlp::cardinality_limit(10_000) >= 10_000 * 5);
}
