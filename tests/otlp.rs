//! `tool_health::otlp`: what `init` refuses, and a bounded shutdown with the collector down.
//!
//! One test function: `init` installs process-global state (the subscriber, a once-flag) and
//! reads the environment, so the steps run in order in this binary of their own.
#![cfg(feature = "otlp-http")]

use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tool_health::otlp::{self, OtlpError};
use tool_health::ToolHealthRegistry;

/// A 127.0.0.1 port nobody listens on (bound, then released).
fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[test]
fn init_refuses_clearly_then_exports_and_shuts_down_in_bounded_time() {
    // Edition 2021: set_var is safe; this binary has no other thread reading the environment.
    std::env::remove_var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL");
    std::env::remove_var("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL");
    std::env::remove_var("OTEL_SERVICE_NAME");
    let endpoint = format!("http://127.0.0.1:{}", closed_port());
    std::env::set_var("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint);

    // gRPC outside a tokio runtime: an error value, no panic, nothing installed. Without the
    // `otlp-grpc` feature (the plain `cargo test`), the error names the feature instead.
    std::env::set_var("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc");
    let err = otlp::init("t").unwrap_err();
    if cfg!(feature = "otlp-grpc") {
        assert!(matches!(err, OtlpError::NoTokioRuntime), "{err}");
        assert!(err.to_string().contains("tokio runtime"));
    } else {
        assert!(
            matches!(err, OtlpError::TransportNotCompiled { .. }),
            "{err}"
        );
        assert!(err.to_string().contains("otlp-grpc"), "{err}");
    }

    // A protocol this build does not carry.
    std::env::set_var("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json");
    let err = otlp::init("t").unwrap_err();
    assert!(
        matches!(err, OtlpError::UnsupportedProtocol { .. }),
        "{err}"
    );

    // The failed attempts installed nothing: this one succeeds (HTTP needs no runtime).
    std::env::set_var("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf");
    let registry = Arc::new(ToolHealthRegistry::new());
    let guard = otlp::builder("tool-health-test")
        .registry(Arc::clone(&registry))
        .shutdown_timeout(Duration::from_secs(3))
        .init()
        .expect("init");
    assert!(Arc::ptr_eq(guard.registry(), &registry));

    // Twice: refused, and the first setup is untouched.
    let err = otlp::init("again").unwrap_err();
    assert!(matches!(err, OtlpError::AlreadyInitialized), "{err}");

    // Some telemetry to flush: a span and a published metric.
    tracing::info_span!("work").in_scope(|| {});
    registry.record_success("search", Duration::from_millis(5));

    // The collector is down: shutdown reports it, within the deadline.
    let start = Instant::now();
    let result = guard.shutdown();
    let took = start.elapsed();
    assert!(result.is_err(), "nothing listens on {endpoint}");
    assert!(took < Duration::from_secs(4), "shutdown took {took:?}");
    eprintln!(
        "shutdown with the collector down: {took:?}: {}",
        result.unwrap_err()
    );
}
