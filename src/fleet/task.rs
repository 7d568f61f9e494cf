//! The fleet's background task: one per registry, the only code that talks to the store.
//!
//! It wakes on a local transition (from the registry's transition observer, through a bounded
//! channel that never blocks the caller), a message on the events channel, a command from the
//! [`Fleet`](super::Fleet) handle, a probe claim falling due, and the poll tick. Each wake-up
//! runs to completion before the next: the task's view of each tool (`ToolSync`) is changed by
//! one thread only, and every decision it applies goes through the registry's coordination
//! surface — the gate never waits on any of this.
//!
//! # Per tool
//!
//! * `known_ep`: the highest episode number seen for the tool in this store's lifetime (boot);
//!   anything about an older episode is stale and ignored.
//! * `episode`: the fleet episode the local breaker is open for — adopted from another
//!   replica's trip, or this replica's own trip once the store numbered it — with the local
//!   breaker's generation at that time (what [`close_remotely`] names), when its cooldown ends
//!   on the registry's clock, and the state of its probe claim.
//!
//! # The probe
//!
//! A replica claims the episode's probe `lead` (twice the command timeout) before the cooldown
//! ends — or `lead` after it when it saw no demand for the tool (no refusal since the episode
//! began and not its own trip), so that a replica with callers wins when there is one. Until
//! its claim is decided the local breaker's deadline is held past the claim (a probe hold, up
//! to `2 × lead` after the claim falls due: the claim's answer is bounded well within that) —
//! with or without callers, so that a claim made late (a busy task, a slow store) never leaves
//! the probe to the local gate alone. The claim won, the hold goes and the local gate grants
//! the probe when the cooldown ends; lost, the hold lasts until the winner's lease ends (plus
//! the same margin for the next claim), when the claim is made again (a dead winner's lease
//! simply expires). A claim the store cannot answer lifts the hold: the replica acts alone.
//!
//! [`close_remotely`]: crate::ToolHealthRegistry::close_remotely

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::{broadcast, mpsc, oneshot, Notify};

use crate::breaker::{BreakerState, Transition, TransitionReason};
use crate::policy::TripPolicy;
use crate::registry::coordination::{CoordinationView, ProbeHold};
use crate::registry::{HealthObserver, ToolHealthRegistry};

use super::config::{FleetBuilder, RateScope};
use super::store::{Store, StoreError};
use super::wire::{
    self, arg_ms, encode_tool, Boot, ClaimReply, ControlField, Rejected, ReplicaId, SettleReply,
    SharedControl, SharedMode, SharedState, TripReply,
};
use super::{FleetError, FleetStatus, LOG_TARGET};

/// Local transitions waiting for the task; past this many, the task resyncs instead.
const LOCAL_QUEUE: usize = 1024;
/// The most tools a poll asks the store for beyond those this replica holds state for.
const POLL_OPEN_MAX: usize = 1000;
/// How soon a round is retried while the store does not answer.
const RETRY_WHILE_DISCONNECTED: Duration = Duration::from_millis(250);
/// Tools per counts call.
const COUNTS_BATCH: usize = 256;

/// What the handle asks the task.
pub(super) enum Command {
    Sync(oneshot::Sender<Result<(), FleetError>>),
    Control(
        String,
        ControlChange,
        oneshot::Sender<Result<(), FleetError>>,
    ),
    Shutdown(oneshot::Sender<()>),
}

/// An operator's control, fleet-wide.
#[derive(Debug, Clone, Copy)]
pub(super) enum ControlChange {
    ForceOpen(Option<Duration>),
    ForceClosed,
    Release,
    Shadow(bool),
    Reset,
}

/// A local transition, as the task hears it.
#[derive(Debug)]
pub(super) struct LocalEvent {
    tool: Box<str>,
    transition: Transition,
}

/// The transition observer: a non-blocking send to the task.
#[derive(Debug)]
struct Listener {
    tx: mpsc::Sender<LocalEvent>,
    overflow: Arc<AtomicBool>,
    wake: Arc<Notify>,
}

impl HealthObserver for Listener {
    fn on_transition(&self, tool: &str, transition: &Transition, _at: Duration) {
        // The fleet's own decisions come back as transitions too: not news.
        if matches!(
            transition.reason,
            TransitionReason::RemoteOpen | TransitionReason::RemoteClose
        ) || tool.len() > wire::MAX_SHARED_NAME
        {
            return;
        }
        let event = LocalEvent {
            tool: tool.into(),
            transition: *transition,
        };
        if let Err(mpsc::error::TrySendError::Full(_)) = self.tx.try_send(event) {
            // Never block a caller: the task re-reads every breaker instead.
            self.overflow.store(true, Ordering::Relaxed);
            self.wake.notify_one();
        }
    }
}

/// What the task and the handle share.
pub(super) struct Shared {
    pub(super) replica: ReplicaId,
    started: Instant,
    connected: AtomicBool,
    auth_failed: AtomicBool,
    /// Milliseconds since `started` of the last complete exchange; `u64::MAX`: none yet.
    last_sync_ms: AtomicU64,
    last_error: Mutex<Option<String>>,
    pub(super) rejected: [AtomicU64; 4],
    /// open, close, hold, control.
    pub(super) applied: [AtomicU64; 4],
    changed: Notify,
}

pub(super) const APPLIED_ACTIONS: [&str; 4] = ["open", "close", "hold", "control"];
const OPEN: usize = 0;
const CLOSE: usize = 1;
const HOLD: usize = 2;
const CONTROL: usize = 3;

impl Shared {
    pub(super) fn status(&self) -> FleetStatus {
        let last = self.last_sync_ms.load(Ordering::Relaxed);
        FleetStatus {
            connected: self.connected.load(Ordering::Relaxed),
            sync_lag: (last != u64::MAX).then(|| {
                self.started
                    .elapsed()
                    .saturating_sub(Duration::from_millis(last))
            }),
            last_error: self
                .last_error
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
            replica: self.replica.to_string(),
            applied: self.applied.iter().map(|a| a.load(Ordering::Relaxed)).sum(),
            rejected: self
                .rejected
                .iter()
                .map(|a| a.load(Ordering::Relaxed))
                .sum(),
        }
    }

    pub(super) fn is_connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }

    /// Seconds since the last complete exchange (`None`: none yet).
    pub(super) fn sync_lag(&self) -> Option<Duration> {
        self.status().sync_lag
    }

    pub(super) async fn wait_connected(&self, timeout: Duration) -> Result<(), FleetError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let changed = self.changed.notified();
            if self.connected.load(Ordering::Relaxed) {
                return Ok(());
            }
            if self.auth_failed.load(Ordering::Relaxed) {
                return Err(FleetError::Auth);
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                let last = self
                    .last_error
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                return Err(FleetError::Unavailable(
                    last.unwrap_or_else(|| "no answer yet".to_owned()),
                ));
            }
        }
    }

    fn set_error(&self, error: Option<String>) {
        *self
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = error;
        self.changed.notify_waiters();
    }
}

/// The probe claim of one episode.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Claim {
    /// Not made yet.
    Pending,
    /// This replica holds the probe.
    Won,
    /// Another replica holds it until `until` (registry clock): claim again then.
    Lost { until: Duration },
    /// The store could not answer: this replica acts alone for this episode.
    Alone,
}

/// The fleet episode the local breaker is open for.
#[derive(Debug, Clone)]
struct Episode {
    ep: u64,
    /// The local breaker's generation when the episode was adopted.
    generation: u32,
    /// When the episode's cooldown ends here (registry clock).
    ready_at: Duration,
    /// This replica tripped it (its callers want the tool).
    tripped_here: bool,
    /// Refusals counted before the episode: more since means callers want the tool.
    demand_base: u64,
    claim: Claim,
    hold: Option<ProbeHold>,
}

/// The task's view of one tool.
#[derive(Debug, Clone, Default)]
struct ToolSync {
    hex: String,
    known_ep: u64,
    episode: Option<Episode>,
    /// Raw (success, failure) counts up to the last round: sent to the fleet's window (or, for
    /// a tool not under a failure rate then, or before this replica joined, never to be).
    sent: Option<(u64, u64)>,
    /// The newest control version applied, and what the fleet set.
    ctl_ver: u64,
    ctl: Option<SharedControl>,
    /// Fleet-wide resets seen.
    resets: Option<u64>,
    /// A newer format holds the tool's shared state: local only.
    future: bool,
}

impl ToolSync {
    fn holds_state(&self) -> bool {
        self.episode.is_some() || self.ctl.is_some()
    }
}

/// Where a state or control came from: a live message applies resets it has not seen, a read
/// of the store only records them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Message,
    Read,
}

/// The settings the task uses, from the builder.
#[derive(Debug, Clone)]
struct Settings {
    poll_interval: Duration,
    lead: Duration,
    probe_lease: Duration,
    rate_scope: RateScope,
    quorum: u32,
    quorum_window: Duration,
}

struct Task {
    registry: Arc<ToolHealthRegistry>,
    store: Store,
    shared: Arc<Shared>,
    settings: Settings,
    local: mpsc::Receiver<LocalEvent>,
    overflow: Arc<AtomicBool>,
    wake: Arc<Notify>,
    commands: mpsc::Receiver<Command>,
    tools: HashMap<String, ToolSync>,
    boot: Option<Boot>,
    /// Every locally open breaker must be re-published (after a store outage, a store that
    /// lost its data, or lost local events).
    resync: bool,
    /// Kinds of problems already logged (each once).
    warned: BTreeSet<&'static str>,
}

/// Starts the task; the registry hears it as a transition observer and a coordinator.
pub(super) fn spawn(
    builder: FleetBuilder,
    registry: Arc<ToolHealthRegistry>,
    store: Store,
) -> (
    Arc<Shared>,
    mpsc::Sender<Command>,
    tokio::task::JoinHandle<()>,
) {
    let shared = Arc::new(Shared {
        replica: ReplicaId::random(),
        started: Instant::now(),
        connected: AtomicBool::new(false),
        auth_failed: AtomicBool::new(false),
        last_sync_ms: AtomicU64::new(u64::MAX),
        last_error: Mutex::new(None),
        rejected: Default::default(),
        applied: Default::default(),
        changed: Notify::new(),
    });
    let (local_tx, local_rx) = mpsc::channel(LOCAL_QUEUE);
    let overflow = Arc::new(AtomicBool::new(false));
    let wake = Arc::new(Notify::new());
    registry.coordination().mark_coordinated();
    registry
        .coordination()
        .add_transition_observer(Arc::new(Listener {
            tx: local_tx,
            overflow: Arc::clone(&overflow),
            wake: Arc::clone(&wake),
        }));
    let (cmd_tx, cmd_rx) = mpsc::channel(64);
    let settings = Settings {
        poll_interval: builder.poll_interval,
        lead: builder.command_timeout.saturating_mul(2),
        probe_lease: builder.probe_lease,
        rate_scope: builder.rate_scope,
        quorum: builder.quorum,
        quorum_window: builder.quorum_window,
    };
    if settings.rate_scope == RateScope::Fleet {
        // Until the store answers, this replica breaks on its own window.
        registry.coordination().set_local_rate_trips(true);
    }
    // Counts made before this replica joined are not the fleet's: they are the baseline the
    // first counts sent are taken from. A tool created later counts from zero.
    let mut tools = HashMap::new();
    if settings.rate_scope != RateScope::Local {
        registry
            .coordination()
            .for_each_coordination_view(|name, v| {
                if let Some(hex) = encode_tool(name) {
                    let sent = Some((v.success, v.failure));
                    tools.insert(
                        name.to_owned(),
                        ToolSync {
                            hex,
                            sent,
                            ..ToolSync::default()
                        },
                    );
                }
            });
    }
    let task = Task {
        registry,
        store,
        shared: Arc::clone(&shared),
        settings,
        local: local_rx,
        overflow,
        wake,
        commands: cmd_rx,
        tools,
        boot: None,
        resync: true,
        warned: BTreeSet::new(),
    };
    let handle = tokio::spawn(task.run());
    (shared, cmd_tx, handle)
}

/// A receiver that may have closed: a closed one is never ready again (no busy loop).
async fn recv_or_pending<T: Clone>(rx: &mut Option<broadcast::Receiver<T>>) -> Result<T, bool> {
    match rx {
        Some(r) => match r.recv().await {
            Ok(v) => Ok(v),
            Err(broadcast::error::RecvError::Lagged(_)) => Err(true),
            Err(broadcast::error::RecvError::Closed) => {
                *rx = None;
                Err(false)
            }
        },
        None => std::future::pending().await,
    }
}

impl Task {
    async fn run(mut self) {
        // Listening before connecting: the first connection is an event too.
        let mut connections = Some(self.store.connections());
        let mut errors = Some(self.store.errors());
        self.store.connect();
        let mut messages = Some(self.store.messages());
        let mut next_round = tokio::time::Instant::now();
        loop {
            let wake_at = self.next_claim_instant().min(next_round);
            tokio::select! {
                biased;
                cmd = self.commands.recv() => match cmd {
                    None => break,
                    Some(Command::Shutdown(done)) => {
                        self.stop().await;
                        let _ = done.send(());
                        return;
                    }
                    Some(Command::Sync(reply)) => {
                        let r = self.round().await;
                        next_round = tokio::time::Instant::now() + self.until_next_round();
                        let _ = reply.send(r);
                    }
                    Some(Command::Control(tool, change, reply)) => {
                        let r = self.control(&tool, change).await;
                        let _ = reply.send(r);
                    }
                },
                ev = self.local.recv() => {
                    if let Some(ev) = ev {
                        self.on_local(ev).await;
                    }
                }
                _ = self.wake.notified() => {
                    if self.overflow.swap(false, Ordering::Relaxed) {
                        self.resync = true;
                    }
                }
                msg = recv_or_pending(&mut messages) => match msg {
                    Ok(m) => self.on_message(&m).await,
                    Err(true) => self.resync = true, // lagged: messages were lost
                    Err(false) => {}
                },
                conn = recv_or_pending(&mut connections) => {
                    // Connected (again): a round now rather than at the next retry or poll —
                    // the first sync, or the resync after an outage, without waiting.
                    if conn.is_ok() || conn == Err(true) {
                        let _ = self.round().await;
                        next_round = tokio::time::Instant::now() + self.until_next_round();
                    }
                }
                err = recv_or_pending(&mut errors) => {
                    if let Ok((e, _)) = err {
                        let (auth, text) = self.store.describe(&e);
                        self.disconnected(text, auth);
                    }
                }
                _ = tokio::time::sleep_until(wake_at) => {
                    if tokio::time::Instant::now() >= next_round {
                        let _ = self.round().await;
                        next_round = tokio::time::Instant::now() + self.until_next_round();
                    } else {
                        self.claims().await;
                    }
                }
            }
        }
        self.stop().await;
    }

    /// The poll interval while the store answers; while it does not, a short retry (at most
    /// the poll interval) so that a store that comes back — or answers for the first time — is
    /// resynced at once rather than a poll interval later.
    fn until_next_round(&self) -> Duration {
        if self.shared.is_connected() {
            self.settings.poll_interval
        } else {
            self.settings.poll_interval.min(RETRY_WHILE_DISCONNECTED)
        }
    }

    /// Leaves the registry as it would be without a fleet, and closes the connections.
    async fn stop(&mut self) {
        self.registry.coordination().set_local_rate_trips(true);
        for (tool, ts) in &mut self.tools {
            if let Some(hold) = ts.episode.as_mut().and_then(|e| e.hold.take()) {
                self.registry.coordination().release_hold(tool, hold);
            }
        }
        self.store.quit().await;
    }

    // ---------------------------------------------------------------------------------------
    // Bookkeeping
    // ---------------------------------------------------------------------------------------

    /// The tool's view, created on first use; `None` for a name that is not shared.
    fn tool(&mut self, tool: &str) -> Option<&mut ToolSync> {
        if !self.tools.contains_key(tool) {
            let hex = encode_tool(tool)?;
            self.tools.insert(
                tool.to_owned(),
                ToolSync {
                    hex,
                    ..ToolSync::default()
                },
            );
        }
        self.tools.get_mut(tool)
    }

    fn now(&self) -> Duration {
        self.registry.now()
    }

    fn warn_once(&mut self, key: &'static str, message: impl FnOnce() -> String) {
        if self.warned.insert(key) {
            tracing::warn!(target: LOG_TARGET, "{}", message());
        }
    }

    fn reject(&mut self, kind: Rejected, count: u64) {
        if count == 0 {
            return;
        }
        self.shared.rejected[kind as usize].fetch_add(count, Ordering::Relaxed);
        let key = match kind {
            Rejected::Reply => "rejected-reply",
            Rejected::Message => "rejected-message",
            Rejected::Stored => "rejected-stored",
            Rejected::Future => "rejected-future",
        };
        self.warn_once(key, || {
            format!(
                "fleet: ignored {kind} from the store; no breaker was opened or closed on it \
                 (said once; counted in tool_health.fleet.rejected)"
            )
        });
    }

    /// A reply's boot id and corrupt count: a new boot means the store lost its data (or this
    /// is the first answer): every episode number is forgotten and open breakers re-published.
    fn note(&mut self, boot: Boot, corrupt: u64) {
        self.reject(Rejected::Stored, corrupt);
        if self.boot == Some(boot) {
            return;
        }
        if self.boot.is_some() {
            tracing::info!(
                target: LOG_TARGET,
                "fleet: the store lost its data (restarted empty, flushed or failed over); \
                 re-publishing the open breakers"
            );
        }
        self.boot = Some(boot);
        self.resync = true;
        for ts in self.tools.values_mut() {
            ts.known_ep = 0;
            ts.ctl_ver = 0;
            ts.resets = None;
        }
    }

    fn connected(&mut self) {
        let was = self.shared.connected.swap(true, Ordering::Relaxed);
        self.shared.auth_failed.store(false, Ordering::Relaxed);
        self.shared.last_sync_ms.store(
            u64::try_from(self.shared.started.elapsed().as_millis()).unwrap_or(u64::MAX - 1),
            Ordering::Relaxed,
        );
        self.shared.set_error(None);
        if !was {
            self.warned.remove("disconnected");
            self.warned.remove("auth");
            if self.warned.insert("connected") {
                // The first connection is silent; a reconnection is news.
            } else {
                tracing::info!(
                    target: LOG_TARGET,
                    url = %self.store.shown_url,
                    "fleet: the store answers again; resynced"
                );
            }
            self.resync = true;
        }
        self.apply_scope();
    }

    fn disconnected(&mut self, error: String, auth: bool) {
        let was = self.shared.connected.swap(false, Ordering::Relaxed);
        if auth {
            self.shared.auth_failed.store(true, Ordering::Relaxed);
        }
        // A refusal of the credentials is said once, even after the outage was: the first
        // round's timeouts come before the connection's own error, and the log must name it.
        if auth && self.warned.insert("auth") {
            self.warned.insert("disconnected");
            tracing::warn!(
                target: LOG_TARGET,
                url = %self.store.shown_url,
                "fleet: the store refused the credentials (check the user and password); \
                 breaking locally until it accepts them"
            );
        } else if was || !self.warned.contains("disconnected") {
            self.warned.insert("disconnected");
            tracing::warn!(
                target: LOG_TARGET,
                url = %self.store.shown_url,
                error = %error,
                "fleet: the store does not answer; breaking locally until it does"
            );
        }
        self.shared.set_error(Some(error));
        self.resync = true;
        self.apply_scope();
    }

    fn store_failed(&mut self, e: &StoreError) {
        match e {
            StoreError::Reply => self.reject(Rejected::Reply, 1),
            StoreError::Auth => self.disconnected("the store refused the credentials".into(), true),
            // Commands time out while the connection cannot authenticate: the refusal is
            // the reason, not the timeout.
            StoreError::Timeout if self.shared.auth_failed.load(Ordering::Relaxed) => {
                self.disconnected("the store refused the credentials".into(), true)
            }
            StoreError::Timeout => {
                self.disconnected("the store did not answer in time".into(), false)
            }
            StoreError::Unavailable(s) | StoreError::Server(s) => {
                self.disconnected(s.clone(), false)
            }
        }
    }

    /// Fleet-only rates: the local window trips while the store is away.
    fn apply_scope(&self) {
        if self.settings.rate_scope == RateScope::Fleet {
            self.registry
                .coordination()
                .set_local_rate_trips(!self.shared.is_connected());
        }
    }

    // ---------------------------------------------------------------------------------------
    // Local transitions
    // ---------------------------------------------------------------------------------------

    async fn on_local(&mut self, ev: LocalEvent) {
        let t = ev.transition;
        match (t.from, t.to, t.reason) {
            (BreakerState::Closed, BreakerState::Open, _) => self.publish_trip(&ev.tool).await,
            (BreakerState::HalfOpen, BreakerState::Closed, _) => {
                self.settle(&ev.tool, true).await;
                self.registry.coordination().end_coordination(&ev.tool);
            }
            (
                BreakerState::HalfOpen,
                BreakerState::Open,
                TransitionReason::ProbeFailed | TransitionReason::LeaseExpired,
            ) => self.settle(&ev.tool, false).await,
            _ => {}
        }
    }

    /// This replica's breaker tripped: join or open the fleet's episode.
    async fn publish_trip(&mut self, tool: &str) {
        let Some(view) = self.registry.coordination().coordination_view(tool) else {
            return;
        };
        if view.state != BreakerState::Open {
            return; // moved on already (the next event says how)
        }
        let cooldown = view.ready_in.unwrap_or(view.recovery);
        self.trip(tool, cooldown, true).await;
    }

    /// Runs the trip script for `tool` with `cooldown`; adopts the episode it answers.
    async fn trip(&mut self, tool: &str, cooldown: Duration, tripped_here: bool) -> bool {
        let replica = self.shared.replica;
        let (quorum, window) = (self.settings.quorum, self.settings.quorum_window);
        let Some(ts) = self.tool(tool) else {
            return true;
        };
        if ts.future {
            return true;
        }
        let args = vec![
            ts.hex.clone(),
            ts.known_ep.to_string(),
            arg_ms(cooldown).to_string(),
            replica.to_string(),
            quorum.to_string(),
            arg_ms(window).to_string(),
        ];
        let reply = match self.store.call(&self.store.scripts.trip, args).await {
            Ok(f) => f,
            Err(e) => {
                self.store_failed(&e);
                return false;
            }
        };
        let Some(r) = wire::trip_reply(&reply) else {
            self.reject(Rejected::Reply, 1);
            return false;
        };
        self.note(r.boot, r.corrupt);
        match r.value {
            TripReply::Open { ep, remaining, .. } => {
                self.adopt(tool, ep, remaining, tripped_here);
            }
            TripReply::Vote { .. } => {}
            TripReply::Future => {
                if let Some(ts) = self.tool(tool) {
                    ts.future = true;
                }
                self.reject(Rejected::Future, 1);
            }
        }
        true
    }

    /// The local breaker is open for fleet episode `ep`, whose probe may start in `remaining`.
    fn adopt(&mut self, tool: &str, ep: u64, remaining: Duration, tripped_here: bool) {
        let Some(ts) = self.tool(tool) else { return };
        ts.known_ep = ts.known_ep.max(ep);
        // A replica of this very episode does not re-apply it (a poll, an echo).
        if ts.episode.as_ref().is_some_and(|e| e.ep == ep) {
            return;
        }
        // Read before the open: `ready_at` may then be a hair early (a claim a hair early),
        // never late — a clock that moved between two readings must not push the claim past the
        // moment the local gate would let the probe through.
        let before = self.now();
        let Some(opened) =
            self.registry
                .coordination()
                .open_remotely(tool, remaining, !tripped_here)
        else {
            return; // past the registry's cap: this tool is not tracked here
        };
        tracing::debug!(
            target: LOG_TARGET,
            replica = %self.shared.replica,
            tool,
            ep,
            ?remaining,
            tripped_here,
            generation = opened.generation,
            "fleet: episode adopted"
        );
        if !tripped_here && !opened.recorded.is_empty() {
            self.shared.applied[OPEN].fetch_add(1, Ordering::Relaxed);
        }
        let refused = self
            .registry
            .coordination()
            .coordination_view(tool)
            .map_or(0, |v| v.refused);
        let episode = Episode {
            ep,
            generation: opened.generation,
            ready_at: before.saturating_add(opened.ready_in),
            tripped_here,
            demand_base: refused,
            claim: Claim::Pending,
            hold: None,
        };
        if let Some(ts) = self.tools.get_mut(tool) {
            ts.episode = Some(episode);
        }
        self.hold_for_claim(tool);
    }

    /// Keeps the local gate from probing before this replica's claim is decided.
    fn hold_for_claim(&mut self, tool: &str) {
        let now = self.now();
        let lead = self.settings.lead;
        let Some(view) = self.registry.coordination().coordination_view(tool) else {
            return;
        };
        let Some(e) = self.tools.get_mut(tool).and_then(|t| t.episode.as_mut()) else {
            return;
        };
        let Some(due) = claim_due(e, &view, lead) else {
            return;
        };
        // Until the claim is decided — made at `due`, answered within the command timeout's
        // bound — the local gate grants no probe, whether this replica has callers or not: a
        // claim made late (a busy task, a slow store) must not leave the probe to the local
        // gate alone. Won: the hold is released at once; lost: it becomes the winner's lease;
        // no answer: the replica acts alone when the hold ends.
        let until = due.max(now).saturating_add(lead.saturating_mul(2));
        if let Some(hold) = self
            .registry
            .coordination()
            .hold_probe(tool, until.saturating_sub(now))
        {
            e.hold = Some(hold);
        }
    }

    /// The probe of this replica's episode ended: `closed` (it succeeded) or not.
    async fn settle(&mut self, tool: &str, closed: bool) {
        let replica = self.shared.replica;
        let cooldown = self
            .registry
            .coordination()
            .coordination_view(tool)
            .and_then(|v| v.ready_in.or(Some(v.recovery)))
            .unwrap_or_default();
        let Some(ts) = self.tool(tool) else { return };
        let Some(e) = ts.episode.clone() else {
            // Not a fleet episode here (acting alone, or never shared): a new trip if it
            // re-opened; a close of nothing the store knows is nothing to say.
            if !closed {
                self.publish_trip(tool).await;
            }
            return;
        };
        let args = vec![
            ts.hex.clone(),
            e.ep.to_string(),
            if closed { "c" } else { "o" }.to_owned(),
            arg_ms(cooldown).to_string(),
            replica.to_string(),
        ];
        if closed {
            ts.episode = None;
        }
        let reply = match self.store.call(&self.store.scripts.settle, args).await {
            Ok(f) => f,
            Err(err) => {
                self.store_failed(&err);
                return;
            }
        };
        let Some(r) = wire::settle_reply(&reply) else {
            self.reject(Rejected::Reply, 1);
            return;
        };
        self.note(r.boot, r.corrupt);
        match r.value {
            SettleReply::Closed { ep } => {
                if let Some(ts) = self.tools.get_mut(tool) {
                    ts.known_ep = ts.known_ep.max(ep);
                }
            }
            SettleReply::Reopened { ep, remaining } => {
                if let Some(ts) = self.tools.get_mut(tool) {
                    ts.episode = None;
                }
                self.adopt(tool, ep, remaining, true);
            }
            // Another replica holds this episode's probe (this one acted alone): its result
            // will spread; this replica's own breaker keeps what its probe said.
            SettleReply::Held { .. } => {}
            SettleReply::Stale(state) => self.apply_state(tool, state, Source::Read).await,
        }
    }

    // ---------------------------------------------------------------------------------------
    // What other replicas did
    // ---------------------------------------------------------------------------------------

    async fn on_message(&mut self, m: &fred::types::Message) {
        if &*m.channel != self.store.channel() {
            return;
        }
        let Some(event) = m.value.as_bytes().and_then(wire::event) else {
            self.reject(Rejected::Message, 1);
            return;
        };
        if self.boot != Some(event.boot) {
            // Not the store this replica last read (or none yet): read it before anything.
            let _ = self.round().await;
            if self.boot != Some(event.boot) {
                return;
            }
        }
        let mine = event.by == self.shared.replica;
        match event.kind {
            wire::EventKind::Open {
                ep,
                remaining,
                cooldown: _,
            } => {
                let state = SharedState::Open {
                    ep,
                    remaining,
                    cooldown: remaining,
                    by: event.by,
                };
                self.apply_state(&event.tool, state, Source::Message).await;
            }
            wire::EventKind::Close { ep } => {
                let state = SharedState::Closed { ep, by: event.by };
                self.apply_state(&event.tool, state, Source::Message).await;
            }
            wire::EventKind::Control(c) if !mine => {
                self.apply_control(&event.tool, ControlField::Ok(c), Source::Message);
            }
            wire::EventKind::Control(_) => {}
        }
    }

    /// Brings the local breaker in line with the tool's shared state.
    async fn apply_state(&mut self, tool: &str, state: SharedState, _source: Source) {
        let replica = self.shared.replica;
        let Some(ts) = self.tool(tool) else { return };
        if ts.future {
            return;
        }
        match state {
            SharedState::Open {
                ep, remaining, by, ..
            } => {
                if ep > ts.known_ep {
                    self.adopt(tool, ep, remaining, by == replica);
                }
            }
            SharedState::Closed { ep, .. } => {
                ts.known_ep = ts.known_ep.max(ep);
                if let Some(e) = ts.episode.take_if(|e| e.ep <= ep) {
                    let recorded = self
                        .registry
                        .coordination()
                        .close_remotely(tool, e.generation);
                    tracing::debug!(
                        target: LOG_TARGET,
                        replica = %replica,
                        tool,
                        ep,
                        generation = e.generation,
                        closed = !recorded.is_empty(),
                        "fleet: episode closed elsewhere"
                    );
                    if !recorded.is_empty() {
                        self.shared.applied[CLOSE].fetch_add(1, Ordering::Relaxed);
                    }
                    self.registry.coordination().end_coordination(tool);
                }
            }
            SharedState::None => {
                // The store lost an episode this replica's breaker is open for: say it again.
                if let Some(e) = ts.episode.take() {
                    let remaining = self
                        .registry
                        .coordination()
                        .coordination_view(tool)
                        .and_then(|v| v.ready_in)
                        .unwrap_or_default();
                    let _ = e;
                    self.trip(tool, remaining, true).await;
                }
            }
            SharedState::Corrupt => {
                // Counted by the script that met it; the next trip replaces it. Meanwhile
                // this replica acts alone for the tool's episode.
                if let Some(e) = ts.episode.as_mut() {
                    e.claim = Claim::Alone;
                    if let Some(hold) = e.hold.take() {
                        self.registry.coordination().release_hold(tool, hold);
                    }
                }
            }
            SharedState::Future => {
                ts.future = true;
                if let Some(e) = ts.episode.as_mut() {
                    e.claim = Claim::Alone;
                    if let Some(hold) = e.hold.take() {
                        self.registry.coordination().release_hold(tool, hold);
                    }
                }
                self.reject(Rejected::Future, 1);
            }
        }
    }

    /// Applies an operator's control made on another replica (or read from the store).
    fn apply_control(&mut self, tool: &str, control: ControlField, source: Source) {
        let registry = Arc::clone(&self.registry);
        let Some(ts) = self.tool(tool) else { return };
        let c = match control {
            ControlField::Ok(c) => c,
            ControlField::None | ControlField::Corrupt => return,
            ControlField::Future => {
                ts.future = true;
                self.reject(Rejected::Future, 1);
                return;
            }
        };
        if c.ver <= ts.ctl_ver {
            return;
        }
        ts.ctl_ver = c.ver;
        let before = ts.ctl;
        match c.mode {
            SharedMode::Normal => {
                if before.is_some_and(|b| b.mode != SharedMode::Normal) {
                    registry.release_control(tool);
                }
            }
            SharedMode::ForcedOpen { remaining } if remaining == Duration::MAX => {
                registry.force_open(tool);
            }
            SharedMode::ForcedOpen { remaining } => {
                registry.force_open_for(tool, remaining);
            }
            SharedMode::ForcedClosed => {
                registry.force_closed(tool);
            }
        }
        if c.shadow != before.is_some_and(|b| b.shadow) {
            registry.set_shadow(tool, c.shadow);
        }
        let seen = ts.resets.unwrap_or(match source {
            Source::Message => c.resets.saturating_sub(1),
            Source::Read => c.resets,
        });
        if c.resets > seen {
            registry.reset(tool);
            ts.episode = None;
        }
        ts.resets = Some(c.resets);
        ts.ctl = Some(c);
        self.shared.applied[CONTROL].fetch_add(1, Ordering::Relaxed);
    }

    // ---------------------------------------------------------------------------------------
    // Rounds
    // ---------------------------------------------------------------------------------------

    /// One complete exchange: local events, the store's state, resync, claims, counts.
    async fn round(&mut self) -> Result<(), FleetError> {
        while let Ok(ev) = self.local.try_recv() {
            self.on_local(ev).await;
        }
        if self.overflow.swap(false, Ordering::Relaxed) {
            self.resync = true;
        }
        let mut result = Ok(());
        if let Err(e) = self.store.ensure_subscribed().await {
            self.store_failed(&e);
            result = Err(e.to_fleet());
        }
        match self.poll().await {
            Ok(()) => {}
            Err(e) => {
                self.store_failed(&e);
                return Err(e.to_fleet());
            }
        }
        if self.resync && !self.republish().await {
            return Err(FleetError::Unavailable(
                "the store stopped answering".into(),
            ));
        }
        self.claims().await;
        self.rates().await;
        self.forget_idle();
        if result.is_ok() && self.shared.is_connected() {
            self.connected();
        }
        result
    }

    /// Reads the store's state of every tool this replica holds state for, and of the tools
    /// open or controlled fleet-wide; applies it.
    async fn poll(&mut self) -> Result<(), StoreError> {
        let mut args = vec![POLL_OPEN_MAX.to_string()];
        let mut interest: Vec<String> = self
            .tools
            .values()
            .filter(|t| t.holds_state())
            .map(|t| t.hex.clone())
            .collect();
        if self.resync {
            // Breakers open here that the store may not know.
            let mut open = Vec::new();
            self.registry
                .coordination()
                .for_each_coordination_view(|name, v| {
                    if v.state == BreakerState::Open {
                        open.push(name.to_owned());
                    }
                });
            for name in open {
                if let Some(ts) = self.tool(&name) {
                    interest.push(ts.hex.clone());
                }
            }
        }
        args.push(interest.len().to_string());
        args.extend(interest);
        let reply = self.store.call(&self.store.scripts.poll, args).await?;
        let Some(r) = wire::poll_reply(&reply) else {
            return Err(StoreError::Reply);
        };
        self.connected();
        self.note(r.boot, r.corrupt);
        self.reject(Rejected::Reply, r.value.unreadable);
        for polled in r.value.tools {
            self.apply_state(&polled.tool, polled.state, Source::Read)
                .await;
            self.apply_control(&polled.tool, polled.control, Source::Read);
        }
        Ok(())
    }

    /// Re-publishes every breaker open here that has no fleet episode (after an outage, a
    /// store that lost its data, lost local events). Whether the store answered throughout.
    async fn republish(&mut self) -> bool {
        let mut open = Vec::new();
        self.registry
            .coordination()
            .for_each_coordination_view(|name, v| {
                if v.state == BreakerState::Open {
                    open.push((name.to_owned(), v.ready_in.unwrap_or(v.recovery)));
                }
            });
        for (tool, remaining) in open {
            let has_episode = self
                .tools
                .get(&tool)
                .is_some_and(|t| t.episode.is_some() || t.future);
            if !has_episode && !self.trip(&tool, remaining, true).await {
                return false;
            }
        }
        self.resync = false;
        true
    }

    /// When the next probe claim falls due, as a tokio instant (at most a poll interval on).
    fn next_claim_instant(&self) -> tokio::time::Instant {
        let now = self.now();
        let lead = self.settings.lead;
        let mut next = self.settings.poll_interval;
        for (tool, ts) in &self.tools {
            let Some(e) = &ts.episode else { continue };
            let Some(view) = self.registry.coordination().coordination_view(tool) else {
                continue;
            };
            if let Some(due) = claim_due(e, &view, lead) {
                next = next.min(due.saturating_sub(now));
            }
        }
        tokio::time::Instant::now() + next
    }

    /// Makes every probe claim that is due.
    async fn claims(&mut self) {
        let now = self.now();
        let lead = self.settings.lead;
        let mut due = Vec::new();
        for (tool, ts) in &mut self.tools {
            let Some(e) = &mut ts.episode else { continue };
            if e.claim == Claim::Alone && self.shared.is_connected() {
                e.claim = Claim::Pending; // the store is back: through the lease again
            }
            let Some(view) = self.registry.coordination().coordination_view(tool) else {
                continue;
            };
            tracing::trace!(
                target: LOG_TARGET,
                replica = %self.shared.replica,
                tool = tool.as_str(),
                ep = e.ep,
                claim = ?e.claim,
                due = ?claim_due(e, &view, lead),
                ?now,
                ready_at = ?e.ready_at,
                "fleet: claim due?"
            );
            if claim_due(e, &view, lead).is_some_and(|d| d <= now) {
                let lease = if view.probe_timeout.is_zero() {
                    self.settings.probe_lease
                } else {
                    view.probe_timeout
                };
                due.push((tool.clone(), ts.hex.clone(), e.ep, lease));
            }
        }
        for (tool, hex, ep, lease) in due {
            self.claim(&tool, hex, ep, lease).await;
        }
    }

    async fn claim(&mut self, tool: &str, hex: String, ep: u64, lease: Duration) {
        let replica = self.shared.replica;
        let args = vec![
            hex,
            ep.to_string(),
            replica.to_string(),
            arg_ms(lease).to_string(),
        ];
        let reply = self.store.call(&self.store.scripts.claim, args).await;
        let parsed = match &reply {
            Ok(f) => wire::claim_reply(f, replica),
            Err(_) => None,
        };
        let now = self.now();
        let lead = self.settings.lead;
        tracing::debug!(
            target: LOG_TARGET,
            replica = %self.shared.replica,
            tool,
            ep,
            reply = ?parsed.as_ref().map(|r| &r.value),
            "fleet: probe claim"
        );
        match (reply, parsed) {
            (Err(e), _) => {
                self.store_failed(&e);
                self.go_alone(tool);
            }
            (Ok(_), None) => {
                self.reject(Rejected::Reply, 1);
                self.go_alone(tool);
            }
            (Ok(_), Some(r)) => {
                self.note(r.boot, r.corrupt);
                match r.value {
                    ClaimReply::Won { .. } => {
                        if let Some(e) = self.episode_mut(tool, ep) {
                            e.claim = Claim::Won;
                            if let Some(hold) = e.hold.take() {
                                self.registry.coordination().release_hold(tool, hold);
                            }
                        }
                    }
                    ClaimReply::Lost { ttl, .. } => {
                        let registry = Arc::clone(&self.registry);
                        if let Some(e) = self.episode_mut(tool, ep) {
                            // The holder's lease ends at the latest `ttl` from now (it was
                            // counted on the server before this reply left it).
                            let until = now
                                .saturating_add(ttl)
                                .saturating_add(Duration::from_millis(1));
                            e.claim = Claim::Lost { until };
                            if let Some(hold) = registry.coordination().hold_probe(
                                tool,
                                until
                                    .saturating_sub(now)
                                    .saturating_add(lead.saturating_mul(2)),
                            ) {
                                e.hold = Some(hold);
                                self.shared.applied[HOLD].fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    ClaimReply::Stale(state) => self.apply_state(tool, state, Source::Read).await,
                }
            }
        }
    }

    fn episode_mut(&mut self, tool: &str, ep: u64) -> Option<&mut Episode> {
        self.tools
            .get_mut(tool)?
            .episode
            .as_mut()
            .filter(|e| e.ep == ep)
    }

    /// The store cannot decide this episode's probe: the hold goes, the local gate decides.
    fn go_alone(&mut self, tool: &str) {
        tracing::debug!(target: LOG_TARGET, replica = %self.shared.replica, tool, "fleet: acting alone");
        if let Some(e) = self.tools.get_mut(tool).and_then(|t| t.episode.as_mut()) {
            e.claim = Claim::Alone;
            if let Some(hold) = e.hold.take() {
                self.registry.coordination().release_hold(tool, hold);
            }
        }
    }

    /// Adds this replica's new counts to the fleet's windows and trips where the fleet's
    /// failure rate says so.
    async fn rates(&mut self) {
        if self.settings.rate_scope == RateScope::Local {
            return;
        }
        // Every tool, whatever its policy: what was counted up to now is marked sent each
        // round, so a tool that turns to a failure rate later sends only calls made since.
        let mut views: Vec<(String, CoordinationView)> = Vec::new();
        self.registry
            .coordination()
            .for_each_coordination_view(|name, v| {
                if name.len() <= wire::MAX_SHARED_NAME {
                    views.push((name.to_owned(), v.clone()));
                }
            });
        // One call per window width, in batches: (name, hex, new successes, new failures, view).
        type Row = (String, String, u64, u64, CoordinationView);
        let mut by_width: HashMap<u64, Vec<Row>> = HashMap::new();
        for (name, v) in views {
            let Some(ts) = self.tool(&name) else { continue };
            // Not marked yet: the tool was created since the last round (tools that existed
            // when this replica joined got their baseline then), so every count is new; counts
            // below the mark: the entry was evicted and created again, counting from zero.
            let (s0, f0) = match ts.sent {
                Some((s, f)) if s <= v.success && f <= v.failure => (s, f),
                _ => (0, 0),
            };
            let (ds, df) = (v.success - s0, v.failure - f0);
            // Marked sent before the call: a count is never sent twice (a lost call loses it).
            ts.sent = Some((v.success, v.failure));
            let TripPolicy::FailureRate { window, .. } = v.trip else {
                continue;
            };
            let width = arg_ms(window)
                .div_ceil(crate::policy::WINDOW_BUCKETS as u64)
                .max(1);
            let hex = ts.hex.clone();
            by_width
                .entry(width)
                .or_default()
                .push((name, hex, ds, df, v));
        }
        for (width, tools) in by_width {
            for batch in tools.chunks(COUNTS_BATCH) {
                let mut args = vec![width.to_string(), batch.len().to_string()];
                for (_, hex, ds, df, _) in batch {
                    args.extend([hex.clone(), ds.to_string(), df.to_string()]);
                }
                let reply = match self.store.call(&self.store.scripts.counts, args).await {
                    Ok(f) => f,
                    Err(e) => {
                        self.store_failed(&e);
                        return;
                    }
                };
                let Some(r) = wire::counts_reply(&reply) else {
                    self.reject(Rejected::Reply, 1);
                    return;
                };
                self.note(r.boot, r.corrupt);
                for (tool, successes, failures) in r.value {
                    let Some((_, _, _, _, v)) = batch.iter().find(|t| t.0 == tool) else {
                        continue;
                    };
                    let TripPolicy::FailureRate {
                        ratio, min_calls, ..
                    } = v.trip
                    else {
                        continue;
                    };
                    let calls = successes.saturating_add(failures);
                    let open_here = self.tools.get(&tool).is_some_and(|t| t.episode.is_some());
                    if !open_here
                        && v.state == BreakerState::Closed
                        && TripPolicy::rate_trips(ratio, min_calls, failures, calls)
                    {
                        let recovery = v.recovery;
                        self.trip(&tool, recovery, true).await;
                    }
                }
            }
        }
    }

    /// Forgets tools the registry no longer tracks and the fleet holds nothing for.
    fn forget_idle(&mut self) {
        if self.tools.len() <= self.registry.tracked_tools() {
            return;
        }
        let registry = Arc::clone(&self.registry);
        self.tools.retain(|name, t| {
            t.holds_state() || registry.coordination().coordination_view(name).is_some()
        });
    }

    // ---------------------------------------------------------------------------------------
    // Operator controls
    // ---------------------------------------------------------------------------------------

    async fn control(&mut self, tool: &str, change: ControlChange) -> Result<(), FleetError> {
        // Here at once, whatever the store does.
        let r = &self.registry;
        let (mode, for_ms, shadow, reset) = match change {
            ControlChange::ForceOpen(None) => {
                r.force_open(tool);
                ("1", wire::NEVER_MS, "-", "0")
            }
            ControlChange::ForceOpen(Some(d)) => {
                r.force_open_for(tool, d);
                ("1", arg_ms(d), "-", "0")
            }
            ControlChange::ForceClosed => {
                r.force_closed(tool);
                ("2", 0, "-", "0")
            }
            ControlChange::Release => {
                r.release_control(tool);
                ("0", 0, "-", "0")
            }
            ControlChange::Shadow(on) => {
                r.set_shadow(tool, on);
                ("-", 0, if on { "1" } else { "0" }, "0")
            }
            ControlChange::Reset => {
                r.reset(tool);
                ("-", 0, "-", "1")
            }
        };
        let replica = self.shared.replica;
        let Some(ts) = self.tool(tool) else {
            return Err(FleetError::NotShared);
        };
        if matches!(change, ControlChange::Reset) {
            ts.episode = None;
        }
        let args = vec![
            ts.hex.clone(),
            mode.to_owned(),
            for_ms.to_string(),
            shadow.to_owned(),
            reset.to_owned(),
            replica.to_string(),
        ];
        let reply = match self.store.call(&self.store.scripts.control, args).await {
            Ok(f) => f,
            Err(e) => {
                self.store_failed(&e);
                return Err(e.to_fleet());
            }
        };
        let Some(r) = wire::control_reply(&reply) else {
            self.reject(Rejected::Reply, 1);
            return Err(FleetError::Rejected);
        };
        self.note(r.boot, r.corrupt);
        if let Some(ts) = self.tools.get_mut(tool) {
            // What this replica set is what the fleet set: its own echo changes nothing, and a
            // later release elsewhere releases it here too.
            let prev = ts.ctl.unwrap_or(SharedControl {
                ver: 0,
                mode: SharedMode::Normal,
                shadow: false,
                resets: ts.resets.unwrap_or(0),
            });
            let mode = match change {
                ControlChange::ForceOpen(d) => SharedMode::ForcedOpen {
                    remaining: d.unwrap_or(Duration::MAX),
                },
                ControlChange::ForceClosed => SharedMode::ForcedClosed,
                ControlChange::Release => SharedMode::Normal,
                _ => prev.mode,
            };
            let shadow = match change {
                ControlChange::Shadow(on) => on,
                _ => prev.shadow,
            };
            let resets = prev.resets + u64::from(matches!(change, ControlChange::Reset));
            ts.ctl_ver = ts.ctl_ver.max(r.value);
            ts.ctl = Some(SharedControl {
                ver: r.value,
                mode,
                shadow,
                resets,
            });
            ts.resets = Some(resets);
        }
        Ok(())
    }
}

/// When `e`'s probe claim is due on the registry's clock (`None`: nothing to claim).
fn claim_due(e: &Episode, view: &CoordinationView, lead: Duration) -> Option<Duration> {
    match e.claim {
        Claim::Pending => {
            let demand = e.tripped_here || view.refused > e.demand_base;
            Some(if demand {
                e.ready_at.saturating_sub(lead)
            } else {
                e.ready_at.saturating_add(lead)
            })
        }
        Claim::Lost { until } => Some(until),
        Claim::Won | Claim::Alone => None,
    }
}
