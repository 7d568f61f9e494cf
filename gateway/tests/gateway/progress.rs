//! Progress through the gateway: the reference server `server-everything` (pinned in
//! `integrations/servers/everything`, installed by `scripts/mcp_sdks.sh`) sends
//! `notifications/progress` at each step of `trigger-long-running-operation` when the call
//! carries a `progressToken`. A host calling it through the gateway hears the same progress as
//! a host connected to it directly, under its own token — two hosts using the same token each
//! hear their own call's.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, ProgressNotificationParam,
    ProgressToken, ServerResult,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::json;

use crate::support::{eventually, node, skip, workspace, Gateway, WAIT};

/// The everything server's entry point, or why there is none.
pub fn everything() -> PathBuf {
    if let Err(why) = node() {
        skip(&why);
    }
    let path = workspace().join(
        "integrations/servers/everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    );
    if !path.exists() {
        skip("server-everything is not installed (bash scripts/mcp_sdks.sh)");
    }
    path
}

/// A host that keeps the progress notifications it hears.
#[derive(Clone, Default)]
struct Heard(Arc<Mutex<Vec<ProgressNotificationParam>>>);

impl ClientHandler for Heard {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.0.lock().unwrap().push(params);
    }
}

impl Heard {
    fn tokens_and_steps(&self) -> Vec<(ProgressToken, f64)> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|p| (p.progress_token.clone(), p.progress))
            .collect()
    }
}

/// Calls `tool` (4 steps over 0.4 s) asking for progress: its result's text, and the
/// `progressToken` the request carried (the host's rmcp numbers it).
async fn long_call(
    client: &RunningService<RoleClient, Heard>,
    tool: &str,
) -> (String, ProgressToken) {
    let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(
        json!({"duration": 0.4, "steps": 4})
            .as_object()
            .unwrap()
            .clone(),
    );
    let handle = client
        .peer()
        .send_request_with_option(
            ClientRequest::CallToolRequest(CallToolRequest::new(params)),
            PeerRequestOptions::with_timeout(WAIT),
        )
        .await
        .expect("sent");
    let token = handle.progress_token.clone();
    let r = match handle.await_response().await.expect("answered") {
        ServerResult::CallToolResult(r) => r,
        other => panic!("{other:?}"),
    };
    assert_ne!(r.is_error, Some(true), "{r:?}");
    let text = r
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default();
    (text, token)
}

/// What `heard` heard, for `token` only (its steps), waiting for `n` of them.
async fn steps_of(heard: &Heard, token: &ProgressToken, n: usize) -> Vec<f64> {
    eventually("the steps", std::time::Duration::from_secs(5), || async {
        let all = heard.tokens_and_steps();
        let mine: Vec<f64> = all
            .iter()
            .filter(|(t, _)| t == token)
            .map(|(_, p)| *p)
            .collect();
        // Nothing under another token: a host hears its own calls only.
        assert_eq!(mine.len(), all.len(), "{all:?}");
        (mine.len() >= n).then_some(mine)
    })
    .await
}

pub async fn progress_reaches_the_host_that_made_the_call() {
    let server = everything();
    // Directly: what a host connected to the server hears.
    let mut cmd = tokio::process::Command::new("node");
    cmd.arg(&server).arg("stdio").kill_on_drop(true);
    let transport = rmcp::transport::TokioChildProcess::new(cmd).expect("start the server");
    let direct_heard = Heard::default();
    let direct = direct_heard
        .clone()
        .serve(transport)
        .await
        .expect("handshake");
    let (_, token) = long_call(&direct, "trigger-long-running-operation").await;
    let direct_steps = steps_of(&direct_heard, &token, 4).await;
    let _ = direct.cancel().await;
    assert_eq!(direct_steps, [1.0, 2.0, 3.0, 4.0]);

    // Through the gateway, two hosts at once (their rmcp numbers their tokens alike).
    let config = json!({"mcpServers": {"ev": {"command": "node", "args": [server, "stdio"]}}});
    let gw = Gateway::http(&config, &[]).await;
    let url = gw.url("/mcp");
    let connect = |heard: Heard| {
        let url = url.clone();
        async move {
            let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(url);
            heard.serve(transport).await.expect("handshake")
        }
    };
    let (a_heard, b_heard) = (Heard::default(), Heard::default());
    let a = connect(a_heard.clone()).await;
    let b = connect(b_heard.clone()).await;
    let ((ra, ta), (rb, tb)) = tokio::join!(
        long_call(&a, "ev__trigger-long-running-operation"),
        long_call(&b, "ev__trigger-long-running-operation"),
    );
    assert!(
        ra.contains("completed") && rb.contains("completed"),
        "{ra} / {rb}"
    );
    assert_eq!(ta, tb, "the same token on both hosts");
    for (host, heard, token) in [("a", &a_heard, &ta), ("b", &b_heard, &tb)] {
        let steps = steps_of(heard, token, 4).await;
        assert_eq!(
            steps, direct_steps,
            "host {host} hears its call's progress as a direct host does"
        );
    }
}
