//! One connection to an upstream: a child process over stdio (in a process group of its own,
//! `process.rs`), or a streamable HTTP endpoint (a watched client, `http.rs`); the handshake
//! bounded by the connect timeout.

use std::collections::HashMap;
use std::process::ExitStatus;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use http::{HeaderName, HeaderValue};
#[allow(deprecated)] // sampling, roots and logging are deprecated by SEP-2577, and still used
use rmcp::model::{
    ClientCapabilities, ClientConfig, ClientResult, CreateMessageRequest,
    CreateMessageRequestParams, CreateMessageResult, ElicitRequest, ElicitRequestParams,
    ElicitResult, Implementation, ListRootsRequest, ListRootsResult,
    LoggingMessageNotificationParam, ProgressNotificationParam, ProtocolVersion,
    ResourceUpdatedNotificationParam, ServerRequest,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt as _, NotificationContext, RequestContext, RunningService,
};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, ErrorData as McpError, RoleClient};

use super::http::{Watch, Watched};
use super::process::{self, Group, GRACE};
use super::stderr::{self, Tail};
use super::Upstream;
use crate::config::{redact_url, Launch};
use crate::notify::Lists;

/// How many of the last stderr lines a failed start shows.
const TAIL_SHOWN: usize = 3;

/// How long a server whose handshake failed may take to be seen exiting.
const EXIT_SETTLE: std::time::Duration = std::time::Duration::from_millis(300);

/// How long the stderr of a process that ended may take to be read to its end.
const STDERR_DRAIN: std::time::Duration = std::time::Duration::from_millis(500);

/// How a connection opens: `server/discover` first (MCP 2026-07-28, whose servers may know no
/// `initialize` at all), and the `initialize` handshake of 2025-11-25 when the server answers
/// the probe as a server of the handshake era does (an error: `-32601`, `-32602`, "not
/// initialized"). rmcp's auto mode: a server that does not answer the probe within 10 s is
/// taken for one of the handshake era too (within the connect timeout).
///
/// `initialize`: open with `initialize` alone, no probe — the attempt after one that failed in
/// auto mode (a server of the handshake era may end at any request before `initialize`, as
/// servers built on rmcp before its 2026-07-28 support do, or answer the probe with something
/// that is no JSON-RPC error), and every attempt after a connection that landed in the handshake
/// era (a restart needs no probe). An attempt that fails flips it back: a server changed in
/// place to speak only 2026-07-28 is reached at the next attempt.
fn lifecycle(initialize: bool) -> ClientLifecycleMode {
    if initialize {
        ClientLifecycleMode::Initialize
    } else {
        ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
        }
    }
}

/// The gateway as an MCP client: says who it is and what it offers (what hosts may answer:
/// roots, sampling, elicitation — relayed to the host that made the call, `relay.rs`),
/// and passes on what the server sends: progress, log messages, list changes, resource
/// updates.
#[derive(Debug, Clone)]
pub(super) struct UpstreamHandler {
    upstream: Weak<Upstream>,
}

/// What the gateway offers its servers: everything a host may answer (see `relay.rs`:
/// the connection is made before any host comes, and each request is relayed to the host that
/// made the call, or refused when that host did not offer it).
fn offered() -> ClientCapabilities {
    serde_json::from_value(serde_json::json!({
        "roots": {"listChanged": true},
        "sampling": {},
        "elicitation": {"form": {}, "url": {}},
    }))
    .unwrap_or_default()
}

impl UpstreamHandler {
    /// Relays a request of the server to the host of the call it serves.
    async fn relay(
        &self,
        request: ServerRequest,
        context: RequestContext<RoleClient>,
    ) -> Result<ClientResult, McpError> {
        let Some(upstream) = self.upstream.upgrade() else {
            return Err(McpError::internal_error("the gateway is stopping", None));
        };
        crate::relay::relay(
            &upstream.name,
            &upstream.callers,
            &upstream.hosts,
            request,
            context,
        )
        .await
    }
}

#[allow(deprecated)] // sampling, roots and logging are deprecated by SEP-2577, and still used
impl ClientHandler for UpstreamHandler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            offered(),
            Implementation::new("tool-health-gateway", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, McpError> {
        let request = ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params));
        match self.relay(request, context).await? {
            ClientResult::CreateMessageResult(r) => Ok(*r),
            _ => Err(McpError::internal_error(
                "the host answered something else",
                None,
            )),
        }
    }

    async fn list_roots(
        &self,
        context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, McpError> {
        let request = ServerRequest::ListRootsRequest(ListRootsRequest::default());
        match self.relay(request, context).await? {
            ClientResult::ListRootsResult(r) => Ok(r),
            _ => Err(McpError::internal_error(
                "the host answered something else",
                None,
            )),
        }
    }

    async fn create_elicitation(
        &self,
        params: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
        match self.relay(request, context).await? {
            ClientResult::ElicitResult(r) => Ok(r),
            _ => Err(McpError::internal_error(
                "the host answered something else",
                None,
            )),
        }
    }

    /// Progress of a call a host asked it for: back to that host, under its own token.
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if let Some(upstream) = self.upstream.upgrade() {
            upstream.progress.forward(params).await;
        }
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if let Some(upstream) = self.upstream.upgrade() {
            upstream.hosts.log(&upstream.name, params);
        }
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if let Some(upstream) = self.upstream.upgrade() {
            upstream.resource_updated(&params.uri);
        }
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(upstream) = self.upstream.upgrade() {
            upstream.hosts.changed_lists(Lists::RESOURCES);
        }
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(upstream) = self.upstream.upgrade() {
            upstream.hosts.changed_lists(Lists::PROMPTS);
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(upstream) = self.upstream.upgrade() {
            upstream.tools_changed();
        }
    }
}

/// A connection made: the running client service, and what else it is made of.
pub(super) struct Connected {
    pub(super) running: RunningService<RoleClient, UpstreamHandler>,
    pub(super) ends: Ends,
}

/// What a connection leaves to stop and to read once it ends.
pub(super) enum Ends {
    /// A stdio server's process group, its stderr's last lines, and its reader.
    Stdio {
        group: Group,
        tail: Tail,
        reader: tokio::task::JoinHandle<()>,
    },
    /// An HTTP server's watched client.
    Http { watch: Watch },
}

impl Ends {
    /// The leader's process id (stdio).
    pub(super) fn pid(&self) -> Option<u32> {
        match self {
            Self::Stdio { group, .. } => group.pid(),
            Self::Http { .. } => None,
        }
    }

    /// Completes when a stdio server's process (the launcher, for `npx`, `uvx`, `sh -c`)
    /// exits — even if something it started still holds its stdout open; never for HTTP.
    pub(super) async fn exited(&mut self) {
        match self {
            Self::Stdio { group, .. } => group.leader_exited().await,
            Self::Http { .. } => std::future::pending().await,
        }
    }

    /// Stops what is left (a stdio server's whole group, gently first; its stderr read to
    /// the end) and says how it ended: ` (exit status 1; its stderr ended with: …)`, or
    /// nothing to add.
    pub(super) async fn stop(self) -> String {
        match self {
            Self::Stdio {
                group,
                tail,
                reader,
            } => {
                let status = group.stop(GRACE).await;
                let _ = tokio::time::timeout(STDERR_DRAIN, reader).await;
                ended(status, &tail)
            }
            Self::Http { .. } => String::new(),
        }
    }
}

/// ` (exited with status 1; its stderr ended with: …)`.
fn ended(status: Option<ExitStatus>, tail: &Tail) -> String {
    let mut parts = Vec::new();
    if let Some(status) = status {
        parts.push(describe(status));
    }
    let last = tail.last(TAIL_SHOWN);
    if !last.is_empty() {
        parts.push(format!("its stderr ended with: {}", last.join(" | ")));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join("; "))
    }
}

/// `exited with status 1`, `killed by signal 9`.
fn describe(status: ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt as _;
        if let Some(signal) = status.signal() {
            return format!("killed by signal {signal}");
        }
    }
    match status.code() {
        Some(code) => format!("exited with status {code}"),
        None => "exited".to_owned(),
    }
}

impl Upstream {
    /// Starts (stdio) or reaches (HTTP) the server and completes the handshake, within the
    /// connect timeout. The reason on `Err`, fit for the log and for a host (secrets masked):
    /// a server that exits at start says its exit status and the end of its stderr.
    pub(super) async fn connect(self: &Arc<Self>) -> Result<Connected, String> {
        let handler = UpstreamHandler {
            upstream: Arc::downgrade(self),
        };
        let config = self.config();
        let timeout = config.settings.connect_timeout;
        let initialize = self.opens_with_initialize.load(Ordering::Relaxed);
        let result = match &config.launch {
            Launch::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let spawned = process::spawn(command, args, env, cwd.as_deref())?;
                let tail = Tail::default();
                let reader = tokio::spawn(stderr::forward(
                    spawned.stderr,
                    Arc::clone(&self.name),
                    tail.clone(),
                ));
                let mut group = spawned.group;
                let handshake = tokio::time::timeout(
                    timeout,
                    handler.serve_with_lifecycle(
                        (spawned.stdout, spawned.stdin),
                        lifecycle(initialize),
                    ),
                )
                .await;
                match handshake {
                    Ok(Ok(running)) => Ok(Connected {
                        running,
                        ends: Ends::Stdio {
                            group,
                            tail,
                            reader,
                        },
                    }),
                    failed => {
                        // `None`: no answer within the connect timeout.
                        let error = match failed {
                            Ok(Err(e)) => Some(super::chain(&e)),
                            _ => None,
                        };
                        // A server that ended at start: its end is what to say (EOF on its
                        // stdout may come a moment before it can be reaped).
                        let exited = match error {
                            Some(_) => group.exited_within(EXIT_SETTLE).await.is_some(),
                            None => group.exited().is_some(),
                        };
                        // The transport (and with it the server's stdin) is dropped: stop
                        // the whole group, and say how it ended.
                        let how = Ends::Stdio {
                            group,
                            tail,
                            reader,
                        }
                        .stop()
                        .await;
                        Err(match (exited, error) {
                            (true, _) => format!(
                                "`{command}` exited before completing the MCP handshake{how}"
                            ),
                            (false, None) => format!(
                                "`{command}` did not complete the MCP handshake within {:.1} s{how}",
                                timeout.as_secs_f64()
                            ),
                            (false, Some(e)) => {
                                format!("`{command}` failed the MCP handshake: {e}{how}")
                            }
                        })
                    }
                }
            }
            Launch::Http { url, headers } => {
                let mut custom = HashMap::new();
                for (k, v) in headers {
                    // Checked when the config was read.
                    if let (Ok(k), Ok(v)) = (
                        HeaderName::from_bytes(k.as_bytes()),
                        HeaderValue::from_str(v),
                    ) {
                        custom.insert(k, v);
                    }
                }
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(custom);
                let client = reqwest::Client::builder()
                    .build()
                    .map_err(|e| format!("no HTTP client: {e}"))?;
                let watch = Watch::default();
                let transport = StreamableHttpClientTransport::with_client(
                    Watched::new(client, watch.clone()),
                    config,
                );
                let shown = redact_url(url);
                match tokio::time::timeout(
                    timeout,
                    handler.serve_with_lifecycle(transport, lifecycle(initialize)),
                )
                .await
                {
                    Ok(Ok(running)) => Ok(Connected {
                        running,
                        ends: Ends::Http { watch },
                    }),
                    Err(_) => Err(format!(
                        "{shown} did not complete the MCP handshake within {:.1} s",
                        timeout.as_secs_f64()
                    )),
                    Ok(Err(e)) => Err(format!(
                        "{shown} failed the MCP handshake: {}",
                        watch.why().unwrap_or_else(|| super::chain(&e))
                    )),
                }
            }
        };
        // Which opening the next attempt uses (see `lifecycle`).
        let next = match &result {
            Ok(c) => c
                .running
                .peer()
                .peer_info()
                .is_some_and(|info| info.protocol_version.has_initialize()),
            Err(_) => !initialize,
        };
        self.opens_with_initialize.store(next, Ordering::Relaxed);
        result.map_err(|e| self.masked(&crate::names::printable(&e, 1_000)))
    }
}
