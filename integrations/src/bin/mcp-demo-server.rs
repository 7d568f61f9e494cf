//! The demo MCP server ([`tool_health_integrations::mcp_demo::Demo`]) over stdio, for the tests
//! and the example that run an MCP server as a child process. Prints nothing on stdout but the
//! protocol.

use rmcp::ServiceExt;
use tool_health_integrations::mcp_demo::Demo;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let running = match Demo::new().serve(rmcp::transport::stdio()).await {
        Ok(running) => running,
        Err(e) => {
            eprintln!("mcp-demo-server: {e}");
            std::process::exit(1);
        }
    };
    let _ = running.waiting().await;
}
