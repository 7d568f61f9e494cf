//! The registry: tool name → stats and breaker, the gate and the record paths by name.
//!
//! One `impl ToolHealthRegistry` block per verb, each in its own file:
//!
//! | file | what |
//! |---|---|
//! | `builder.rs` | [`RegistryBuilder`], constructors |
//! | `config.rs` | the default config and per-tool policies |
//! | `gate.rs` | `allow_request`, `check`, `is_tool_available` |
//! | `record.rs` | `record_*`, `release` |
//! | `controls.rs` | force open / closed, shadow, reset |
//! | `eviction.rs` | first sight, the cap, idle eviction and its handshake with records |
//! | `observers.rs` | [`HealthObserver`] and how it is called |
//! | `coordination.rs` | what a coordinator (replicas sharing decisions) reads and applies |
//! | `past.rs` | records of calls reported after the fact (spans from other processes), by the call's clock |
//! | `reads.rs` | snapshots, summaries, `unavailable_tools` |
//! | `handle.rs` | [`ToolHandle`]: the same paths on a pre-resolved tool |
//! | `entry.rs`, `names.rs`, `index.rs` | one tool's entry; the name index |
//!
//! # Cost model
//!
//! * **First sight of a name** (the first *record* of a tool): one mutex acquisition, the entry's
//!   allocation and an insertion into the map. This is the only slow path and the only place
//!   a lock is taken.
//! * **Every later call** on that tool — `allow_request`, `check`, `record_*`, and every read —
//!   is a lookup in a guard-free append-only index (plain loads, no read-modify-write; see
//!   `index.rs`) followed by atomics on the tool's entry. Nothing is allocated:
//!   `tests/zero_alloc.rs` pins this with a counting allocator. A registry built with
//!   [`RegistryBuilder::evictable`] uses papaya instead (epoch-protected, so entries can be
//!   removed), which costs a little more per lookup (figures in `BENCHMARKS.md`).
//! * **Reads never create entries** ("no ghost breakers"): an unknown tool reads as fresh —
//!   healthy, score 1.0, breaker closed, always available. The gate does not create entries
//!   either: a tool nobody has recorded is closed, so there is nothing to remember yet.
//!
//! # Bounded memory, and protection whatever the model invents
//!
//! At most [`RegistryBuilder::max_tools`] tools (default [`DEFAULT_MAX_TOOLS`]) are tracked,
//! each with its own breaker. Tools the application *declares*
//! ([`RegistryBuilder::tools`], [`ToolHealthRegistry::declare_tools`], or any operator
//! control, which declares its tool) always have one: they are created when declared, never
//! evicted, and undeclared names share only what is left of the cap. Past the cap a new,
//! undeclared name is still protected: its calls go through **one shared overflow breaker**
//! (the default policy, created at the first overflow, which is logged once as a WARN with the
//! fix), counted in [`OverflowStats`] and in the metrics' `_OTHER` series — never unguarded,
//! and never a new allocation per name. So memory stays bounded whatever names a model
//! invents, and inventing names cannot switch any tool's protection off.
//!
//! # Names
//!
//! Names are compared byte-wise, exactly as given: `Search`, `search` and a differently
//! normalised unicode spelling are three tools. Any string of at most
//! [`RegistryBuilder::max_name_len`] bytes (default 256) is a name,
//! the empty one and control characters included; a longer one is refused by every entry point
//! without being copied ([`NameError`]). Log messages show names escaped; metric attributes
//! and snapshots carry them exactly (their encoders escape).
//!
//! # Configuration
//!
//! [`ToolHealthRegistry::set_config`] swaps the default [`CircuitBreakerConfig`] atomically
//! (arc-swap); it applies to breakers created afterwards, so set it before traffic.

mod builder;
mod config;
mod controls;
pub mod coordination;
mod entry;
mod eviction;
mod gate;
mod handle;
mod index;
#[cfg(all(test, tool_health_loom))]
mod loom_model;
mod names;
mod observers;
pub mod past;
mod reads;
mod record;

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use arc_swap::ArcSwap;

use crate::clock::Clock;
use crate::policy::ToolPolicy;
use crate::ticks::{Now, Ticks};

pub use builder::RegistryBuilder;
use entry::Entry;
pub use handle::ToolHandle;
pub use observers::{CallEvent, EvictedTool, HealthObserver, LOG_TARGET};
pub use reads::{OverflowStats, ToolHealthSnapshot, UnavailableTool};

pub use names::Escaped;
pub use names::NameError;
use names::NameIndex;

#[cfg(doc)]
use crate::policy::CircuitBreakerConfig;

/// [`ToolHealthRegistry::record_extras`]: records touch their entry (an evicting registry).
const EXTRA_TOUCH: u8 = 1;
/// [`ToolHealthRegistry::record_extras`]: observers are registered.
const EXTRA_OBSERVE: u8 = 1 << 1;

/// How many distinct tools a registry tracks by default.
pub const DEFAULT_MAX_TOOLS: usize = 10_000;

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
    names: NameIndex,
    /// Built for idle eviction: the evictable index, and records touch their entry.
    evicting: bool,
    /// Serialises first sights and evictions; never taken on a known tool. Holds the history of
    /// sweep epochs: (epoch, the instant it started), oldest first.
    insert_lock: Mutex<VecDeque<(u64, Ticks)>>,
    /// The current sweep epoch (see [`ToolHealthRegistry::evict_idle`]).
    sweep_epoch: AtomicU64,
    /// The highest generation an evicted entry's breaker reached: every new entry starts its
    /// breaker there, so an evicted entry's permits (all of generation ≤ this) are never taken
    /// for one of its successor's later episodes, and the successor's first (closed) episode
    /// continues the evicted entry's last one when that was the highest. Zero in a registry
    /// that never evicts. Written under `insert_lock`; read there and, `Relaxed`, by the gate
    /// of an untracked tool (a stale read only makes that permit stale).
    generation_floor: AtomicU32,
    /// The number the next entry created gets (see `Entry::incarnation`).
    incarnations: AtomicU32,
    /// Evict idle tools this old when a first sight meets the cap.
    evict_idle_after: Option<Duration>,
    tracked: AtomicUsize,
    /// Of the tracked tools, how many are declared (never evicted; see `declare_tools`).
    /// Written under `insert_lock`.
    declared: AtomicUsize,
    max_tools: usize,
    /// The longest name taken, in bytes.
    max_name_len: usize,
    /// Tags the permits of each tool's breaker (see `tag_of`).
    tag_hasher: foldhash::fast::RandomState,
    /// This registry's id on the spans it gates (see [`instance_id`](Self::instance_id)).
    instance_id: Arc<str>,
    default_policy: ArcSwap<ToolPolicy>,
    overrides: ArcSwap<HashMap<Box<str>, Arc<ToolPolicy>>>,
    clock: Arc<dyn Clock>,
    /// The breaker shared by the names past the cap, created at the first overflow.
    overflow: OnceLock<Arc<Entry>>,
    /// Records that went to the overflow breaker.
    overflow_records: AtomicU64,
    /// Gate calls and records refused for a name longer than `max_name_len`.
    rejected_names: AtomicU64,
    /// The first overflow and the first refused name were logged.
    overflow_warned: AtomicBool,
    rejected_warned: AtomicBool,
    /// What the record path must do beyond the stats and the breaker: [`EXTRA_TOUCH`] (an
    /// evicting registry touches the entry) and [`EXTRA_OBSERVE`] (call observers are
    /// registered). Zero in a plain registry, which the record path checks with one load.
    /// Transition observers set nothing here: transitions are announced off the fast path.
    record_extras: AtomicU8,
    observers: ArcSwap<Vec<Arc<dyn HealthObserver>>>,
    /// Observers of transitions (and evictions) only: a coordinator's way in, which leaves the
    /// record path as it is without observers (see `add_transition_observer`).
    transition_observers: ArcSwap<Vec<Arc<dyn HealthObserver>>>,
    /// Whether a tool's own failure-rate window may trip its breaker (a coordinator that
    /// evaluates the rate over the whole fleet turns it off while it is connected).
    local_rate_trips: AtomicBool,
    /// A coordinator is attached: exporters report the series only a coordinator feeds.
    coordinated: AtomicBool,
    /// An outcome listener is set: the failure path (and a watched tool's success path) tells
    /// it, after one relaxed load of this flag.
    outcome_listening: AtomicBool,
    /// The coordinator's outcome listener (see `Coordination::set_outcome_listener`).
    outcome_listener: arc_swap::ArcSwapOption<coordination::Listening>,
    /// Breaker transitions are logged (target `tool_health`).
    log_transitions: AtomicBool,
    /// The breakers of the servers this registry's tools are reached through (MCP servers),
    /// kept apart from the tools': a registry of their own, on the same clock, created on
    /// first use (see [`servers`](Self::servers)).
    #[cfg(feature = "mcp")]
    servers: std::sync::OnceLock<Arc<ToolHealthRegistry>>,
}

impl fmt::Debug for ToolHealthRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolHealthRegistry")
            .field("tracked_tools", &self.tracked_tools())
            .field("declared_tools", &self.declared_tools())
            .field("max_tools", &self.max_tools)
            .field("max_name_len", &self.max_name_len)
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

impl ToolHealthRegistry {
    /// The registry clock's reading.
    pub fn now(&self) -> Duration {
        self.clock.now()
    }

    /// The clock's reading as a breaker instant.
    #[inline]
    fn now_ticks(&self) -> Ticks {
        Ticks::at(self.clock.now())
    }

    /// The clock's reading as a breaker step uses it (rounded down and up).
    #[inline]
    fn now_step(&self) -> Now {
        Now::of(self.clock.now())
    }

    /// The clock's [coarse reading](Clock::now_coarse) as a breaker instant: only for "still
    /// cooling down?".
    #[inline]
    fn coarse_now_ticks(&self) -> Ticks {
        Ticks::at(self.clock.now_coarse())
    }

    /// Whether any observer is registered. Acquire pairs with the Release in `add_observer`
    /// (the list itself is published by arc-swap; on x86-64 this costs what Relaxed costs).
    #[inline(always)]
    fn has_observers(&self) -> bool {
        self.record_extras.load(Ordering::Acquire) & EXTRA_OBSERVE != 0
    }

    /// This registry's id: 16 hexadecimal digits, random, fixed for its life. Every span whose
    /// call it gates carries it as `tool_health.registry.id`
    /// ([`REGISTRY_ID_ATTRIBUTE`](crate::layer::REGISTRY_ID_ATTRIBUTE)), and an OTLP receiver
    /// feeding this same registry skips such a span: the call is already recorded. (A span
    /// exported by a pipeline you build yourself carries it when the layer or the call helper
    /// gated the call.)
    pub fn instance_id(&self) -> &str {
        &self.instance_id
    }

    /// [`instance_id`](Self::instance_id), shared (for span attributes).
    pub(crate) fn instance_id_shared(&self) -> &Arc<str> {
        &self.instance_id
    }

    /// This registry's identity, as the span-binding hook sees it.
    #[inline(always)]
    pub(crate) fn address(&self) -> usize {
        self as *const Self as usize
    }

    /// Runs `f` on the tool's entry, if tracked. Never creates one.
    #[inline]
    fn with_entry<R>(&self, tool: &str, f: impl FnOnce(&Entry) -> R) -> Option<R> {
        self.names.with(tool, |e| f(e))
    }

    /// How many tools are tracked.
    pub fn tracked_tools(&self) -> usize {
        self.tracked.load(Ordering::Relaxed)
    }

    /// The cap on tracked tools.
    pub fn max_tools(&self) -> usize {
        self.max_tools
    }

    /// How many of the tracked tools are declared (see
    /// [`declare_tools`](Self::declare_tools)).
    pub fn declared_tools(&self) -> usize {
        self.declared.load(Ordering::Relaxed)
    }

    /// The longest tool name the registry takes, in bytes (see
    /// [`RegistryBuilder::max_name_len`]).
    pub fn max_name_len(&self) -> usize {
        self.max_name_len
    }

    /// `Ok` when `tool` is a name the registry takes: at most
    /// [`max_name_len`](Self::max_name_len) bytes. A longer one is refused by the gate, the
    /// records, the controls, the layer and the call helper, and never copied.
    pub fn validate_name(&self, tool: &str) -> Result<(), NameError> {
        NameError::check(tool.len(), self.max_name_len)
    }

    /// The tag of `tool`'s permits: 32 bits of a hash of the name, so that the permits the
    /// gate hands out for a tool before its entry exists carry the tag the entry gets; never
    /// the overflow's tag (0). Two tools share a tag with odds of 1 in 2³² (a permit of one
    /// recorded under the other's name would then go unnoticed).
    #[cold]
    fn tag_of(&self, tool: &str) -> u32 {
        ((self.tag_hasher.hash_one(tool) >> 32) as u32).max(1)
    }

    /// Whether every slot left for undeclared names is taken: a new undeclared name goes to the
    /// overflow breaker.
    #[inline]
    fn at_cap(&self) -> bool {
        self.tracked.load(Ordering::Relaxed) >= self.max_tools
    }

    /// The breaker shared by the names past the cap, created (with the default policy as it is
    /// then) on first use.
    #[cold]
    fn overflow_entry(&self) -> &Arc<Entry> {
        self.overflow.get_or_init(|| {
            Arc::new(Entry::new(
                crate::semconv::OTHER,
                self.default_policy.load_full(),
                0,
                0,
                crate::call::OVERFLOW_TAG as u32,
                0,
            ))
        })
    }

    /// Whether `e` is the overflow breaker (never in the index).
    #[inline]
    fn is_overflow(e: &Entry) -> bool {
        e.breaker.tag() == crate::call::OVERFLOW_TAG
    }

    /// Counts a name refused for its length (and logs the first, once).
    #[cold]
    #[inline(never)]
    pub(crate) fn reject_name(&self, len: usize) {
        self.rejected_names.fetch_add(1, Ordering::Relaxed);
        if !self.rejected_warned.swap(true, Ordering::Relaxed) {
            let _quiet = crate::hook::CallingOut::enter();
            tracing::warn!(
                target: LOG_TARGET,
                len,
                max_name_len = self.max_name_len,
                "a tool name of {len} bytes was refused: tool names are at most {} bytes \
                 (RegistryBuilder::max_name_len); such calls are refused and never recorded \
                 (counted in overflow().rejected_names; logged once)",
                self.max_name_len
            );
        }
    }

    /// Logs the first overflow, once, with the fix.
    #[cold]
    fn warn_overflow_once(&self, tool: &str) {
        if !self.overflow_warned.swap(true, Ordering::Relaxed) {
            let _quiet = crate::hook::CallingOut::enter();
            tracing::warn!(
                target: LOG_TARGET,
                tool,
                max_tools = self.max_tools,
                declared = self.declared_tools(),
                "the registry tracks {} tools, its cap: new tool names now share one overflow \
                 circuit breaker (`_OTHER` in the metrics). Declare the application's tools \
                 (RegistryBuilder::tools, ToolHealthRegistry::declare_tools) so that each \
                 always has its own, or raise RegistryBuilder::max_tools (logged once)",
                self.max_tools
            );
        }
    }

    /// The registry of the servers this registry's tools are reached through, created on
    /// first use with the same clock and default config, and passed to `init` then (once).
    ///
    /// A server is an entry there, keyed by its name: its breaker, stats and controls are a
    /// tool's, read and moved with the same methods, and never listed among the tools —
    /// [`health_summary`](Self::health_summary), [`unavailable_tools`](Self::unavailable_tools)
    /// and the metrics' tool series read this registry only. Why a registry of its own rather
    /// than a kind of entry: every read, every exporter and the fleet walk one name space
    /// without a filter, and a server can never collide with a tool of the same name.
    #[cfg(feature = "mcp")]
    pub(crate) fn servers(&self, init: impl FnOnce(&Arc<ToolHealthRegistry>)) -> &Arc<Self> {
        self.servers.get_or_init(|| {
            let servers = Arc::new(
                ToolHealthRegistry::builder()
                    .config(self.config())
                    .shared_clock(Arc::clone(&self.clock))
                    .max_tools(self.max_tools)
                    .build(),
            );
            init(&servers);
            servers
        })
    }

    /// The servers' registry, if one was created (see [`servers`](Self::servers)).
    #[cfg(feature = "mcp")]
    pub(crate) fn servers_if_any(&self) -> Option<&Arc<Self>> {
        self.servers.get()
    }

    /// The clock every instant of this registry comes from.
    #[cfg(feature = "mcp")]
    pub(crate) fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }
}
