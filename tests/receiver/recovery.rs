//! Recovery through spans alone, by the spans' own clock: a span that started after the
//! cooldown ended is the probe; records apply by span end time; late failures that ended
//! before the current episode began never restart a cooldown. The registry runs on a
//! `ManualClock`; span timestamps are wall-clock instants relative to now (the receiver maps
//! a span's age on arrival onto the registry's clock).

use std::sync::Arc;
use std::time::Duration;

use tool_health::receiver::{Format, Receiver};
use tool_health::{
    BreakerState, CircuitBreakerConfig, GateDecision, ManualClock, ToolHealthRegistry,
};

use crate::support::{counts, encode, request, tool_span};

const S: fn(u64) -> Duration = Duration::from_secs;
const MS: fn(u64) -> Duration = Duration::from_millis;

fn setup() -> (ManualClock, Arc<ToolHealthRegistry>, Receiver) {
    let clock = ManualClock::new();
    clock.advance(S(1000)); // room before now for spans from the past
    let registry = Arc::new(
        ToolHealthRegistry::builder()
            .config(CircuitBreakerConfig {
                failure_threshold: 3,
                recovery_duration: S(30),
                probe_timeout: S(30),
            })
            .clock(clock.clone())
            .build(),
    );
    let receiver = Receiver::new(registry.clone());
    (clock, registry, receiver)
}

/// Sends `spans` of `tool` (start ago, end ago, failed) in one request.
fn send(receiver: &Receiver, spans: &[(&str, Duration, Duration, bool)]) {
    let spans = spans
        .iter()
        .map(|&(tool, start, end, failed)| tool_span(tool, start, end, failed))
        .collect();
    let ingested = receiver
        .ingest(&encode(&request("my-agent", spans)), Format::Protobuf)
        .unwrap();
    assert_eq!(ingested.rejected, 0, "{}", ingested.message);
}

fn trip(receiver: &Receiver, ended_ago: Duration) {
    let f = |n: u64| {
        (
            "search",
            ended_ago + MS(n * 100 + 50),
            ended_ago + MS(n * 100),
            true,
        )
    };
    send(receiver, &[f(2), f(1), f(0)]);
}

fn retry_after(registry: &ToolHealthRegistry) -> Duration {
    registry.snapshot("search").unwrap().retry_after.unwrap()
}

#[test]
fn a_trip_counts_its_cooldown_from_the_spans_end_not_their_arrival() {
    let (_clock, registry, receiver) = setup();
    // The batch arrives 10 s after the last failure ended (an SDK's export delay and more).
    trip(&receiver, S(10));
    assert_eq!(registry.breaker_state("search"), BreakerState::Open);
    let left = retry_after(&registry);
    assert!(left <= S(20) && left >= S(19), "cooldown left: {left:?}");
    assert!(!registry.is_tool_available("search"));
}

#[test]
fn a_span_that_started_after_the_cooldown_ended_is_the_probe_and_closes_the_breaker() {
    let (clock, registry, receiver) = setup();
    trip(&receiver, S(1));
    assert_eq!(registry.breaker_state("search"), BreakerState::Open);
    clock.advance(S(31));
    // Nobody asked the gate: the agent simply called the tool again, and it worked.
    send(&receiver, &[("search", MS(500), MS(400), false)]);
    assert_eq!(registry.breaker_state("search"), BreakerState::Closed);
    assert!(registry.is_tool_available("search"));
    let snap = registry.snapshot("search").unwrap();
    assert_eq!((snap.success_count, snap.failure_count), (1, 3));
    assert_eq!(snap.consecutive_failures, 0);
}

#[test]
fn a_failing_span_probe_reopens_with_a_fresh_cooldown_from_its_end() {
    let (clock, registry, receiver) = setup();
    trip(&receiver, S(1));
    clock.advance(S(31));
    send(&receiver, &[("search", MS(500), MS(400), true)]);
    assert_eq!(registry.breaker_state("search"), BreakerState::Open);
    let left = retry_after(&registry);
    assert!(left > S(29) && left <= S(30), "fresh cooldown: {left:?}");
}

#[test]
fn a_span_that_started_before_the_cooldown_ended_is_no_probe() {
    let (clock, registry, receiver) = setup();
    trip(&receiver, S(1));
    clock.advance(S(31));
    // It ended after the cooldown but started 5 s ago, before the cooldown's end (29 s after
    // the trip): a call made while the tool was refused, not a probe. A success while open
    // describes the pre-trip world: ignored.
    send(&receiver, &[("search", S(5), MS(100), false)]);
    assert_eq!(registry.breaker_state("search"), BreakerState::Open);
    let snap = registry.snapshot("search").unwrap();
    assert_eq!(snap.success_count, 1, "the stats still count it");
}

#[test]
fn late_failures_that_ended_before_the_trip_never_restart_the_cooldown() {
    let (clock, registry, receiver) = setup();
    trip(&receiver, S(1));
    let before = retry_after(&registry);
    // Another agent's batch arrives late: failures that ended 20 s ago, before the trip.
    send(
        &receiver,
        &[
            ("search", MS(20_100), S(20), true),
            ("search", MS(20_300), MS(20_200), true),
        ],
    );
    assert_eq!(retry_after(&registry), before, "cooldown unchanged");
    assert_eq!(registry.snapshot("search").unwrap().failure_count, 5);
    // A fresh failure (ended after the trip) while open does restart it, from its end.
    clock.advance(S(10));
    send(&receiver, &[("search", MS(200), MS(100), true)]);
    let left = retry_after(&registry);
    assert!(left > S(29) && left <= S(30), "restarted: {left:?}");
}

#[test]
fn late_failures_from_before_the_recovery_never_trip_the_recovered_tool() {
    let (clock, registry, receiver) = setup();
    trip(&receiver, S(1));
    clock.advance(S(31));
    send(&receiver, &[("search", MS(500), MS(400), false)]);
    assert_eq!(registry.breaker_state("search"), BreakerState::Closed);
    // Three failures that ended before the probe closed the breaker arrive now.
    send(
        &receiver,
        &[
            ("search", MS(2_100), S(2), true),
            ("search", MS(1_900), MS(1_800), true),
            ("search", MS(1_700), MS(1_600), true),
        ],
    );
    assert_eq!(registry.breaker_state("search"), BreakerState::Closed);
    let snap = registry.snapshot("search").unwrap();
    assert_eq!(snap.consecutive_failures, 0);
    assert_eq!(snap.failure_count, 6, "counted in the stats");
    // Three that ended after it trip it again.
    send(
        &receiver,
        &[
            ("search", MS(300), MS(250), true),
            ("search", MS(200), MS(150), true),
            ("search", MS(100), MS(50), true),
        ],
    );
    assert_eq!(registry.breaker_state("search"), BreakerState::Open);
}

#[test]
fn a_probe_claimed_through_the_gate_is_resolved_by_the_calls_span() {
    let (clock, registry, receiver) = setup();
    trip(&receiver, S(1));
    clock.advance(S(31));
    // The agent asks the gate (`POST /v1/tools/search/claim`) and is given the probe.
    let GateDecision::Probe(_) = registry.check("search") else {
        panic!("the probe is due");
    };
    assert_eq!(registry.breaker_state("search"), BreakerState::HalfOpen);
    // Another agent's span that started after the cooldown is no second probe: the claim
    // holds it. (It ended before the claim: stale for the half-open episode.)
    // The claimed call's span ends after the claim and arrives: it closes the breaker.
    clock.advance(MS(800));
    send(&receiver, &[("search", MS(600), MS(100), false)]);
    assert_eq!(registry.breaker_state("search"), BreakerState::Closed);
}

#[test]
fn a_claimed_probe_is_not_taken_by_another_span() {
    let (clock, registry, receiver) = setup();
    trip(&receiver, S(1));
    clock.advance(S(31));
    let GateDecision::Probe(_) = registry.check("search") else {
        panic!("the probe is due");
    };
    // A failure span that started and ended before the claim (0.3 s ago; the claim was now
    // on the registry's clock, the span maps to before it): it belongs to the open episode
    // that ended with the grant, so it neither fails the probe nor restarts anything.
    send(&receiver, &[("search", MS(400), MS(300), true)]);
    assert_eq!(registry.breaker_state("search"), BreakerState::HalfOpen);
    // The gate still refuses everyone else while the claim holds the probe.
    assert!(matches!(
        registry.check("search"),
        GateDecision::Refused { .. }
    ));
}

#[test]
fn a_caller_error_span_gives_the_span_probe_back() {
    let (clock, registry, receiver) = setup();
    trip(&receiver, S(1));
    clock.advance(S(31));
    // Pydantic AI's validation failure: no verdict on the tool.
    let mut span = tool_span("search", MS(500), MS(400), true);
    span.attributes
        .push(crate::support::s("error.type", "invalid_arguments"));
    receiver
        .ingest(&encode(&request("my-agent", vec![span])), Format::Protobuf)
        .unwrap();
    // Still open (no verdict), and the next call may probe at once.
    assert!(registry.is_tool_available("search"));
    assert!(matches!(registry.check("search"), GateDecision::Probe(_)));
}

#[test]
fn an_mcp_client_span_inside_an_execute_tool_span_of_the_same_tool_is_one_call() {
    let registry = Arc::new(ToolHealthRegistry::new());
    let receiver = Receiver::new(registry.clone());
    let mcp = |tool: &str, parent: &[u8], failed: bool| {
        let mut span = tool_span(tool, MS(40), MS(20), failed);
        span.name = format!("tools/call {tool}");
        span.kind = 3; // CLIENT
        span.parent_span_id = parent.to_vec();
        span.attributes = vec![
            crate::support::s("mcp.method.name", "tools/call"),
            crate::support::s("gen_ai.tool.name", tool),
        ];
        span
    };
    // The agent's execute_tool span and, inside it, its MCP client's tools/call span (which
    // ends first); then an MCP call with no tool span around it.
    let outer = tool_span("search", MS(50), MS(10), true);
    let inner = mcp("search", &outer.span_id, true);
    let lone = mcp("lookup", &[0; 8], false);
    send_spans(&receiver, vec![inner, outer, lone]);
    assert_eq!(
        counts(&registry)["search"],
        (0, 1, 0),
        "one call, one record"
    );
    assert_eq!(counts(&registry)["lookup"], (1, 0, 0));
    // Across requests too: the inner span in one batch, its parent in the next.
    let outer = tool_span("search", MS(50), MS(10), false);
    let inner = mcp("search", &outer.span_id, false);
    send_spans(&receiver, vec![inner]);
    send_spans(&receiver, vec![outer]);
    assert_eq!(counts(&registry)["search"], (1, 1, 0));
    assert_eq!(receiver.waiting(), 0);
}

fn send_spans(receiver: &Receiver, spans: Vec<opentelemetry_proto::tonic::trace::v1::Span>) {
    let ingested = receiver
        .ingest(&encode(&request("my-agent", spans)), Format::Protobuf)
        .unwrap();
    assert_eq!(ingested.rejected, 0, "{}", ingested.message);
}
