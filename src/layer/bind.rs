//! The span-aware gate: binding a gate decision to the nearest tool span.
//!
//! [`ToolHealthRegistry::check`] calls [`bind_decision`] after every decision. Without any
//! [`ToolHealthLayer`] installed in the process that is one relaxed load. Otherwise the current
//! dispatcher is asked for its `ToolHealthLayer`; when that layer feeds the very registry that
//! decided (same `Arc`), the function pointer the layer stored when it was attached to its
//! subscriber (monomorphised for the subscriber type, as tracing-error's `WithContext` does)
//! finds the current span, walks to its nearest tool-span ancestor and stores the decision
//! there.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tracing::Dispatch;
use tracing_core::Subscriber;
use tracing_subscriber::registry::LookupSpan;

use crate::breaker::BreakerState;
use crate::gate::GateDecision;
use crate::registry::ToolHealthRegistry;

use super::span_state::{Kind, ToolSpan};
use super::{otel, CallingOut, ToolHealthLayer};

/// Set once any `ToolHealthLayer` is attached to a subscriber; never cleared.
///
/// Relaxed is enough: a layer is attached before its subscriber becomes anyone's default
/// (and making it the default synchronises), and a gate call that races the very first
/// installation merely stays unbound, which is what it would be a moment earlier.
static LAYER_ATTACHED: AtomicBool = AtomicBool::new(false);

pub(crate) fn mark_attached() {
    LAYER_ATTACHED.store(true, Ordering::Relaxed);
}

/// The monomorphised span walker a layer stores in `on_layer`.
pub(crate) type BindFn = fn(&Dispatch, &ToolHealthLayer, &str, &GateDecision);

/// Binds a gate decision to the current tool span, if any (see the module docs).
#[inline]
pub(crate) fn bind_decision(registry: &ToolHealthRegistry, tool: &str, decision: &GateDecision) {
    if !LAYER_ATTACHED.load(Ordering::Relaxed) {
        return;
    }
    bind_slow(registry, tool, decision);
}

#[inline(never)]
fn bind_slow(registry: &ToolHealthRegistry, tool: &str, decision: &GateDecision) {
    tracing::dispatcher::get_default(|dispatch| {
        let Some(layer) = dispatch.downcast_ref::<ToolHealthLayer>() else {
            return;
        };
        if !std::ptr::eq(Arc::as_ptr(&layer.shared.registry), registry) {
            return;
        }
        if let Some(bind) = layer.bind_fn {
            bind(dispatch, layer, tool, decision);
        }
    });
}

/// The body of [`BindFn`] for subscriber type `S`.
pub(crate) fn bind_with<S>(
    dispatch: &Dispatch,
    layer: &ToolHealthLayer,
    tool: &str,
    decision: &GateDecision,
) where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let Some(subscriber) = dispatch.downcast_ref::<S>() else {
        return;
    };
    let current = dispatch.current_span();
    let Some(current) = current.id().and_then(|id| subscriber.span(id)) else {
        return;
    };
    let shared = &layer.shared;
    let mut found = None;
    for span in current.scope() {
        if !shared.kind(span.metadata()).has(Kind::TOOL_SPAN) {
            continue;
        }
        let mut extensions = span.extensions_mut();
        let Some(state) = extensions.get_mut::<ToolSpan>() else {
            continue;
        };
        if state.owner != shared.id() || !state.may_be_tool() {
            continue;
        }
        found = Some((span.id(), state.bind(tool, *decision)));
        break;
    }
    drop(current);
    // No extensions lock is held from here on.
    let Some((id, bound)) = found else {
        return;
    };
    let _calling_out = CallingOut::enter();
    if let Some(old) = bound.replaced_probe {
        if let Some(permit) = old.probe() {
            let _ = shared.registry.release(&old.tool, permit);
        }
    }
    if bound.stored {
        let state = match decision {
            GateDecision::Allowed(_) => BreakerState::Closed,
            GateDecision::Probe(_) => BreakerState::HalfOpen,
            GateDecision::Refused { .. } => match shared.registry.breaker_state(tool) {
                // Closed again already: the refusal was made while it was open.
                BreakerState::Closed => BreakerState::Open,
                s => s,
            },
        };
        otel::annotate_decision(dispatch, &id, decision, state);
    }
}
