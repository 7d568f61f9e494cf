//! Writing the gate decision and breaker transitions onto the OpenTelemetry span, through
//! tracing-opentelemetry when it is in the subscriber; nothing at all when it is not.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use opentelemetry::trace::{SpanRef, Status, TraceContextExt};
use opentelemetry::{KeyValue, StringValue};
use tracing::span::Id;
use tracing::Dispatch;

use crate::breaker::{BreakerState, Transition};
use crate::call::{GateDecision, REFUSAL_MESSAGE};
use crate::semconv;

/// Runs `f` on the OpenTelemetry span of tracing span `id`, if tracing-opentelemetry tracks it.
///
/// `tracing_opentelemetry::get_otel_context` starts the OpenTelemetry span if it was not yet
/// started (its start time is the tracing span's creation time either way). The caller must
/// hold no extensions lock of this span. A panic inside tracing-opentelemetry or the SDK is
/// contained here: annotations are best effort and never take the caller down.
fn with_otel_span(dispatch: &Dispatch, id: &Id, f: impl FnOnce(&SpanRef<'_>)) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if let Some(cx) = tracing_opentelemetry::get_otel_context(id, dispatch) {
            f(&cx.span());
        }
    }));
}

/// `tool_health.gate.decision`, `tool_health.breaker.state`, `tool_health.registry.id` (the
/// registry that decided, `registry_id`), and for a refusal status Error with
/// [`REFUSAL_MESSAGE`] and `error.type` = `circuit_breaker_open`; `from_fleet` adds
/// `tool_health.gate.source = fleet`.
pub(crate) fn annotate_decision(
    dispatch: &Dispatch,
    id: &Id,
    decision: &GateDecision,
    state: BreakerState,
    from_fleet: bool,
    registry_id: &Arc<str>,
) {
    with_otel_span(dispatch, id, |span| {
        span.set_attribute(KeyValue::new(semconv::GATE_DECISION, decision.as_str()));
        span.set_attribute(KeyValue::new(semconv::BREAKER_STATE, state.as_str()));
        span.set_attribute(KeyValue::new(
            semconv::REGISTRY_ID,
            StringValue::from(Arc::clone(registry_id)),
        ));
        if from_fleet {
            span.set_attribute(KeyValue::new(semconv::GATE_SOURCE, semconv::SOURCE_FLEET));
        }
        if !decision.is_allowed() {
            span.set_attribute(KeyValue::new(
                semconv::ERROR_TYPE,
                semconv::REFUSAL_ERROR_TYPE,
            ));
            span.set_status(Status::error(REFUSAL_MESSAGE));
        }
        if decision.permit().is_some_and(|p| p.is_shadow_refused()) {
            // Shadow mode: the breaker refused, the call went ahead.
            span.set_attribute(KeyValue::new(semconv::GATE_ENFORCED, false));
        }
    });
}

/// One `tool_health.breaker.transition` event per transition.
pub(crate) fn annotate_transitions(dispatch: &Dispatch, id: &Id, transitions: &[Transition]) {
    if transitions.is_empty() {
        return;
    }
    with_otel_span(dispatch, id, |span| {
        for t in transitions {
            span.add_event(
                semconv::TRANSITION_EVENT,
                vec![
                    KeyValue::new(semconv::TRANSITION_FROM, t.from.as_str()),
                    KeyValue::new(semconv::TRANSITION_TO, t.to.as_str()),
                ],
            );
        }
    });
}
