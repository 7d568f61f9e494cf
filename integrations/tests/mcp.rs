//! rmcp 3.11 against a real MCP server, through `tool_health::mcp::ToolHealthClient`: the demo
//! server in-process over an in-memory pipe, and as a child process over stdio that is killed
//! (SIGKILL, from outside) mid-call and restarted. Each in-process behaviour runs twice: with a
//! `ToolHealthLayer` for the registry (the layer records the client's MCP span) and without one
//! (the client records itself). What every server must do (the official SDKs' and rmcp's) is in
//! `tests/mcp_sdk/`; these are the rmcp-only cases.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientRequest, ReadResourceRequest,
    ReadResourceRequestParams,
};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceError, ServiceExt};
use tokio::io::{AsyncBufReadExt, BufReader};
use tool_health::mcp::{
    is_refusal, is_refusal_error, server_registry, SchemaCheck, ToolHealthClient,
};
use tool_health::{BreakerState, ToolHealthLayer, ToolHealthRegistry};
use tool_health_integrations::mcp_demo::{self, Demo};
use tool_health_integrations::{calls, registry, subscriber};

fn params(tool: &'static str) -> CallToolRequestParams {
    CallToolRequestParams::new(tool)
}

fn with_args(tool: &'static str, args: serde_json::Value) -> CallToolRequestParams {
    match args {
        serde_json::Value::Object(map) => CallToolRequestParams::new(tool).with_arguments(map),
        _ => CallToolRequestParams::new(tool),
    }
}

/// A subscriber with a layer for `registry` as this thread's default, or none.
fn maybe_layer(
    with_layer: bool,
    registry: &Arc<ToolHealthRegistry>,
) -> Option<tracing::dispatcher::DefaultGuard> {
    with_layer.then(|| {
        tracing::dispatcher::set_default(&subscriber(ToolHealthLayer::new(registry.clone())))
    })
}

fn is_tool_error(r: &Result<CallToolResult, ServiceError>) -> bool {
    matches!(r, Ok(r) if r.is_error == Some(true) && !is_refusal(r))
}

#[tokio::test]
async fn json_rpc_errors_trip_and_arguments_rmcp_refuses_are_the_callers() {
    for with_layer in [true, false] {
        let (_clock, registry) = registry(3);
        let _guard = maybe_layer(with_layer, &registry);
        let server = Demo::new();
        let (task, running) = mcp_demo::in_process(server.clone()).await.expect("serve");
        let client = ToolHealthClient::new(running.peer().clone(), registry.clone())
            .server("demo")
            .schema_check(SchemaCheck::Off);

        let ok = client.call_tool(params("ok")).await;
        assert!(matches!(&ok, Ok(r) if r.is_error == Some(false)), "{ok:?}");
        assert_eq!(
            calls(&registry, "demo/ok"),
            (1, 0, 0, 0),
            "layer: {with_layer}"
        );

        // JSON-RPC errors (-32603): the tool's failures.
        for _ in 0..3 {
            let r = client.call_tool(params("err")).await;
            assert!(
                matches!(&r, Err(ServiceError::McpError(e)) if e.code.0 == -32603),
                "{r:?}"
            );
        }
        assert_eq!(
            calls(&registry, "demo/err"),
            (0, 3, 0, 0),
            "layer: {with_layer}"
        );
        assert_eq!(registry.breaker_state("demo/err"), BreakerState::Open);
        let refused = client.call_tool(params("err")).await.expect("soft");
        assert!(is_refusal(&refused));
        assert_eq!(
            server.calls("err"),
            3,
            "a refused call never reaches the server"
        );
        assert_eq!(
            client.server_state(),
            BreakerState::Closed,
            "the server answered"
        );

        // rmcp answers arguments it cannot deserialize with isError: true (as the MCP
        // specification asks): the caller's, recognised by its text, never a failure.
        for _ in 0..5 {
            let bad = client
                .call_tool(with_args("add", serde_json::json!({"a": "one", "b": 2})))
                .await;
            assert!(is_tool_error(&bad), "{bad:?}");
        }
        let good = client
            .call_tool(with_args("add", serde_json::json!({"a": 1, "b": 2})))
            .await;
        assert!(
            matches!(&good, Ok(r) if r.is_error == Some(false)),
            "{good:?}"
        );
        assert_eq!(
            calls(&registry, "demo/add"),
            (1, 0, 5, 0),
            "layer: {with_layer}"
        );
        assert_eq!(registry.breaker_state("demo/add"), BreakerState::Closed);

        // The server task is gone: transport failures are the server's, not the tools'.
        task.abort();
        let _ = task.await;
        for _ in 0..3 {
            let r = client.call_tool(params("ok")).await;
            assert!(matches!(r, Err(ServiceError::TransportClosed)), "{r:?}");
        }
        assert_eq!(
            calls(&registry, "demo/ok"),
            (1, 0, 0, 0),
            "layer: {with_layer}"
        );
        assert_eq!(client.server_state(), BreakerState::Open);
        let r = client.call_tool(params("ok")).await.expect("soft");
        assert!(is_refusal(&r), "{r:?}");
        let _ = running.cancel().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_server_that_never_answers_times_out_and_a_dropped_call_gives_its_probe_back() {
    // Paused tokio time: the runtime jumps to the next timer whenever every task waits, so a
    // 10 s timeout takes no real time. The breaker runs on the registry's manual clock.
    for with_layer in [true, false] {
        let (clock, registry) = registry(2);
        let _guard = maybe_layer(with_layer, &registry);
        let server = Demo::new();
        let (task, running) = mcp_demo::in_process(server.clone()).await.expect("serve");
        let client = ToolHealthClient::new(running.peer().clone(), registry.clone())
            .server("demo")
            .timeout(Duration::from_secs(10));
        for _ in 0..2 {
            let r = client.call_tool(params("hang")).await;
            assert!(matches!(r, Err(ServiceError::Timeout { .. })), "{r:?}");
        }
        assert_eq!(
            calls(&registry, "demo/hang"),
            (0, 2, 0, 0),
            "layer: {with_layer}"
        );
        assert_eq!(registry.breaker_state("demo/hang"), BreakerState::Open);
        // The server answered the ping after each timeout: a hanging tool, not a dead server.
        assert_eq!(client.server_state(), BreakerState::Closed);

        // After the cooldown the next call holds the probe; its caller gives up (an outer
        // timeout drops the call): a cancellation, no verdict, and the probe comes back at once.
        clock.advance(Duration::from_secs(30));
        let dropped =
            tokio::time::timeout(Duration::from_secs(1), client.call_tool(params("hang"))).await;
        assert!(dropped.is_err(), "the outer timeout fired first");
        assert_eq!(server.calls("hang"), 3);
        assert_eq!(
            calls(&registry, "demo/hang"),
            (0, 2, 0, 0),
            "layer: {with_layer}"
        );
        let cancelled = registry
            .snapshot("demo/hang")
            .expect("tracked")
            .cancelled_count;
        assert_eq!(
            cancelled, 1,
            "layer: {with_layer}: the dropped call is a cancellation"
        );
        assert!(
            registry.is_tool_available("demo/hang"),
            "layer: {with_layer}: the probe was not given back"
        );
        task.abort();
        let _ = running.cancel().await;
    }
}

/// `request` (any request but a tool's call) goes through the server's breaker: an answer, a
/// JSON-RPC error too, is the server answering; a closed connection is its failure; no tool
/// counts either. While the breaker refuses nothing is sent (a refusal error, retry time in
/// `data`), and once the cooldown is over a `ping` probes the server before the request.
#[tokio::test]
async fn a_request_other_than_a_call_counts_for_the_server_only_and_is_refused_while_it_refuses() {
    for with_layer in [true, false] {
        let (clock, registry) = registry(3);
        let _guard = maybe_layer(with_layer, &registry);
        let (task, running) = mcp_demo::in_process(Demo::new()).await.expect("serve");
        let client = ToolHealthClient::new(running.peer().clone(), registry.clone()).server("demo");
        let servers = server_registry(&registry);
        let read = || {
            ClientRequest::ReadResourceRequest(ReadResourceRequest::new(
                ReadResourceRequestParams::new("demo://nothing"),
            ))
        };

        // The demo has no resources: its JSON-RPC error is an answer.
        let r = client.request(read()).await;
        assert!(
            matches!(&r, Err(ServiceError::McpError(e)) if !is_refusal_error(e)),
            "{r:?}"
        );
        let demo = servers.snapshot("demo").expect("tracked");
        assert_eq!((demo.success_count, demo.failure_count), (1, 0));

        // The server gone: each request a failure of the server's, the third opens its breaker.
        task.abort();
        let _ = task.await;
        for _ in 0..3 {
            let r = client.request(read()).await;
            assert!(matches!(r, Err(ServiceError::TransportClosed)), "{r:?}");
        }
        assert_eq!(client.server_state(), BreakerState::Open);
        let r = client.request(read()).await;
        let Err(ServiceError::McpError(refused)) = r else {
            panic!("refused: {r:?}");
        };
        assert!(is_refusal_error(&refused), "{refused:?}");
        assert!(
            refused.message.contains("resources/read") && refused.message.contains("demo"),
            "{refused:?}"
        );
        assert_eq!(refused.data.as_ref().unwrap()["retryAfterMs"], 30_000);
        // Nothing sent: the refusal is not a fourth failure.
        assert_eq!(servers.snapshot("demo").expect("tracked").failure_count, 3);
        // No tool: neither the client nor the layer made an entry for a request.
        assert!(registry.snapshot("demo/resources/read").is_none());
        assert!(registry.snapshot("resources/read").is_none());

        // A new server after the cooldown: a ping probes it, then the request is sent.
        let (task, restarted) = mcp_demo::in_process(Demo::new()).await.expect("serve");
        let client = client.with_peer(restarted.peer().clone());
        clock.advance(Duration::from_secs(30));
        let r = client.request(read()).await;
        assert!(
            matches!(&r, Err(ServiceError::McpError(e)) if !is_refusal_error(e)),
            "layer: {with_layer}: {r:?}"
        );
        assert_eq!(client.server_state(), BreakerState::Closed);
        // The first read, the ping and the read after it.
        assert_eq!(servers.snapshot("demo").expect("tracked").success_count, 3);
        task.abort();
        let _ = restarted.cancel().await;
        let _ = running.cancel().await;
    }
}

/// The demo server as a child process over stdio: the client, its pid, and its stderr.
async fn spawn_server() -> (
    RunningService<RoleClient, ()>,
    u32,
    tokio::io::Lines<BufReader<tokio::process::ChildStderr>>,
) {
    let command = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-demo-server"));
    let (transport, stderr) = TokioChildProcess::builder(command)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the server");
    let pid = transport.id().expect("pid");
    let running = ().serve(transport).await.expect("handshake");
    let stderr = BufReader::new(stderr.expect("piped stderr")).lines();
    (running, pid, stderr)
}

#[tokio::test]
async fn a_server_killed_from_outside_opens_its_breaker_and_a_restarted_one_gets_one_ping() {
    let (clock, registry) = registry(3);
    let _guard = maybe_layer(true, &registry);
    let (running, pid, mut stderr) = spawn_server().await;
    let client = ToolHealthClient::new(running.peer().clone(), registry.clone()).server("demo");
    let ok = client.call_tool(params("ok")).await;
    assert!(matches!(&ok, Ok(r) if r.is_error == Some(false)), "{ok:?}");

    // SIGKILL the server while a call is in flight.
    let in_flight = tokio::spawn({
        let client = client.clone();
        async move { client.call_tool(params("hang")).await }
    });
    loop {
        let line = stderr
            .next_line()
            .await
            .expect("stderr")
            .expect("server alive");
        if line.contains("hang started") {
            break;
        }
    }
    let killed = std::process::Command::new("bash")
        .args(["-c", &format!("kill -9 {pid}")])
        .status()
        .expect("kill");
    assert!(killed.success());
    let r = in_flight.await.expect("task");
    assert!(matches!(r, Err(ServiceError::TransportClosed)), "{r:?}");
    for _ in 0..2 {
        let r = client.call_tool(params("ok")).await;
        assert!(matches!(r, Err(ServiceError::TransportClosed)), "{r:?}");
    }
    // Three transport failures: the server's breaker opens; no tool counts them.
    assert_eq!(client.server_state(), BreakerState::Open);
    let servers = server_registry(&registry);
    assert_eq!(servers.snapshot("demo").expect("tracked").failure_count, 3);
    // `hang` is a listed tool (declared, so tracked from the list on), and counts nothing.
    assert_eq!(calls(&registry, "demo/hang"), (0, 0, 0, 0));
    assert_eq!(calls(&registry, "demo/ok"), (1, 0, 0, 0));

    // Restarted: a new process, same breakers. Refused until the cooldown, then exactly one
    // ping probes the server (the call beside it is refused) and the call goes through.
    let (restarted, _pid, _stderr) = spawn_server().await;
    let client = client.with_peer(restarted.peer().clone());
    assert!(is_refusal(
        &client.call_tool(params("ok")).await.expect("soft")
    ));
    clock.advance(Duration::from_secs(30));
    let (a, b) = tokio::join!(
        client.call_tool(params("ok")),
        client.call_tool(params("ok"))
    );
    let (a, b) = (a.expect("probe"), b.expect("soft"));
    assert_eq!(
        a.is_error,
        Some(false),
        "the call reached the restarted server"
    );
    assert!(is_refusal(&b), "one probe");
    assert_eq!(client.server_state(), BreakerState::Closed);
    // Answers: the tool list and `ok` before the kill; the ping, the list read again for the
    // new process (its schemas) and `ok` after.
    assert_eq!(servers.snapshot("demo").expect("tracked").success_count, 5);
    assert_eq!(calls(&registry, "demo/ok"), (2, 0, 0, 0));
    let _ = restarted.cancel().await;
    let _ = running.cancel().await;
}

#[tokio::test]
async fn a_filtered_out_mcp_span_inside_another_tool_span_is_still_recorded_once_under_its_name() {
    use tracing_subscriber::layer::SubscriberExt;
    let (_clock, registry) = registry(3);
    // A global filter drops the client's `tools/call` span; the agent's own tool span stays.
    let dispatch = tracing::Dispatch::new(
        tracing_subscriber::registry()
            .with(tracing_subscriber::filter::filter_fn(|meta| {
                meta.name() != "tools/call"
            }))
            .with(ToolHealthLayer::new(registry.clone())),
    );
    let _guard = tracing::dispatcher::set_default(&dispatch);
    let (task, running) = mcp_demo::in_process(Demo::new()).await.expect("serve");
    let client = ToolHealthClient::new(running.peer().clone(), registry.clone()).server("demo");
    let outer = tracing::info_span!(
        "execute_tool research",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = "research",
    );
    {
        use tracing::Instrument;
        let r = client
            .call_tool(params("ok"))
            .instrument(outer.clone())
            .await;
        assert!(matches!(&r, Ok(r) if r.is_error == Some(false)), "{r:?}");
    }
    drop(outer);
    // Recorded by the client itself, under its own name; the outer span keeps its own record.
    assert_eq!(calls(&registry, "demo/ok"), (1, 0, 0, 0));
    assert_eq!(calls(&registry, "research"), (1, 0, 0, 0));
    task.abort();
    let _ = running.cancel().await;
}
