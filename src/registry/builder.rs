//! [`RegistryBuilder`] and the registry's constructors.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;

use crate::clock::{Clock, SystemClock};
use crate::policy::{CircuitBreakerConfig, ToolPolicy};
use crate::ticks::Ticks;

use super::names::NameIndex;
use super::{ToolHealthRegistry, DEFAULT_MAX_TOOLS, EXTRA_TOUCH};

/// Builds a [`ToolHealthRegistry`]: config, clock and cap.
#[derive(Debug)]
#[must_use]
pub struct RegistryBuilder {
    config: CircuitBreakerConfig,
    clock: Option<Arc<dyn Clock>>,
    max_tools: usize,
    evict_idle_after: Option<Duration>,
    evictable: bool,
    log_transitions: bool,
}

impl RegistryBuilder {
    /// How many distinct tools a registry tracks unless [`max_tools`](Self::max_tools) says
    /// otherwise: 10,000.
    pub const DEFAULT_MAX_TOOLS: usize = DEFAULT_MAX_TOOLS;

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

    /// How many distinct tools to track (default [`DEFAULT_MAX_TOOLS`](Self::DEFAULT_MAX_TOOLS)).
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
    /// protected by an epoch guard: every lookup by name then costs a little more (see
    /// `BENCHMARKS.md`). Without it (the default) the index only grows, lookups are plain
    /// loads, and memory is bounded by [`max_tools`](Self::max_tools) alone.
    /// [`evict_idle_after`](Self::evict_idle_after) implies this.
    pub fn evictable(mut self) -> Self {
        self.evictable = true;
        self
    }

    /// Whether breaker transitions are logged as `tracing` events with target `tool_health`
    /// (default `true`): WARN when a breaker opens (tool, reason, cooldown), INFO when it lets
    /// a probe through and when it closes. See [`LOG_TARGET`](super::LOG_TARGET).
    pub fn log_transitions(mut self, on: bool) -> Self {
        self.log_transitions = on;
        self
    }

    /// The registry.
    pub fn build(self) -> ToolHealthRegistry {
        let clock = self.clock.unwrap_or_else(|| Arc::new(SystemClock::new()));
        let start = Ticks::at(clock.now());
        ToolHealthRegistry {
            names: NameIndex::new(self.evictable),
            evicting: self.evictable,
            insert_lock: Mutex::new(VecDeque::from([(1, start)])),
            sweep_epoch: AtomicU64::new(1),
            generation_floor: AtomicU32::new(0),
            incarnations: AtomicU32::new(0),
            evict_idle_after: self.evict_idle_after,
            tracked: AtomicUsize::new(0),
            max_tools: self.max_tools,
            default_policy: ArcSwap::from_pointee(ToolPolicy::from(self.config)),
            overrides: ArcSwap::from_pointee(HashMap::new()),
            clock,
            overflow_success: AtomicU64::new(0),
            overflow_failure: AtomicU64::new(0),
            overflow_ignored: AtomicU64::new(0),
            overflow_cancelled: AtomicU64::new(0),
            overflow_records: AtomicU64::new(0),
            record_extras: AtomicU8::new(if self.evictable { EXTRA_TOUCH } else { 0 }),
            observers: ArcSwap::from_pointee(Vec::new()),
            transition_observers: ArcSwap::from_pointee(Vec::new()),
            local_rate_trips: AtomicBool::new(true),
            coordinated: AtomicBool::new(false),
            outcome_listening: AtomicBool::new(false),
            outcome_listener: arc_swap::ArcSwapOption::empty(),
            log_transitions: AtomicBool::new(self.log_transitions),
        }
    }
}

impl ToolHealthRegistry {
    /// A registry with the default config and the system clock.
    pub fn new() -> Self {
        Self::builder().build()
    }

    /// A registry with `config` as the default breaker config: the product's first name for
    /// `ToolHealthRegistry::builder().config(config).build()`.
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
            log_transitions: true,
        }
    }
}
