//! An MCP client (rmcp 3.11) behind tool-health's breakers, with no network: the example starts
//! itself again as an MCP server over stdio (a child process), calls a failing tool until its
//! breaker opens (and leaves the tool list), sends arguments the tool's schema refuses, loses the
//! server (refused as a whole), and recovers through one ping on a restarted one.
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
use tool_health::mcp::{is_invalid_arguments, is_refusal, ToolHealthClient, Transport};
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
    call_with(client, CallToolRequestParams::new(tool)).await;
}

async fn call_with(client: &ToolHealthClient, params: CallToolRequestParams) {
    let tool = params.name.clone();
    match client.call_tool(params).await {
        Ok(r) if is_refusal(&r) || is_invalid_arguments(&r) => {
            let text = r
                .content
                .first()
                .and_then(|c| c.as_text())
                .map(|t| t.text.clone());
            println!("  {tool}: the model reads: {}", text.unwrap_or_default());
        }
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
        .transport(Transport::stdio())
        .timeout(Duration::from_secs(10));

    println!("a tool that answers isError: true");
    for _ in 0..4 {
        call(&client, "fail").await;
    }
    assert_eq!(registry.breaker_state("demo/fail"), BreakerState::Open);
    let listed = client.list_tools(None).await.expect("listed");
    for hidden in &listed.hidden {
        println!(
            "  left out of the tool list: {} for {:?}",
            hidden.name, hidden.retry_after
        );
    }
    assert!(listed.result.tools.iter().all(|t| t.name != "fail"));

    println!("arguments the tool's inputSchema refuses never reach the server");
    let args = serde_json::json!({"a": "one", "b": 2});
    let args = args.as_object().cloned().unwrap_or_default();
    call_with(
        &client,
        CallToolRequestParams::new("add").with_arguments(args),
    )
    .await;
    // `add` is a listed tool (declared: tracked from the list on); the refused call counts
    // nothing.
    assert!(registry
        .snapshot("demo/add")
        .is_none_or(|s| s.success_count + s.failure_count + s.ignored_count == 0));

    println!("the server goes away");
    call(&client, "ok").await;
    let _ = server.cancel().await; // kills the child process
    for _ in 0..4 {
        call(&client, "ok").await;
    }
    assert_eq!(client.server_state(), BreakerState::Open);

    println!("restarted; 30 s later one ping probes the server, and its tools are back");
    let server = start_server().await;
    let client = client.with_peer(server.peer().clone());
    clock.advance(Duration::from_secs(30));
    call(&client, "ok").await;
    assert_eq!(client.server_state(), BreakerState::Closed);

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
