//! The span-binding hook: how the gate reaches a tracing layer without naming it.
//!
//! The registry sits below the tracing layer and never names it. Instead, the way `tracing`
//! itself dispatches, the layer installs a function here when it is attached to a subscriber
//! ([`install_binder`]), and the gate runs its decision through [`gate`]: the binder finds the
//! tool span the call belongs to, answers the call's own probe if it already holds it, or lets
//! the registry decide and binds the decision. Until a layer is attached anywhere in the
//! process, the gate's whole cost here is one load ([`installed`]).
//!
//! The call helper (`call_helper.rs`) reaches the layer the same way, through [`CallHooks`]:
//! it asks whether its span is a tool span the layer feeds this registry from ([`joins`]), and
//! hands it each run's outcome ([`record`]): the layer records that run at once, as one call,
//! and the tool spans of the same tool around it add no record of their own. Both go through
//! the span's own dispatcher, not the thread's current default: a future dropped outside the
//! scope it ran in still reaches its layer.
//!
//! [`CallingOut`] marks a thread that is running code on the crate's behalf (observers, the
//! classifier, OpenTelemetry annotations): the layer ignores spans and events created there, so
//! an observer that logs never fails a healthy tool's span nor recurses into the layer.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError, Weak};
use std::time::Duration;

use tracing::span::Id;
use tracing::{Dispatch, Span};

use crate::call::{CallOutcome, GateDecision, Permit};

/// Runs a gate decision bound to the current tool span: the registry's address (to find a
/// layer feeding this very registry), the requested tool name, and `decide`, the registry's
/// own gate, which the binder calls at most once (not at all when the call already holds the
/// tool's probe).
pub(crate) type Binder =
    fn(registry: usize, tool: &str, decide: &mut dyn FnMut() -> GateDecision) -> GateDecision;

/// The binder of the first layer attached in the process; never replaced (every layer installs
/// the same function: it finds the right layer through the thread's entered tool spans).
static BINDER: OnceLock<Binder> = OnceLock::new();

/// Set once a binder is installed; never cleared. The gate's whole cost while no layer is
/// attached: one relaxed load.
///
/// Relaxed is enough: a layer is attached before its subscriber becomes anyone's default
/// (and making it the default synchronises), and a gate call that races the very first
/// installation merely stays unbound, which is what it would be a moment earlier. The binder
/// itself is read through the `OnceLock`, which synchronises on its own.
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Installs the layer's binder (idempotent).
pub(crate) fn install_binder(binder: Binder) {
    let _ = BINDER.set(binder);
    INSTALLED.store(true, Ordering::Relaxed);
}

/// Whether a layer was ever attached in this process: if not, the gate decides unbound.
#[inline(always)]
pub(crate) fn installed() -> bool {
    INSTALLED.load(Ordering::Relaxed)
}

/// The gate through the binder (when [`installed`]): `registry` is the deciding registry's
/// address, `decide` its detached gate.
pub(crate) fn gate(
    registry: usize,
    tool: &str,
    decide: &mut dyn FnMut() -> GateDecision,
) -> GateDecision {
    if DEFERRED.load(Ordering::Relaxed) != 0 {
        flush_deferred(registry);
    }
    let decision = match BINDER.get() {
        Some(binder) => binder(registry, tool, decide),
        None => decide(),
    };
    // Outside the binder's `get_default`: an event emitted in there would go nowhere.
    warn_if_tool_spans_filtered();
    decision
}

/// A feed holding calls whose verdict comes after their span (`infer/deferred.rs`): the gate
/// has it record what is due before deciding, so that a probe's deferred verdict is never
/// stale.
pub(crate) trait DeferredFlush: Send + Sync {
    /// Records the waiting calls of `registry` (its address) that are due now.
    fn flush_due(&self, registry: usize);
}

/// Calls waiting for a late verdict, in every feed of the process. While it is zero the gate
/// pays one relaxed load for them. Relaxed is enough: a flush is an early record, never
/// needed for correctness of the breaker word; a racing gate call merely flushes at its next
/// call.
static DEFERRED: AtomicUsize = AtomicUsize::new(0);

/// The feeds that may hold waiting calls (dropped ones are skipped).
static FLUSHERS: Mutex<Vec<Weak<dyn DeferredFlush>>> = Mutex::new(Vec::new());

/// Registers a feed that may hold waiting calls, and has the gate go through [`gate`].
pub(crate) fn install_deferred_flush(feed: Weak<dyn DeferredFlush>) {
    let mut flushers = FLUSHERS.lock().unwrap_or_else(PoisonError::into_inner);
    flushers.retain(|f| f.strong_count() > 0);
    flushers.push(feed);
    INSTALLED.store(true, Ordering::Relaxed);
}

/// `n` more (or fewer) calls wait somewhere.
pub(crate) fn deferred_add(n: isize) {
    if n >= 0 {
        DEFERRED.fetch_add(n.unsigned_abs(), Ordering::Relaxed);
    } else {
        DEFERRED.fetch_sub(n.unsigned_abs(), Ordering::Relaxed);
    }
}

/// Flushes every feed's due calls for `registry`, eight feeds at a time taken out of the list
/// (no lock held while they record, no allocation).
#[cold]
#[inline(never)]
fn flush_deferred(registry: usize) {
    const CHUNK: usize = 8;
    let mut from = 0;
    loop {
        let mut feeds: [Option<std::sync::Arc<dyn DeferredFlush>>; CHUNK] = Default::default();
        let more = {
            let list = FLUSHERS.lock().unwrap_or_else(PoisonError::into_inner);
            for (slot, feed) in feeds.iter_mut().zip(list.iter().skip(from)) {
                *slot = feed.upgrade();
            }
            list.len() > from + CHUNK
        };
        for feed in feeds.iter().flatten() {
            feed.flush_due(registry);
        }
        if !more {
            break;
        }
        from += CHUNK;
    }
}

thread_local! {
    /// The last call a `ToolHealthLayer` recorded on this thread: its registry's address, a
    /// hash of its tool name, and the registry clock's reading then. The span processor, which
    /// sees the same span when tracing-opentelemetry ends it right after the layer's close (the
    /// documented layer order), skips it: one call, one record, the layer's (it holds the
    /// permit).
    static LAYER_RECORDED: Cell<Option<(usize, u64, Duration)>> = const { Cell::new(None) };
}

/// How long after the layer's record the span processor may still take a span of the same
/// tool on the same thread for the same call (tracing-opentelemetry ends it within the same
/// close; the registry clock may be coarse).
#[cfg_attr(not(feature = "span-feed"), allow(dead_code))]
pub(crate) const SAME_CLOSE: Duration = Duration::from_millis(50);

/// Set once a span processor exists in the process: until then the layer marks nothing.
static PROCESSOR: AtomicBool = AtomicBool::new(false);

/// A span processor exists (the layer starts marking its records).
#[cfg_attr(not(feature = "span-feed"), allow(dead_code))]
pub(crate) fn install_processor() {
    PROCESSOR.store(true, Ordering::Relaxed);
}

/// Whether a span processor exists in the process (the layer's close then marks its calls):
/// one relaxed load.
#[inline(always)]
pub(crate) fn processor_installed() -> bool {
    PROCESSOR.load(Ordering::Relaxed)
}

/// The layer handled (recorded, deferred or folded) a call of `tool` at `now`.
#[cold]
#[inline(never)]
pub(crate) fn mark_layer_recorded(registry: usize, tool: &str, now: Duration) {
    let hash = tool_hash(tool);
    let _ = LAYER_RECORDED.try_with(|c| c.set(Some((registry, hash, now))));
}

/// Whether the layer just recorded this call (and forgets it: one skip per record). `now` is
/// read only when the layer left a mark of this call on this thread.
#[cfg_attr(not(feature = "span-feed"), allow(dead_code))]
pub(crate) fn take_layer_recorded(
    registry: usize,
    tool: u64,
    now: impl FnOnce() -> Duration,
) -> bool {
    LAYER_RECORDED
        .try_with(|c| match c.get() {
            Some((r, t, at))
                if r == registry && t == tool && now().saturating_sub(at) <= SAME_CLOSE =>
            {
                c.set(None);
                true
            }
            _ => false,
        })
        .unwrap_or(false)
}

/// A tool name's fingerprint for [`mark_layer_recorded`]: its length and its first and last
/// eight bytes (a few instructions; it tells one call's span from another tool's on the same
/// thread within one close, which is all it is asked).
pub(crate) fn tool_hash(tool: &str) -> u64 {
    let b = tool.as_bytes();
    let word = |s: &[u8]| s.iter().fold(0u64, |w, &x| (w << 8) | u64::from(x));
    let head = word(&b[..b.len().min(8)]);
    let tail = word(&b[b.len().saturating_sub(8)..]);
    (b.len() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ head ^ tail.rotate_left(29)
}

/// Set once the filter warning was given.
static FILTER_WARNED: AtomicBool = AtomicBool::new(false);

/// Warns once per process, with the fix, when the subscribers' level filter drops INFO spans:
/// a layer is attached but never sees `#[instrument]` (INFO) tool spans, so nothing is
/// recorded and no breaker opens. Called by the gate while a layer is attached anywhere, and
/// by the layer on the events it sees. Costs two relaxed loads until it has warned, one after.
#[inline]
pub(crate) fn warn_if_tool_spans_filtered() {
    if !FILTER_WARNED.load(Ordering::Relaxed)
        && tracing::level_filters::LevelFilter::current() < tracing::Level::INFO
    {
        warn_filtered();
    }
}

#[cold]
#[inline(never)]
fn warn_filtered() {
    if FILTER_WARNED.swap(true, Ordering::Relaxed) {
        return;
    }
    let max_level = tracing::level_filters::LevelFilter::current();
    tracing::warn!(
        target: "tool_health",
        %max_level,
        "tool spans are filtered out: the subscriber's level filter ({max_level}) drops INFO \
         spans such as #[instrument] tool spans, so ToolHealthLayer sees no tool call, records \
         nothing and no breaker opens. Fix: filter per layer — \
         `fmt::layer().with_filter(EnvFilter::from_default_env())` with ToolHealthLayer left \
         unfiltered — or let INFO through for your tools' target (RUST_LOG=warn,my_agent=info). \
         Calls made through `registry.call(tool)` are recorded either way."
    );
}

/// One run of the call helper inside a tool span the layer sees: its outcome, the permit its
/// gate gave it, and how long it took.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HelperRun<'a> {
    /// `None`: nothing is recorded (the call says nothing about the tool), a probe goes back.
    pub(crate) outcome: Option<CallOutcome>,
    pub(crate) error_type: Option<&'a str>,
    pub(crate) permit: Permit,
    pub(crate) duration: Duration,
}

/// What the call helper asks of an attached layer, about one span (its id and the dispatcher
/// it belongs to): both look at that span's nearest tool span owned by the dispatcher's layer
/// for this registry (its address).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallHooks {
    /// Whether that tool span exists and carries the tool's name.
    pub(crate) joins: fn(registry: usize, tool: &str, span: &Id, dispatch: &Dispatch) -> bool,
    /// Records one helper run in that tool span at once (one call), and marks the span and the
    /// same-tool spans around it as recorded: they add no record of their own at close, and the
    /// decision the run resolved is no longer bound to them. Whether the layer recorded it.
    pub(crate) record: fn(
        registry: usize,
        tool: &str,
        span: &Id,
        dispatch: &Dispatch,
        run: &HelperRun<'_>,
    ) -> bool,
}

static CALL_HOOKS: OnceLock<CallHooks> = OnceLock::new();

/// Installs the layer's call hooks (idempotent; every layer installs the same functions).
pub(crate) fn install_call_hooks(hooks: CallHooks) {
    let _ = CALL_HOOKS.set(hooks);
}

/// Whether `span` is (inside) a tool span for `tool` that a layer feeds `registry` from.
pub(crate) fn joins(registry: usize, tool: &str, span: &Span) -> bool {
    let Some(hooks) = CALL_HOOKS.get() else {
        return false;
    };
    span.with_subscriber(|(id, dispatch)| (hooks.joins)(registry, tool, id, dispatch))
        .unwrap_or(false)
}

/// Records a helper run in `span`'s tool span for `tool`; whether a layer recorded it.
pub(crate) fn record(registry: usize, tool: &str, span: &Span, run: &HelperRun<'_>) -> bool {
    let Some(hooks) = CALL_HOOKS.get() else {
        return false;
    };
    span.with_subscriber(|(id, dispatch)| (hooks.record)(registry, tool, id, dispatch, run))
        .unwrap_or(false)
}

thread_local! {
    /// Set while the crate calls out (registry observers, the layer's classifier, OpenTelemetry)
    /// on this thread.
    static CALLING_OUT: Cell<bool> = const { Cell::new(false) };
}

/// Marks this thread as calling out until dropped.
#[derive(Debug)]
pub(crate) struct CallingOut(bool);

impl CallingOut {
    pub(crate) fn enter() -> Self {
        Self(CALLING_OUT.try_with(|c| c.replace(true)).unwrap_or(false))
    }

    /// Whether this thread is calling out now.
    pub(crate) fn active() -> bool {
        CALLING_OUT.try_with(Cell::get).unwrap_or(false)
    }
}

impl Drop for CallingOut {
    fn drop(&mut self) {
        let _ = CALLING_OUT.try_with(|c| c.set(self.0));
    }
}
