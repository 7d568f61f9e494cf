//! Goal 3: the cost of one tool span — new, enter, exit, close, with the GenAI fields — on a bare
//! `tracing_subscriber::Registry`, with our layer, with the tracing-opentelemetry layer (an SDK
//! tracer with no exporter), and with both; and a non-tool span with and without our layer.
//!
//! Goals: what our layer adds ≤ 0.5× what the tracing-opentelemetry layer adds; a non-tool span
//! gains ≤ 5 %. Run alone with `cargo bench --bench layer`.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tool_health::{ToolHealthLayer, ToolHealthRegistry};
use tracing::Dispatch;
use tracing_subscriber::layer::{Identity, SubscriberExt};

mod common;

/// One tool call's span, as an agent framework following the GenAI conventions writes it.
#[inline(never)]
fn tool_span() {
    let span = tracing::info_span!(
        "execute_tool search",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = "search",
    );
    let entered = span.enter();
    black_box(&entered);
    drop(entered);
    drop(span);
}

/// A span that is not a tool call.
#[inline(never)]
fn other_span() {
    let span = tracing::info_span!("db.query", db.system = "postgresql");
    let entered = span.enter();
    black_box(&entered);
    drop(entered);
    drop(span);
}

fn layer(c: &mut Criterion) {
    let registry = Arc::new(ToolHealthRegistry::new());
    let provider = SdkTracerProvider::builder().build(); // no exporter, no processor
    let otel = || tracing_opentelemetry::layer().with_tracer(provider.tracer("bench"));
    let ours = || ToolHealthLayer::new(Arc::clone(&registry));

    // `noop_layer` (a Registry with the no-op `Identity` layer) is the baseline the added
    // costs are measured from: on this machine a bare Registry is slower and noisier than a
    // layered one, which would make every layer look free.
    let setups: [(&str, Dispatch); 5] = [
        ("bare", Dispatch::new(tracing_subscriber::registry())),
        (
            "noop_layer",
            Dispatch::new(tracing_subscriber::registry().with(Identity::new())),
        ),
        (
            "ours",
            Dispatch::new(tracing_subscriber::registry().with(ours())),
        ),
        (
            "otel",
            Dispatch::new(tracing_subscriber::registry().with(otel())),
        ),
        (
            "both",
            Dispatch::new(tracing_subscriber::registry().with(otel()).with(ours())),
        ),
    ];

    let mut g = c.benchmark_group("tool_span");
    for (name, dispatch) in &setups {
        tracing::dispatcher::with_default(dispatch, || {
            g.bench_function(*name, |b| b.iter(tool_span));
        });
    }
    g.finish();

    let mut g = c.benchmark_group("other_span");
    for (name, dispatch) in &setups[..3] {
        tracing::dispatcher::with_default(dispatch, || {
            g.bench_function(*name, |b| b.iter(other_span));
        });
    }
    // The same span while a tool call is in flight (here: an entered tool span around the
    // loop): closing it then needs a span lookup to tell it is not a tool span.
    for (name, dispatch) in &setups[1..3] {
        tracing::dispatcher::with_default(dispatch, || {
            let tool = tracing::info_span!(
                "execute_tool search",
                gen_ai.operation.name = "execute_tool",
                gen_ai.tool.name = "search",
            );
            let _in_tool = tool.enter();
            g.bench_function(format!("{name}_during_tool_call"), |b| b.iter(other_span));
        });
    }
    g.finish();
    let _ = provider.shutdown();
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = layer
}
criterion_main!(benches);
