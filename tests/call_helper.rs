//! The call helper (`registry.call(tool)`): the async-service patterns of issue 14, each on a
//! real tokio runtime, with and without a `ToolHealthLayer`, through the real subscriber stacks
//! (`layer/support.rs`: a plain registry, and tracing-opentelemetry with an in-memory exporter).
//!
//! Timeouts run on tokio's paused clock (`start_paused`): a manual clock, no sleeping. The
//! registry runs on its own `ManualClock`.

#[path = "layer/support.rs"]
mod support;

use std::future::pending;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::{attr, registry, transitions, Harness, Stack, ALL_STACKS};
use tool_health::observe::CallEvent;
use tool_health::observe::HealthObserver;
use tool_health::{
    BreakerState, CallError, CallOutcome, ErrorClass, GateDecision, ToolHealthLayer,
    ToolHealthRegistry,
};
use tracing::instrument::WithSubscriber;
use tracing::Dispatch;
use tracing_subscriber::layer::SubscriberExt;

#[derive(Debug, PartialEq)]
struct Upstream(&'static str);

impl std::fmt::Display for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "upstream: {}", self.0)
    }
}

/// `(success, failure, ignored, refused, cancelled)` of `tool`.
fn counts(registry: &ToolHealthRegistry, tool: &str) -> (u64, u64, u64, u64, u64) {
    registry.snapshot(tool).map_or((0, 0, 0, 0, 0), |s| {
        (
            s.success_count,
            s.failure_count,
            s.ignored_count,
            s.refused_count,
            s.cancelled_count,
        )
    })
}

/// No layer at all, or a layer for the same registry in each documented stack.
#[derive(Debug, Clone, Copy)]
enum Setup {
    NoLayer,
    Layer(Stack),
}

const SETUPS: [Setup; 4] = [
    Setup::NoLayer,
    Setup::Layer(Stack::Plain),
    Setup::Layer(Stack::LayerThenOtel),
    Setup::Layer(Stack::OtelThenLayer),
];

fn dispatch_for(setup: Setup, registry: &Arc<ToolHealthRegistry>) -> (Dispatch, Option<Harness>) {
    match setup {
        Setup::NoLayer => (Dispatch::new(tracing_subscriber::registry()), None),
        Setup::Layer(stack) => {
            let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
            (h.dispatch.clone(), Some(h))
        }
    }
}

/// Builds a call under `dispatch` (the helper opens its span when `run` is called) and polls
/// it under `dispatch` too.
async fn within<F: std::future::Future>(
    dispatch: &Dispatch,
    make: impl FnOnce() -> F,
) -> F::Output {
    let fut = tracing::dispatcher::with_default(dispatch, make);
    fut.with_subscriber(dispatch.clone()).await
}

/// Builds a call under `dispatch` for spawning; the task drops it under `dispatch` too (the
/// subscriber closes a parent span through the current default when its child closes).
fn build<F: std::future::Future>(
    dispatch: &Dispatch,
    make: impl FnOnce() -> F,
) -> tracing::instrument::WithDispatch<DropsWhenDone<F>> {
    let fut = tracing::dispatcher::with_default(dispatch, make);
    DropsWhenDone(Some(Box::pin(fut))).with_subscriber(dispatch.clone())
}

/// A future dropped inside the poll that finishes it.
struct DropsWhenDone<F>(Option<std::pin::Pin<Box<F>>>);

impl<F: std::future::Future> std::future::Future for DropsWhenDone<F> {
    type Output = F::Output;
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        let fut = self.0.as_mut().expect("polled after completion");
        let out = fut.as_mut().poll(cx);
        if out.is_ready() {
            self.0 = None;
        }
        out
    }
}

/// Records the `error.type` of every call observers see.
#[derive(Debug, Default)]
struct ErrorTypes(Mutex<Vec<(CallOutcome, Option<String>)>>);

impl HealthObserver for ErrorTypes {
    fn on_call(&self, e: &CallEvent<'_>) {
        self.0
            .lock()
            .unwrap()
            .push((e.outcome, e.error_type.map(str::to_owned)));
    }
}

// Finding 1: a tool that always hangs, cut off by a timeout *inside* the call, trips.
#[tokio::test(start_paused = true)]
async fn a_hanging_tool_under_the_helpers_timeout_trips_its_breaker() {
    for setup in SETUPS {
        let (_clock, registry) = registry(3);
        let seen = Arc::new(ErrorTypes::default());
        registry.add_observer(seen.clone());
        let (dispatch, _h) = dispatch_for(setup, &registry);
        for i in 0..5 {
            let r = within(&dispatch, || {
                registry
                    .call("hangs")
                    .timeout(Duration::from_secs(2))
                    .run(pending::<Result<(), Upstream>>())
            })
            .await;
            match (i, r) {
                (0..3, Err(CallError::TimedOut { after, .. })) => {
                    assert_eq!(after, Duration::from_secs(2))
                }
                (3.., Err(CallError::Refused { retry_after, .. })) => {
                    assert_eq!(retry_after, Duration::from_secs(30), "{setup:?}")
                }
                (i, other) => panic!("{setup:?} call {i}: {other:?}"),
            }
        }
        assert_eq!(counts(&registry, "hangs"), (0, 3, 0, 2, 0), "{setup:?}");
        assert_eq!(registry.breaker_state("hangs"), BreakerState::Open);
        let failures: Vec<_> = seen
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|(o, _)| *o == CallOutcome::Failure)
            .map(|(_, t)| t.clone())
            .collect();
        assert_eq!(failures, vec![Some("timeout".to_owned()); 3], "{setup:?}");
    }
}

// Finding 1, the other half: a timeout *around* the call says nothing about the tool. It is a
// cancellation — counted, never a success — and a probe it held goes back at once.
#[tokio::test(start_paused = true)]
async fn an_outer_timeout_is_a_cancellation_and_gives_the_probe_back() {
    for setup in SETUPS {
        let (clock, registry) = registry(1);
        let (dispatch, _h) = dispatch_for(setup, &registry);
        for _ in 0..3 {
            let outer = within(&dispatch, || {
                tokio::time::timeout(
                    Duration::from_secs(1),
                    registry
                        .call("hangs")
                        .run(pending::<Result<(), Upstream>>()),
                )
            })
            .await;
            assert!(outer.is_err(), "the outer timeout fired");
        }
        assert_eq!(counts(&registry, "hangs"), (0, 0, 0, 0, 3), "{setup:?}");
        assert_eq!(registry.breaker_state("hangs"), BreakerState::Closed);

        // Trip it, wait out the cooldown: the next call holds the probe, and is cut off.
        registry.record_failure("hangs", Duration::ZERO);
        clock.advance(Duration::from_secs(30));
        let outer = within(&dispatch, || {
            tokio::time::timeout(
                Duration::from_secs(1),
                registry
                    .call("hangs")
                    .run(pending::<Result<(), Upstream>>()),
            )
        })
        .await;
        assert!(outer.is_err());
        // Given back at once: no lease to wait for, the next gate call probes.
        let next = registry.check_detached("hangs");
        assert!(
            matches!(next, GateDecision::Probe(_)),
            "{setup:?}: {next:?}"
        );
        assert_eq!(counts(&registry, "hangs").4, 4);
    }
}

// Findings 2 and 10: refusals are a typed value with `retry_after`, never a failure — in tasks
// spawned without `.in_current_span()` and in `spawn_blocking`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_typed_and_never_failures_in_spawned_tasks() {
    for setup in SETUPS {
        let (_clock, registry) = registry(3);
        let (dispatch, _h) = dispatch_for(setup, &registry);
        let mut refused = 0;
        let mut failed = 0;
        for i in 0..30 {
            let r = if i % 2 == 0 {
                // Spawned as it is: no `.in_current_span()`.
                let call = build(&dispatch, || {
                    registry.call("flaky").run(async {
                        tokio::task::yield_now().await;
                        Err::<(), _>(Upstream("503"))
                    })
                });
                tokio::spawn(call).await.unwrap()
            } else {
                let (registry, dispatch) = (registry.clone(), dispatch.clone());
                tokio::task::spawn_blocking(move || {
                    tracing::dispatcher::with_default(&dispatch, || {
                        registry
                            .call("flaky")
                            .run_blocking(|| Err::<(), _>(Upstream("503")))
                    })
                })
                .await
                .unwrap()
            };
            match r {
                Err(CallError::Refused { retry_after, tool }) => {
                    assert_eq!(tool, "flaky");
                    assert_eq!(retry_after, Duration::from_secs(30));
                    refused += 1;
                }
                Err(CallError::Tool(Upstream("503"))) => failed += 1,
                other => panic!("{setup:?}: {other:?}"),
            }
        }
        assert_eq!((failed, refused), (3, 27), "{setup:?}");
        assert_eq!(counts(&registry, "flaky"), (0, 3, 0, 27, 0), "{setup:?}");
    }
}

// Finding 10: a retry wrapper that waits what the refusal says, no less.
#[tokio::test]
async fn a_retry_wrapper_waits_the_refusals_retry_after() {
    let (clock, registry) = registry(1);
    registry.record_failure("search", Duration::ZERO); // trips
    clock.advance(Duration::from_secs(12));

    let mut waited = Vec::new();
    let result = loop {
        match registry
            .call("search")
            .run(async { Ok::<_, Upstream>("results") })
            .await
        {
            Err(CallError::Refused { retry_after, .. }) => {
                // What the planner is told agrees with the refusal.
                assert_eq!(registry.unavailable_tools()[0].retry_after, retry_after);
                waited.push(retry_after);
                clock.advance(retry_after); // stands for tokio::time::sleep(retry_after)
            }
            other => break other,
        }
    };
    assert_eq!(result.unwrap(), "results");
    assert_eq!(
        waited,
        [Duration::from_secs(18)],
        "one wait, exactly the rest"
    );
    assert_eq!(registry.breaker_state("search"), BreakerState::Closed);
}

// The refusal's text starts with the model-facing message and names the tool for the logs.
#[test]
fn a_refusal_names_its_tool() {
    let e: CallError<Upstream> = CallError::Refused {
        tool: "search".into(),
        retry_after: Duration::from_millis(2500),
    };
    assert_eq!(
        e.to_string(),
        "tool temporarily unavailable: circuit breaker open (tool `search`, retry in 2.5 s)"
    );
    assert!(e.is_refused());
    assert_eq!(e.retry_after(), Some(Duration::from_millis(2500)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_call_is_a_failure() {
    for setup in SETUPS {
        let (_clock, registry) = registry(0);
        let seen = Arc::new(ErrorTypes::default());
        registry.add_observer(seen.clone());
        let (dispatch, _h) = dispatch_for(setup, &registry);
        let call = build(&dispatch, || {
            registry.call("boom").run(async {
                tokio::task::yield_now().await;
                if true {
                    panic!("the tool panicked");
                }
                Ok::<(), Upstream>(())
            })
        });
        let joined = tokio::spawn(call).await;
        assert!(joined.unwrap_err().is_panic());
        assert_eq!(counts(&registry, "boom"), (0, 1, 0, 0, 0), "{setup:?}");
        assert_eq!(
            seen.0.lock().unwrap().last().unwrap().1.as_deref(),
            Some("panic"),
            "{setup:?}"
        );
    }
}

// Without `.classify`, `error.type` is a short class, never the error's Rust type path
// (a dashboard grouped by error type must show error classes, not code paths).
#[tokio::test]
async fn an_unclassified_error_is_a_tool_error_never_a_type_path() {
    for setup in SETUPS {
        let (_clock, registry) = registry(0);
        let seen = Arc::new(ErrorTypes::default());
        registry.add_observer(seen.clone());
        let (dispatch, _h) = dispatch_for(setup, &registry);
        let r = within(&dispatch, || {
            registry
                .call("search")
                .run(async { Err::<(), _>(Upstream("503")) })
        })
        .await;
        assert!(matches!(r, Err(CallError::Tool(_))));
        let r = within(&dispatch, || {
            registry
                .call("search")
                .run(async { Err::<(), String>("a String error".to_owned()) })
        })
        .await;
        assert!(matches!(r, Err(CallError::Tool(_))));
        assert_eq!(counts(&registry, "search"), (0, 2, 0, 0, 0), "{setup:?}");
        let seen = seen.0.lock().unwrap().clone();
        assert_eq!(
            seen,
            vec![
                (CallOutcome::Failure, Some("tool_error".to_owned())),
                (CallOutcome::Failure, Some("tool_error".to_owned())),
            ],
            "{setup:?}"
        );
    }
}

#[tokio::test]
async fn caller_errors_go_through_the_classifier_and_never_trip() {
    for setup in SETUPS {
        let (_clock, registry) = registry(1);
        let (dispatch, _h) = dispatch_for(setup, &registry);
        for _ in 0..5 {
            let r = within(&dispatch, || {
                registry
                    .call("weather")
                    .classify(|e: &Upstream| match e.0 {
                        "unknown city" => ErrorClass::caller_error("invalid_arguments"),
                        _ => ErrorClass::failure("upstream"),
                    })
                    .run(async { Err::<(), _>(Upstream("unknown city")) })
            })
            .await;
            assert!(matches!(r, Err(CallError::Tool(_))));
        }
        let r = within(&dispatch, || {
            registry
                .call("weather")
                .classify(|_: &Upstream| ErrorClass::success())
                .run(async { Err::<(), _>(Upstream("no results")) })
        })
        .await;
        assert!(r.is_err(), "the error is still returned");
        assert_eq!(counts(&registry, "weather"), (1, 0, 5, 0, 0), "{setup:?}");
        assert_eq!(registry.breaker_state("weather"), BreakerState::Closed);
    }
}

// With a layer watching the span, the helper and the layer make exactly one record between
// them, and the OpenTelemetry span carries the decision, the failure and the transition.
#[tokio::test(start_paused = true)]
async fn with_a_layer_one_call_is_one_record_and_the_span_tells_it() {
    for stack in ALL_STACKS {
        let (_clock, registry) = registry(1);
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        let ok = within(&h.dispatch, || {
            registry.call("search").run(async { Ok::<_, Upstream>(1) })
        })
        .await;
        assert_eq!(ok.unwrap(), 1);
        let timed_out = within(&h.dispatch, || {
            registry
                .call("search")
                .timeout(Duration::from_millis(500))
                .run(pending::<Result<(), Upstream>>())
        })
        .await;
        assert!(matches!(timed_out, Err(CallError::TimedOut { .. })));
        assert_eq!(counts(&registry, "search"), (1, 1, 0, 0, 0), "{stack:?}");
        assert_eq!(registry.breaker_state("search"), BreakerState::Open);
        if stack == Stack::Plain {
            continue;
        }
        let spans = h.spans();
        assert_eq!(spans.len(), 2, "{stack:?}: one span per call");
        for span in &spans {
            assert_eq!(span.name, "execute_tool search");
            assert_eq!(attr(span, "gen_ai.tool.name").as_deref(), Some("search"));
            assert_eq!(
                attr(span, "tool_health.gate.decision").as_deref(),
                Some("allowed")
            );
        }
        assert_eq!(attr(&spans[1], "error.type").as_deref(), Some("timeout"));
        if stack == Stack::LayerThenOtel {
            assert_eq!(
                transitions(&spans[1]),
                [("closed".to_owned(), "open".to_owned())]
            );
        }
    }
}

/// An `#[instrument]`ed tool function that calls the helper for its own tool.
#[tracing::instrument(skip(registry), fields(gen_ai.operation.name = "execute_tool", gen_ai.tool.name = "search"))]
async fn search(registry: Arc<ToolHealthRegistry>, fail: bool) -> Result<u32, CallError<Upstream>> {
    registry
        .call("search")
        .run(async move {
            if fail {
                Err(Upstream("503"))
            } else {
                Ok(7)
            }
        })
        .await
}

#[tokio::test]
async fn the_helper_joins_the_current_tool_span_of_its_tool() {
    for stack in ALL_STACKS {
        let (_clock, registry) = registry(0);
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        assert!(search(registry.clone(), false)
            .with_subscriber(h.dispatch.clone())
            .await
            .is_ok());
        assert!(search(registry.clone(), true)
            .with_subscriber(h.dispatch.clone())
            .await
            .is_err());
        assert_eq!(counts(&registry, "search"), (1, 1, 0, 0, 0), "{stack:?}");
        if stack != Stack::Plain {
            let names: Vec<_> = h.spans().into_iter().map(|s| s.name).collect();
            assert_eq!(names, ["search", "search"], "{stack:?}: no nested span");
        }
    }
}

// Finding 5 through the helper: a global EnvFilter at `warn` disables the INFO tool spans for
// every layer; the helper records the calls itself, so the breaker still trips.
#[tokio::test]
async fn under_a_global_warn_filter_the_helper_still_records() {
    let (_clock, registry) = registry(3);
    let dispatch = Dispatch::new(
        tracing_subscriber::registry()
            .with(tracing_subscriber::EnvFilter::new("warn"))
            .with(ToolHealthLayer::new(registry.clone())),
    );
    for _ in 0..6 {
        let _ = within(&dispatch, || {
            registry
                .call("flaky")
                .run(async { Err::<(), _>(Upstream("503")) })
        })
        .await;
    }
    assert_eq!(counts(&registry, "flaky"), (0, 3, 0, 3, 0));
}

// The span is created when `run` is called: a spawned call keeps the caller's span as its
// parent with no `.in_current_span()`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawned_call_keeps_the_callers_span_as_parent() {
    let (_clock, registry) = registry(0);
    let h = Harness::new(Stack::LayerThenOtel, ToolHealthLayer::new(registry.clone()));
    let call = build(&h.dispatch, || {
        let _turn = tracing::info_span!("invoke_agent").entered();
        registry.call("search").run(async {
            tokio::task::yield_now().await;
            Ok::<_, Upstream>(())
        })
    });
    tokio::spawn(call).await.unwrap().unwrap();
    let turn = h.span("invoke_agent");
    let tool = h.span("execute_tool search");
    assert_eq!(tool.parent_span_id, turn.span_context.span_id());
    assert_eq!(counts(&registry, "search"), (1, 0, 0, 0, 0));
}
