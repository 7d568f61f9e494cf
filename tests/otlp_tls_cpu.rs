//! The pure-Rust TLS provider's CPU requirements: a CPU that lacks them is a clear `OtlpError`
//! at setup, never a panic in the exporter's thread at the first export.
//!
//! valgrind does not emulate ADX, one of the instructions graviola requires, so this test runs
//! itself under valgrind to get such a CPU. In CI (`CI=true`) a missing valgrind is a failure;
//! elsewhere the test says so and passes.
#![cfg(feature = "otlp-http")]

use std::process::Command;

use tool_health::otlp::{self, OtlpError};

/// The part that runs under valgrind: setting up HTTP export must answer the typed error.
#[test]
fn inner_http_setup_on_a_cpu_without_adx() {
    if std::env::var_os("TOOL_HEALTH_INNER_TLS_CPU").is_none() {
        return; // only meaningful under valgrind, started by the test below
    }
    std::env::set_var("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf");
    std::env::set_var("OTEL_EXPORTER_OTLP_ENDPOINT", "https://127.0.0.1:9");
    let result = otlp::builder("tls-cpu").layers::<tracing_subscriber::Registry>();
    match result {
        Err(OtlpError::TlsProviderUnsupported) => println!("TYPED-ERROR-OK"),
        Err(other) => panic!("expected TlsProviderUnsupported, got {other}"),
        Ok(_) => panic!("expected TlsProviderUnsupported, setup succeeded"),
    }
}

#[test]
fn a_cpu_without_the_providers_instructions_is_a_clear_error_not_a_panic() {
    let exe = std::env::current_exe().expect("the test binary");
    let run = Command::new("valgrind")
        .args(["-q", "--error-exitcode=0"])
        .arg(&exe)
        .args([
            "--exact",
            "inner_http_setup_on_a_cpu_without_adx",
            "--nocapture",
        ])
        .env("TOOL_HEALTH_INNER_TLS_CPU", "1")
        .output();
    let out = match run {
        Ok(out) => out,
        Err(e) if std::env::var("CI").as_deref() != Ok("true") => {
            eprintln!("SKIPPED: valgrind is not available ({e}); CI=true makes this a failure");
            return;
        }
        Err(e) => panic!("valgrind is required in CI: {e}"),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("TYPED-ERROR-OK"),
        "status {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    let message = OtlpError::TlsProviderUnsupported.to_string();
    assert!(message.contains("install_default()") && message.contains("otlp-grpc"));
}
