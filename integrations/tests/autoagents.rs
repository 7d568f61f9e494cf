//! autoagents 0.4 with autoagents-telemetry 0.4, driven by a scripted model. autoagents marks a
//! tool call's outcome only through the OpenTelemetry span API (tracing-opentelemetry 0.33's
//! `set_status`, into an opentelemetry_sdk 0.32 provider): `ToolHealthSpanProcessor` for SDK
//! 0.32 (feature `span-processor-sdk-0-32`) in that provider is all it takes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use autoagents::async_trait;
use autoagents::core::agent::memory::SlidingWindowMemory;
use autoagents::core::agent::prebuilt::executor::ReActAgent;
use autoagents::core::agent::task::Task;
use autoagents::core::agent::{AgentBuilder, DirectAgent};
use autoagents::core::tool::{ToolCallError, ToolRuntime, ToolT};
use autoagents_derive::{agent, tool, AgentHooks, ToolInput};
use autoagents_telemetry::{TelemetryConfig, TelemetryProvider, Tracer};
use opentelemetry_0_32::trace::TracerProvider as _;
use opentelemetry_sdk_0_32::trace::SdkTracerProvider;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tool_health::span_processor::sdk_0_32::ToolHealthSpanProcessor;
use tool_health::{BreakerState, ToolHealthLayer, ToolHealthRegistry};
use tool_health_integrations::autoagents_script::{Scripted, Turn};
use tool_health_integrations::{calls, registry};
use tracing_subscriber::layer::SubscriberExt;

static FLAKY_RUNS: AtomicU64 = AtomicU64::new(0);

#[derive(Serialize, Deserialize, ToolInput, Debug)]
struct NoArgs {
    #[input(description = "Anything")]
    note: Option<String>,
}

#[tool(name = "flaky", description = "fails while its backend is down", input = NoArgs)]
struct Flaky;

#[async_trait]
impl ToolRuntime for Flaky {
    async fn execute(&self, _args: Value) -> Result<Value, ToolCallError> {
        FLAKY_RUNS.fetch_add(1, Ordering::SeqCst);
        Err(ToolCallError::RuntimeError("upstream 503".into()))
    }
}

#[tool(name = "add", description = "adds", input = NoArgs)]
struct Add;

#[async_trait]
impl ToolRuntime for Add {
    async fn execute(&self, _args: Value) -> Result<Value, ToolCallError> {
        Ok(serde_json::json!(3))
    }
}

#[tool(name = "slow", description = "takes 300 ms", input = NoArgs)]
struct Slow;

#[async_trait]
impl ToolRuntime for Slow {
    async fn execute(&self, _args: Value) -> Result<Value, ToolCallError> {
        tokio::time::sleep(Duration::from_millis(300)).await;
        Ok(serde_json::json!("done"))
    }
}

#[agent(name = "assistant", description = "You use tools", tools = [Flaky, Add, Slow])]
#[derive(Default, Clone, AgentHooks)]
struct Assistant;

/// autoagents' telemetry with its own subscriber off: its spans go to the application's.
#[derive(Debug)]
struct IntoOurProvider;

impl TelemetryProvider for IntoOurProvider {
    fn telemetry_config(&self) -> TelemetryConfig {
        let mut config = TelemetryConfig::new("tool-health-test");
        // autoagents requires an exporter for its own provider, which nothing writes to here.
        config.exporter.stdout = true;
        config.metrics_enabled = false;
        config.install_tracing_subscriber = false;
        config
    }
}

/// Runs the scripted agent with the processor in an SDK 0.32 provider and, when `layer`, a
/// `ToolHealthLayer` in the same subscriber.
async fn run(registry: &Arc<ToolHealthRegistry>, turns: Vec<Turn>, layer: bool) {
    let provider = SdkTracerProvider::builder()
        .with_span_processor(ToolHealthSpanProcessor::new(registry.clone()))
        .build();
    let otel = tracing_opentelemetry_0_33::layer().with_tracer(provider.tracer("app"));
    let subscriber = tracing_subscriber::registry()
        .with(layer.then(|| ToolHealthLayer::new(registry.clone())))
        .with(otel);
    let _default = tracing::subscriber::set_default(subscriber);

    let mut handle = AgentBuilder::<_, DirectAgent>::new(ReActAgent::new(Assistant))
        .llm(Scripted::new(turns))
        .memory(Box::new(SlidingWindowMemory::new(20)))
        .build()
        .await
        .expect("an autoagents agent");
    let mut telemetry = Tracer::from_direct(Arc::new(IntoOurProvider), &mut handle);
    telemetry.start().expect("autoagents telemetry");
    handle
        .agent
        .run(Task::new("go"))
        .await
        .expect("the agent run");
    telemetry.shutdown().await.expect("telemetry shutdown");
    let _ = provider.shutdown();
}

#[tokio::test]
async fn failures_trip_through_the_span_processor() {
    for layer in [false, true] {
        FLAKY_RUNS.store(0, Ordering::SeqCst);
        let (_clock, registry) = registry(3);
        let turns = vec![
            Turn::Calls(vec![("c1", "flaky", "{}")]),
            Turn::Calls(vec![("c2", "add", "{}")]),
            Turn::Calls(vec![("c3", "flaky", "{}")]),
            Turn::Calls(vec![("c4", "flaky", "{}")]),
            Turn::Text("sorry"),
        ];
        run(&registry, turns, layer).await;
        assert_eq!(FLAKY_RUNS.load(Ordering::SeqCst), 3);
        // With the layer in the subscriber too, nothing is counted twice: the layer leaves
        // autoagents' spans (whose outcome only the OpenTelemetry span carries) to the processor.
        assert_eq!(calls(&registry, "flaky"), (0, 3, 0, 0), "layer {layer}");
        assert_eq!(calls(&registry, "add"), (1, 0, 0, 0), "layer {layer}");
        assert_eq!(registry.breaker_state("flaky"), BreakerState::Open);
        assert_eq!(registry.tracked_tools(), 2, "layer {layer}");
    }
}

#[tokio::test]
async fn the_duration_is_the_telemetry_tasks_and_its_offset_is_small() {
    // The system clock is not used: the processor measures each span from its own start and
    // end time, which autoagents' telemetry task sets when it handles the agent's events.
    let registry = Arc::new(ToolHealthRegistry::new());
    let mut offsets = Vec::new();
    for _ in 0..5 {
        let before = registry.snapshot("slow").map_or(Duration::ZERO, |s| {
            s.avg_duration * u32::try_from(s.total_calls).unwrap_or(u32::MAX)
        });
        let turns = vec![Turn::Calls(vec![("s", "slow", "{}")]), Turn::Text("done")];
        run(&registry, turns, false).await;
        let s = registry.snapshot("slow").expect("slow recorded");
        let total = s.avg_duration * u32::try_from(s.total_calls).unwrap_or(u32::MAX);
        let this = total.saturating_sub(before);
        offsets.push(this.as_secs_f64() * 1e3 - 300.0);
    }
    println!("autoagents: duration minus the tool's 300 ms, per call: {offsets:.1?} ms");
    let s = registry.snapshot("slow").expect("slow recorded");
    assert_eq!(s.success_count, 5);
    // No timing goal: the span covers the call, give or take the telemetry task's scheduling.
    assert!(
        s.avg_duration > Duration::from_millis(200) && s.avg_duration < Duration::from_secs(2),
        "{:?}",
        s.avg_duration
    );
}
