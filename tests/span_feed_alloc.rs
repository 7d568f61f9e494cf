//! The span feed allocates nothing per span after a tool's first call: a tool span read on
//! demand ([`SpanSource`], how the Python package hands in its spans) or handed in whole
//! ([`FinishedSpan`]), succeeding or failing (status, `error.type`, an `exception` event), a
//! model span, a span the caller claimed or has a call open in — none touches the allocator
//! once each shape has been seen.
//!
//! A counting global allocator (`stats_alloc`) counts every allocation of the process, so the
//! whole file is one test: libtest's other threads would otherwise allocate while we measure.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use tool_health::span_feed::{
    AttributeValue, FinishedSpan, SpanEvent, SpanFeed, SpanSource, SpanStatus,
};
use tool_health::{CircuitBreakerConfig, ToolHealthRegistry};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

const ROUNDS: usize = 1_000;

/// Runs `f` once to warm up (first sights, recycled buffers), then `ROUNDS` times counting
/// allocations, and asserts there were none (an attempt that saw any is retried, up to three
/// in all: the harness's other threads may allocate; an allocation of `f` is in every one).
fn assert_no_alloc(what: &str, mut f: impl FnMut()) {
    f();
    let mut seen = Vec::new();
    for _ in 0..3 {
        let region = Region::new(GLOBAL);
        for _ in 0..ROUNDS {
            f();
        }
        let change = region.change();
        if change.allocations == 0 && change.reallocations == 0 {
            return;
        }
        seen.push(change);
    }
    panic!("{what} allocated in every attempt: {seen:?}");
}

/// A span read on demand, its attributes found by key as a host's map would be: how the
/// Python package's spans come in.
struct Lazy<'a> {
    name: &'a str,
    scope: &'a str,
    attributes: &'a [(&'a str, AttributeValue<'a>)],
    status: SpanStatus,
    events: &'a [SpanEvent<'a>],
    start: SystemTime,
    open: Option<&'a str>,
    span_id: u64,
}

impl SpanSource for Lazy<'_> {
    fn name(&self) -> &str {
        self.name
    }
    fn scope(&self) -> &str {
        self.scope
    }
    fn attribute(&self, _index: usize, key: &str) -> Option<AttributeValue<'_>> {
        let (_, v) = self.attributes.iter().find(|(k, _)| *k == key)?;
        Some(match v {
            AttributeValue::Str(s) => AttributeValue::Str(Cow::Borrowed(s)),
            other => other.clone(),
        })
    }
    fn span_id(&self) -> u64 {
        self.span_id
    }
    fn parent_id(&self) -> u64 {
        0
    }
    fn start(&self) -> SystemTime {
        self.start
    }
    fn end(&self) -> SystemTime {
        self.start + Duration::from_millis(40)
    }
    fn status(&self) -> SpanStatus {
        self.status
    }
    fn events(&self, f: &mut dyn FnMut(&SpanEvent<'_>)) {
        for e in self.events {
            f(e);
        }
    }
    fn call_open(&self, tool: &str) -> bool {
        self.open == Some(tool)
    }
}

fn lazy<'a>(
    name: &'a str,
    scope: &'a str,
    attributes: &'a [(&'a str, AttributeValue<'a>)],
) -> Lazy<'a> {
    Lazy {
        name,
        scope,
        attributes,
        status: SpanStatus::Unset,
        events: &[],
        start: SystemTime::now(),
        open: None,
        span_id: 7,
    }
}

#[test]
fn the_span_feed_allocates_nothing_per_span_after_a_tools_first_call() {
    // Never trips: every round fails some calls.
    let registry = Arc::new(
        ToolHealthRegistry::builder()
            .config(CircuitBreakerConfig {
                failure_threshold: 0,
                ..CircuitBreakerConfig::default()
            })
            .build(),
    );
    let feed = SpanFeed::new(registry.clone());
    let tool = [
        (
            "gen_ai.operation.name",
            AttributeValue::from("execute_tool"),
        ),
        ("gen_ai.tool.name", AttributeValue::from("search")),
        (
            "gen_ai.tool.call.arguments",
            AttributeValue::from("{\"q\":1}"),
        ),
        ("logfire.msg", AttributeValue::from("running tool: search")),
    ];
    let model = [
        ("gen_ai.operation.name", AttributeValue::from("chat")),
        ("gen_ai.request.model", AttributeValue::from("gpt-5")),
        ("gen_ai.usage.input_tokens", AttributeValue::from(120_i64)),
    ];
    let fetch = [
        (
            "gen_ai.operation.name",
            AttributeValue::from("execute_tool"),
        ),
        ("gen_ai.tool.name", AttributeValue::from("fetch")),
    ];
    let failed = [
        (
            "gen_ai.operation.name",
            AttributeValue::from("execute_tool"),
        ),
        ("gen_ai.tool.name", AttributeValue::from("fetch")),
        ("error.type", AttributeValue::from("timeout")),
    ];
    let exception = [SpanEvent::new(
        "exception",
        vec![
            ("exception.type".into(), "builtins.ConnectionError".into()),
            ("exception.message".into(), "upstream down".into()),
        ],
    )];
    let openinference = [
        ("openinference.span.kind", AttributeValue::from("TOOL")),
        ("tool.name", AttributeValue::from("weather")),
        ("input.value", AttributeValue::from("{\"city\":\"Paris\"}")),
    ];

    assert_no_alloc("a Pydantic AI tool span, read on demand", || {
        feed.on_end_source(&lazy("execute_tool search", "pydantic-ai", &tool));
    });
    assert_no_alloc("a model span, read on demand", || {
        feed.on_end_source(&lazy("chat gpt-5", "pydantic-ai", &model));
    });
    assert_no_alloc("a failed tool span with an exception event", || {
        let mut span = lazy("execute_tool fetch", "pydantic-ai", &fetch);
        span.status = SpanStatus::Error;
        span.events = &exception;
        feed.on_end_source(&span);
    });
    assert_no_alloc("a GenAI span failing by error.type", || {
        feed.on_end_source(&lazy("execute_tool fetch", "my-agent", &failed));
    });
    assert_no_alloc("an OpenInference tool span", || {
        let mut span = lazy(
            "weather",
            "openinference.instrumentation.openai_agents",
            &openinference,
        );
        span.status = SpanStatus::Ok;
        feed.on_end_source(&span);
    });
    assert_no_alloc("a claimed span, and one ending inside an open call", || {
        feed.claim(7, "search");
        feed.on_end_source(&lazy("execute_tool search", "pydantic-ai", &tool));
        let mut span = lazy("execute_tool search", "pydantic-ai", &tool);
        span.open = Some("search");
        feed.on_end_source(&span);
    });
    let span = lazy("execute_tool search", "pydantic-ai", &tool);
    assert_no_alloc("is_call_of", || {
        assert!(feed.is_call_of(&span, "search"));
    });

    // The same spans handed in whole (built once, outside the count).
    let start = SystemTime::now();
    let mut whole = FinishedSpan::new("execute_tool fetch", start, start);
    whole.scope = "my-agent".into();
    whole.status = SpanStatus::Error;
    whole.attributes = failed
        .iter()
        .map(|(k, v)| (Cow::Borrowed(*k), v.clone()))
        .collect();
    whole.events = exception.to_vec();
    assert_no_alloc("a failed FinishedSpan", || feed.on_end(&whole));

    // Each shape was recorded as it should be (three failing shapes of `fetch`; the claimed
    // and the open call's spans skipped).
    let s = registry.snapshot("search").expect("recorded");
    assert!(s.success_count > ROUNDS as u64 && s.failure_count == 0);
    let f = registry.snapshot("fetch").expect("recorded");
    assert!(f.failure_count > 3 * ROUNDS as u64 && f.success_count == 0);
    let w = registry.snapshot("weather").expect("recorded");
    assert!(w.success_count > ROUNDS as u64);
    assert_eq!(feed.waiting(), 0);
}
