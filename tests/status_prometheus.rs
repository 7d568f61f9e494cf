//! `GET /metrics` on the status router (feature `prometheus`): the registry's instruments
//! through the OpenTelemetry SDK's Prometheus exporter, under the names Prometheus shows
//! (the dashboards and alert rules in `dashboards/` are written against these; a real
//! Prometheus scrapes them in `scripts/status_e2e.sh`).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use http_body_util::BodyExt as _;
use tool_health::status::{self, PrometheusMetrics};
use tool_health::{CircuitBreakerConfig, ToolHealthRegistry};
use tower::ServiceExt as _;

/// The value of the one sample whose line starts with `series` (name and labels, in the
/// exporter's order) — panics with the exposition when there is none.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<f64> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.split(['{', ' ']).next() == Some(name))
        .filter(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one sample of {name} {labels:?} in:\n{text}"
    );
    found[0]
}

#[tokio::test]
async fn metrics_carry_the_standard_prometheus_names() {
    let registry = Arc::new(ToolHealthRegistry::with_config(CircuitBreakerConfig {
        failure_threshold: 2,
        ..CircuitBreakerConfig::default()
    }));
    let metrics = PrometheusMetrics::publish(&registry).unwrap();
    let app = status::builder(Arc::clone(&registry))
        .prometheus(metrics.clone())
        .build()
        .unwrap()
        .router();
    for _ in 0..3 {
        registry.record_success("search", Duration::from_millis(30));
    }
    registry.record_failure("sql", Duration::from_millis(500));
    registry.record_failure("sql", Duration::from_millis(500));
    assert!(!registry.allow_request("sql"));

    let res = app
        .oneshot(Request::get("/metrics").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert!(res.headers()[header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .starts_with("text/plain; version=0.0.4"));
    let text =
        String::from_utf8(res.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap();

    let tool = |t| ("gen_ai_tool_name", t);
    assert_eq!(
        sample(
            &text,
            "tool_health_calls_total",
            &[tool("search"), ("tool_health_outcome", "success")]
        ),
        3.0
    );
    assert_eq!(
        sample(
            &text,
            "tool_health_calls_total",
            &[tool("sql"), ("tool_health_outcome", "failure")]
        ),
        2.0
    );
    assert_eq!(
        sample(
            &text,
            "tool_health_calls_total",
            &[tool("sql"), ("tool_health_outcome", "refused")]
        ),
        1.0
    );
    assert_eq!(
        sample(&text, "tool_health_score_ratio", &[tool("search")]),
        1.0
    );
    assert_eq!(
        sample(
            &text,
            "tool_health_breaker_state_ratio",
            &[tool("sql"), ("tool_health_breaker_state", "open")]
        ),
        1.0
    );
    assert_eq!(
        sample(
            &text,
            "tool_health_breaker_state_ratio",
            &[tool("sql"), ("tool_health_breaker_state", "closed")]
        ),
        0.0
    );
    assert_eq!(
        sample(
            &text,
            "tool_health_breaker_transitions_total",
            &[
                tool("sql"),
                ("tool_health_breaker_from", "closed"),
                ("tool_health_breaker_to", "open")
            ]
        ),
        1.0
    );
    assert_eq!(
        sample(
            &text,
            "gen_ai_execute_tool_duration_seconds_count",
            &[tool("search")]
        ),
        3.0
    );
    assert_eq!(
        sample(
            &text,
            "gen_ai_execute_tool_duration_seconds_bucket",
            &[tool("search"), ("le", "0.04")]
        ),
        3.0
    );
    assert_eq!(
        sample(
            &text,
            "gen_ai_execute_tool_duration_seconds_bucket",
            &[tool("sql"), ("le", "0.32"), ("error_type", "_OTHER")]
        ),
        0.0
    );
    assert!(text.contains("otel_scope_name=\"tool_health\""), "{text}");
    assert!(text.contains("# TYPE tool_health_calls_total counter"));
    assert!(text.contains("# TYPE gen_ai_execute_tool_duration_seconds histogram"));
    // `encode` serves the same names (what the route returns).
    assert!(metrics
        .encode()
        .unwrap()
        .contains("tool_health_score_ratio{"));
    assert!(metrics.meter_provider().is_some());
}
