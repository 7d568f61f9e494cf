//! Fleet mode: breaker decisions shared between the replicas of a service over Valkey or
//! Redis ≥ 7 — one server, Sentinel, or a cluster (`redis-cluster://`: the fleet's keys spread
//! over shards, each routed to its slot's primary) — (feature `fleet`; `rediss://` with
//! `fleet-tls`).
//!
//! Without it, each replica learns on its own that a tool is down (N × threshold failed calls),
//! each sends its own probe after the cooldown (N probes at a recovering service), failure-rate
//! windows see one replica's calls only, and an operator's force-open reaches one process. With
//! it:
//!
//! * **trips spread**: a replica's trip is written to the store (a script stamps it with the
//!   server's clock and numbers the episode, so racing trips make one), and every other replica
//!   opens its own breaker for the remaining cooldown — at once through pub/sub, at the latest
//!   at the next poll; recoveries spread the same way;
//! * **one probe per fleet per episode**: replicas claim the episode's probe from the store
//!   (set-if-absent with expiry) ahead of the cooldown's end; only the winner's gate grants it,
//!   the others keep refusing until the result spreads or the lease expires — a prober that
//!   dies frees the probe by expiry;
//! * **fleet-wide failure rates**: every poll, each replica adds its new counts to time buckets
//!   in the store (server time; a count is never sent twice), and a tool whose policy is
//!   [`TripPolicy::FailureRate`](crate::TripPolicy::FailureRate) trips on its own window, the
//!   fleet's, or either ([`RateScope`]); optionally only after `k` replicas tripped (quorum);
//! * **operator controls fleet-wide**: [`Fleet::force_open`], [`Fleet::force_closed`],
//!   [`Fleet::set_shadow`], [`Fleet::reset`] reach every replica.
//!
//! **The gate stays local.** The gate and record paths are the registry's atomics, fleet mode
//! on or off: one background task per registry talks to the store, hears local transitions
//! through a transition observer (off the record path's fast path), and applies what other
//! replicas decided through the registry's coordination surface — the same CAS loop the gate
//! uses. No call ever waits on the network, and when the store is down, hanging, restarted
//! empty, out of reach or failed over, every replica keeps breaking on its own and resyncs
//! (re-publishing its open breakers) when the store answers again — on a cluster shard by
//! shard, the others coordinating meanwhile. `FLEET.md` has the protocol, the guarantees, each
//! failure mode, cluster mode and what a fleet costs at scale.
//!
//! ```no_run
//! use std::sync::Arc;
//! use tool_health::fleet::FleetBuilder;
//! use tool_health::ToolHealthRegistry;
//!
//! #[tokio::main]
//! async fn main() -> Result<(), tool_health::fleet::FleetError> {
//!     let registry = Arc::new(ToolHealthRegistry::new());
//!     // From TOOL_HEALTH_FLEET_URL etc. (fleet mode off when unset) ...
//!     let fleet = match FleetBuilder::from_env()? {
//!         Some(builder) => Some(builder.start(&registry)?),
//!         // ... or in code.
//!         None => Some(FleetBuilder::new("redis://127.0.0.1:6379").start(&registry)?),
//!     };
//!     // Gate and record exactly as without a fleet: registry.check(..), registry.record_*(..).
//!     if let Some(fleet) = &fleet {
//!         println!("{:?}", fleet.status()); // connected, sync lag, last error
//!         fleet.force_open("payments", None).await?; // every replica refuses `payments`
//!     }
//!     Ok(())
//! }
//! ```
//!
//! Observability: the metrics [`CONNECTED`] (0/1), [`SYNC_LAG`], [`APPLIED`] and [`REJECTED`]
//! ([`Fleet::publish_metrics`]); the registry's own metrics report the fleet's refusals as a
//! `tool_health.calls` series with `tool_health.gate.source = fleet` and the `open → closed`
//! transitions only the fleet makes; refused and probe spans of a fleet decision carry
//! `tool_health.gate.source = fleet`; the log (target `tool_health::fleet`) says once when the
//! store goes away and comes back, and once per kind of untrustworthy value met.

mod config;
mod keys;
mod otel;
mod scripts;
mod store;
mod task;
#[cfg(feature = "fleet-tls")]
mod tls;
mod wire;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use crate::registry::ToolHealthRegistry;

pub use crate::semconv::{
    FLEET_ACTION as ACTION_ATTRIBUTE, FLEET_VALUE as VALUE_ATTRIBUTE,
    METRIC_FLEET_APPLIED as APPLIED, METRIC_FLEET_CONNECTED as CONNECTED,
    METRIC_FLEET_REJECTED as REJECTED, METRIC_FLEET_SYNC_LAG as SYNC_LAG,
};
pub use config::{
    env, FleetBuilder, RateScope, DEFAULT_COMMAND_TIMEOUT, DEFAULT_POLL_INTERVAL, DEFAULT_PREFIX,
    DEFAULT_PROBE_LEASE,
};
pub use keys::{DEFAULT_SHARDS, MAX_SHARDS};

use task::{Command, ControlChange, Shared};

/// The log target of fleet mode's events.
pub const LOG_TARGET: &str = "tool_health::fleet";

/// Why fleet mode could not do something. Never holds a credential: URLs are shown without
/// them, and client errors are redacted.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FleetError {
    /// A setting is invalid (the message names it, never its value if it is a credential).
    Config(String),
    /// [`FleetBuilder::start`] was called outside a tokio runtime.
    NoRuntime,
    /// A `rediss://` URL, but the crate was built without feature `fleet-tls`.
    TlsNotCompiled,
    /// TLS could not be set up (unreadable CA file, no trust roots).
    Tls(String),
    /// The store did not answer (down, paused, out of reach), or answered an error.
    Unavailable(String),
    /// The store refused the credentials.
    Auth,
    /// The store answered something the protocol does not define: ignored.
    Rejected,
    /// The tool's name is too long to share (over 256 bytes): it is broken locally only.
    NotShared,
    /// The fleet's task has stopped (the [`Fleet`] was shut down).
    Stopped,
}

impl fmt::Display for FleetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FleetError::Config(s) => write!(f, "fleet configuration: {s}"),
            FleetError::NoRuntime => {
                f.write_str("fleet mode needs a tokio runtime: call FleetBuilder::start inside one")
            }
            FleetError::TlsNotCompiled => {
                f.write_str("a rediss:// URL needs the `fleet-tls` feature of tool-health")
            }
            FleetError::Tls(s) => write!(f, "fleet TLS: {s}"),
            FleetError::Unavailable(s) => write!(f, "the fleet's store is unavailable: {s}"),
            FleetError::Auth => f.write_str(
                "the fleet's store refused the credentials (check the user and password)",
            ),
            FleetError::Rejected => f.write_str("the fleet's store answered an unexpected value"),
            FleetError::NotShared => {
                f.write_str("the tool's name is too long to share with the fleet (over 256 bytes)")
            }
            FleetError::Stopped => f.write_str("the fleet was shut down"),
        }
    }
}

impl std::error::Error for FleetError {}

/// How the fleet is doing, from [`Fleet::status`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct FleetStatus {
    /// Whether the last exchange with the store succeeded.
    pub connected: bool,
    /// Time since the last complete exchange with the store (`None`: none yet).
    pub sync_lag: Option<Duration>,
    /// The last connection or command error (redacted), if any since the last success.
    pub last_error: Option<String>,
    /// This replica's id in the store (random per start).
    pub replica: String,
    /// Decisions of other replicas applied here so far (opens, closes, probe holds, controls).
    pub applied: u64,
    /// Values from the store not trusted so far (each kind logged once).
    pub rejected: u64,
}

/// A running fleet member: the background task beside one registry. Dropping it (or
/// [`shutdown`](Self::shutdown)) stops the task; the registry keeps working alone.
pub struct Fleet {
    shared: Arc<Shared>,
    commands: mpsc::Sender<Command>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl fmt::Debug for Fleet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fleet")
            .field("status", &self.status())
            .finish_non_exhaustive()
    }
}

impl FleetBuilder {
    /// Starts fleet mode for `registry`: builds the store clients, starts the background task
    /// on the current tokio runtime and returns at once — the store is connected to in the
    /// background (a store that is down now is connected to when it comes up). Errors are
    /// configuration errors only; see [`Fleet::wait_connected`] to wait for the store.
    pub fn start(self, registry: &Arc<ToolHealthRegistry>) -> Result<Fleet, FleetError> {
        self.validate()?;
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| FleetError::NoRuntime)?;
        let _entered = runtime.enter();
        let (store, events) = store::Store::new(&self)?;
        let (shared, commands, task) = task::spawn(self, Arc::clone(registry), store, events);
        Ok(Fleet {
            shared,
            commands,
            task: Some(task),
        })
    }
}

impl Fleet {
    /// How the fleet is doing now.
    pub fn status(&self) -> FleetStatus {
        self.shared.status()
    }

    /// This replica's id in the store.
    pub fn replica_id(&self) -> String {
        self.shared.replica.to_string()
    }

    /// Runs one complete exchange with the store now — local transitions sent, the store's
    /// state read and applied, due probe claims made, fleet-wide counts added — and waits for
    /// it. `Err` when the store did not answer (this replica then keeps breaking alone).
    /// Tests use it to wait for the network without sleeping; applications never need it.
    pub async fn sync_now(&self) -> Result<(), FleetError> {
        let (tx, rx) = oneshot::channel();
        self.commands
            .send(Command::Sync(tx))
            .await
            .map_err(|_| FleetError::Stopped)?;
        rx.await.map_err(|_| FleetError::Stopped)?
    }

    /// Waits until the store has answered, at most `timeout`: `Err(Auth)` as soon as it refused
    /// the credentials, `Err(Unavailable)` with the last error when time ran out. Calls never
    /// need this: the gate works while the store is away.
    pub async fn wait_connected(&self, timeout: Duration) -> Result<(), FleetError> {
        self.shared.wait_connected(timeout).await
    }

    /// Isolates the tool on every replica: every call is refused, for `duration` (`None`:
    /// until released). Applied here at once, then written to the store; `Err` when the store
    /// did not take it (it then holds here only).
    pub async fn force_open(
        &self,
        tool: &str,
        duration: Option<Duration>,
    ) -> Result<(), FleetError> {
        self.control(tool, ControlChange::ForceOpen(duration)).await
    }

    /// Disables the tool's breaker on every replica (see
    /// [`ToolHealthRegistry::force_closed`]).
    pub async fn force_closed(&self, tool: &str) -> Result<(), FleetError> {
        self.control(tool, ControlChange::ForceClosed).await
    }

    /// Ends a forced mode on every replica (shadow mode is left as it is).
    pub async fn release_control(&self, tool: &str) -> Result<(), FleetError> {
        self.control(tool, ControlChange::Release).await
    }

    /// Shadow mode on or off on every replica.
    pub async fn set_shadow(&self, tool: &str, on: bool) -> Result<(), FleetError> {
        self.control(tool, ControlChange::Shadow(on)).await
    }

    /// Resets the tool on every replica (see [`ToolHealthRegistry::reset`]); its open episode
    /// closes fleet-wide.
    pub async fn reset(&self, tool: &str) -> Result<(), FleetError> {
        self.control(tool, ControlChange::Reset).await
    }

    async fn control(&self, tool: &str, change: ControlChange) -> Result<(), FleetError> {
        let (tx, rx) = oneshot::channel();
        self.commands
            .send(Command::Control(tool.to_owned(), change, tx))
            .await
            .map_err(|_| FleetError::Stopped)?;
        rx.await.map_err(|_| FleetError::Stopped)?
    }

    /// Registers the fleet's instruments on `meter`: [`CONNECTED`] (gauge, 1 while the store
    /// answers), [`SYNC_LAG`] (gauge, seconds since the last complete exchange), [`APPLIED`]
    /// (counter by [`ACTION_ATTRIBUTE`]: `open`, `close`, `hold`, `control`) and [`REJECTED`]
    /// (counter by [`VALUE_ATTRIBUTE`]: `reply`, `message`, `stored`, `future`). Callbacks hold
    /// the fleet's state weakly.
    pub fn publish_metrics(&self, meter: &opentelemetry::metrics::Meter) {
        otel::publish(&self.shared, meter);
    }

    /// Stops the background task and closes the store connections (bounded by the command
    /// timeout). The registry keeps working alone; its local failure-rate trips are back on.
    pub async fn shutdown(mut self) {
        let (tx, rx) = oneshot::channel();
        if self.commands.send(Command::Shutdown(tx)).await.is_ok() {
            let _ = rx.await;
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        // The task ends when the command channel closes (the sender is dropped with `self`).
        if let Some(task) = self.task.take() {
            drop(task);
        }
    }
}
