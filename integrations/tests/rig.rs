//! rig 0.44 (`rig-agent`) driven by a scripted completion model, with `ToolHealthLayer::new`
//! and nothing else: rig's own `execute_tool` spans feed the breakers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rig_agent::agent::hook::{AgentHook, DispatchAction, DispatchEvent, HookContext};
use rig_agent::AgentBuilder;
use rig_core::effect::EffectKind;
use rig_core::tool::PortableTool;
use serde::Deserialize;
use serde_json::json;
use tool_health::{
    BreakerState, ManualClock, ToolHealthLayer, ToolHealthRegistry, REFUSAL_MESSAGE,
};
use tool_health_integrations::rig_script::{Scripted, Turn};
use tool_health_integrations::{calls, registry, subscriber};

#[derive(Debug)]
struct Boom;
impl std::fmt::Display for Boom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("upstream 503")
    }
}
impl std::error::Error for Boom {}

#[derive(Deserialize)]
struct AddArgs {
    a: i64,
    b: i64,
}

/// Succeeds; counts its runs.
#[derive(Clone, Default)]
struct Add(Arc<AtomicU64>);
impl PortableTool for Add {
    const NAME: &'static str = "add";
    type Args = AddArgs;
    type Output = i64;
    type Error = Boom;
    fn description(&self) -> String {
        "adds two integers".into()
    }
    fn parameters(&self) -> serde_json::Value {
        json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]})
    }
    async fn call(&self, args: AddArgs) -> Result<i64, Boom> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(args.a + args.b)
    }
}

/// Fails while `broken` is non-zero; counts its runs.
#[derive(Clone, Default)]
struct Flaky {
    runs: Arc<AtomicU64>,
    broken: Arc<AtomicU64>,
}
impl PortableTool for Flaky {
    const NAME: &'static str = "flaky";
    type Args = serde_json::Value;
    type Output = String;
    type Error = Boom;
    fn description(&self) -> String {
        "fails while its backend is down".into()
    }
    fn parameters(&self) -> serde_json::Value {
        json!({"type": "object"})
    }
    async fn call(&self, _args: serde_json::Value) -> Result<String, Boom> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        if self.broken.load(Ordering::SeqCst) != 0 {
            Err(Boom)
        } else {
            Ok("up".into())
        }
    }
}

/// Takes `took` on the registry's manual clock: the test's time passes only inside the tool.
#[derive(Clone)]
struct Timed {
    clock: ManualClock,
    took: Duration,
    name: &'static str,
}
macro_rules! timed_tool {
    ($ty:ident, $name:literal) => {
        #[derive(Clone)]
        struct $ty(Timed);
        impl PortableTool for $ty {
            const NAME: &'static str = $name;
            type Args = serde_json::Value;
            type Output = String;
            type Error = Boom;
            fn description(&self) -> String {
                "takes a while".into()
            }
            fn parameters(&self) -> serde_json::Value {
                json!({"type": "object"})
            }
            async fn call(&self, _args: serde_json::Value) -> Result<String, Boom> {
                self.0.clock.advance(self.0.took);
                Ok(self.0.name.into())
            }
        }
    };
}
timed_tool!(Slow, "slow");
timed_tool!(Fast, "fast");

/// Must never run: the hook denies it.
#[derive(Clone, Default)]
struct Danger(Arc<AtomicU64>);
impl PortableTool for Danger {
    const NAME: &'static str = "danger";
    type Args = serde_json::Value;
    type Output = String;
    type Error = Boom;
    fn description(&self) -> String {
        "deletes things".into()
    }
    fn parameters(&self) -> serde_json::Value {
        json!({"type": "object"})
    }
    async fn call(&self, _args: serde_json::Value) -> Result<String, Boom> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok("deleted".into())
    }
}

/// A policy hook: `danger` is never allowed.
struct DenyDanger;
impl AgentHook for DenyDanger {
    async fn on_dispatch(&self, _ctx: &HookContext, event: DispatchEvent<'_>) -> DispatchAction {
        match event.kind {
            EffectKind::ToolCall { name, .. } if name == "danger" => {
                DispatchAction::skip("policy: danger is not allowed")
            }
            _ => DispatchAction::Proceed,
        }
    }
}

/// The breaker as a rig hook: a refused call is skipped, and the model reads the refusal. rig
/// asks the hook inside the model turn's `chat` span, before the tool's own span is entered, so
/// the decision is not bound to the tool span: the probe's outcome is recorded by name.
struct Gate(Arc<ToolHealthRegistry>);
impl AgentHook for Gate {
    async fn on_dispatch(&self, _ctx: &HookContext, event: DispatchEvent<'_>) -> DispatchAction {
        match event.kind {
            EffectKind::ToolCall { name, .. } if !self.0.allow_request(name) => {
                DispatchAction::skip(REFUSAL_MESSAGE)
            }
            _ => DispatchAction::Proceed,
        }
    }
}

fn turn(calls: &[(&'static str, serde_json::Value)]) -> Turn {
    const IDS: [&str; 8] = ["c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8"];
    Turn::Calls(
        calls
            .iter()
            .zip(IDS)
            .map(|((name, args), id)| (id, *name, args.clone()))
            .collect(),
    )
}

#[tokio::test]
async fn a_failing_tool_trips_after_the_threshold_and_bad_arguments_are_ignored() {
    let (_clock, registry) = registry(3);
    let _guard =
        tracing::dispatcher::set_default(&subscriber(ToolHealthLayer::new(registry.clone())));
    let add = Add::default();
    let flaky = Flaky::default();
    flaky.broken.store(1, Ordering::SeqCst);
    let model = Scripted::model(vec![
        turn(&[
            ("add", json!({"a": 1, "b": 2})),
            ("flaky", json!({})),
            ("add", json!({"a": "one", "b": 2})), // the model's mistake: invalid_args
            ("flaky", json!({})),
        ]),
        turn(&[("add", json!({"a": "x", "b": "y"})), ("flaky", json!({}))]),
        Turn::Text("done"),
    ]);
    let agent = AgentBuilder::new(model)
        .tool(add.clone())
        .tool(flaky.clone())
        .default_max_turns(4)
        .build();
    agent.prompt("go").await.expect("the run finishes");

    assert_eq!(flaky.runs.load(Ordering::SeqCst), 3);
    assert_eq!(calls(&registry, "flaky"), (0, 3, 0, 0));
    assert_eq!(registry.breaker_state("flaky"), BreakerState::Open);
    assert_eq!(
        add.0.load(Ordering::SeqCst),
        1,
        "bad arguments never reach the tool"
    );
    assert_eq!(calls(&registry, "add"), (1, 0, 2, 0));
    assert_eq!(registry.breaker_state("add"), BreakerState::Closed);
}

#[tokio::test]
async fn strict_mode_records_rigs_calls() {
    let (_clock, registry) = registry(3);
    let layer = ToolHealthLayer::builder(registry.clone())
        .strict(true)
        .build();
    let _guard = tracing::dispatcher::set_default(&subscriber(layer));
    let flaky = Flaky::default();
    flaky.broken.store(1, Ordering::SeqCst);
    let model = Scripted::model(vec![
        turn(&[("add", json!({"a": 1, "b": 2})), ("flaky", json!({}))]),
        Turn::Text("done"),
    ]);
    let agent = AgentBuilder::new(model)
        .tool(Add::default())
        .tool(flaky)
        .default_max_turns(4)
        .build();
    agent.prompt("go").await.expect("the run finishes");
    assert_eq!(calls(&registry, "add"), (1, 0, 0, 0));
    assert_eq!(calls(&registry, "flaky"), (0, 1, 0, 0));
}

#[tokio::test]
async fn a_batched_turn_records_each_tools_own_latency() {
    // rig creates the spans of a turn's calls up front and runs them one after another. The
    // tools take their time on the registry's manual clock (nothing else advances it), so each
    // duration is exact: measured from creation, `fast` would take 301 ms.
    let (clock, registry) = registry(3);
    let _guard =
        tracing::dispatcher::set_default(&subscriber(ToolHealthLayer::new(registry.clone())));
    let slow = Slow(Timed {
        clock: clock.clone(),
        took: Duration::from_millis(300),
        name: "slow",
    });
    let fast = Fast(Timed {
        clock: clock.clone(),
        took: Duration::from_millis(1),
        name: "fast",
    });
    let model = Scripted::model(vec![
        turn(&[("slow", json!({})), ("fast", json!({}))]),
        Turn::Text("done"),
    ]);
    let agent = AgentBuilder::new(model)
        .tool(slow)
        .tool(fast)
        .default_max_turns(4)
        .build();
    agent.prompt("go").await.expect("the run finishes");
    let took = |t| registry.snapshot(t).expect(t).max_duration;
    assert_eq!(took("slow"), Duration::from_millis(300));
    assert_eq!(took("fast"), Duration::from_millis(1));
}

#[tokio::test]
async fn a_hook_denied_call_records_nothing() {
    let (_clock, registry) = registry(3);
    let _guard =
        tracing::dispatcher::set_default(&subscriber(ToolHealthLayer::new(registry.clone())));
    let danger = Danger::default();
    let model = Scripted::model(vec![
        turn(&[("danger", json!({})), ("add", json!({"a": 1, "b": 2}))]),
        Turn::Text("done"),
    ]);
    let agent = AgentBuilder::new(model)
        .tool(danger.clone())
        .tool(Add::default())
        .default_max_turns(4)
        .build();
    agent
        .prompt("go")
        .add_hook(DenyDanger)
        .await
        .expect("the run finishes");
    assert_eq!(danger.0.load(Ordering::SeqCst), 0);
    assert_eq!(
        registry.snapshot("danger"),
        None,
        "a skipped call is no call"
    );
    assert_eq!(calls(&registry, "add"), (1, 0, 0, 0));
}

#[tokio::test]
async fn the_gate_as_a_rig_hook_refuses_then_recovers_through_one_probe() {
    let (clock, registry) = registry(2);
    let _guard =
        tracing::dispatcher::set_default(&subscriber(ToolHealthLayer::new(registry.clone())));
    let flaky = Flaky::default();
    flaky.broken.store(1, Ordering::SeqCst);
    let run = |turns: Vec<Turn>| {
        let agent = AgentBuilder::new(Scripted::model(turns))
            .tool(flaky.clone())
            .default_max_turns(4)
            .build();
        let registry = registry.clone();
        async move { agent.prompt("go").add_hook(Gate(registry)).await }
    };
    // Two failures trip it; the third call of the turn is refused by the hook: never run,
    // counted as a refusal, not a failure.
    run(vec![
        turn(&[
            ("flaky", json!({})),
            ("flaky", json!({})),
            ("flaky", json!({})),
        ]),
        Turn::Text("done"),
    ])
    .await
    .expect("the run finishes");
    assert_eq!(flaky.runs.load(Ordering::SeqCst), 2);
    assert_eq!(calls(&registry, "flaky"), (0, 2, 0, 1));
    assert_eq!(registry.breaker_state("flaky"), BreakerState::Open);

    // The backend comes back; after the cooldown the first call is the probe and closes the
    // breaker; rig asks the hook for the second call only after the first finished, so it is
    // admitted by the closed breaker.
    flaky.broken.store(0, Ordering::SeqCst);
    clock.advance(Duration::from_secs(30));
    run(vec![
        turn(&[("flaky", json!({})), ("flaky", json!({}))]),
        Turn::Text("done"),
    ])
    .await
    .expect("the run finishes");
    assert_eq!(registry.breaker_state("flaky"), BreakerState::Closed);
    assert_eq!(calls(&registry, "flaky"), (2, 2, 0, 1));
    assert_eq!(flaky.runs.load(Ordering::SeqCst), 4);
}
