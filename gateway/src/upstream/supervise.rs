//! Keeping an upstream connected: start it, hand its peer to the client, watch the connection,
//! stop what is left of it when it ends, start it again with backoff.
//!
//! **When a connection ends.** A stdio server that exits (or closes its stdout), an HTTP
//! session lost (the server could not be reached, or no longer knows the session: `http.rs`),
//! a call that met the connection's end: the connection is taken out at once — its tools leave
//! the hosts' list (they are told), calls are answered "not connected … was not called" and
//! reach nothing — and what is left of a stdio server is stopped as a group, gently first
//! (`process.rs`). `last_error` says how it ended: the exit status and the end of its stderr.
//!
//! **When it is started again.** After a backoff that doubles from
//! `restart.initialBackoffSeconds` up to `restart.maxBackoffSeconds`, and goes back to the first
//! step once a start has stayed up for [`STABLE_AFTER`]. An HTTP server is tried again at most
//! [`HTTP_RETRY_MAX`] apart, and at once when a call waits for it (an attempt is one request,
//! and a server back from a restart is then used within a second of answering, at once when
//! calls keep coming); the log says the first failure of a run and every tenth.
//!
//! **What counts against its breaker.** Calls sent on a live connection, as the library's
//! client counts them (a transport failure under a call is the server's). Nothing else the
//! supervisor sees one by one: an attempt that fails, a restart, a call answered "not
//! connected" while it is under way are no evidence against the server. **A handshake answered
//! is as good a probe as a `ping`**: when the server's breaker would grant its probe now (its
//! cooldown is over), the handshake is that probe and closes it; before, it proves nothing.
//!
//! **A server that keeps dying** — `failureThreshold` connections in a row that ended before
//! they had been up [`STABLE_AFTER`] — is a fact the supervisor tells its breaker: it opens
//! (every tool of it leaves the hosts' list, calls are refused with when to retry), and the
//! server is not started again before the cooldown ends, when its handshake is the probe. One
//! more death right after it opens the breaker again: a restart loop is one start per cooldown,
//! never a retry storm. (Counted by the supervisor, not call by call: the first answer of each
//! new process — its tool list — would otherwise reset the count every time.)
//!
//! **A reload** (`reload.rs`) that gives it a new launch ends the connection under way (drained
//! first), the attempt under way, the backoff or the cooldown wait, and starts the new launch at
//! once, its backoff and deaths counted from zero; one that removes it drains and stops the
//! connection and ends the supervisor.

use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tool_health::mcp::{ToolHealthClient, ToolsChanged};
use tool_health::{BreakerState, CallOutcome, GateDecision};

use super::connect::{Connected, Ends};
use super::{Conn, Link, Phase, Upstream};
use crate::config::Launch;
use crate::notify::Lists;

/// A connection that lasted this long resets the restart backoff.
const STABLE_AFTER: Duration = Duration::from_secs(60);

/// The shortest wait between two attempts (a backoff of 0 still waits this long after a
/// failure, so a server that cannot start never spins a core).
const MIN_RETRY: Duration = Duration::from_millis(100);

/// The longest wait between two attempts to reach an HTTP server (see the module docs).
pub(crate) const HTTP_RETRY_MAX: Duration = Duration::from_secs(1);

/// How often a server that keeps dying looks at its breaker again while it cools down.
const COOL_DOWN_STEP: Duration = Duration::from_secs(5);

/// How long a closing connection may take (rmcp drains its answers, an HTTP session is
/// deleted) before what is left is stopped anyway.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// How a connection ended.
enum End {
    /// The server exited or closed the connection.
    Closed,
    /// A call met the connection's end.
    Broken,
    /// The HTTP session was lost (why).
    Lost(String),
    /// The gateway stops.
    Shutdown,
    /// A reload removed the server.
    Removed,
    /// A reload gave the server a new launch.
    Relaunch,
}

/// What ends a wait of the supervisor before its time.
enum Interrupt {
    /// The gateway stops, or a reload removed the server.
    Stop,
    /// A reload gave the server a new launch.
    Relaunch,
}

/// Runs until `shutdown` or the server's removal: connects, serves, reconnects.
pub(crate) async fn supervise(upstream: Arc<Upstream>, shutdown: CancellationToken) {
    let mut backoff = upstream.config().settings.restart.initial;
    // Failed attempts in a row (for a quiet log).
    let mut failures = 0u64;
    // Connections in a row that ended before they were up `STABLE_AFTER`.
    let mut deaths = 0u32;
    // A reload gave it a new launch: started at once, counted from zero.
    let mut relaunched = false;
    loop {
        let config = upstream.config();
        let restart = config.settings.restart;
        let threshold = config.settings.breaker.failure_threshold;
        let http = matches!(config.launch, Launch::Http { .. });
        drop(config);
        if std::mem::take(&mut relaunched) {
            backoff = restart.initial;
            failures = 0;
            deaths = 0;
        }
        if threshold > 0 && deaths >= threshold {
            // It keeps dying: no start before its breaker's cooldown ends.
            tokio::select! {
                () = upstream.cool_down() => {}
                i = upstream.interrupted(&shutdown) => match i {
                    Interrupt::Stop => break,
                    Interrupt::Relaunch => {
                        relaunched = true;
                        continue;
                    }
                },
            }
        }
        upstream.set_phase(Phase::Connecting, false);
        let attempt = tokio::select! {
            a = upstream.connect() => a,
            i = upstream.interrupted(&shutdown) => match i {
                Interrupt::Stop => break,
                Interrupt::Relaunch => {
                    relaunched = true;
                    continue;
                }
            },
        };
        let mut wait = backoff.max(MIN_RETRY);
        if http {
            wait = wait.min(HTTP_RETRY_MAX);
        }
        // Whether an attempt failed (a call waiting for it is answered then).
        let failed = match attempt {
            Ok(connected) => {
                failures = 0;
                let started = Instant::now();
                match upstream.serve(connected, &shutdown, &mut deaths).await {
                    End::Shutdown | End::Removed => break,
                    End::Relaunch => {
                        relaunched = true;
                        continue;
                    }
                    End::Closed | End::Broken | End::Lost(_) => {}
                }
                if started.elapsed() >= STABLE_AFTER {
                    backoff = restart.initial;
                    wait = backoff.max(MIN_RETRY);
                }
                false
            }
            Err(why) => {
                failures += 1;
                upstream.update(|s| s.last_error = Some(why.clone()));
                if failures == 1 || failures.is_multiple_of(10) {
                    tracing::warn!(
                        server = %upstream.name,
                        "MCP server `{}`: {why}; trying again in {:.1} s{}",
                        upstream.name,
                        wait.as_secs_f64(),
                        if failures > 1 {
                            format!(" (attempt {failures}; said every tenth)")
                        } else {
                            String::new()
                        }
                    );
                }
                true
            }
        };
        upstream.set_phase(Phase::Waiting(tokio::time::Instant::now() + wait), failed);
        // An HTTP server is tried again at once when a call waits for it (no sooner than
        // `MIN_RETRY` after the last attempt): one request, and the call goes on when it answers.
        let asked = async {
            if http {
                tokio::time::sleep(MIN_RETRY).await;
                upstream.wanted.notified().await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = asked => {}
            i = upstream.interrupted(&shutdown) => match i {
                Interrupt::Stop => break,
                Interrupt::Relaunch => relaunched = true,
            },
        }
        backoff = (backoff.max(MIN_RETRY) * 2).min(restart.max);
    }
    upstream.set_phase(Phase::Stopped, false);
}

impl Upstream {
    /// Waits until the gateway stops, a reload removes the server or gives it a new launch.
    async fn interrupted(&self, shutdown: &CancellationToken) -> Interrupt {
        tokio::select! {
            () = shutdown.cancelled() => Interrupt::Stop,
            () = self.removed.cancelled() => Interrupt::Stop,
            () = self.relaunch.notified() => Interrupt::Relaunch,
        }
    }

    /// Moves the supervisor's phase (`ended`: an attempt or a connection just ended).
    fn set_phase(&self, phase: Phase, ended: bool) {
        self.link.send_modify(|l: &mut Link| {
            l.phase = phase;
            if ended {
                l.attempts += 1;
            }
        });
    }

    /// Serves one connection until it ends, then takes it out, counts it among the `deaths` in
    /// a row (see the module docs) and stops what is left of it.
    async fn serve(
        self: &Arc<Self>,
        connected: Connected,
        shutdown: &CancellationToken,
        deaths: &mut u32,
    ) -> End {
        let started = Instant::now();
        let Connected { running, mut ends } = connected;
        let broken = CancellationToken::new();
        self.install(running.peer().clone(), ends.pid(), broken.clone());
        if super::listen::wanted(running.peer()) {
            // MCP 2026-07-28: its changes come on a stream the gateway opens (`listen.rs`).
            tokio::spawn(Arc::clone(self).listen(running.peer().clone(), broken.clone()));
        }
        let first = self.state().starts == 1;
        tracing::info!(
            server = %self.name,
            pid = ends.pid(),
            "MCP server `{}` connected{}",
            self.name,
            if first { "" } else { " again" }
        );
        self.handshake_answered();
        // Attempts end here too: a call waiting for this one goes on.
        self.set_phase(Phase::Up, true);
        // Learn its tools (through the breakers: nothing is sent while it refuses).
        self.start_listing();
        // What hosts asked of it before: the logging level, resource subscriptions.
        self.restore();
        self.hosts.changed();
        let stop = running.cancellation_token();
        let mut waiting = std::pin::pin!(running.waiting());
        let mut closed = false;
        let watch = match &ends {
            Ends::Http { watch } => Some(watch.clone()),
            Ends::Stdio { .. } => None,
        };
        let end = loop {
            let lost = async {
                match &watch {
                    Some(w) => w.lost().await,
                    None => std::future::pending().await,
                }
            };
            let renewed = async {
                match &watch {
                    Some(w) => w.renewed().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = &mut waiting => {
                    closed = true;
                    break End::Closed;
                }
                () = broken.cancelled() => break End::Broken,
                () = ends.exited() => break End::Closed,
                () = lost => break End::Lost(watch.as_ref().and_then(|w| w.why()).unwrap_or_default()),
                () = renewed => {
                    // rmcp initialized a new session (the server no longer knew the old
                    // one): the server may have restarted with other tools.
                    tracing::info!(server = %self.name, "MCP server `{}` no longer knew its session: a new one was initialized", self.name);
                    if let Some(conn) = self.conn.load_full() {
                        conn.client.server_list_changed();
                    }
                }
                () = shutdown.cancelled() => break End::Shutdown,
                () = self.removed.cancelled() => break End::Removed,
                () = self.relaunch.notified() => break End::Relaunch,
            }
        };
        let reloaded = matches!(end, End::Removed | End::Relaunch);
        let conn = self.conn.load_full();
        // Taken out first: no call goes through it any more, its tools leave the list.
        broken.cancel();
        self.conn.store(None);
        self.update(|s| {
            s.connected = false;
            s.since = None;
        });
        if let (true, Some(conn)) = (reloaded, conn) {
            // A call from now on waits for the new launch's connection (or is told the server
            // was removed); the hosts' lists lose its tools; calls under way may finish.
            self.set_phase(Phase::Waiting(tokio::time::Instant::now()), false);
            self.hosts.changed();
            tokio::select! {
                () = self.drain(&conn) => {}
                () = shutdown.cancelled() => {}
            }
        }
        if !matches!(end, End::Shutdown | End::Removed | End::Relaunch) {
            // Counted before anything else is done: a call from now on meets the breaker.
            *deaths = if started.elapsed() >= STABLE_AFTER {
                1
            } else {
                deaths.saturating_add(1)
            };
            let threshold = self.config().settings.breaker.failure_threshold;
            if threshold > 0 && *deaths >= threshold {
                self.keeps_dying(*deaths);
            }
            // Not connected: a call waits for the restart (the loop sets when it is due).
            self.set_phase(Phase::Waiting(tokio::time::Instant::now()), false);
            self.hosts.changed();
        }
        // Closed: for stdio, the server's stdin; for HTTP, the session is deleted.
        stop.cancel();
        if !closed {
            let _ = tokio::time::timeout(CLOSE_TIMEOUT, &mut waiting).await;
        }
        let how = ends.stop().await;
        let what = match (&end, &self.config().launch) {
            (End::Closed, Launch::Stdio { .. }) => "exited or closed its stdout".to_owned(),
            (End::Closed, Launch::Http { .. }) => "closed its connection".to_owned(),
            (End::Broken, _) => "closed its connection under a call".to_owned(),
            (End::Lost(why), _) => format!("lost its session: {why}"),
            (End::Shutdown, _) => "was stopped".to_owned(),
            (End::Removed, _) => "was removed from the config and stopped".to_owned(),
            (End::Relaunch, _) => "was stopped to start its new launch from the config".to_owned(),
        };
        let what = self.masked(&format!("{what}{how}"));
        if reloaded {
            tracing::info!(server = %self.name, "MCP server `{}` {what}", self.name);
        } else if !matches!(end, End::Shutdown) {
            tracing::warn!(
                server = %self.name,
                "MCP server `{}` {what}; connecting again",
                self.name,
            );
            self.update(|s| s.last_error = Some(format!("the connection ended: it {what}")));
        }
        end
    }

    /// The server keeps dying (`deaths` connections in a row ended early): its breaker opens
    /// (see the module docs).
    fn keeps_dying(&self, deaths: u32) {
        let servers = tool_health::mcp::server_registry(&self.registry);
        let threshold = self.config().settings.breaker.failure_threshold;
        for _ in 0..threshold {
            if servers.breaker_state(&self.name) == BreakerState::Open {
                break;
            }
            servers.record_failure(&self.name, Duration::ZERO);
        }
        let retry = servers
            .snapshot(&self.name)
            .and_then(|s| s.retry_after)
            .unwrap_or_default();
        tracing::warn!(
            server = %self.name,
            "MCP server `{}` ended {deaths} times in a row within a minute of starting: every tool \
             of it is refused, and it is started again when its cooldown ends (in {:.1} s)",
            self.name,
            retry.as_secs_f64()
        );
    }

    /// Waits while the server's breaker refuses (re-read every few seconds: an operator may
    /// release it).
    async fn cool_down(&self) {
        while let Some(left) = self.refused_for() {
            let step = left.min(COOL_DOWN_STEP);
            self.set_phase(Phase::Waiting(tokio::time::Instant::now() + left), false);
            tokio::time::sleep(step).await;
        }
    }

    /// The handshake was answered: as good a probe as a `ping` (see the module docs).
    fn handshake_answered(&self) {
        let servers = tool_health::mcp::server_registry(&self.registry);
        if let GateDecision::Probe(permit) = servers.check_detached(&self.name) {
            servers.record_with_permit(&self.name, permit, CallOutcome::Success, Duration::ZERO);
            tracing::info!(server = %self.name, "MCP server `{}` answered its handshake: its breaker closes", self.name);
        }
    }

    /// Hands a new connection's peer to the clients: the first time a client is built (and its
    /// subscription started), afterwards the same client over the new peer, so the breakers of
    /// the old connection stay as they are.
    fn install(
        self: &Arc<Self>,
        peer: rmcp::service::Peer<rmcp::RoleClient>,
        pid: Option<u32>,
        broken: CancellationToken,
    ) {
        *self.caps.lock().unwrap_or_else(PoisonError::into_inner) =
            peer.peer_info().map(|info| info.capabilities.clone());
        // Held until the connection is stored: a reload's `retune` waits for it, or finds it.
        let mut last = self.client.lock().unwrap_or_else(PoisonError::into_inner);
        let config = self.config();
        let client = match last.as_ref() {
            Some(old) => old.with_peer(peer),
            None => {
                let shown = Arc::clone(&self.name);
                ToolHealthClient::new(peer, Arc::clone(&self.registry))
                    .server(&*self.name)
                    .shown_names(move |tool| format!("{shown}{}{tool}", crate::names::SEPARATOR))
            }
        };
        let client = super::tuned(client, &config);
        *last = Some(client.clone());
        let per_tool = super::per_tool(&client, &config);
        let mut subscription = self
            .subscription
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if subscription.is_none() {
            let hosts = Arc::clone(&self.hosts);
            let server = Arc::clone(&self.name);
            match client.on_tools_changed(move |change| {
                // A tool's breaker moves its tool only; the server's moves all it serves.
                let lists = match change {
                    ToolsChanged::Hidden { tool: Some(_), .. }
                    | ToolsChanged::Listed { tool: Some(_) }
                    | ToolsChanged::ServerList => Lists::TOOLS,
                    _ => Lists::ALL,
                };
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
                hosts.changed_lists(lists);
            }) {
                Ok(sub) => *subscription = Some(sub),
                Err(e) => tracing::error!("no tokio runtime for the tool-list subscription: {e}"),
            }
        }
        drop(subscription);
        self.conn.store(Some(Arc::new(Conn {
            client,
            per_tool,
            broken,
            cut: CancellationToken::new(),
        })));
        drop(last);
        self.update(|st| {
            st.connected = true;
            st.pid = pid;
            st.starts += 1;
            st.since = Some(Instant::now());
            st.last_error = None;
        });
    }
}
