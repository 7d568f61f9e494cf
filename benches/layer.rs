//! Goal 3: the cost of one tool span — new, enter, exit, close, with the GenAI fields — on a bare
//! `tracing_subscriber::Registry`, with our layer, with the tracing-opentelemetry layer (an SDK
//! tracer with no exporter), and with both; and a non-tool span with and without our layer.
//!
//! Goals: what our layer adds ≤ 0.5× what the tracing-opentelemetry layer adds, on the GenAI
//! span and on rig's span shape (eight declared fields, the name and outcome recorded later, two
//! enters); a non-tool span gains ≤ 5 %. Run alone with `cargo bench --bench layer`.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tool_health::{ToolHealthLayer, ToolHealthRegistry};
use tracing::{field, Dispatch};
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

/// One tool call's span the way rig-agent 0.44 writes it: created with two values and six empty
/// fields, entered once per poll, the name and call id recorded when the call starts, the
/// outcome just before it closes (captured from the real crate; `integrations/tests/rig.rs`
/// drives rig itself).
#[inline(never)]
fn rig_span() {
    let span = tracing::info_span!(
        target: "rig_agent::agent::telemetry",
        "execute_tool",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.type = "function",
        gen_ai.tool.name = field::Empty,
        gen_ai.tool.call.id = field::Empty,
        gen_ai.tool.call.arguments = field::Empty,
        gen_ai.tool.call.result = field::Empty,
        gen_ai.tool.call.outcome = field::Empty,
        gen_ai.tool.error.type = field::Empty,
    );
    {
        let entered = span.enter();
        span.record("gen_ai.tool.name", "search");
        span.record("gen_ai.tool.call.id", field::display("call_1"));
        black_box(&entered);
    }
    {
        let entered = span.enter();
        span.record("gen_ai.tool.call.outcome", "success");
        black_box(&entered);
    }
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

    let mut g = c.benchmark_group("rig_span");
    for (name, dispatch) in &setups[1..] {
        tracing::dispatcher::with_default(dispatch, || {
            g.bench_function(*name, |b| b.iter(rig_span));
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
