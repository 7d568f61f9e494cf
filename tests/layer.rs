//! ToolHealthLayer: outcomes inferred from tool spans, and the span-aware gate. Every test runs
//! on a plain `Registry` and with tracing-opentelemetry in both layer orders.

mod layer_support;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use layer_support::{registry as new_registry, Harness, ALL_STACKS};
use tool_health::layer::{DefaultClassifier, OutcomeClassifier, SpanFacts};
use tool_health::{
    BreakerState, CallEvent, CallOutcome, GateDecision, HealthObserver, ToolHealthLayer,
    ToolHealthRegistry, Transition,
};
use tracing::field;

/// A GenAI tool span for `$tool`.
macro_rules! tool_span {
    ($tool:expr) => {
        tracing::info_span!(
            "execute_tool",
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = $tool,
            error.type = field::Empty,
            otel.status_code = field::Empty,
        )
    };
}

fn calls(registry: &ToolHealthRegistry, tool: &str) -> (u64, u64, u64, u64) {
    registry.snapshot(tool).map_or((0, 0, 0, 0), |s| {
        (
            s.success_count,
            s.failure_count,
            s.ignored_count,
            s.refused_count,
        )
    })
}

#[test]
fn genai_span_success_records_the_exact_clock_duration() {
    for stack in ALL_STACKS {
        let (clock, registry) = new_registry(3);
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| {
            let span = tool_span!("search");
            clock.advance(Duration::from_millis(250));
            drop(span);
        });
        let s = registry.snapshot("search").expect("recorded");
        assert_eq!((s.success_count, s.failure_count), (1, 0), "{stack:?}");
        assert_eq!(s.avg_duration, Duration::from_millis(250), "{stack:?}");
        assert_eq!(s.max_duration, Duration::from_millis(250), "{stack:?}");
    }
}

#[test]
fn genai_span_failures_from_error_type_status_code_and_error_events() {
    for stack in ALL_STACKS {
        let (_clock, registry) = new_registry(0);
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| {
            tool_span!("a").record("error.type", "timeout");
            tool_span!("b").record("otel.status_code", "ERROR");
            tool_span!("c").record("otel.status_code", "Error");
            tool_span!("d").in_scope(|| tracing::error!("upstream returned 502"));
            // Not failures: an empty error.type, an ok status, a warning.
            tool_span!("e").record("error.type", "");
            tool_span!("f").record("otel.status_code", "ok");
            tool_span!("g").in_scope(|| tracing::warn!("slow upstream"));
        });
        for tool in ["a", "b", "c", "d"] {
            assert_eq!(calls(&registry, tool), (0, 1, 0, 0), "{stack:?} {tool}");
        }
        for tool in ["e", "f", "g"] {
            assert_eq!(calls(&registry, tool), (1, 0, 0, 0), "{stack:?} {tool}");
        }
    }
}

#[test]
fn error_type_reaches_observers() {
    #[derive(Debug, Default)]
    struct Seen(Mutex<Vec<(CallOutcome, Option<String>)>>);
    impl HealthObserver for Seen {
        fn on_call(&self, e: &CallEvent<'_>) {
            self.0
                .lock()
                .unwrap()
                .push((e.outcome, e.error_type.map(str::to_owned)));
        }
    }
    for stack in ALL_STACKS {
        let (_clock, registry) = new_registry(3);
        let seen = Arc::new(Seen::default());
        registry.add_observer(seen.clone());
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| {
            tool_span!("a").record("error.type", "timeout");
            tool_span!("b").in_scope(|| tracing::error!(error.type = "rate_limited", "429"));
        });
        assert_eq!(
            *seen.0.lock().unwrap(),
            [
                (CallOutcome::Failure, Some("timeout".into())),
                (CallOutcome::Failure, Some("rate_limited".into()))
            ],
            "{stack:?}"
        );
    }
}

#[derive(Debug)]
struct ToolError;
impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("tool failed")
    }
}

#[tracing::instrument(err, fields(gen_ai.operation.name = "execute_tool", gen_ai.tool.name = "calc"))]
fn calc(fail: bool) -> Result<u32, ToolError> {
    if fail {
        Err(ToolError)
    } else {
        Ok(4)
    }
}

#[test]
fn instrument_err_on_a_sync_function() {
    for stack in ALL_STACKS {
        let (_clock, registry) = new_registry(0);
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| {
            assert!(calc(false).is_ok());
            assert!(calc(true).is_err());
            assert!(calc(true).is_err());
        });
        assert_eq!(calls(&registry, "calc"), (1, 2, 0, 0), "{stack:?}");
    }
}

#[test]
fn a_late_recorded_name_counts_and_a_nameless_span_is_ignored() {
    for stack in ALL_STACKS {
        let (clock, registry) = new_registry(3);
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| {
            let span = tool_span!(field::Empty);
            clock.advance(Duration::from_millis(40));
            span.record("gen_ai.tool.name", "fetch");
            span.record("error.type", "timeout");
            drop(span);
            // Never named, or named empty: ignored, even when it failed.
            tool_span!(field::Empty).in_scope(|| tracing::error!("boom"));
            tool_span!("").in_scope(|| tracing::error!("boom"));
        });
        let s = registry.snapshot("fetch").expect("recorded");
        assert_eq!(
            (s.failure_count, s.avg_duration),
            (1, Duration::from_millis(40))
        );
        assert_eq!(registry.tracked_tools(), 1, "{stack:?}");
    }
}

#[test]
fn non_tool_spans_are_untouched() {
    for stack in ALL_STACKS {
        let (_clock, registry) = new_registry(3);
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| {
            tracing::info_span!("http", url = "x").in_scope(|| tracing::error!("502"));
            tracing::info_span!(
                "chat",
                gen_ai.operation.name = "chat",
                gen_ai.tool.name = "x"
            )
            .in_scope(|| tracing::error!("bad"));
            // The operation recorded late as something else also disqualifies.
            let late = tracing::info_span!(
                "late",
                gen_ai.operation.name = field::Empty,
                gen_ai.tool.name = "y"
            );
            late.record("gen_ai.operation.name", "invoke_agent");
            drop(late);
            tracing::error!("outside any span");
            // The gate outside any tool span is the plain gate: nothing recorded.
            assert!(registry.allow_request("z"));
        });
        assert_eq!(registry.tracked_tools(), 0, "{stack:?}");
        // A span with the name and no operation field counts.
        h.run(|| drop(tracing::info_span!("bare", gen_ai.tool.name = "bare")));
        assert_eq!(calls(&registry, "bare"), (1, 0, 0, 0), "{stack:?}");
    }
}

#[test]
fn tool_spans_closed_on_other_threads_amid_other_spans_are_each_recorded_once() {
    // The layer skips the span lookup when closing a span while none of its tool spans is
    // open; tool spans opened on one thread and closed on others, interleaved with other
    // spans before, between and after them, must still each be recorded exactly once.
    for stack in ALL_STACKS {
        let (_clock, registry) = new_registry(1_000);
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| {
            drop(tracing::info_span!("before"));
            for round in 0..50 {
                let spans: Vec<_> = (0..4).map(|_| tool_span!("search")).collect();
                let dispatch = h.dispatch.clone();
                std::thread::scope(|scope| {
                    for (i, span) in spans.into_iter().enumerate() {
                        let dispatch = dispatch.clone();
                        scope.spawn(move || {
                            tracing::dispatcher::with_default(&dispatch, || {
                                drop(tracing::info_span!("db.query"));
                                if (round + i) % 3 == 0 {
                                    span.in_scope(|| tracing::error!("boom"));
                                }
                                drop(span);
                                drop(tracing::info_span!("after"));
                            });
                        });
                    }
                });
                drop(tracing::info_span!("between"));
            }
        });
        let (success, failure, _, _) = calls(&registry, "search");
        assert_eq!(success + failure, 200, "{stack:?}");
        let failed = (0..50)
            .flat_map(|r| (0..4).map(move |i| (r + i) % 3 == 0))
            .filter(|f| *f)
            .count() as u64;
        assert_eq!(failure, failed, "{stack:?}");
    }
}

#[test]
fn an_error_in_a_nested_child_span_fails_the_tool() {
    for stack in ALL_STACKS {
        let (_clock, registry) = new_registry(3);
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| {
            tool_span!("outer").in_scope(|| {
                tracing::info_span!("http.client", http.method = "GET").in_scope(|| {
                    tracing::info_span!("dns").in_scope(|| tracing::error!("connection refused"));
                });
            });
            // Nested tool spans: the error belongs to the nearest one only.
            tool_span!("parent").in_scope(|| {
                tool_span!("child").in_scope(|| tracing::error!("child failed"));
            });
        });
        assert_eq!(calls(&registry, "outer"), (0, 1, 0, 0), "{stack:?}");
        assert_eq!(calls(&registry, "child"), (0, 1, 0, 0), "{stack:?}");
        assert_eq!(calls(&registry, "parent"), (1, 0, 0, 0), "{stack:?}");
    }
}

#[test]
fn opentelemetry_internal_and_own_error_events_are_ignored() {
    for stack in ALL_STACKS {
        let (_clock, registry) = new_registry(3);
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| {
            tool_span!("a").in_scope(|| {
                tracing::error!(target: "opentelemetry_sdk", "BatchSpanProcessor.ExportError");
                tracing::error!(target: "opentelemetry", "global error");
                tracing::error!(target: "opentelemetry_otlp::exporter", "export failed");
                tracing::error!(target: "tool_health", "internal");
                tracing::error!(target: "tool_health::layer", "internal");
            });
            // A target that merely shares the crate's prefix is the user's own.
            tool_span!("b").in_scope(|| tracing::error!(target: "tool_health_app", "real"));
        });
        assert_eq!(calls(&registry, "a"), (1, 0, 0, 0), "{stack:?}");
        assert_eq!(calls(&registry, "b"), (0, 1, 0, 0), "{stack:?}");
    }
}

#[test]
fn a_panic_inside_a_tool_span_is_a_failure_and_the_registry_stays_usable() {
    for stack in ALL_STACKS {
        let (clock, registry) = new_registry(1);
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        let caught = catch_unwind(AssertUnwindSafe(|| {
            h.run(|| {
                let _entered = tool_span!("crashy").entered();
                assert!(registry.allow_request("crashy"));
                clock.advance(Duration::from_millis(5));
                panic!("tool bug");
            })
        }));
        assert!(caught.is_err());
        let s = registry.snapshot("crashy").expect("recorded");
        assert_eq!((s.success_count, s.failure_count), (0, 1), "{stack:?}");
        assert_eq!(s.max_duration, Duration::from_millis(5));
        assert_eq!(s.breaker, BreakerState::Open);
        // Still usable: the probe after the cooldown closes it again.
        clock.advance(Duration::from_secs(30));
        h.run(|| {
            let _entered = tool_span!("crashy").entered();
            assert!(registry.allow_request("crashy"));
        });
        assert_eq!(
            registry.breaker_state("crashy"),
            BreakerState::Closed,
            "{stack:?}"
        );
    }
}

#[test]
fn a_panic_through_an_entered_span_that_closes_later_is_a_failure() {
    // Executors catch a task's panic and may drop its future (closing the span) afterwards:
    // the panic is seen when it unwinds out of the entered span.
    for stack in ALL_STACKS {
        let (_clock, registry) = new_registry(3);
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| {
            let span = tool_span!("crashy");
            let caught = catch_unwind(AssertUnwindSafe(|| {
                let _entered = span.enter();
                panic!("tool bug");
            }));
            assert!(caught.is_err());
            drop(span);
            // A span merely closed after some unrelated panic was caught is fine.
            let later = tool_span!("fine");
            let _ = catch_unwind(|| panic!("elsewhere"));
            drop(later);
        });
        assert_eq!(calls(&registry, "crashy"), (0, 1, 0, 0), "{stack:?}");
        assert_eq!(calls(&registry, "fine"), (1, 0, 0, 0), "{stack:?}");
    }
}

#[test]
fn a_refused_span_records_nothing_but_the_refusal() {
    for stack in ALL_STACKS {
        let (clock, registry) = new_registry(1);
        registry.record_failure("db", Duration::from_millis(1));
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| {
            let span = tool_span!("db");
            let _entered = span.enter();
            assert!(!registry.allow_request("db"));
            clock.advance(Duration::from_millis(7));
            // What a caller typically does with the refusal; must not count as a failure.
            tracing::error!("{}", tool_health::REFUSAL_MESSAGE);
            span.record("error.type", "circuit_breaker_open");
        });
        let s = registry.snapshot("db").expect("tracked");
        assert_eq!(
            (s.success_count, s.failure_count, s.refused_count),
            (0, 1, 1),
            "{stack:?}"
        );
        assert_eq!(s.max_duration, Duration::from_millis(1), "{stack:?}");
        assert_eq!(s.consecutive_failures, 1, "{stack:?}");
    }
}

#[test]
fn the_gate_binds_from_a_child_span_to_its_tool_span() {
    for stack in ALL_STACKS {
        let (_clock, registry) = new_registry(1);
        registry.record_failure("db", Duration::ZERO);
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| {
            tool_span!("db").in_scope(|| {
                tracing::info_span!("middleware").in_scope(|| {
                    assert!(!registry.allow_request("db"));
                    tracing::error!("refused");
                });
            });
        });
        assert_eq!(calls(&registry, "db"), (0, 1, 0, 1), "{stack:?}");
    }
}

#[test]
fn a_probe_bound_to_its_span_is_not_closed_by_an_older_spans_success() {
    for stack in ALL_STACKS {
        let (clock, registry) = new_registry(1);
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| {
            // A slow call admitted while closed...
            let old = tool_span!("db");
            old.in_scope(|| assert!(registry.allow_request("db")));
            // ...meanwhile the tool fails and the breaker opens...
            tool_span!("db").in_scope(|| {
                assert!(registry.allow_request("db"));
                tracing::error!("down");
            });
            assert_eq!(registry.breaker_state("db"), BreakerState::Open);
            // ...and after the cooldown a new span takes the probe.
            clock.advance(Duration::from_secs(30));
            let probe = tool_span!("db");
            probe.in_scope(|| {
                assert!(matches!(registry.check("db"), GateDecision::Probe(_)));
                // The probe holder asking again keeps its probe.
                assert!(!registry.allow_request("db"));
            });
            // The old call's success arrives: counted, but it cannot close the new episode.
            drop(old);
            assert_eq!(
                registry.breaker_state("db"),
                BreakerState::HalfOpen,
                "{stack:?}"
            );
            // The probe's own success closes it.
            drop(probe);
            assert_eq!(
                registry.breaker_state("db"),
                BreakerState::Closed,
                "{stack:?}"
            );
        });
        assert_eq!(calls(&registry, "db"), (2, 1, 0, 1), "{stack:?}");
    }
}

#[test]
fn a_probe_failure_reopens_and_an_older_failure_cannot_fail_a_newer_probe() {
    for stack in ALL_STACKS {
        let (clock, registry) = new_registry(1);
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| {
            let old = tool_span!("db");
            old.in_scope(|| assert!(registry.allow_request("db")));
            registry.record_failure("db", Duration::ZERO);
            clock.advance(Duration::from_secs(30));
            let probe = tool_span!("db");
            probe.in_scope(|| assert!(registry.allow_request("db")));
            old.record("error.type", "timeout");
            drop(old);
            assert_eq!(
                registry.breaker_state("db"),
                BreakerState::HalfOpen,
                "{stack:?}"
            );
            probe.record("error.type", "timeout");
            drop(probe);
            assert_eq!(
                registry.breaker_state("db"),
                BreakerState::Open,
                "{stack:?}"
            );
        });
    }
}

#[test]
fn strict_mode_releases_a_cancelled_probe_at_once() {
    for stack in ALL_STACKS {
        let (clock, registry) = new_registry(1);
        registry.record_failure("db", Duration::ZERO);
        clock.advance(Duration::from_secs(30));
        let layer = ToolHealthLayer::builder(registry.clone())
            .strict(true)
            .build();
        let h = Harness::new(stack, layer);
        h.run(|| {
            let span = tool_span!("db");
            span.in_scope(|| assert!(registry.allow_request("db")));
            assert!(!registry.is_tool_available("db"));
            clock.advance(Duration::from_secs(1));
            drop(span); // cancelled: no completion marker
        });
        // Released: the next call may probe now, not after the 10 s lease.
        assert!(registry.is_tool_available("db"), "{stack:?}");
        assert_eq!(calls(&registry, "db"), (0, 1, 0, 0), "{stack:?}");
        assert_eq!(registry.breaker_state("db"), BreakerState::Open);
    }
}

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
        assert_eq!(registry.snapshot("plain"), None, "{stack:?}");
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

#[test]
fn renaming_records_under_the_span_name_and_gives_the_probe_back() {
    for stack in ALL_STACKS {
        let (clock, registry) = new_registry(1);
        registry.record_failure("search", Duration::ZERO);
        clock.advance(Duration::from_secs(30));
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| {
            // The gate is asked about "search"; a middleware ran "search_v2".
            tool_span!("search_v2").in_scope(|| {
                assert!(matches!(registry.check("search"), GateDecision::Probe(_)));
            });
        });
        assert_eq!(calls(&registry, "search_v2"), (1, 0, 0, 0), "{stack:?}");
        assert_eq!(calls(&registry, "search"), (0, 1, 0, 0), "{stack:?}");
        // The probe of "search" did not learn anything: it went back at once.
        assert!(registry.is_tool_available("search"), "{stack:?}");
    }
}

#[test]
fn the_gate_of_another_registry_is_not_bound() {
    for stack in ALL_STACKS {
        let (_clock, watched) = new_registry(1);
        let (_clock2, other) = new_registry(1);
        other.record_failure("db", Duration::ZERO);
        let h = Harness::new(stack, ToolHealthLayer::new(watched.clone()));
        h.run(|| {
            tool_span!("db").in_scope(|| assert!(!other.allow_request("db")));
        });
        // The span was not refused as far as `watched` knows: it records a success.
        assert_eq!(calls(&watched, "db"), (1, 0, 0, 0), "{stack:?}");
        assert_eq!(calls(&other, "db"), (0, 1, 0, 1), "{stack:?}");
    }
}

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

#[test]
fn a_second_layer_in_the_same_subscriber_stays_out() {
    use tracing_subscriber::layer::SubscriberExt;
    let (_c1, first) = new_registry(0);
    let (_c2, second) = new_registry(0);
    let subscriber = tracing_subscriber::registry()
        .with(ToolHealthLayer::new(first.clone()))
        .with(ToolHealthLayer::new(second.clone()));
    tracing::subscriber::with_default(subscriber, || {
        tool_span!("a").in_scope(|| tracing::error!("x"));
        drop(tool_span!("a"));
    });
    assert_eq!(calls(&first, "a"), (1, 1, 0, 0));
    assert_eq!(second.tracked_tools(), 0);
}

#[test]
fn a_cloned_layer_feeds_the_same_registry_in_another_subscriber() {
    let (_clock, registry) = new_registry(0);
    let layer = ToolHealthLayer::new(registry.clone());
    let a = Harness::new(layer_support::Stack::Plain, layer.clone());
    let b = Harness::new(layer_support::Stack::LayerThenOtel, layer);
    a.run(|| {
        drop(tool_span!("t"));
    });
    b.run(|| {
        tool_span!("t").record("error.type", "x");
    });
    assert_eq!(calls(&registry, "t"), (1, 1, 0, 0));
}
