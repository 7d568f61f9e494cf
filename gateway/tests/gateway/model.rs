//! What the model reads, in one voice: the tool as the model knows it (`{server}__{tool}`),
//! what happened, when to try again — for a failing tool, a server an operator switched off,
//! arguments the check refused, a tool that hangs, a server that cannot be reached — and a
//! made-up tool of a real server answered `-32602` without reaching it.

use serde_json::{json, Value};

use crate::support::{
    call, control, eventually, rmcp_http, seen_count, text, token_args, upstream, Gateway, REFUSAL,
    WAIT,
};

pub async fn the_model_reads_the_tool_it_called_what_happened_and_when_to_retry() {
    let config = json!({
        "mcpServers": {
            "rs": upstream::rmcp(),
            // Nothing listens on port 9 (discard): this upstream is never reached.
            "far": {"url": "http://127.0.0.1:9/mcp"},
        },
        "health": {"failureThreshold": 2, "cooldownSeconds": 30,
                   "servers": {"rs": {"tools": {"hang": {"timeoutSeconds": 1}}},
                               "far": {"connectTimeoutSeconds": 1}}},
    });
    let token = token_args();
    let gw = Gateway::http(&config, &[&token[0], &token[1]]).await;
    let (client, _changes) = rmcp_http(gw.port).await;
    let said = |r: &rmcp::model::CallToolResult| text(r);

    // A failing tool, refused: its name as the model called it, why, when.
    for _ in 0..2 {
        call(&client, "rs__flaky", json!({})).await.unwrap();
    }
    let r = call(&client, "rs__flaky", json!({})).await.unwrap();
    let t = said(&r);
    assert!(
        t.starts_with(REFUSAL)
            && t.contains("tool `rs__flaky` was not called: it keeps failing; retry in "),
        "{t}"
    );

    // Arguments the check refused.
    let r = call(&client, "rs__needs_int", json!({"n": "twenty-one"}))
        .await
        .unwrap();
    let t = said(&r);
    assert!(
        t.starts_with("invalid arguments for tool `rs__needs_int` (checked against its inputSchema; it was not called): ")
            && t.ends_with("Correct them and call it again."),
        "{t}"
    );

    // A tool that hangs past its timeout.
    let r = call(&client, "rs__hang", json!({})).await.unwrap();
    let t = said(&r);
    assert!(
        t.starts_with("tool `rs__hang` did not answer within 1.0 s"),
        "{t}"
    );

    // A made-up tool of a real server: -32602 naming what the model called, nothing sent.
    let e = call(&client, "rs__nope", json!({})).await.unwrap_err();
    assert_eq!(
        e,
        (
            -32602,
            "unknown tool `rs__nope`: it is not in tools/list (it was not called)".to_owned()
        )
    );

    // The operator switches the server off: said so, not "not answering".
    let (status, v) = control(gw.port, "/v1/servers/rs/force-open?seconds=600").await;
    assert_eq!(status, 200, "{v}");
    let r = call(&client, "rs__ok", json!({})).await.unwrap();
    let t = said(&r);
    assert!(
        t.starts_with(REFUSAL)
            && t.contains(
                "tool `rs__ok` was not called: the operator switched off its MCP server `rs`; \
                 retry in "
            ),
        "{t}"
    );
    let (status, _) = control(gw.port, "/v1/servers/rs/release").await;
    assert_eq!(status, 200);
    let seen: Value = {
        let r = call(&client, "rs__seen", json!({})).await.unwrap();
        serde_json::from_str(&text(&r)).unwrap()
    };
    assert_eq!(seen_count(&seen, "tools", "nope"), 0, "never sent: {seen}");

    // An upstream that cannot be reached: the model reads which tool and what to do, never
    // the transport's insides (the operator reads those in /v1/servers and the log).
    eventually("far's first attempt failed", WAIT, || async {
        let (_, v) = gw.get("/v1/servers").await;
        v["servers"]
            .as_array()?
            .iter()
            .find(|s| s["server"] == "far")
            .filter(|s| s["last_error"].is_string())
            .map(|_| ())
    })
    .await;
    let r = call(&client, "far__anything", json!({})).await.unwrap();
    let t = said(&r);
    assert_eq!(r.is_error, Some(true), "{t}");
    assert!(
        t.starts_with("tool `far__anything` was not called: its MCP server `far` is not connected"),
        "{t}"
    );
    for inside in ["rmcp::", "reqwest", "Worker", "127.0.0.1:9", "<"] {
        assert!(!t.contains(inside), "{inside:?} in {t}");
    }
}
