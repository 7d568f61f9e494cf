//! Goal 4: gate + record by name as the number of tracked tools grows; a health summary at
//! 10,000 tools; one metrics collection at 10,000 tools against the SDK's own floor for the same
//! series (goal: ≤ 1.0×) and at 500 tools (goal: ≤ 10 ms).

use std::hint::black_box;
use std::sync::{Arc, Weak};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{
    Instrument, InstrumentKind, ManualReader, Pipeline, SdkMeterProvider, Stream, Temporality,
};
use tool_health::ToolHealthRegistry;

mod common;

const DURATION: Duration = Duration::from_micros(1_500);

/// A registry tracking `n` tools named by [`common::tool_name`], each recorded once.
fn registry_with(n: usize) -> Arc<ToolHealthRegistry> {
    let registry = Arc::new(ToolHealthRegistry::builder().max_tools(n).build());
    for i in 0..n {
        registry.record_success(&common::tool_name(i), DURATION);
    }
    assert_eq!(registry.tracked_tools(), n);
    registry
}

fn scale(c: &mut Criterion) {
    let mut g = c.benchmark_group("scale");
    for n in [1, 1_000, 100_000] {
        let registry = registry_with(n);
        let names: Vec<String> = (0..n).map(common::tool_name).collect();

        // One hot tool among `n` tracked: what the map's size costs a call.
        let hot = names[n / 2].as_str();
        g.bench_with_input(BenchmarkId::new("hot_tool", n), &n, |b, _| {
            b.iter(|| {
                let allowed = registry.allow_request(black_box(hot));
                black_box(registry.record_success(black_box(hot), black_box(DURATION)));
                allowed
            })
        });

        // Every call on the next tool, round-robin over all `n`: the working set is the whole
        // registry, so at 100,000 tools most calls miss the caches.
        let mut i = 0;
        g.bench_with_input(BenchmarkId::new("round_robin", n), &n, |b, _| {
            b.iter(|| {
                let tool = names[i].as_str();
                i = if i + 1 == n { 0 } else { i + 1 };
                let allowed = registry.allow_request(tool);
                black_box(registry.record_success(tool, black_box(DURATION)));
                allowed
            })
        });
    }
    g.finish();
}

/// Lets the bench keep a handle on the reader the provider owns.
#[derive(Debug, Clone)]
struct SharedReader(Arc<ManualReader>);

impl MetricReader for SharedReader {
    fn register_pipeline(&self, pipeline: Weak<Pipeline>) {
        self.0.register_pipeline(pipeline)
    }
    fn collect(&self, rm: &mut ResourceMetrics) -> OTelSdkResult {
        self.0.collect(rm)
    }
    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }
    fn temporality(&self, kind: InstrumentKind) -> Temporality {
        self.0.temporality(kind)
    }
}

fn collect(c: &mut Criterion) {
    collect_at(c, "collect_10k", 10_000);
    collect_at(c, "collect_500", 500);
}

/// One collection of `n` tools' series, ours and the SDK's floor for the same series.
fn collect_at(c: &mut Criterion, group: &str, n: usize) {
    let mut g = c.benchmark_group(group);
    g.sample_size(20);
    let registry = registry_with(n);

    if n == 10_000 {
        g.bench_function("health_summary", |b| {
            b.iter(|| black_box(registry.health_summary()))
        });
    }

    let (reader, provider) = collecting_provider();
    let meter = provider.meter("tool-health-bench");
    tool_health::publish_metrics(&registry, &meter);
    let mut rm = ResourceMetrics::default();
    g.bench_function("metrics_collection", |b| {
        b.iter(|| {
            reader.collect(&mut rm).expect("collect");
            black_box(&rm);
        })
    });

    // The floor under it: the same number of series, with the same attribute shapes, observed
    // by callbacks that only replay prebuilt attributes and constants. What the SDK charges per
    // observed point, whoever observes it.
    let (floor_reader, floor_provider) = collecting_provider();
    sdk_floor_instruments(&floor_provider.meter("sdk-floor"), n);
    g.bench_function("sdk_floor_same_series", |b| {
        b.iter(|| {
            floor_reader.collect(&mut rm).expect("collect");
            black_box(&rm);
        })
    });
    g.finish();
}

/// A meter provider read by hand, able to collect every series of 10,000 tools.
///
/// The SDK folds series past 2,000 per instrument into one overflow series by default; a
/// registry of 10,000 tools publishes one series per tool (and more per outcome or state), so
/// the limit is raised to collect them all, as a deployment of this size would.
fn collecting_provider() -> (SharedReader, SdkMeterProvider) {
    let reader = SharedReader(Arc::new(ManualReader::builder().build()));
    let provider = SdkMeterProvider::builder()
        .with_reader(reader.clone())
        .with_view(|_: &Instrument| {
            Stream::builder()
                .with_cardinality_limit(100_000)
                .build()
                .ok()
        })
        .build();
    (reader, provider)
}

/// Observable instruments reporting, for `n` tools, the series `publish_metrics` reports (one
/// score, three states, four outcomes, four edges), from prebuilt attributes.
fn sdk_floor_instruments(meter: &opentelemetry::metrics::Meter, n: usize) {
    use opentelemetry::KeyValue;
    let names: Arc<Vec<KeyValue>> = Arc::new(
        (0..n)
            .map(|i| {
                let name: Arc<str> = common::tool_name(i).into();
                KeyValue::new("gen_ai.tool.name", opentelemetry::StringValue::from(name))
            })
            .collect(),
    );
    let sets = |extra: &[&[(&'static str, &'static str)]]| -> Arc<Vec<Vec<KeyValue>>> {
        let mut all = Vec::new();
        for name in names.iter() {
            for attrs in extra {
                let mut v = vec![name.clone()];
                v.extend(attrs.iter().map(|(k, val)| KeyValue::new(*k, *val)));
                all.push(v);
            }
        }
        Arc::new(all)
    };
    let score = sets(&[&[]]);
    let states = sets(&[
        &[("tool_health.breaker.state", "closed")],
        &[("tool_health.breaker.state", "open")],
        &[("tool_health.breaker.state", "half_open")],
    ]);
    let outcomes = sets(&[
        &[("tool_health.outcome", "success")],
        &[("tool_health.outcome", "failure")],
        &[("tool_health.outcome", "refused")],
        &[("tool_health.outcome", "cancelled")],
    ]);
    let edges = sets(&[
        &[
            ("tool_health.breaker.from", "closed"),
            ("tool_health.breaker.to", "open"),
        ],
        &[
            ("tool_health.breaker.from", "open"),
            ("tool_health.breaker.to", "half_open"),
        ],
        &[
            ("tool_health.breaker.from", "half_open"),
            ("tool_health.breaker.to", "closed"),
        ],
        &[
            ("tool_health.breaker.from", "half_open"),
            ("tool_health.breaker.to", "open"),
        ],
    ]);
    meter
        .f64_observable_gauge("floor.score")
        .with_callback(move |o| score.iter().for_each(|a| o.observe(1.0, a)))
        .build();
    meter
        .i64_observable_gauge("floor.state")
        .with_callback(move |o| states.iter().for_each(|a| o.observe(1, a)))
        .build();
    meter
        .u64_observable_counter("floor.calls")
        .with_callback(move |o| outcomes.iter().for_each(|a| o.observe(1, a)))
        .build();
    meter
        .u64_observable_counter("floor.transitions")
        .with_callback(move |o| edges.iter().for_each(|a| o.observe(0, a)))
        .build();
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = scale, collect
}
criterion_main!(benches);
