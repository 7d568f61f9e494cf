//! Two gateway replicas on one Redis (or Valkey) share their breakers: a trip on one is a
//! refusal on the other, which never calls the sick tool, and its hosts are told.

use std::process::Stdio;

use serde_json::json;

use crate::breakers::after_change;
use crate::support::{
    call, eventually, list, rmcp_http, seen_count, skip, text, upstream, Gateway, WAIT,
};

/// A Redis or Valkey server binary: `TOOL_HEALTH_FLEET_TEST_SERVER`, else one on the PATH.
fn store_binary() -> Result<String, String> {
    if let Ok(p) = std::env::var("TOOL_HEALTH_FLEET_TEST_SERVER") {
        if !p.is_empty() {
            return Ok(p);
        }
    }
    for name in ["valkey-server", "redis-server"] {
        let found = std::process::Command::new(name)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if found {
            return Ok(name.to_owned());
        }
    }
    Err(
        "no Redis or Valkey server (set TOOL_HEALTH_FLEET_TEST_SERVER, or install redis-server)"
            .into(),
    )
}

pub async fn replicas_share_a_trip() {
    let binary = store_binary().unwrap_or_else(|why| skip(&why));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let _store = tokio::process::Command::new(&binary)
        .args([
            "--bind",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the store");
    eventually("the store listens", WAIT, || async {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()
            .map(drop)
    })
    .await;
    let prefix = format!("gw-test-{}", std::process::id());
    let config = json!({
        "mcpServers": {"rs": upstream::rmcp()},
        "health": {"failureThreshold": 3, "cooldownSeconds": 120,
                   "fleet": {"url": format!("redis://127.0.0.1:{port}"), "prefix": prefix}},
    });
    let a = Gateway::http(&config, &[]).await;
    let b = Gateway::http(&config, &[]).await;
    let (client_a, _) = rmcp_http(a.port).await;
    let (client_b, changes_b) = rmcp_http(b.port).await;
    assert!(list(&client_b).await.iter().any(|t| t == "rs__flaky"));
    let seen = changes_b.count();
    for _ in 0..3 {
        let r = call(&client_a, "rs__flaky", json!({})).await.unwrap();
        assert_eq!(text(&r), "flaky: upstream answered 503");
    }
    // Replica B refuses a tool it never saw fail, and tells its hosts.
    eventually("B refuses rs/flaky", WAIT, || async {
        let (_, v) = b.get("/v1/tools/rs__flaky").await;
        (v["available"] == false).then_some(())
    })
    .await;
    after_change(&client_b, &changes_b, seen, "B hides flaky", |n| {
        !n.iter().any(|t| t == "rs__flaky")
    })
    .await;
    let r = call(&client_b, "rs__flaky", json!({})).await.unwrap();
    assert!(
        text(&r).starts_with(crate::support::REFUSAL),
        "{}",
        text(&r)
    );
    let seen_b = call(&client_b, "rs__seen", json!({})).await.unwrap();
    let seen_b: serde_json::Value = serde_json::from_str(&text(&seen_b)).unwrap();
    assert_eq!(
        seen_count(&seen_b, "tools", "flaky"),
        0,
        "B's upstream was never called: {seen_b}"
    );
    assert!(b.log.text().contains("fleet mode on"), "{}", b.log.text());
}
