//! OTLP/gRPC into the receiver from a real client: the OpenTelemetry SDK's own gRPC exporter
//! (opentelemetry-otlp over tonic, through `tool_health::otlp`), exporting `tracing` tool spans
//! of another process's registry. The receiver's registry learns the same calls.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tool_health::receiver::Receiver;
use tool_health::{BreakerState, ToolHealthRegistry};
use tracing_subscriber::layer::SubscriberExt as _;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_exported_over_grpc_by_the_otel_sdk_trip_the_receivers_breaker() {
    let registry = Arc::new(ToolHealthRegistry::new());
    let receiver = Receiver::new(registry.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let served = receiver.clone();
    tokio::spawn(async move { served.serve_grpc(listener, std::future::pending()).await });

    // Edition 2021: set_var is safe; this binary has no other thread reading the environment.
    std::env::set_var("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{addr}"));
    std::env::set_var("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc");
    std::env::set_var("OTEL_BSP_SCHEDULE_DELAY", "100");
    let agent = Arc::new(ToolHealthRegistry::new()); // the exporting process's own registry
    let (layer, guard) = tool_health::otlp::builder("grpc-agent")
        .registry(agent.clone())
        .shutdown_timeout(Duration::from_secs(10))
        .layers()
        .unwrap();
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, || {
        for _ in 0..3 {
            let span = tracing::info_span!(
                "execute_tool search",
                otel.name = "execute_tool search",
                gen_ai.operation.name = "execute_tool",
                gen_ai.tool.name = "search",
                error.type = tracing::field::Empty,
            );
            let _entered = span.enter();
            span.record("error.type", "timeout");
        }
        let span = tracing::info_span!(
            "execute_tool weather",
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = "weather",
        );
        span.in_scope(|| {});
    });
    assert_eq!(
        agent.breaker_state("search"),
        BreakerState::Open,
        "the agent's own view"
    );
    // The final flush; its metrics part fails (the receiver serves traces only: the metrics
    // service answers UNIMPLEMENTED), the traces part is what counts here.
    let _ = tokio::task::spawn_blocking(move || guard.shutdown())
        .await
        .unwrap();

    let deadline = Instant::now() + Duration::from_secs(30);
    while registry.breaker_state("search") != BreakerState::Open {
        assert!(Instant::now() < deadline, "{:?}", receiver.stats());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let search = registry.snapshot("search").unwrap();
    assert_eq!((search.success_count, search.failure_count), (0, 3));
    assert_eq!(registry.snapshot("weather").unwrap().success_count, 1);
    assert_eq!(receiver.stats().malformed_requests, 0);
}
