//! Issue 30, item 6, through the binary with rmcp's client as the host: the tools' health in
//! `_meta`; a read-only or idempotent call retried once on the new connection (and only such a
//! call, and not when switched off).

use serde_json::{json, Value};

use crate::passthrough::{call, connect, rmcp, server, Host};
use crate::support::{eventually, scratch, Gateway, WAIT};

/// Each listed tool carries its health in `_meta`.
pub async fn listed_tools_carry_their_health_in_meta() {
    let gw = Gateway::http(&json!({"mcpServers": {"rs": rmcp()}}), &[]).await;
    let client = connect(&gw, Host::default()).await;
    let health = |tools: &[rmcp::model::Tool], name: &str| -> Value {
        let t = tools.iter().find(|t| t.name == name).expect(name);
        serde_json::to_value(t.meta.as_ref().expect("_meta")).unwrap()
            ["io.github.tool-health/health"]
            .clone()
    };
    let tools = client.peer().list_all_tools().await.unwrap();
    assert_eq!(
        health(&tools, "rs__flaky"),
        json!({"status": "healthy", "score": 1.0, "breaker": "closed"})
    );
    let (is_error, _) = call(&client, "rs__flaky", json!({})).await.unwrap();
    assert!(is_error);
    call(&client, "rs__ok", json!({})).await.unwrap();
    let tools = client.peer().list_all_tools().await.unwrap();
    // One failure on a fresh tool: 0.3 × 0 + 0.7 × 0.7 (SPEC §1).
    assert_eq!(
        health(&tools, "rs__flaky"),
        json!({"status": "unhealthy", "score": 0.49, "breaker": "closed"})
    );
    assert_eq!(health(&tools, "rs__ok")["status"], "healthy");
    let _ = client.cancel().await;
}

/// A read-only or idempotent tool whose call met the end of its connection is called once more
/// on the new connection (each attempt counted for the server); a tool with no such mark is
/// not, nor is any tool of a server with `retryOnReconnect` off.
pub async fn a_read_only_call_is_retried_once_on_the_new_connection() {
    let dir = scratch();
    let with_mark = |mark: &str| {
        let mut u = rmcp();
        u["env"]["GATEWAY_TEST_MARK"] = json!(dir.join(mark).display().to_string());
        u
    };
    let config = json!({
        "mcpServers": {"rs": with_mark("rs"), "off": with_mark("off")},
        "health": {
            "failureThreshold": 10,
            "servers": {"off": {"retryOnReconnect": false}},
        },
    });
    let gw = Gateway::http(&config, &[]).await;
    let client = connect(&gw, Host::default()).await;
    let failures = |v: &Value| v["calls"]["failure"].as_u64().unwrap_or(0);

    // Idempotent, dies once: answered by the second attempt.
    assert_eq!(
        call(&client, "rs__die_once", json!({})).await,
        Ok((false, "survived".into()))
    );
    let rs = server(&gw, "rs").await;
    assert_eq!(rs["restarts"], 1, "{rs}");
    assert_eq!(
        failures(&rs),
        1,
        "the first attempt counted against the server: {rs}"
    );
    gw.log
        .wait_for("calling it once more on the new connection", WAIT)
        .await;

    // Read-only, dies every time: two attempts, then the answer says why.
    let (is_error, t) = call(&client, "rs__die_ro", json!({})).await.unwrap();
    assert!(
        is_error && t.contains("is not connected (its connection closed"),
        "{t}"
    );
    let rs = eventually("two more deaths", WAIT, || async {
        let rs = server(&gw, "rs").await;
        (rs["restarts"] == 3).then_some(rs)
    })
    .await;
    // Each attempt counted (and the gateway's own listing, when it was under way as the
    // server died).
    assert!(failures(&rs) >= 3, "each attempt counted: {rs}");
    let (_, tool) = gw.get("/v1/tools/rs__die_ro").await;
    assert_eq!(
        tool["calls"]["failure"], 0,
        "the server's failure, not the tool's: {tool}"
    );

    // No mark: one attempt.
    let (is_error, t) = call(&client, "rs__die", json!({})).await.unwrap();
    assert!(is_error && t.contains("is not connected"), "{t}");
    eventually("restarted", WAIT, || async {
        (server(&gw, "rs").await["connected"] == true).then_some(())
    })
    .await;
    assert_eq!(server(&gw, "rs").await["restarts"], 4);

    // Switched off: the idempotent tool is not called again.
    let (is_error, t) = call(&client, "off__die_once", json!({})).await.unwrap();
    assert!(is_error && t.contains("is not connected"), "{t}");
    assert_eq!(
        call(&client, "off__die_once", json!({})).await,
        Ok((false, "survived".into())),
        "called again by the host, it works"
    );
    assert_eq!(server(&gw, "off").await["restarts"], 1);
    let _ = client.cancel().await;
}
