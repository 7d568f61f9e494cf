//! The layer's side of operator controls: retry hints read from tool spans, shadow mode on spans.

mod layer_support;

use std::time::Duration;

use layer_support::{attr, registry, Harness, Stack, ALL_STACKS, OTEL_STACKS};
use tool_health::layer::{ToolHealthLayer, GATE_DECISION_ATTRIBUTE, GATE_ENFORCED_ATTRIBUTE};
use tool_health::GateDecision;

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
fn shadow_mode_lets_the_call_through_and_says_so_on_the_span() {
    for stack in OTEL_STACKS {
        let (_clock, registry) = registry(1);
        registry.record_failure("search", Duration::ZERO); // open
        registry.set_shadow("search", true);
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| {
            let span = tracing::info_span!(
                "execute_tool search",
                gen_ai.operation.name = "execute_tool",
                gen_ai.tool.name = "search",
            );
            let _g = span.enter();
            assert!(registry.allow_request("search"));
        });
        let span = h.span("execute_tool search");
        assert_eq!(
            attr(&span, GATE_DECISION_ATTRIBUTE).as_deref(),
            Some("allowed")
        );
        assert_eq!(
            attr(&span, GATE_ENFORCED_ATTRIBUTE).as_deref(),
            Some("false")
        );
        let s = registry.snapshot("search").unwrap();
        assert_eq!(
            (s.shadow_refused_count, s.refused_count),
            (1, 0),
            "{stack:?}"
        );
    }
}
