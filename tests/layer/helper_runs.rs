//! Issue 20, items 3 and 4: the call helper inside a tool span of the same tool — a framework's
//! `execute_tool` span, an `#[instrument]`ed tool function. Each helper run is one call,
//! recorded when it ends (a probe's verdict at once); the span around the runs adds no record
//! of its own. Before: the runs joined the span and the layer recorded once, at its close —
//! three failed attempts were one failure, and a failed probe was handed to the next attempts.

use std::time::Duration;

use tool_health::{BreakerState, CallError, ToolHealthLayer, ToolHealthRegistry};
use tracing::instrument;

use crate::support::{registry, Harness, ALL_STACKS};
use crate::{calls, ToolError};

/// The README's retry loop: up to three runs of the helper, stopping at the first success or
/// refusal. How many times the tool itself was called.
fn retry_three_times(registry: &std::sync::Arc<ToolHealthRegistry>, up: bool) -> usize {
    let mut called = 0;
    for _ in 0..3 {
        let r = registry.call("search").run_blocking(|| {
            called += 1;
            if up {
                Ok(())
            } else {
                Err(ToolError)
            }
        });
        match r {
            Ok(()) | Err(CallError::Refused { .. }) => break,
            Err(_) => continue,
        }
    }
    called
}

/// An `#[instrument]`ed tool function (a GenAI tool span) with the retry loop inside.
#[instrument(
    name = "execute_tool search",
    skip_all,
    fields(gen_ai.operation.name = "execute_tool", gen_ai.tool.name = "search")
)]
fn instrumented_tool(registry: &std::sync::Arc<ToolHealthRegistry>, up: bool) -> usize {
    retry_three_times(registry, up)
}

/// A framework's span around the tool (rig's `execute_tool` shape), the retry loop inside.
fn framework_span(registry: &std::sync::Arc<ToolHealthRegistry>, up: bool) -> usize {
    let span = tool_span!("search");
    let _entered = span.enter();
    retry_three_times(registry, up)
}

type Caller = fn(&std::sync::Arc<ToolHealthRegistry>, bool) -> usize;
const CALLERS: [(&str, Caller); 2] = [
    ("#[instrument]ed tool function", instrumented_tool),
    ("framework span", framework_span),
];

#[test]
fn each_helper_run_inside_a_same_tool_span_is_one_call() {
    for stack in ALL_STACKS {
        for (what, caller) in CALLERS {
            let (_clock, registry) = registry(3);
            let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
            let called = h.run(|| caller(&registry, false));
            assert_eq!(
                called, 3,
                "{stack:?}, {what}: three attempts reached the tool"
            );
            assert_eq!(
                calls(&registry, "search"),
                (0, 3, 0, 0),
                "{stack:?}, {what}: three failed attempts are three failures"
            );
            assert_eq!(
                registry.breaker_state("search"),
                BreakerState::Open,
                "{stack:?}, {what}: threshold 3 reached"
            );
            // A healthy call: one run, one success, nothing more at the span's close.
            let (_clock, registry) = crate::support::registry(3);
            let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
            assert_eq!(h.run(|| caller(&registry, true)), 1);
            assert_eq!(
                calls(&registry, "search"),
                (1, 0, 0, 0),
                "{stack:?}, {what}"
            );
        }
    }
}

#[test]
fn a_failed_probe_is_never_retried_through_the_gate_within_its_episode() {
    for stack in ALL_STACKS {
        for (what, caller) in CALLERS {
            let (clock, registry) = registry(1);
            let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
            h.run(|| {
                assert_eq!(
                    caller(&registry, false),
                    1,
                    "the first attempt trips (threshold 1)"
                );
                assert_eq!(registry.breaker_state("search"), BreakerState::Open);
                clock.advance(Duration::from_secs(30));
                // Half-open: one probe. It fails at once; the retries meet an open breaker.
                let called = caller(&registry, false);
                assert_eq!(
                    called, 1,
                    "{stack:?}, {what}: the recovering tool got {called} calls in one half-open \
                     episode"
                );
                assert_eq!(registry.breaker_state("search"), BreakerState::Open);
                assert_eq!(
                    calls(&registry, "search"),
                    (0, 2, 0, 2),
                    "{stack:?}, {what}: the trip and the failed probe (each attempt after them \
                     refused), nothing at the span's close"
                );
                // The next episode's probe succeeds: one run, closed.
                clock.advance(Duration::from_secs(30));
                assert_eq!(caller(&registry, true), 1);
                assert_eq!(registry.breaker_state("search"), BreakerState::Closed);
                assert_eq!(
                    calls(&registry, "search"),
                    (1, 2, 0, 2),
                    "{stack:?}, {what}"
                );
            });
        }
    }
}

#[test]
fn a_probe_a_middleware_holds_goes_to_the_first_run_inside_only() {
    for stack in ALL_STACKS {
        let (clock, registry) = registry(1);
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| {
            let span = tool_span!("search");
            let _entered = span.enter();
            registry.record_failure("search", Duration::from_millis(1));
            clock.advance(Duration::from_secs(30));
            // The middleware's gate takes the probe for the span.
            assert!(registry.allow_request("search"));
            assert_eq!(registry.breaker_state("search"), BreakerState::HalfOpen);
            // The tool's helper run is answered that probe (not refused by it) and fails.
            let r = registry
                .call("search")
                .run_blocking(|| Err::<(), _>(ToolError));
            assert!(matches!(r, Err(CallError::Tool(_))), "{r:?}");
            assert_eq!(registry.breaker_state("search"), BreakerState::Open);
            // A second run is refused: the probe was resolved by the first.
            let r = registry
                .call("search")
                .run_blocking(|| Ok::<_, ToolError>(()));
            assert!(r.is_err_and(|e| e.is_refused()), "{stack:?}");
        });
        assert_eq!(calls(&registry, "search"), (0, 2, 0, 1), "{stack:?}");
        assert_eq!(registry.breaker_state("search"), BreakerState::Open);
    }
}

#[test]
fn an_async_helper_inside_an_instrumented_async_tool_records_each_run() {
    #[instrument(
        name = "execute_tool search",
        skip_all,
        fields(gen_ai.operation.name = "execute_tool", gen_ai.tool.name = "search")
    )]
    async fn tool(registry: std::sync::Arc<ToolHealthRegistry>) -> u32 {
        let mut failures = 0;
        for _ in 0..3 {
            match registry
                .call("search")
                .run(async { Err::<(), _>(ToolError) })
                .await
            {
                Err(CallError::Tool(_)) => failures += 1,
                _ => break,
            }
        }
        failures
    }
    for stack in ALL_STACKS {
        let (_clock, registry) = registry(3);
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let failures = h.run(|| rt.block_on(tool(registry.clone())));
        assert_eq!(failures, 3);
        assert_eq!(calls(&registry, "search"), (0, 3, 0, 0), "{stack:?}");
        assert_eq!(registry.breaker_state("search"), BreakerState::Open);
    }
}
