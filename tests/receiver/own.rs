//! A call is recorded once, whatever route its span takes back in: a process that exports its
//! own tool spans to its own receiver (the gateway with `OTEL_EXPORTER_OTLP_ENDPOINT` pointing
//! at itself, or through a collector) finds each call it recorded already — the span carries
//! the registry's id (`tool_health.registry.id`) — while the same spans sent to *another*
//! registry's receiver count there. And a receiver can map span tool names to the keys its own
//! gate uses: one tool, one breaker, whichever feed reports it.

use std::sync::Arc;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use tool_health::receiver::{Format, Receiver};
use tool_health::{BreakerState, ErrorClass, ToolHealthLayer, ToolHealthRegistry};
use tracing_subscriber::layer::SubscriberExt as _;

use crate::support::{counts, encode, exported, request, tool_span};

/// The OTLP request of the spans `work` made, bridged by tracing-opentelemetry (with
/// `ToolHealthLayer` for `registry` in the same subscriber when `layer`).
fn request_of(registry: &Arc<ToolHealthRegistry>, layer: bool, work: impl FnOnce()) -> Vec<u8> {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let otel = tracing_opentelemetry::layer().with_tracer(provider.tracer("agent"));
    let health = layer.then(|| ToolHealthLayer::new(registry.clone()));
    let subscriber = tracing_subscriber::registry().with(health).with(otel);
    tracing::subscriber::with_default(subscriber, work);
    exported(exporter.get_finished_spans().unwrap())
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
        let body = request_of(&registry, layer, || calls(&registry));
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

#[test]
fn a_call_recorded_where_it_was_served_is_not_counted_again_from_the_callers_spans() {
    // The caller's `execute_tool` span, and inside it its MCP client's span — whose id the
    // server got in the call's traceparent, and which it recorded when it served the call.
    let s = Duration::from_secs;
    let registry = Arc::new(ToolHealthRegistry::new());
    let served = 0x5e7e_d000_0000_0001_u64;
    let receiver = Receiver::builder(registry.clone())
        .recorded_elsewhere(move |span| span == served)
        .build()
        .unwrap();
    let mut caller = tool_span("search", s(3), s(1), true);
    let transport = opentelemetry_proto::tonic::trace::v1::Span {
        span_id: served.to_be_bytes().to_vec(),
        parent_span_id: caller.span_id.clone(),
        name: "MCP send tools/call search".into(),
        start_time_unix_nano: crate::support::ago(s(3)),
        end_time_unix_nano: crate::support::ago(s(2)),
        attributes: vec![crate::support::s("mcp.method.name", "tools/call")],
        ..caller.clone()
    };
    caller.trace_id = transport.trace_id.clone();
    // Another call of the same tool, not served there: counted.
    let other = tool_span("search", s(3), s(1), true);
    receiver
        .ingest(
            &encode(&request("my-agent", vec![transport, caller, other])),
            Format::Protobuf,
        )
        .unwrap();
    assert_eq!(counts(&registry).get("search"), Some(&(0, 1, 0)));
}
