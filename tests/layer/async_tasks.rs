//! Async tools on a multi-thread tokio runtime: `#[instrument(err)]` on async functions,
//! spans crossing worker threads, panicking tasks, the gate inside async tools.

use std::time::Duration;

use crate::support::{registry, Harness, ALL_STACKS};
use crate::ToolError;
use tool_health::{BreakerState, ToolHealthLayer, ToolHealthRegistry};
use tracing::instrument::WithSubscriber;
use tracing::Instrument;

#[tracing::instrument(
    skip(registry),
    err,
    fields(gen_ai.operation.name = "execute_tool", gen_ai.tool.name = "fetch")
)]
async fn fetch(registry: &ToolHealthRegistry, fail: bool) -> Result<u32, ToolError> {
    if !registry.allow_request("fetch") {
        return Err(ToolError);
    }
    // Cross an await point: the rest of the call may run on another worker thread.
    tokio::task::yield_now().await;
    if fail {
        Err(ToolError)
    } else {
        Ok(1)
    }
}

fn counts(registry: &ToolHealthRegistry, tool: &str) -> (u64, u64, u64) {
    registry.snapshot(tool).map_or((0, 0, 0), |s| {
        (s.success_count, s.failure_count, s.refused_count)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instrument_err_on_async_functions() {
    for stack in ALL_STACKS {
        let (_clock, registry) = registry(0);
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        let mut tasks = Vec::new();
        for i in 0..20 {
            let registry = registry.clone();
            tasks.push(tokio::spawn(
                async move { fetch(&registry, i % 4 == 0).await.is_ok() }
                    .with_subscriber(h.dispatch.clone()),
            ));
        }
        for t in tasks {
            t.await.expect("task");
        }
        assert_eq!(counts(&registry, "fetch"), (15, 5, 0), "{stack:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_async_gate_binds_refusals_and_probes() {
    for stack in ALL_STACKS {
        let (clock, registry) = registry(1);
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        let run = |fail: bool| {
            let registry = registry.clone();
            tokio::spawn(
                async move { fetch(&registry, fail).await.is_ok() }
                    .with_subscriber(h.dispatch.clone()),
            )
        };
        assert!(!run(true).await.unwrap());
        assert_eq!(registry.breaker_state("fetch"), BreakerState::Open);
        // Refused: the ERROR event of `err` does not count as a failure.
        assert!(!run(false).await.unwrap());
        assert_eq!(counts(&registry, "fetch"), (0, 1, 1), "{stack:?}");
        clock.advance(Duration::from_secs(30));
        assert!(run(false).await.unwrap());
        assert_eq!(
            registry.breaker_state("fetch"),
            BreakerState::Closed,
            "{stack:?}"
        );
        assert_eq!(counts(&registry, "fetch"), (1, 1, 1), "{stack:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_task_fails_its_tool_span() {
    for stack in ALL_STACKS {
        let (_clock, registry) = registry(3);
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        let span = tracing::dispatcher::with_default(&h.dispatch, || {
            tracing::info_span!("execute_tool", gen_ai.tool.name = "crashy")
        });
        let task = tokio::spawn(
            async {
                tokio::task::yield_now().await;
                panic!("tool bug");
            }
            .instrument(span)
            .with_subscriber(h.dispatch.clone()),
        );
        assert!(task.await.unwrap_err().is_panic());
        assert_eq!(counts(&registry, "crashy"), (0, 1, 0), "{stack:?}");
        // The registry and the runtime carry on.
        let registry2 = registry.clone();
        let ok = tokio::spawn(
            async move { fetch(&registry2, false).await.is_ok() }
                .with_subscriber(h.dispatch.clone()),
        );
        assert!(ok.await.unwrap());
        assert_eq!(counts(&registry, "fetch"), (1, 0, 0), "{stack:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_future_is_cancelled_in_strict_mode() {
    for stack in ALL_STACKS {
        let (clock, registry) = registry(1);
        registry.record_failure("fetch", Duration::ZERO);
        clock.advance(Duration::from_secs(30));
        let layer = ToolHealthLayer::builder(registry.clone())
            .strict(true)
            .build();
        let h = Harness::new(stack, layer);
        let registry2 = registry.clone();
        let gated = tokio::sync::Notify::new();
        let never = std::future::pending::<()>();
        let call = async {
            let span = tracing::info_span!("execute_tool", gen_ai.tool.name = "fetch");
            async {
                assert!(registry2.allow_request("fetch"));
                gated.notify_one();
                never.await;
            }
            .instrument(span)
            .await;
        };
        // A timeout around the call fires: the future is dropped mid-call.
        async {
            tokio::select! {
                biased;
                _ = call => unreachable!("the call never completes"),
                _ = gated.notified() => {}
            }
        }
        .with_subscriber(h.dispatch.clone())
        .await;
        assert!(registry.is_tool_available("fetch"), "{stack:?}");
        assert_eq!(counts(&registry, "fetch"), (0, 1, 0), "{stack:?}");
    }
}

// Issue 14, finding 4: the README's async pattern is `.instrument(span)`. Holding
// `span.enter()` across an `.await` (the old snippet) leaves the span entered while another
// task runs on the same thread, so that task's unrelated ERROR fails a healthy tool.
#[tokio::test(flavor = "current_thread")]
async fn an_unrelated_error_on_the_same_thread_fails_only_a_span_held_across_await() {
    for stack in ALL_STACKS {
        let (_clock, registry) = registry(0);
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        let run = |held: bool| {
            let registry = registry.clone();
            async move {
                let go = tokio::sync::Notify::new();
                let tool = async {
                    let span = if held {
                        tool_span!("held")
                    } else {
                        tool_span!("instrumented")
                    };
                    let call = async {
                        assert!(registry.allow_request(if held { "held" } else { "instrumented" }));
                        go.notified().await; // suspended: another task runs
                    };
                    if held {
                        let _in = span.enter(); // the wrong way
                        call.await;
                    } else {
                        call.instrument(span.clone()).await; // the README's way
                    }
                };
                let other = async {
                    tracing::error!("an unrelated task failed");
                    go.notify_one();
                };
                tokio::join!(tool, other);
            }
            .with_subscriber(h.dispatch.clone())
        };
        run(false).await;
        run(true).await;
        assert_eq!(
            crate::calls(&registry, "instrumented"),
            (1, 0, 0, 0),
            "{stack:?}"
        );
        assert_eq!(
            crate::calls(&registry, "held"),
            (0, 1, 0, 0),
            "{stack:?}: the wrong pattern really fails"
        );
    }
}
