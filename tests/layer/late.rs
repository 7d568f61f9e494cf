//! Late verdicts: conventions whose framework reports a failure after the tool span, in the
//! parent span (adk, swiftide: `Convention::late_failure`). Spans shaped like each framework's
//! (`integrations/tests/{adk,swiftide}.rs` run the real crates); the timing rules on a manual
//! clock.

use std::time::Duration;

use tool_health::layer::DEFERRED_VERDICT_BOUND;
use tool_health::{BreakerState, CircuitBreakerConfig, ToolHealthLayer};

use crate::calls;
use crate::support::{registry, Harness, ALL_STACKS};

/// adk's tool span for `tool`, in the current span.
fn adk_span(tool: &str) -> tracing::Span {
    tracing::info_span!(
        target: "adk_agent::llm_agent",
        "",
        otel.name = %format_args!("execute_tool {tool}"),
        tool.name = %tool,
    )
}

/// adk's failure report: in the agent's span, after the tool ran (its span still open).
fn adk_tool_error(tool: &str) {
    tracing::warn!(target: "adk_agent::llm_agent", { tool.name = %tool, error = "upstream 503" }, "tool_error");
}

/// swiftide's tool span for `tool`, in the current span.
fn swiftide_span(tool: &str) -> tracing::Span {
    tracing::info_span!(target: "swiftide_agents::agent", "tool", otel.name = %format_args!("tool.{tool}"))
}

/// A value shaped like swiftide's `ToolCall` (its `Debug`).
#[derive(Debug)]
#[allow(dead_code)]
struct ToolCall {
    id: &'static str,
    name: &'static str,
    args: Option<&'static str>,
}

/// swiftide's failure report in the `step` span, after the tool span closed.
fn swiftide_failed(id: &'static str, tool: &'static str) {
    let call = ToolCall {
        id,
        name: tool,
        args: Some("{}"),
    };
    tracing::warn!(target: "swiftide_agents::agent", error = ?"boom", tool_call = ?call, "Tool call failed, retrying");
}

#[test]
fn adk_failures_reported_after_the_call_fail_it() {
    for stack in ALL_STACKS {
        let (_clock, registry) = registry(0);
        Harness::new(stack, ToolHealthLayer::new(registry.clone())).run(|| {
            let agent = tracing::info_span!(target: "adk_agent", "agent.execute");
            let _in_agent = agent.enter();
            for (tool, fail) in [("ok_tool", false), ("fail_tool", true), ("ok_tool", false)] {
                let span = adk_span(tool);
                span.in_scope(|| {});
                if fail {
                    adk_tool_error(tool);
                }
                drop(span);
            }
            // A timeout is reported the same way.
            let span = adk_span("slow_tool");
            span.in_scope(|| {});
            tracing::warn!(target: "adk_agent::llm_agent", { tool.name = "slow_tool", timeout_secs = 5u64 }, "tool_timeout");
            drop(span);
        });
        assert_eq!(calls(&registry, "ok_tool"), (2, 0, 0, 0), "{stack:?}");
        assert_eq!(calls(&registry, "fail_tool"), (0, 1, 0, 0), "{stack:?}");
        assert_eq!(calls(&registry, "slow_tool"), (0, 1, 0, 0), "{stack:?}");
    }
}

#[test]
fn swiftide_verdicts_after_the_span_are_matched_by_tool_name_in_order() {
    for stack in ALL_STACKS {
        let (_clock, registry) = registry(0);
        Harness::new(stack, ToolHealthLayer::new(registry.clone())).run(|| {
            let step =
                tracing::info_span!(target: "swiftide_agents::agent", "step", otel.name = "step-0");
            let _in_step = step.enter();
            // Three calls run concurrently; all spans close before any verdict.
            let spans = [
                swiftide_span("add"),
                swiftide_span("flaky"),
                swiftide_span("flaky"),
            ];
            for s in &spans {
                s.in_scope(|| {});
            }
            drop(spans);
            assert_eq!(
                registry.tracked_tools(),
                0,
                "nothing is recorded before the verdicts"
            );
            // swiftide awaits them in order: `add` succeeded (nothing logged), both `flaky` failed.
            swiftide_failed("c2", "flaky");
            // Another call's verdict is no move: the second `flaky` still waits for its own.
            assert_eq!(calls(&registry, "flaky"), (0, 1, 0, 0));
            swiftide_failed("c3", "flaky");
        });
        // The step's end resolves what is left: `add` is a success.
        assert_eq!(calls(&registry, "add"), (1, 0, 0, 0), "{stack:?}");
        assert_eq!(calls(&registry, "flaky"), (0, 2, 0, 0), "{stack:?}");
    }
}

#[test]
fn the_frameworks_next_move_in_the_parent_settles_a_quiet_call_as_a_success() {
    let (_clock, registry) = registry(0);
    Harness::new(
        crate::support::Stack::Plain,
        ToolHealthLayer::new(registry.clone()),
    )
    .run(|| {
        let step = tracing::info_span!(target: "swiftide_agents::agent", "step");
        let _in_step = step.enter();
        drop(swiftide_span("a"));
        assert_eq!(calls(&registry, "a"), (0, 0, 0, 0), "waits");
        // An application's own event in the parent (a hook logging) is not the framework's move.
        tracing::info!(target: "my_app::hooks", "after tool");
        assert_eq!(calls(&registry, "a"), (0, 0, 0, 0), "still waits");
        // Another event of the framework's in the parent: it moved on.
        tracing::debug!(target: "swiftide_agents::agent", "next");
        assert_eq!(calls(&registry, "a"), (1, 0, 0, 0));
        drop(swiftide_span("b"));
        // The next tool span in the parent is a move too.
        drop(swiftide_span("c"));
        assert_eq!(calls(&registry, "b"), (1, 0, 0, 0));
        // A verdict that comes after the move finds nothing to fail.
        swiftide_failed("x", "b");
        assert_eq!(calls(&registry, "b"), (1, 0, 0, 0));
    });
    assert_eq!(calls(&registry, "c"), (1, 0, 0, 0), "the parent's end");
}

#[test]
fn a_parent_that_never_closes_keeps_no_record_waiting_past_its_due_time() {
    let (clock, registry) = registry(0);
    let harness = Harness::new(
        crate::support::Stack::Plain,
        ToolHealthLayer::new(registry.clone()),
    );
    let step = harness.run(|| {
        let step = tracing::info_span!(target: "swiftide_agents::agent", "step");
        step.in_scope(|| drop(swiftide_span("quiet")));
        step
    });
    assert_eq!(calls(&registry, "quiet"), (0, 0, 0, 0));
    // The lease is 10 s: due after min(DEFERRED_VERDICT_BOUND, 5 s).
    let due = DEFERRED_VERDICT_BOUND.min(Duration::from_secs(5));
    clock.advance(due - Duration::from_millis(1));
    harness.run(|| registry.allow_request("other"));
    assert_eq!(calls(&registry, "quiet"), (0, 0, 0, 0), "not yet due");
    clock.advance(Duration::from_millis(1));
    // The gate flushes what is due before deciding, whatever tool it is asked about.
    harness.run(|| registry.allow_request("other"));
    assert_eq!(calls(&registry, "quiet"), (1, 0, 0, 0));
    drop(step);
}

#[test]
fn a_probes_deferred_verdict_lands_before_its_lease_expires() {
    let (clock, registry) = registry(1);
    registry.set_config(CircuitBreakerConfig {
        failure_threshold: 1,
        recovery_duration: Duration::from_secs(30),
        probe_timeout: Duration::from_secs(4),
    });
    let harness = Harness::new(
        crate::support::Stack::Plain,
        ToolHealthLayer::new(registry.clone()),
    );
    // Trip `t`, wait out the cooldown, and run the probe in a swiftide call whose step never
    // ends (an agent stuck elsewhere).
    assert!(registry.allow_request("t"));
    registry.record_failure("t", Duration::ZERO);
    clock.advance(Duration::from_secs(30));
    let step = harness.run(|| {
        let step = tracing::info_span!(target: "swiftide_agents::agent", "step");
        step.in_scope(|| {
            let span = swiftide_span("t");
            span.in_scope(|| assert!(registry.allow_request("t"), "the probe"));
        });
        step
    });
    assert_eq!(registry.breaker_state("t"), BreakerState::HalfOpen);
    // Half the lease later the gate flushes the waiting success: the probe closes the breaker
    // (at the lease's end it would have expired instead).
    clock.advance(Duration::from_secs(2));
    harness.run(|| registry.allow_request("unrelated"));
    assert_eq!(registry.breaker_state("t"), BreakerState::Closed);
    assert_eq!(calls(&registry, "t"), (1, 1, 0, 0));
    drop(step);
}

#[test]
fn a_span_that_failed_by_itself_is_recorded_at_once() {
    let (_clock, registry) = registry(0);
    Harness::new(
        crate::support::Stack::Plain,
        ToolHealthLayer::new(registry.clone()),
    )
    .run(|| {
        let agent = tracing::info_span!(target: "adk_agent", "agent.execute");
        let _in = agent.enter();
        let span = adk_span("t");
        span.in_scope(|| tracing::error!(error = "boom", "the tool's own error"));
        drop(span);
        assert_eq!(calls(&registry, "t"), (0, 1, 0, 0), "no wait");
        // adk's own report that follows fails nothing more.
        adk_tool_error("t");
    });
    assert_eq!(calls(&registry, "t"), (0, 1, 0, 0));
}

#[test]
fn a_waiting_call_keeps_its_own_duration() {
    let (clock, registry) = registry(0);
    Harness::new(
        crate::support::Stack::Plain,
        ToolHealthLayer::new(registry.clone()),
    )
    .run(|| {
        let step = tracing::info_span!(target: "swiftide_agents::agent", "step");
        let _in = step.enter();
        let span = swiftide_span("t");
        span.in_scope(|| clock.advance(Duration::from_millis(120)));
        drop(span);
        // The verdict is late: the wait is not the call's.
        clock.advance(Duration::from_secs(3));
        swiftide_failed("c", "t");
    });
    let t = registry.snapshot("t").unwrap();
    assert_eq!(
        (t.failure_count, t.avg_duration),
        (1, Duration::from_millis(120))
    );
}
