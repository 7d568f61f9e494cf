//! The HTTP API: the oracle that takes nothing, the claim that takes the probe, the report
//! that resolves it, the controls behind the token, the servers, `/healthz`, the page and
//! `/metrics`.

use serde_json::{json, Value};

use crate::breakers::after_change;
use crate::support::{
    call, eventually, http, http_raw, list, rmcp_http, scratch, text, upstream, Gateway, REFUSAL,
    WAIT,
};

fn config() -> Value {
    json!({"mcpServers": {"rs": upstream::rmcp()},
           "health": {"failureThreshold": 3, "cooldownSeconds": 1, "probeTimeoutSeconds": 30}})
}

pub async fn claim_probe_report_and_the_oracle() {
    let gw = Gateway::http(&config(), &[]).await;
    // An agent's own tool, in any language: claim, call, report.
    let (status, v) = gw.post("/v1/tools/billing_api/claim", "").await;
    assert_eq!(
        (status, v["decision"].as_str()),
        (200, Some("allowed")),
        "{v}"
    );
    for _ in 0..3 {
        let (status, v) = gw
            .post(
                "/v1/tools/billing_api/report",
                r#"{"outcome": "failure", "duration_ms": 120}"#,
            )
            .await;
        assert_eq!(status, 200, "{v}");
    }
    let (status, v) = gw.get("/v1/tools/billing_api").await;
    assert_eq!(status, 200);
    assert_eq!(
        (v["available"].as_bool(), v["state"].as_str()),
        (Some(false), Some("open")),
        "{v}"
    );
    assert!(
        v["retry_after_ms"]
            .as_u64()
            .is_some_and(|ms| ms > 0 && ms <= 1_100),
        "{v}"
    );
    let (status, headers, body) = http_raw(
        gw.port,
        "POST",
        "/v1/tools/billing_api/claim",
        &[("content-type", "application/json")],
        b"{}",
    )
    .await;
    assert_eq!(status, 503, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    // Retry-After is the refusal's own wait in whole seconds, rounded up (the coarse clock
    // may put the end of a 1 s cooldown a few milliseconds past the second).
    let wait_ms = v["retry_after_ms"].as_u64().expect("a wait");
    assert!(wait_ms <= 1_100, "{v}");
    let header = wait_ms.div_ceil(1000).to_string();
    assert!(
        headers
            .iter()
            .any(|(k, v)| k == "retry-after" && *v == header),
        "{header}: {headers:?}"
    );
    assert_eq!(
        (v["decision"].as_str(), v["refused_by"].as_str()),
        (Some("refused"), Some("tool")),
        "{v}"
    );
    assert_eq!(v["message"], REFUSAL);

    // The oracle says when it is available again, and asking it takes nothing.
    eventually("available again", WAIT, || async {
        let (_, v) = gw.get("/v1/tools/billing_api").await;
        (v["available"] == true).then_some(())
    })
    .await;
    let (_, v) = gw.get("/v1/tools/billing_api").await;
    assert_eq!(
        v["available"], true,
        "still: the oracle never took the probe"
    );
    let (status, v) = gw.post("/v1/tools/billing_api/claim", "").await;
    assert_eq!(
        (status, v["decision"].as_str()),
        (200, Some("probe")),
        "{v}"
    );
    let id = v["probe_id"].as_str().expect("a probe id").to_owned();
    assert_eq!(v["lease_ms"], 30_000);
    let (status, v) = gw.post("/v1/tools/billing_api/claim", "").await;
    assert_eq!(status, 503, "one probe at a time: {v}");
    let (status, _) = gw
        .post(
            "/v1/tools/other/report",
            &json!({"outcome": "success", "probe_id": id}).to_string(),
        )
        .await;
    assert_eq!(status, 409, "another tool's probe id");
    // …which gave it back: claim again. The breaker re-opens with its cooldown ending now;
    // the gate's coarse clock may read that instant up to one tick (a few ms) late, never
    // early, so a claim in that tick is refused for that tick only.
    let mut v = Value::Null;
    for _ in 0..3 {
        v = gw.post("/v1/tools/billing_api/claim", "").await.1;
        if v["decision"] != "refused" {
            break;
        }
        let wait = v["retry_after_ms"].as_u64().expect("a wait");
        assert!(
            wait <= 20,
            "given back: at most one coarse tick to wait: {v}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
    }
    assert_eq!(v["decision"], "probe", "{v}");
    let id = v["probe_id"].as_str().unwrap().to_owned();
    let (status, v) = gw
        .post(
            "/v1/tools/billing_api/report",
            &json!({"outcome": "success", "duration_ms": 30, "probe_id": id}).to_string(),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (v["state"].as_str(), v["available"].as_bool()),
        (Some("closed"), Some(true)),
        "{v}"
    );
    let (status, _) = gw
        .post(
            "/v1/tools/billing_api/report",
            &json!({"outcome": "success", "probe_id": id}).to_string(),
        )
        .await;
    assert_eq!(status, 409, "a probe is reported once");

    // A gateway tool by either name: tracked from the moment its server listed it (its
    // breaker is declared then), never called yet; an unknown name is 404 but not refused.
    eventually("the upstream listed", WAIT, || async {
        let (_, v) = gw.get("/v1/servers").await;
        (v["servers"][0]["tools_listed"] == 9).then_some(())
    })
    .await;
    let (status, v) = gw.get("/v1/tools/rs__ok").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (
            v["tracked"].as_bool(),
            v["name"].as_str(),
            v["server"].as_str()
        ),
        (Some(true), Some("rs__ok"), Some("rs")),
        "{v}"
    );
    assert_eq!(v["calls"]["success"], 0, "{v}");
    let (_, v2) = gw.get("/v1/tools/rs%2Fok").await;
    assert_eq!(v, v2);
    let (status, v) = gw.get("/v1/tools/never_seen").await;
    assert_eq!((status, v["available"].as_bool()), (404, Some(true)), "{v}");
    let (_, all) = gw.get("/v1/tools").await;
    assert_eq!(all["version"], 1, "the status page's shape: {all}");
    assert_eq!(
        all["counts"]["tracked"], 10,
        "billing_api and rs's 9 tools: {all}"
    );
}

pub async fn controls_need_the_token() {
    let token = "s3cret-token-0123456789abcdef";
    let file = scratch().join("token");
    std::fs::write(&file, format!("{token}\n")).unwrap();
    let gw = Gateway::http(&config(), &["--control-token-file", file.to_str().unwrap()]).await;
    let (client, changes) = rmcp_http(gw.port).await;
    let auth = format!("Bearer {token}");
    let bearer = [("authorization", auth.as_str())];

    let (status, v) = http(gw.port, "POST", "/v1/tools/rs__ok/force-open", &[], "").await;
    assert_eq!(status, 401, "{v}");
    let (status, _) = http(
        gw.port,
        "POST",
        "/v1/tools/rs__ok/force-open",
        &[("authorization", "Bearer s3cret-token-0123456789abcdeX")],
        "",
    )
    .await;
    assert_eq!(status, 401, "a wrong token");
    let (status, v) = http(
        gw.port,
        "POST",
        "/v1/tools/rs__never_listed/force-open",
        &bearer,
        "",
    )
    .await;
    assert_eq!(status, 404, "no control creates a tool: {v}");

    assert_eq!(
        text(&call(&client, "rs__ok", json!({})).await.unwrap()),
        "fine"
    );
    let seen = changes.count();
    let (status, v) = http(
        gw.port,
        "POST",
        "/v1/tools/rs__ok/force-open?seconds=60",
        &bearer,
        "",
    )
    .await;
    assert_eq!(
        (status, v["state"].as_str()),
        (200, Some("forced_open")),
        "{v}"
    );
    let (seen, _) = after_change(
        &client,
        &changes,
        seen,
        "forced open leaves the list",
        |n| !n.iter().any(|t| t == "rs__ok"),
    )
    .await;
    let r = call(&client, "rs__ok", json!({})).await.unwrap();
    assert!(text(&r).starts_with(REFUSAL), "{}", text(&r));
    let (status, v) = http(gw.port, "POST", "/tools/rs%2Fok/release", &bearer, "").await;
    assert_eq!(
        (status, v["state"].as_str()),
        (200, Some("closed")),
        "the page's route: {v}"
    );
    let (seen, _) = after_change(&client, &changes, seen, "released", |n| {
        n.iter().any(|t| t == "rs__ok")
    })
    .await;

    // A whole server, by hand.
    let (status, v) = http(
        gw.port,
        "POST",
        "/v1/servers/rs/force-open?seconds=60",
        &bearer,
        "",
    )
    .await;
    assert_eq!(
        (status, v["breaker"].as_str(), v["available"].as_bool()),
        (200, Some("open"), Some(false)),
        "{v}"
    );
    let (seen, _) = after_change(&client, &changes, seen, "server out", |n| n.is_empty()).await;
    let r = call(&client, "rs__ok", json!({})).await.unwrap();
    assert!(text(&r).starts_with(REFUSAL), "{}", text(&r));
    let (_, v) = gw.get("/v1/tools/rs__ok").await;
    assert_eq!(
        (v["available"].as_bool(), v["refused_by"].as_str()),
        (Some(false), Some("server")),
        "{v}"
    );
    let (status, _) = http(gw.port, "POST", "/v1/servers/rs/release", &bearer, "").await;
    assert_eq!(status, 200);
    after_change(&client, &changes, seen, "server back", |n| {
        n.iter().any(|t| t == "rs__ok")
    })
    .await;
    let (status, _) = http(gw.port, "POST", "/v1/servers/nope/release", &bearer, "").await;
    assert_eq!(status, 404);
    let (status, _) = http(gw.port, "POST", "/v1/tools/rs__ok/explode", &bearer, "").await;
    assert_eq!(status, 404);
    let (_, page) = gw.get("/tools").await;
    assert_eq!(page["controls"], true, "the page shows its buttons: {page}");
    assert!(!gw.log.text().contains(token), "the token is never logged");

    let plain = Gateway::http(&config(), &[]).await;
    let (status, v) = http(plain.port, "POST", "/v1/tools/rs__ok/reset", &bearer, "").await;
    assert_eq!(status, 404, "no token configured: no controls: {v}");
    assert!(
        v["error"].as_str().unwrap().contains("controls are off"),
        "{v}"
    );
    let _ = list(&client).await;
}

pub async fn servers_healthz_page_and_metrics() {
    let gw = Gateway::http(&config(), &[]).await;
    let (client, _) = rmcp_http(gw.port).await;
    assert_eq!(
        text(&call(&client, "rs__ok", json!({})).await.unwrap()),
        "fine"
    );
    let (status, v) = gw.get("/healthz").await;
    assert_eq!(
        (
            status,
            v["status"].as_str(),
            v["servers_connected"].as_u64()
        ),
        (200, Some("ok"), Some(1)),
        "{v}"
    );
    let (_, v) = gw.get("/v1/servers").await;
    let rs = &v["servers"][0];
    assert_eq!(
        (
            rs["server"].as_str(),
            rs["transport"].as_str(),
            rs["connected"].as_bool()
        ),
        (Some("rs"), Some("stdio"), Some(true)),
        "{v}"
    );
    assert_eq!(rs["tools_listed"], 9, "{v}");
    assert!(rs["pid"].as_u64().is_some(), "{v}");
    assert_eq!(v["hosts"], 1, "one host connected: {v}");
    let (status, headers, page) = http_raw(gw.port, "GET", "/", &[], b"").await;
    assert_eq!(status, 200);
    assert!(
        headers
            .iter()
            .any(|(k, v)| k == "content-type" && v.starts_with("text/html")),
        "{headers:?}"
    );
    assert!(page.contains("<html"), "the status page");
    let (status, _, metrics) = http_raw(gw.port, "GET", "/metrics", &[], b"").await;
    assert_eq!(status, 200);
    assert!(
        metrics.contains("tool_health_calls_total{")
            && metrics.contains("gen_ai_tool_name=\"rs/ok\""),
        "{metrics}"
    );
    assert!(
        metrics.contains("tool_health_server_breaker_state"),
        "the server's breaker too"
    );
}
