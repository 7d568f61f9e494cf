//! The span-aware gate: binding a gate decision to the tool span the call belongs to.
//!
//! When a layer is attached to a subscriber it installs [`binder`] as the process's
//! span-binding hook (see `src/hook.rs`); the gate runs its decision through it.
//!
//! # Which span
//!
//! Each thread keeps a stack of the layer's tool spans entered on it ([`Entered`]): the layer
//! pushes a tool span in `on_enter` and pops it in `on_exit`. A `Layer` receives those
//! callbacks whatever wraps it (`reload::Layer`, per-layer filters, a subscriber wrapper the
//! dispatcher cannot downcast through), and the stack holds the span's shared state
//! ([`SpanCell`]), so the binder reaches the span without asking the dispatcher for the
//! subscriber or the layer. The decision binds to the innermost tool span entered on the
//! calling thread by a layer feeding the deciding registry (the same `Arc`): the tool span the
//! call runs in, or an ancestor of the current span.
//!
//! # One call
//!
//! Tool spans of the same tool nested in each other (a framework's span around an
//! `#[instrument]` tool function) are one call. When that call already holds the tool's probe —
//! an outer gate, a middleware's, was granted it — asking the gate again from inside it
//! answers that probe: the call is not refused by its own probe (and then recorded as a failed
//! probe). The inner span's decision is folded into the outer one when the inner span closes
//! (`close.rs`).
//!
//! # Cost
//!
//! Only tool spans are pushed, and a span the layer never saw costs `on_enter` / `on_exit` one
//! load of a per-layer counting filter of live tool-span ids ([`ToolSpanIds`]).

use std::cell::RefCell;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use tracing::span::Id;

use crate::breaker::BreakerState;
use crate::call::GateDecision;
use crate::hook::CallingOut;

use super::span_state::SpanCell;
use super::{otel, LayerCore};

/// A tool span entered on this thread.
struct Entered {
    core: Arc<LayerCore>,
    id: Id,
    cell: SpanCell,
}

thread_local! {
    /// The layer's tool spans entered on this thread, innermost last.
    static ENTERED: RefCell<Vec<Entered>> = const { RefCell::new(Vec::new()) };

    /// The tool span this thread created last, until it is entered: a span is usually entered
    /// right after its creation on the same thread, and its enter then finds its state here
    /// instead of in the span store.
    static NEW: RefCell<Option<Entered>> = const { RefCell::new(None) };
}

/// Remembers a tool span just created on this thread (see `NEW`).
pub(crate) fn remember_new(core: &Arc<LayerCore>, id: &Id, cell: SpanCell) {
    let _ = NEW.try_with(|slot| {
        if let Ok(mut slot) = slot.try_borrow_mut() {
            let old = slot.replace(Entered {
                core: Arc::clone(core),
                id: id.clone(),
                cell,
            });
            drop(slot);
            drop(old);
        }
    });
}

/// The state of the tool span `id` if it is the one this thread created last (and forgets it).
pub(crate) fn take_new(core: &LayerCore, id: &Id) -> Option<SpanCell> {
    NEW.try_with(|slot| {
        let mut slot = slot.try_borrow_mut().ok()?;
        let found = slot
            .as_ref()
            .is_some_and(|e| e.id == *id && e.core.id() == core.id());
        let entry = if found { slot.take() } else { None };
        drop(slot);
        entry.map(|e| e.cell)
    })
    .ok()
    .flatten()
}

/// Forgets a closing span remembered as just created (its id may be reused).
pub(crate) fn forget_new(id: &Id) {
    let _ = NEW.try_with(|slot| {
        if let Ok(mut slot) = slot.try_borrow_mut() {
            let old = slot.take_if(|e| e.id == *id);
            drop(slot);
            drop(old);
        }
    });
}

/// Pushes a tool span entered on this thread.
pub(crate) fn push(core: &Arc<LayerCore>, id: &Id, cell: SpanCell) {
    let _ = ENTERED.try_with(|stack| {
        if let Ok(mut stack) = stack.try_borrow_mut() {
            stack.push(Entered {
                core: Arc::clone(core),
                id: id.clone(),
                cell,
            });
        }
    });
}

/// Pops a tool span exited on this thread (the innermost entry with its id).
pub(crate) fn pop(core: &LayerCore, id: &Id) {
    let _ = ENTERED.try_with(|stack| {
        if let Ok(mut stack) = stack.try_borrow_mut() {
            if let Some(i) = stack
                .iter()
                .rposition(|e| e.id == *id && core.id() == e.core.id())
            {
                // Dropped after the borrow: dropping the entry's `Arc`s runs no user code, but
                // keep the rule simple.
                let entry = stack.remove(i);
                drop(stack);
                drop(entry);
            }
        }
    });
}

/// What the binder found for a gate call on this thread.
struct Found {
    core: Arc<LayerCore>,
    id: Id,
    cell: SpanCell,
}

/// The innermost tool span entered on this thread by a layer feeding `registry`, and the
/// probe of `tool` its call already holds (in it, or in the same-tool spans around it).
fn find(registry: usize, tool: &str) -> Option<(Found, Option<GateDecision>)> {
    ENTERED
        .try_with(|stack| {
            let stack = stack.try_borrow().ok()?;
            let feeds = |e: &Entered| Arc::as_ptr(&e.core.registry) as usize == registry;
            let top = stack.iter().rposition(feeds)?;
            let inner = &stack[top];
            let name = {
                let state = inner.cell.lock();
                if state.closed {
                    return None;
                }
                state.tool_name().map(str::to_owned)
            };
            // The call: the innermost span and the spans of the same tool around it.
            let mut own = None;
            for e in stack[..=top].iter().rev().filter(|e| feeds(e)) {
                let state = e.cell.lock();
                let same_call = std::ptr::eq(e, inner)
                    || (name.is_some() && state.tool_name() == name.as_deref());
                if !same_call {
                    break;
                }
                if let Some(permit) = state.own_probe(tool) {
                    own = Some(GateDecision::Probe(permit));
                    break;
                }
            }
            Some((
                Found {
                    core: Arc::clone(&inner.core),
                    id: inner.id.clone(),
                    cell: inner.cell.clone(),
                },
                own,
            ))
        })
        .ok()
        .flatten()
}

/// The span-binding hook every layer installs (see the module docs).
pub(crate) fn binder(
    registry: usize,
    tool: &str,
    decide: &mut dyn FnMut() -> GateDecision,
) -> GateDecision {
    let Some((found, own_probe)) = find(registry, tool) else {
        return decide();
    };
    if let Some(probe) = own_probe {
        return probe; // the call asks again: it holds the probe
    }
    // No lock is held while the registry decides: it may call observers, which may log.
    let decision = decide();
    let bound = found.cell.lock().bind(tool, decision);
    let core = &found.core;
    let _calling_out = CallingOut::enter();
    if let Some(old) = bound.replaced_probe {
        if let Some(permit) = old.probe() {
            let _ = core.registry.release(&old.tool, permit);
        }
    }
    if bound.stored {
        let state = match decision {
            GateDecision::Allowed(_) => BreakerState::Closed,
            GateDecision::Probe(_) => BreakerState::HalfOpen,
            GateDecision::Refused { .. } => match core.registry.breaker_state(tool) {
                // Closed again already: the refusal was made while it was open.
                BreakerState::Closed => BreakerState::Open,
                s => s,
            },
        };
        // A refusal or probe of an episode the fleet has a say in is the fleet's decision.
        let from_fleet = !matches!(decision, GateDecision::Allowed(_))
            && core.registry.coordination().is_coordinated_decision(tool);
        tracing::dispatcher::get_default(|dispatch| {
            otel::annotate_decision(
                dispatch,
                &found.id,
                &decision,
                state,
                from_fleet,
                core.registry.instance_id_shared(),
            );
        });
    }
    decision
}

/// Slots of [`ToolSpanIds`].
const ID_SLOTS: usize = 256;

/// A counting filter of the ids of a layer's live tool spans: `on_enter` and `on_exit` of a
/// span that is surely not one of them cost one load. (Ids are reused by the span store after
/// a span closes, and a tool span's id leaves the filter at its close.)
pub(crate) struct ToolSpanIds(Box<[AtomicU32; ID_SLOTS]>);

impl std::fmt::Debug for ToolSpanIds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ToolSpanIds")
    }
}

impl ToolSpanIds {
    pub(crate) fn new() -> Self {
        Self(Box::new(std::array::from_fn(|_| AtomicU32::new(0))))
    }

    fn slot(&self, id: &Id) -> &AtomicU32 {
        let h = id.into_u64().wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56;
        &self.0[h as usize % ID_SLOTS]
    }

    pub(crate) fn add(&self, id: &Id) {
        self.slot(id).fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn remove(&self, id: &Id) {
        let _ = self
            .slot(id)
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    /// Whether `id` may be a live tool span's (false: surely not).
    ///
    /// Relaxed is enough: a span's id is added in `on_new_span`, which happens before the
    /// span is entered anywhere (entering needs the span, handed over with its own
    /// synchronisation), and removed at its close, after its last exit.
    #[inline]
    pub(crate) fn may_contain(&self, id: &Id) -> bool {
        self.slot(id).load(Ordering::Relaxed) != 0
    }
}
