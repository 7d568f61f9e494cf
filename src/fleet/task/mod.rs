//! The fleet's background task: one per registry, the only code that talks to the store.
//!
//! It wakes on a local transition (from the registry's transition observer, through a bounded
//! channel that never blocks the caller), a message on the events channel, a command from the
//! [`Fleet`](super::Fleet) handle, a probe claim falling due, and the poll tick. Each wake-up
//! runs to completion before the next: the task's view of each tool (`ToolSync`) is changed by
//! one thread only, and every decision it applies goes through the registry's coordination
//! surface — the gate never waits on any of this.
//!
//! One `impl Task` per job, each in its own file:
//!
//! | file | job |
//! |---|---|
//! | `mod.rs` | the task's state, the loop that wakes it, bookkeeping |
//! | `connection.rs` | what the task and the handle share; the store going away and coming back |
//! | `rounds.rs` | a round: one complete exchange (subscription, poll, resync) |
//! | `episodes.rs` | local transitions published (trips, probe results); other replicas' applied |
//! | `claims.rs` | the probe: claims in the store, holds on the local gate, the lease kept on it |
//! | `streak.rs` | the fleet-wide failure streak: failures reported as they happen |
//! | `counts.rs` | this replica's counts into the fleet's failure-rate windows |
//! | `controls.rs` | operator controls, fleet-wide |
//! | `shards.rs` | the store's shards: their keys, routes and what their connections report |
//!
//! # Shards
//!
//! The store is one shard on a single server and several on a cluster (`keys.rs`); each tool
//! lives in one. Each shard has its own connections, boot id, change counter, subscription and
//! connection state (`ShardSync`): a shard that does not answer leaves its tools to break
//! locally while the others coordinate. A poll reads a shard's change counter (one cheap
//! script), and reads its tools only when the counter moved since its last complete read.
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
//! The winner's lease covers the probe it lets through, and a probe given back gives its claim
//! back (`claims.rs`).
//!
//! # The streak
//!
//! Failures are reported to the tool's fleet-wide failure streak as they happen; successes
//! while one is open somewhere (`streak.rs`).
//!
//! [`close_remotely`]: crate::ToolHealthRegistry::close_remotely

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot, Notify};

use crate::breaker::{BreakerState, Transition, TransitionReason};
use crate::policy::TripPolicy;
use crate::registry::coordination::{CoordinationView, ProbeHold};
use crate::registry::{HealthObserver, ToolHealthRegistry};

use super::config::{FleetBuilder, RateScope};
use super::scripts::Which;
use super::store::{ConnEvent, ShardEvent, Store, StoreError};
use super::wire::{
    self, arg_ms, encode_tool, Boot, ClaimReply, ControlField, LeaseReply, Rejected, ReplicaId,
    SettleReply, SharedControl, SharedMode, SharedState, StreakReply, TripReply,
};
use super::{FleetError, FleetStatus, LOG_TARGET};

mod claims;
mod connection;
mod controls;
mod counts;
mod episodes;
mod rounds;
mod shards;
mod streak;

use claims::Claim;
pub(super) use connection::{Shared, APPLIED_ACTIONS};
use connection::{CLOSE, CONTROL, HOLD, OPEN};
use shards::{Part, ShardSync};
use streak::{OpenStreak, PendingTools};

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
    /// The store's shard the tool lives in.
    shard: usize,
    known_ep: u64,
    episode: Option<Episode>,
    /// The entry's incarnation and its raw (success, failure) counts up to the last round:
    /// sent to the fleet's window (or, for a tool not under a failure rate then, or before
    /// this replica joined, never to be).
    sent: Option<(u32, u64, u64)>,
    /// The same for the fleet-wide failure streak: the counts its last report went up to.
    streak_sent: Option<(u32, u64, u64)>,
    /// A fleet-wide failure streak is open for the tool: successes here are watched and
    /// reported.
    streak: Option<OpenStreak>,
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
    /// The fleet-wide failure streak is on (no quorum: with one, the fleet opens only on `k`
    /// replicas' own trips).
    streaks: bool,
    /// How long the first connection may take before a store that has not answered is news
    /// (the connection's own timeout, plus one reconnection delay).
    connect_grace: Duration,
}

struct Task {
    registry: Arc<ToolHealthRegistry>,
    store: Store,
    /// What the shards' connections report.
    events: mpsc::Receiver<ShardEvent>,
    /// Per shard of the store.
    shards: Vec<ShardSync>,
    /// The next shard a periodic round reads whether or not it has news (one per round).
    sweep: usize,
    shared: Arc<Shared>,
    settings: Settings,
    local: mpsc::Receiver<LocalEvent>,
    overflow: Arc<AtomicBool>,
    wake: Arc<Notify>,
    commands: mpsc::Receiver<Command>,
    /// Every tool the task has seen (a round visits each: a fast hash).
    tools: HashMap<String, ToolSync, foldhash::fast::RandomState>,
    /// Kinds of problems already logged (each once).
    warned: BTreeSet<&'static str>,
    /// Local transitions were lost since the last resync (the queue overflowed).
    lost_events: bool,
    /// The replica was connected at least once.
    ever_connected: bool,
    /// The store is not of the URL's kind: said once, and the replica breaks locally.
    layout_error: Option<String>,
    /// Tools with news for the fleet-wide streak (the registry's outcome listener).
    outcomes: Arc<PendingTools>,
    /// The names behind the keys of `outcomes`.
    names: HashMap<u64, String>,
}

/// Starts the task; the registry hears it as a transition observer and a coordinator.
pub(super) fn spawn(
    builder: FleetBuilder,
    registry: Arc<ToolHealthRegistry>,
    store: Store,
    events: mpsc::Receiver<ShardEvent>,
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
        layout_failed: AtomicBool::new(false),
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
    let outcomes = Arc::new(PendingTools::new(Arc::clone(&wake)));
    let (cmd_tx, cmd_rx) = mpsc::channel(64);
    let settings = Settings {
        poll_interval: builder.poll_interval,
        lead: builder.command_timeout.saturating_mul(2),
        probe_lease: builder.probe_lease,
        rate_scope: builder.rate_scope,
        quorum: builder.quorum,
        quorum_window: builder.quorum_window,
        streaks: builder.quorum <= 1,
        connect_grace: builder
            .command_timeout
            .saturating_mul(4)
            .saturating_add(super::store::reconnect_delay(builder.poll_interval)),
    };
    if settings.streaks {
        registry
            .coordination()
            .set_outcome_listener(Some(Arc::clone(&outcomes) as _));
    }
    if settings.rate_scope == RateScope::Fleet {
        // Until the store answers, this replica breaks on its own window.
        registry.coordination().set_local_rate_trips(true);
    }
    // Counts made before this replica joined are not the fleet's: they are the baseline the
    // first counts sent (and the first streak report) are taken from. A tool created later
    // counts from zero.
    let mut tools = HashMap::default();
    let mut names = HashMap::new();
    registry
        .coordination()
        .for_each_coordination_view(|name, v| {
            if let Some(hex) = encode_tool(name) {
                names.insert(outcomes.key(name), name.to_owned());
                let base = Some((v.incarnation, v.success, v.failure));
                tools.insert(
                    name.to_owned(),
                    ToolSync {
                        hex,
                        shard: store.keys.shard_of(name),
                        sent: base.filter(|_| settings.rate_scope != RateScope::Local),
                        streak_sent: base,
                        ..ToolSync::default()
                    },
                );
            }
        });
    let task = Task {
        registry,
        // Breakers open before the fleet started are published at the first exchange.
        shards: (0..store.keys.shards())
            .map(|_| ShardSync {
                resync: true,
                ..ShardSync::default()
            })
            .collect(),
        // Each replica starts its sweep at its own shard: replicas started together do not
        // all read the same shard in the same second.
        sweep: (shared.replica.0 % store.keys.shards() as u64) as usize,
        store,
        events,
        shared: Arc::clone(&shared),
        settings,
        local: local_rx,
        overflow,
        wake,
        commands: cmd_rx,
        tools,
        warned: BTreeSet::new(),
        lost_events: false,
        ever_connected: false,
        layout_error: None,
        outcomes,
        names,
    };
    let handle = tokio::spawn(task.run());
    (shared, cmd_tx, handle)
}

impl Task {
    async fn run(mut self) {
        if let Err(e) = self.store.connect() {
            self.shared.set_error(Some(e.to_string()));
        }
        // The first round comes with the first connection; only a store that has not answered
        // within the grace is tried (and reported) before. A cluster's routes are asked for at
        // once (its shards have no connection before).
        let mut next_round = tokio::time::Instant::now()
            + if self.store.is_cluster() {
                Duration::ZERO
            } else {
                self.settings.connect_grace
            };
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
                        let r = self.round(true).await;
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
                        // Local transitions were lost: resync now, not at the next poll.
                        self.resync_all();
                        self.lost_events = true;
                        let _ = self.round(true).await;
                        next_round = tokio::time::Instant::now() + self.until_next_round();
                    }
                    self.streaks().await;
                }
                ev = self.events.recv() => {
                    if let Some(ev) = ev {
                        if self.on_shard_event(ev).await {
                            next_round = tokio::time::Instant::now() + self.until_next_round();
                        }
                    }
                }
                _ = tokio::time::sleep_until(wake_at) => {
                    if tokio::time::Instant::now() >= next_round {
                        let _ = self.round(false).await;
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
        if self.shards.iter().all(|s| s.connected) {
            self.settings.poll_interval
        } else {
            self.settings.poll_interval.min(RETRY_WHILE_DISCONNECTED)
        }
    }

    /// Leaves the registry as it would be without a fleet, and closes the connections.
    async fn stop(&mut self) {
        self.registry.coordination().set_local_rate_trips(true);
        self.registry.coordination().set_outcome_listener(None);
        for (tool, ts) in &mut self.tools {
            if ts.streak.take().is_some() {
                self.registry.coordination().watch_successes(tool, false);
            }
        }
        for (tool, ts) in &mut self.tools {
            if let Some(hold) = ts.episode.as_mut().and_then(|e| e.hold.take()) {
                self.registry.coordination().release_hold(tool, hold);
            }
        }
        self.store.quit().await;
    }

    /// The tool's view, created on first use; `None` for a name that is not shared.
    fn tool(&mut self, tool: &str) -> Option<&mut ToolSync> {
        if !self.tools.contains_key(tool) {
            let hex = encode_tool(tool)?;
            self.names.insert(self.outcomes.key(tool), tool.to_owned());
            self.tools.insert(
                tool.to_owned(),
                ToolSync {
                    hex,
                    shard: self.store.keys.shard_of(tool),
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

    /// A reply's boot id and corrupt count, from shard `shard`: a new boot means the shard
    /// lost its data (or this is its first answer): every episode number of its tools is
    /// forgotten and their open breakers re-published.
    fn note(&mut self, shard: usize, boot: Boot, corrupt: u64) {
        self.reject(Rejected::Stored, corrupt);
        let s = &mut self.shards[shard];
        if s.boot == Some(boot) {
            return;
        }
        if s.boot.is_some() {
            tracing::info!(
                target: LOG_TARGET,
                shard,
                node = self.store.node(shard),
                "fleet: the store lost its data (restarted empty, flushed or failed over); \
                 re-publishing the open breakers"
            );
        }
        s.boot = Some(boot);
        s.resync = true;
        s.read = None;
        for ts in self.tools.values_mut().filter(|t| t.shard == shard) {
            ts.known_ep = 0;
            ts.ctl_ver = 0;
            ts.resets = None;
        }
    }

    /// Every shard re-reads the store and re-publishes the breakers open here.
    fn resync_all(&mut self) {
        for s in &mut self.shards {
            s.resync = true;
        }
    }
}
