//! Issue 14, finding 5: a global `EnvFilter` at `warn` (a common production setting) disables
//! the INFO tool spans for every layer, ToolHealthLayer included. That used to record nothing
//! and say nothing. Now the layer says so, once, with the fix — and calls made through the call
//! helper are recorded anyway.
//!
//! One test: it installs the process's global subscriber, as a service does.

mod capture;

use std::sync::Arc;
use std::time::Duration;

use capture::Captured;
use tool_health::{CircuitBreakerConfig, ToolHealthLayer, ToolHealthRegistry};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{fmt, EnvFilter};

#[derive(Debug)]
struct Unavailable;
impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("unavailable")
    }
}

#[tracing::instrument(skip(registry), err, fields(gen_ai.operation.name = "execute_tool", gen_ai.tool.name = "search"))]
fn search(registry: &ToolHealthRegistry) -> Result<(), Unavailable> {
    if !registry.allow_request("search") {
        return Err(Unavailable);
    }
    Err(Unavailable) // the tool is down
}

#[test]
fn a_global_warn_filter_is_reported_once_with_the_fix() {
    let registry = Arc::new(ToolHealthRegistry::with_config(CircuitBreakerConfig {
        failure_threshold: 3,
        ..Default::default()
    }));
    let out = Captured::default();
    tracing_subscriber::registry()
        .with(EnvFilter::new("warn"))
        .with(fmt::layer().with_writer(out.clone()).with_ansi(false))
        .with(ToolHealthLayer::new(registry.clone()))
        .init();

    for _ in 0..6 {
        assert!(search(&registry).is_err());
    }
    // The spans were filtered out: nothing recorded (what a filter does)...
    assert!(registry.health_summary().is_empty());
    // ... but not silently: one warning, with the fix.
    let warned = out.lines_with("tool spans are filtered out");
    assert_eq!(warned.len(), 1, "{}", out.text());
    assert!(warned[0].contains("WARN"), "{}", warned[0]);
    assert!(warned[0].contains("with_filter(EnvFilter::from_default_env())"));

    // The call helper records whatever the filter: the breaker opens after three failures.
    for _ in 0..6 {
        let r = registry
            .call("search")
            .run_blocking(|| Err::<(), _>(Unavailable));
        assert!(r.is_err());
    }
    let s = registry.snapshot("search").unwrap();
    assert_eq!((s.failure_count, s.refused_count), (3, 3));
    // The transition log passes the `warn` filter.
    assert_eq!(
        out.lines_with("circuit breaker opened").len(),
        1,
        "{}",
        out.text()
    );
    assert_eq!(out.lines_with("tool spans are filtered out").len(), 1);
    let _ = Duration::ZERO;
}
