//! swiftide 0.32.1 (`swiftide-agents`) driven by a scripted model, with `ToolHealthLayer::new`
//! and nothing else. swiftide runs each tool call in its own task under a `tool` span and
//! reports a failure only after the span closed, as a WARN "Tool call failed, retrying" (with
//! `error` and `tool_call`) in the parent `step` span: the swiftide convention's late verdict
//! reads it.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use swiftide_agents::Agent;
use swiftide_core::chat_completion::errors::ToolError;
use swiftide_core::chat_completion::{Tool, ToolCall, ToolOutput, ToolSpec};
use swiftide_core::AgentContext;
use tool_health::{BreakerState, ToolHealthLayer, ToolHealthRegistry};
use tool_health_integrations::swiftide_script::{Scripted, Turn};
use tool_health_integrations::{calls, registry, subscriber};

/// A tool that sleeps `sleep` (real time), then fails or succeeds; counts its runs.
#[derive(Clone)]
struct TestTool {
    name: &'static str,
    fail: bool,
    sleep: Duration,
    runs: Arc<AtomicU64>,
}

impl TestTool {
    fn new(name: &'static str, fail: bool) -> Self {
        Self {
            name,
            fail,
            sleep: Duration::ZERO,
            runs: Arc::default(),
        }
    }
}

impl From<TestTool> for Box<dyn Tool> {
    fn from(tool: TestTool) -> Self {
        Box::new(tool)
    }
}

#[async_trait::async_trait]
impl Tool for TestTool {
    async fn invoke(
        &self,
        _context: &dyn AgentContext,
        _call: &ToolCall,
    ) -> Result<ToolOutput, ToolError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        if !self.sleep.is_zero() {
            tokio::time::sleep(self.sleep).await;
        }
        if self.fail {
            Err(ToolError::Unknown(anyhow::anyhow!("upstream 503")))
        } else {
            Ok(ToolOutput::text("ok"))
        }
    }

    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed(self.name)
    }

    fn tool_spec(&self) -> ToolSpec {
        ToolSpec::builder()
            .name(self.name)
            .description("a test tool")
            .build()
            .expect("a tool spec")
    }
}

async fn run(layer: ToolHealthLayer, turns: Vec<Turn>, tools: Vec<TestTool>) {
    let dispatch = subscriber(layer);
    let _default = tracing::dispatcher::set_default(&dispatch);
    let mut agent = Agent::builder()
        .llm(&Scripted::new(turns))
        .tools(tools)
        .no_system_prompt()
        .build()
        .expect("a swiftide agent");
    agent.query("go").await.expect("the agent run");
}

#[tokio::test]
async fn failures_trip_and_successes_count_with_the_default_layer() {
    for strict in [false, true] {
        let (_clock, registry) = registry(3);
        let flaky = TestTool::new("flaky", true);
        let turns = vec![
            Turn::Calls(vec![("c1", "flaky", r#"{"q":1}"#)]),
            Turn::Calls(vec![("c2", "add", "{}")]),
            Turn::Calls(vec![("c3", "flaky", r#"{"q":2}"#)]),
            Turn::Calls(vec![("c4", "flaky", r#"{"q":3}"#)]),
            Turn::Text("sorry"),
        ];
        let layer = ToolHealthLayer::builder(registry.clone())
            .strict(strict)
            .build();
        run(
            layer,
            turns,
            vec![flaky.clone(), TestTool::new("add", false)],
        )
        .await;
        assert_eq!(flaky.runs.load(Ordering::SeqCst), 3);
        assert_eq!(calls(&registry, "flaky"), (0, 3, 0, 0), "strict {strict}");
        assert_eq!(calls(&registry, "add"), (1, 0, 0, 0), "strict {strict}");
        assert_eq!(registry.breaker_state("flaky"), BreakerState::Open);
        assert_eq!(registry.breaker_state("add"), BreakerState::Closed);
        assert_eq!(registry.tracked_tools(), 2);
    }
}

#[tokio::test]
async fn concurrent_calls_of_one_step_are_matched_by_tool_name_and_call() {
    let (_clock, registry) = registry(3);
    // Two calls of the failing tool and one of the good one in each step: swiftide spawns
    // them all, and awaits them in order.
    let step = |n: &'static str| {
        Turn::Calls(vec![
            ("a", "add", "{}"),
            ("f1", "flaky", n),
            ("f2", "flaky", r#"{"other":true}"#),
        ])
    };
    let turns = vec![step(r#"{"n":1}"#), step(r#"{"n":2}"#), Turn::Text("done")];
    let flaky = TestTool::new("flaky", true);
    run(
        ToolHealthLayer::new(registry.clone()),
        turns,
        vec![TestTool::new("add", false), flaky.clone()],
    )
    .await;
    assert_eq!(flaky.runs.load(Ordering::SeqCst), 4);
    assert_eq!(calls(&registry, "flaky"), (0, 4, 0, 0));
    assert_eq!(calls(&registry, "add"), (2, 0, 0, 0));
    assert_eq!(registry.breaker_state("flaky"), BreakerState::Open);
}

#[tokio::test]
async fn each_attempt_of_a_retried_call_is_a_call() {
    // The model repeats the same failing call: swiftide feeds the failure back three times
    // (its `tool_retry_limit`), then stops the agent with an error. Four attempts, four calls
    // (SPEC §5.2: everything retry-shaped re-fires per attempt).
    let (_clock, registry) = registry(10);
    let same = || Turn::Calls(vec![("r", "flaky", r#"{"q":"same"}"#)]);
    let turns = vec![same(), same(), same(), same(), Turn::Text("unreachable")];
    let flaky = TestTool::new("flaky", true);
    let dispatch = subscriber(ToolHealthLayer::new(registry.clone()));
    let _default = tracing::dispatcher::set_default(&dispatch);
    let mut agent = Agent::builder()
        .llm(&Scripted::new(turns))
        .tools(vec![flaky.clone()])
        .no_system_prompt()
        .build()
        .expect("a swiftide agent");
    let result = agent.query("go").await;
    assert!(result.is_err(), "swiftide stops after its retry limit");
    assert_eq!(flaky.runs.load(Ordering::SeqCst), 4);
    assert_eq!(calls(&registry, "flaky"), (0, 4, 0, 0));
}

#[tokio::test]
async fn each_call_reads_its_own_duration() {
    let registry = Arc::new(ToolHealthRegistry::new());
    let mut slow = TestTool::new("slow", false);
    slow.sleep = Duration::from_millis(300);
    let mut quick = TestTool::new("quick", false);
    quick.sleep = Duration::from_millis(10);
    let turns = vec![
        Turn::Calls(vec![("s", "slow", "{}"), ("q", "quick", "{}")]),
        Turn::Text("done"),
    ];
    run(
        ToolHealthLayer::new(registry.clone()),
        turns,
        vec![slow, quick],
    )
    .await;
    let slow = registry.snapshot("slow").expect("slow recorded");
    let quick = registry.snapshot("quick").expect("quick recorded");
    println!(
        "swiftide durations: slow {:?} (sleeps 300 ms), quick {:?} (sleeps 10 ms, concurrently)",
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
