//! adk-rust 2.3 (`adk-agent`, `adk-runner`, `adk-session`) driven by a scripted model, with
//! `ToolHealthLayer::new` and nothing else. adk reports a tool's failure as a WARN event
//! `tool_error` (with `tool.name` and `error`) in the agent's span, outside the tool span: the
//! adk convention's late verdict reads it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use adk_agent::LlmAgentBuilder;
use adk_core::{Agent, Tool, ToolContext, ToolExecutionStrategy};
use serde_json::{json, Value};
use tool_health::{BreakerState, ToolHealthLayer, ToolHealthRegistry};
use tool_health_integrations::adk_script::{run, Scripted, Turn};
use tool_health_integrations::{calls, registry, subscriber};

/// Fails every time; counts its runs.
#[derive(Default)]
struct Flaky(Arc<AtomicU64>);

#[async_trait::async_trait]
impl Tool for Flaky {
    fn name(&self) -> &str {
        "flaky"
    }
    fn description(&self) -> &str {
        "fails while its backend is down"
    }
    async fn execute(&self, _ctx: Arc<dyn ToolContext>, _args: Value) -> adk_core::Result<Value> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Err(adk_core::AdkError::tool("upstream 503"))
    }
}

/// Succeeds.
struct Add;

#[async_trait::async_trait]
impl Tool for Add {
    fn name(&self) -> &str {
        "add"
    }
    fn description(&self) -> &str {
        "adds two integers"
    }
    async fn execute(&self, _ctx: Arc<dyn ToolContext>, args: Value) -> adk_core::Result<Value> {
        let sum = args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0);
        Ok(json!({ "sum": sum }))
    }
}

/// Takes `0` of real time (a tool that sleeps), then succeeds.
struct Slow(&'static str, Duration);

#[async_trait::async_trait]
impl Tool for Slow {
    fn name(&self) -> &str {
        self.0
    }
    fn description(&self) -> &str {
        "takes a while"
    }
    async fn execute(&self, _ctx: Arc<dyn ToolContext>, _args: Value) -> adk_core::Result<Value> {
        tokio::time::sleep(self.1).await;
        Ok(json!("done"))
    }
}

fn agent(
    turns: Vec<Turn>,
    tools: Vec<Arc<dyn Tool>>,
    strategy: ToolExecutionStrategy,
) -> Arc<dyn Agent> {
    let mut builder = LlmAgentBuilder::new("assistant")
        .model(Scripted::new(turns))
        .tool_execution_strategy(strategy);
    for tool in tools {
        builder = builder.tool(tool);
    }
    Arc::new(builder.build().expect("adk agent"))
}

fn call(id: &'static str, name: &'static str) -> Turn {
    Turn::Calls(vec![(id, name, json!({ "a": 1, "b": 2 }))])
}

async fn run_with(layer: ToolHealthLayer, agent: Arc<dyn Agent>) {
    let dispatch = subscriber(layer);
    let _default = tracing::dispatcher::set_default(&dispatch);
    let errors = run(agent, "go").await;
    assert!(errors.is_empty(), "adk run errors: {errors:?}");
}

#[tokio::test]
async fn failures_trip_and_successes_count_with_the_default_layer() {
    for strict in [false, true] {
        let (_clock, registry) = registry(3);
        let runs = Arc::new(AtomicU64::new(0));
        let turns = vec![
            call("c1", "flaky"),
            call("c2", "add"),
            call("c3", "flaky"),
            call("c4", "flaky"),
            Turn::Text("sorry"),
        ];
        let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(Flaky(runs.clone())), Arc::new(Add)];
        let layer = ToolHealthLayer::builder(registry.clone())
            .strict(strict)
            .build();
        run_with(
            layer,
            agent(turns, tools, ToolExecutionStrategy::Sequential),
        )
        .await;
        assert_eq!(runs.load(Ordering::SeqCst), 3, "strict {strict}");
        assert_eq!(calls(&registry, "flaky"), (0, 3, 0, 0), "strict {strict}");
        assert_eq!(calls(&registry, "add"), (1, 0, 0, 0), "strict {strict}");
        assert_eq!(
            registry.breaker_state("flaky"),
            BreakerState::Open,
            "strict {strict}"
        );
        assert_eq!(registry.breaker_state("add"), BreakerState::Closed);
        // adk's own spans around the model turns are not tool calls.
        assert_eq!(registry.tracked_tools(), 2);
    }
}

#[tokio::test]
async fn parallel_calls_of_one_turn_get_their_own_verdicts() {
    let (_clock, registry) = registry(3);
    let runs = Arc::new(AtomicU64::new(0));
    let both = || {
        Turn::Calls(vec![
            ("p1", "flaky", json!({})),
            ("p2", "add", json!({ "a": 2, "b": 2 })),
        ])
    };
    let turns = vec![both(), both(), both(), Turn::Text("done")];
    let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(Flaky(runs.clone())), Arc::new(Add)];
    run_with(
        ToolHealthLayer::new(registry.clone()),
        agent(turns, tools, ToolExecutionStrategy::Parallel),
    )
    .await;
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    assert_eq!(calls(&registry, "flaky"), (0, 3, 0, 0));
    assert_eq!(calls(&registry, "add"), (3, 0, 0, 0));
    assert_eq!(registry.breaker_state("flaky"), BreakerState::Open);
}

#[tokio::test]
async fn each_call_reads_its_own_duration() {
    // The system clock: the tools really sleep (no timing goal, a generous bound).
    let registry = Arc::new(ToolHealthRegistry::new());
    let turns = vec![
        Turn::Calls(vec![("d1", "slow", json!({})), ("d2", "quick", json!({}))]),
        Turn::Text("done"),
    ];
    let tools: Vec<Arc<dyn Tool>> = vec![
        Arc::new(Slow("slow", Duration::from_millis(300))),
        Arc::new(Slow("quick", Duration::from_millis(10))),
    ];
    run_with(
        ToolHealthLayer::new(registry.clone()),
        agent(turns, tools, ToolExecutionStrategy::Sequential),
    )
    .await;
    let slow = registry.snapshot("slow").expect("slow recorded");
    let quick = registry.snapshot("quick").expect("quick recorded");
    println!(
        "adk durations: slow {:?} (sleeps 300 ms), quick {:?} (sleeps 10 ms)",
        slow.avg_duration, quick.avg_duration
    );
    assert_eq!((slow.success_count, quick.success_count), (1, 1));
    assert!(
        slow.avg_duration >= Duration::from_millis(300)
            && slow.avg_duration < Duration::from_millis(1500),
        "{:?}",
        slow.avg_duration
    );
    assert!(
        quick.avg_duration < Duration::from_millis(250),
        "{:?}",
        quick.avg_duration
    );
}
