//! The built-in conventions on hand-written spans shaped like each framework's (same target,
//! name, fields and recording order as captured from the real crates; the real crates are
//! driven in `integrations/`), the duration from the first enter, and conventions added or
//! replaced through the builder.

use std::time::Duration;

use crate::calls;
use crate::support::{registry as new_registry, Harness, ALL_STACKS};
use tool_health::layer::Convention;
use tool_health::{BreakerState, GateDecision, ToolHealthLayer};
use tracing::field::Empty;

/// rig-agent 0.44's tool span: created with the operation only, the rest recorded later.
macro_rules! rig_span {
    () => {
        tracing::info_span!(
            target: "rig_agent::agent::telemetry",
            "execute_tool",
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.type = "function",
            gen_ai.tool.name = Empty,
            gen_ai.tool.call.id = Empty,
            gen_ai.tool.call.arguments = Empty,
            gen_ai.tool.call.result = Empty,
            gen_ai.tool.call.outcome = Empty,
            gen_ai.tool.error.type = Empty,
        )
    };
}

/// One rig call of `tool`: entered, named, then settled with `outcome` (and `error_type`).
fn rig_call(tool: &str, outcome: &str, error_type: Option<&str>) {
    let span = rig_span!();
    let _entered = span.enter();
    span.record("gen_ai.tool.name", tool);
    span.record("gen_ai.tool.call.id", tracing::field::display("c1"));
    span.record("gen_ai.tool.call.outcome", outcome);
    if let Some(t) = error_type {
        span.record("gen_ai.tool.error.type", t);
    }
}

#[test]
fn rig_outcomes_with_no_configuration() {
    for stack in ALL_STACKS {
        let (_clock, registry) = new_registry(3);
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| {
            rig_call("add", "success", None);
            for _ in 0..5 {
                rig_call("add", "error", Some("invalid_args"));
            }
            rig_call("lookup", "error", Some("not_found"));
            rig_call("danger", "skipped", None);
            rig_call("picky", "denied", None);
            rig_call("slowpoke", "error", Some("cancelled"));
            for _ in 0..3 {
                rig_call("fail", "error", Some("other"));
            }
            rig_call("late", "error", Some("timeout"));
        });
        assert_eq!(calls(&registry, "add"), (1, 0, 5, 0), "{stack:?}");
        assert_eq!(registry.breaker_state("add"), BreakerState::Closed);
        assert_eq!(calls(&registry, "lookup"), (0, 0, 1, 0), "{stack:?}");
        for nothing in ["danger", "picky"] {
            assert_eq!(registry.snapshot(nothing), None, "{stack:?} {nothing}");
        }
        // rig's `cancelled` error type: the call started and was given up.
        let slowpoke = registry.snapshot("slowpoke").expect("counted");
        assert_eq!(slowpoke.cancelled_count, 1, "{stack:?}");
        assert_eq!(calls(&registry, "slowpoke"), (0, 0, 0, 0), "{stack:?}");
        assert_eq!(calls(&registry, "fail"), (0, 3, 0, 0), "{stack:?}");
        assert_eq!(
            registry.breaker_state("fail"),
            BreakerState::Open,
            "{stack:?}"
        );
        assert_eq!(calls(&registry, "late"), (0, 1, 0, 0), "{stack:?}");
    }
}

#[test]
fn strict_mode_reads_rigs_outcome_as_the_completion_marker() {
    for stack in ALL_STACKS {
        let (_clock, registry) = new_registry(0);
        let layer = ToolHealthLayer::builder(registry.clone())
            .strict(true)
            .build();
        Harness::new(stack, layer).run(|| {
            rig_call("add", "success", None);
            rig_call("add", "error", Some("other"));
            // Dropped mid-call (the caller timed out): named, no outcome.
            let span = rig_span!();
            span.in_scope(|| span.record("gen_ai.tool.name", "add"));
        });
        assert_eq!(calls(&registry, "add"), (1, 1, 0, 0), "{stack:?}");
    }
}

#[test]
fn a_skipped_or_denied_probe_is_given_back_at_once() {
    for stack in ALL_STACKS {
        let (clock, registry) = new_registry(1);
        Harness::new(stack, ToolHealthLayer::new(registry.clone())).run(|| {
            rig_call("t", "error", Some("other"));
            assert_eq!(registry.breaker_state("t"), BreakerState::Open);
            clock.advance(Duration::from_secs(30));
            for verdict in ["skipped", "denied"] {
                let span = rig_span!();
                span.in_scope(|| {
                    span.record("gen_ai.tool.name", "t");
                    assert!(matches!(registry.check("t"), GateDecision::Probe(_)));
                    span.record("gen_ai.tool.call.outcome", verdict);
                });
                drop(span);
                // The probe came back: the next caller gets it, not a refusal.
                assert!(
                    registry.is_tool_available("t"),
                    "{stack:?} {verdict}: probe not given back"
                );
            }
        });
        assert_eq!(calls(&registry, "t"), (0, 1, 0, 0), "{stack:?}");
    }
}

#[test]
fn duration_runs_from_the_first_enter_to_the_close() {
    for stack in ALL_STACKS {
        let (clock, registry) = new_registry(3);
        Harness::new(stack, ToolHealthLayer::new(registry.clone())).run(|| {
            // rig creates every span of a batch up front, then runs the calls in turn.
            let slow = rig_span!();
            let fast = rig_span!();
            clock.advance(Duration::from_millis(5)); // the model's turn finishing
            slow.in_scope(|| {
                slow.record("gen_ai.tool.name", "slow");
                clock.advance(Duration::from_millis(300));
            });
            // Entered again (every poll enters): the start stays the first enter.
            slow.in_scope(|| slow.record("gen_ai.tool.call.outcome", "success"));
            drop(slow);
            fast.in_scope(|| {
                fast.record("gen_ai.tool.name", "fast");
                clock.advance(Duration::from_millis(1));
                fast.record("gen_ai.tool.call.outcome", "success");
            });
            drop(fast);
            // Never entered: creation is the start.
            let span = tool_span!("never_entered");
            clock.advance(Duration::from_millis(7));
            drop(span);
        });
        let avg = |t| registry.snapshot(t).expect(t).avg_duration;
        assert_eq!(avg("slow"), Duration::from_millis(300), "{stack:?}");
        assert_eq!(avg("fast"), Duration::from_millis(1), "{stack:?}");
        assert_eq!(avg("never_entered"), Duration::from_millis(7), "{stack:?}");
    }
}

#[test]
fn langchain_rust_error_field_is_a_failure_and_strict_mode_keeps_its_successes() {
    for stack in ALL_STACKS {
        let (_clock, registry) = new_registry(2);
        let layer = ToolHealthLayer::builder(registry.clone())
            .strict(true)
            .build();
        Harness::new(stack, layer).run(|| {
            let ok = tracing::info_span!(target: "langchain_rust::agent::executor", "tool.call", tool = %"ok_tool", error = Empty);
            ok.in_scope(|| {});
            drop(ok);
            for _ in 0..2 {
                let span = tracing::info_span!(target: "langchain_rust::agent::executor", "tool.call", tool = %"fail_tool", error = Empty);
                span.in_scope(|| {
                    span.record("error", tracing::field::display("upstream 503"));
                    tracing::warn!(target: "langchain_rust::observability", error = %"upstream 503", "tool.call failed");
                });
            }
            // The same shape from another crate is not langchain-rust's.
            drop(tracing::info_span!("tool.call", tool = %"elsewhere", error = Empty));
        });
        assert_eq!(calls(&registry, "ok_tool"), (1, 0, 0, 0), "{stack:?}");
        assert_eq!(calls(&registry, "fail_tool"), (0, 2, 0, 0), "{stack:?}");
        assert_eq!(registry.breaker_state("fail_tool"), BreakerState::Open);
        assert_eq!(registry.snapshot("elsewhere"), None, "{stack:?}");
    }
}

/// What an adk-agent 2.3 tool looks like when its author adds `#[tracing::instrument(err)]`
/// to `execute`: the one line that makes adk's failures visible.
#[tracing::instrument(err, skip_all)]
fn adk_tool_body(fail: bool) -> Result<(), crate::ToolError> {
    if fail {
        Err(crate::ToolError)
    } else {
        Ok(())
    }
}

#[test]
fn adk_and_swiftide_are_recognised_and_their_failures_need_one_line() {
    for stack in ALL_STACKS {
        let (_clock, registry) = new_registry(0);
        Harness::new(stack, ToolHealthLayer::new(registry.clone())).run(|| {
            for (tool, fail) in [("ok_tool", false), ("fail_tool", true)] {
                let span = tracing::info_span!(
                    target: "adk_agent::llm_agent",
                    "",
                    otel.name = %format_args!("execute_tool {tool}"),
                    tool.name = %tool,
                    gen_ai.conversation.id = %"s-1",
                );
                let _ = span.in_scope(|| adk_tool_body(fail));
                drop(span);
                // adk's own failure report: a WARN after the span. With no parent span there is
                // no framework around the call to wait for (see `late.rs`): recorded at close.
                tracing::warn!(target: "adk_agent::llm_agent", { tool.name = %tool }, "tool_error");
            }
            // Without the line, a failing swiftide tool looks like a success.
            let span = tracing::info_span!(target: "swiftide_agents::agent", "tool", otel.name = %"tool.search");
            span.in_scope(|| {});
            drop(span);
            // Another span from the same crates is not a tool span.
            drop(tracing::info_span!(target: "swiftide_agents::agent", "step", otel.name = %"step-1"));
        });
        assert_eq!(calls(&registry, "ok_tool"), (1, 0, 0, 0), "{stack:?}");
        assert_eq!(calls(&registry, "fail_tool"), (0, 1, 0, 0), "{stack:?}");
        assert_eq!(calls(&registry, "search"), (1, 0, 0, 0), "{stack:?}");
        assert_eq!(registry.tracked_tools(), 3, "{stack:?}");
    }
}

#[test]
fn mcp_client_spans_from_any_source() {
    for stack in ALL_STACKS {
        let (_clock, registry) = new_registry(0);
        Harness::new(stack, ToolHealthLayer::new(registry.clone())).run(|| {
            let mcp = |tool: &str, error_type: Option<&str>| {
                let span = tracing::info_span!(
                    "tools/call",
                    otel.name = %format_args!("tools/call {tool}"),
                    mcp.method.name = "tools/call",
                    error.type = Empty,
                    rpc.response.status_code = Empty,
                );
                span.in_scope(|| {
                    if let Some(t) = error_type {
                        span.record("error.type", t);
                    }
                });
            };
            mcp("weather", None);
            mcp("weather", Some("tool_error"));
            mcp("weather", Some("-32603"));
            mcp("weather", Some("-32602"));
            // Only the status code, as an integer: still the error type.
            let span = tracing::info_span!(
                "tools/call",
                mcp.method.name = "tools/call",
                gen_ai.tool.name = "weather",
                rpc.response.status_code = Empty,
            );
            span.record("rpc.response.status_code", -32601_i64);
            drop(span);
            // Not a tool call.
            drop(tracing::info_span!(
                "tools/list",
                otel.name = "tools/list",
                mcp.method.name = "tools/list"
            ));
        });
        assert_eq!(calls(&registry, "weather"), (1, 2, 2, 0), "{stack:?}");
        assert_eq!(registry.tracked_tools(), 1, "{stack:?}");
    }
}

#[test]
fn conventions_are_added_and_replaced_through_the_builder() {
    for stack in ALL_STACKS {
        // Added: a span shape of one's own.
        let (_clock, registry) = new_registry(0);
        let layer = ToolHealthLayer::builder(registry.clone())
            .convention(
                Convention::new("mine")
                    .target("layer")
                    .span_name("tool_call")
                    .tool_name_field("tool")
                    .failure_field("problem")
                    .outcome_field("verdict"),
            )
            .build();
        Harness::new(stack, layer).run(|| {
            tracing::info_span!("tool_call", tool = "x", problem = Empty)
                .record("problem", "broken");
            tracing::info_span!("tool_call", tool = "x", verdict = Empty)
                .record("verdict", "skipped");
            drop(tracing::info_span!("tool_call", tool = "x"));
            // The built-in ones are still there.
            drop(tool_span!("genai"));
        });
        assert_eq!(calls(&registry, "x"), (1, 1, 0, 0), "{stack:?}");
        assert_eq!(calls(&registry, "genai"), (1, 0, 0, 0), "{stack:?}");

        // Replaced by name: rig read without its outcome field.
        let (_clock, registry) = new_registry(0);
        let layer = ToolHealthLayer::builder(registry.clone())
            .convention(
                Convention::new("rig")
                    .target("rig_agent")
                    .tool_name_field("gen_ai.tool.name"),
            )
            .build();
        Harness::new(stack, layer).run(|| rig_call("t", "error", Some("other")));
        assert_eq!(calls(&registry, "t"), (1, 0, 0, 0), "{stack:?}");

        // Replaced wholesale: GenAI only, no langchain-rust.
        let (_clock, registry) = new_registry(0);
        let layer = ToolHealthLayer::builder(registry.clone())
            .conventions([Convention::genai()])
            .build();
        Harness::new(stack, layer).run(|| {
            drop(tracing::info_span!(target: "langchain_rust::agent::executor", "tool.call", tool = %"lc", error = Empty));
            drop(tool_span!("genai"));
        });
        assert_eq!(registry.snapshot("lc"), None, "{stack:?}");
        assert_eq!(calls(&registry, "genai"), (1, 0, 0, 0), "{stack:?}");
    }
}

/// Issue 20, item 8: a tool span nested in a span of the same tool is one call with it — and
/// the inner span's framework verdict (`skipped`, `denied`: no call was made) holds for the
/// call. It used to be dropped when the outer span absorbed the inner one, which then recorded
/// a success (and took a held probe's verdict for one).
#[test]
fn a_nested_same_tool_spans_skipped_or_denied_verdict_holds_for_the_call() {
    for stack in ALL_STACKS {
        for outcome in ["skipped", "denied"] {
            let (clock, registry) = new_registry(1);
            let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
            h.run(|| {
                let outer = tool_span!("search");
                let _entered = outer.enter();
                rig_call("search", outcome, None);
            });
            assert_eq!(
                registry
                    .snapshot("search")
                    .map(|s| (s.success_count, s.failure_count)),
                None,
                "{stack:?} {outcome}: no call was made"
            );
            // With the probe held by the outer span: given back, not taken for a success.
            registry.record_failure("search", Duration::from_millis(1));
            clock.advance(Duration::from_secs(30));
            h.run(|| {
                let outer = tool_span!("search");
                let _entered = outer.enter();
                assert!(matches!(registry.check("search"), GateDecision::Probe(_)));
                rig_call("search", outcome, None);
            });
            assert_eq!(
                calls(&registry, "search"),
                (0, 1, 0, 0),
                "{stack:?} {outcome}"
            );
            assert_eq!(registry.breaker_state("search"), BreakerState::Open);
            assert!(
                matches!(registry.check("search"), GateDecision::Probe(_)),
                "{stack:?} {outcome}: the probe was given back"
            );
        }
    }
}
