//! Span recognition and outcomes: which spans are tool spans (GenAI conventions, late names,
//! nameless and non-tool spans), what each records (success with the clock's duration,
//! failures from error.type, status code, error events, panics), across threads and nested
//! spans, and with more than one layer.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::{self, registry as new_registry, Harness, ALL_STACKS};
use crate::{calls, ToolError};
use tool_health::observe::CallEvent;
use tool_health::observe::HealthObserver;
use tool_health::{BreakerState, CallOutcome, ToolHealthLayer};
use tracing::field;

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
    let a = Harness::new(support::Stack::Plain, layer.clone());
    let b = Harness::new(support::Stack::LayerThenOtel, layer);
    a.run(|| {
        drop(tool_span!("t"));
    });
    b.run(|| {
        tool_span!("t").record("error.type", "x");
    });
    assert_eq!(calls(&registry, "t"), (1, 1, 0, 0));
}

/// A tool function instrumented as the README shows, called inside a framework's own tool span
/// of the same tool.
#[tracing::instrument(
    err,
    skip(registry),
    fields(gen_ai.operation.name = "execute_tool", gen_ai.tool.name = "lookup")
)]
fn lookup(registry: &tool_health::ToolHealthRegistry, up: bool) -> Result<u32, String> {
    if !registry.allow_request("lookup") {
        return Err(tool_health::REFUSAL_MESSAGE.to_owned());
    }
    if up {
        Ok(7)
    } else {
        Err("upstream down".to_owned())
    }
}

fn framework_calls_lookup(registry: &tool_health::ToolHealthRegistry, up: bool) {
    let span = tracing::info_span!(
        "execute_tool lookup",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = "lookup",
        error.type = field::Empty,
    );
    let _entered = span.enter();
    if let Err(e) = lookup(registry, up) {
        span.record("error.type", "tool_error");
        tracing::error!(error = %e, "tool call failed");
    }
}

#[test]
fn nested_spans_of_one_tool_are_one_call() {
    for stack in ALL_STACKS {
        let (clock, registry) = new_registry(1);
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| {
            framework_calls_lookup(&registry, false);
            assert_eq!(
                calls(&registry, "lookup"),
                (0, 1, 0, 0),
                "{stack:?}: was recorded twice"
            );
            clock.advance(Duration::from_secs(1));
            // One call a second to 120 s, the tool down until 40 s.
            for second in 1..120 {
                framework_calls_lookup(&registry, second >= 40);
                clock.advance(Duration::from_secs(1));
            }
        });
        // As under enforcement. Before: the outer span recorded each refusal as a failure,
        // restarting the cooldown: never a probe.
        assert_eq!(calls(&registry, "lookup"), (60, 2, 0, 58), "{stack:?}");
        assert_eq!(registry.breaker_state("lookup"), BreakerState::Closed);
    }
}
