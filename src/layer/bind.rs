//! The span-aware gate: binding a gate decision to the nearest tool span.
//!
//! When a layer is attached to a subscriber it installs [`binder`] as the process's span-binding
//! hook (see `src/hook.rs`); the gate calls it after every decision. The binder asks the current
//! dispatcher for its `ToolHealthLayer`; when that layer feeds the very registry that decided
//! (same `Arc`), the function pointer the layer stored when it was attached to its subscriber
//! (monomorphised for the subscriber type, as tracing-error's `WithContext` does) finds the
//! current span, walks to its nearest tool-span ancestor and stores the decision there.

use std::sync::Arc;

use tracing::Dispatch;
use tracing_core::Subscriber;
use tracing_subscriber::registry::LookupSpan;

use crate::breaker::BreakerState;
use crate::call::GateDecision;
use crate::hook::CallingOut;

use super::callsites::CallsiteRole;
use super::span_state::ToolSpan;
use super::{otel, ToolHealthLayer};

/// The monomorphised span walker a layer stores in `on_layer`.
pub(crate) type BindFn = fn(&Dispatch, &ToolHealthLayer, &str, &GateDecision);

/// The span-binding hook every layer installs (see the module docs).
pub(crate) fn binder(registry: usize, tool: &str, decision: &GateDecision) {
    tracing::dispatcher::get_default(|dispatch| {
        let Some(layer) = dispatch.downcast_ref::<ToolHealthLayer>() else {
            return;
        };
        if Arc::as_ptr(&layer.core.registry) as usize != registry {
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
    let core = &layer.core;
    let mut found = None;
    for span in current.scope() {
        if !core.role(span.metadata()).has(CallsiteRole::TOOL_SPAN) {
            continue;
        }
        let mut extensions = span.extensions_mut();
        let Some(state) = extensions.get_mut::<ToolSpan>() else {
            continue;
        };
        if !core.owns(state) || !state.may_be_tool() {
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
        otel::annotate_decision(dispatch, &id, decision, state);
    }
}
