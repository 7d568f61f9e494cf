//! Issue 25 through a real rmcp 3.11 server (the demo server, in-process): a tool name the
//! model invents that is longer than the registry takes is answered with an invalid-argument
//! soft result — never the breaker's refusal — without reaching the server, being recorded or
//! being copied; and the tools a server lists (`tools/list`) are declared, so that they keep
//! their own breakers whatever names the model invents. With and without a `ToolHealthLayer`.

use std::sync::Arc;

use rmcp::model::CallToolRequestParams;
use tool_health::mcp::{invalid_tool_name, is_refusal, ToolHealthClient};
use tool_health::{BreakerState, ToolHealthLayer, ToolHealthRegistry, REFUSAL_MESSAGE};
use tool_health_integrations::mcp_demo::{self, Demo};
use tool_health_integrations::{registry, subscriber};

fn maybe_layer(
    with_layer: bool,
    registry: &Arc<ToolHealthRegistry>,
) -> Option<tracing::dispatcher::DefaultGuard> {
    with_layer.then(|| {
        tracing::dispatcher::set_default(&subscriber(ToolHealthLayer::new(registry.clone())))
    })
}

#[tokio::test]
async fn a_name_too_long_is_the_models_invalid_argument_and_never_reaches_the_server() {
    for with_layer in [true, false] {
        let (_clock, registry) = registry(3);
        let _guard = maybe_layer(with_layer, &registry);
        let server = Demo::new();
        let (_task, running) = mcp_demo::in_process(server.clone()).await.expect("serve");
        let client = ToolHealthClient::new(running.peer().clone(), registry.clone()).server("demo");

        let huge = "ok".repeat(512 * 1024); // 1 MiB
        let r = client
            .call_tool(CallToolRequestParams::new(huge.clone()))
            .await
            .expect("a soft result");
        assert_eq!(
            r,
            invalid_tool_name(5 + huge.len(), 256),
            "layer: {with_layer}"
        );
        assert_eq!(r.is_error, Some(true));
        assert!(!is_refusal(&r));
        let text = &r.content[0].as_text().unwrap().text;
        assert!(text.starts_with("invalid tool name"), "{text}");
        assert!(!text.contains(REFUSAL_MESSAGE));
        // The key is `demo/{tool}`: at the limit with the prefix it is still a name.
        let at_limit = "k".repeat(256 - 5);
        let r = client
            .call_tool(CallToolRequestParams::new(at_limit.clone()))
            .await;
        assert!(
            r.is_err(),
            "an unknown tool: the server answered -32602 ({r:?})"
        );
        let past = "k".repeat(256 - 4);
        let r = client
            .call_tool(CallToolRequestParams::new(past))
            .await
            .expect("soft");
        assert_eq!(r, invalid_tool_name(257, 256));

        assert_eq!(server.calls("ok"), 0, "the server never saw the call");
        // The unknown tool at the limit reached the server, which said it does not exist: the
        // model's mistake, recorded nowhere (issue 19: no entry for an unknown tool).
        // The only entries are the server's own tools, declared from its list.
        assert_eq!(
            registry.tracked_tools(),
            registry.declared_tools(),
            "no entry for any of them: {with_layer}"
        );
        assert!(registry.snapshot(&format!("demo/{at_limit}")).is_none());
        assert_eq!(registry.overflow().rejected_names, 2, "layer: {with_layer}");
    }
}

#[tokio::test]
async fn the_tools_a_server_lists_are_declared_and_keep_their_breakers() {
    // A small cap, so that invented names would fill it quickly.
    let server = Demo::new();
    let (_task, running) = mcp_demo::in_process(server.clone()).await.expect("serve");
    let listed = running.peer().list_all_tools().await.expect("tools/list");
    let registry = Arc::new(
        ToolHealthRegistry::builder()
            .max_tools(listed.len() + 2)
            .build(),
    );
    let client = ToolHealthClient::new(running.peer().clone(), registry.clone()).server("demo");
    // The client declares what `tools/list` says: every listed tool has its slot at once.
    let listed_through_client = client.list_tools(None).await.expect("tools/list");
    assert_eq!(listed_through_client.result.tools.len(), listed.len());
    assert_eq!(registry.declared_tools(), listed.len());
    assert_eq!(registry.tracked_tools(), listed.len());

    // The model invents names: the server says each does not exist (the model's mistake):
    // none gets an entry, none takes a slot.
    for i in 0..40 {
        let r = client
            .call_tool(CallToolRequestParams::new(format!("invented_{i}")))
            .await;
        assert!(
            r.is_err()
                || r.as_ref()
                    .is_ok_and(|r| r.is_error == Some(true) && !is_refusal(r)),
            "{r:?}"
        );
    }
    assert_eq!(registry.tracked_tools(), listed.len());
    // The listed tools keep their own breakers: `fail` trips on its own and is refused.
    for _ in 0..3 {
        let r = client.call_tool(CallToolRequestParams::new("fail")).await;
        assert!(matches!(&r, Ok(r) if r.is_error == Some(true) && !is_refusal(r)));
    }
    assert_eq!(registry.breaker_state("demo/fail"), BreakerState::Open);
    let refused = client
        .call_tool(CallToolRequestParams::new("fail"))
        .await
        .expect("soft");
    assert!(is_refusal(&refused));
    assert_eq!(server.calls("fail"), 3);
    let ok = client
        .call_tool(CallToolRequestParams::new("ok"))
        .await
        .expect("ok");
    assert_eq!(ok.is_error, Some(false));
    assert_eq!(registry.snapshot("demo/ok").unwrap().success_count, 1);
}
