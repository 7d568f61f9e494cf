//! Per-tool policies on the manual clock: per-tool overrides and when they apply, backoff of
//! the cooldown with injected jitter, Retry-After hints (from a `CallReport` and read from tool
//! spans by the layer), the failure-rate trip policy over a sliding window, slow calls.

// The layer tests' harness: subscriber stacks and a registry on the manual clock.
#[path = "layer/support.rs"]
mod layer_support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use layer_support::{registry, Harness, Stack, ALL_STACKS};
use tool_health::{
    Apply, Backoff, BreakerState, CallOutcome, CallReport, CircuitBreakerConfig, GateDecision,
    JitterSource, ManualClock, ToolHealthLayer, ToolHealthRegistry, ToolPolicy, TripPolicy,
};

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

fn setup(threshold: u32, recovery: Duration) -> (ToolHealthRegistry, ManualClock) {
    let clock = ManualClock::new();
    let r = ToolHealthRegistry::builder()
        .clock(clock.clone())
        .config(CircuitBreakerConfig {
            failure_threshold: threshold,
            recovery_duration: recovery,
            probe_timeout: 10 * SEC,
        })
        .build();
    (r, clock)
}

#[test]
fn per_tool_overrides_apply_to_existing_breakers_only_when_asked() {
    let (r, _) = setup(3, 30 * SEC);
    r.record_success("a", MS);
    let strict = ToolPolicy::from(CircuitBreakerConfig {
        failure_threshold: 1,
        ..Default::default()
    });
    r.set_tool_policy("a", strict.clone(), Apply::NewBreakers);
    r.record_failure("a", MS);
    assert_eq!(
        r.breaker_state("a"),
        BreakerState::Closed,
        "existing breaker kept its policy"
    );
    r.set_tool_policy("a", strict.clone(), Apply::Now);
    r.record_failure("a", MS);
    assert_eq!(r.breaker_state("a"), BreakerState::Open);
    // A tool first seen after its override gets it.
    r.set_tool_policy("b", strict, Apply::NewBreakers);
    r.record_failure("b", MS);
    assert_eq!(r.breaker_state("b"), BreakerState::Open);
    assert_eq!(r.tool_policy("b").breaker.failure_threshold, 1);
    // Others keep the default.
    r.record_failure("c", MS);
    assert_eq!(r.breaker_state("c"), BreakerState::Closed);
    r.clear_tool_policy("b", Apply::Now);
    assert_eq!(r.tool_policy("b").breaker.failure_threshold, 3);
}

#[test]
fn failure_rate_policy_trips_on_ratio_with_minimum_calls_over_a_sliding_window() {
    let (r, _) = setup(3, 30 * SEC);
    r.set_tool_policy(
        "t",
        ToolPolicy {
            trip: TripPolicy::FailureRate {
                ratio: 0.5,
                min_calls: 6,
                window: Duration::from_secs(8),
            },
            ..ToolPolicy::default()
        },
        Apply::NewBreakers,
    );
    // Alternating: 3 failures in a row never happen, but the ratio reaches 50 %.
    for i in 0..5 {
        if i % 2 == 0 {
            r.record_failure("t", MS);
        } else {
            r.record_success("t", MS);
        }
    }
    assert_eq!(
        r.breaker_state("t"),
        BreakerState::Closed,
        "5 calls < min_calls"
    );
    r.record_success("t", MS);
    r.record_failure("t", MS); // 4 of 7 failed
    assert_eq!(r.breaker_state("t"), BreakerState::Open);

    // The window slides: old failures stop counting.
    let (r, clock2) = setup(3, 30 * SEC);
    r.set_default_policy(ToolPolicy {
        trip: TripPolicy::FailureRate {
            ratio: 0.5,
            min_calls: 4,
            window: Duration::from_secs(8),
        },
        ..ToolPolicy::default()
    });
    for _ in 0..3 {
        r.record_failure("u", MS);
    }
    clock2.advance(9 * SEC);
    for _ in 0..4 {
        r.record_success("u", MS);
    }
    r.record_failure("u", MS); // 1 of 5 in the window
    assert_eq!(r.breaker_state("u"), BreakerState::Closed);
}

#[test]
fn slow_calls_fail_the_breaker_but_not_the_stats() {
    let (r, _) = setup(2, 30 * SEC);
    r.set_default_policy(ToolPolicy {
        breaker: CircuitBreakerConfig {
            failure_threshold: 2,
            ..Default::default()
        },
        slow_call: Some(2 * SEC),
        ..ToolPolicy::default()
    });
    r.record_success("t", 2 * SEC); // at the threshold: not slow
    assert_eq!(r.snapshot("t").unwrap().consecutive_failures, 0);
    r.record_success("t", 3 * SEC);
    r.record_success("t", 5 * SEC);
    let s = r.snapshot("t").unwrap();
    assert_eq!(s.breaker, BreakerState::Open);
    assert_eq!(
        (s.success_count, s.failure_count, s.success_rate),
        (3, 0, 1.0)
    );
}

#[derive(Debug)]
struct FixedJitter(AtomicU64);
impl JitterSource for FixedJitter {
    fn jitter(&self, max: Duration) -> Duration {
        Duration::from_millis(self.0.load(Ordering::Relaxed)).min(max)
    }
}

fn backoff_registry(jitter: Option<Arc<dyn JitterSource>>) -> (ToolHealthRegistry, ManualClock) {
    let (r, clock) = setup(1, 10 * SEC);
    r.set_default_policy(ToolPolicy {
        breaker: CircuitBreakerConfig {
            failure_threshold: 1,
            recovery_duration: 10 * SEC,
            probe_timeout: 5 * SEC,
        },
        backoff: Some(Backoff {
            multiplier: 2,
            max_recovery: 35 * SEC,
            stable_after: 60 * SEC,
            max_jitter: if jitter.is_some() {
                SEC
            } else {
                Duration::ZERO
            },
            jitter,
        }),
        ..ToolPolicy::default()
    });
    (r, clock)
}

/// Opens the breaker and returns how long it stays open.
fn open_for(r: &ToolHealthRegistry, clock: &ManualClock) -> Duration {
    match r.check("t") {
        GateDecision::Refused { retry_after } => {
            clock.advance(retry_after);
            assert!(matches!(r.check("t"), GateDecision::Probe(_)));
            retry_after
        }
        d => panic!("expected open, got {d:?}"),
    }
}

#[test]
fn backoff_grows_when_a_tool_re_trips_soon_and_resets_after_calm() {
    let (r, clock) = backoff_registry(None);
    r.record_failure("t", MS);
    assert_eq!(open_for(&r, &clock), 10 * SEC);
    r.record_failure("t", MS); // probe fails: level 1
    assert_eq!(open_for(&r, &clock), 20 * SEC);
    r.record_success("t", MS); // closes
    clock.advance(5 * SEC);
    r.record_failure("t", MS); // re-trips soon after closing: level 2
    assert_eq!(open_for(&r, &clock), 35 * SEC, "capped at max_recovery");
    r.record_success("t", MS);
    clock.advance(60 * SEC); // calm
    r.record_failure("t", MS);
    assert_eq!(
        open_for(&r, &clock),
        10 * SEC,
        "level reset after stable_after"
    );
}

#[test]
fn backoff_jitter_comes_from_the_injected_source() {
    let jitter = Arc::new(FixedJitter(AtomicU64::new(250)));
    let (r, clock) = backoff_registry(Some(jitter.clone()));
    r.record_failure("t", MS);
    assert_eq!(open_for(&r, &clock), 10 * SEC + 250 * MS);
    jitter.0.store(5_000, Ordering::Relaxed); // clamped to max_jitter
    r.record_failure("t", MS);
    assert_eq!(open_for(&r, &clock), 21 * SEC);
}

#[test]
fn retry_after_hint_keeps_the_breaker_open_at_least_that_long() {
    let (r, clock) = setup(1, 10 * SEC);
    let report = CallReport::new(CallOutcome::Failure, MS)
        .error_type("rate_limited")
        .retry_after(120 * SEC);
    r.record_report("t", &report);
    assert_eq!(
        r.check("t"),
        GateDecision::Refused {
            retry_after: 120 * SEC
        }
    );
    clock.advance(120 * SEC - MS);
    assert!(!r.allow_request("t"));
    clock.advance(MS);
    assert!(r.allow_request("t"));
    // A hint shorter than the cooldown changes nothing.
    r.record_report(
        "t",
        &CallReport::new(CallOutcome::Failure, MS).retry_after(SEC),
    );
    assert_eq!(
        r.check("t"),
        GateDecision::Refused {
            retry_after: 10 * SEC
        }
    );
}

fn rate_limited_call(registry: &tool_health::ToolHealthRegistry, status: u64, retry_after: &str) {
    let span = tracing::info_span!(
        "execute_tool search",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = "search",
        error.type = tracing::field::Empty,
        http.response.status_code = status,
        "http.response.header.retry-after" = retry_after,
    );
    let _g = span.enter();
    assert!(registry.allow_request("search"));
    span.record("error.type", "rate_limited");
}

#[test]
fn a_429_with_retry_after_keeps_the_breaker_open_that_long() {
    for stack in ALL_STACKS {
        let (_clock, registry) = registry(1);
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| rate_limited_call(&registry, 429, "120"));
        assert_eq!(
            registry.check_detached("search"),
            GateDecision::Refused {
                retry_after: Duration::from_secs(120)
            },
            "{stack:?}"
        );
    }
}

#[test]
fn a_retry_after_on_another_status_or_unparsable_is_no_hint() {
    for (status, hint) in [(500, "120"), (429, "soon"), (429, "-5")] {
        let (_clock, registry) = registry(1);
        let h = Harness::new(Stack::Plain, ToolHealthLayer::new(registry.clone()));
        h.run(|| rate_limited_call(&registry, status, hint));
        // The default cooldown of the test registry applies (30 s), not the hint.
        assert_eq!(
            registry.check_detached("search"),
            GateDecision::Refused {
                retry_after: Duration::from_secs(30)
            },
            "status {status}, hint {hint:?}"
        );
    }
}

#[test]
fn a_numeric_retry_after_field_with_a_custom_name() {
    let (_clock, registry) = registry(1);
    let layer = ToolHealthLayer::builder(registry.clone())
        .retry_after_field("tool.retry_after_s")
        .build();
    let h = Harness::new(Stack::Plain, layer);
    h.run(|| {
        let span = tracing::info_span!(
            "execute_tool search",
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = "search",
            error.type = "rate_limited",
            tool.retry_after_s = 90.5,
        );
        let _g = span.enter();
    });
    assert_eq!(
        registry.check_detached("search"),
        GateDecision::Refused {
            retry_after: Duration::from_millis(90_500)
        }
    );
}

#[test]
fn a_retry_after_hint_is_a_floor_later_failures_only_extend_it() {
    // Threshold 1, cooldown 30 s, lease 10 s.
    let (r, clock) = setup(1, 30 * SEC);
    r.record_report(
        "t",
        &CallReport::new(CallOutcome::Failure, MS).retry_after(600 * SEC),
    );
    clock.advance(SEC);
    // A failure without a hint, one second later: its own cooldown would end at 31 s.
    r.record_failure("t", MS);
    clock.advance(30 * SEC); // 31 s
    let refused = GateDecision::Refused {
        retry_after: 569 * SEC,
    };
    assert_eq!(r.check("t"), refused, "still open until the hinted 600 s");
    assert_eq!(r.unavailable_tools()[0].retry_after, 569 * SEC);
    clock.advance(569 * SEC - MS);
    assert!(!r.allow_request("t"));
    clock.advance(MS); // 600 s
    assert!(matches!(r.check("t"), GateDecision::Probe(_)));

    // A later failure extends the open period past a hint: the floor is a floor, not a cap.
    let (r, clock) = setup(1, 30 * SEC);
    r.record_report(
        "u",
        &CallReport::new(CallOutcome::Failure, MS).retry_after(60 * SEC),
    );
    clock.advance(50 * SEC);
    r.record_failure("u", MS); // cooldown to 80 s, past the hinted 60 s
    assert_eq!(
        r.check("u"),
        GateDecision::Refused {
            retry_after: 30 * SEC
        }
    );
}

#[test]
fn closing_the_breaker_starts_a_fresh_failure_rate_window() {
    let (r, clock) = setup(1, 30 * SEC);
    r.set_default_policy(ToolPolicy {
        breaker: CircuitBreakerConfig {
            failure_threshold: 1,
            recovery_duration: 30 * SEC,
            probe_timeout: 10 * SEC,
        },
        trip: TripPolicy::FailureRate {
            ratio: 0.5,
            min_calls: 4,
            window: 60 * SEC,
        },
        ..ToolPolicy::default()
    });
    for _ in 0..4 {
        r.record_failure("t", MS);
    }
    assert_eq!(r.breaker_state("t"), BreakerState::Open, "4 of 4 failed");
    clock.advance(30 * SEC);
    assert!(matches!(r.check("t"), GateDecision::Probe(_)));
    r.record_success("t", MS);
    assert_eq!(r.breaker_state("t"), BreakerState::Closed);
    clock.advance(SEC);
    // The four failures that opened it are 31 s old, inside the 60 s window, but they
    // belong to the episode that ended: one failure is 1 call < min_calls.
    r.record_failure("t", MS);
    assert_eq!(r.breaker_state("t"), BreakerState::Closed);
    // The fresh window trips on its own numbers.
    for _ in 0..3 {
        r.record_failure("t", MS);
    }
    assert_eq!(r.breaker_state("t"), BreakerState::Open);
}

#[test]
fn a_failure_rate_window_counts_every_call_of_its_length() {
    // Window 8 s: eight buckets of 1 s and the one being filled.
    let (r, clock) = setup(1, 30 * SEC);
    r.set_default_policy(ToolPolicy {
        trip: TripPolicy::FailureRate {
            ratio: 0.5,
            min_calls: 4,
            window: 8 * SEC,
        },
        ..ToolPolicy::default()
    });
    clock.advance(500 * MS);
    for _ in 0..2 {
        r.record_failure("t", MS); // at 0.5 s
    }
    clock.advance(7_900 * MS); // 8.4 s: those failures are 7.9 s old, inside the window
    r.record_success("t", MS);
    r.record_failure("t", MS); // 3 of 4 calls in the window failed
    assert_eq!(
        r.breaker_state("t"),
        BreakerState::Open,
        "a window that kept only 7 full buckets forgot the 7.9 s old failures"
    );
}
