//! `SpanFeed` (feature `span-feed`): finished spans handed in from outside the crate, in the
//! neutral shape, read as the span processor and the receiver read theirs — and the two ways
//! a caller that records a call itself keeps it one record (claims, open calls).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tool_health::span_feed::{
    AttributeValue, FinishedSpan, SpanEvent, SpanFeed, SpanSource, SpanStatus,
};
use tool_health::{BreakerState, CircuitBreakerConfig, ManualClock, ToolHealthRegistry};

fn registry(failure_threshold: u32) -> (ManualClock, Arc<ToolHealthRegistry>) {
    let clock = ManualClock::new();
    let registry = ToolHealthRegistry::builder()
        .config(CircuitBreakerConfig {
            failure_threshold,
            recovery_duration: Duration::from_secs(30),
            probe_timeout: Duration::from_secs(10),
        })
        .clock(clock.clone())
        .build();
    (clock, Arc::new(registry))
}

/// (successes, failures, ignored, refused).
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

/// A GenAI execute-tool span of `tool` lasting `took`, with `attrs` more.
fn execute_tool(tool: &str, took: Duration, attrs: &[(&str, &str)]) -> FinishedSpan<'static> {
    let start = SystemTime::now();
    let mut span = FinishedSpan::new(format!("execute_tool {tool}"), start, start + took);
    span.scope = "my-agent".into();
    span.span_id = 1;
    span.attributes = vec![
        ("gen_ai.operation.name".into(), "execute_tool".into()),
        (
            "gen_ai.tool.name".into(),
            AttributeValue::from(tool.to_owned()),
        ),
    ];
    for (k, v) in attrs {
        span.attributes.push((
            (*k).to_owned().into(),
            AttributeValue::from((*v).to_owned()),
        ));
    }
    span
}

#[test]
fn finished_spans_feed_the_breakers_as_the_span_processor_reads_them() {
    let (_clock, registry) = registry(3);
    let feed = SpanFeed::new(registry.clone());
    for _ in 0..3 {
        let mut span = execute_tool(
            "search",
            Duration::from_millis(120),
            &[("error.type", "timeout")],
        );
        span.status = SpanStatus::Error;
        feed.on_end(&span);
    }
    feed.on_end(&execute_tool("calc", Duration::from_millis(40), &[]));
    // An `exception` event fails a call, a caller error is ignored, a refusal is nothing.
    let mut raised = execute_tool("fetch", Duration::ZERO, &[]);
    raised.events.push(SpanEvent::new(
        "exception",
        vec![("exception.type".into(), "ConnectionError".into())],
    ));
    feed.on_end(&raised);
    feed.on_end(&execute_tool(
        "fetch",
        Duration::ZERO,
        &[("error.type", "invalid_arguments")],
    ));
    let mut refused = execute_tool(
        "fetch",
        Duration::ZERO,
        &[("error.type", "circuit_breaker_open")],
    );
    refused.status = SpanStatus::Error;
    feed.on_end(&refused);
    // Not tool calls: another GenAI operation, a span with no tool name.
    let now = SystemTime::now();
    let mut chat = FinishedSpan::new("chat", now, now);
    chat.attributes = vec![
        ("gen_ai.operation.name".into(), "chat".into()),
        ("gen_ai.tool.name".into(), "search".into()),
    ];
    feed.on_end(&chat);
    feed.on_end(&FinishedSpan::new("plain", now, now));

    assert_eq!(calls(&registry, "search"), (0, 3, 0, 0));
    assert_eq!(registry.breaker_state("search"), BreakerState::Open);
    let calc = registry.snapshot("calc").unwrap();
    assert_eq!(
        (calc.success_count, calc.avg_duration),
        (1, Duration::from_millis(40))
    );
    assert_eq!(calls(&registry, "fetch"), (0, 1, 1, 0));
    assert_eq!(registry.tracked_tools(), 3);
}

#[test]
fn borrowed_strings_typed_values_and_openinference_tool_spans() {
    // An OpenInference TOOL span (LangChain's bridge), its strings borrowed from the caller.
    let (_clock, registry) = registry(0);
    let feed = SpanFeed::builder(registry.clone())
        .caller_errors(["ValidationError"])
        .build();
    let kind = String::from("TOOL");
    let name = String::from("weather");
    let now = SystemTime::now();
    let mut span = FinishedSpan::new(name.as_str(), now, now + Duration::from_millis(5));
    span.scope = "openinference.instrumentation.langchain".into();
    span.attributes = vec![
        (
            "openinference.span.kind".into(),
            AttributeValue::from(kind.as_str()),
        ),
        ("tool.name".into(), AttributeValue::from(name.as_str())),
        ("llm.token_count.total".into(), AttributeValue::I64(3)),
        ("x.ratio".into(), AttributeValue::F64(0.5)),
        ("x.flag".into(), AttributeValue::Bool(true)),
        ("x.list".into(), AttributeValue::Other("('a', 'b')".into())),
    ];
    span.status = SpanStatus::Ok;
    feed.on_end(&span);
    span.status = SpanStatus::Error;
    span.events = vec![SpanEvent::new(
        "exception",
        vec![("exception.type".into(), "ValidationError".into())],
    )];
    feed.on_end(&span);
    assert_eq!(calls(&registry, "weather"), (1, 0, 1, 0));
}

#[test]
fn a_span_marked_with_the_gate_decision_is_the_callers_record() {
    let (_clock, registry) = registry(0);
    let feed = SpanFeed::new(registry.clone());
    let span = execute_tool(
        "search",
        Duration::ZERO,
        &[("tool_health.gate.decision", "allowed")],
    );
    feed.on_end(&span);
    assert_eq!(
        registry.snapshot("search"),
        None,
        "skipped: nothing tracked"
    );
}

#[test]
fn a_claimed_span_is_skipped_when_it_ends_as_a_tool_span_of_the_claimed_tool() {
    let (_clock, registry) = registry(0);
    let feed = SpanFeed::new(registry.clone());
    // The caller gated `search` inside span 1 and records it itself.
    feed.claim(1, "search");
    registry.record_success("search", Duration::from_millis(3));
    feed.on_end(&execute_tool("search", Duration::ZERO, &[]));
    assert_eq!(
        calls(&registry, "search"),
        (1, 0, 0, 0),
        "one call, one record"
    );
    // The claim ended with its span: the next span with that id is recorded.
    feed.on_end(&execute_tool("search", Duration::ZERO, &[]));
    assert_eq!(calls(&registry, "search"), (2, 0, 0, 0));
    // A claim for another tool (the span is `calc`'s: a tool calling another through the
    // helper) never skips the span's own record.
    feed.claim(1, "search");
    feed.on_end(&execute_tool("calc", Duration::ZERO, &[]));
    assert_eq!(calls(&registry, "calc"), (1, 0, 0, 0));
    // Claims of several tools inside one span: the span's own tool is skipped, whichever it is.
    feed.claim(1, "calc");
    feed.claim(1, "search");
    feed.claim(1, "search");
    feed.on_end(&execute_tool("search", Duration::ZERO, &[]));
    assert_eq!(calls(&registry, "search"), (2, 0, 0, 0));
    // A claim on a span that is no tool call skips nothing, and ends with it.
    let now = SystemTime::now();
    let mut agent = FinishedSpan::new("invoke_agent", now, now);
    agent.span_id = 9;
    feed.claim(9, "search");
    feed.on_end(&agent);
    feed.on_end(&execute_tool("search", Duration::ZERO, &[]));
    assert_eq!(calls(&registry, "search"), (3, 0, 0, 0));
}

#[test]
fn a_tool_name_known_only_at_the_end_is_matched_at_the_end() {
    // The OpenAI Agents SDK through OpenInference: `tool.name` is set when the span ends, so
    // the caller claims the span by id, and the tool is read then.
    let (_clock, registry) = registry(0);
    let feed = SpanFeed::new(registry.clone());
    let now = SystemTime::now();
    let mut span = FinishedSpan::new("weather", now, now);
    span.span_id = 5;
    assert_eq!(feed.tool_name(&span), None, "not yet a tool span at entry");
    feed.claim(5, "weather");
    span.attributes = vec![
        ("openinference.span.kind".into(), "TOOL".into()),
        ("tool.name".into(), "weather".into()),
    ];
    span.status = SpanStatus::Error;
    feed.on_end(&span);
    assert_eq!(
        registry.snapshot("weather"),
        None,
        "skipped: the caller's record"
    );
}

#[test]
fn a_tool_span_ending_inside_an_open_call_of_its_tool_is_part_of_it() {
    // LangChain through OpenInference: the tool's span starts and ends inside the caller's
    // call, never current when it gated.
    let (_clock, registry) = registry(0);
    let feed = SpanFeed::new(registry.clone());
    let mut failed = execute_tool("search", Duration::ZERO, &[]);
    failed.status = SpanStatus::Error;
    feed.on_end_within(&failed, &["search"]);
    assert_eq!(registry.snapshot("search"), None);
    // Another tool's span inside the call is its own call.
    feed.on_end_within(&execute_tool("calc", Duration::ZERO, &[]), &["search"]);
    assert_eq!(calls(&registry, "calc"), (1, 0, 0, 0));
}

#[test]
fn an_mcp_span_nested_in_a_claimed_span_is_skipped_with_it() {
    let (_clock, registry) = registry(0);
    let feed = SpanFeed::new(registry.clone());
    feed.claim(1, "search");
    let now = SystemTime::now();
    let mut mcp = FinishedSpan::new("tools/call search", now, now);
    mcp.span_id = 2;
    mcp.parent_id = 1;
    mcp.attributes = vec![
        ("mcp.method.name".into(), "tools/call".into()),
        ("gen_ai.tool.name".into(), "search".into()),
    ];
    mcp.status = SpanStatus::Error;
    feed.on_end(&mcp);
    feed.on_end(&execute_tool("search", Duration::ZERO, &[]));
    feed.flush();
    assert_eq!(feed.waiting(), 0);
    assert_eq!(registry.snapshot("search"), None);
}

#[test]
fn claims_are_bounded() {
    let (_clock, registry) = registry(0);
    let feed = SpanFeed::new(registry.clone());
    for id in 1..=(tool_health::span_feed::MAX_CLAIMS as u64 + 1) {
        feed.claim(id, "search");
    }
    // The oldest claim (span 1) went first; the newest is kept.
    feed.on_end(&execute_tool("search", Duration::ZERO, &[]));
    let mut last = execute_tool("search", Duration::ZERO, &[]);
    last.span_id = tool_health::span_feed::MAX_CLAIMS as u64 + 1;
    feed.on_end(&last);
    assert_eq!(calls(&registry, "search"), (1, 0, 0, 0));
}

#[test]
fn a_refusal_raised_as_an_exception_is_no_failure() {
    // The Python helper's `Refused`, recorded by the SDK's `record_exception`.
    let (_clock, registry) = registry(0);
    let feed = SpanFeed::new(registry.clone());
    let mut span = execute_tool("search", Duration::ZERO, &[]);
    span.status = SpanStatus::Error;
    let message = format!(
        "{} (tool `search`, retry in 30.0 s)",
        tool_health::REFUSAL_MESSAGE
    );
    span.events.push(SpanEvent::new(
        "exception",
        vec![
            ("exception.type".into(), "Refused".into()),
            ("exception.message".into(), AttributeValue::from(message)),
        ],
    ));
    feed.on_end(&span);
    assert_eq!(registry.snapshot("search"), None);
}

#[test]
fn tool_name_reads_a_live_span_without_recording() {
    let (_clock, registry) = registry(0);
    let feed = SpanFeed::new(registry.clone());
    let span = execute_tool("search", Duration::ZERO, &[]);
    assert_eq!(feed.tool_name(&span).as_deref(), Some("search"));
    let now = SystemTime::now();
    assert_eq!(
        feed.tool_name(&FinishedSpan::new("invoke_agent", now, now)),
        None
    );
    // A name longer than the registry takes is no tool's.
    let long = "x".repeat(300);
    assert_eq!(
        feed.tool_name(&execute_tool(&long, Duration::ZERO, &[])),
        None
    );
    assert_eq!(registry.tracked_tools(), 0);
}

#[test]
fn hostile_names_are_refused_and_counted_never_tracked() {
    let (_clock, registry) = registry(1);
    let feed = SpanFeed::new(registry.clone());
    let long = "n".repeat(257);
    let mut span = execute_tool(&long, Duration::ZERO, &[]);
    span.status = SpanStatus::Error;
    feed.on_end(&span);
    assert_eq!(registry.tracked_tools(), 0);
    assert_eq!(registry.overflow().rejected_names, 1);
}

#[test]
fn an_mcp_client_span_inside_the_execute_tool_span_is_one_call() {
    let (_clock, registry) = registry(0);
    let feed = SpanFeed::new(registry.clone());
    let now = SystemTime::now();
    let mut mcp = FinishedSpan::new("tools/call search", now, now);
    mcp.span_id = 2;
    mcp.parent_id = 1;
    mcp.attributes = vec![
        ("mcp.method.name".into(), "tools/call".into()),
        ("gen_ai.tool.name".into(), "search".into()),
    ];
    feed.on_end(&mcp);
    assert_eq!(feed.waiting(), 1, "waits for its parent");
    feed.on_end(&execute_tool("search", Duration::ZERO, &[]));
    assert_eq!(feed.waiting(), 0);
    assert_eq!(calls(&registry, "search"), (1, 0, 0, 0));
}

#[test]
fn a_panicking_classifier_never_crosses_on_end() {
    struct Panics;
    impl tool_health::layer::OutcomeClassifier for Panics {
        fn classify(
            &self,
            _: &tool_health::layer::SpanFacts<'_>,
        ) -> Option<tool_health::CallOutcome> {
            panic!("a classifier's bug")
        }
    }
    let (_clock, registry) = registry(0);
    let feed = SpanFeed::builder(registry.clone())
        .classifier(Panics)
        .build();
    feed.on_end(&execute_tool("search", Duration::ZERO, &[]));
    // The core falls back to the default rules.
    assert_eq!(calls(&registry, "search"), (1, 0, 0, 0));
}

#[test]
fn spans_alone_bring_a_tool_back_after_its_cooldown() {
    // No gate anywhere: three failing spans trip the breaker; after the cooldown the agent
    // calls the tool again, and that call's span (it started after the cooldown) is the probe.
    let (clock, registry) = registry(3);
    let feed = SpanFeed::new(registry.clone());
    for _ in 0..3 {
        let mut span = execute_tool("search", Duration::from_millis(5), &[]);
        span.status = SpanStatus::Error;
        feed.on_end(&span);
    }
    assert_eq!(registry.breaker_state("search"), BreakerState::Open);
    // (The next span starts 5 ms before it is handed in: past the cooldown's end.)
    clock.advance(Duration::from_secs(31));
    // A span that ran before the cooldown ended is no probe: a stale success changes nothing.
    let mut old = execute_tool("search", Duration::from_millis(5), &[]);
    old.start -= Duration::from_secs(20);
    old.end -= Duration::from_secs(20);
    feed.on_end(&old);
    assert_eq!(registry.breaker_state("search"), BreakerState::Open);
    feed.on_end(&execute_tool("search", Duration::from_millis(5), &[]));
    assert_eq!(registry.breaker_state("search"), BreakerState::Closed);
    assert_eq!(calls(&registry, "search"), (2, 3, 0, 0));
}

/// A span read on demand (how the Python package hands in its spans), counting the attribute
/// lookups asked of it.
struct Lazy<'a> {
    name: &'a str,
    scope: &'a str,
    attributes: &'a [(&'a str, AttributeValue<'a>)],
    lookups: std::cell::Cell<usize>,
}

impl SpanSource for Lazy<'_> {
    fn name(&self) -> &str {
        self.name
    }
    fn scope(&self) -> &str {
        self.scope
    }
    fn attribute(&self, _index: usize, key: &str) -> Option<AttributeValue<'_>> {
        self.lookups.set(self.lookups.get() + 1);
        let (_, v) = self.attributes.iter().find(|(k, _)| *k == key)?;
        Some(v.clone())
    }
    fn span_id(&self) -> u64 {
        3
    }
    fn parent_id(&self) -> u64 {
        0
    }
    fn start(&self) -> SystemTime {
        SystemTime::now()
    }
    fn end(&self) -> SystemTime {
        SystemTime::now()
    }
    fn status(&self) -> SpanStatus {
        SpanStatus::Unset
    }
    fn events(&self, _f: &mut dyn FnMut(&SpanEvent<'_>)) {}
}

#[test]
fn a_span_read_on_demand_is_asked_only_what_decides() {
    let (_clock, registry) = registry(3);
    let feed = SpanFeed::new(registry.clone());
    let keys: Vec<&str> = feed.attribute_keys().collect();
    assert!(keys.contains(&"gen_ai.tool.name") && keys.contains(&"tool.name"));
    // A model span with many attributes: the feed asks for the target keys and the keys that
    // match a convention, never for the span's own.
    let many: Vec<(String, AttributeValue<'static>)> = (0..50)
        .map(|i| {
            (
                format!("llm.input_messages.{i}.message.content"),
                "x".into(),
            )
        })
        .collect();
    let attributes: Vec<(&str, AttributeValue<'_>)> =
        many.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    let span = Lazy {
        name: "chat gpt-5",
        scope: "openinference.instrumentation.openai",
        attributes: &attributes,
        lookups: Default::default(),
    };
    feed.on_end_source(&span);
    assert!(
        span.lookups.get() <= 12,
        "asked {} keys",
        span.lookups.get()
    );
    assert_eq!(registry.tracked_tools(), 0);
    // A tool span: read as a FinishedSpan would be.
    let tool = [
        (
            "gen_ai.operation.name",
            AttributeValue::from("execute_tool"),
        ),
        ("gen_ai.tool.name", AttributeValue::from("search")),
        ("error.type", AttributeValue::from("timeout")),
    ];
    let span = Lazy {
        name: "execute_tool search",
        scope: "pydantic-ai",
        attributes: &tool,
        lookups: Default::default(),
    };
    assert!(feed.is_call_of(&span, "search") && !feed.is_call_of(&span, "fetch"));
    feed.on_end_source(&span);
    assert_eq!(calls(&registry, "search"), (0, 1, 0, 0));
}
