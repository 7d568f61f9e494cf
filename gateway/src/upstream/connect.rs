//! One connection to an upstream: a child process over stdio, or a streamable HTTP endpoint;
//! the handshake bounded by the connect timeout.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Weak;

use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProgressNotificationParam};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::Upstream;
use crate::config::{redact_url, Launch};

/// The longest line of an upstream's stderr forwarded to the log (the rest of it is cut).
const MAX_STDERR_LINE: usize = 8 * 1024;

/// The gateway as an MCP client: says who it is, and hears the server's tool-list changes.
#[derive(Debug, Clone)]
pub(super) struct UpstreamHandler {
    upstream: Weak<Upstream>,
}

impl ClientHandler for UpstreamHandler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("tool-health-gateway", env!("CARGO_PKG_VERSION")),
        )
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

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(upstream) = self.upstream.upgrade() {
            tracing::info!(server = %upstream.name, "MCP server `{}` says its tool list changed", upstream.name);
            if let Some(conn) = upstream.conn.load_full() {
                // The client re-reads the schemas, and its subscription tells the hosts.
                conn.client.server_list_changed();
            }
        }
    }
}

/// A connected server: the running client service, and the process id of a stdio server.
pub(super) type Connected = (RunningService<RoleClient, UpstreamHandler>, Option<u32>);

impl Upstream {
    /// Starts (stdio) or reaches (HTTP) the server and completes the handshake, within the
    /// connect timeout. The reason on `Err`, fit for the log and for a host.
    pub(super) async fn connect(self: &std::sync::Arc<Self>) -> Result<Connected, String> {
        let handler = UpstreamHandler {
            upstream: std::sync::Arc::downgrade(self),
        };
        let timeout = self.config.settings.connect_timeout;
        match &self.config.launch {
            Launch::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args).envs(env).kill_on_drop(true);
                if let Some(dir) = cwd {
                    cmd.current_dir(dir);
                }
                let (transport, stderr) = TokioChildProcess::builder(cmd)
                    .stderr(Stdio::piped())
                    .spawn()
                    .map_err(|e| format!("`{command}` could not be started: {e}"))?;
                let pid = transport.id();
                if let Some(stderr) = stderr {
                    tokio::spawn(forward_stderr(stderr, self.name.clone()));
                }
                let running = tokio::time::timeout(timeout, handler.serve(transport))
                    .await
                    .map_err(|_| {
                        format!(
                            "`{command}` did not complete the MCP handshake within {:.1} s",
                            timeout.as_secs_f64()
                        )
                    })?
                    .map_err(|e| format!("`{command}` failed the MCP handshake: {e}"))?;
                Ok((running, pid))
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
                let transport = StreamableHttpClientTransport::with_client(client, config);
                let shown = redact_url(url);
                let running = tokio::time::timeout(timeout, handler.serve(transport))
                    .await
                    .map_err(|_| {
                        format!(
                            "{shown} did not complete the MCP handshake within {:.1} s",
                            timeout.as_secs_f64()
                        )
                    })?
                    .map_err(|e| format!("{shown} failed the MCP handshake: {e}"))?;
                Ok((running, None))
            }
        }
    }
}

/// Forwards a server's stderr to the log, line by line (each cut to [`MAX_STDERR_LINE`]
/// bytes, control characters replaced), until it closes.
async fn forward_stderr(mut stderr: impl AsyncRead + Unpin, server: std::sync::Arc<str>) {
    let mut buf = [0u8; 4096];
    let mut line: Vec<u8> = Vec::new();
    let mut cut = false;
    loop {
        let n = match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &b in &buf[..n] {
            if b == b'\n' {
                emit(&server, &line, cut);
                line.clear();
                cut = false;
            } else if line.len() < MAX_STDERR_LINE {
                line.push(b);
            } else {
                cut = true;
            }
        }
    }
    if !line.is_empty() {
        emit(&server, &line, cut);
    }
}

fn emit(server: &str, line: &[u8], cut: bool) {
    let text = String::from_utf8_lossy(line);
    let text = text.trim_end_matches('\r');
    let text: String = text
        .chars()
        .map(|c| if c.is_control() && c != '\t' { '?' } else { c })
        .collect();
    tracing::info!(target: "tool_health_gateway::upstream", server, "{text}{}", if cut { "…" } else { "" });
}
