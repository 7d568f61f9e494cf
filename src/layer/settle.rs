//! The call helper's side of the layer: joining the current tool span and recording each of
//! its runs in it (see `src/hook.rs`, [`CallHooks`](crate::hook::CallHooks)).
//!
//! The helper (`ToolHealthRegistry::call`) knows a call's outcome exactly — the `Result`, a
//! timeout, a dropped future — so when its span is one of this layer's tool spans it hands the
//! run over and the layer records it **at once**, as one call: with the permit the run's gate
//! gave it, its duration, the transition events on the span. Inside a tool span of the same
//! tool (a framework's `execute_tool`, an `#[instrument]`ed tool function) each helper run is
//! one call — three attempts are three records, and a failed probe's verdict is in the breaker
//! before the next attempt asks the gate — while the tool spans of that tool around the run
//! add no record of their own: the decision the run resolved is unbound from them, and they
//! are marked recorded (`ToolSpan::helper_recorded`), so their close records nothing.

use std::sync::Arc;

use tracing::span::Id;
use tracing::Dispatch;
use tracing_core::Subscriber;
use tracing_subscriber::registry::LookupSpan;

use crate::breaker::Transition;
use crate::call::CallReport;
use crate::hook::{CallHooks, CallingOut, HelperRun};

use super::callsites::CallsiteRole;
use super::span_state::{Binding, ToolSpan};
use super::{otel, ToolHealthLayer};

/// The monomorphised span walker a layer stores in `on_layer`: runs `f` on the state of the
/// nearest tool span of span `id` (itself included) when it carries `tool`'s name, then on each
/// enclosing tool span of the same tool up to the first of another tool, until `f` answers
/// `false`; whether it ran on the nearest. (One span's state is locked at a time.)
pub(crate) type SpanFn =
    fn(&Dispatch, &ToolHealthLayer, &Id, &str, &mut dyn FnMut(&mut ToolSpan) -> bool) -> bool;

/// The hooks every layer installs.
pub(crate) const HOOKS: CallHooks = CallHooks { joins, record };

fn joins(registry: usize, tool: &str, id: &Id, dispatch: &Dispatch) -> bool {
    with_tool_spans(registry, tool, id, dispatch, &mut |_| false).is_some()
}

fn record(registry: usize, tool: &str, id: &Id, dispatch: &Dispatch, run: &HelperRun<'_>) -> bool {
    // The run resolved the call's decision: unbound from every span of the call, which is
    // marked recorded. A probe some span held that is not the run's own goes back.
    let mut others: Vec<Binding> = Vec::new();
    let Some(layer) = with_tool_spans(registry, tool, id, dispatch, &mut |state| {
        state.helper_recorded = true;
        if let Some(b) = state.binding.take_if(|b| &*b.tool == tool) {
            if b.probe().is_some_and(|p| p != run.permit) {
                others.push(b);
            }
        }
        true
    }) else {
        return false;
    };
    let _calling_out = CallingOut::enter();
    let registry = &layer.core.registry;
    let Some(outcome) = run.outcome else {
        // The answer says nothing about the tool (`ErrorClass::unrecorded`): nothing recorded,
        // no entry made for a name never seen, the run's probe and any other given back.
        let probes = others
            .iter()
            .filter_map(|b| b.probe().map(|p| (&b.tool, p)));
        for (t, p) in probes {
            let _ = registry.release(t, p);
        }
        if run.permit.is_probe() {
            let _ = registry.release(tool, run.permit);
        }
        return true;
    };
    let mut report = CallReport::new(outcome, run.duration).permit(run.permit);
    report.error_type = run.error_type;
    // A run with no verdict (a caller error, a cancellation) gives its probe back through the
    // permit the report carries.
    let transitions: Vec<Transition> = registry
        .record_report(tool, &report)
        .transitions()
        .collect();
    for b in others {
        if let Some(p) = b.probe() {
            let _ = registry.release(&b.tool, p);
        }
    }
    otel::annotate_transitions(dispatch, id, &transitions);
    true
}

/// Finds `dispatch`'s layer for `registry` and runs `f` on the call's spans (see [`SpanFn`]);
/// the layer, when the nearest tool span is `tool`'s.
fn with_tool_spans<'d>(
    registry: usize,
    tool: &str,
    id: &Id,
    dispatch: &'d Dispatch,
    f: &mut dyn FnMut(&mut ToolSpan) -> bool,
) -> Option<&'d ToolHealthLayer> {
    let layer = dispatch.downcast_ref::<ToolHealthLayer>()?;
    if Arc::as_ptr(&layer.core.registry) as usize != registry {
        return None;
    }
    let walk = layer.span_fn?;
    walk(dispatch, layer, id, tool, f).then_some(layer)
}

/// The body of [`SpanFn`] for subscriber type `S`.
pub(crate) fn with_tool_span_in<S>(
    dispatch: &Dispatch,
    layer: &ToolHealthLayer,
    id: &Id,
    tool: &str,
    f: &mut dyn FnMut(&mut ToolSpan) -> bool,
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
    let mut found = false;
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
        // The nearest tool span decides: the helper joins it only when it is the same tool;
        // the call ends at the first span of another tool.
        if state.tool_name() != Some(tool) || state.closed {
            return found;
        }
        found = true;
        if !f(&mut state) {
            return true;
        }
    }
    found
}
