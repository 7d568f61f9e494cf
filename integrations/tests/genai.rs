//! genai 0.7.2 with feature `otel`: its `execute_tool` span helper around an application's own
//! tool loop (genai is a provider client; the model's answers are scripted as the
//! `ToolCall`s it returns). genai marks a failure with `otel.status_code = error` and
//! `error.type` (`genai::otel::agent::set_error`) and marks nothing on success.

use std::sync::Arc;
use std::time::Duration;

use genai::chat::ToolCall;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tool_health::{BreakerState, ToolHealthLayer, ToolHealthRegistry, ToolHealthSpanProcessor};
use tool_health_integrations::{calls, registry, subscriber};
use tracing::Instrument;
use tracing_subscriber::layer::SubscriberExt;

/// What the scripted model asks for, in order.
fn script() -> Vec<ToolCall> {
    ["flaky", "add", "flaky", "flaky"]
        .iter()
        .enumerate()
        .map(|(i, name)| ToolCall {
            call_id: format!("call-{i}"),
            fn_name: (*name).into(),
            fn_arguments: serde_json::json!({}),
            thought_signatures: None,
        })
        .collect()
}

/// The application's tool loop, the way genai's docs show it: one `execute_tool` span per
/// call, `set_error` on failure.
async fn run_tools(tool_calls: Vec<ToolCall>, sleep: Duration) {
    for call in tool_calls {
        let span = genai::otel::agent::execute_tool_span(&call);
        let result: Result<String, String> = async {
            tokio::time::sleep(sleep).await;
            match call.fn_name.as_str() {
                "flaky" => Err("upstream 503".into()),
                _ => Ok("3".into()),
            }
        }
        .instrument(span.clone())
        .await;
        if result.is_err() {
            genai::otel::agent::set_error(&span, "tool_error");
        }
    }
}

fn assert_tripped(registry: &ToolHealthRegistry, what: &str) {
    assert_eq!(calls(registry, "flaky"), (0, 3, 0, 0), "{what}");
    assert_eq!(calls(registry, "add"), (1, 0, 0, 0), "{what}");
    assert_eq!(
        registry.breaker_state("flaky"),
        BreakerState::Open,
        "{what}"
    );
    assert_eq!(registry.tracked_tools(), 2, "{what}");
}

#[tokio::test]
async fn failures_trip_with_the_default_layer_and_in_strict_mode() {
    for strict in [false, true] {
        let (_clock, registry) = registry(3);
        let layer = ToolHealthLayer::builder(registry.clone())
            .strict(strict)
            .build();
        let dispatch = subscriber(layer);
        let _default = tracing::dispatcher::set_default(&dispatch);
        run_tools(script(), Duration::ZERO).await;
        // Strict mode: genai marks nothing on a success, so a span that closes without a
        // failure is a success even in strict mode (the `rust-genai` convention).
        assert_tripped(&registry, &format!("strict {strict}"));
        assert_eq!(registry.snapshot("add").map(|s| s.cancelled_count), Some(0));
    }
}

#[tokio::test]
async fn the_span_processor_alone_reads_the_same_outcomes() {
    let (_clock, registry) = registry(3);
    let provider = SdkTracerProvider::builder()
        .with_span_processor(ToolHealthSpanProcessor::new(registry.clone()))
        .build();
    let otel = tracing_opentelemetry::layer().with_tracer(provider.tracer("app"));
    let _default = tracing::subscriber::set_default(tracing_subscriber::registry().with(otel));
    run_tools(script(), Duration::ZERO).await;
    assert_tripped(&registry, "span processor");
    let _ = provider.shutdown();
}

#[tokio::test]
async fn one_call_seen_by_both_feeds_is_one_record() {
    let (_clock, registry) = registry(3);
    let provider = SdkTracerProvider::builder()
        .with_span_processor(ToolHealthSpanProcessor::new(registry.clone()))
        .build();
    let otel = tracing_opentelemetry::layer().with_tracer(provider.tracer("app"));
    let subscriber = tracing_subscriber::registry()
        .with(ToolHealthLayer::new(registry.clone()))
        .with(otel);
    let _default = tracing::subscriber::set_default(subscriber);
    run_tools(script(), Duration::ZERO).await;
    assert_tripped(&registry, "layer + span processor");
    let _ = provider.shutdown();
}

#[tokio::test]
async fn each_call_reads_its_own_duration() {
    let registry = Arc::new(ToolHealthRegistry::new());
    let dispatch = subscriber(ToolHealthLayer::new(registry.clone()));
    let _default = tracing::dispatcher::set_default(&dispatch);
    let slow = ToolCall {
        call_id: "s".into(),
        fn_name: "add".into(),
        fn_arguments: serde_json::json!({}),
        thought_signatures: None,
    };
    run_tools(vec![slow], Duration::from_millis(300)).await;
    let add = registry.snapshot("add").expect("recorded");
    println!("genai duration: {:?} (sleeps 300 ms)", add.avg_duration);
    assert!(
        add.avg_duration >= Duration::from_millis(300)
            && add.avg_duration < Duration::from_millis(1500),
        "{:?}",
        add.avg_duration
    );
}
