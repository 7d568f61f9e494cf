//! The registry: tool name → stats and breaker, the gate and the record paths by name.
//!
//! # Cost model
//!
//! * **First sight of a name** (the first *record* of a tool): one mutex acquisition, the entry's
//!   allocation and an insertion into the map. This is the only slow path and the only place
//!   a lock is taken.
//! * **Every later call** on that tool — `allow_request`, `check`, `record_*`, and every read —
//!   is a lock-free lookup in the append-only index (a hash and plain acquire loads: no guard,
//!   no read-modify-write, no allocation; see the `index` module's source) followed by atomics on
//!   the tool's entry. A [`ToolHandle`](crate::ToolHandle) skips the lookup too. Nothing is allocated: `tests/zero_alloc.rs` pins this with a counting
//!   allocator.
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

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use crate::breaker::{
    self, Applied, Breaker, BreakerState, Effective, Timing, Transition, Verdict,
};
use crate::clock::{Clock, SystemClock};
use crate::gate::{CallOutcome, GateDecision, Permit};
use crate::index::Index;
use crate::stats::{HealthStatus, StatsSnapshot, ToolStats};

/// How many distinct tools a registry tracks by default.
pub const DEFAULT_MAX_TOOLS: usize = 10_000;

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

impl CircuitBreakerConfig {
    fn timing(&self) -> Timing {
        Timing::new(
            u64::from(self.failure_threshold),
            self.recovery_duration,
            self.probe_timeout,
        )
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
}

/// A read-only view of one entry for the crate's own exporters.
#[derive(Debug, Clone, Copy)]
#[allow(
    dead_code,
    reason = "read by the metrics publisher (src/metrics.rs, being written in another worktree)"
)]
pub(crate) struct EntryView {
    pub(crate) stats: StatsSnapshot,
    pub(crate) state: BreakerState,
    pub(crate) transitions: [u64; 4],
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
    /// Name → entry; its insert mutex serialises first sights so the cap is exact, and is
    /// never taken on a known tool.
    map: Index,
    tracked: AtomicUsize,
    max_tools: usize,
    config: ArcSwap<CircuitBreakerConfig>,
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
            .field("config", &**self.config.load())
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

    /// The registry.
    pub fn build(self) -> ToolHealthRegistry {
        ToolHealthRegistry {
            map: Index::new(),
            tracked: AtomicUsize::new(0),
            max_tools: self.max_tools,
            config: ArcSwap::from_pointee(self.config),
            clock: self.clock.unwrap_or_else(|| Arc::new(SystemClock::new())),
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
        }
    }

    /// Replaces the default config. Breakers that already exist keep theirs.
    pub fn set_config(&self, config: CircuitBreakerConfig) {
        self.config.store(Arc::new(config));
    }

    /// The default config new breakers get.
    pub fn config(&self) -> CircuitBreakerConfig {
        CircuitBreakerConfig::clone(&self.config.load())
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

    #[inline]
    fn with_entry<R>(&self, tool: &str, f: impl FnOnce(&Entry) -> R) -> Option<R> {
        self.map.get(tool).map(|e| f(e))
    }

    #[cold]
    fn insert_slow(&self, tool: &str) -> Option<Arc<Entry>> {
        // Under the index's insert mutex: the cap is exact.
        self.map.get_or_insert_with(tool, || {
            if self.tracked.load(Ordering::Relaxed) >= self.max_tools {
                return None;
            }
            self.tracked.fetch_add(1, Ordering::Relaxed);
            Some(Arc::new(Entry {
                name: tool.into(),
                stats: ToolStats::default(),
                breaker: Breaker::new(self.config.load().timing()),
            }))
        })
    }

    /// A pre-resolved handle on `tool`: the gate and the record paths without the name lookup
    /// (see [`ToolHandle`](crate::ToolHandle)). Creates the tool's entry if it does not exist
    /// yet, exactly as its first record would, so the tool is tracked from now on (and listed
    /// by [`health_summary`](Self::health_summary)). `None` when the tool is new and the registry
    /// is at its cap ([`max_tools`](Self::max_tools)): call by name then, which counts the
    /// calls in [`overflow`](Self::overflow).
    ///
    /// Takes the registry's `Arc` because the handle keeps the registry alive (its clock and
    /// observers); share the registry behind an `Arc` to use handles.
    pub fn handle(self: &Arc<Self>, tool: &str) -> Option<crate::ToolHandle> {
        let entry = match self.map.get(tool) {
            Some(e) => Arc::clone(e),
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
        self.check_on_entry(tool, self.map.get(tool).map(|e| &**e))
    }

    /// The gate on a resolved entry (`None`: an untracked tool, always allowed): the one
    /// implementation behind the by-name gate and [`ToolHandle`](crate::ToolHandle).
    #[inline(always)]
    pub(crate) fn check_on_entry(&self, tool: &str, entry: Option<&Entry>) -> GateDecision {
        let Some(e) = entry else {
            return GateDecision::Allowed(Permit {
                generation: 0,
                probe: false,
            });
        };
        // A Closed breaker admits on one load: no clock read, no write, no call.
        match e.breaker.closed_generation() {
            Some(generation) => GateDecision::Allowed(Permit {
                generation,
                probe: false,
            }),
            None => self.check_not_closed(tool, e),
        }
    }

    /// The gate on a breaker that was not Closed at the first look: it may refuse or grant the
    /// probe (or admit, if the breaker closed meanwhile). Out of line to keep the Closed path
    /// small enough to inline.
    #[inline(never)]
    fn check_not_closed(&self, tool: &str, e: &Entry) -> GateDecision {
        if let Some(retry_after) = e.breaker.refusal_while_open(|| self.now_ticks()) {
            return self.refuse(tool, e, retry_after);
        }
        let applied = e.breaker.acquire(|| self.now_ticks());
        if matches!(applied.verdict, Verdict::Refused { .. }) {
            e.stats.record_refused();
        }
        self.notify_transitions(tool, &applied);
        match applied.verdict {
            Verdict::Allowed { generation } => GateDecision::Allowed(Permit {
                generation,
                probe: false,
            }),
            Verdict::Probe { generation } => GateDecision::Probe(Permit {
                generation,
                probe: true,
            }),
            Verdict::Refused { retry_after } => {
                self.notify_refused(tool);
                GateDecision::Refused { retry_after }
            }
            Verdict::None => GateDecision::Allowed(Permit {
                generation: 0,
                probe: false,
            }),
        }
    }

    /// A refusal by an Open breaker still cooling down (the common refusal): counted, then
    /// told to observers, as any refusal.
    #[inline(always)]
    fn refuse(&self, tool: &str, e: &Entry, retry_after: Duration) -> GateDecision {
        e.stats.record_refused();
        self.notify_refused(tool);
        GateDecision::Refused { retry_after }
    }

    #[inline(always)]
    fn notify_refused(&self, tool: &str) {
        self.notify_call(|| CallEvent {
            tool,
            outcome: CallOutcome::Refused,
            duration: Duration::ZERO,
            error_type: None,
            overflow: false,
        });
    }

    /// The pure availability oracle: exactly what [`allow_request`](Self::allow_request) would
    /// answer at this instant, without consuming the probe or creating anything.
    pub fn is_tool_available(&self, tool: &str) -> bool {
        self.with_entry(tool, |e| self.available_on_entry(e))
            .unwrap_or(true)
    }

    /// [`is_tool_available`](Self::is_tool_available) on a resolved entry.
    #[inline]
    pub(crate) fn available_on_entry(&self, e: &Entry) -> bool {
        e.breaker.would_allow(|| self.now_ticks())
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

    /// The general record: outcome, duration, the permit's generation when there is one, and
    /// the call's `error.type` for observers (the duration histogram).
    #[inline(always)]
    pub fn record(
        &self,
        tool: &str,
        outcome: CallOutcome,
        duration: Duration,
        generation: Option<u32>,
        error_type: Option<&str>,
    ) -> Recorded {
        match self.map.get(tool) {
            Some(e) => {
                self.record_on_entry(tool, Some(e), outcome, duration, generation, error_type)
            }
            None => self.record_first_sight(tool, outcome, duration, generation, error_type),
        }
    }

    /// [`record`](Self::record) for a name the index does not hold (yet): creates the entry,
    /// or counts the call as overflow past the cap.
    #[cold]
    #[inline(never)]
    fn record_first_sight(
        &self,
        tool: &str,
        outcome: CallOutcome,
        duration: Duration,
        generation: Option<u32>,
        error_type: Option<&str>,
    ) -> Recorded {
        let entry = self.insert_slow(tool);
        self.record_on_entry(
            tool,
            entry.as_deref(),
            outcome,
            duration,
            generation,
            error_type,
        )
    }

    /// The record on a resolved entry (`None`: a tool past the cap, counted as overflow): the
    /// one implementation behind the by-name records and [`ToolHandle`](crate::ToolHandle).
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
        let duration = if outcome == CallOutcome::Refused {
            Duration::ZERO
        } else {
            duration
        };
        let overflow = entry.is_none();
        let recorded = match entry {
            Some(e) => self.apply_record(tool, e, outcome, duration, generation),
            None => {
                self.count_overflow(outcome);
                Recorded::default()
            }
        };
        self.notify_call(|| CallEvent {
            tool,
            outcome,
            duration,
            error_type,
            overflow,
        });
        recorded
    }

    /// A result on a tracked tool: its stats, then its breaker.
    #[inline(always)]
    fn apply_record(
        &self,
        tool: &str,
        e: &Entry,
        outcome: CallOutcome,
        duration: Duration,
        generation: Option<u32>,
    ) -> Recorded {
        let applied = match outcome {
            CallOutcome::Success => {
                e.stats.record(true, duration);
                // The hot path returns a constant: building `Recorded` from an `Applied` in
                // memory costs a store-forwarding stall on every call.
                if e.breaker.success_if_closed(generation) {
                    return Recorded::default();
                }
                e.breaker.on_success(generation, || self.now_ticks())
            }
            CallOutcome::Failure => {
                e.stats.record(false, duration);
                e.breaker.on_failure(generation, self.now_ticks())
            }
            CallOutcome::Ignored => {
                e.stats.record_ignored();
                return Recorded::default();
            }
            CallOutcome::Refused => {
                e.stats.record_refused();
                return Recorded::default();
            }
        };
        self.notify_transitions(tool, &applied);
        Recorded {
            expired: applied.expired,
            transition: applied.transition,
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

    // The observer hooks are split: a check inlined into the hot path (one relaxed-cost load,
    // or a test of the `Applied` value already in registers) and the loop over observers out
    // of line, so that the hot path stays small enough to inline.

    #[inline(always)]
    fn notify_call<'a>(&self, event: impl FnOnce() -> CallEvent<'a>) {
        if self.has_observers.load(Ordering::Acquire) {
            self.notify_call_slow(&event());
        }
    }

    #[inline(never)]
    fn notify_call_slow(&self, event: &CallEvent<'_>) {
        for o in self.observers.load().iter() {
            o.on_call(event);
        }
    }

    #[inline(always)]
    fn notify_transitions(&self, tool: &str, applied: &Applied) {
        if applied.expired.is_some() || applied.transition.is_some() {
            self.notify_transitions_slow(tool, applied);
        }
    }

    #[cold]
    #[inline(never)]
    fn notify_transitions_slow(&self, tool: &str, applied: &Applied) {
        if self.has_observers.load(Ordering::Acquire) {
            let at = self.clock.now();
            for t in applied.expired.iter().chain(applied.transition.iter()) {
                for o in self.observers.load().iter() {
                    o.on_transition(tool, t, at);
                }
            }
        }
    }

    // ------------------------------------------------------------------------------------
    // Reads (never create entries)
    // ------------------------------------------------------------------------------------

    /// The tool's status; an unknown tool is healthy. Allocates nothing.
    pub fn get_health_status(&self, tool: &str) -> HealthStatus {
        self.with_entry(tool, |e| self.status_on_entry(e))
            .unwrap_or(HealthStatus::Healthy)
    }

    /// [`get_health_status`](Self::get_health_status) on a resolved entry.
    pub(crate) fn status_on_entry(&self, e: &Entry) -> HealthStatus {
        let eff = e.breaker.effective(self.now_ticks());
        Self::status_of(eff, &e.stats.snapshot())
    }

    /// The tool's breaker state now (expiry-aware); an unknown tool is closed.
    pub fn breaker_state(&self, tool: &str) -> BreakerState {
        self.with_entry(tool, |e| self.state_on_entry(e))
            .unwrap_or(BreakerState::Closed)
    }

    /// [`breaker_state`](Self::breaker_state) on a resolved entry.
    pub(crate) fn state_on_entry(&self, e: &Entry) -> BreakerState {
        e.breaker.effective(self.now_ticks()).state()
    }

    /// The one classification of an entry: the breaker's effective state and the score.
    fn status_of(eff: Effective, stats: &StatsSnapshot) -> HealthStatus {
        HealthStatus::classify(stats.score(), eff.state() == BreakerState::Open)
    }

    /// Everything known about the tool, or `None` for a tool never recorded.
    pub fn snapshot(&self, tool: &str) -> Option<ToolHealthSnapshot> {
        let now = self.now_ticks();
        self.with_entry(tool, |e| Self::snapshot_of(e, now))
    }

    /// Every tracked tool's snapshot, sorted by name.
    pub fn health_summary(&self) -> Vec<ToolHealthSnapshot> {
        let now = self.now_ticks();
        let mut all: Vec<_> = self.map.iter().map(|e| Self::snapshot_of(e, now)).collect();
        all.sort_unstable_by(|a, b| a.tool.cmp(&b.tool));
        all
    }

    /// Visits every tracked tool without allocating per tool (for exporters).
    #[allow(
        dead_code,
        reason = "read by the metrics publisher (src/metrics.rs, being written in another worktree)"
    )]
    pub(crate) fn for_each_tool(&self, mut f: impl FnMut(&str, &EntryView)) {
        let now = self.now_ticks();
        for e in self.map.iter() {
            let view = EntryView {
                stats: e.stats.snapshot(),
                state: e.breaker.effective(now).state(),
                transitions: e.breaker.transition_counts(),
            };
            f(&e.name, &view);
        }
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
            status: Self::status_of(eff, &stats),
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
        }
    }
}
