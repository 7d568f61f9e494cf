//! [`RegistryBuilder`] and the registry's constructors.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use arc_swap::ArcSwap;

use crate::clock::{Clock, SystemClock};
use crate::policy::{CircuitBreakerConfig, SettingError, ToolPolicy};
use crate::ticks::Ticks;

use super::names::{NameIndex, DEFAULT_MAX_NAME_LEN, MAX_NAME_LEN_LIMIT};
use super::{ToolHealthRegistry, DEFAULT_MAX_TOOLS, EXTRA_TOUCH};

/// Builds a [`ToolHealthRegistry`]: config, clock, caps and the application's tools.
///
/// Every setting is checked when the registry is built: [`try_build`](Self::try_build) returns
/// a [`SettingError`] naming the field and its range, [`build`](Self::build) panics with the
/// same text.
#[derive(Debug)]
#[must_use]
pub struct RegistryBuilder {
    config: CircuitBreakerConfig,
    clock: Option<Arc<dyn Clock>>,
    max_tools: usize,
    max_name_len: usize,
    tools: Vec<Box<str>>,
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

    /// The clock of another registry (the servers' registry shares its tools' time line).
    #[cfg(feature = "mcp")]
    pub(crate) fn shared_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The longest tool name the registry takes unless
    /// [`max_name_len`](Self::max_name_len) says otherwise: 256 bytes.
    pub const DEFAULT_MAX_NAME_LEN: usize = DEFAULT_MAX_NAME_LEN;

    /// How many distinct tools to track (default [`DEFAULT_MAX_TOOLS`](Self::DEFAULT_MAX_TOOLS)):
    /// at least 1. Declared tools ([`tools`](Self::tools)) take their slots first; undeclared
    /// names share the rest, and past it share one overflow breaker.
    pub fn max_tools(mut self, max_tools: usize) -> Self {
        self.max_tools = max_tools;
        self
    }

    /// The longest tool name taken, in bytes (default
    /// [`DEFAULT_MAX_NAME_LEN`](Self::DEFAULT_MAX_NAME_LEN), 256): 1 to 65,536. A longer name
    /// is refused by every entry point without being copied (see [`NameError`](crate::NameError)),
    /// so a tracked tool costs at most this much for its name.
    pub fn max_name_len(mut self, bytes: usize) -> Self {
        self.max_name_len = bytes;
        self
    }

    /// Declares the application's tools: each is tracked from the start and always keeps its
    /// own breaker — never evicted, and never pushed out by names the model invents (see
    /// [`ToolHealthRegistry::declare_tools`]). Adds to the names given before. Each name at most
    /// [`max_name_len`](Self::max_name_len) bytes, at most [`max_tools`](Self::max_tools) of
    /// them.
    ///
    /// ```
    /// use tool_health::ToolHealthRegistry;
    ///
    /// let registry = ToolHealthRegistry::builder()
    ///     .tools(["search", "payments", "sql_query"])
    ///     .build();
    /// assert_eq!(registry.declared_tools(), 3);
    /// assert!(registry.force_open("payments"), "a declared tool always has its breaker");
    /// ```
    pub fn tools<I, S>(mut self, tools: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.tools
            .extend(tools.into_iter().map(|t| Box::<str>::from(t.as_ref())));
        self
    }

    /// When a new tool meets the cap, first evict tools idle for at least `idle_for` (see
    /// [`ToolHealthRegistry::evict_idle`]) to make room: above zero. Default: off.
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
    ///
    /// # Panics
    ///
    /// When a setting is outside its range, with the text of the [`SettingError`]
    /// [`try_build`](Self::try_build) would return (settings are usually written in code, where
    /// a wrong one should stop the program at its first run; take settings from elsewhere with
    /// `try_build`).
    #[track_caller]
    pub fn build(self) -> ToolHealthRegistry {
        match self.try_build() {
            Ok(registry) => registry,
            Err(e) => e.panic(),
        }
    }

    /// The registry, or the first setting outside its range: `max_tools` (at least 1),
    /// `max_name_len` (1 to 65,536), `evict_idle_after` (above zero), `tools` (names of at most
    /// `max_name_len` bytes, at most `max_tools` of them).
    ///
    /// ```
    /// use tool_health::ToolHealthRegistry;
    ///
    /// let err = ToolHealthRegistry::builder().max_tools(0).try_build().unwrap_err();
    /// assert_eq!(err.field(), "max_tools");
    /// ```
    pub fn try_build(mut self) -> Result<ToolHealthRegistry, SettingError> {
        if self.max_tools == 0 {
            return Err(SettingError::new(
                "max_tools",
                0,
                "at least 1 (a registry that tracks no tool protects none)",
            ));
        }
        if !(1..=MAX_NAME_LEN_LIMIT).contains(&self.max_name_len) {
            return Err(SettingError::new(
                "max_name_len",
                self.max_name_len,
                format!("1 to {MAX_NAME_LEN_LIMIT} bytes"),
            ));
        }
        if self.evict_idle_after == Some(Duration::ZERO) {
            return Err(SettingError::new(
                "evict_idle_after",
                "0 s",
                "a duration above zero",
            ));
        }
        if let Some(t) = self.tools.iter().find(|t| t.len() > self.max_name_len) {
            return Err(SettingError::new(
                "tools",
                format_args!("a name of {} bytes", t.len()),
                format!(
                    "names of at most max_name_len = {} bytes",
                    self.max_name_len
                ),
            ));
        }
        let distinct: HashSet<&str> = self.tools.iter().map(|t| &**t).collect();
        if distinct.len() > self.max_tools {
            return Err(SettingError::new(
                "tools",
                format_args!("{} tools", distinct.len()),
                format!("at most max_tools = {} tools", self.max_tools),
            ));
        }
        let tools = std::mem::take(&mut self.tools);
        let registry = self.assemble();
        for t in &tools {
            // Checked above: every declaration fits.
            let _ = registry.insert_slow(t, true);
        }
        Ok(registry)
    }

    fn assemble(self) -> ToolHealthRegistry {
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
            declared: AtomicUsize::new(0),
            max_tools: self.max_tools,
            max_name_len: self.max_name_len,
            tag_hasher: foldhash::fast::RandomState::default(),
            instance_id: new_instance_id(),
            default_policy: ArcSwap::from_pointee(ToolPolicy::from(self.config)),
            overrides: ArcSwap::from_pointee(HashMap::new()),
            clock,
            overflow: OnceLock::new(),
            overflow_records: AtomicU64::new(0),
            rejected_names: AtomicU64::new(0),
            overflow_warned: AtomicBool::new(false),
            rejected_warned: AtomicBool::new(false),
            record_extras: AtomicU8::new(if self.evictable { EXTRA_TOUCH } else { 0 }),
            observers: ArcSwap::from_pointee(Vec::new()),
            transition_observers: ArcSwap::from_pointee(Vec::new()),
            local_rate_trips: AtomicBool::new(true),
            coordinated: AtomicBool::new(false),
            outcome_listening: AtomicBool::new(false),
            outcome_listener: arc_swap::ArcSwapOption::empty(),
            log_transitions: AtomicBool::new(self.log_transitions),
            #[cfg(feature = "mcp")]
            servers: std::sync::OnceLock::new(),
        }
    }
}

impl ToolHealthRegistry {
    /// A registry with the default config and the system clock.
    pub fn new() -> Self {
        Self::builder().build()
    }

    /// A registry with `config` as the default breaker config: the product's first name for
    /// `ToolHealthRegistry::builder().config(config).build()` (every config is valid: see
    /// [`CircuitBreakerConfig`]).
    pub fn with_config(config: CircuitBreakerConfig) -> Self {
        Self::builder().config(config).build()
    }

    /// A builder for config, clock and cap.
    pub fn builder() -> RegistryBuilder {
        RegistryBuilder {
            config: CircuitBreakerConfig::default(),
            clock: None,
            max_tools: DEFAULT_MAX_TOOLS,
            max_name_len: DEFAULT_MAX_NAME_LEN,
            tools: Vec::new(),
            evict_idle_after: None,
            evictable: false,
            log_transitions: true,
        }
    }
}

/// A registry's id: 64 random bits (std's per-instance random hash keys over the time and an
/// address), as 16 hexadecimal digits. Unique, not secret.
fn new_instance_id() -> Arc<str> {
    use std::hash::{BuildHasher as _, Hasher as _};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    h.write_u128(now.as_nanos());
    let here = 0u8;
    h.write_usize(std::ptr::addr_of!(here) as usize);
    // Sixteen hex digits into a string made once at that size: the same allocations whatever
    // the digits (`format!` grows its string by the pieces, whose number the value decides —
    // noise in the allocation counts of the Python package's test).
    let mut id = String::with_capacity(16);
    let _ = std::fmt::Write::write_fmt(&mut id, format_args!("{:016x}", h.finish()));
    id.into()
}
