//! The outcome classifier and the span conventions: strict mode's completion marker, caller
//! errors, a custom tool-name field and span filter, custom and panicking classifiers.

use crate::support::{registry as new_registry, Harness, ALL_STACKS};
use crate::{calls, ToolError};
use tool_health::layer::{DefaultClassifier, OutcomeClassifier, SpanFacts};
use tool_health::{BreakerState, CallOutcome, ToolHealthLayer};

#[tracing::instrument(ret, err, fields(gen_ai.operation.name = "execute_tool", gen_ai.tool.name = "strict_tool"))]
fn strict_tool(fail: bool) -> Result<u32, ToolError> {
    if fail {
        Err(ToolError)
    } else {
        Ok(1)
    }
}

#[tracing::instrument(ret)]
fn helper() -> u32 {
    1
}

#[test]
fn strict_mode_needs_a_completion_marker() {
    for stack in ALL_STACKS {
        let (_clock, registry) = new_registry(0);
        let layer = ToolHealthLayer::builder(registry.clone())
            .strict(true)
            .build();
        let h = Harness::new(stack, layer);
        h.run(|| {
            drop(tool_span!("plain")); // no marker: cancelled
            tool_span!("plain").in_scope(|| tracing::error!("logged, then cancelled"));
            // A child span's `return` is not the tool's completion.
            tool_span!("plain").in_scope(helper);
            assert!(strict_tool(false).is_ok());
            assert!(strict_tool(true).is_err());
            tool_span!("status").record("otel.status_code", "OK");
            tool_span!("typed").record("error.type", "timeout");
        });
        // Cancelled, and counted as such: never a success or a failure of the tool.
        let plain = registry.snapshot("plain").expect("counted");
        assert_eq!(
            (plain.total_calls, plain.cancelled_count),
            (0, 3),
            "{stack:?}"
        );
        assert_eq!(calls(&registry, "strict_tool"), (1, 1, 0, 0), "{stack:?}");
        assert_eq!(calls(&registry, "status"), (1, 0, 0, 0), "{stack:?}");
        assert_eq!(calls(&registry, "typed"), (0, 1, 0, 0), "{stack:?}");
    }
}

#[test]
fn caller_errors_are_ignored_and_never_trip() {
    for stack in ALL_STACKS {
        let (_clock, registry) = new_registry(2);
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| {
            for _ in 0..5 {
                let span = tool_span!("search");
                let _entered = span.enter();
                assert!(registry.allow_request("search"));
                span.record("error.type", "invalid_arguments");
                tracing::error!("the model sent bad arguments");
            }
            // The type may come with the ERROR event instead.
            tool_span!("search")
                .in_scope(|| tracing::error!(error.type = "invalid_arguments", "bad args"));
        });
        assert_eq!(calls(&registry, "search"), (0, 0, 6, 0), "{stack:?}");
        assert_eq!(registry.breaker_state("search"), BreakerState::Closed);

        // A configured set replaces the default.
        let (_clock, registry) = new_registry(0);
        let layer = ToolHealthLayer::builder(registry.clone())
            .caller_errors(["unknown_tool"])
            .build();
        Harness::new(stack, layer).run(|| {
            tool_span!("x").record("error.type", "unknown_tool");
            tool_span!("x").record("error.type", "invalid_arguments");
        });
        assert_eq!(calls(&registry, "x"), (0, 1, 1, 0), "{stack:?}");
    }
}

#[test]
fn a_custom_field_convention() {
    fn only_tool_calls(meta: &tracing::Metadata<'_>) -> bool {
        meta.name() == "tool_call"
    }
    for stack in ALL_STACKS {
        let (_clock, registry) = new_registry(0);
        let layer = ToolHealthLayer::builder(registry.clone())
            .tool_name_field("tool.name")
            .build();
        Harness::new(stack, layer).run(|| {
            drop(tracing::info_span!("tool", tool.name = "calc"));
            tracing::info_span!("tool", tool.name = "calc").in_scope(|| tracing::error!("x"));
            // The GenAI field is no longer the convention.
            drop(tracing::info_span!("t", gen_ai.tool.name = "genai"));
        });
        assert_eq!(calls(&registry, "calc"), (1, 1, 0, 0), "{stack:?}");
        assert_eq!(registry.snapshot("genai"), None, "{stack:?}");

        // A predicate over the metadata decides instead of the field's presence.
        let (_clock, registry) = new_registry(0);
        let layer = ToolHealthLayer::builder(registry.clone())
            .tool_name_field("tool.name")
            .span_filter(only_tool_calls)
            .build();
        Harness::new(stack, layer).run(|| {
            drop(tracing::info_span!("tool_call", tool.name = "calc"));
            drop(tracing::info_span!("other", tool.name = "calc"));
        });
        assert_eq!(calls(&registry, "calc"), (1, 0, 0, 0), "{stack:?}");
    }
}

#[test]
fn a_custom_classifier_replaces_the_rules() {
    for stack in ALL_STACKS {
        let (_clock, registry) = new_registry(0);
        let default = DefaultClassifier::new();
        let layer = ToolHealthLayer::builder(registry.clone())
            .classifier(move |facts: &SpanFacts<'_>| match facts.error_type {
                Some("rate_limited") => Some(CallOutcome::Ignored),
                Some("cancelled") => None,
                _ => default.classify(facts),
            })
            .build();
        Harness::new(stack, layer).run(|| {
            tool_span!("a").record("error.type", "rate_limited");
            tool_span!("a").record("error.type", "cancelled");
            tool_span!("a").record("error.type", "timeout");
            drop(tool_span!("a"));
        });
        assert_eq!(calls(&registry, "a"), (1, 1, 1, 0), "{stack:?}");
    }
}

#[test]
fn a_panicking_classifier_falls_back_to_the_default_rules() {
    for stack in ALL_STACKS {
        let (_clock, registry) = new_registry(0);
        let layer = ToolHealthLayer::builder(registry.clone())
            .classifier(|_: &SpanFacts<'_>| -> Option<CallOutcome> { panic!("classifier bug") })
            .build();
        Harness::new(stack, layer).run(|| {
            drop(tool_span!("a"));
            tool_span!("a").record("error.type", "timeout");
        });
        assert_eq!(calls(&registry, "a"), (1, 1, 0, 0), "{stack:?}");
    }
}

#[tracing::instrument(err, fields(gen_ai.operation.name = "execute_tool", gen_ai.tool.name = "err_only"))]
fn err_only(fail: bool) -> Result<u32, ToolError> {
    if fail {
        Err(ToolError)
    } else {
        Ok(1)
    }
}

#[tracing::instrument(err(level = "warn"), fields(gen_ai.operation.name = "execute_tool", gen_ai.tool.name = "warn_err"))]
fn warn_err(fail: bool) -> Result<u32, ToolError> {
    if fail {
        Err(ToolError)
    } else {
        Ok(1)
    }
}

// Issue 14, finding 3: strict mode with `#[instrument(err)]` and no `ret` used to record
// nothing for its successes, so three scattered failures among 27 successes opened the
// breaker. Now the successes show up at once as cancelled calls — visible, never silent.
#[test]
fn strict_mode_with_err_only_shows_its_successes_as_cancelled() {
    for stack in ALL_STACKS {
        let (_clock, registry) = new_registry(3);
        let layer = ToolHealthLayer::builder(registry.clone())
            .strict(true)
            .build();
        let h = Harness::new(stack, layer);
        h.run(|| {
            for i in 0..30 {
                let _ = err_only(i % 10 == 9);
            }
        });
        let s = registry.snapshot("err_only").unwrap();
        assert_eq!(
            (s.success_count, s.failure_count, s.cancelled_count),
            (0, 3, 27),
            "{stack:?}"
        );
    }
}

// Finding 3, the other half: `#[instrument(err(level = "warn"))]` — any event with an `error`
// field directly in the tool span — is a failure, strict mode or not.
#[test]
fn an_error_field_fails_the_span_at_any_level() {
    for strict in [false, true] {
        for stack in ALL_STACKS {
            let (_clock, registry) = new_registry(0);
            let layer = ToolHealthLayer::builder(registry.clone())
                .strict(strict)
                .build();
            let h = Harness::new(stack, layer);
            h.run(|| {
                assert!(warn_err(true).is_err());
                assert!(warn_err(false).is_ok());
                tool_span!("info_error").in_scope(|| tracing::info!(error = "boom", "handled"));
                // In a child span, below ERROR: not the tool's failure (a retried request).
                tool_span!("child_warn").in_scope(|| {
                    tracing::info_span!("http")
                        .in_scope(|| tracing::warn!(error = "reset", "retrying"));
                    tracing::info!(r#return = 1);
                });
            });
            let expected_warn_err = if strict { (0, 1, 0, 1) } else { (1, 1, 0, 0) };
            let s = registry.snapshot("warn_err").unwrap();
            assert_eq!(
                (
                    s.success_count,
                    s.failure_count,
                    s.ignored_count,
                    s.cancelled_count
                ),
                expected_warn_err,
                "strict {strict} {stack:?}"
            );
            assert_eq!(calls(&registry, "info_error"), (0, 1, 0, 0), "{stack:?}");
            assert_eq!(calls(&registry, "child_warn"), (1, 0, 0, 0), "{stack:?}");
        }
    }
}
