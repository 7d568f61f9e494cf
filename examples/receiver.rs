//! A standalone OTLP receiver: tool health from any agent's traces.
//!
//! ```text
//! cargo run --example receiver --features receiver,prometheus -- \
//!     [--listen 127.0.0.1:4318] [--grpc 127.0.0.1:4317] [--forward http://127.0.0.1:4319/v1/traces] \
//!     [--threshold 3] [--recovery-secs 30]
//! ```
//!
//! Serves OTLP/HTTP at `POST /v1/traces`, the advisory gate (`GET /v1/tools/{tool}`,
//! `POST /v1/tools/{tool}/claim`), the status page, `/tools` and `/metrics` (Prometheus); OTLP/gRPC with `--grpc`. Point an agent's `OTEL_EXPORTER_OTLP_ENDPOINT` at
//! `http://127.0.0.1:4318`. Prints `listening <addr>` once bound; stops on Ctrl-C or when
//! stdin closes.

use std::sync::Arc;
use std::time::Duration;

use tool_health::receiver::Receiver;
use tool_health::{CircuitBreakerConfig, ToolHealthRegistry};

fn usage(why: &str) -> ! {
    eprintln!("receiver: {why}");
    eprintln!(
        "usage: receiver [--listen ADDR] [--grpc ADDR] [--forward URL] [--threshold N] [--recovery-secs S]"
    );
    std::process::exit(2)
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut listen = "127.0.0.1:4318".to_owned();
    let mut grpc = None;
    let mut forward = None;
    let mut config = CircuitBreakerConfig::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| usage(&format!("{arg} needs a value")))
        };
        match arg.as_str() {
            "--listen" => listen = value(),
            "--grpc" => grpc = Some(value()),
            "--forward" => forward = Some(value()),
            "--threshold" => {
                config.failure_threshold = value()
                    .parse()
                    .unwrap_or_else(|_| usage("--threshold takes an integer"))
            }
            "--recovery-secs" => {
                config.recovery_duration = Duration::from_secs_f64(
                    value()
                        .parse()
                        .unwrap_or_else(|_| usage("--recovery-secs takes seconds")),
                )
            }
            other => usage(&format!("unknown argument {other}")),
        }
    }
    let registry = Arc::new(ToolHealthRegistry::with_config(config));
    let mut builder = Receiver::builder(registry.clone());
    if let Some(url) = forward {
        builder = builder.forward_to(url);
    }
    let receiver = builder.build().unwrap_or_else(|e| usage(&e.to_string()));

    let metrics = tool_health::status::PrometheusMetrics::publish(&registry)
        .map_err(std::io::Error::other)?;
    let status = tool_health::status::builder(registry.clone())
        .prometheus(metrics)
        .build()
        .map_err(std::io::Error::other)?;

    let http = tokio::net::TcpListener::bind(&listen).await?;
    println!("listening {}", http.local_addr()?);
    let app = receiver
        .router()
        .merge(receiver.gate_router())
        .merge(status.router());
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    if let Some(addr) = grpc {
        let listener = tokio::net::TcpListener::bind(&addr).await?;
        println!("grpc {}", listener.local_addr()?);
        let receiver = receiver.clone();
        let rx = stop_rx.clone();
        tokio::spawn(async move { receiver.serve_grpc(listener, stopped(rx)).await });
    }
    tokio::spawn(async move {
        // Stdin closed (the parent process is gone); Ctrl-C ends the process as usual.
        let _ = tokio::task::spawn_blocking(|| {
            let mut sink = String::new();
            while std::io::stdin().read_line(&mut sink).is_ok_and(|n| n > 0) {
                sink.clear();
            }
        })
        .await;
        let _ = stop_tx.send(true);
    });
    let served = axum::serve(tool_health::web::nodelay(http), app)
        .with_graceful_shutdown(stopped(stop_rx))
        .await;
    receiver.flush();
    served
}
