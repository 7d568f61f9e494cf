//! `tool-health-gateway`: see the library's docs and `docs/gateway.md`.

fn main() -> std::process::ExitCode {
    tool_health_gateway::run(std::env::args())
}
