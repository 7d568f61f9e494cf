//! A closed tool span → a record in the registry: classify what was seen, measure the
//! duration, record with the bound permit, write the transitions on the span.

use tracing::span::Id;

use crate::breaker::Transition;
use crate::call::CallReport;
use crate::hook::CallingOut;

use super::span_state::{SpanCell, ToolSpan};
use super::{otel, ToolHealthLayer};

impl ToolHealthLayer {
    /// Records a closed tool span's outcome. `state` is the span's own state, closed and locked
    /// (nothing else binds to a closed span; its lock is only ever taken before an enclosing
    /// span's, never after); no extensions lock is held. `outer`: the nearest of this layer's
    /// tool spans around it, if any.
    pub(super) fn finish(&self, id: &Id, state: &mut ToolSpan, outer: Option<SpanCell>) {
        let _calling_out = CallingOut::enter();
        let registry = &self.core.registry;

        // One call is one record: a tool span nested in a span of the same tool (a framework's
        // span around an `#[instrument]` tool function) is part of the outer call. What was
        // seen on it, and a decision bound to it, count for the outer span, which records.
        if let Some(outer) = &outer {
            let replaced = {
                let mut outer_state = outer.lock();
                let same_call = !outer_state.closed
                    && state.tool_name().is_some()
                    && outer_state.tool_name() == state.tool_name();
                same_call.then(|| outer_state.absorb(state))
            };
            if let Some(replaced) = replaced {
                if let Some((tool, permit)) =
                    replaced.and_then(|b| Some((b.tool.clone(), b.probe()?)))
                {
                    let _ = registry.release(&tool, permit);
                }
                return;
            }
        }

        let binding = state.binding.take();
        if state.helper_recorded {
            // The call helper recorded its runs in this span, each as one call: the span adds
            // none. A probe still bound to it (a gate after the last run) gets no verdict.
            if let Some((b, permit)) = binding.as_ref().and_then(|b| Some((b, b.probe()?))) {
                let _ = registry.release(&b.tool, permit);
            }
            return;
        }
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
        // The permit's generation applies only to the breaker it came from.
        let (permit, other_probe) = match &binding {
            Some(b) if &*b.tool == name => (b.decision.permit(), None),
            Some(b) => (None, b.probe().map(|p| (&*b.tool, p))),
            None => (None, None),
        };
        if state.refused {
            // The tool returned the gate's refusal as its error: the call was refused (by a
            // gate that could not bind here, or another one), not failed. Nothing is recorded
            // — the refusing gate counted it — and a probe the span holds gets no verdict.
            for (tool, p) in permit
                .filter(|p| p.is_probe())
                .map(|p| (name, p))
                .into_iter()
                .chain(other_probe)
            {
                let _ = registry.release(tool, p);
            }
            return;
        }
        let facts = state.seen.facts(name);
        let outcome = self.core.classify(&facts);

        let mut transitions: Vec<Transition> = Vec::new();
        match outcome {
            Some(outcome) => {
                let duration = registry.now().saturating_sub(state.start);
                let mut report = CallReport::new(outcome, duration);
                if let Some(p) = permit {
                    report = report.permit(p);
                }
                report.error_type = facts.error_type;
                report.retry_after = state.retry_hint();
                let recorded = registry.record_report(name, &report);
                // A probe whose call makes no verdict (cancelled, a caller error) is given
                // back by the record itself: the report carries the permit.
                transitions.extend(recorded.transitions());
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
