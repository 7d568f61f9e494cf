//! Keeping an upstream connected: start it, hand its peer to the client, wait for the
//! connection to end, start it again with backoff.
//!
//! A server that exits (or an HTTP session that ends) is started again after a backoff that
//! doubles from `restart.initialBackoffSeconds` up to `restart.maxBackoffSeconds`, and goes
//! back to the first step once a start has stayed up for [`STABLE_AFTER`]. Nothing here opens
//! or closes a breaker: calls that meet the dead connection are transport failures of the
//! server (the client counts them), so a server that stays down is refused as a whole after
//! `failureThreshold` of them and its tools leave the hosts' list; the new process gets the old
//! one's breakers (`ToolHealthClient::with_peer`), and after the cooldown one `ping` probes it.
//! A server that comes back before it tripped anything is simply used again.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tool_health::mcp::{ToolHealthClient, ToolsChanged, Transport};

use super::{Conn, Upstream};
use crate::config::Launch;

/// A connection that lasted this long resets the restart backoff.
const STABLE_AFTER: Duration = Duration::from_secs(60);

/// The shortest wait between two attempts (a backoff of 0 still waits this long after a
/// failure, so a server that cannot start never spins a core).
const MIN_RETRY: Duration = Duration::from_millis(100);

/// Runs until `shutdown`: connects, serves, reconnects.
pub(crate) async fn supervise(upstream: Arc<Upstream>, shutdown: CancellationToken) {
    let restart = upstream.config.settings.restart;
    let mut backoff = restart.initial;
    loop {
        let attempt = tokio::select! {
            a = upstream.connect() => a,
            () = shutdown.cancelled() => return,
        };
        let mut wait = backoff.max(MIN_RETRY);
        match attempt {
            Ok((running, pid)) => {
                let started = Instant::now();
                upstream.install(running.peer().clone(), pid);
                upstream.ready.send_replace(true);
                let first = upstream.state().starts == 1;
                tracing::info!(
                    server = %upstream.name,
                    pid,
                    "MCP server `{}` connected{}",
                    upstream.name,
                    if first { "" } else { " again" }
                );
                // Learn its tools (through the breakers: nothing is sent while it refuses).
                let learner = Arc::clone(&upstream);
                tokio::spawn(async move {
                    learner.list().await;
                });
                upstream.hosts.changed();
                let ended = tokio::select! {
                    r = running.waiting() => r,
                    () = shutdown.cancelled() => return,
                };
                let how = match ended {
                    Ok(reason) => format!("{reason:?}"),
                    Err(e) => format!("its task failed: {e}"),
                };
                upstream.update(|s| {
                    s.connected = false;
                    s.since = None;
                    s.last_error = Some(format!("the connection ended ({how})"));
                });
                if started.elapsed() >= STABLE_AFTER {
                    backoff = restart.initial;
                    wait = backoff;
                }
                tracing::warn!(
                    server = %upstream.name,
                    "MCP server `{}` {} ({how}); connecting again in {:.1} s",
                    upstream.name,
                    match upstream.config.launch {
                        Launch::Stdio { .. } => "exited or closed its stdout",
                        Launch::Http { .. } => "closed its connection",
                    },
                    wait.as_secs_f64()
                );
            }
            Err(why) => {
                upstream.update(|s| s.last_error = Some(why.clone()));
                upstream.ready.send_replace(true);
                tracing::warn!(
                    server = %upstream.name,
                    "MCP server `{}`: {why}; trying again in {:.1} s",
                    upstream.name,
                    wait.as_secs_f64()
                );
            }
        }
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = shutdown.cancelled() => return,
        }
        backoff = (backoff.max(MIN_RETRY) * 2).min(restart.max);
    }
}

impl Upstream {
    /// Hands a new connection's peer to the clients: the first time a client is built (and its
    /// subscription started), afterwards the same client over the new peer, so the breakers of
    /// the old connection stay as they are.
    fn install(self: &Arc<Self>, peer: rmcp::service::Peer<rmcp::RoleClient>, pid: Option<u32>) {
        let s = &self.config.settings;
        let client = match self.conn.load_full() {
            Some(old) => old.client.with_peer(peer),
            None => {
                let transport = match &self.config.launch {
                    Launch::Stdio { .. } => Transport::stdio(),
                    Launch::Http { url, .. } => Transport::http(url),
                };
                let shown = Arc::clone(&self.name);
                ToolHealthClient::new(peer, Arc::clone(&self.registry))
                    .server(&*self.name)
                    .shown_names(move |tool| format!("{shown}{}{tool}", crate::names::SEPARATOR))
                    .timeout(s.timeout)
                    .ping_timeout(s.ping_timeout)
                    .schema_check(s.schema_check)
                    .transport(transport)
            }
        };
        let per_tool: HashMap<String, ToolHealthClient> = self
            .config
            .tools
            .iter()
            .filter(|(_, t)| t.timeout != s.timeout)
            .map(|(tool, t)| (tool.clone(), client.clone().timeout(t.timeout)))
            .collect();
        let mut subscription = self
            .subscription
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if subscription.is_none() {
            let hosts = Arc::clone(&self.hosts);
            let server = Arc::clone(&self.name);
            match client.on_tools_changed(move |change| {
                match change {
                    ToolsChanged::Hidden { tool, retry_after } => tracing::debug!(
                        server = %server,
                        "tools of `{server}` hidden ({}) for {:.1} s: hosts are told to list again",
                        tool.as_deref().unwrap_or("all"),
                        retry_after.as_secs_f64()
                    ),
                    ToolsChanged::Listed { tool } => tracing::debug!(
                        server = %server,
                        "tools of `{server}` listed again ({}): hosts are told to list again",
                        tool.as_deref().unwrap_or("all")
                    ),
                    _ => {}
                }
                hosts.changed();
            }) {
                Ok(sub) => *subscription = Some(sub),
                Err(e) => tracing::error!("no tokio runtime for the tool-list subscription: {e}"),
            }
        }
        drop(subscription);
        self.conn.store(Some(Arc::new(Conn { client, per_tool })));
        self.update(|st| {
            st.connected = true;
            st.pid = pid;
            st.starts += 1;
            st.since = Some(Instant::now());
            st.last_error = None;
        });
    }
}
