//! What the span-aware gate writes on the OpenTelemetry span, through tracing-opentelemetry and
//! an in-memory exporter, in both layer orders.

use std::time::Duration;

use crate::support::{attr, registry, transitions, Harness, Stack, OTEL_STACKS};
use opentelemetry::trace::Status;
use tool_health::layer::REFUSAL_ERROR_TYPE;
use tool_health::layer::{
    BREAKER_STATE_ATTRIBUTE, GATE_DECISION_ATTRIBUTE, TRANSITION_EVENT, TRANSITION_FROM_ATTRIBUTE,
    TRANSITION_TO_ATTRIBUTE,
};
use tool_health::{BreakerState, ToolHealthLayer, REFUSAL_MESSAGE};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::Layer as _;

fn pair(from: &str, to: &str) -> (String, String) {
    (from.to_owned(), to.to_owned())
}

#[test]
fn the_names_are_the_documented_ones() {
    assert_eq!(GATE_DECISION_ATTRIBUTE, "tool_health.gate.decision");
    assert_eq!(BREAKER_STATE_ATTRIBUTE, "tool_health.breaker.state");
    assert_eq!(TRANSITION_EVENT, "tool_health.breaker.transition");
    assert_eq!(TRANSITION_FROM_ATTRIBUTE, "tool_health.breaker.from");
    assert_eq!(TRANSITION_TO_ATTRIBUTE, "tool_health.breaker.to");
}

#[test]
fn a_refused_span_is_annotated_from_a_child_span() {
    for stack in OTEL_STACKS {
        let (_clock, registry) = registry(1);
        registry.record_failure("db", Duration::ZERO);
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| {
            tracing::info_span!(
                "execute_tool db",
                gen_ai.operation.name = "execute_tool",
                gen_ai.tool.name = "db"
            )
            .in_scope(|| {
                tracing::info_span!("middleware").in_scope(|| {
                    assert!(!registry.allow_request("db"));
                    // The caller reports the refusal at ERROR: the description must survive.
                    tracing::error!("{REFUSAL_MESSAGE}");
                });
            });
        });
        let span = h.span("execute_tool db");
        assert_eq!(
            attr(&span, GATE_DECISION_ATTRIBUTE).as_deref(),
            Some("refused"),
            "{stack:?}"
        );
        assert_eq!(
            attr(&span, BREAKER_STATE_ATTRIBUTE).as_deref(),
            Some("open"),
            "{stack:?}"
        );
        assert_eq!(
            attr(&span, "error.type").as_deref(),
            Some(REFUSAL_ERROR_TYPE),
            "{stack:?}"
        );
        assert_eq!(span.status, Status::error(REFUSAL_MESSAGE), "{stack:?}");
        assert!(transitions(&span).is_empty(), "{stack:?}");
        // The child span is not annotated.
        let child = h.span("middleware");
        assert_eq!(attr(&child, GATE_DECISION_ATTRIBUTE), None, "{stack:?}");
        // Not counted as a failure.
        let s = registry.snapshot("db").expect("tracked");
        assert_eq!((s.failure_count, s.refused_count), (1, 1), "{stack:?}");
    }
}

#[test]
fn refused_while_another_probe_is_in_flight_reads_half_open() {
    for stack in OTEL_STACKS {
        let (clock, registry) = registry(1);
        registry.record_failure("db", Duration::ZERO);
        clock.advance(Duration::from_secs(30));
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| {
            let probe = tracing::info_span!("probe", gen_ai.tool.name = "db");
            probe.in_scope(|| assert!(registry.allow_request("db")));
            tracing::info_span!("other", gen_ai.tool.name = "db")
                .in_scope(|| assert!(!registry.allow_request("db")));
            drop(probe);
        });
        let other = h.span("other");
        assert_eq!(
            attr(&other, GATE_DECISION_ATTRIBUTE).as_deref(),
            Some("refused")
        );
        assert_eq!(
            attr(&other, BREAKER_STATE_ATTRIBUTE).as_deref(),
            Some("half_open")
        );
        let probe = h.span("probe");
        assert_eq!(
            attr(&probe, GATE_DECISION_ATTRIBUTE).as_deref(),
            Some("probe")
        );
        assert_eq!(
            attr(&probe, BREAKER_STATE_ATTRIBUTE).as_deref(),
            Some("half_open")
        );
        assert_ne!(probe.status, Status::error(REFUSAL_MESSAGE));
        if stack == Stack::LayerThenOtel {
            assert_eq!(transitions(&probe), [pair("half_open", "closed")]);
        }
        assert_eq!(
            registry.breaker_state("db"),
            BreakerState::Closed,
            "{stack:?}"
        );
    }
}

#[test]
fn the_span_that_trips_the_breaker_carries_the_transition() {
    for stack in OTEL_STACKS {
        let (_clock, registry) = registry(2);
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| {
            tracing::info_span!("first", gen_ai.tool.name = "db").in_scope(|| {
                assert!(registry.allow_request("db"));
                tracing::error!("down");
            });
            tracing::info_span!("second", gen_ai.tool.name = "db").in_scope(|| {
                assert!(registry.allow_request("db"));
                tracing::error!("down");
            });
        });
        let first = h.span("first");
        assert_eq!(
            attr(&first, GATE_DECISION_ATTRIBUTE).as_deref(),
            Some("allowed")
        );
        assert_eq!(
            attr(&first, BREAKER_STATE_ATTRIBUTE).as_deref(),
            Some("closed")
        );
        assert!(transitions(&first).is_empty());
        let second = h.span("second");
        match stack {
            // The documented order: written before tracing-opentelemetry ends the span.
            Stack::LayerThenOtel => {
                assert_eq!(transitions(&second), [pair("closed", "open")]);
            }
            // The wrong order: the span was already exported; the event is lost, nothing else.
            _ => assert!(transitions(&second).is_empty()),
        }
        assert_eq!(
            registry.breaker_state("db"),
            BreakerState::Open,
            "{stack:?}"
        );
    }
}

#[test]
fn a_cancelled_probe_span_carries_the_release() {
    let (clock, registry) = registry(1);
    registry.record_failure("db", Duration::ZERO);
    clock.advance(Duration::from_secs(30));
    let layer = ToolHealthLayer::builder(registry.clone())
        .strict(true)
        .build();
    let h = Harness::new(Stack::LayerThenOtel, layer);
    h.run(|| {
        tracing::info_span!("probe", gen_ai.tool.name = "db")
            .in_scope(|| assert!(registry.allow_request("db")));
    });
    assert_eq!(transitions(&h.span("probe")), [pair("half_open", "open")]);
    assert!(registry.is_tool_available("db"));
}

#[test]
fn without_the_gate_no_decision_is_written() {
    for stack in OTEL_STACKS {
        let (_clock, registry) = registry(3);
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| drop(tracing::info_span!("plain", gen_ai.tool.name = "db")));
        let span = h.span("plain");
        assert_eq!(attr(&span, GATE_DECISION_ATTRIBUTE), None);
        assert_eq!(attr(&span, BREAKER_STATE_ATTRIBUTE), None);
        assert_eq!(registry.snapshot("db").map(|s| s.success_count), Some(1));
    }
}

#[test]
fn otel_filtered_out_degrades_to_nothing() {
    use opentelemetry::trace::TracerProvider as _;
    let exporter = opentelemetry_sdk::trace::InMemorySpanExporter::default();
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let (clock, registry) = registry(1);
    let otel = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("t"))
        .with_filter(tracing_subscriber::filter::filter_fn(|meta| {
            meta.fields().field("gen_ai.tool.name").is_none()
        }));
    let subscriber = tracing_subscriber::registry()
        .with(ToolHealthLayer::new(registry.clone()))
        .with(otel);
    tracing::subscriber::with_default(subscriber, || {
        tracing::info_span!("tool", gen_ai.tool.name = "db").in_scope(|| {
            tracing::info_span!("child").in_scope(|| {
                assert!(registry.allow_request("db"));
                tracing::error!("down");
            });
        });
        tracing::info_span!("tool", gen_ai.tool.name = "db")
            .in_scope(|| assert!(!registry.allow_request("db")));
        clock.advance(Duration::from_secs(30));
        tracing::info_span!("tool", gen_ai.tool.name = "db")
            .in_scope(|| assert!(registry.allow_request("db")));
    });
    let spans = exporter.get_finished_spans().unwrap();
    assert_eq!(spans.len(), 1, "only the child span is exported");
    assert_eq!(attr(&spans[0], GATE_DECISION_ATTRIBUTE), None);
    let s = registry.snapshot("db").unwrap();
    assert_eq!(
        (s.success_count, s.failure_count, s.refused_count),
        (1, 1, 1)
    );
    assert_eq!(s.breaker, BreakerState::Closed);
}
