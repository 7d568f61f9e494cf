//! An MCP client (rmcp 3.11) behind tool-health's breakers, with no network: the example starts
//! itself again as an MCP server over stdio (a child process), calls a failing tool until its
//! breaker opens, loses the server, and recovers through one probe on a restarted one.
//!
//! ```sh
//! cargo run -p tool-health-integrations --example mcp_client
//! ```
//!
//! The registry runs on a `ManualClock` so the 30 s cooldown takes no time; drop `.clock(..)`
//! in a real client.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use tool_health::mcp::{is_refusal, ToolHealthClient};
use tool_health::{BreakerState, ManualClock, ToolHealthLayer, ToolHealthRegistry};
use tool_health_integrations::mcp_demo::Demo;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

const SERVE: &str = "--serve-stdio";

/// This example's own executable, serving the demo MCP server over stdio.
async fn start_server() -> RunningService<RoleClient, ()> {
    let exe = std::env::current_exe().expect("own path");
    let mut command = tokio::process::Command::new(exe);
    command.arg(SERVE);
    let transport = TokioChildProcess::new(command).expect("spawn the server");
    ().serve(transport).await.expect("MCP handshake")
}

async fn call(client: &ToolHealthClient, tool: &'static str) {
    match client.call_tool(CallToolRequestParams::new(tool)).await {
        Ok(r) if is_refusal(&r) => println!("  {tool}: refused, the model reads the refusal"),
        Ok(r) if r.is_error == Some(true) => println!("  {tool}: the tool reported an error"),
        Ok(_) => println!("  {tool}: ok"),
        Err(e) => println!("  {tool}: {e}"),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    if std::env::args().nth(1).as_deref() == Some(SERVE) {
        // The child: nothing but the protocol on stdout.
        if let Ok(running) = Demo::new().serve(rmcp::transport::stdio()).await {
            let _ = running.waiting().await;
        }
        return;
    }

    let clock = ManualClock::new();
    let registry = Arc::new(ToolHealthRegistry::builder().clock(clock.clone()).build());
    // Optional: with the layer, the client's MCP spans are recorded by it and show the gate
    // decision in Jaeger or Honeycomb (add tracing-opentelemetry after it).
    tracing_subscriber::registry()
        .with(ToolHealthLayer::new(registry.clone()))
        .init();

    let server = start_server().await;
    let client = ToolHealthClient::new(server.peer().clone(), registry.clone())
        .server("demo")
        .timeout(Duration::from_secs(10));

    println!("a tool that answers isError: true");
    for _ in 0..4 {
        call(&client, "fail").await;
    }
    assert_eq!(registry.breaker_state("demo/fail"), BreakerState::Open);

    println!("the server goes away");
    call(&client, "ok").await;
    let _ = server.cancel().await; // kills the child process
    for _ in 0..4 {
        call(&client, "ok").await;
    }
    assert_eq!(registry.breaker_state("demo/ok"), BreakerState::Open);

    println!("restarted; 30 s later one probe goes through");
    let server = start_server().await;
    let client = client.with_peer(server.peer().clone());
    clock.advance(Duration::from_secs(30));
    call(&client, "ok").await;
    assert_eq!(registry.breaker_state("demo/ok"), BreakerState::Closed);

    for s in registry.health_summary() {
        println!(
            "{:<10} {:<9} breaker {:<9} ok {} failed {} refused {}",
            &*s.tool,
            s.status.to_string(),
            s.breaker.to_string(),
            s.success_count,
            s.failure_count,
            s.refused_count
        );
    }
    let _ = server.cancel().await;
}
