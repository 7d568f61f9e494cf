//! The server breaker: one entry per MCP server, in a registry of its own beside the tools'.
//!
//! **Why a second registry.** A server's breaker must not be listed among the tools — not in
//! [`health_summary`](ToolHealthRegistry::health_summary), not in
//! [`unavailable_tools`](ToolHealthRegistry::unavailable_tools), not in the metrics' tool
//! series — and must never collide with a tool of the same name. A kind of entry inside the
//! tools' registry would need a filter in every read, every exporter and the fleet; a registry
//! of its own needs none, and gives the server every read and control a tool has
//! (`snapshot`, `breaker_state`, `force_open_for`, policies) for free. It hangs off the tools'
//! registry (created on first use, same clock and default config), so every client of one
//! registry that names the same server shares one server breaker, and the tool gate's hot path
//! is untouched. Its series are published by [`publish_metrics`](crate::publish_metrics) as
//! `tool_health.server.breaker.state`, attribute `mcp.server.name`.
//!
//! **What counts against the server**: transport failures (the connection closed, a message
//! that could not be sent) and a `ping` that times out. A timed-out call is followed by one
//! `ping`: answered, the timeout is the tool's (a tool that hangs); unanswered, it is the
//! server's (a server that answers nothing at all). Every answer — a result, `isError` or not,
//! a JSON-RPC error, a `ping`'s — is a success of the server.
//!
//! **Its probe is a `ping`** — the request its protocol has for it: `ping` up to MCP
//! 2025-11-25, `server/discover` on 2026-07-28, which removed `ping` (its servers answer it
//! `-32601`). A server that implements neither still answers with a JSON-RPC error, and that
//! answer is taken for what it is: the server is there. When the server's cooldown has passed,
//! the next call sends one probe first (calls beside it are refused, as a tool's probe allows
//! one call): answered, the server's breaker closes and the call goes on to the tool's gate;
//! not answered, the server stays open for another cooldown and the call is refused.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::breaker::{BreakerState, Transition, TransitionReason};
use crate::call::{CallOutcome, GateDecision, Permit};
use crate::registry::{HealthObserver, ToolHealthRegistry, LOG_TARGET};

/// The registry of the MCP servers `registry`'s tools are reached through: one entry per
/// server name (see [`ToolHealthClient::server`](super::ToolHealthClient::server)), created with
/// the tools' registry's clock and default config when the first client is built. Read a
/// server's breaker there (`breaker_state(name)`, `snapshot(name)`, `health_summary()`), set its
/// policy, or take it out by hand (`force_open_for(name, …)`).
pub fn server_registry(registry: &ToolHealthRegistry) -> &Arc<ToolHealthRegistry> {
    registry.servers(|servers| {
        // Logged in the servers' own words (below), not as tools.
        servers.set_log_transitions(false);
        servers.add_transition_observer(Arc::new(ServerLog));
    })
}

/// What the server's gate let through.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ServerGate {
    /// Admitted, with the permit to report the call's outcome through.
    Allowed(Permit),
    /// Cooling down: the server's probe may be sent now.
    Probe(Permit),
    /// Refused, retry after this long.
    Refused(Duration),
}

/// How a call ended for the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ServerOutcome {
    /// The server answered (whatever the answer said).
    Answered,
    /// The server did not: a transport failure, or no answer to a `ping` either.
    Failed,
    /// Nothing to say (cancelled, given up by the caller).
    Unknown,
}

/// One server's breaker, as the client uses it.
#[derive(Clone)]
pub(crate) struct ServerBreaker {
    pub(crate) servers: Arc<ToolHealthRegistry>,
    pub(crate) name: Arc<str>,
}

impl fmt::Debug for ServerBreaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerBreaker")
            .field("name", &self.name)
            .field("state", &self.servers.breaker_state(&self.name))
            .finish()
    }
}

impl ServerBreaker {
    /// The gate (never bound to a tool span: the server's decision is no tool's).
    pub(crate) fn gate(&self) -> ServerGate {
        match self.servers.check_detached(&self.name) {
            GateDecision::Allowed(p) => ServerGate::Allowed(p),
            GateDecision::Probe(p) => ServerGate::Probe(p),
            GateDecision::Refused { retry_after } => ServerGate::Refused(retry_after),
        }
    }

    /// Records how a call admitted with `permit` ended for the server.
    pub(crate) fn record(&self, permit: Permit, outcome: ServerOutcome, duration: Duration) {
        let outcome = match outcome {
            ServerOutcome::Answered => CallOutcome::Success,
            ServerOutcome::Failed => CallOutcome::Failure,
            ServerOutcome::Unknown => {
                if permit.is_probe() {
                    self.servers.release(&self.name, permit);
                }
                return;
            }
        };
        self.servers
            .record_with_permit(&self.name, permit, outcome, duration);
    }

    /// While the server's gate refuses calls: when it would next admit one.
    pub(crate) fn retry_after_now(&self) -> Option<Duration> {
        self.servers
            .snapshot(&self.name)
            .and_then(|s| s.retry_after)
    }

    /// When the server's gate would next admit a call (zero when it admits now).
    pub(crate) fn retry_after(&self) -> Duration {
        self.servers
            .snapshot(&self.name)
            .and_then(|s| s.retry_after)
            .unwrap_or_default()
    }
}

/// Gives a probe back if the call holding it is dropped before it reports.
pub(crate) struct ProbeGuard<'a> {
    pub(crate) server: &'a ServerBreaker,
    pub(crate) permit: Option<Permit>,
}

impl ProbeGuard<'_> {
    /// Reports the probe's outcome (and disarms the guard).
    pub(crate) fn settle(mut self, outcome: ServerOutcome, duration: Duration) {
        if let Some(permit) = self.permit.take() {
            self.server.record(permit, outcome, duration);
        }
    }
}

impl Drop for ProbeGuard<'_> {
    fn drop(&mut self) {
        if let Some(permit) = self.permit.take() {
            self.server
                .record(permit, ServerOutcome::Unknown, Duration::ZERO);
        }
    }
}

/// Logs a server's transitions (target `tool_health`, as the tools' transition log).
#[derive(Debug)]
struct ServerLog;

impl HealthObserver for ServerLog {
    fn on_transition(&self, server: &str, t: &Transition, _at: Duration) {
        match (t.to, t.reason) {
            (BreakerState::Open, TransitionReason::ProbeReleased) => {}
            (BreakerState::Open, reason) => tracing::warn!(
                target: LOG_TARGET,
                server,
                %reason,
                "MCP server `{server}` does not answer: every tool of it is refused until its \
                 cooldown ends, then one ping (server/discover on MCP 2026-07-28) probes it"
            ),
            (BreakerState::HalfOpen, _) => tracing::info!(
                target: LOG_TARGET,
                server,
                "MCP server `{server}` probed (ping, or server/discover on MCP 2026-07-28)"
            ),
            (BreakerState::Closed, reason) => tracing::info!(
                target: LOG_TARGET,
                server,
                %reason,
                "MCP server `{server}` answers again: its tools are called again"
            ),
        }
    }
}
