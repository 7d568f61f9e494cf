//! A storm of late verdicts in one agent step: adk reports each failed call after its span, in
//! the agent's span (`tool_error` events), so the OpenTelemetry-shaped feeds — the span
//! processor and the OTLP receiver — read every verdict when that span ends. 17, 100 and
//! 10,000 failing calls in one step must each be counted, none twice, none panicking the feed
//! (the batch a table hands back held 16), and none released late (a step of more than 16
//! calls left the rest waiting for their due time, 10 s later).
//!
//! The spans are real: adk's shape written through `tracing`, bridged by tracing-opentelemetry
//! into an OpenTelemetry SDK provider; for the receiver, exported by the SDK's own OTLP/HTTP
//! exporter over a socket, or converted by `opentelemetry-proto` and ingested.

use std::sync::Arc;
use std::time::{Duration, Instant};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanLimits};
use tool_health::receiver::{Format, Receiver};
use tool_health::{
    BreakerState, CircuitBreakerConfig, ManualClock, ToolHealthLayer, ToolHealthRegistry,
    ToolHealthSpanProcessor,
};
use tracing_subscriber::layer::SubscriberExt as _;

use crate::support::exported;

fn registry() -> (ManualClock, Arc<ToolHealthRegistry>) {
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(1000));
    let registry = ToolHealthRegistry::builder()
        .config(CircuitBreakerConfig {
            failure_threshold: 3,
            recovery_duration: Duration::from_secs(30),
            probe_timeout: Duration::from_secs(30),
        })
        .clock(clock.clone())
        .build();
    (clock, Arc::new(registry))
}

/// (success, failure) of `tool`.
fn counts(registry: &ToolHealthRegistry, tool: &str) -> (u64, u64) {
    registry
        .snapshot(tool)
        .map_or((0, 0), |s| (s.success_count, s.failure_count))
}

/// One adk agent step: `n` calls of `lookup`, each reported failed (`fail`) after its span by
/// adk's WARN `tool_error` in the agent's span. With `concurrent`, every call's span is open
/// before the first ends (adk's parallel tool calls), else one after the other.
fn adk_step(n: usize, fail: bool, concurrent: bool) {
    let agent = tracing::info_span!(target: "adk_agent", "agent.execute");
    let _in = agent.enter();
    let call = || {
        tracing::info_span!(
            target: "adk_agent::llm_agent",
            "",
            otel.name = "execute_tool lookup",
            tool.name = "lookup",
        )
    };
    if concurrent {
        let spans: Vec<_> = (0..n)
            .map(|_| {
                let s = call();
                s.in_scope(|| {});
                s
            })
            .collect();
        drop(spans);
    } else {
        for _ in 0..n {
            call().in_scope(|| {});
        }
    }
    if fail {
        for _ in 0..n {
            tracing::warn!(target: "adk_agent::llm_agent", { tool.name = "lookup", error = "503" }, "tool_error");
        }
    }
}

/// A provider whose spans keep up to `events` events (the agent span carries one per verdict).
fn provider_with(events: u32) -> opentelemetry_sdk::trace::TracerProviderBuilder {
    SdkTracerProvider::builder().with_span_limits(SpanLimits {
        max_events_per_span: events,
        ..SpanLimits::default()
    })
}

#[test]
fn a_storm_of_late_failures_in_one_step_is_counted_through_the_span_processor() {
    for n in [17, 100] {
        let (_clock, registry) = registry();
        let provider = provider_with(20_000)
            .with_span_processor(ToolHealthSpanProcessor::new(registry.clone()))
            .build();
        let otel = tracing_opentelemetry::layer().with_tracer(provider.tracer("app"));
        tracing::subscriber::with_default(tracing_subscriber::registry().with(otel), || {
            adk_step(n, true, false);
        });
        // Every verdict read at the agent span's end: each call a failure, at once.
        assert_eq!(counts(&registry, "lookup"), (0, n as u64), "{n} calls");
        assert_eq!(registry.breaker_state("lookup"), BreakerState::Open);
    }
}

#[test]
fn a_storm_past_the_tables_capacity_records_every_call_once_and_trips() {
    // 10,000 calls in one step: past what one feed holds waiting (128). The oldest are settled
    // by what their spans showed as room is needed; the verdicts the agent span carries fail
    // the calls still waiting. Nothing panics, every call is recorded exactly once, the
    // breaker opens, nothing is left waiting.
    let n = 10_000u64;
    let (_clock, registry) = registry();
    let provider = provider_with(20_000)
        .with_span_processor(ToolHealthSpanProcessor::new(registry.clone()))
        .build();
    let otel = tracing_opentelemetry::layer().with_tracer(provider.tracer("app"));
    tracing::subscriber::with_default(tracing_subscriber::registry().with(otel), || {
        adk_step(n as usize, true, false);
    });
    let (success, failure) = counts(&registry, "lookup");
    assert_eq!(success + failure, n, "every call once");
    assert!(failure >= 128, "the waiting calls failed: {failure}");
    assert_eq!(registry.breaker_state("lookup"), BreakerState::Open);
}

#[test]
fn more_than_sixteen_waiting_calls_are_all_released_when_their_step_ends() {
    // 17 calls that succeeded: nothing reports them, the agent span's end settles them. The
    // registry's clock does not move: a call left for its due time (10 s) would not count.
    let (_clock, registry) = registry();
    let provider = provider_with(128)
        .with_span_processor(ToolHealthSpanProcessor::new(registry.clone()))
        .build();
    let otel = tracing_opentelemetry::layer().with_tracer(provider.tracer("app"));
    tracing::subscriber::with_default(tracing_subscriber::registry().with(otel), || {
        adk_step(17, false, false);
    });
    assert_eq!(counts(&registry, "lookup"), (17, 0), "the span processor");

    // The layer: 17 parallel calls wait for the step's next move, here its end.
    let (_clock, registry) = registry_pair();
    let layer = ToolHealthLayer::new(registry.clone());
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        adk_step(17, false, true);
    });
    assert_eq!(counts(&registry, "lookup"), (17, 0), "the layer");
    let (_clock, registry) = registry_pair();
    let layer = ToolHealthLayer::new(registry.clone());
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        adk_step(100, true, true);
    });
    assert_eq!(counts(&registry, "lookup"), (0, 100), "the layer, failing");
}

fn registry_pair() -> (ManualClock, Arc<ToolHealthRegistry>) {
    registry()
}

/// The adk step's spans as the SDK finished them, as one OTLP request.
fn otlp_request(n: usize, fail: bool) -> Vec<u8> {
    let exporter = InMemorySpanExporter::default();
    let provider = provider_with(20_000)
        .with_simple_exporter(exporter.clone())
        .build();
    let otel = tracing_opentelemetry::layer().with_tracer(provider.tracer("app"));
    tracing::subscriber::with_default(tracing_subscriber::registry().with(otel), || {
        adk_step(n, fail, false);
    });
    exported(exporter.get_finished_spans().unwrap())
}

#[test]
fn a_storm_of_late_failures_in_one_step_is_counted_through_the_receiver() {
    for n in [17, 100] {
        let (_clock, registry) = registry();
        let receiver = Receiver::new(registry.clone());
        let ingested = receiver
            .ingest(&otlp_request(n, true), Format::Protobuf)
            .unwrap();
        assert_eq!(ingested.spans, n as u64 + 1);
        // The receiver reads at most 128 events per span (its limit): 100 verdicts fit.
        assert_eq!(counts(&registry, "lookup"), (0, n as u64), "{n} calls");
        assert_eq!(receiver.waiting(), 0);
    }
    let (_clock, storm) = registry();
    let receiver = Receiver::new(storm.clone());
    receiver
        .ingest(&otlp_request(10_000, true), Format::Protobuf)
        .unwrap();
    let (success, failure) = counts(&storm, "lookup");
    assert_eq!(success + failure, 10_000, "every call once");
    assert!(failure >= 128, "{failure}");
    assert_eq!(storm.breaker_state("lookup"), BreakerState::Open);
    assert_eq!(receiver.waiting(), 0);
    // Succeeding calls are all settled by the step's end, none left for later.
    let (_clock, fine) = registry();
    let receiver = Receiver::new(fine.clone());
    receiver
        .ingest(&otlp_request(17, false), Format::Protobuf)
        .unwrap();
    assert_eq!(counts(&fine, "lookup"), (17, 0));
    assert_eq!(receiver.waiting(), 0);
}

#[test]
fn the_receiver_answers_a_storm_exported_over_otlp_http_by_the_sdk() {
    // The SDK's own OTLP/HTTP exporter, as an agent runs it, against the receiver on a
    // socket: the request is answered (the handler used to die, and the exporter to retry the
    // same batch), and the 17 failures count.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let registry = Arc::new(ToolHealthRegistry::new());
    let receiver = Receiver::new(registry.clone());
    let addr = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = receiver.router();
        tokio::spawn(async move { axum::serve(listener, app).await });
        addr
    });
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(format!("http://{addr}/v1/traces"))
        .with_timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let provider = provider_with(128).with_batch_exporter(exporter).build();
    let otel = tracing_opentelemetry::layer().with_tracer(provider.tracer("app"));
    tracing::subscriber::with_default(tracing_subscriber::registry().with(otel), || {
        adk_step(17, true, false);
    });
    provider.force_flush().expect("the batch is accepted");
    let deadline = Instant::now() + Duration::from_secs(30);
    while counts(&registry, "lookup") != (0, 17) {
        assert!(
            Instant::now() < deadline,
            "{:?} {:?}",
            counts(&registry, "lookup"),
            receiver.stats()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(registry.breaker_state("lookup"), BreakerState::Open);
    let _ = provider.shutdown();
}
