//! langchain-rust 7.0 driven by a scripted LLM through `OpenAiToolAgent` and `AgentExecutor`,
//! with `ToolHealthLayer::new` and nothing else: langchain's `tool.call` spans feed the
//! breakers.

use std::error::Error;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use langchain_rust::agent::{AgentExecutor, OpenAiToolAgentBuilder};
use langchain_rust::chain::Chain;
use langchain_rust::prompt_args;
use langchain_rust::tools::Tool;
use serde_json::Value;
use tool_health::{BreakerState, ToolHealthLayer};
use tool_health_integrations::langchain_script::{calls as turn, text, ScriptedLlm};
use tool_health_integrations::{calls, registry, subscriber};

struct OkTool(Arc<AtomicU64>);
#[async_trait]
impl Tool for OkTool {
    fn name(&self) -> String {
        "ok_tool".into()
    }
    fn description(&self) -> String {
        "succeeds".into()
    }
    async fn run(&self, input: Value) -> Result<String, Box<dyn Error>> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(format!("ok: {input}"))
    }
}

struct FailTool(Arc<AtomicU64>);
#[async_trait]
impl Tool for FailTool {
    fn name(&self) -> String {
        "fail_tool".into()
    }
    fn description(&self) -> String {
        "fails".into()
    }
    async fn run(&self, _input: Value) -> Result<String, Box<dyn Error>> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Err("upstream 503".into())
    }
}

async fn run(
    strict: bool,
) -> (
    Arc<tool_health::ToolHealthRegistry>,
    Arc<AtomicU64>,
    Arc<AtomicU64>,
) {
    let (_clock, registry) = registry(3);
    let layer = ToolHealthLayer::builder(registry.clone())
        .strict(strict)
        .build();
    let _guard = tracing::dispatcher::set_default(&subscriber(layer));
    let (ok_runs, fail_runs) = (Arc::default(), Arc::default());
    let tools: Vec<Arc<dyn Tool>> = vec![
        Arc::new(OkTool(Arc::clone(&ok_runs))),
        Arc::new(FailTool(Arc::clone(&fail_runs))),
    ];
    let llm = ScriptedLlm::new(vec![
        turn(&[
            ("c1", "ok_tool", r#"{"input":"x"}"#),
            ("c2", "fail_tool", r#"{"input":"y"}"#),
        ]),
        turn(&[
            ("c3", "fail_tool", r#"{"input":"y"}"#),
            ("c4", "fail_tool", r#"{"input":"y"}"#),
        ]),
        text("done"),
    ]);
    let agent = OpenAiToolAgentBuilder::new()
        .tools(&tools)
        .build(llm)
        .expect("agent");
    let executor = AgentExecutor::from_agent(agent);
    executor
        .invoke(prompt_args! { "input" => "do it" })
        .await
        .expect("the run finishes");
    (registry, ok_runs, fail_runs)
}

#[tokio::test]
async fn a_failing_tool_trips_and_a_succeeding_one_is_counted() {
    let (registry, ok_runs, fail_runs) = run(false).await;
    assert_eq!(fail_runs.load(Ordering::SeqCst), 3);
    assert_eq!(calls(&registry, "fail_tool"), (0, 3, 0, 0));
    assert_eq!(registry.breaker_state("fail_tool"), BreakerState::Open);
    assert_eq!(ok_runs.load(Ordering::SeqCst), 1);
    assert_eq!(calls(&registry, "ok_tool"), (1, 0, 0, 0));
    assert_eq!(registry.breaker_state("ok_tool"), BreakerState::Closed);
}

#[tokio::test]
async fn strict_mode_keeps_langchains_successes() {
    // langchain-rust marks nothing on a successful call: strict mode cannot apply to it.
    let (registry, _, _) = run(true).await;
    assert_eq!(calls(&registry, "ok_tool"), (1, 0, 0, 0));
    assert_eq!(calls(&registry, "fail_tool"), (0, 3, 0, 0));
}
