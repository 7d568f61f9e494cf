//! What passes through besides tools, through the binary with rmcp's client as the hosts
//! (issue 30, item 2): resources, templates, prompts and completions of the rmcp fixture under
//! the gateway's names; a refused or unreachable server's refused softly, its reads counted for
//! its breaker only; a host's cancellation reaching the server; log messages to each host at its
//! own level, the server named; the requests `server-everything` makes of its host (sampling,
//! elicitation, roots) answered by the host that made the call, or refused with the reason.
//! Item 6 (the health in `_meta`, the retry after a reconnection) is in `health_meta.rs`.

#![allow(deprecated)] // sampling, roots, logging: deprecated by SEP-2577, and what hosts use

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientCapabilities, ClientInfo, ClientRequest,
    CompleteRequestParams, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams,
    ElicitResult, ElicitationAction, GetPromptRequestParams, Implementation, ListRootsResult,
    LoggingLevel, LoggingMessageNotificationParam, ReadResourceRequest, ReadResourceRequestParams,
    Reference, ResourceContents, ResourceUpdatedNotificationParam, Root, SamplingMessage,
    SetLevelRequestParams, SubscribeRequestParams,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RequestContext, RunningService};
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::{json, Value};

use crate::support::{
    control, eventually, fixture, skip, text, token_args, Everything, Gateway, REFUSAL, WAIT,
};

/// The rmcp fixture with its pass-through tools.
pub fn rmcp() -> Value {
    let mut u = crate::support::upstream::rmcp();
    u["env"][fixture::TOOLS] = json!("passthrough");
    u
}

/// A host: what it heard, and whether it answers a server's requests (and as whom).
#[derive(Clone, Default)]
pub struct Host {
    /// `None`: it offers nothing (no roots, sampling, elicitation).
    answers_as: Option<&'static str>,
    logs: Arc<Mutex<Vec<LoggingMessageNotificationParam>>>,
    updates: Arc<Mutex<Vec<String>>>,
}

impl Host {
    fn answering(name: &'static str) -> Self {
        Self {
            answers_as: Some(name),
            ..Self::default()
        }
    }

    fn logs(&self) -> Vec<(String, String, String)> {
        self.logs
            .lock()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    serde_json::to_value(m.level)
                        .unwrap()
                        .as_str()
                        .unwrap()
                        .to_owned(),
                    m.logger.clone().unwrap_or_default(),
                    m.data.as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    }
}

impl ClientHandler for Host {
    fn get_info(&self) -> ClientInfo {
        let caps: ClientCapabilities = if self.answers_as.is_some() {
            serde_json::from_value(json!({
                "roots": {"listChanged": true}, "sampling": {}, "elicitation": {"form": {}}
            }))
            .unwrap()
        } else {
            ClientCapabilities::default()
        };
        ClientInfo::new(caps, Implementation::new("passthrough-host", "1.0.0"))
    }

    async fn create_message(
        &self,
        _params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let who = self.answers_as.unwrap_or("nobody");
        Ok(CreateMessageResult::new(
            SamplingMessage::assistant_text(format!("sampled by {who}")),
            "test-model".into(),
        ))
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let who = self.answers_as.unwrap_or("nobody");
        Ok(ListRootsResult::new(vec![Root::new(format!(
            "file:///roots/{who}"
        ))
        .with_name(who)]))
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Ok(ElicitResult::new(ElicitationAction::Decline))
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.logs.lock().unwrap().push(params);
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.updates.lock().unwrap().push(params.uri);
    }
}

type Client = RunningService<RoleClient, Host>;

pub async fn connect(gw: &Gateway, host: Host) -> Client {
    let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(gw.url("/mcp"));
    tokio::time::timeout(WAIT, host.serve(transport))
        .await
        .expect("the handshake in time")
        .expect("the handshake")
}

/// Calls `name`: the result's texts and whether it is an error, or the JSON-RPC error.
pub async fn call(
    client: &Client,
    name: &str,
    args: Value,
) -> Result<(bool, String), (i32, String)> {
    let mut p = CallToolRequestParams::new(name.to_owned());
    if let Value::Object(m) = args {
        p = p.with_arguments(m);
    }
    match tokio::time::timeout(WAIT, client.peer().call_tool(p)).await {
        Ok(Ok(r)) => Ok((r.is_error == Some(true), text(&r))),
        Ok(Err(rmcp::service::ServiceError::McpError(e))) => Err((e.code.0, e.message.to_string())),
        Ok(Err(e)) => panic!("calling {name}: {e}"),
        Err(_) => panic!("calling {name}: no answer within {WAIT:?}"),
    }
}

/// Every text of a result (server-everything answers in several blocks).
async fn texts(client: &Client, name: &str, args: Value) -> (bool, String) {
    let mut p = CallToolRequestParams::new(name.to_owned());
    if let Value::Object(m) = args {
        p = p.with_arguments(m);
    }
    let r = tokio::time::timeout(WAIT, client.peer().call_tool(p))
        .await
        .expect("in time")
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let all: Vec<String> = r
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect();
    (r.is_error == Some(true), all.join("\n"))
}

async fn read(client: &Client, uri: &str) -> Result<(String, String), (i32, String)> {
    match client
        .peer()
        .read_resource(ReadResourceRequestParams::new(uri))
        .await
    {
        Ok(r) => match r.contents.into_iter().next() {
            Some(ResourceContents::TextResourceContents { uri, text, .. }) => Ok((uri, text)),
            other => panic!("{other:?}"),
        },
        Err(rmcp::service::ServiceError::McpError(e)) => Err((e.code.0, e.message.to_string())),
        Err(e) => panic!("{e}"),
    }
}

pub async fn server(gw: &Gateway, name: &str) -> Value {
    crate::supervise::server(gw, name).await
}

/// The fixture's `seen`: what it received.
async fn seen(client: &Client, server: &str) -> Value {
    let (_, t) = call(client, &format!("{server}__seen"), json!({}))
        .await
        .expect("seen");
    serde_json::from_str(&t).unwrap()
}

/// Resources, templates, prompts and completions under the gateway's names; reads and gets
/// count for the server's breaker, never a tool's; a server refused by its breaker, or not
/// connected, has its entries left out and its reads and gets refused softly.
pub async fn a_servers_resources_and_prompts_pass_through_and_a_refused_one_is_refused_softly() {
    let config = json!({"mcpServers": {
        "rs": rmcp(),
        "gone": {"command": "/nonexistent/server"},
    }});
    let token = token_args();
    let gw = Gateway::http(&config, &[&token[0], &token[1]]).await;
    let client = connect(&gw, Host::default()).await;
    let peer = client.peer();
    let info = peer.peer_info().expect("the gateway's info");
    let caps = serde_json::to_value(&info.capabilities).unwrap();
    for cap in ["resources", "prompts", "completions", "logging", "tools"] {
        assert!(caps.get(cap).is_some(), "{cap} advertised: {caps}");
    }
    assert_eq!(caps["resources"]["subscribe"], true, "{caps}");

    let resources = peer.list_all_resources().await.expect("resources");
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris, ["tool-health://rs/fixture://note"]);
    let templates = peer.list_all_resource_templates().await.expect("templates");
    assert_eq!(
        templates[0].uri_template,
        "tool-health://rs/fixture://notes/{id}"
    );
    let prompts = peer.list_all_prompts().await.expect("prompts");
    let names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["rs__greet"]);

    // Read under the gateway's URI, and under the server's own (a tool result's).
    assert_eq!(
        read(&client, "tool-health://rs/fixture://note").await,
        Ok(("tool-health://rs/fixture://note".into(), "a note".into()))
    );
    assert_eq!(
        read(&client, "fixture://notes/7").await,
        Ok(("fixture://notes/7".into(), "note 7".into()))
    );
    let (code, message) = read(&client, "tool-health://nope/x").await.unwrap_err();
    assert_eq!(code, -32002, "{message}");
    assert!(message.contains("no MCP server `nope`"), "{message}");
    let got = peer
        .get_prompt(
            GetPromptRequestParams::new("rs__greet")
                .with_arguments(json!({"name": "Ada"}).as_object().unwrap().clone()),
        )
        .await
        .expect("a prompt");
    assert_eq!(
        serde_json::to_value(&got.messages[0].content).unwrap()["text"],
        "Hello, Ada!"
    );
    let completed = peer
        .complete(CompleteRequestParams::new(
            Reference::for_prompt("rs__greet"),
            rmcp::model::ArgumentInfo::new("name", "A"),
        ))
        .await
        .expect("a completion");
    assert_eq!(completed.completion.values, ["Ada", "Alan"]);
    let completed = peer
        .complete(CompleteRequestParams::new(
            Reference::for_resource("tool-health://rs/fixture://notes/{id}"),
            rmcp::model::ArgumentInfo::new("id", "Al"),
        ))
        .await
        .expect("a completion of a template");
    assert_eq!(completed.completion.values, ["Alan"]);

    // Counted for the server's breaker; no tool's breaker was made.
    let before = server(&gw, "rs").await["calls"]["success"]
        .as_u64()
        .unwrap();
    read(&client, "tool-health://rs/fixture://note")
        .await
        .unwrap();
    let after = server(&gw, "rs").await["calls"]["success"]
        .as_u64()
        .unwrap();
    assert_eq!(after, before + 1, "a read is one success of the server");
    let (_, tools) = gw.get("/v1/tools").await;
    for t in tools["tools"].as_array().unwrap() {
        // The tools the server listed are declared (no call counted); nothing else is there.
        assert!(t["tool"].as_str().unwrap().starts_with("rs/"), "{t}");
        assert_eq!(
            (
                t["calls"]["success"].as_u64(),
                t["calls"]["failure"].as_u64()
            ),
            (Some(0), Some(0)),
            "no tool was called: {t}"
        );
    }
    let (status, _) = gw.get("/v1/tools/rs__greet").await;
    assert_eq!(status, 404, "a prompt is no tool");

    // The server switched off: its entries leave the lists, its reads and gets are refused.
    let (status, v) = control(gw.port, "/v1/servers/rs/force-open?seconds=600").await;
    assert_eq!(status, 200, "{v}");
    assert!(peer.list_all_resources().await.unwrap().is_empty());
    assert!(peer.list_all_prompts().await.unwrap().is_empty());
    let (code, message) = read(&client, "tool-health://rs/fixture://note")
        .await
        .unwrap_err();
    assert_eq!(code, -32603, "{message}");
    assert!(message.starts_with(REFUSAL), "{message}");
    assert!(
        message.contains(
            "`resources/read` was not sent: the operator switched off its MCP server `rs`"
        ),
        "{message}"
    );
    let refused = peer
        .get_prompt(GetPromptRequestParams::new("rs__greet"))
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains(REFUSAL), "{refused}");
    let (status, _) = control(gw.port, "/v1/servers/rs/release").await;
    assert_eq!(status, 200);
    assert_eq!(peer.list_all_prompts().await.unwrap().len(), 1);

    // A server that cannot be reached: nothing of it listed, a read answered why.
    let (code, message) = read(&client, "tool-health://gone/x://y").await.unwrap_err();
    assert_eq!(code, -32603, "{message}");
    assert!(
        message.contains("MCP server `gone` is not connected"),
        "{message}"
    );
    let _ = client.cancel().await;
}

/// A resource subscription: the server subscribed once for two hosts, each host told under
/// the URI it subscribed with, the server unsubscribed when the last host unsubscribes — with
/// `resources/subscribe` on a server of the handshake era, and on one of MCP 2026-07-28 by the
/// resources the gateway's `subscriptions/listen` stream names.
pub async fn a_resource_update_reaches_every_subscribed_host() {
    subscriptions(true).await;
    subscriptions(false).await;
}

/// The rmcp fixture of the handshake era only (`initialize`, requests from server to client).
pub fn rmcp_handshake() -> Value {
    let mut u = rmcp();
    u["env"][fixture::ERA] = json!("handshake");
    u
}

async fn subscriptions(handshake: bool) {
    let era = if handshake { "handshake" } else { "2026-07-28" };
    let rs = if handshake { rmcp_handshake() } else { rmcp() };
    let gw = Gateway::http(&json!({"mcpServers": {"rs": rs}}), &[]).await;
    // A server of the handshake era built on rmcp ends at the gateway's `server/discover`: it
    // is connected at the second attempt, opened with `initialize` (docs/gateway.md).
    eventually("connected", WAIT, || async {
        (server(&gw, "rs").await["connected"] == true).then_some(())
    })
    .await;
    let (a_host, b_host) = (Host::default(), Host::default());
    let a = connect(&gw, a_host.clone()).await;
    let b = connect(&gw, b_host.clone()).await;
    // What the server holds: how many times it was subscribed and unsubscribed (the handshake
    // era), or the resources its listen streams name (2026-07-28).
    let holds = |s: &Value, subscribed: u64, unsubscribed: u64, listening: Value| {
        if handshake {
            s["methods"]["resources/subscribe"].as_u64().unwrap_or(0) == subscribed
                && s["methods"]["resources/unsubscribe"].as_u64().unwrap_or(0) == unsubscribed
        } else {
            s["methods"].get("resources/subscribe").is_none() && s["listening"] == listening
        }
    };
    let note = json!(["fixture://note"]);
    a.peer()
        .subscribe(SubscribeRequestParams::new(
            "tool-health://rs/fixture://note",
        ))
        .await
        .expect("subscribed");
    b.peer()
        .subscribe(SubscribeRequestParams::new("fixture://note"))
        .await
        .expect("subscribed by its own URI");
    eventually("the server subscribed once", WAIT, || async {
        holds(&seen(&a, "rs").await, 1, 0, note.clone()).then_some(())
    })
    .await;
    call(&a, "rs__touch", json!({})).await.unwrap();
    eventually("both told", Duration::from_secs(10), || async {
        (a_host.updates.lock().unwrap().len() == 1 && b_host.updates.lock().unwrap().len() == 1)
            .then_some(())
    })
    .await;
    assert_eq!(
        *a_host.updates.lock().unwrap(),
        ["tool-health://rs/fixture://note"],
        "{era}"
    );
    assert_eq!(*b_host.updates.lock().unwrap(), ["fixture://note"], "{era}");
    a.peer()
        .unsubscribe(rmcp::model::UnsubscribeRequestParams::new(
            "tool-health://rs/fixture://note",
        ))
        .await
        .unwrap();
    let s = seen(&a, "rs").await;
    assert!(
        holds(&s, 1, 0, note.clone()),
        "{era}: still held for b: {s}"
    );
    b.peer()
        .unsubscribe(rmcp::model::UnsubscribeRequestParams::new("fixture://note"))
        .await
        .unwrap();
    eventually("the server unsubscribed", WAIT, || async {
        holds(&seen(&a, "rs").await, 1, 1, json!([])).then_some(())
    })
    .await;
    // A host that goes away without unsubscribing: the server is unsubscribed at the next
    // update, which finds nobody to tell.
    let c = connect(&gw, Host::default()).await;
    c.peer()
        .subscribe(SubscribeRequestParams::new("fixture://note"))
        .await
        .unwrap();
    eventually("subscribed for c", WAIT, || async {
        holds(&seen(&a, "rs").await, 2, 1, note.clone()).then_some(())
    })
    .await;
    let _ = c.cancel().await;
    call(&a, "rs__touch", json!({})).await.unwrap();
    eventually("unsubscribed", Duration::from_secs(10), || async {
        holds(&seen(&a, "rs").await, 2, 2, json!([])).then_some(())
    })
    .await;
    assert_eq!(a_host.updates.lock().unwrap().len(), 1, "{era}");
    let _ = a.cancel().await;
    let _ = b.cancel().await;
}

/// A host's `notifications/cancelled` reaches the server, for a call and for a read.
pub async fn a_hosts_cancellation_reaches_the_server() {
    let gw = Gateway::http(&json!({"mcpServers": {"rs": rmcp()}}), &[]).await;
    let client = connect(&gw, Host::default()).await;
    let requests = [
        ClientRequest::CallToolRequest(CallToolRequest::new(CallToolRequestParams::new(
            "rs__hang",
        ))),
        ClientRequest::ReadResourceRequest(ReadResourceRequest::new(
            ReadResourceRequestParams::new("tool-health://rs/fixture://hang"),
        )),
    ];
    for (n, request) in requests.into_iter().enumerate() {
        let handle = client
            .peer()
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
            .expect("sent");
        // Under way at the server before it is cancelled.
        let method = if n == 0 {
            "tools/call"
        } else {
            "resources/read"
        };
        eventually("under way", WAIT, || async {
            let s = seen(&client, "rs").await;
            (s["methods"][method].as_u64() >= Some(1)).then_some(())
        })
        .await;
        handle
            .cancel(Some("the user pressed stop".into()))
            .await
            .unwrap();
        eventually("the server told", WAIT, || async {
            let s = seen(&client, "rs").await;
            (s["methods"]["notifications/cancelled"].as_u64() == Some(n as u64 + 1)).then_some(())
        })
        .await;
    }
    let _ = client.cancel().await;
}

/// Each host hears the messages at or above its own level, the server named in `logger`; the
/// server is set to the most verbose level a host asked for.
pub async fn log_messages_reach_each_host_at_its_level_with_the_server_named() {
    let gw = Gateway::http(&json!({"mcpServers": {"rs": rmcp()}}), &[]).await;
    let (a_host, b_host) = (Host::default(), Host::default());
    let a = connect(&gw, a_host.clone()).await;
    let b = connect(&gw, b_host.clone()).await;
    a.peer()
        .set_level(SetLevelRequestParams::new(LoggingLevel::Error))
        .await
        .unwrap();
    b.peer()
        .set_level(SetLevelRequestParams::new(LoggingLevel::Debug))
        .await
        .unwrap();
    assert!(seen(&a, "rs").await["methods"]["logging/setLevel"].as_u64() >= Some(1));
    call(&a, "rs__log", json!({"level": "debug", "text": "d1"}))
        .await
        .unwrap();
    call(&a, "rs__log", json!({"level": "error", "text": "e1"}))
        .await
        .unwrap();
    eventually("b hears both", Duration::from_secs(10), || async {
        (b_host.logs().len() == 2).then_some(())
    })
    .await;
    eventually("a hears the error", Duration::from_secs(10), || async {
        (!a_host.logs().is_empty()).then_some(())
    })
    .await;
    let d1 = ("debug".to_owned(), "rs/fixture".to_owned(), "d1".to_owned());
    let e1 = ("error".to_owned(), "rs/fixture".to_owned(), "e1".to_owned());
    assert_eq!(b_host.logs(), [d1, e1.clone()]);
    assert_eq!(a_host.logs(), [e1], "a asked for errors only");
    let _ = a.cancel().await;
    let _ = b.cancel().await;
}

/// A server's requests of its host (server-everything's sampling and elicitation, the
/// fixture's roots) reach the host that made the call and its answer comes back; with no host
/// connected one is refused, saying so; a host that did not offer one is refused, saying
/// so; with two hosts' requests under way the server over stdio cannot say which it asks for
/// (refused, saying so), over streamable HTTP it does (answered by the right host).
pub async fn a_servers_request_goes_to_the_host_that_made_the_call() {
    let ev = crate::progress::everything().display().to_string();
    let port = crate::support::free_port();
    let http = Everything::start(port).await.unwrap_or_else(|e| skip(&e));
    let config = json!({"mcpServers": {
        "ev": {"command": "node", "args": [ev, "stdio"]},
        "evh": {"url": http.url()},
        // MCP 2026-07-28 has no request from server to client (its servers answer with
        // `InputRequiredResult`): the fixture of the handshake era asks.
        "rs": rmcp_handshake(),
    }});
    // The upstreams' stderr in the log: what server-everything says of a refused request.
    let gw = Gateway::http_with_env(
        &config,
        &[],
        &[(
            "TOOL_HEALTH_GATEWAY_LOG",
            "info,tool_health_gateway::upstream=debug",
        )],
    )
    .await;
    // Before any host: server-everything asks for roots right after its handshake.
    gw.log
        .wait_for(
            "cannot relay `roots/list` from MCP server `ev`: no host is connected to the gateway \
             to answer it",
            WAIT,
        )
        .await;
    let a = connect(&gw, Host::answering("a")).await;
    let b = connect(&gw, Host::answering("b")).await;
    let bare = connect(&gw, Host::default()).await;
    // Roots, asked during the call (the fixture asks each time).
    assert_eq!(
        call(&a, "rs__roots", json!({})).await,
        Ok((false, "file:///roots/a".into()))
    );
    assert_eq!(
        call(&b, "rs__roots", json!({})).await,
        Ok((false, "file:///roots/b".into()))
    );
    let (err, t) = call(&bare, "rs__roots", json!({})).await.unwrap();
    assert!(
        err && t.contains(
            "cannot relay `roots/list` from MCP server `rs`: the host that made the \
             call: it did not offer roots at its handshake"
        ),
        "{t}"
    );
    let sample = json!({"prompt": "hi", "maxTokens": 5});
    for s in ["ev", "evh"] {
        let tool = format!("{s}__trigger-sampling-request");
        let (err, t) = texts(&a, &tool, sample.clone()).await;
        assert!(!err && t.contains("sampled by a"), "{s}: {t}");
        let (err, t) = texts(&b, &tool, sample.clone()).await;
        assert!(!err && t.contains("sampled by b"), "{s}: {t}");
        let (err, t) = texts(&bare, &tool, sample.clone()).await;
        assert!(err, "{s}: {t}");
        assert!(
            t.contains(&format!(
                "tool-health-gateway cannot relay `sampling/createMessage` from MCP server `{s}`: \
                 the host that made the call: it did not offer sampling at its handshake"
            )),
            "{s}: {t}"
        );
        let (err, t) = texts(&a, &format!("{s}__trigger-elicitation-request"), json!({})).await;
        assert!(!err && t.contains("declined"), "{s}: {t}");
    }

    // Two hosts' requests under way on the same server: b's long call, then a's sampling.
    for (s, routed) in [("ev", false), ("evh", true)] {
        let long = {
            let b = b.peer().clone();
            let tool = format!("{s}__trigger-long-running-operation");
            tokio::spawn(async move {
                b.call_tool(
                    CallToolRequestParams::new(tool).with_arguments(
                        json!({"duration": 4, "steps": 2})
                            .as_object()
                            .unwrap()
                            .clone(),
                    ),
                )
                .await
            })
        };
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (err, t) = texts(
            &a,
            &format!("{s}__trigger-sampling-request"),
            sample.clone(),
        )
        .await;
        if routed {
            assert!(
                !err && t.contains("sampled by a"),
                "{s}: the stream says whose: {t}"
            );
        } else {
            assert!(err, "{s}: {t}");
            assert!(
                t.contains("2 hosts have requests under way on `ev`"),
                "{s}: stdio says nothing of whose: {t}"
            );
        }
        long.await.unwrap().expect("the long call answered");
    }
    for c in [a, b, bare] {
        let _ = c.cancel().await;
    }
    http.kill().await;
}
