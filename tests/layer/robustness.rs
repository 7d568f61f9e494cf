//! The layer under odd input and re-entrant logging: numbers, booleans, control characters and
//! huge values in its fields; observers and field values that log while the layer runs. No
//! panic, no deadlock, no recursion.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::calls;
use crate::support::{registry as new_registry, Harness, ALL_STACKS};
use tool_health::observe::CallEvent;
use tool_health::observe::HealthObserver;
use tool_health::{BreakerState, ToolHealthLayer, Transition};
use tracing::field;

/// An observer that logs from inside the layer's record path.
#[derive(Debug, Default)]
struct Chatty(AtomicUsize);
impl HealthObserver for Chatty {
    fn on_call(&self, e: &CallEvent<'_>) {
        self.0.fetch_add(1, Ordering::Relaxed);
        tracing::error!(tool = e.tool, "call observed");
        let _ = tracing::info_span!("observer", gen_ai.tool.name = "observer").entered();
    }
    fn on_transition(&self, tool: &str, t: &Transition, _at: Duration) {
        tracing::error!(tool, from = %t.from, to = %t.to, "transition observed");
    }
}

/// A value whose formatting logs.
struct Loud;
impl std::fmt::Debug for Loud {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        tracing::error!("formatting a field");
        f.write_str("loud")
    }
}

#[test]
fn logging_while_the_layer_runs_neither_deadlocks_nor_recurses() {
    for stack in ALL_STACKS {
        let (clock, registry) = new_registry(1);
        let chatty = Arc::new(Chatty::default());
        registry.add_observer(chatty.clone());
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| {
            let span = tool_span!("db");
            span.in_scope(|| {
                assert!(registry.allow_request("db"));
                tracing::error!("down");
            });
            span.record("error.type", field::debug(Loud));
            drop(span);
            clock.advance(Duration::from_secs(30));
            tool_span!("db").in_scope(|| assert!(registry.allow_request("db")));
        });
        assert!(chatty.0.load(Ordering::Relaxed) >= 2, "{stack:?}");
        assert_eq!(
            registry.breaker_state("db"),
            BreakerState::Closed,
            "{stack:?}"
        );
        assert_eq!(calls(&registry, "observer"), (0, 0, 0, 0), "{stack:?}");
    }
}

#[test]
fn odd_field_values_never_panic() {
    for stack in ALL_STACKS {
        let (_clock, registry) = new_registry(0);
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| {
            // Numbers and booleans where strings are expected.
            drop(tracing::info_span!("n", gen_ai.tool.name = 42_i64));
            drop(tracing::info_span!("b", gen_ai.tool.name = true, error.type = 500_u64));
            tracing::info_span!(
                "f",
                gen_ai.tool.name = 1.5_f64,
                otel.status_code = field::Empty
            )
            .record("otel.status_code", 2);
            // Debug-recorded values keep their quotes; control characters and huge values.
            drop(tracing::info_span!("d", gen_ai.tool.name = ?"quoted"));
            drop(tool_span!("\u{0}\n\u{202e}"));
            drop(tool_span!("x".repeat(100_000).as_str()));
            // Records the same field many times, and fields it does not declare.
            let span = tool_span!("again");
            for i in 0..100 {
                span.record("gen_ai.tool.name", i);
                span.record("not_a_field", i);
            }
            span.record("gen_ai.tool.name", "again");
            drop(span);
            tracing::error!(error.type = ?Loud, "no span");
            tool_span!("e").in_scope(|| tracing::error!(error.type = true, "bool type"));
        });
        assert_eq!(calls(&registry, "42"), (1, 0, 0, 0), "{stack:?}");
        assert_eq!(calls(&registry, "true"), (0, 1, 0, 0), "{stack:?}");
        assert_eq!(calls(&registry, "1.5"), (1, 0, 0, 0), "{stack:?}");
        assert_eq!(calls(&registry, "\"quoted\""), (1, 0, 0, 0), "{stack:?}");
        assert_eq!(calls(&registry, "again"), (1, 0, 0, 0), "{stack:?}");
        assert_eq!(calls(&registry, "e"), (0, 1, 0, 0), "{stack:?}");
        assert_eq!(registry.snapshot("0"), None, "{stack:?}");
    }
}
