//! The breakers through the gateway, with rmcp's client over streamable HTTP and this binary
//! as the rmcp upstream: a trip leaves the list and comes back at the cooldown's end, a hang
//! times out and trips itself only, the model's mistakes never count, a killed server leaves
//! the list while it restarts and comes back with nothing counted against it.

use std::time::{Duration, Instant};

use rmcp::service::RunningService;
use rmcp::RoleClient;
use serde_json::{json, Value};

use crate::supervise::server;
use crate::support::{
    call, kill, list, rmcp_http, seen_count, text, upstream, Changes, Gateway, REFUSAL, WAIT,
};

/// Waits for `notifications/tools/list_changed` past `seen`, lists, and repeats until the list
/// satisfies `pred` (a host lists again only when told): the count of the notification after
/// which it did, and the list.
pub async fn after_change(
    client: &RunningService<RoleClient, Changes>,
    changes: &Changes,
    mut seen: u64,
    what: &str,
    pred: impl Fn(&[String]) -> bool,
) -> (u64, Vec<String>) {
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "{what}: not after any list_changed within {WAIT:?}"
        );
        seen = changes.wait_past(seen, left).await;
        let names = list(client).await;
        if pred(&names) {
            return (seen, names);
        }
    }
}

/// What the upstream `server` received, asked through the gateway.
pub async fn seen(client: &RunningService<RoleClient, Changes>, server: &str) -> Value {
    let r = call(client, &format!("{server}__seen"), json!({}))
        .await
        .expect("seen answers");
    serde_json::from_str(&text(&r)).expect("seen answers JSON")
}

fn has(names: &[String], name: &str) -> bool {
    names.iter().any(|n| n == name)
}

pub async fn a_failing_tool_trips_leaves_the_list_and_comes_back() {
    let cooldown = Duration::from_secs(2);
    let config = json!({
        "mcpServers": {"rs": upstream::rmcp()},
        "health": {"failureThreshold": 3, "cooldownSeconds": 2, "probeTimeoutSeconds": 30},
    });
    let gw = Gateway::http(&config, &[]).await;
    let (client, changes) = rmcp_http(gw.port).await;
    let names = list(&client).await;
    assert!(
        has(&names, "rs__flaky") && has(&names, "rs__ok"),
        "{names:?}"
    );
    let before = changes.count();

    let mut tripped_at = Instant::now();
    for i in 0..3 {
        tripped_at = Instant::now();
        let r = call(&client, "rs__flaky", json!({}))
            .await
            .expect("a result");
        assert_eq!(r.is_error, Some(true), "call {i}");
        assert_eq!(
            text(&r),
            "flaky: upstream answered 503",
            "the tool's own error"
        );
    }
    let (seen_hidden, names) = after_change(&client, &changes, before, "flaky hidden", |n| {
        !has(n, "rs__flaky")
    })
    .await;
    assert!(has(&names, "rs__ok"), "its sibling stays: {names:?}");
    // A host may still call a tool it remembers: refused softly, never sent.
    let r = call(&client, "rs__flaky", json!({}))
        .await
        .expect("a result");
    assert!(text(&r).starts_with(REFUSAL), "{}", text(&r));
    assert!(text(&r).contains("retry in"), "{}", text(&r));
    assert_eq!(seen_count(&seen(&client, "rs").await, "tools", "flaky"), 3);
    let (status, doc) = gw.get("/v1/tools/rs__flaky").await;
    assert_eq!(status, 200, "{doc}");
    assert_eq!(doc["available"], false, "{doc}");
    assert_eq!(doc["refused_by"], "tool", "{doc}");
    assert!(
        doc["retry_after_ms"].as_u64().is_some_and(|ms| ms <= 2_000),
        "{doc}"
    );

    // Mended meanwhile; no call is made, yet at the cooldown's end the host is told.
    let r = call(&client, "rs__mend", json!({}))
        .await
        .expect("a result");
    assert_eq!(text(&r), "mended");
    let (_, names) = after_change(&client, &changes, seen_hidden, "flaky back", |n| {
        has(n, "rs__flaky")
    })
    .await;
    assert!(
        tripped_at.elapsed() >= cooldown,
        "listed again only after the cooldown ({:?})",
        tripped_at.elapsed()
    );
    assert!(has(&names, "rs__ok"));
    // The next call is the probe: it reaches the server once and closes the breaker.
    let r = call(&client, "rs__flaky", json!({}))
        .await
        .expect("a result");
    assert_eq!(text(&r), "flaky works");
    assert_eq!(seen_count(&seen(&client, "rs").await, "tools", "flaky"), 4);
    let (_, doc) = gw.get("/v1/tools/rs%2Fflaky").await;
    assert_eq!(doc["state"], "closed", "{doc}");
    assert_eq!(doc["calls"]["failure"], 3, "{doc}");
    assert_eq!(doc["calls"]["success"], 1, "{doc}");
    assert_eq!(doc["calls"]["refused"], 1, "{doc}");
    let reasons: Vec<&str> = doc["transitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["reason"].as_str())
        .collect();
    assert_eq!(
        reasons,
        ["tripped", "probe_granted", "probe_succeeded"],
        "{doc}"
    );
    assert!(
        gw.log
            .text()
            .contains("circuit breaker opened: calls to `rs/flaky`"),
        "the transition is logged"
    );
}

pub async fn a_hanging_tool_times_out_and_trips_itself_only() {
    let config = json!({
        "mcpServers": {"rs": upstream::rmcp()},
        "health": {"failureThreshold": 3, "cooldownSeconds": 60,
                   "servers": {"rs": {"tools": {"hang": {"timeoutSeconds": 1}}}}},
    });
    let gw = Gateway::http(&config, &[]).await;
    let (client, changes) = rmcp_http(gw.port).await;
    let before = changes.count();
    for _ in 0..3 {
        let started = Instant::now();
        let r = call(&client, "rs__hang", json!({}))
            .await
            .expect("a soft result");
        assert_eq!(r.is_error, Some(true));
        assert!(
            text(&r).contains("did not answer within 1.0 s"),
            "{}",
            text(&r)
        );
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "bounded by the timeout"
        );
    }
    let (_, names) = after_change(&client, &changes, before, "hang hidden", |n| {
        !has(n, "rs__hang")
    })
    .await;
    assert!(has(&names, "rs__ok"), "{names:?}");
    let r = call(&client, "rs__ok", json!({})).await.expect("a result");
    assert_eq!(text(&r), "fine", "a sibling of a hanging tool works");
    // Each timeout was followed by one probe, which the server answered: the tool's problem.
    // The fixture speaks MCP 2026-07-28, whose probe is `server/discover` (its first one opened
    // the connection).
    let seen = seen(&client, "rs").await;
    assert_eq!(
        seen_count(&seen, "methods", "server/discover"),
        1 + 3,
        "{seen}"
    );
    assert_eq!(seen_count(&seen, "methods", "ping"), 0, "{seen}");
    let (_, servers) = gw.get("/v1/servers").await;
    assert_eq!(servers["servers"][0]["breaker"], "closed", "{servers}");
    let (_, doc) = gw.get("/v1/tools/rs__hang").await;
    assert_eq!(doc["breaker"], "open", "{doc}");
    assert_eq!(doc["calls"]["failure"], 3, "{doc}");
}

pub async fn bad_arguments_and_unknown_tools_never_count() {
    let config = json!({"mcpServers": {"rs": upstream::rmcp()}, "health": {"failureThreshold": 2}});
    let gw = Gateway::http(&config, &[]).await;
    let (client, _changes) = rmcp_http(gw.port).await;
    for args in [
        json!({"n": "twenty-one"}),
        json!({}),
        json!({"n": 2.5}),
        json!({"n": [1]}),
    ] {
        for _ in 0..3 {
            let r = call(&client, "rs__needs_int", args.clone())
                .await
                .expect("a soft result");
            assert_eq!(r.is_error, Some(true));
            assert!(
                text(&r).starts_with("invalid arguments for tool `rs__needs_int`"),
                "{}",
                text(&r)
            );
        }
    }
    let r = call(&client, "rs__needs_int", json!({"n": 21}))
        .await
        .expect("a result");
    assert_eq!(
        text(&r),
        "twice 21 is 42",
        "twelve mistakes later the tool is fine"
    );
    for _ in 0..3 {
        let e = call(&client, "rs__no_such_tool", json!({}))
            .await
            .expect_err("unknown");
        assert_eq!(e.0, -32602, "{e:?}");
        assert!(e.1.starts_with("unknown tool `rs__no_such_tool`"), "{e:?}");
    }
    assert!(has(&list(&client).await, "rs__needs_int"));
    let (_, doc) = gw.get("/v1/tools/rs__needs_int").await;
    assert_eq!(doc["calls"]["failure"], 0, "{doc}");
    assert_eq!(doc["calls"]["success"], 1, "{doc}");
    assert_eq!(doc["breaker"], "closed", "{doc}");
    let (status, doc) = gw.get("/v1/tools/rs__no_such_tool").await;
    assert_eq!(status, 404, "a made-up name creates no breaker: {doc}");
    let seen = seen(&client, "rs").await;
    assert_eq!(
        seen_count(&seen, "tools", "needs_int"),
        1,
        "wrong arguments never reached the server: {seen}"
    );
    assert_eq!(
        seen_count(&seen, "tools", "no_such_tool"),
        0,
        "a made-up tool never reached the server: {seen}"
    );
}

/// A killed stdio server leaves the hosts' list while it restarts; the calls made meanwhile
/// are answered "not connected … was not called", reach nothing and count against nothing; it
/// comes back (hosts told) with its breaker closed, no probe needed.
pub async fn a_killed_upstream_leaves_the_list_and_comes_back_with_nothing_counted() {
    let config = json!({
        "mcpServers": {"rs": upstream::rmcp(), "other": upstream::rmcp()},
        "health": {"failureThreshold": 3, "cooldownSeconds": 30,
                   "servers": {"rs": {"restart": {"initialBackoffSeconds": 3}}}},
    });
    let gw = Gateway::http(&config, &[]).await;
    let (client, changes) = rmcp_http(gw.port).await;
    assert!(has(&list(&client).await, "rs__ok"));
    let pid = server(&gw, "rs").await["pid"].as_u64().expect("a pid");
    let before = changes.count();
    kill(pid);

    let (seen_hidden, names) = after_change(&client, &changes, before, "rs hidden", |n| {
        !n.iter().any(|t| t.starts_with("rs__"))
    })
    .await;
    assert!(
        has(&names, "other__ok"),
        "the other server stays: {names:?}"
    );
    for _ in 0..5 {
        let r = call(&client, "rs__ok", json!({}))
            .await
            .expect("a soft result");
        assert!(
            text(&r).contains("MCP server `rs` is not connected")
                && text(&r).contains("was not called"),
            "{}",
            text(&r)
        );
    }
    assert_eq!(
        text(&call(&client, "other__ok", json!({})).await.unwrap()),
        "fine"
    );
    let (_, names) = after_change(&client, &changes, seen_hidden, "rs back", |n| {
        has(n, "rs__ok")
    })
    .await;
    assert!(has(&names, "rs__flaky"));
    let rs = server(&gw, "rs").await;
    assert_eq!(
        (&rs["restarts"], &rs["connected"], &rs["breaker"]),
        (&json!(1), &json!(true), &json!("closed")),
        "nothing counted against it: {rs}"
    );
    assert_ne!(rs["pid"].as_u64(), Some(pid));
    let seen = seen(&client, "rs").await;
    assert_eq!(
        (
            seen_count(&seen, "methods", "ping"),
            seen_count(&seen, "methods", "server/discover")
        ),
        (0, 1),
        "no probe was needed (the one server/discover opened the connection): {seen}"
    );
    assert_eq!(
        text(&call(&client, "rs__ok", json!({})).await.unwrap()),
        "fine"
    );
    assert!(
        gw.log
            .text()
            .contains("MCP server `rs` exited or closed its stdout (killed by signal 9)"),
        "logged: {}",
        gw.log.text()
    );
}
