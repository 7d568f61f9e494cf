//! The demo MCP server ([`tool_health_integrations::mcp_demo::Demo`]) over stdio, for the tests
//! and the example that run an MCP server as a child process. Prints nothing on stdout but the
//! protocol; its `die` tool ends the process (exit status 3) mid-call.

use rmcp::ServiceExt;
use tool_health_integrations::mcp_demo::Demo;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let demo = Demo::new();
    let running = match demo.clone().serve(rmcp::transport::stdio()).await {
        Ok(running) => running,
        Err(e) => {
            eprintln!("mcp-demo-server: {e}");
            std::process::exit(1);
        }
    };
    tokio::select! {
        _ = running.waiting() => {}
        _ = demo.died() => std::process::exit(3),
    }
}
