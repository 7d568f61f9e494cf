//! The servers on the status page, in `/tools` and in the metrics: a tool its server refuses
//! is refused there too (not "closed, available, 0 open"), and a server that never connected
//! is shown with why.

use serde_json::{json, Value};

use crate::support::{
    call, control, eventually, http_raw, rmcp_http, token_args, upstream, Gateway, WAIT,
};

pub async fn a_refused_servers_tools_are_refused_on_the_page_and_servers_are_shown() {
    let config = json!({
        "mcpServers": {
            "rs": upstream::rmcp(),
            "far": {"url": "http://127.0.0.1:9/mcp"},
        },
        "health": {"servers": {"far": {"connectTimeoutSeconds": 1}}},
    });
    let token = token_args();
    let gw = Gateway::http(&config, &[&token[0], &token[1]]).await;
    let (client, _) = rmcp_http(gw.port).await;
    call(&client, "rs__ok", json!({})).await.unwrap();
    eventually("far's first attempt failed", WAIT, || async {
        let (_, v) = gw.get("/tools").await;
        v["groups"]
            .as_array()?
            .iter()
            .find(|g| g["name"] == "far" && g["last_error"].is_string())
            .map(|_| ())
    })
    .await;
    let (status, v) = control(gw.port, "/v1/servers/rs/force-open?seconds=600").await;
    assert_eq!(status, 200, "{v}");

    // The page's own document (the library's `/tools`, what the page and `/events` show).
    let (status, doc) = gw.get("/tools?limit=1000").await;
    assert_eq!(status, 200, "{doc}");
    let rs_tools: Vec<&Value> = doc["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["tool"].as_str().is_some_and(|k| k.starts_with("rs/")))
        .collect();
    assert!(rs_tools.len() >= 8, "the listed tools are tracked: {doc}");
    for t in &rs_tools {
        assert_eq!(
            (
                t["available"].as_bool(),
                t["refused_by"].as_str(),
                t["group"].as_str()
            ),
            (Some(false), Some("server"), Some("rs")),
            "{t}"
        );
        assert!(
            t["retry_after_ms"]
                .as_u64()
                .is_some_and(|ms| ms > 590_000 && ms <= 600_000),
            "{t}"
        );
    }
    assert_eq!(
        doc["counts"]["group_refused"].as_u64(),
        Some(rs_tools.len() as u64),
        "the header counts them: {}",
        doc["counts"]
    );
    let group = |name: &str| {
        doc["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["name"] == name)
            .unwrap_or_else(|| panic!("{name}: {doc}"))
            .clone()
    };
    let rs = group("rs");
    assert_eq!(rs["state"], "forced_open", "{rs}");
    assert_eq!(rs["connected"], true, "{rs}");
    assert_eq!(rs["restarts"], 0, "{rs}");
    assert_eq!(rs["tools"], 9, "the fixture's nine tools: {rs}");
    let far = group("far");
    assert_eq!(far["connected"], false, "{far}");
    assert!(
        far["last_error"].as_str().is_some_and(|e| !e.is_empty()),
        "{far}"
    );

    // The gateway's API agrees.
    let (_, v) = gw.get("/v1/tools/rs__echo").await;
    assert_eq!(
        (
            v["available"].as_bool(),
            v["refused_by"].as_str(),
            v["name"].as_str()
        ),
        (Some(false), Some("server"), Some("rs__echo")),
        "{v}"
    );

    // The page shows the servers' table.
    let (status, _, page) = http_raw(gw.port, "GET", "/", &[], b"").await;
    assert_eq!(status, 200);
    assert!(page.contains("id=\"group-rows\""), "the servers' table");

    // The metrics: each server's connection and restarts beside its breaker.
    let (status, _, metrics) = http_raw(gw.port, "GET", "/metrics", &[], b"").await;
    assert_eq!(status, 200);
    let line = |prefix: &str, server: &str| {
        metrics
            .lines()
            .find(|l| l.starts_with(prefix) && l.contains(&format!("mcp_server_name=\"{server}\"")))
            .unwrap_or_else(|| panic!("{prefix} for {server}:\n{metrics}"))
            .to_owned()
    };
    assert!(line("tool_health_server_connected", "rs").ends_with(" 1"));
    assert!(line("tool_health_server_connected", "far").ends_with(" 0"));
    assert!(line("tool_health_server_restarts", "rs").ends_with(" 0"));
}
