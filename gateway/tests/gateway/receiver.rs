//! Issue 23's receiver, mounted in the gateway: a real Pydantic AI agent (its OTel SDK's
//! OTLP/HTTP exporter, no network: a scripted `FunctionModel`) exports its tool spans to the
//! gateway's `/v1/traces`; the failing tool trips, and the gateway's own API says so. The agent
//! comes from `scripts/agents.sh` (`target/agents/venv`): without it the test is ignored with
//! the reason (failing under `CI=true`).

use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{eventually, skip, upstream, workspace, Gateway, WAIT};

/// The Python of `scripts/agents.sh` with Pydantic AI, or why there is none.
pub fn pydantic_python() -> std::path::PathBuf {
    let python = workspace().join("target/agents/venv/bin/python");
    let ok = python.exists()
        && std::process::Command::new(&python)
            .args(["-c", "import pydantic_ai"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    if !ok {
        skip("Pydantic AI is not installed in target/agents/venv (run scripts/agents.sh)");
    }
    python
}

pub async fn an_agents_traces_trip_a_breaker_the_api_shows() {
    let python = pydantic_python();
    let config = json!({"mcpServers": {"rs": upstream::rmcp()},
                        "health": {"failureThreshold": 3, "cooldownSeconds": 30}});
    let gw = Gateway::http(&config, &[]).await;
    let endpoint = gw.url("/v1/traces");
    let out = tokio::process::Command::new(python)
        .arg(workspace().join("tests/agents/python/pydantic_agent.py"))
        .args([
            "--endpoint",
            &endpoint,
            "--scenarios",
            "raises,raises,raises,ok",
        ])
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env("OTEL_SDK_DISABLED", "false")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), out)
        .await
        .expect("the agent ends within 2 min")
        .expect("run the agent");
    assert!(
        out.status.success(),
        "the agent failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Three raising calls of `flaky`: its breaker is open, the gateway's oracle refuses it.
    let flaky: Value = eventually("flaky refused", WAIT, || async {
        let (status, v) = gw.get("/v1/tools/flaky").await;
        (status == 200 && v["available"] == Value::Bool(false)).then_some(v)
    })
    .await;
    assert_eq!(flaky["state"].as_str(), Some("open"), "{flaky}");
    assert!(
        flaky["retry_after_ms"]
            .as_u64()
            .is_some_and(|ms| ms > 0 && ms <= 30_000),
        "{flaky}"
    );
    // The succeeding tool counted cleanly, and is available.
    let (status, weather) = gw.get("/v1/tools/weather").await;
    assert_eq!(status, 200, "{weather}");
    assert_eq!(weather["available"], Value::Bool(true), "{weather}");
    // A claim through the gateway's gate is refused too (503 with the wait).
    let (status, v) = gw.post("/v1/tools/flaky/claim", "").await;
    assert_eq!(status, 503, "{v}");
    // Both came in through the receiver, with the gateway's MCP tools in one registry.
    let (status, page) = gw.get("/v1/tools").await;
    assert_eq!(status, 200, "{page}");
    let text = page.to_string();
    assert!(
        text.contains("\"flaky\"") && text.contains("\"weather\""),
        "{page}"
    );
}
