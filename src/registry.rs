//! The registry: tool name → stats and breaker, the gate and the record paths by name.
//!
//! # Cost model
//!
//! * **First sight of a name** (the first *record* of a tool): one mutex acquisition, the entry's
//!   allocation and an insertion into the map. This is the only slow path and the only place
//!   a lock is taken.
//! * **Every later call** on that tool — `allow_request`, `check`, `record_*`, and every read —
//!   is a lookup in a guard-free append-only index (plain loads, no read-modify-write; see
//!   `src/index.rs`) followed by atomics on the tool's entry. Nothing is allocated:
//!   `tests/zero_alloc.rs` pins this with a counting allocator. A registry built with
//!   [`RegistryBuilder::evictable`] uses papaya instead (epoch-protected, so entries can be
//!   removed), which adds about 15 ns per lookup.
//! * **Reads never create entries** ("no ghost breakers"): an unknown tool reads as fresh —
//!   healthy, score 1.0, breaker closed, always available. The gate does not create entries
//!   either: a tool nobody has recorded is closed, so there is nothing to remember yet.
//!
//! # Bounded memory
//!
//! At most [`RegistryBuilder::max_tools`] tools (default [`DEFAULT_MAX_TOOLS`]) are tracked.
//! Past the cap a new name is not tracked: its calls are always allowed and are counted only in
//! the registry's [`OverflowStats`], so memory stays bounded whatever names a model invents.
//!
//! # Names
//!
//! Names are compared byte-wise, exactly as given: `Search`, `search` and a differently
//! normalised unicode spelling are three tools. Any string is accepted, the empty one and
//! control characters included.
//!
//! # Configuration
//!
//! [`ToolHealthRegistry::set_config`] swaps the default [`CircuitBreakerConfig`] atomically
//! (arc-swap); it applies to breakers created afterwards, so set it before traffic.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use arc_swap::ArcSwap;

use crate::breaker::{self, Applied, Breaker, BreakerState, Effective, Transition, Verdict};
use crate::clock::{duration_to_nanos, Clock, SystemClock};
use crate::control::{Control, ToolControl};
use crate::gate::{CallOutcome, GateDecision, Permit};
use crate::index::Index;
use crate::policy::{Apply, ToolPolicy};
use crate::stats::{HealthStatus, StatsSnapshot, ToolStats};

/// The decision for a tool the registry does not track: always allowed, generation 0.
const ALLOWED_UNTRACKED: GateDecision = GateDecision::Allowed(Permit {
    generation: 0,
    probe: false,
    shadow_refused: false,
});

/// How many distinct tools a registry tracks by default.
pub const DEFAULT_MAX_TOOLS: usize = 10_000;

/// `Entry::seen` of an entry the evictor has claimed: no record may land in it any more.
const RETIRED: u64 = u64::MAX;

/// Circuit breaker settings.
///
/// ```
/// use std::time::Duration;
/// use tool_health::{CircuitBreakerConfig, ToolHealthRegistry};
///
/// let registry = ToolHealthRegistry::with_config(CircuitBreakerConfig {
///     failure_threshold: 5,                       // 0 disables tripping (counting continues)
///     recovery_duration: Duration::from_secs(10), // cooldown before the probe
///     probe_timeout: Duration::from_secs(20),     // probe lease; 0 disables the lease
/// });
/// # let _ = registry;
/// ```
///
/// Durations have millisecond resolution (rounded up); a duration too long to represent
/// (beyond about 34 years, `Duration::MAX` included) means "never".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CircuitBreakerConfig {
    /// Consecutive failures that trip a closed breaker. `0` disables tripping.
    pub failure_threshold: u32,
    /// How long an open breaker refuses calls after the last failure before granting a probe.
    pub recovery_duration: Duration,
    /// How long a probe may stay unanswered before its lease expires and the breaker re-opens.
    /// `Duration::ZERO` disables the lease (a probe that never reports then keeps the breaker
    /// half-open until it does).
    pub probe_timeout: Duration,
}

impl Default for CircuitBreakerConfig {
    fn default() -> Self {
        Self {
            failure_threshold: 3,
            recovery_duration: Duration::from_secs(30),
            probe_timeout: Duration::from_secs(30),
        }
    }
}

/// Everything known about one tool at one instant.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ToolHealthSnapshot {
    /// The tool's name.
    pub tool: String,
    /// Healthy / degraded / unhealthy.
    pub status: HealthStatus,
    /// `0.3 × success_rate + 0.7 × ewma_success`.
    pub score: f64,
    /// `success_count / total_calls` (1.0 with no calls).
    pub success_rate: f64,
    /// The exponentially weighted success average, in `[0, 1]`.
    pub ewma_success: f64,
    /// `success_count + failure_count`.
    pub total_calls: u64,
    /// Successful calls.
    pub success_count: u64,
    /// Failed calls.
    pub failure_count: u64,
    /// Calls the gate refused (not counted in `total_calls`).
    pub refused_count: u64,
    /// Calls that failed through the caller's fault (not counted in `total_calls`).
    pub ignored_count: u64,
    /// Total duration / total calls.
    pub avg_duration: Duration,
    /// The longest call, failed ones included.
    pub max_duration: Duration,
    /// The breaker's state now (a half-open breaker whose lease expired reads open).
    pub breaker: BreakerState,
    /// Consecutive failures since the last accepted success.
    pub consecutive_failures: u64,
    /// When an open breaker will grant its next probe (`None` unless open; `Duration::MAX`:
    /// never).
    pub retry_after: Option<Duration>,
    /// Calls shadow mode let through that the breaker would have refused.
    pub shadow_refused_count: u64,
    /// The operator control in force.
    pub control: ToolControl,
    /// Whether shadow mode is on.
    pub shadow: bool,
}

/// A tool the gate would refuse right now, for an agent's planner.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UnavailableTool {
    /// The tool's name.
    pub tool: String,
    /// Its breaker state (open, or half-open with a probe in flight).
    pub breaker: BreakerState,
    /// When a call could next be admitted if nothing else happens (`Duration::MAX`: not in any
    /// foreseeable time).
    pub retry_after: Duration,
    /// Whether an operator forced it open.
    pub forced: bool,
}

/// One finished call, with everything the record path can use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallReport<'a> {
    /// What happened.
    pub outcome: CallOutcome,
    /// How long it took.
    pub duration: Duration,
    /// The permit's generation, when the call was admitted through [`ToolHealthRegistry::check`].
    pub generation: Option<u32>,
    /// The call's `error.type`, for observers.
    pub error_type: Option<&'a str>,
    /// A retry hint from the tool (e.g. HTTP 429 with `Retry-After`): if this failure leaves the
    /// breaker open, it stays open at least this long.
    pub retry_after: Option<Duration>,
}

impl<'a> CallReport<'a> {
    /// A report with just an outcome and a duration.
    pub fn new(outcome: CallOutcome, duration: Duration) -> Self {
        Self {
            outcome,
            duration,
            generation: None,
            error_type: None,
            retry_after: None,
        }
    }

    /// A report from the by-name record's parts (no retry hint).
    #[inline(always)]
    pub(crate) fn of(
        outcome: CallOutcome,
        duration: Duration,
        generation: Option<u32>,
        error_type: Option<&'a str>,
    ) -> Self {
        Self {
            outcome,
            duration,
            generation,
            error_type,
            retry_after: None,
        }
    }

    /// With the permit the call was admitted with.
    pub fn permit(mut self, permit: Permit) -> Self {
        self.generation = Some(permit.generation);
        self
    }

    /// With the call's `error.type`.
    pub fn error_type(mut self, error_type: &'a str) -> Self {
        self.error_type = Some(error_type);
        self
    }

    /// With the tool's retry hint.
    pub fn retry_after(mut self, retry_after: Duration) -> Self {
        self.retry_after = Some(retry_after);
        self
    }
}

/// Calls on tools past the tracking cap, counted together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct OverflowStats {
    /// Successful calls on untracked tools.
    pub success_count: u64,
    /// Failed calls on untracked tools.
    pub failure_count: u64,
    /// Caller-error calls on untracked tools.
    pub ignored_count: u64,
    /// Records that arrived for a name the cap kept out.
    pub records: u64,
}

/// One call, as observers see it.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct CallEvent<'a> {
    /// The tool.
    pub tool: &'a str,
    /// What happened.
    pub outcome: CallOutcome,
    /// How long it took (zero for refusals).
    pub duration: Duration,
    /// The `error.type` of a failed call, when known.
    pub error_type: Option<&'a str>,
    /// Whether the tool is past the tracking cap (not tracked individually).
    pub overflow: bool,
}

/// Hooks called synchronously on the record and gate paths, for metrics and live views.
///
/// Observers must be fast and must not panic; they run on the caller's thread. Without any
/// observer registered, the hot path pays one relaxed load.
pub trait HealthObserver: Send + Sync + fmt::Debug + 'static {
    /// A call finished (or was refused).
    fn on_call(&self, event: &CallEvent<'_>) {
        let _ = event;
    }

    /// A breaker changed state; `at` is the registry clock's reading.
    fn on_transition(&self, tool: &str, transition: &Transition, at: Duration) {
        let _ = (tool, transition, at);
    }
}

/// What a record did to the breaker: at most a lease expiry it noticed and one transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Recorded {
    /// A probe lease that had expired before this result, written by it (half_open → open).
    pub expired: Option<Transition>,
    /// The transition this result caused.
    pub transition: Option<Transition>,
}

impl Recorded {
    /// Every transition, in order.
    pub fn transitions(&self) -> impl Iterator<Item = Transition> + '_ {
        self.expired.iter().chain(self.transition.iter()).copied()
    }
}

#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) name: Box<str>,
    pub(crate) stats: ToolStats,
    pub(crate) breaker: Breaker,
    pub(crate) control: Control,
    /// The sweep epoch in which the entry was last recorded; [`RETIRED`] once evicted.
    seen: AtomicU64,
    /// Slow-call threshold in nanoseconds (`u64::MAX`: off), mirrored from the policy so the
    /// record path reads one atomic instead of the policy.
    slow_call_ns: AtomicU64,
}

impl Entry {
    /// A fresh entry with the default policy, for unit tests of the index.
    #[cfg(test)]
    pub(crate) fn for_test(name: &str) -> Arc<Self> {
        let policy = Arc::new(ToolPolicy::default());
        Arc::new(Entry {
            name: name.into(),
            stats: ToolStats::default(),
            slow_call_ns: AtomicU64::new(policy.slow_call_nanos()),
            breaker: Breaker::new(policy),
            control: Control::default(),
            seen: AtomicU64::new(1),
        })
    }

    /// Whether the evictor claimed this entry (only ever true in an evicting registry).
    #[inline(always)]
    fn is_retired(&self) -> bool {
        self.seen.load(Ordering::Relaxed) == RETIRED
    }

    fn set_policy(&self, policy: Arc<ToolPolicy>) {
        self.slow_call_ns
            .store(policy.slow_call_nanos(), Ordering::Relaxed);
        self.breaker.set_policy(policy);
    }
}

/// A read-only view of one entry for the crate's own exporters.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EntryView {
    pub(crate) stats: StatsSnapshot,
    pub(crate) state: BreakerState,
    pub(crate) transitions: [u64; 4],
}

type RemovableMap = papaya::HashMap<Box<str>, Arc<Entry>, foldhash::fast::RandomState>;

/// Name → entry. By default the guard-free append-only [`Index`] (lookups are plain loads; see
/// `src/index.rs`); a registry built for idle eviction uses papaya instead, which can remove
/// entries and protects readers with an epoch guard (about 15 ns more per lookup, measured).
#[derive(Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "one per registry; boxing the index would add a load to every lookup"
)]
enum Names {
    Grow(Index),
    Removable(RemovableMap),
}

impl Names {
    /// Runs `f` on the tool's entry. `f` has one call site, so it inlines into the caller's
    /// hot path; the removable map hands out an owned `Arc` (two reference-count operations,
    /// part of the evictable registry's extra cost) so that no guard outlives the lookup.
    #[inline(always)]
    fn with<R>(&self, tool: &str, f: impl FnOnce(&Arc<Entry>) -> R) -> Option<R> {
        let owned;
        let entry = match self {
            Names::Grow(index) => index.get(tool)?,
            Names::Removable(map) => {
                owned = map.pin().get(tool).cloned()?;
                &owned
            }
        };
        Some(f(entry))
    }

    /// The tool's entry, borrowed from the index, or (removable map) from `slot`, which holds
    /// an owned `Arc` so that no guard outlives the lookup. No closure: the caller's hot path
    /// stays one function for the optimiser.
    #[inline(always)]
    fn get<'a>(&'a self, tool: &str, slot: &'a mut Option<Arc<Entry>>) -> Option<&'a Arc<Entry>> {
        match self {
            Names::Grow(index) => index.get(tool),
            Names::Removable(map) => {
                *slot = map.pin().get(tool).cloned();
                slot.as_ref()
            }
        }
    }

    /// Inserts under the registry's insert lock (the caller holds it); `make` may refuse.
    fn insert_with(
        &self,
        tool: &str,
        make: impl FnOnce() -> Option<Arc<Entry>>,
    ) -> Option<Arc<Entry>> {
        match self {
            Names::Grow(index) => index.get_or_insert_with(tool, make),
            Names::Removable(map) => {
                let map = map.pin();
                if let Some(e) = map.get(tool) {
                    return Some(Arc::clone(e));
                }
                let e = make()?;
                map.insert(tool.into(), Arc::clone(&e));
                Some(e)
            }
        }
    }

    fn for_each(&self, f: impl FnMut(&Arc<Entry>)) {
        match self {
            Names::Grow(index) => index.iter().for_each(f),
            Names::Removable(map) => map.pin().values().for_each(f),
        }
    }
}

/// Per-tool health stats and circuit breakers, keyed by tool name.
///
/// Share it behind an `Arc`; every method takes `&self`.
///
/// ```
/// use std::time::Duration;
/// use tool_health::{BreakerState, CircuitBreakerConfig, ManualClock, ToolHealthRegistry, REFUSAL_MESSAGE};
///
/// let clock = ManualClock::new();
/// let registry = ToolHealthRegistry::builder()
///     .config(CircuitBreakerConfig { failure_threshold: 2, ..Default::default() })
///     .clock(clock.clone())
///     .build();
///
/// for _ in 0..2 {
///     assert!(registry.allow_request("db"));
///     registry.record_failure("db", Duration::from_millis(800));
/// }
/// assert_eq!(registry.breaker_state("db"), BreakerState::Open);
/// assert!(!registry.allow_request("db")); // tell the model REFUSAL_MESSAGE
///
/// clock.advance(Duration::from_secs(30));
/// assert!(registry.allow_request("db")); // the single probe
/// assert!(!registry.is_tool_available("db")); // everyone else waits
/// registry.record_success("db", Duration::from_millis(20));
/// assert_eq!(registry.breaker_state("db"), BreakerState::Closed);
/// ```
pub struct ToolHealthRegistry {
    names: Names,
    /// Built for idle eviction: the removable index, and records touch their entry.
    evicting: bool,
    /// Serialises first sights and evictions; never taken on a known tool. Holds the history of
    /// sweep epochs: (epoch, the tick it started at), oldest first.
    insert_lock: Mutex<VecDeque<(u64, u64)>>,
    /// The current sweep epoch (see [`ToolHealthRegistry::evict_idle`]).
    sweep_epoch: AtomicU64,
    /// Evict idle tools this old when a first sight meets the cap.
    evict_idle_after: Option<Duration>,
    tracked: AtomicUsize,
    max_tools: usize,
    default_policy: ArcSwap<ToolPolicy>,
    overrides: ArcSwap<HashMap<Box<str>, Arc<ToolPolicy>>>,
    clock: Arc<dyn Clock>,
    overflow_success: AtomicU64,
    overflow_failure: AtomicU64,
    overflow_ignored: AtomicU64,
    overflow_records: AtomicU64,
    has_observers: AtomicBool,
    observers: ArcSwap<Vec<Arc<dyn HealthObserver>>>,
}

impl fmt::Debug for ToolHealthRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolHealthRegistry")
            .field("tracked_tools", &self.tracked_tools())
            .field("max_tools", &self.max_tools)
            .field("default_policy", &**self.default_policy.load())
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

impl Default for ToolHealthRegistry {
    fn default() -> Self {
        Self::new()
    }
}

/// Builds a [`ToolHealthRegistry`]: config, clock and cap.
#[derive(Debug)]
#[must_use]
pub struct RegistryBuilder {
    config: CircuitBreakerConfig,
    clock: Option<Arc<dyn Clock>>,
    max_tools: usize,
    evict_idle_after: Option<Duration>,
    evictable: bool,
}

impl RegistryBuilder {
    /// The default breaker config (see [`ToolHealthRegistry::set_config`]).
    pub fn config(mut self, config: CircuitBreakerConfig) -> Self {
        self.config = config;
        self
    }

    /// The clock every instant comes from (default: [`SystemClock`]).
    pub fn clock<C: Clock>(mut self, clock: C) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// How many distinct tools to track (default [`DEFAULT_MAX_TOOLS`]).
    pub fn max_tools(mut self, max_tools: usize) -> Self {
        self.max_tools = max_tools;
        self
    }

    /// When a new tool meets the cap, first evict tools idle for at least `idle_for` (see
    /// [`ToolHealthRegistry::evict_idle`]) to make room. Default: off.
    pub fn evict_idle_after(mut self, idle_for: Duration) -> Self {
        self.evict_idle_after = Some(idle_for);
        self.evictable = true;
        self
    }

    /// Builds a registry that can evict idle tools ([`ToolHealthRegistry::evict_idle`]).
    ///
    /// Eviction needs a name index that can remove entries, and removal needs readers to be
    /// protected by an epoch guard: every lookup by name then costs about 15 ns more. Without
    /// it (the default) the index only grows, lookups are plain loads, and memory is bounded by
    /// [`max_tools`](Self::max_tools) alone. [`evict_idle_after`](Self::evict_idle_after)
    /// implies this.
    pub fn evictable(mut self) -> Self {
        self.evictable = true;
        self
    }

    /// The registry.
    pub fn build(self) -> ToolHealthRegistry {
        let clock = self.clock.unwrap_or_else(|| Arc::new(SystemClock::new()));
        let start = breaker::ticks_of_instant(clock.now());
        ToolHealthRegistry {
            names: if self.evictable {
                Names::Removable(
                    papaya::HashMap::builder()
                        .hasher(foldhash::fast::RandomState::default())
                        .build(),
                )
            } else {
                Names::Grow(Index::new())
            },
            evicting: self.evictable,
            insert_lock: Mutex::new(VecDeque::from([(1, start)])),
            sweep_epoch: AtomicU64::new(1),
            evict_idle_after: self.evict_idle_after,
            tracked: AtomicUsize::new(0),
            max_tools: self.max_tools,
            default_policy: ArcSwap::from_pointee(ToolPolicy::from(self.config)),
            overrides: ArcSwap::from_pointee(HashMap::new()),
            clock,
            overflow_success: AtomicU64::new(0),
            overflow_failure: AtomicU64::new(0),
            overflow_ignored: AtomicU64::new(0),
            overflow_records: AtomicU64::new(0),
            has_observers: AtomicBool::new(false),
            observers: ArcSwap::from_pointee(Vec::new()),
        }
    }
}

impl ToolHealthRegistry {
    /// A registry with the default config and the system clock.
    pub fn new() -> Self {
        Self::builder().build()
    }

    /// A registry with `config` as the default breaker config.
    pub fn with_config(config: CircuitBreakerConfig) -> Self {
        Self::builder().config(config).build()
    }

    /// A builder for config, clock and cap.
    pub fn builder() -> RegistryBuilder {
        RegistryBuilder {
            config: CircuitBreakerConfig::default(),
            clock: None,
            max_tools: DEFAULT_MAX_TOOLS,
            evict_idle_after: None,
            evictable: false,
        }
    }

    /// Replaces the default config. Breakers that already exist keep theirs; operator
    /// controls and per-tool policies are untouched.
    pub fn set_config(&self, config: CircuitBreakerConfig) {
        self.default_policy.rcu(|p| ToolPolicy {
            breaker: config.clone(),
            ..ToolPolicy::clone(p)
        });
    }

    /// The default config new breakers get.
    pub fn config(&self) -> CircuitBreakerConfig {
        self.default_policy.load().breaker.clone()
    }

    /// Replaces the whole default policy (config, trip policy, slow calls, backoff) for
    /// breakers created afterwards.
    pub fn set_default_policy(&self, policy: ToolPolicy) {
        self.default_policy.store(Arc::new(policy));
    }

    /// Sets a per-tool policy override. With [`Apply::Now`] the tool's existing breaker takes
    /// it at once (its state and counters are kept); with [`Apply::NewBreakers`] it is used
    /// when the tool's breaker is created, i.e. on the tool's first record.
    pub fn set_tool_policy(&self, tool: &str, policy: ToolPolicy, apply: Apply) {
        let policy = Arc::new(policy);
        self.overrides.rcu(|map| {
            let mut map = HashMap::clone(map);
            map.insert(tool.into(), Arc::clone(&policy));
            map
        });
        if apply == Apply::Now {
            self.with_entry(tool, |e| e.set_policy(Arc::clone(&policy)));
        }
    }

    /// Removes a per-tool override; the tool falls back to the default policy (at once with
    /// [`Apply::Now`]).
    pub fn clear_tool_policy(&self, tool: &str, apply: Apply) {
        self.overrides.rcu(|map| {
            let mut map = HashMap::clone(map);
            map.remove(tool);
            map
        });
        if apply == Apply::Now {
            let policy = self.default_policy.load_full();
            self.with_entry(tool, |e| e.set_policy(policy));
        }
    }

    /// The policy the tool's breaker uses now (or would get if created now).
    pub fn tool_policy(&self, tool: &str) -> ToolPolicy {
        self.with_entry(tool, |e| ToolPolicy::clone(&e.breaker.policy()))
            .unwrap_or_else(|| ToolPolicy::clone(&self.policy_for(tool)))
    }

    fn policy_for(&self, tool: &str) -> Arc<ToolPolicy> {
        self.overrides
            .load()
            .get(tool)
            .cloned()
            .unwrap_or_else(|| self.default_policy.load_full())
    }

    /// The registry clock's reading.
    pub fn now(&self) -> Duration {
        self.clock.now()
    }

    /// How many tools are tracked.
    pub fn tracked_tools(&self) -> usize {
        self.tracked.load(Ordering::Relaxed)
    }

    /// The cap on tracked tools.
    pub fn max_tools(&self) -> usize {
        self.max_tools
    }

    /// Calls counted for names past the cap.
    pub fn overflow(&self) -> OverflowStats {
        OverflowStats {
            success_count: self.overflow_success.load(Ordering::Relaxed),
            failure_count: self.overflow_failure.load(Ordering::Relaxed),
            ignored_count: self.overflow_ignored.load(Ordering::Relaxed),
            records: self.overflow_records.load(Ordering::Relaxed),
        }
    }

    /// Registers an observer, called on every later call and transition.
    pub fn add_observer(&self, observer: Arc<dyn HealthObserver>) {
        self.observers.rcu(|list| {
            let mut list = Vec::clone(list);
            list.push(observer.clone());
            list
        });
        self.has_observers.store(true, Ordering::Release);
    }

    fn now_ticks(&self) -> u64 {
        breaker::ticks_of_instant(self.clock.now())
    }

    /// The clock's [coarse reading](Clock::now_coarse) in ticks: only for "still cooling down?".
    #[inline]
    fn coarse_now_ticks(&self) -> u64 {
        breaker::ticks_of_instant(self.clock.now_coarse())
    }

    #[inline]
    fn with_entry<R>(&self, tool: &str, f: impl FnOnce(&Entry) -> R) -> Option<R> {
        self.names.with(tool, |e| f(e))
    }

    /// Runs `f` on the tool's entry, creating it on first sight; `None` past the cap.
    #[inline]
    ///
    /// `f` does the record's work first, then the entry is [touched](Self::touch); if the
    /// evictor retired the entry meanwhile, the work is redone on a fresh entry, so a record is
    /// never lost in an evicted entry. Side effects that must happen once (observers) belong
    /// after this returns.
    fn with_entry_or_insert<R>(&self, tool: &str, f: impl Fn(&Entry) -> R) -> Option<R> {
        if let Some(Some(r)) = self.names.with(tool, |e| {
            let r = f(e);
            self.touch(e).then_some(r)
        }) {
            return Some(r);
        }
        // First sight, or the entry was evicted under us: a new entry can be evicted between
        // its insertion and the work too, so the same work-then-touch applies.
        loop {
            let e = self.insert_slow(tool)?;
            let r = f(&e);
            if self.touch(&e) {
                return Some(r);
            }
        }
    }

    /// Marks the entry seen in the current sweep epoch, after a record's work; `false` if the
    /// evictor retired it (the caller then redoes the work on a fresh entry).
    ///
    /// # Orderings
    ///
    /// This is a Dekker handshake with [`evict_idle`](Self::evict_idle). The record's last
    /// read-modify-write before this call (the success or failure count, or the failure
    /// counter) is `SeqCst`, and so are the loads here; the evictor bumps the epoch (`SeqCst`)
    /// before it reads the consecutive-failure counter (`SeqCst`). So either the record reads
    /// the new epoch and then races the evictor for `seen` by CAS — exactly one wins — or the
    /// evictor sees the record's writes: a failure makes the tool not fresh and it is kept; a
    /// success is part of the history the eviction forgets, linearised before it. On x86-64
    /// these orderings cost nothing over `Relaxed`. In the steady state this is two loads.
    #[inline(always)]
    fn touch(&self, e: &Entry) -> bool {
        if !self.evicting {
            return true; // nothing is ever retired
        }
        let epoch = self.sweep_epoch.load(Ordering::SeqCst);
        let mut seen = e.seen.load(Ordering::SeqCst);
        while seen != epoch {
            if seen == RETIRED {
                return false;
            }
            match e
                .seen
                .compare_exchange_weak(seen, epoch, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return true,
                Err(actual) => seen = actual,
            }
        }
        true
    }

    #[cold]
    fn insert_slow(&self, tool: &str) -> Option<Arc<Entry>> {
        let mut sweeps = self
            .insert_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(e) = self.names.with(tool, Arc::clone) {
            // Retired entries are removed under this lock, so a mapped entry is live.
            return Some(e);
        }
        if self.tracked.load(Ordering::Relaxed) >= self.max_tools {
            // At most one cap-triggered sweep per eighth of the idle time, so a storm of new
            // names past the cap costs a lookup each, not a scan each.
            let due = |idle_for: Duration| {
                let last = sweeps.back().map_or(0, |&(_, start)| start);
                let gap = (breaker::ticks_of_duration(idle_for) / 8).max(1);
                self.now_ticks().saturating_sub(last) >= gap
            };
            match self.evict_idle_after {
                Some(idle_for) if due(idle_for) && self.evict_locked(&mut sweeps, idle_for) > 0 => {
                }
                _ => return None,
            }
        }
        let policy = self.policy_for(tool);
        let entry = Arc::new(Entry {
            name: tool.into(),
            stats: ToolStats::default(),
            slow_call_ns: AtomicU64::new(policy.slow_call_nanos()),
            breaker: Breaker::new(policy),
            control: Control::default(),
            seen: AtomicU64::new(self.sweep_epoch.load(Ordering::Relaxed)),
        });
        let entry = self.names.insert_with(tool, || Some(entry))?;
        self.tracked.fetch_add(1, Ordering::Relaxed);
        Some(entry)
    }

    /// Evicts tools not recorded for at least `idle_for` whose state is equivalent to fresh:
    /// breaker closed, no consecutive failures, no operator control. Returns how many.
    ///
    /// An open or half-open breaker is never evicted, whatever its idleness; a tool that comes
    /// back after eviction starts fresh (its history is gone, its per-tool policy override is
    /// kept). Call it periodically (or set [`RegistryBuilder::evict_idle_after`] to run it
    /// when the cap is reached), so a long-running process with a churning tool set stays
    /// bounded.
    ///
    /// Idleness is measured in sweeps: each call starts a new sweep epoch, and a tool counts as
    /// idle when it was last recorded in an epoch that ended at least `idle_for` ago. So a tool
    /// is evicted at the latest one sweep period after it became `idle_for` idle.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tool_health::{ManualClock, ToolHealthRegistry};
    ///
    /// let clock = ManualClock::new();
    /// let registry = ToolHealthRegistry::builder()
    ///     .clock(clock.clone())
    ///     .evictable()
    ///     .build();
    /// registry.record_success("one_off_tool", Duration::from_millis(3));
    /// // Sweep periodically, e.g. every minute:
    /// for _ in 0..15 {
    ///     clock.advance(Duration::from_secs(60));
    ///     registry.evict_idle(Duration::from_secs(600));
    /// }
    /// assert!(registry.snapshot("one_off_tool").is_none());
    /// ```
    ///
    /// Only a registry built with [`RegistryBuilder::evictable`] (or
    /// [`RegistryBuilder::evict_idle_after`]) evicts; any other returns 0.
    pub fn evict_idle(&self, idle_for: Duration) -> usize {
        let mut sweeps = self
            .insert_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.evict_locked(&mut sweeps, idle_for)
    }

    fn evict_locked(&self, sweeps: &mut VecDeque<(u64, u64)>, idle_for: Duration) -> usize {
        let now = self.now_ticks();
        let epoch = self.sweep_epoch.fetch_add(1, Ordering::SeqCst) + 1;
        sweeps.push_back((epoch, now));
        let cutoff = now.saturating_sub(breaker::ticks_of_duration(idle_for));
        // The newest epoch that started at or before the cutoff: whatever was last seen before
        // it has been idle for at least `idle_for`.
        let Some(&(threshold, _)) = sweeps.iter().rev().find(|&&(_, start)| start <= cutoff) else {
            return 0;
        };
        while sweeps.len() > 1 && sweeps[1].1 <= cutoff {
            sweeps.pop_front();
        }
        let Names::Removable(map) = &self.names else {
            return 0; // built without eviction: the index only grows
        };
        let map = map.pin();
        let mut evicted = 0;
        for (name, e) in map.iter() {
            let seen = e.seen.load(Ordering::SeqCst);
            let fresh_equivalent = e.breaker.effective(now) == Effective::Closed
                && e.breaker.consecutive_failures() == 0
                && e.control.raw() == 0;
            if seen < threshold
                && fresh_equivalent
                && e.seen
                    .compare_exchange(seen, RETIRED, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
            {
                map.remove(name);
                self.tracked.fetch_sub(1, Ordering::Relaxed);
                evicted += 1;
            }
        }
        evicted
    }

    /// A pre-resolved handle on `tool`: the gate and the record paths without the name lookup
    /// (see [`ToolHandle`](crate::ToolHandle)). Creates the tool's entry if it does not exist
    /// yet, exactly as its first record would, so the tool is tracked from now on (and listed
    /// by [`health_summary`](Self::health_summary)). `None` when the tool is new and the registry
    /// is at its cap ([`max_tools`](Self::max_tools)): call by name then, which counts the
    /// calls in [`overflow`](Self::overflow).
    ///
    /// Takes the registry's `Arc` because the handle keeps the registry alive (its clock and
    /// observers); share the registry behind an `Arc` to use handles. In an evicting registry a
    /// handle whose tool was evicted keeps working, by name (re-resolve it to get the fast path
    /// back).
    pub fn handle(self: &Arc<Self>, tool: &str) -> Option<crate::ToolHandle> {
        let entry = match self.names.with(tool, Arc::clone) {
            Some(e) => e,
            None => self.insert_slow(tool)?,
        };
        Some(crate::ToolHandle::new(Arc::clone(self), entry))
    }

    // ------------------------------------------------------------------------------------
    // The gate
    // ------------------------------------------------------------------------------------

    /// The mutating gate: may this call go to the tool now? May grant the single probe.
    ///
    /// Inside a tool span watched by a [`ToolHealthLayer`](crate::ToolHealthLayer), the
    /// decision is bound to that span (see [`ToolHealthRegistry::check`]).
    #[inline(always)]
    pub fn allow_request(&self, tool: &str) -> bool {
        self.check(tool).is_allowed()
    }

    /// The gate with its whole answer: allowed, probe (with the permit to report through) or
    /// refused (with when to retry).
    ///
    /// When called inside a tool span (the current span or its nearest tool-span ancestor) of a
    /// subscriber that has a [`ToolHealthLayer`](crate::ToolHealthLayer) for this registry, the
    /// decision is bound to that span: the span's outcome is recorded with the permit, a refused
    /// span records nothing but the refusal, and the span is annotated. Outside any tool span
    /// this is [`ToolHealthRegistry::check_detached`].
    #[inline(always)]
    pub fn check(&self, tool: &str) -> GateDecision {
        let decision = self.check_detached(tool);
        crate::layer::bind_decision(self, tool, &decision);
        decision
    }

    /// The gate, never bound to a span.
    #[inline(always)]
    pub fn check_detached(&self, tool: &str) -> GateDecision {
        match &self.names {
            Names::Grow(index) => self.check_on_entry(tool, index.get(tool).map(|e| &**e)),
            Names::Removable(_) => self.check_removable(tool),
        }
    }

    /// [`check_detached`](Self::check_detached) in an evicting registry, out of line.
    #[inline(never)]
    fn check_removable(&self, tool: &str) -> GateDecision {
        let mut slot = None;
        let entry = self.names.get(tool, &mut slot);
        self.check_on_entry(tool, entry.map(|e| &**e))
    }

    /// The gate on a resolved entry (`None`: an untracked tool, always allowed): the one
    /// implementation behind the by-name gate and [`ToolHandle`](crate::ToolHandle).
    #[inline(always)]
    pub(crate) fn check_on_entry(&self, tool: &str, entry: Option<&Entry>) -> GateDecision {
        let Some(e) = entry else {
            return ALLOWED_UNTRACKED;
        };
        // No control and a Closed breaker: admitted on two loads, no clock read, no write.
        if e.control.raw() == 0 {
            if let Some(generation) = e.breaker.closed_generation() {
                return GateDecision::Allowed(Permit {
                    generation,
                    probe: false,
                    shadow_refused: false,
                });
            }
        }
        self.check_slow(tool, e)
    }

    /// The gate past the Closed fast path: controls, refusals, the probe. Out of line to keep
    /// the Closed path small enough to inline.
    #[inline(never)]
    fn check_slow(&self, tool: &str, e: &Entry) -> GateDecision {
        if self.evicting && e.is_retired() {
            // A handle on an evicted tool: the live entry, if any, decides.
            return self
                .names
                .with(tool, |live| {
                    if live.is_retired() {
                        ALLOWED_UNTRACKED
                    } else {
                        self.check_on_entry(tool, Some(live))
                    }
                })
                .unwrap_or(ALLOWED_UNTRACKED);
        }
        let permit = |generation, probe, shadow_refused| Permit {
            generation,
            probe,
            shadow_refused,
        };
        match self.gate_entry(e) {
            Verdict::Allowed { generation } => {
                GateDecision::Allowed(permit(generation, false, false))
            }
            Verdict::None => ALLOWED_UNTRACKED,
            Verdict::Probe { generation } => GateDecision::Probe(permit(generation, true, false)),
            Verdict::ShadowRefused { generation } => {
                GateDecision::Allowed(permit(generation, false, true))
            }
            Verdict::Refused { retry_after } => {
                self.notify_call(|| CallEvent {
                    tool,
                    outcome: CallOutcome::Refused,
                    duration: Duration::ZERO,
                    error_type: None,
                    overflow: false,
                });
                GateDecision::Refused { retry_after }
            }
        }
    }

    /// The gate on a known tool: operator control first, then the breaker.
    #[inline]
    fn gate_entry(&self, e: &Entry) -> Verdict {
        let control = e.control.raw();
        if control == 0 {
            // The common refusal: an Open breaker still cooling down, decided on one load and
            // one coarse clock read, without the full step. The coarse reading lags, never
            // leads: it can keep the breaker open a tick longer, never end a cooldown early.
            if let Some(retry_after) = e.breaker.refusal_while_open(|| self.coarse_now_ticks()) {
                e.stats.record_refused();
                return Verdict::Refused { retry_after };
            }
            let applied = e.breaker.acquire(|| self.now_ticks());
            if matches!(applied.verdict, Verdict::Refused { .. }) {
                e.stats.record_refused();
            }
            self.notify_transitions(&e.name, &applied);
            return applied.verdict;
        }
        self.gate_controlled(e, control)
    }

    #[cold]
    fn gate_controlled(&self, e: &Entry, control: u64) -> Verdict {
        let ctl = Control::decode(control);
        let now = self.now_ticks();
        if let Some(until) = ctl.forced_open_until(now) {
            e.stats.record_refused();
            let retry_after = if until >= breaker::NEVER {
                Duration::MAX
            } else {
                Duration::from_millis(until - now)
            };
            return Verdict::Refused { retry_after };
        }
        let generation = e.breaker.load().generation();
        if ctl.mode == ToolControl::ForcedClosed {
            return Verdict::Allowed { generation };
        }
        let applied = e.breaker.acquire(|| now);
        self.notify_transitions(&e.name, &applied);
        match applied.verdict {
            Verdict::Refused { .. } if ctl.shadow => {
                e.stats.record_shadow_refused();
                Verdict::ShadowRefused { generation }
            }
            Verdict::Refused { .. } => {
                e.stats.record_refused();
                applied.verdict
            }
            v => v,
        }
    }

    /// The pure availability oracle: exactly what [`allow_request`](Self::allow_request) would
    /// answer at this instant, without consuming the probe or creating anything.
    pub fn is_tool_available(&self, tool: &str) -> bool {
        self.with_entry(tool, |e| self.available_on_entry(e))
            .unwrap_or(true)
    }

    /// [`is_tool_available`](Self::is_tool_available) on a resolved entry.
    pub(crate) fn available_on_entry(&self, e: &Entry) -> bool {
        if self.evicting && e.is_retired() {
            return self.is_tool_available(&e.name);
        }
        let control = e.control.raw();
        if control == 0 {
            // The gate's own two readings, in its order (see `gate_entry`).
            return e
                .breaker
                .refusal_while_open(|| self.coarse_now_ticks())
                .is_none()
                && e.breaker.would_allow(|| self.now_ticks());
        }
        let ctl = Control::decode(control);
        let now = self.now_ticks();
        if ctl.forced_open_until(now).is_some() {
            return false;
        }
        ctl.mode == ToolControl::ForcedClosed || ctl.shadow || e.breaker.would_allow(|| now)
    }

    // ------------------------------------------------------------------------------------
    // Records
    // ------------------------------------------------------------------------------------

    /// Records a successful call by name.
    ///
    /// A success while the breaker is half-open is taken as the probe's result and closes it;
    /// a success while open (or after the probe's lease expired) is ignored by the breaker.
    #[inline]
    pub fn record_success(&self, tool: &str, duration: Duration) -> Recorded {
        self.record(tool, CallOutcome::Success, duration, None, None)
    }

    /// Records a failed call by name.
    #[inline]
    pub fn record_failure(&self, tool: &str, duration: Duration) -> Recorded {
        self.record(tool, CallOutcome::Failure, duration, None, None)
    }

    /// Records a call's outcome by name. A [`CallOutcome::Refused`] only counts a refusal.
    #[inline]
    pub fn record_outcome(&self, tool: &str, outcome: CallOutcome, duration: Duration) -> Recorded {
        self.record(tool, outcome, duration, None, None)
    }

    /// Records a call admitted with `permit`: a result from an older breaker generation never
    /// closes or re-opens a newer episode.
    #[inline]
    pub fn record_with_permit(
        &self,
        tool: &str,
        permit: Permit,
        outcome: CallOutcome,
        duration: Duration,
    ) -> Recorded {
        self.record(tool, outcome, duration, Some(permit.generation), None)
    }

    /// The general record with a [`CallReport`] (permit, `error.type`, retry hint).
    pub fn record_report(&self, tool: &str, report: &CallReport<'_>) -> Recorded {
        self.record_inner(tool, report)
    }

    /// Records by name with the permit's generation when there is one, and the call's
    /// `error.type` for observers (the duration histogram).
    #[inline(always)]
    pub fn record(
        &self,
        tool: &str,
        outcome: CallOutcome,
        duration: Duration,
        generation: Option<u32>,
        error_type: Option<&str>,
    ) -> Recorded {
        self.record_inner(
            tool,
            &CallReport::of(outcome, duration, generation, error_type),
        )
    }

    #[inline(always)]
    fn record_inner(&self, tool: &str, report: &CallReport<'_>) -> Recorded {
        match &self.names {
            Names::Grow(index) => match index.get(tool) {
                Some(e) => self.record_entry_report(tool, Some(e), report),
                None => self.record_first_sight(tool, report),
            },
            Names::Removable(_) => self.record_removable(tool, report),
        }
    }

    /// [`record_inner`](Self::record_inner) in an evicting registry: out of line, so the
    /// default index's path carries no owned-`Arc` slot.
    #[inline(never)]
    fn record_removable(&self, tool: &str, report: &CallReport<'_>) -> Recorded {
        let mut slot = None;
        match self.names.get(tool, &mut slot) {
            Some(e) => self.record_entry_report(tool, Some(e), report),
            None => self.record_first_sight(tool, report),
        }
    }

    /// [`record`](Self::record) for a name the index does not hold (yet): creates the entry, or
    /// counts the call as overflow past the cap.
    #[cold]
    #[inline(never)]
    fn record_first_sight(&self, tool: &str, report: &CallReport<'_>) -> Recorded {
        let entry = self.insert_slow(tool);
        self.record_entry_report(tool, entry.as_deref(), report)
    }

    /// The record on a resolved entry (`None`: a tool past the cap): the one implementation
    /// behind the by-name records and [`ToolHandle`](crate::ToolHandle).
    #[inline(always)]
    pub(crate) fn record_on_entry(
        &self,
        tool: &str,
        entry: Option<&Entry>,
        outcome: CallOutcome,
        duration: Duration,
        generation: Option<u32>,
        error_type: Option<&str>,
    ) -> Recorded {
        self.record_entry_report(
            tool,
            entry,
            &CallReport::of(outcome, duration, generation, error_type),
        )
    }

    #[inline(always)]
    fn record_entry_report(
        &self,
        tool: &str,
        entry: Option<&Entry>,
        report: &CallReport<'_>,
    ) -> Recorded {
        let outcome = report.outcome;
        let duration = if outcome == CallOutcome::Refused {
            Duration::ZERO
        } else {
            report.duration
        };
        let recorded = match entry {
            Some(e) => {
                let applied = self.apply_record(e, report, duration);
                // Work first, then touch: a record never lands in an evicted entry (see
                // `touch`); a retired entry's record is redone on a fresh one.
                if self.touch(e) {
                    applied
                } else {
                    self.redo_record(tool, report, duration)
                }
            }
            None => {
                self.count_overflow(outcome);
                None
            }
        };
        let recorded = match recorded {
            None => Recorded::default(),
            Some(a) => {
                self.notify_transitions(tool, &a);
                Recorded {
                    expired: a.expired,
                    transition: a.transition,
                }
            }
        };
        self.notify_call(|| CallEvent {
            tool,
            outcome,
            duration,
            error_type: report.error_type,
            overflow: entry.is_none(),
        });
        recorded
    }

    /// The record of a retired entry, redone on the live one (or a fresh one).
    #[cold]
    #[inline(never)]
    fn redo_record(
        &self,
        tool: &str,
        report: &CallReport<'_>,
        duration: Duration,
    ) -> Option<Applied> {
        self.with_entry_or_insert(tool, |live| self.apply_record(live, report, duration))
            .flatten()
    }

    /// A result on a tracked tool: its stats, then its breaker. `None` when the breaker has
    /// nothing to report (the hot path: a success on a Closed breaker).
    #[inline(always)]
    fn apply_record(
        &self,
        e: &Entry,
        report: &CallReport<'_>,
        duration: Duration,
    ) -> Option<Applied> {
        let generation = report.generation;
        match report.outcome {
            CallOutcome::Success => {
                e.stats.record(true, duration);
                // A slow success is a failure for the breaker only.
                if duration_to_nanos(duration) > e.slow_call_ns.load(Ordering::Relaxed) {
                    Some(e.breaker.on_failure(generation, self.now_ticks(), 0))
                } else if e.breaker.success_if_closed(generation) {
                    None
                } else {
                    Some(e.breaker.on_success(generation, || self.now_ticks()))
                }
            }
            CallOutcome::Failure => {
                e.stats.record(false, duration);
                let now = self.now_ticks();
                let not_before = report
                    .retry_after
                    .map_or(0, |d| now.saturating_add(breaker::ticks_of_duration(d)));
                Some(e.breaker.on_failure(generation, now, not_before))
            }
            CallOutcome::Ignored => {
                e.stats.record_ignored();
                None
            }
            CallOutcome::Refused => {
                e.stats.record_refused();
                None
            }
        }
    }

    #[cold]
    fn count_overflow(&self, outcome: CallOutcome) {
        self.overflow_records.fetch_add(1, Ordering::Relaxed);
        match outcome {
            CallOutcome::Success => self.overflow_success.fetch_add(1, Ordering::Relaxed),
            CallOutcome::Failure => self.overflow_failure.fetch_add(1, Ordering::Relaxed),
            _ => self.overflow_ignored.fetch_add(1, Ordering::Relaxed),
        };
    }

    /// Gives a probe permit back without a result (the call was cancelled): the breaker
    /// re-opens with its cooldown already elapsed, so the next gate call may probe at once
    /// instead of waiting for the lease. Does nothing for a permit that is not the live probe.
    pub fn release(&self, tool: &str, permit: Permit) -> Recorded {
        self.with_entry(tool, |e| self.release_on_entry(tool, e, permit))
            .unwrap_or_default()
    }

    /// [`release`](Self::release) on a resolved entry.
    pub(crate) fn release_on_entry(&self, tool: &str, e: &Entry, permit: Permit) -> Recorded {
        if !permit.probe {
            return Recorded::default();
        }
        let a = e.breaker.release(permit.generation, self.now_ticks());
        self.notify_transitions(tool, &a);
        Recorded {
            expired: a.expired,
            transition: a.transition,
        }
    }

    // ------------------------------------------------------------------------------------
    // Operator controls (see the `control` module)
    // ------------------------------------------------------------------------------------

    /// Isolates the tool: every call is refused until [`release_control`](Self::release_control).
    /// Returns `false` when the tool cannot be tracked (past the cap).
    pub fn force_open(&self, tool: &str) -> bool {
        self.with_entry_or_insert(tool, |e| {
            e.control
                .set_mode(ToolControl::ForcedOpen { until: None }, breaker::NEVER)
        })
        .is_some()
    }

    /// Isolates the tool until `until` on the registry's clock (see [`now`](Self::now)).
    pub fn force_open_until(&self, tool: &str, until: Duration) -> bool {
        self.with_entry_or_insert(tool, |e| {
            e.control.set_mode(
                ToolControl::ForcedOpen { until: Some(until) },
                breaker::ticks_of_instant(until),
            )
        })
        .is_some()
    }

    /// Isolates the tool for `duration` from now.
    pub fn force_open_for(&self, tool: &str, duration: Duration) -> bool {
        let until = self.clock.now().saturating_add(duration);
        self.force_open_until(tool, until)
    }

    /// Disables the tool's breaker: every call is allowed (results still feed the stats and
    /// the breaker).
    pub fn force_closed(&self, tool: &str) -> bool {
        self.with_entry_or_insert(tool, |e| e.control.set_mode(ToolControl::ForcedClosed, 0))
            .is_some()
    }

    /// Back to normal: the breaker decides again (shadow mode is left as it is).
    pub fn release_control(&self, tool: &str) {
        self.with_entry(tool, |e| e.control.set_mode(ToolControl::Normal, 0));
    }

    /// Shadow mode on or off: refusals are decided and counted, not enforced.
    pub fn set_shadow(&self, tool: &str, on: bool) -> bool {
        if !on {
            self.with_entry(tool, |e| e.control.set_shadow(false));
            return true;
        }
        self.with_entry_or_insert(tool, |e| e.control.set_shadow(true))
            .is_some()
    }

    /// The operator control in force for the tool (a lapsed forced-open reads as such until
    /// released; the gate no longer enforces it).
    pub fn control(&self, tool: &str) -> ToolControl {
        self.with_entry(tool, |e| e.control.state().mode)
            .unwrap_or(ToolControl::Normal)
    }

    /// Whether shadow mode is on for the tool.
    pub fn is_shadow(&self, tool: &str) -> bool {
        self.with_entry(tool, |e| e.control.state().shadow)
            .unwrap_or(false)
    }

    /// Resets the tool to fresh: stats zeroed, breaker closed, backoff forgotten. Permits
    /// handed out before are stale afterwards. Controls and policy are kept.
    pub fn reset(&self, tool: &str) {
        self.with_entry(tool, |e| {
            e.breaker.reset();
            e.stats.reset();
        });
    }

    /// Every tool the gate would refuse right now, sorted by name: what to leave out of the tool
    /// list offered to the model, with when to try again.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tool_health::ToolHealthRegistry;
    ///
    /// let registry = ToolHealthRegistry::new();
    /// registry.force_open_for("flaky_api", Duration::from_secs(120));
    /// for t in registry.unavailable_tools() {
    ///     println!("{} unavailable, retry in {:?}", t.tool, t.retry_after);
    /// }
    /// ```
    pub fn unavailable_tools(&self) -> Vec<UnavailableTool> {
        let now = self.now_ticks();
        let mut out = Vec::new();
        self.names.for_each(|e| {
            if self.available_on_entry(e) {
                return;
            }
            out.push({
                let forced = Control::decode(e.control.raw()).forced_open_until(now);
                let eff = e.breaker.effective(now);
                let until = match (forced, eff) {
                    (Some(until), _) => until,
                    (None, Effective::Open { ready_at, .. }) => ready_at,
                    (None, Effective::HalfOpen { lease_end }) => lease_end,
                    (None, Effective::Closed) => now,
                };
                UnavailableTool {
                    tool: e.name.to_string(),
                    breaker: eff.state(),
                    retry_after: if until >= breaker::NEVER {
                        Duration::MAX
                    } else {
                        Duration::from_millis(until.saturating_sub(now))
                    },
                    forced: forced.is_some(),
                }
            });
        });
        out.sort_unstable_by(|a, b| a.tool.cmp(&b.tool));
        out
    }

    /// Tells observers about a call; the event is only built when there are observers.
    #[inline(always)]
    fn notify_call<'a>(&self, event: impl FnOnce() -> CallEvent<'a>) {
        if self.has_observers.load(Ordering::Acquire) {
            self.notify_call_slow(&event());
        }
    }

    #[inline(never)]
    fn notify_call_slow(&self, event: &CallEvent<'_>) {
        // Observers that log must not fail the current tool span (see `layer::CallingOut`).
        let _quiet = crate::layer::CallingOut::enter();
        for o in self.observers.load().iter() {
            o.on_call(event);
        }
    }

    #[inline(always)]
    fn notify_transitions(&self, tool: &str, applied: &Applied) {
        if (applied.expired.is_some() || applied.transition.is_some())
            && self.has_observers.load(Ordering::Acquire)
        {
            self.notify_transitions_slow(tool, applied);
        }
    }

    #[inline(never)]
    fn notify_transitions_slow(&self, tool: &str, applied: &Applied) {
        let _quiet = crate::layer::CallingOut::enter();
        let at = self.clock.now();
        for t in applied.expired.iter().chain(applied.transition.iter()) {
            for o in self.observers.load().iter() {
                o.on_transition(tool, t, at);
            }
        }
    }

    // ------------------------------------------------------------------------------------
    // Reads (never create entries)
    // ------------------------------------------------------------------------------------

    /// The tool's status; an unknown tool is healthy.
    pub fn get_health_status(&self, tool: &str) -> HealthStatus {
        self.with_entry(tool, |e| self.status_on_entry(e))
            .unwrap_or(HealthStatus::Healthy)
    }

    /// [`get_health_status`](Self::get_health_status) on a resolved entry, allocation-free.
    pub(crate) fn status_on_entry(&self, e: &Entry) -> HealthStatus {
        let eff = e.breaker.effective(self.now_ticks());
        HealthStatus::classify(
            e.stats.snapshot().score(),
            eff.state() == BreakerState::Open,
        )
    }

    /// [`breaker_state`](Self::breaker_state) on a resolved entry.
    pub(crate) fn state_on_entry(&self, e: &Entry) -> BreakerState {
        e.breaker.effective(self.now_ticks()).state()
    }

    /// The tool's breaker state now (expiry-aware); an unknown tool is closed.
    pub fn breaker_state(&self, tool: &str) -> BreakerState {
        self.with_entry(tool, |e| self.state_on_entry(e))
            .unwrap_or(BreakerState::Closed)
    }

    /// Everything known about the tool, or `None` for a tool never recorded.
    pub fn snapshot(&self, tool: &str) -> Option<ToolHealthSnapshot> {
        let now = self.now_ticks();
        self.with_entry(tool, |e| Self::snapshot_of(e, now))
    }

    /// Every tracked tool's snapshot, sorted by name.
    pub fn health_summary(&self) -> Vec<ToolHealthSnapshot> {
        let now = self.now_ticks();
        let mut all = Vec::with_capacity(self.tracked_tools());
        self.names.for_each(|e| all.push(Self::snapshot_of(e, now)));
        all.sort_unstable_by(|a, b| a.tool.cmp(&b.tool));
        all
    }

    /// Visits every tracked tool without allocating per tool (for exporters).
    pub(crate) fn for_each_tool(&self, mut f: impl FnMut(&str, &EntryView)) {
        let now = self.now_ticks();
        self.names.for_each(|e| {
            let view = EntryView {
                stats: e.stats.snapshot(),
                state: e.breaker.effective(now).state(),
                transitions: e.breaker.transition_counts(),
            };
            f(&e.name, &view);
        });
    }

    fn snapshot_of(e: &Entry, now: u64) -> ToolHealthSnapshot {
        let eff = e.breaker.effective(now);
        let stats = e.stats.snapshot();
        let score = stats.score();
        let retry_after = match eff {
            Effective::Open { ready_at, .. } if ready_at >= breaker::NEVER => Some(Duration::MAX),
            Effective::Open { ready_at, .. } => {
                Some(Duration::from_millis(ready_at.saturating_sub(now)))
            }
            _ => None,
        };
        ToolHealthSnapshot {
            tool: e.name.to_string(),
            status: HealthStatus::classify(score, eff.state() == BreakerState::Open),
            score,
            success_rate: stats.success_rate(),
            ewma_success: stats.ewma_f64(),
            total_calls: stats.total(),
            success_count: stats.success,
            failure_count: stats.failure,
            refused_count: stats.refused,
            ignored_count: stats.ignored,
            avg_duration: stats.avg_duration(),
            max_duration: Duration::from_nanos(stats.max_duration_ns),
            breaker: eff.state(),
            consecutive_failures: e.breaker.consecutive_failures(),
            retry_after,
            shadow_refused_count: stats.shadow_refused,
            control: e.control.state().mode,
            shadow: e.control.state().shadow,
        }
    }
}
