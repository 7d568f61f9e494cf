//! A call is recorded once, whatever route its span takes back in: a process that exports its
//! own tool spans to its own receiver (the gateway with `OTEL_EXPORTER_OTLP_ENDPOINT` pointing
//! at itself, or through a collector) finds each call it recorded already — the span carries
//! the registry's id (`tool_health.registry.id`) — while the same spans sent to *another*
//! registry's receiver count there. And a receiver can map span tool names to the keys its own
//! gate uses: one tool, one breaker, whichever feed reports it.

use std::sync::Arc;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use prost::Message as _;
use tool_health::receiver::{Format, Receiver};
use tool_health::{BreakerState, ErrorClass, ToolHealthLayer, ToolHealthRegistry};
use tracing_subscriber::layer::SubscriberExt as _;

use crate::support::{counts, encode, request, tool_span};

/// The OTLP request of the spans `work` made, bridged by tracing-opentelemetry (with
/// `ToolHealthLayer` for `registry` in the same subscriber when `layer`).
fn exported(registry: &Arc<ToolHealthRegistry>, layer: bool, work: impl FnOnce()) -> Vec<u8> {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let otel = tracing_opentelemetry::layer().with_tracer(provider.tracer("agent"));
    let health = layer.then(|| ToolHealthLayer::new(registry.clone()));
    let subscriber = tracing_subscriber::registry().with(health).with(otel);
    tracing::subscriber::with_default(subscriber, work);
    let spans: Vec<Span> = exporter
        .get_finished_spans()
        .unwrap()
        .into_iter()
        .map(Span::from)
        .collect();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans {
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
    .encode_to_vec()
}

/// Three failing calls of `search` and one good `weather`, through the call helper.
fn calls(registry: &Arc<ToolHealthRegistry>) {
    for _ in 0..3 {
        let r: Result<(), tool_health::CallError<&str>> = registry
            .call("search")
            .classify(|_: &&str| ErrorClass::failure("timeout"))
            .run_blocking(|| Err("upstream timed out"));
        assert!(r.is_err());
    }
    let ok: Result<(), tool_health::CallError<()>> =
        registry.call("weather").run_blocking(|| Ok(()));
    assert!(ok.is_ok());
}

#[test]
fn spans_of_calls_this_registry_recorded_are_not_counted_again_by_its_receiver() {
    for layer in [true, false] {
        let registry = Arc::new(ToolHealthRegistry::new());
        let body = exported(&registry, layer, || calls(&registry));
        assert_eq!(registry.snapshot("search").unwrap().failure_count, 3);
        // The process's own receiver: the spans came back, nothing more is counted.
        let receiver = Receiver::new(registry.clone());
        let ingested = receiver.ingest(&body, Format::Protobuf).unwrap();
        assert_eq!(ingested.spans, 4, "layer: {layer}");
        let search = registry.snapshot("search").unwrap();
        assert_eq!(
            (search.success_count, search.failure_count),
            (0, 3),
            "layer: {layer}: each call once"
        );
        assert_eq!(registry.snapshot("weather").unwrap().success_count, 1);
        // Another registry's receiver (a central gateway, say) learns the same calls.
        let central = Arc::new(ToolHealthRegistry::new());
        Receiver::new(central.clone())
            .ingest(&body, Format::Protobuf)
            .unwrap();
        assert_eq!(
            counts(&central).get("search"),
            Some(&(0, 3, 0)),
            "layer: {layer}"
        );
        assert_eq!(central.breaker_state("search"), BreakerState::Open);
    }
}

#[test]
fn a_receiver_maps_span_tool_names_to_the_keys_its_gate_uses() {
    // A gateway serves the MCP tool keyed `py/add` as `py__add`: an agent's span naming
    // `py__add` feeds that breaker, not one of its own.
    let registry = Arc::new(ToolHealthRegistry::new());
    let receiver = Receiver::builder(registry.clone())
        .map_tool_names(|name| {
            name.strip_prefix("py__")
                .filter(|t| !t.is_empty())
                .map(|t| format!("py/{t}"))
        })
        .build()
        .unwrap();
    let s = Duration::from_secs;
    let spans = (0..3)
        .map(|i| tool_span("py__add", s(10 - i), s(9 - i), true))
        .chain([tool_span("local", s(3), s(2), false)])
        .collect();
    receiver
        .ingest(&encode(&request("my-agent", spans)), Format::Protobuf)
        .unwrap();
    let got = counts(&registry);
    assert_eq!(got.get("py/add"), Some(&(0, 3, 0)), "{got:?}");
    assert_eq!(got.get("py__add"), None, "no breaker of its own: {got:?}");
    assert_eq!(
        got.get("local"),
        Some(&(1, 0, 0)),
        "other names as they are"
    );
    assert_eq!(registry.breaker_state("py/add"), BreakerState::Open);
}
