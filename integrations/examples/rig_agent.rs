//! A rig 0.44 agent whose tools are watched by tool-health, with no configuration and no
//! network: a scripted model asks for a tool whose backend is down, the breaker opens after
//! three failures, a rig hook turns the gate's refusal into a soft answer the model reads, and
//! after the cooldown one probe finds the backend back and closes the breaker.
//!
//! ```sh
//! cargo run -p tool-health-integrations --example rig_agent
//! ```
//!
//! The registry runs on a `ManualClock` so the 30 s cooldown takes no time; drop `.clock(..)`
//! in a real agent.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rig_agent::agent::hook::{AgentHook, DispatchAction, DispatchEvent, HookContext};
use rig_agent::AgentBuilder;
use rig_core::effect::EffectKind;
use rig_core::tool::PortableTool;
use serde_json::json;
use tool_health::{
    BreakerState, ManualClock, ToolHealthLayer, ToolHealthRegistry, REFUSAL_MESSAGE,
};
use tool_health_integrations::rig_script::{Scripted, Turn};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

#[derive(Debug)]
struct Unavailable;
impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("search backend answered 503")
    }
}
impl std::error::Error for Unavailable {}

/// A web search whose backend can be down.
#[derive(Clone)]
struct Search {
    down: Arc<AtomicBool>,
}

impl PortableTool for Search {
    const NAME: &'static str = "search";
    type Args = serde_json::Value;
    type Output = String;
    type Error = Unavailable;
    fn description(&self) -> String {
        "searches the web".into()
    }
    fn parameters(&self) -> serde_json::Value {
        json!({"type": "object", "properties": {"q": {"type": "string"}}})
    }
    async fn call(&self, args: serde_json::Value) -> Result<String, Unavailable> {
        if self.down.load(Ordering::SeqCst) {
            println!("  search({}) -> backend down", args["q"]);
            Err(Unavailable)
        } else {
            println!("  search({}) -> results", args["q"]);
            Ok("three results".into())
        }
    }
}

/// The gate as a rig hook: a call to a tool whose breaker is open is skipped, and rig hands
/// the model the reason, tool-health's soft refusal.
struct ToolHealthGate(Arc<ToolHealthRegistry>);

impl AgentHook for ToolHealthGate {
    async fn on_dispatch(&self, _ctx: &HookContext, event: DispatchEvent<'_>) -> DispatchAction {
        match event.kind {
            EffectKind::ToolCall { name, .. } if !self.0.allow_request(name) => {
                println!("  gate: {name} refused");
                DispatchAction::skip(REFUSAL_MESSAGE)
            }
            _ => DispatchAction::Proceed,
        }
    }
}

fn searches(n: usize) -> Turn {
    let ids = ["c1", "c2", "c3", "c4", "c5"];
    Turn::Calls(
        ids.iter()
            .take(n)
            .map(|id| (*id, "search", json!({"q": "rust circuit breakers"})))
            .collect(),
    )
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let clock = ManualClock::new();
    let registry = Arc::new(ToolHealthRegistry::builder().clock(clock.clone()).build());
    // The only wiring: rig's own `execute_tool` spans feed the registry.
    tracing_subscriber::registry()
        .with(ToolHealthLayer::new(registry.clone()))
        .init();

    let search = Search {
        down: Arc::new(AtomicBool::new(true)),
    };
    let run = |turns: Vec<Turn>| {
        let agent = AgentBuilder::new(Scripted::model(turns))
            .name("researcher")
            .tool(search.clone())
            .default_max_turns(4)
            .build();
        let gate = ToolHealthGate(registry.clone());
        async move { agent.prompt("find papers").add_hook(gate).await }
    };

    println!("turn 1: the model searches four times; the backend is down");
    run(vec![searches(4), Turn::Text("sorry, search is down")])
        .await
        .expect("the run finishes");
    let s = registry.snapshot("search").expect("tracked");
    println!(
        "  -> {} failures, {} refused, breaker {}, health {} ({:.2})",
        s.failure_count, s.refused_count, s.breaker, s.status, s.score
    );
    assert_eq!((s.failure_count, s.refused_count), (3, 1));
    assert_eq!(s.breaker, BreakerState::Open);

    println!("the backend recovers; 30 s later the model searches again");
    search.down.store(false, Ordering::SeqCst);
    clock.advance(Duration::from_secs(30));
    run(vec![searches(1), Turn::Text("found them")])
        .await
        .expect("the run finishes");
    let s = registry.snapshot("search").expect("tracked");
    println!(
        "  -> probe succeeded: breaker {}, {} successes, health {} ({:.2})",
        s.breaker, s.success_count, s.status, s.score
    );
    assert_eq!(s.breaker, BreakerState::Closed);
}
