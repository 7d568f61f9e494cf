//! Issue 14, finding 6: breaker transitions are logged by default (target `tool_health`), with
//! the tool's name: WARN when a breaker opens (reason, cooldown), INFO when it lets a probe
//! through and when it closes. One switch turns it off. Read through a real `fmt` layer under
//! a real `EnvFilter`, as a service runs it (`RUST_LOG=warn`, `RUST_LOG=info`).

mod capture;

use std::sync::Arc;
use std::time::Duration;

use capture::Captured;
use tool_health::{CircuitBreakerConfig, ManualClock, ToolHealthLayer, ToolHealthRegistry};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{fmt, EnvFilter, Layer};

fn registry(log: bool) -> (ManualClock, Arc<ToolHealthRegistry>) {
    let clock = ManualClock::new();
    let registry = ToolHealthRegistry::builder()
        .config(CircuitBreakerConfig {
            failure_threshold: 2,
            recovery_duration: Duration::from_secs(30),
            probe_timeout: Duration::from_secs(10),
        })
        .clock(clock.clone())
        .log_transitions(log)
        .build();
    (clock, Arc::new(registry))
}

/// Trip, refuse, probe, close: by name and through the layer's spans.
fn episode(clock: &ManualClock, registry: &ToolHealthRegistry) {
    for _ in 0..2 {
        let span = tracing::info_span!(
            "execute_tool",
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = "search",
            error.type = tracing::field::Empty,
        );
        let _in = span.enter();
        assert!(registry.allow_request("search"));
        span.record("error.type", "http_503");
    }
    assert!(!registry.allow_request("search"));
    clock.advance(Duration::from_secs(30));
    assert!(registry.allow_request("search")); // the probe
    registry.record_success("search", Duration::from_millis(5));
}

fn run(filter: &str, log: bool) -> Captured {
    let (clock, registry) = registry(log);
    let out = Captured::default();
    let subscriber = tracing_subscriber::registry()
        .with(ToolHealthLayer::new(registry.clone()))
        .with(
            fmt::layer()
                .with_writer(out.clone())
                .with_ansi(false)
                .with_filter(EnvFilter::new(filter)),
        );
    tracing::subscriber::with_default(subscriber, || episode(&clock, &registry));
    out
}

#[test]
fn an_opening_breaker_is_a_warning_that_names_the_tool_reason_and_cooldown() {
    let out = run("warn", true);
    let opened = out.lines_with("circuit breaker opened");
    assert_eq!(opened.len(), 1, "{}", out.text());
    let line = &opened[0];
    assert!(line.contains("WARN"), "{line}");
    assert!(line.contains("tool_health"), "target: {line}");
    assert!(
        line.contains("tool=\"search\"") || line.contains("tool=search"),
        "{line}"
    );
    assert!(
        line.contains("consecutive failures reached the threshold"),
        "{line}"
    );
    assert!(line.contains("cooldown=30s"), "{line}");
    // Under `warn`, the INFO transitions are filtered like any INFO event.
    assert!(out.lines_with("half-open").is_empty(), "{}", out.text());
}

#[test]
fn probe_and_close_are_info() {
    let out = run("info", true);
    let probe = out.lines_with("circuit breaker half-open");
    let closed = out.lines_with("circuit breaker closed");
    assert_eq!((probe.len(), closed.len()), (1, 1), "{}", out.text());
    assert!(probe[0].contains("INFO") && probe[0].contains("search"));
    assert!(closed[0].contains("INFO") && closed[0].contains("probe succeeded"));
}

#[test]
fn one_switch_turns_the_log_off() {
    let out = run("trace", false);
    assert!(
        out.lines_with("circuit breaker").is_empty(),
        "{}",
        out.text()
    );

    // ... and at run time, on the registry.
    let (clock, registry) = registry(true);
    registry.set_log_transitions(false);
    let out = Captured::default();
    let subscriber = tracing_subscriber::registry()
        .with(ToolHealthLayer::new(registry.clone()))
        .with(fmt::layer().with_writer(out.clone()).with_ansi(false));
    tracing::subscriber::with_default(subscriber, || episode(&clock, &registry));
    assert!(
        out.lines_with("circuit breaker").is_empty(),
        "{}",
        out.text()
    );
}

// The log's own WARN, emitted inside a tool span, never fails that span: a breaker that
// opens while a probe span is open does not count its own log line as the probe's failure.
#[test]
fn the_log_never_fails_a_tool_span() {
    let (clock, registry) = registry(true);
    let subscriber = tracing_subscriber::registry().with(ToolHealthLayer::new(registry.clone()));
    tracing::subscriber::with_default(subscriber, || {
        registry.record_failure("search", Duration::ZERO);
        registry.record_failure("search", Duration::ZERO); // opens: WARN
        clock.advance(Duration::from_secs(30));
        let span = tracing::info_span!("execute_tool", gen_ai.tool.name = "search");
        span.in_scope(|| {
            assert!(registry.allow_request("search")); // INFO, inside the span
                                                       // Another tool opens inside this span: a WARN inside it.
            registry.record_failure("other", Duration::ZERO);
            registry.record_failure("other", Duration::ZERO);
        });
    });
    let s = registry.snapshot("search").unwrap();
    assert_eq!((s.success_count, s.failure_count), (1, 2));
    assert_eq!(
        registry.breaker_state("search"),
        tool_health::BreakerState::Closed
    );
}

// Issue 26: a replica that starts up adopts every open episode in the fleet's store, a dead
// replica's too. Adopting one for a tool this replica has not called refuses none of its calls:
// DEBUG, never a WARN. An opening by another replica that refuses calls made here is a WARN.
#[test]
fn an_adopted_remote_opening_warns_only_when_it_refuses_calls_made_here() {
    let (clock, registry) = registry(true);
    let out = Captured::default();
    let subscriber = tracing_subscriber::registry().with(
        fmt::layer()
            .with_writer(out.clone())
            .with_ansi(false)
            .with_filter(EnvFilter::new("debug")),
    );
    tracing::subscriber::with_default(subscriber, || {
        // Never called here: quiet, whatever the cooldown left.
        let opened =
            registry
                .coordination()
                .open_remotely("payments", Duration::from_millis(1), true);
        assert!(opened.is_some_and(|o| o.open));
        // Called here: the opening refuses this replica's calls.
        assert!(registry.allow_request("search"));
        registry.record_success("search", Duration::from_millis(3));
        registry
            .coordination()
            .open_remotely("search", Duration::from_secs(20), true);
        assert!(!registry.allow_request("search"));
    });
    let _ = clock;
    let payments = out.lines_with("`payments`");
    let adopted = out.lines_with("adopted");
    assert!(payments.is_empty(), "{}", out.text());
    assert_eq!(adopted.len(), 1, "{}", out.text());
    assert!(adopted[0].contains("DEBUG") && adopted[0].contains("payments"));
    let warned = out.lines_with("WARN");
    assert_eq!(warned.len(), 1, "{}", out.text());
    assert!(
        warned[0].contains("`search`") && warned[0].contains("opened by another replica"),
        "{}",
        warned[0]
    );
}
