//! The call helper's side of the layer: joining the current tool span and settling its
//! outcome (see `src/hook.rs`, [`CallHooks`](crate::hook::CallHooks)).
//!
//! The helper (`ToolHealthRegistry::call`) knows a call's outcome exactly — the `Result`, a
//! timeout, a dropped future — so when its span is one of this layer's tool spans it hands the
//! outcome over and the layer records that at close (with the bound permit, the span's
//! duration and the transition events) instead of inferring it from fields and events.

use std::sync::Arc;

use tracing::span::Id;
use tracing::Dispatch;
use tracing_core::Subscriber;
use tracing_subscriber::registry::LookupSpan;

use crate::hook::{CallHooks, Verdict};

use super::callsites::CallsiteRole;
use super::span_state::{Settled, ToolSpan};
use super::ToolHealthLayer;

/// The monomorphised span walker a layer stores in `on_layer`: runs `f` on the state of the
/// nearest tool span of span `id` (itself included) when it carries `tool`'s name; whether it
/// did.
pub(crate) type SpanFn =
    fn(&Dispatch, &ToolHealthLayer, &Id, &str, &mut dyn FnMut(&mut ToolSpan)) -> bool;

/// The hooks every layer installs.
pub(crate) const HOOKS: CallHooks = CallHooks { joins, settle };

fn joins(registry: usize, tool: &str, id: &Id, dispatch: &Dispatch) -> bool {
    with_tool_span(registry, tool, id, dispatch, &mut |_| {})
}

fn settle(
    registry: usize,
    tool: &str,
    id: &Id,
    dispatch: &Dispatch,
    verdict: &Verdict<'_>,
) -> bool {
    with_tool_span(registry, tool, id, dispatch, &mut |state| {
        state.settled = Some(Settled::from(verdict));
    })
}

/// Finds `dispatch`'s layer for `registry` and runs `f` on the span.
fn with_tool_span(
    registry: usize,
    tool: &str,
    id: &Id,
    dispatch: &Dispatch,
    f: &mut dyn FnMut(&mut ToolSpan),
) -> bool {
    let Some(layer) = dispatch.downcast_ref::<ToolHealthLayer>() else {
        return false;
    };
    if Arc::as_ptr(&layer.core.registry) as usize != registry {
        return false;
    }
    layer
        .span_fn
        .is_some_and(|walk| walk(dispatch, layer, id, tool, f))
}

/// The body of [`SpanFn`] for subscriber type `S`.
pub(crate) fn with_tool_span_in<S>(
    dispatch: &Dispatch,
    layer: &ToolHealthLayer,
    id: &Id,
    tool: &str,
    f: &mut dyn FnMut(&mut ToolSpan),
) -> bool
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let Some(subscriber) = dispatch.downcast_ref::<S>() else {
        return false;
    };
    let Some(start) = subscriber.span(id) else {
        return false;
    };
    let core = &layer.core;
    for span in start.scope() {
        if !core.role(span.metadata()).has(CallsiteRole::TOOL_SPAN) {
            continue;
        }
        let Some(cell) = core.cell_of(&span) else {
            continue;
        };
        let mut state = cell.lock();
        if !state.may_be_tool() {
            continue;
        }
        // The nearest tool span decides: the helper joins it only when it is the same tool.
        if state.tool_name() != Some(tool) {
            return false;
        }
        f(&mut state);
        return true;
    }
    false
}

impl From<&Verdict<'_>> for Settled {
    fn from(v: &Verdict<'_>) -> Self {
        Settled {
            outcome: v.outcome,
            error_type: v.error_type.map(Into::into),
        }
    }
}
