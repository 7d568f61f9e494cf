//! What must hold against every server (the list of issue 19, "Tests against the real
//! servers"): counts, breaker states, what the server saw and what the model got.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::ServiceError;
use tokio::sync::mpsc;
use tool_health::mcp::{
    is_invalid_arguments, is_refusal, server_registry, HiddenBy, SchemaCheck, ToolsChanged,
};
use tool_health::{BreakerState, ToolHealthLayer, ToolHealthRegistry, REFUSAL_MESSAGE};
use tool_health_integrations::mcp_servers::Sdk;
use tool_health_integrations::{calls, registry, subscriber};
use tracing_subscriber::layer::SubscriberExt;

use super::fixture::{text, Target, NAME};
use super::spans::SpanLog;

/// How long a test waits for a real process or a callback (never for breaker time).
const PATIENCE: Duration = Duration::from_secs(20);

fn params(tool: &'static str) -> CallToolRequestParams {
    CallToolRequestParams::new(tool)
}

fn with_args(tool: &'static str, args: serde_json::Value) -> CallToolRequestParams {
    match args {
        serde_json::Value::Object(map) => CallToolRequestParams::new(tool).with_arguments(map),
        _ => panic!("arguments are an object"),
    }
}

fn key(tool: &str) -> String {
    format!("{NAME}/{tool}")
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

/// A span log (and, with `with_layer`, the registry's layer) as this thread's default.
fn span_log(
    with_layer: Option<&Arc<ToolHealthRegistry>>,
) -> (SpanLog, tracing::dispatcher::DefaultGuard) {
    let log = SpanLog::new();
    let dispatch = match with_layer {
        Some(registry) => tracing::Dispatch::new(
            tracing_subscriber::registry()
                .with(log.clone())
                .with(ToolHealthLayer::new(registry.clone())),
        ),
        None => tracing::Dispatch::new(tracing_subscriber::registry().with(log.clone())),
    };
    let guard = tracing::dispatcher::set_default(&dispatch);
    (log, guard)
}

fn is_tool_error(r: &CallToolResult) -> bool {
    r.is_error == Some(true) && !is_refusal(r) && !is_invalid_arguments(r)
}

fn is_success(r: &CallToolResult) -> bool {
    r.is_error != Some(true)
}

fn is_transport_failure(r: &Result<CallToolResult, ServiceError>) -> bool {
    matches!(
        r,
        Err(ServiceError::TransportClosed | ServiceError::TransportSend(_))
    )
}

/// The next change a subscription reported, waiting for it (a real wait: the timer task).
async fn next_change(rx: &mut mpsc::UnboundedReceiver<ToolsChanged>) -> ToolsChanged {
    tokio::time::timeout(PATIENCE, rx.recv())
        .await
        .expect("a change within the patience")
        .expect("the subscription is alive")
}

/// A raising tool trips after three failures; the fourth call is refused without reaching the
/// server, and the model reads why and when.
pub async fn a_raising_tool_trips(target: Target) {
    for with_layer in [true, false] {
        let (_clock, registry) = registry(3);
        let _guard = maybe_layer(with_layer, &registry);
        let server = target.start().await;
        let client = server.client(&registry);
        for _ in 0..3 {
            let r = client.call_tool(params("flaky")).await.expect("answered");
            assert!(is_tool_error(&r), "{r:?}");
            assert_eq!(text(&r), target.raised_text(), "what the model got");
        }
        assert_eq!(registry.breaker_state(&key("flaky")), BreakerState::Open);
        let refused = client.call_tool(params("flaky")).await.expect("soft");
        assert!(is_refusal(&refused), "{refused:?}");
        let said = text(&refused);
        assert!(said.starts_with(REFUSAL_MESSAGE), "{said}");
        assert!(
            said.contains("tool `flaky` was not called: it keeps failing")
                && said.contains("retry in 30.0 s"),
            "{said}"
        );
        assert_eq!(
            calls(&registry, &key("flaky")),
            (0, 3, 0, 1),
            "layer: {with_layer}"
        );
        assert_eq!(
            server.seen().await.tool("flaky"),
            3,
            "the refusal never reached it"
        );
        assert_eq!(
            client.server_state(),
            BreakerState::Closed,
            "the server answered"
        );
        // The other listed tools are declared (tracked from the list on) and count nothing.
        let others: Vec<_> = registry
            .health_summary()
            .into_iter()
            .filter(|s| s.tool != key("flaky"))
            .filter(|s| calls(&registry, &s.tool) != (0, 0, 0, 0))
            .map(|s| s.tool)
            .collect();
        assert!(others.is_empty(), "only flaky counts calls: {others:?}");
    }
}

/// With the argument check (lax, the default), ten wrongly typed calls never reach the server
/// and record nothing; a valid call right after succeeds. A string that reads as an integer
/// goes through (the Python SDK accepts it); the strict check refuses it.
pub async fn wrong_types_never_reach_the_server(target: Target) {
    let (_clock, registry) = registry(3);
    let server = target.start().await;
    let client = server.client(&registry);
    for _ in 0..10 {
        let r = client
            .call_tool(with_args(
                "needs_int",
                serde_json::json!({"n": "twenty-one"}),
            ))
            .await
            .expect("soft");
        assert!(is_invalid_arguments(&r), "{r:?}");
        assert!(
            text(&r).contains(r#"/n: "twenty-one" is not of type "integer""#),
            "names what is wrong: {}",
            text(&r)
        );
    }
    let missing = client
        .call_tool(with_args("needs_int", serde_json::json!({})))
        .await
        .expect("soft");
    assert!(
        text(&missing).contains(r#""n" is a required property"#),
        "{missing:?}"
    );
    assert_eq!(
        calls(&registry, &key("needs_int")),
        (0, 0, 0, 0),
        "nothing recorded"
    );
    assert_eq!(server.seen().await.tool("needs_int"), 0, "nothing sent");

    let good = client
        .call_tool(with_args("needs_int", serde_json::json!({"n": 21})))
        .await
        .expect("answered");
    assert!(is_success(&good), "{good:?}");
    assert_eq!(text(&good), "twice 21 is 42");
    assert_eq!(calls(&registry, &key("needs_int")), (1, 0, 0, 0));

    // Lax lets "21" through: never refuse what a server would accept.
    let lax = client
        .call_tool(with_args("needs_int", serde_json::json!({"n": "21"})))
        .await;
    match target.sdk() {
        Some(Sdk::Python) => {
            let r = lax.expect("answered");
            assert_eq!(text(&r), "twice 21 is 42", "pydantic's lax mode accepts it");
            assert_eq!(calls(&registry, &key("needs_int")), (2, 0, 0, 0));
        }
        Some(Sdk::TypeScriptOld) => {
            assert!(
                matches!(&lax, Err(ServiceError::McpError(e)) if e.code.0 == -32602),
                "{lax:?}"
            );
            assert_eq!(
                calls(&registry, &key("needs_int")),
                (1, 0, 1, 0),
                "the caller's"
            );
        }
        _ => {
            let r = lax.expect("answered");
            assert!(is_tool_error(&r), "{r:?}");
            assert_eq!(
                calls(&registry, &key("needs_int")),
                (1, 0, 1, 0),
                "the caller's"
            );
        }
    }
    // rmcp's demo counts the calls its tools ran: one its argument wrapper refused never ran.
    let ran = if target.sdk().is_none() { 1 } else { 2 };
    assert_eq!(server.seen().await.tool("needs_int"), ran);

    let strict = client.clone().schema_check(SchemaCheck::Strict);
    let r = strict
        .call_tool(with_args("needs_int", serde_json::json!({"n": "21"})))
        .await
        .expect("soft");
    assert!(is_invalid_arguments(&r), "{r:?}");
    assert_eq!(
        server.seen().await.tool("needs_int"),
        ran,
        "strict: not sent"
    );
    assert_eq!(
        registry.breaker_state(&key("needs_int")),
        BreakerState::Closed
    );
}

/// With the check off, the SDK answers ten wrongly typed calls itself: classified as the
/// caller's (ignored), never a failure, the breaker stays closed and a valid call succeeds.
pub async fn wrong_types_with_the_check_off_are_the_callers(target: Target) {
    for with_layer in [true, false] {
        let (_clock, registry) = registry(3);
        let _guard = maybe_layer(with_layer, &registry);
        let server = target.start().await;
        let client = server.client(&registry).schema_check(SchemaCheck::Off);
        for _ in 0..10 {
            let r = client
                .call_tool(with_args(
                    "needs_int",
                    serde_json::json!({"n": "twenty-one"}),
                ))
                .await;
            assert_sdk_invalid_arguments(&target, &r);
        }
        let r = client
            .call_tool(with_args("needs_int", serde_json::json!({})))
            .await;
        assert_sdk_invalid_arguments(&target, &r);
        assert_eq!(
            calls(&registry, &key("needs_int")),
            (0, 0, 11, 0),
            "layer: {with_layer}"
        );
        assert_eq!(
            registry.breaker_state(&key("needs_int")),
            BreakerState::Closed
        );
        let good = client
            .call_tool(with_args("needs_int", serde_json::json!({"n": 21})))
            .await
            .expect("answered");
        assert_eq!(text(&good), "twice 21 is 42");
        assert_eq!(calls(&registry, &key("needs_int")), (1, 0, 11, 0));
        // rmcp's demo counts the calls its tools ran (its argument wrapper refused the others).
        let reached = if target.sdk().is_none() { 1 } else { 12 };
        assert_eq!(
            server.seen().await.tool("needs_int"),
            reached,
            "all reached the server"
        );
    }
}

/// What each SDK answers to invalid arguments (the texts docs/mcp.md tabulates).
fn assert_sdk_invalid_arguments(target: &Target, r: &Result<CallToolResult, ServiceError>) {
    match target.sdk() {
        Some(Sdk::TypeScriptOld) => assert!(
            matches!(r, Err(ServiceError::McpError(e)) if e.code.0 == -32602
                && e.message.starts_with("MCP error -32602: Invalid arguments for tool needs_int: [")),
            "{r:?}"
        ),
        sdk => {
            let r = r.as_ref().expect("an isError result");
            assert!(is_tool_error(r), "{r:?}");
            let prefix = match sdk {
                Some(Sdk::Python) => {
                    "Error executing tool needs_int: 1 validation error for needs_intArguments\nn\n"
                }
                Some(_) => {
                    "MCP error -32602: Input validation error: Invalid arguments for tool needs_int: "
                }
                None => "failed to deserialize parameters: ",
            };
            assert!(text(r).starts_with(prefix), "{:?}", text(r));
        }
    }
}

/// Ten calls to tools the server does not have create no registry entry (with the layer and
/// without). A client that knows the server's list answers them itself, `-32602` naming the
/// tool as the model called it, and sends nothing; one that does not (no argument check, no
/// list read) sends them, and the SDKs' answers count for the server as answers.
pub async fn unknown_tools_create_no_entry(target: Target) {
    for with_layer in [true, false] {
        let (_clock, registry) = registry(3);
        let _guard = maybe_layer(with_layer, &registry);
        let server = target.start().await;
        let client = server.client(&registry);
        client.list_all_tools().await.expect("listed");
        for i in 0..10 {
            let name = format!("no_such_tool_{i}");
            match client
                .call_tool(CallToolRequestParams::new(name.clone()))
                .await
            {
                Err(ServiceError::McpError(e)) => {
                    assert_eq!(e.code.0, -32602);
                    assert_eq!(
                        e.message,
                        format!(
                            "unknown tool `{name}`: it is not in tools/list (it was not called)"
                        )
                    );
                }
                r => panic!("{} answered {r:?}", target.name()),
            }
            assert!(
                registry.snapshot(&key(&name)).is_none(),
                "no entry for {name}"
            );
        }
        let seen = server.seen().await;
        if seen.methods.is_some() {
            let unknown: u64 = (0..10)
                .map(|i| seen.tool(&format!("no_such_tool_{i}")))
                .sum();
            assert_eq!(unknown, 0, "nothing was sent");
        }
        let client = server.client(&registry).schema_check(SchemaCheck::Off);
        for i in 0..10 {
            let name = format!("no_such_tool_{i}");
            let r = client
                .call_tool(CallToolRequestParams::new(name.clone()))
                .await;
            match (target.sdk(), &r) {
                (Some(Sdk::Python), Ok(r)) => assert_eq!(text(r), format!("Unknown tool: {name}")),
                (Some(Sdk::TypeScript), Ok(r)) => {
                    assert_eq!(text(r), format!("MCP error -32602: Tool {name} not found"));
                }
                (Some(Sdk::TypeScriptOld), Err(ServiceError::McpError(e))) => {
                    assert_eq!(e.code.0, -32602);
                    assert_eq!(
                        e.message,
                        format!("MCP error -32602: Tool {name} not found")
                    );
                }
                (None, Err(ServiceError::McpError(e))) => {
                    assert_eq!((e.code.0, &*e.message), (-32602, "tool not found"));
                }
                (_, r) => panic!("{} answered {r:?}", target.name()),
            }
            assert!(
                registry.snapshot(&key(&name)).is_none(),
                "no entry for {name}"
            );
        }
        // The only entries are the server's own tools, declared from its list.
        assert_eq!(
            registry.tracked_tools(),
            registry.declared_tools(),
            "layer: {with_layer}"
        );
        assert!(
            registry
                .health_summary()
                .iter()
                .all(|s| !s.tool.contains("no_such_tool")
                    && calls(&registry, &s.tool) == (0, 0, 0, 0))
        );
        let seen = server.seen().await;
        if seen.methods.is_some() {
            let unknown: u64 = (0..10)
                .map(|i| seen.tool(&format!("no_such_tool_{i}")))
                .sum();
            assert_eq!(unknown, 10, "every call reached the server");
        }
        let server_entry = server_registry(&registry).snapshot(NAME).expect("tracked");
        assert_eq!(
            (
                server_entry.failure_count,
                server_entry.consecutive_failures
            ),
            (0, 0),
            "an answer is the server's success"
        );
    }
}

/// A hanging tool times out, trips its own breaker and no other: the `ping` after each
/// timeout is answered, so the server stays closed and a sibling keeps working.
pub async fn a_hanging_tool_trips_itself_not_its_siblings(target: Target) {
    let (_clock, registry) = registry(3);
    let (log, _guard) = span_log(None);
    let server = target.start().await;
    let client = server.client(&registry);
    // The first call reads the schemas with the normal timeout; then the short one for hang.
    let ok = client.call_tool(params("ok")).await.expect("answered");
    assert!(is_success(&ok));
    let hasty = client.clone().timeout(Duration::from_millis(1500));
    for _ in 0..3 {
        let r = hasty.call_tool(params("hang")).await;
        assert!(matches!(r, Err(ServiceError::Timeout { .. })), "{r:?}");
    }
    assert_eq!(calls(&registry, &key("hang")), (0, 3, 0, 0));
    assert_eq!(registry.breaker_state(&key("hang")), BreakerState::Open);
    assert_eq!(client.server_state(), BreakerState::Closed);
    let refused = hasty.call_tool(params("hang")).await.expect("soft");
    assert!(is_refusal(&refused), "{refused:?}");
    for _ in 0..2 {
        let ok = client.call_tool(params("ok")).await.expect("answered");
        assert!(is_success(&ok), "the sibling works");
    }
    assert_eq!(calls(&registry, &key("ok")), (3, 0, 0, 0));
    let pings = log.named("ping");
    assert_eq!(pings.len(), 3, "one ping after each timeout");
    assert!(
        pings.iter().all(|p| p.get("error.type").is_none()),
        "{pings:?}"
    );
    let seen = server.seen().await;
    assert_eq!((seen.tool("hang"), seen.tool("ok")), (3, 3));
    if let Some(p) = seen.method("ping") {
        assert_eq!(p, 3, "the server saw the pings");
    }
    let server_entry = server_registry(&registry).snapshot(NAME).expect("tracked");
    assert_eq!(server_entry.failure_count, 0);
}

/// A server killed mid-call opens the server breaker after three transport failures (none
/// recorded against a tool); every tool of it is then refused at once, and nothing reaches the
/// restarted server until the cooldown ends; then one `ping` probes and the tools come back.
pub async fn a_killed_server_is_refused_as_a_whole_and_recovers_through_one_ping(target: Target) {
    let (clock, registry) = registry(3);
    let (log, _guard) = span_log(Some(&registry));
    let server = target.start().await;
    let client = server.client(&registry);
    let (tx, mut changes) = mpsc::unbounded_channel();
    let _subscription = client
        .on_tools_changed(move |c| {
            let _ = tx.send(c.clone());
        })
        .expect("in a runtime");
    assert!(is_success(
        &client.call_tool(params("ok")).await.expect("answered")
    ));

    let died = client.call_tool(params("die")).await;
    assert!(
        is_transport_failure(&died),
        "the process died mid-call: {died:?}"
    );
    for tool in ["ok", "needs_int"] {
        let r = client
            .call_tool(match tool {
                "ok" => params("ok"),
                _ => with_args("needs_int", serde_json::json!({"n": 2})),
            })
            .await;
        assert!(is_transport_failure(&r), "{tool}: {r:?}");
    }
    assert_eq!(client.server_state(), BreakerState::Open);
    let servers = server_registry(&registry);
    let entry = servers.snapshot(NAME).expect("tracked");
    assert_eq!((entry.failure_count, entry.consecutive_failures), (3, 3));
    assert_eq!(
        next_change(&mut changes).await,
        ToolsChanged::Hidden {
            tool: None,
            retry_after: Duration::from_secs(30)
        }
    );
    // Transport failures are the server's: no tool counts them.
    assert_eq!(calls(&registry, &key("ok")), (1, 0, 0, 0));
    // Listed tools are declared (tracked from the list on); neither counts anything.
    assert_eq!(calls(&registry, &key("die")), (0, 0, 0, 0));
    assert_eq!(calls(&registry, &key("needs_int")), (0, 0, 0, 0));
    assert!(
        registry.unavailable_tools().is_empty(),
        "the server is no tool"
    );
    assert!(registry.health_summary().iter().all(|s| s.tool != NAME));

    // Restarted, and still refused as a whole until the cooldown ends: nothing is sent.
    let restarted = target.start().await;
    let client = client
        .with_peer(restarted.running.peer().clone())
        .transport(restarted.transport.clone());
    for tool in ["ok", "flaky", "hang", "needs_int"] {
        let r = client
            .call_tool(CallToolRequestParams::new(tool))
            .await
            .expect("soft");
        assert!(is_refusal(&r), "{r:?}");
        assert!(
            text(&r).contains("MCP server `fixture` is not answering"),
            "names the server: {}",
            text(&r)
        );
    }
    let listed = client.list_tools(None).await.expect("answered locally");
    assert!(listed.result.tools.is_empty());
    assert!(listed.hidden.iter().all(|h| h.by == HiddenBy::Server));
    assert!(
        listed.hidden.iter().any(|h| h.name == "flaky"),
        "{:?}",
        listed.hidden
    );
    let seen = restarted.seen().await;
    assert_eq!(
        seen.tools.values().sum::<u64>(),
        0,
        "nothing reached it: {seen:?}"
    );
    if let Some(ping) = seen.method("ping") {
        assert_eq!(ping, 0);
    }
    let pings_before = log.named("ping").len();

    clock.advance(Duration::from_secs(30));
    assert_eq!(
        next_change(&mut changes).await,
        ToolsChanged::Listed { tool: None },
        "the cooldown's end, with no call"
    );
    // One ping probes; the call beside it is refused while it is in flight.
    let (a, b) = tokio::join!(
        client.call_tool(params("ok")),
        client.call_tool(params("ok"))
    );
    let (a, b) = (a.expect("answered"), b.expect("soft"));
    assert!(is_success(&a), "{a:?}");
    assert!(is_refusal(&b), "{b:?}");
    assert_eq!(
        log.named("ping").len(),
        pings_before + 1,
        "exactly one ping"
    );
    assert_eq!(client.server_state(), BreakerState::Closed);
    let seen = restarted.seen().await;
    assert_eq!(seen.tool("ok"), 1);
    if let Some(ping) = seen.method("ping") {
        assert_eq!(ping, 1, "the server saw one ping");
    }
    // Its tools are back.
    assert!(is_success(
        &client.call_tool(params("ok")).await.expect("answered")
    ));
    let r = client
        .call_tool(with_args("needs_int", serde_json::json!({"n": 4})))
        .await
        .expect("answered");
    assert_eq!(text(&r), "twice 4 is 8");
    assert_eq!(calls(&registry, &key("ok")), (3, 0, 0, 0));
}

/// `list_tools` hides an open tool; the subscription hears it open, then hears the cooldown's
/// end with no call made in between; the tool is listed again and the next call probes and
/// closes it.
pub async fn list_tools_hides_an_open_tool_until_its_cooldown_ends(target: Target) {
    let (clock, registry) = registry(3);
    let server = target.start().await;
    let client = server.client(&registry);
    let (tx, mut changes) = mpsc::unbounded_channel();
    let _subscription = client
        .on_tools_changed(move |c| {
            let _ = tx.send(c.clone());
        })
        .expect("in a runtime");
    let listed = client.list_tools(None).await.expect("listed");
    assert!(listed.hidden.is_empty());
    assert!(listed.result.tools.iter().any(|t| t.name == "flaky"));
    let all = listed.result.tools.len();

    for _ in 0..3 {
        assert!(is_tool_error(
            &client.call_tool(params("flaky")).await.expect("answered")
        ));
    }
    assert_eq!(
        next_change(&mut changes).await,
        ToolsChanged::Hidden {
            tool: Some("flaky".into()),
            retry_after: Duration::from_secs(30)
        }
    );
    let listed = client.list_tools(None).await.expect("listed");
    assert_eq!(listed.result.tools.len(), all - 1);
    assert!(listed.result.tools.iter().all(|t| t.name != "flaky"));
    assert_eq!(listed.hidden.len(), 1);
    let hidden = &listed.hidden[0];
    assert_eq!(
        (&*hidden.name, &*hidden.key, hidden.by, hidden.retry_after),
        (
            "flaky",
            "fixture/flaky",
            HiddenBy::Tool,
            Duration::from_secs(30)
        )
    );
    assert_eq!(hidden.until, registry.now() + Duration::from_secs(30));

    server.mend().await;
    let before = server.seen().await;
    clock.advance(Duration::from_secs(30));
    assert_eq!(
        next_change(&mut changes).await,
        ToolsChanged::Listed {
            tool: Some("flaky".into())
        }
    );
    assert_eq!(server.seen().await, before, "no call was made in between");
    let listed = client.list_tools(None).await.expect("listed");
    assert!(listed.hidden.is_empty());
    assert_eq!(listed.result.tools.len(), all);

    // The next call is the probe; it succeeds and closes the breaker.
    assert_eq!(registry.breaker_state(&key("flaky")), BreakerState::Open);
    let probe = client.call_tool(params("flaky")).await.expect("answered");
    assert_eq!(text(&probe), "flaky works");
    assert_eq!(registry.breaker_state(&key("flaky")), BreakerState::Closed);
    assert_eq!(calls(&registry, &key("flaky")), (1, 3, 0, 0));
    assert_eq!(server.seen().await.tool("flaky"), 4);
    assert!(changes.try_recv().is_err(), "nothing else changed");
}

/// The client span carries the MCP conventions' attributes.
pub async fn the_span_carries_the_mcp_attributes(target: Target) {
    let (_clock, registry) = registry(3);
    let (log, _guard) = span_log(Some(&registry));
    let server = target.start().await;
    let client = server.client(&registry);
    assert!(is_success(
        &client.call_tool(params("ok")).await.expect("answered")
    ));
    assert!(is_tool_error(
        &client.call_tool(params("flaky")).await.expect("answered")
    ));
    // Sent (no list known), the server's answer to an unknown tool.
    let unchecked = server.client(&registry).schema_check(SchemaCheck::Off);
    let _ = unchecked.call_tool(params("no_such_tool")).await;
    // Answered by the client itself: the call is in the trace all the same, saying what
    // happened, and no feed records it.
    let r = client.call_tool(params("made_up")).await;
    assert!(
        matches!(&r, Err(ServiceError::McpError(e)) if e.code.0 == -32602),
        "{r:?}"
    );
    let r = client
        .call_tool(with_args(
            "needs_int",
            serde_json::json!({"n": "twenty-one"}),
        ))
        .await
        .expect("answered");
    assert!(is_invalid_arguments(&r), "{r:?}");
    let spans = log.named("tools/call");
    assert_eq!(spans.len(), 5, "{spans:?}");
    for (span, tool, answer, error_type) in [
        (&spans[3], "made_up", "unknown_tool", "-32602"),
        (
            &spans[4],
            "needs_int",
            "invalid_arguments",
            "invalid_arguments",
        ),
    ] {
        assert_eq!(span.get("gen_ai.tool.name"), Some(&*key(tool)));
        assert_eq!(span.get("tool_health.mcp.answer"), Some(answer));
        assert_eq!(span.get("error.type"), Some(error_type));
        assert_eq!(span.get("gen_ai.tool.call.outcome"), Some("skipped"));
        assert_eq!(span.get("otel.status_code"), Some("error"));
        assert_eq!(span.get("jsonrpc.request.id"), None, "nothing was sent");
        assert_eq!(
            span.get("tool_health.registry.id"),
            Some(registry.instance_id())
        );
    }
    assert!(registry.snapshot(&key("made_up")).is_none(), "no entry");
    assert_eq!(
        calls(&registry, &key("needs_int")),
        (0, 0, 0, 0),
        "nothing recorded"
    );
    let spans = &spans[..3];
    let version = server
        .running
        .peer()
        .peer_info()
        .map(|i| i.protocol_version.to_string())
        .expect("negotiated");
    let mut ids = Vec::new();
    for (span, tool) in spans.iter().zip(["ok", "flaky", "no_such_tool"]) {
        assert_eq!(span.get("mcp.method.name"), Some("tools/call"));
        assert_eq!(span.get("otel.name"), Some(&*format!("tools/call {tool}")));
        assert_eq!(span.get("otel.kind"), Some("client"));
        assert_eq!(span.get("gen_ai.operation.name"), Some("execute_tool"));
        assert_eq!(span.get("gen_ai.tool.name"), Some(&*key(tool)));
        assert_eq!(span.get("mcp.server.name"), Some(NAME));
        assert_eq!(span.get("mcp.protocol.version"), Some(&*version));
        let id: i64 = span
            .get("jsonrpc.request.id")
            .and_then(|id| id.parse().ok())
            .expect("a numeric request id");
        ids.push(id);
        if target.is_http() {
            assert_eq!(span.get("network.transport"), Some("tcp"));
            assert_eq!(span.get("network.protocol.name"), Some("http"));
            assert_eq!(span.get("server.address"), Some("127.0.0.1"));
            let port = server.port.expect("a port").to_string();
            assert_eq!(span.get("server.port"), Some(&*port));
            let session = server
                .session
                .as_ref()
                .and_then(|s| s.get())
                .expect("a session");
            assert!(!session.is_empty());
            assert_eq!(span.get("mcp.session.id"), Some(&*session));
        } else {
            let pipe = target.sdk().map(|_| "pipe");
            assert_eq!(span.get("network.transport"), pipe);
            assert_eq!(span.get("server.address"), None);
            assert_eq!(span.get("mcp.session.id"), None, "stdio has no session id");
        }
    }
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "one id per request: {ids:?}"
    );
    assert_eq!(spans[0].get("error.type"), None);
    assert_eq!(spans[1].get("error.type"), Some("tool_error"));
    assert_eq!(spans[1].get("otel.status_code"), Some("error"));
    assert_eq!(spans[2].get("tool_health.mcp.answer"), Some("unknown_tool"));
    match target.sdk() {
        Some(Sdk::TypeScriptOld) | None => {
            assert_eq!(spans[2].get("rpc.response.status_code"), Some("-32602"));
        }
        _ => assert_eq!(spans[2].get("error.type"), Some("tool_error")),
    }
    assert_eq!(
        calls(&registry, &key("ok")),
        (1, 0, 0, 0),
        "the layer recorded it"
    );
}
