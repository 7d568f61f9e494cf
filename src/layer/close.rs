//! A closed tool span → a record in the registry: classify what was seen, measure the
//! duration, record with the bound permit, write the transitions on the span.

use tracing::span::Id;

use crate::breaker::Transition;
use crate::call::{CallOutcome, CallReport};
use crate::hook::CallingOut;

use super::classify::SpanFacts;
use super::span_state::ToolSpan;
use super::{otel, ToolHealthLayer};

impl ToolHealthLayer {
    /// Records a closed tool span's outcome; no extensions lock is held.
    pub(super) fn finish(&self, id: &Id, mut state: ToolSpan) {
        let _calling_out = CallingOut::enter();
        let registry = &self.core.registry;
        let binding = state.binding.take();
        // The call helper's settled outcome wins over inference.
        let settled = state.settled.take();
        let Some(name) = state.tool_name() else {
            // Not a tool span after all (no name, or another operation): nothing to record,
            // and a probe bound to it goes back at once.
            if let Some((b, permit)) = binding.as_ref().and_then(|b| Some((b, b.probe()?))) {
                let _ = registry.release(&b.tool, permit);
            }
            return;
        };
        if binding.as_ref().is_some_and(|b| !b.decision.is_allowed()) {
            // Refused: the gate counted the refusal; the call was not made.
            return;
        }
        let facts = SpanFacts {
            tool: name,
            error_type: state
                .error_type
                .as_ref()
                .map(|(_, t)| t.as_str())
                .or(state.event_error_type.as_deref()),
            call_outcome: state.call_outcome.as_deref(),
            failure_field: state.failure_field,
            status_error: state.status_error,
            error_event: state.error_event,
            panicked: state.panicked,
            completed: state.completed,
        };
        let (outcome, facts) = match &settled {
            Some(s) => (
                Some(s.outcome),
                SpanFacts {
                    error_type: s.error_type.as_deref().or(facts.error_type),
                    ..facts
                },
            ),
            None => (self.core.classify(&facts), facts),
        };

        // The permit's generation applies only to the breaker it came from.
        let (permit, other_probe) = match &binding {
            Some(b) if &*b.tool == name => (b.decision.permit(), None),
            Some(b) => (None, b.probe().map(|p| (&*b.tool, p))),
            None => (None, None),
        };
        let mut transitions: Vec<Transition> = Vec::new();
        match outcome {
            Some(outcome) => {
                let duration = registry.now().saturating_sub(state.start);
                // A cancelled call makes no verdict: counted without the permit, and a probe
                // given back exactly (the permit says whether it is the probe).
                let cancelled = outcome == CallOutcome::Cancelled;
                let recorded = registry.record_report(
                    name,
                    &CallReport {
                        outcome,
                        duration,
                        generation: permit.filter(|_| !cancelled).map(|p| p.generation()),
                        error_type: facts.error_type,
                        retry_after: state.retry_hint(),
                    },
                );
                transitions.extend(recorded.transitions());
                if let Some(p) = permit.filter(|p| cancelled && p.is_probe()) {
                    transitions.extend(registry.release(name, p).transitions());
                }
            }
            None => {
                if let Some(p) = permit.filter(|p| p.is_probe()) {
                    transitions.extend(registry.release(name, p).transitions());
                }
            }
        }
        if let Some((tool, p)) = other_probe {
            let _ = registry.release(tool, p);
        }
        if !transitions.is_empty() {
            if let Some(dispatch) = self.dispatch() {
                otel::annotate_transitions(&dispatch, id, &transitions);
            }
        }
    }
}
