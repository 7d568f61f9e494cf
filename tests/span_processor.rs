//! `ToolHealthSpanProcessor` (feature `span-processor`): outcomes from OpenTelemetry SDK spans —
//! written with the OpenTelemetry API, or bridged from `tracing` — and one record when the
//! layer sees the same call. The real frameworks (autoagents, genai) in `integrations/`.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use opentelemetry::trace::{Span as _, SpanBuilder, Status, Tracer as _, TracerProvider as _};
use opentelemetry::KeyValue;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use tool_health::{
    BreakerState, CircuitBreakerConfig, ManualClock, ToolHealthLayer, ToolHealthRegistry,
    ToolHealthSpanProcessor,
};
use tracing_subscriber::layer::SubscriberExt;

fn registry(failure_threshold: u32) -> (ManualClock, Arc<ToolHealthRegistry>) {
    let clock = ManualClock::new();
    let registry = ToolHealthRegistry::builder()
        .config(CircuitBreakerConfig {
            failure_threshold,
            recovery_duration: Duration::from_secs(30),
            probe_timeout: Duration::from_secs(10),
        })
        .clock(clock.clone())
        .build();
    (clock, Arc::new(registry))
}

fn calls(registry: &ToolHealthRegistry, tool: &str) -> (u64, u64, u64, u64) {
    registry.snapshot(tool).map_or((0, 0, 0, 0), |s| {
        (
            s.success_count,
            s.failure_count,
            s.ignored_count,
            s.refused_count,
        )
    })
}

fn provider(registry: &Arc<ToolHealthRegistry>) -> SdkTracerProvider {
    SdkTracerProvider::builder()
        .with_span_processor(ToolHealthSpanProcessor::new(registry.clone()))
        .build()
}

/// A GenAI execute-tool span written with the OpenTelemetry API, lasting `took`.
fn api_call(
    tracer: &opentelemetry_sdk::trace::SdkTracer,
    tool: &str,
    took: Duration,
    finish: impl FnOnce(&mut opentelemetry_sdk::trace::Span),
) {
    let start = SystemTime::now();
    let mut span = tracer.build(
        SpanBuilder::from_name(format!("execute_tool {tool}"))
            .with_start_time(start)
            .with_attributes([
                KeyValue::new("gen_ai.operation.name", "execute_tool"),
                KeyValue::new("gen_ai.tool.name", tool.to_owned()),
            ]),
    );
    finish(&mut span);
    span.end_with_timestamp(start + took);
}

#[test]
fn opentelemetry_api_spans_feed_the_breakers() {
    let (_clock, registry) = registry(3);
    let provider = provider(&registry);
    let tracer = provider.tracer("my-agent");
    for _ in 0..3 {
        api_call(&tracer, "search", Duration::from_millis(120), |s| {
            s.set_attribute(KeyValue::new("error.type", "timeout"));
            s.set_status(Status::error("upstream timed out"));
        });
    }
    api_call(&tracer, "calc", Duration::from_millis(40), |_| {});
    // An `exception` event fails a call, a caller error is ignored, a refusal is nothing.
    api_call(&tracer, "fetch", Duration::ZERO, |s| {
        s.add_event("exception", vec![KeyValue::new("exception.type", "io")]);
    });
    api_call(&tracer, "fetch", Duration::ZERO, |s| {
        s.set_attribute(KeyValue::new("error.type", "invalid_arguments"));
    });
    api_call(&tracer, "fetch", Duration::ZERO, |s| {
        s.set_attribute(KeyValue::new("error.type", "circuit_breaker_open"));
        s.set_status(Status::error(tool_health::REFUSAL_MESSAGE));
    });
    // Not a tool call: another GenAI operation, or no tool name.
    let mut chat = tracer.start("chat");
    chat.set_attribute(KeyValue::new("gen_ai.operation.name", "chat"));
    chat.set_attribute(KeyValue::new("gen_ai.tool.name", "search"));
    chat.end();
    tracer.start("plain").end();

    assert_eq!(calls(&registry, "search"), (0, 3, 0, 0));
    assert_eq!(registry.breaker_state("search"), BreakerState::Open);
    let calc = registry.snapshot("calc").unwrap();
    assert_eq!(
        (calc.success_count, calc.avg_duration),
        (1, Duration::from_millis(40))
    );
    assert_eq!(calls(&registry, "fetch"), (0, 1, 1, 0));
    assert_eq!(registry.tracked_tools(), 3);
}

#[test]
fn strict_mode_and_custom_rules_through_the_builder() {
    let (_clock, registry) = registry(0);
    let processor = ToolHealthSpanProcessor::builder(registry.clone())
        .strict(true)
        .caller_errors(["bad_input"])
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .build();
    let tracer = provider.tracer("t");
    // Strict: a span that marks nothing reads as cancelled; an Ok status marks completion.
    api_call(&tracer, "a", Duration::ZERO, |_| {});
    api_call(&tracer, "a", Duration::ZERO, |s| s.set_status(Status::Ok));
    api_call(&tracer, "a", Duration::ZERO, |s| {
        s.set_attribute(KeyValue::new("error.type", "bad_input"))
    });
    let a = registry.snapshot("a").unwrap();
    assert_eq!(
        (a.success_count, a.ignored_count, a.cancelled_count),
        (1, 1, 1)
    );
}

/// A tool span the way `tracing` code writes one.
fn tracing_call(tool: &str, fail: bool) {
    let span = tracing::info_span!(
        "execute_tool",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = tool,
        error.type = tracing::field::Empty,
    );
    let _in = span.enter();
    if fail {
        span.record("error.type", "tool_error");
    }
}

#[test]
fn tracing_spans_bridged_by_tracing_opentelemetry_are_read_without_the_layer() {
    let (_clock, registry) = registry(3);
    let provider = provider(&registry);
    let otel = tracing_opentelemetry::layer().with_tracer(provider.tracer("app"));
    tracing::subscriber::with_default(tracing_subscriber::registry().with(otel), || {
        for fail in [false, true, true, true] {
            tracing_call("search", fail);
        }
    });
    assert_eq!(calls(&registry, "search"), (1, 3, 0, 0));
    assert_eq!(registry.breaker_state("search"), BreakerState::Open);
}

#[test]
fn one_call_seen_by_the_layer_and_the_processor_is_one_record() {
    let (_clock, registry) = registry(3);
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(ToolHealthSpanProcessor::new(registry.clone()))
        .with_simple_exporter(exporter.clone())
        .build();
    let otel = tracing_opentelemetry::layer().with_tracer(provider.tracer("app"));
    // The documented order: the layer first (it closes each span before tracing-opentelemetry
    // ends the OpenTelemetry span).
    let subscriber = tracing_subscriber::registry()
        .with(ToolHealthLayer::new(registry.clone()))
        .with(otel);
    tracing::subscriber::with_default(subscriber, || {
        for fail in [false, true, true, true] {
            tracing_call("search", fail);
        }
        // A span the gate bound a decision to carries it: the processor leaves it too.
        let span = tracing::info_span!(
            "execute_tool",
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = "calc",
        );
        span.in_scope(|| assert!(registry.allow_request("calc")));
        drop(span);
        // A call written with the OpenTelemetry API in the same thread is still the processor's.
        let tracer = provider.tracer("api");
        api_call(&tracer, "calc", Duration::ZERO, |_| {});
    });
    assert_eq!(calls(&registry, "search"), (1, 3, 0, 0));
    assert_eq!(calls(&registry, "calc"), (2, 0, 0, 0));
    assert_eq!(
        exporter.get_finished_spans().unwrap().len(),
        6,
        "every span still exported"
    );
}

#[test]
fn late_verdicts_are_read_from_the_parents_events() {
    // adk's spans bridged by tracing-opentelemetry, no layer: the processor finds adk's
    // `tool_error` among the agent span's events when that span ends.
    let (_clock, registry) = registry(0);
    let provider = provider(&registry);
    let otel = tracing_opentelemetry::layer().with_tracer(provider.tracer("app"));
    tracing::subscriber::with_default(tracing_subscriber::registry().with(otel), || {
        let agent = tracing::info_span!(target: "adk_agent", "agent.execute");
        let _in = agent.enter();
        for (tool, fail) in [("ok", false), ("bad", true), ("ok", false)] {
            let span = tracing::info_span!(
                target: "adk_agent::llm_agent",
                "",
                otel.name = %format_args!("execute_tool {tool}"),
                tool.name = %tool,
            );
            span.in_scope(|| {});
            if fail {
                tracing::warn!(target: "adk_agent::llm_agent", { tool.name = %tool, error = "503" }, "tool_error");
            }
        }
        assert_eq!(
            registry.tracked_tools(),
            0,
            "the verdicts wait for the agent span's end"
        );
    });
    assert_eq!(calls(&registry, "ok"), (2, 0, 0, 0));
    assert_eq!(calls(&registry, "bad"), (0, 1, 0, 0));
}
