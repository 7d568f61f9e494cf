//! tool-health against the real agent frameworks, with no network: a scripted completion model
//! for rig 0.44 ([`rig_script`]), a scripted LLM for langchain-rust 7.0 ([`langchain_script`]),
//! adk-rust 2.3 ([`adk_script`]), swiftide 0.32 ([`swiftide_script`]) and autoagents 0.4
//! ([`autoagents_script`]) (genai 0.7's tests need no model of their own: genai is a provider
//! client, the application runs the tools), a small MCP server for rmcp 3.11 ([`mcp_demo`], also
//! the `mcp-demo-server` binary, which
//! serves it over stdio as a child process), the official Python and TypeScript MCP SDK servers
//! of `servers/` found and started ([`mcp_servers`]), and rmcp's HTTP client with the session id
//! captured ([`mcp_http`]).
//!
//! The tests in `tests/` and the examples in `examples/` use them. This crate is a workspace
//! member, not published: its heavy dependencies never reach `tool-health`'s own
//! dev-dependencies, and nothing here is built by `cargo bench`.
//!
//! ```sh
//! cargo test -p tool-health-integrations --all-features   # the framework and SDK tests (not the plain `cargo test`)
//! cargo run -p tool-health-integrations --example rig_agent
//! cargo run -p tool-health-integrations --example mcp_client
//! ```

pub mod adk_script;
pub mod autoagents_script;
pub mod langchain_script;
pub mod mcp_demo;
pub mod mcp_http;
pub mod mcp_servers;
pub mod rig_script;
pub mod swiftide_script;

use std::sync::Arc;

use tool_health::{CircuitBreakerConfig, ManualClock, ToolHealthLayer, ToolHealthRegistry};
use tracing::Dispatch;
use tracing_subscriber::layer::SubscriberExt;

/// A registry on a manual clock: `failure_threshold`, cooldown 30 s, probe lease 10 s.
pub fn registry(failure_threshold: u32) -> (ManualClock, Arc<ToolHealthRegistry>) {
    let clock = ManualClock::new();
    let registry = ToolHealthRegistry::builder()
        .config(CircuitBreakerConfig {
            failure_threshold,
            recovery_duration: std::time::Duration::from_secs(30),
            probe_timeout: std::time::Duration::from_secs(10),
        })
        .clock(clock.clone())
        .build();
    (clock, Arc::new(registry))
}

/// A subscriber with nothing but `layer`, as a [`Dispatch`].
pub fn subscriber(layer: ToolHealthLayer) -> Dispatch {
    Dispatch::new(tracing_subscriber::registry().with(layer))
}

/// `(success, failure, ignored, refused)` counts of `tool` (zeros if untracked).
pub fn calls(registry: &ToolHealthRegistry, tool: &str) -> (u64, u64, u64, u64) {
    registry.snapshot(tool).map_or((0, 0, 0, 0), |s| {
        (
            s.success_count,
            s.failure_count,
            s.ignored_count,
            s.refused_count,
        )
    })
}
