//! Supervision through the gateway binary, with real upstreams: a killed stdio server (the
//! Python SDK's) and an HTTP server down for 5 s (`server-everything`) are used again within a
//! second of answering, the breaker still guards a server that keeps dying, a restarted HTTP
//! server's unknown session means a new one, a slow `tools/list` costs its own tools only, a
//! forced-open tool or server comes back when its time is over, and a tool its server drops is
//! no longer known. Each test prints its figures (`cargo test … -- --nocapture`).

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::breakers::after_change;
use crate::support::{
    call, eventually, free_port, http, kill, list, rmcp_http, skip, text, upstream, Everything,
    Gateway, REFUSAL, WAIT,
};

/// How soon after its upstream answers again a call must work: "about a second", with room
/// for a loaded machine.
const RECOVERY: Duration = Duration::from_millis(1_500);

/// `server` of `GET /v1/servers`.
pub async fn server(gw: &Gateway, name: &str) -> Value {
    let (_, v) = gw.get("/v1/servers").await;
    v["servers"]
        .as_array()
        .and_then(|a| a.iter().find(|s| s["server"] == name))
        .cloned()
        .unwrap_or(Value::Null)
}

/// Calls `tool` every 100 ms until it answers `expect` (not before `since`); what each call
/// answered meanwhile, and when the first good answer came.
async fn until_it_works(
    client: &rmcp::service::RunningService<rmcp::RoleClient, crate::support::Changes>,
    tool: &str,
    args: Value,
    expect: &str,
    bound: Duration,
) -> (Instant, Vec<String>) {
    let deadline = Instant::now() + bound;
    let mut seen = Vec::new();
    loop {
        let answer = match call(client, tool, args.clone()).await {
            Ok(r) => text(&r),
            Err((code, message)) => format!("JSON-RPC {code}: {message}"),
        };
        if answer.contains(expect) {
            return (Instant::now(), seen);
        }
        seen.push(answer);
        assert!(
            Instant::now() < deadline,
            "{tool} did not work again within {bound:?}; it answered: {seen:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Item 7: a stdio server (the Python SDK's) killed is restarted, and calls work again as soon
/// as its handshake is answered — the calls made meanwhile count against nothing.
pub async fn a_killed_stdio_upstream_works_again_within_a_second_of_its_handshake() {
    let py = upstream::python().unwrap_or_else(|e| skip(&e));
    let config = json!({
        "mcpServers": {"py": py},
        "health": {"failureThreshold": 3, "cooldownSeconds": 30},
    });
    let gw = Gateway::http(&config, &[]).await;
    let (client, _changes) = rmcp_http(gw.port).await;
    assert_eq!(
        text(&call(&client, "py__ok", json!({})).await.unwrap()),
        "fine"
    );
    let pid = server(&gw, "py").await["pid"].as_u64().expect("a pid");
    let killed = Instant::now();
    kill(pid);

    let (worked, meanwhile) = until_it_works(
        &client,
        "py__ok",
        json!({}),
        "fine",
        Duration::from_secs(45),
    )
    .await;
    let s = server(&gw, "py").await;
    assert_eq!(s["restarts"], 1, "{s}");
    assert_ne!(s["pid"].as_u64(), Some(pid), "{s}");
    // When the new process answered its handshake, from how long it has been connected.
    let connected_for = Duration::from_millis(s["connected_for_ms"].as_u64().expect("connected"));
    let handshake = Instant::now() - connected_for;
    let after_handshake = worked.saturating_duration_since(handshake);
    eprintln!(
        "figure: stdio upstream killed → handshake answered again after {:.2} s → calls work \
         {:.2} s after the handshake ({:.2} s after the kill; {} call(s) answered meanwhile)",
        handshake.duration_since(killed).as_secs_f64(),
        after_handshake.as_secs_f64(),
        worked.duration_since(killed).as_secs_f64(),
        meanwhile.len()
    );
    assert!(
        after_handshake <= RECOVERY,
        "calls worked again {after_handshake:?} after the handshake; meanwhile: {meanwhile:#?}"
    );
    assert!(
        meanwhile.iter().all(|a| !a.starts_with(REFUSAL)),
        "no call was refused by the breaker: {meanwhile:#?}"
    );
    let s = server(&gw, "py").await;
    assert_eq!(s["breaker"], "closed", "{s}");
}

/// Items 7 and 8: an HTTP server (`server-everything`) down for 5 s then back on the same
/// address is used again within a second of answering; `connected` says false while it is down.
pub async fn an_http_upstream_down_for_5_s_works_again_within_a_second_of_answering() {
    let port = free_port();
    let everything = Everything::start(port).await.unwrap_or_else(|e| skip(&e));
    let config = json!({
        "mcpServers": {"ev": {"url": everything.url()}},
        "health": {"failureThreshold": 3, "cooldownSeconds": 30},
    });
    let gw = Gateway::http(&config, &[]).await;
    let (client, _changes) = rmcp_http(gw.port).await;
    let echo = json!({"message": "hi"});
    assert!(text(&call(&client, "ev__echo", echo.clone()).await.unwrap()).contains("hi"));

    everything.kill().await;
    let down = Instant::now();
    // Down: calls answer at once that it is not connected; `connected` says so.
    let r = text(&call(&client, "ev__echo", echo.clone()).await.unwrap());
    assert!(!r.contains("Echo: hi"), "{r}");
    eventually("ev not connected", WAIT, || async {
        (server(&gw, "ev").await["connected"] == false).then_some(())
    })
    .await;
    let mut meanwhile = Vec::new();
    while down.elapsed() < Duration::from_secs(5) {
        meanwhile.push(text(
            &call(&client, "ev__echo", echo.clone()).await.unwrap(),
        ));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let everything = Everything::start(port).await.expect("started again");
    let back = Instant::now();
    let (worked, more) = until_it_works(
        &client,
        "ev__echo",
        echo.clone(),
        "hi",
        Duration::from_secs(45),
    )
    .await;
    meanwhile.extend(more);
    let recovered = worked.duration_since(back);
    eprintln!(
        "figure: HTTP upstream down {:.1} s → calls work {:.2} s after it answers again",
        back.duration_since(down).as_secs_f64(),
        recovered.as_secs_f64()
    );
    assert!(
        recovered <= RECOVERY,
        "{recovered:?}; meanwhile: {meanwhile:#?}"
    );
    assert!(
        meanwhile.iter().all(|a| !a.starts_with(REFUSAL)),
        "no call was refused by the breaker: {meanwhile:#?}"
    );
    let s = server(&gw, "ev").await;
    assert_eq!(
        (&s["connected"], &s["breaker"]),
        (&json!(true), &json!("closed")),
        "{s}"
    );
    drop(everything);
}

/// Item 8: an HTTP server restarted between two calls answers the old session id with 400
/// (`server-everything`: "No valid session ID provided"): the gateway initializes a new
/// session, and the next call works.
pub async fn an_http_upstream_that_forgot_the_session_is_initialized_again() {
    let port = free_port();
    let everything = Everything::start(port).await.unwrap_or_else(|e| skip(&e));
    let config = json!({"mcpServers": {"ev": {"url": everything.url()}}});
    let gw = Gateway::http(&config, &[]).await;
    let (client, _changes) = rmcp_http(gw.port).await;
    let echo = json!({"message": "again"});
    assert!(text(&call(&client, "ev__echo", echo.clone()).await.unwrap()).contains("again"));
    everything.kill().await;
    let everything = Everything::start(port).await.expect("started again");
    let (_, meanwhile) =
        until_it_works(&client, "ev__echo", echo, "again", Duration::from_secs(20)).await;
    assert!(
        meanwhile.iter().all(|a| !a.starts_with(REFUSAL)),
        "never refused: {meanwhile:#?}"
    );
    let s = server(&gw, "ev").await;
    assert_eq!(
        (&s["connected"], &s["breaker"]),
        (&json!(true), &json!("closed")),
        "{s}"
    );
    let log = gw.log.text();
    assert!(
        log.contains("MCP server `ev` connected again")
            || log.contains("a new one was initialized"),
        "a new session: {log}"
    );
    drop(everything);
}

/// Item 7: the breaker still guards a server that keeps dying: after `failureThreshold` deaths
/// in a row its calls are refused and it is not started again before the cooldown ends (a
/// restart loop is no retry storm); then its handshake is the probe, and it serves again.
pub async fn a_server_that_keeps_dying_is_refused_and_not_restarted_before_its_cooldown() {
    let config = json!({
        "mcpServers": {"rs": upstream::rmcp()},
        "health": {"failureThreshold": 3, "cooldownSeconds": 4,
                   "restart": {"initialBackoffSeconds": 0.1}},
    });
    let gw = Gateway::http(&config, &[]).await;
    let (client, _changes) = rmcp_http(gw.port).await;
    let mut answers = Vec::new();
    for _ in 0..3 {
        // Each call waits for the restart under way, and kills the new process.
        answers.push(text(&call(&client, "rs__die", json!({})).await.unwrap()));
    }
    let opened = Instant::now();
    let r = text(&call(&client, "rs__ok", json!({})).await.unwrap());
    assert!(r.starts_with(REFUSAL), "{r}; before: {answers:#?}");
    // Not started again meanwhile.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let s = server(&gw, "rs").await;
    assert_eq!(
        (&s["breaker"], &s["connected"], &s["restarts"]),
        (&json!("open"), &json!(false), &json!(2)),
        "{s}"
    );
    // After the cooldown: started again, its handshake closes the breaker, calls work.
    let (worked, _) = until_it_works(
        &client,
        "rs__ok",
        json!({}),
        "fine",
        Duration::from_secs(30),
    )
    .await;
    assert!(
        worked.duration_since(opened) >= Duration::from_secs(3),
        "{:?}",
        worked.duration_since(opened)
    );
    let s = server(&gw, "rs").await;
    assert_eq!(
        (&s["breaker"], &s["restarts"]),
        (&json!("closed"), &json!(3)),
        "{s}"
    );
    assert!(
        gw.log.text().contains("ended 3 times in a row"),
        "{}",
        gw.log.text()
    );
}

/// Item 11: one upstream whose `tools/list` never answers costs its own tools only.
pub async fn a_hanging_tools_list_costs_its_own_tools_only() {
    let mut slow = upstream::rmcp();
    slow["env"]["GATEWAY_TEST_LIST"] = json!("hang");
    let config = json!({
        "mcpServers": {"rs": upstream::rmcp(), "slow": slow},
        "health": {"servers": {"slow": {"timeoutSeconds": 10}}},
    });
    let gw = Gateway::http(&config, &[]).await;
    let (client, _changes) = rmcp_http(gw.port).await;
    for round in 0..2 {
        let started = Instant::now();
        let names = list(&client).await;
        let took = started.elapsed();
        eprintln!(
            "figure: tools/list with a hanging upstream answered in {:.2} s",
            took.as_secs_f64()
        );
        assert!(names.iter().any(|n| n == "rs__ok"), "{names:?}");
        assert!(names.iter().all(|n| !n.starts_with("slow__")), "{names:?}");
        assert!(took < Duration::from_secs(3), "round {round}: {took:?}");
    }
}

/// Item 9: a tool, then a whole server, forced open for 2 s come back to hosts
/// (`list_changed`) when their time is over, with no call made.
pub async fn a_forced_open_tool_or_server_comes_back_when_its_time_is_over() {
    let dir = crate::support::scratch();
    let token_file = dir.join("token");
    std::fs::write(&token_file, "a-control-token-of-some-length\n").unwrap();
    let config = json!({"mcpServers": {"rs": upstream::rmcp()}});
    let gw = Gateway::http(
        &config,
        &["--control-token-file", token_file.to_str().unwrap()],
    )
    .await;
    let (client, changes) = rmcp_http(gw.port).await;
    assert!(list(&client).await.iter().any(|n| n == "rs__ok"));
    let auth = [("Authorization", "Bearer a-control-token-of-some-length")];
    for (what, path, gone) in [
        ("tool", "/v1/tools/rs__ok/force-open?seconds=2", "rs__ok"),
        ("server", "/v1/servers/rs/force-open?seconds=2", "rs__flaky"),
    ] {
        let before = changes.count();
        // Before the request: the 2 s run from when the gateway handles it, which is after
        // this and may be well before its answer reaches the test.
        let forced = Instant::now();
        let (status, body) = http(gw.port, "POST", path, &auth, "").await;
        assert_eq!(status, 200, "{body}");
        let (seen, names) = after_change(&client, &changes, before, "hidden", |n| {
            !n.iter().any(|t| t == gone)
        })
        .await;
        let _ = names;
        // No call from here on: the end of the 2 s alone tells the hosts.
        let (_, names) = after_change(&client, &changes, seen, "back", |n| {
            n.iter().any(|t| t == gone)
        })
        .await;
        let took = forced.elapsed();
        eprintln!(
            "figure: {what} forced open for 2 s listed again after {:.2} s",
            took.as_secs_f64()
        );
        assert!(
            took >= Duration::from_secs(2),
            "{what}: not before its time ({took:?})"
        );
        assert!(took < Duration::from_secs(8), "{what}: {took:?}");
        assert!(names.iter().any(|t| t == gone));
    }
}

/// A tool its server no longer lists is no longer known: `GET /v1/tools/{tool}` answers 404.
pub async fn a_tool_its_server_dropped_is_no_longer_known() {
    let config = json!({"mcpServers": {"rs": upstream::rmcp()}});
    let gw = Gateway::http(&config, &[]).await;
    let (client, changes) = rmcp_http(gw.port).await;
    assert!(list(&client).await.iter().any(|n| n == "rs__echo"));
    let (status, body) = gw.get("/v1/tools/rs__echo").await;
    assert_eq!(status, 200, "{body}");
    let before = changes.count();
    assert_eq!(
        text(&call(&client, "rs__drop_echo", json!({})).await.unwrap()),
        "echo dropped"
    );
    after_change(&client, &changes, before, "echo gone", |n| {
        !n.iter().any(|t| t == "rs__echo")
    })
    .await;
    let (status, body) = gw.get("/v1/tools/rs__echo").await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(server(&gw, "rs").await["tools_listed"], 8);
}
