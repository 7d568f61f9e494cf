//! `publish_metrics` against the SDK's in-memory exporter, on a manual clock.
//!
//! Collection is driven by `force_flush` (the periodic reader's own interval is an hour), so no
//! test waits for time to pass.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use tool_health::metrics::{
    BREAKER_STATE, CALLS, DURATION, DURATION_BOUNDARIES, OVERFLOW_TOOL_NAME, SCORE, TRANSITIONS,
};
use tool_health::{
    publish_metrics, BreakerState, CallOutcome, CallReport, CircuitBreakerConfig, ManualClock,
    ToolHealthRegistry,
};

type Attrs = BTreeMap<String, String>;

/// One exported data point, flattened.
#[derive(Debug, Clone)]
struct Point {
    metric: String,
    unit: String,
    /// `gauge/f64`, `sum/u64`, `histogram/f64`, ...
    kind: String,
    attrs: Attrs,
    /// Gauge or sum value; a histogram's sum.
    value: f64,
    /// A histogram's count.
    count: u64,
    bounds: Vec<f64>,
}

impl Point {
    fn attr(&self, key: &str) -> Option<&str> {
        self.attrs.get(key).map(String::as_str)
    }
}

struct Harness {
    clock: ManualClock,
    registry: Arc<ToolHealthRegistry>,
    provider: SdkMeterProvider,
    exporter: InMemoryMetricExporter,
}

impl Harness {
    fn new(max_tools: usize) -> Self {
        let clock = ManualClock::new();
        let registry = ToolHealthRegistry::builder()
            .config(CircuitBreakerConfig {
                failure_threshold: 2,
                recovery_duration: Duration::from_secs(10),
                probe_timeout: Duration::from_secs(5),
            })
            .clock(clock.clone())
            .max_tools(max_tools)
            .build();
        Self::publishing(Arc::new(registry), clock)
    }

    /// Publishes `registry` on a fresh meter provider with an in-memory exporter.
    fn publishing(registry: Arc<ToolHealthRegistry>, clock: ManualClock) -> Self {
        let exporter = InMemoryMetricExporter::default();
        let reader = PeriodicReader::builder(exporter.clone())
            .with_interval(Duration::from_secs(3600))
            .build();
        let provider = SdkMeterProvider::builder().with_reader(reader).build();
        publish_metrics(&registry, &provider.meter("tool-health-test"));
        Self {
            clock,
            registry,
            provider,
            exporter,
        }
    }

    /// Collects now and returns every data point of this collection.
    fn collect(&self) -> Vec<Point> {
        self.exporter.reset();
        self.provider.force_flush().expect("flush");
        let batches = self.exporter.get_finished_metrics().expect("metrics");
        let mut points = Vec::new();
        // An empty collection exports nothing at all.
        let Some(last) = batches.last() else {
            return points;
        };
        for scope in last.scope_metrics() {
            for m in scope.metrics() {
                flatten(m.name(), m.unit(), m.data(), &mut points);
            }
        }
        points
    }
}

fn attrs<'a>(kvs: impl Iterator<Item = &'a opentelemetry::KeyValue>) -> Attrs {
    kvs.map(|kv| (kv.key.to_string(), kv.value.to_string()))
        .collect()
}

fn flatten(name: &str, unit: &str, data: &AggregatedMetrics, out: &mut Vec<Point>) {
    fn push<T: Copy + Into<F64Like>>(
        name: &str,
        unit: &str,
        ty: &str,
        data: &MetricData<T>,
        out: &mut Vec<Point>,
    ) {
        let base = |kind: &str, attrs: Attrs, value: f64, count: u64, bounds: Vec<f64>| Point {
            metric: name.to_owned(),
            unit: unit.to_owned(),
            kind: format!("{kind}/{ty}"),
            attrs,
            value,
            count,
            bounds,
        };
        match data {
            MetricData::Gauge(g) => {
                for p in g.data_points() {
                    out.push(base(
                        "gauge",
                        attrs(p.attributes()),
                        p.value().into().0,
                        0,
                        vec![],
                    ));
                }
            }
            MetricData::Sum(s) => {
                assert!(s.is_monotonic(), "{name}: counters are monotonic");
                for p in s.data_points() {
                    out.push(base(
                        "sum",
                        attrs(p.attributes()),
                        p.value().into().0,
                        0,
                        vec![],
                    ));
                }
            }
            MetricData::Histogram(h) => {
                for p in h.data_points() {
                    out.push(base(
                        "histogram",
                        attrs(p.attributes()),
                        p.sum().into().0,
                        p.count(),
                        p.bounds().collect(),
                    ));
                }
            }
            MetricData::ExponentialHistogram(_) => {
                panic!("{name}: unexpected exponential histogram")
            }
        }
    }
    match data {
        AggregatedMetrics::F64(d) => push(name, unit, "f64", d, out),
        AggregatedMetrics::U64(d) => push(name, unit, "u64", d, out),
        AggregatedMetrics::I64(d) => push(name, unit, "i64", d, out),
    }
}

/// A lossless-enough f64 view of the three value types (test values are small).
struct F64Like(f64);
impl From<f64> for F64Like {
    fn from(v: f64) -> Self {
        Self(v)
    }
}
impl From<u64> for F64Like {
    fn from(v: u64) -> Self {
        Self(v as f64)
    }
}
impl From<i64> for F64Like {
    fn from(v: i64) -> Self {
        Self(v as f64)
    }
}

fn of<'a>(points: &'a [Point], metric: &str) -> Vec<&'a Point> {
    points.iter().filter(|p| p.metric == metric).collect()
}

fn find<'a>(points: &'a [Point], metric: &str, want: &[(&str, &str)]) -> &'a Point {
    let found: Vec<_> = of(points, metric)
        .into_iter()
        .filter(|p| want.iter().all(|(k, v)| p.attr(k) == Some(*v)))
        .collect();
    assert_eq!(found.len(), 1, "{metric} {want:?}: {found:#?}");
    found[0]
}

/// The breaker-state series of `tool` that read 1.
fn states_reading_one(points: &[Point], tool: &str) -> Vec<String> {
    of(points, BREAKER_STATE)
        .into_iter()
        .filter(|p| p.attr("gen_ai.tool.name") == Some(tool) && p.value == 1.0)
        .map(|p| p.attr(BREAKER_STATE).unwrap().to_owned())
        .collect()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn exactly_the_five_instruments_with_their_units_and_kinds() {
    let h = Harness::new(100);
    h.registry.record_success("search", ms(20));
    h.registry.record_failure("search", ms(40));

    let points = h.collect();
    let mut seen: BTreeMap<&str, (&str, &str)> = BTreeMap::new();
    for p in &points {
        let prev = seen.insert(&p.metric, (&p.unit, &p.kind));
        assert!(prev.is_none() || prev == Some((&p.unit, &p.kind)), "{p:?}");
    }
    let expected: BTreeMap<&str, (&str, &str)> = [
        (SCORE, ("1", "gauge/f64")),
        (BREAKER_STATE, ("1", "gauge/i64")),
        (CALLS, ("{call}", "sum/u64")),
        (TRANSITIONS, ("{transition}", "sum/u64")),
        (DURATION, ("s", "histogram/f64")),
    ]
    .into_iter()
    .collect();
    assert_eq!(seen, expected);
    assert_eq!(SCORE, "tool_health.score");
    assert_eq!(BREAKER_STATE, "tool_health.breaker.state");
    assert_eq!(CALLS, "tool_health.calls");
    assert_eq!(TRANSITIONS, "tool_health.breaker.transitions");
    assert_eq!(DURATION, "gen_ai.execute_tool.duration");

    for p in &points {
        assert!(
            p.attr("gen_ai.tool.name").is_some(),
            "every series names its tool: {p:?}"
        );
    }
}

#[test]
fn series_attributes_are_exactly_the_documented_ones() {
    let h = Harness::new(100);
    h.registry.record_success("search", ms(20));
    let points = h.collect();
    let keys = |metric: &str| -> Vec<Vec<String>> {
        let mut v: Vec<Vec<String>> = of(&points, metric)
            .into_iter()
            .map(|p| p.attrs.keys().cloned().collect())
            .collect();
        v.dedup();
        v
    };
    assert_eq!(keys(SCORE), [["gen_ai.tool.name"]]);
    assert_eq!(keys(BREAKER_STATE), [["gen_ai.tool.name", BREAKER_STATE]]);
    assert_eq!(keys(CALLS), [["gen_ai.tool.name", "tool_health.outcome"]]);
    assert_eq!(
        keys(TRANSITIONS),
        [[
            "gen_ai.tool.name",
            "tool_health.breaker.from",
            "tool_health.breaker.to"
        ]]
    );
    assert_eq!(keys(DURATION), [["gen_ai.tool.name"]]);
}

#[test]
fn exactly_one_state_series_reads_one_per_tool_through_a_whole_episode() {
    let h = Harness::new(100);
    h.registry.record_success("search", ms(10));
    h.registry.record_success("sql", ms(10));

    let check = |want_sql: BreakerState| {
        let points = h.collect();
        assert_eq!(states_reading_one(&points, "search"), ["closed"]);
        assert_eq!(states_reading_one(&points, "sql"), [want_sql.as_str()]);
        for tool in ["search", "sql"] {
            let series: Vec<_> = of(&points, BREAKER_STATE)
                .into_iter()
                .filter(|p| p.attr("gen_ai.tool.name") == Some(tool))
                .collect();
            assert_eq!(
                series.len(),
                3,
                "closed, open and half_open are always reported"
            );
            assert!(series.iter().all(|p| p.value == 0.0 || p.value == 1.0));
        }
        assert_eq!(h.registry.breaker_state("sql"), want_sql);
    };

    check(BreakerState::Closed);
    h.registry.record_failure("sql", ms(900));
    h.registry.record_failure("sql", ms(900)); // threshold 2: trips
    check(BreakerState::Open);
    h.clock.advance(Duration::from_secs(10));
    assert!(h.registry.allow_request("sql")); // the probe
    check(BreakerState::HalfOpen);
    h.clock.advance(Duration::from_secs(5)); // the probe's lease expires: open, no call needed
    check(BreakerState::Open);
    h.clock.advance(Duration::from_secs(10));
    assert!(h.registry.allow_request("sql"));
    h.registry.record_success("sql", ms(30));
    check(BreakerState::Closed);
}

#[test]
fn counters_and_score_match_the_registry() {
    let h = Harness::new(100);
    h.registry.record_success("sql", ms(10));
    h.registry.record_failure("sql", ms(10));
    h.registry.record_failure("sql", ms(10)); // trips
    for _ in 0..3 {
        assert!(!h.registry.allow_request("sql")); // three refusals
    }
    h.clock.advance(Duration::from_secs(10));
    assert!(h.registry.allow_request("sql")); // open → half_open
    h.registry.record_failure("sql", ms(10)); // half_open → open
    h.clock.advance(Duration::from_secs(10));
    assert!(h.registry.allow_request("sql")); // open → half_open
    h.registry.record_success("sql", ms(10)); // half_open → closed
    h.registry
        .record_report("sql", &CallReport::new(CallOutcome::Ignored, ms(10))); // not in tool_health.calls

    let points = h.collect();
    let snap = h.registry.snapshot("sql").unwrap();
    let calls = |outcome: &str| {
        find(
            &points,
            CALLS,
            &[
                ("gen_ai.tool.name", "sql"),
                ("tool_health.outcome", outcome),
            ],
        )
        .value
    };
    assert_eq!(calls("success"), snap.success_count as f64);
    assert_eq!(calls("failure"), snap.failure_count as f64);
    assert_eq!(calls("refused"), snap.refused_count as f64);
    assert_eq!(
        (calls("success"), calls("failure"), calls("refused")),
        (2.0, 3.0, 3.0)
    );
    assert_eq!(calls("cancelled"), snap.cancelled_count as f64);
    assert_eq!(
        of(&points, CALLS).len(),
        4,
        "success, failure, refused, cancelled: no ignored series"
    );

    let transitions = |from: &str, to: &str| {
        find(
            &points,
            TRANSITIONS,
            &[
                ("gen_ai.tool.name", "sql"),
                ("tool_health.breaker.from", from),
                ("tool_health.breaker.to", to),
            ],
        )
        .value
    };
    assert_eq!(transitions("closed", "open"), 1.0);
    assert_eq!(transitions("open", "half_open"), 2.0);
    assert_eq!(transitions("half_open", "open"), 1.0);
    assert_eq!(transitions("half_open", "closed"), 1.0);
    assert_eq!(
        of(&points, TRANSITIONS).len(),
        4,
        "the four edges, zeros included"
    );

    let score = find(&points, SCORE, &[("gen_ai.tool.name", "sql")]).value;
    assert_eq!(score, snap.score);
}

#[test]
fn unknown_tools_are_not_reported_and_reads_create_nothing() {
    let h = Harness::new(100);
    assert!(h.registry.allow_request("never_recorded"));
    let _ = h.registry.get_health_status("never_recorded");
    let points = h.collect();
    assert!(points.is_empty(), "{points:#?}");
}

#[test]
fn the_duration_histogram_has_the_genai_buckets_and_error_type_on_failures_only() {
    let h = Harness::new(100);
    h.registry.record_success("search", ms(30));
    h.registry.record_success("search", ms(50));
    h.registry.record_report(
        "search",
        &CallReport::new(CallOutcome::Failure, ms(2_000)).error_type("timeout"),
    );
    h.registry.record_failure("search", ms(100)); // no error.type given: _OTHER
    h.registry.record_report(
        "search",
        &CallReport::new(CallOutcome::Ignored, ms(5)).error_type("invalid_arguments"),
    );
    for _ in 0..5 {
        h.registry.record_failure("search", ms(1)); // trips
    }
    assert!(!h.registry.allow_request("search")); // refused: not in the histogram

    let points = h.collect();
    let hist = of(&points, DURATION);
    for p in &hist {
        assert_eq!(p.bounds, DURATION_BOUNDARIES);
    }
    assert_eq!(
        DURATION_BOUNDARIES,
        [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92]
    );

    let ok = hist
        .iter()
        .find(|p| p.attr("error.type").is_none())
        .expect("success series");
    assert_eq!(ok.attrs.len(), 1, "successes carry only the tool name");
    assert_eq!(ok.count, 2);
    assert!((ok.value - 0.08).abs() < 1e-9);

    let timeout = find(&points, DURATION, &[("error.type", "timeout")]);
    assert_eq!((timeout.count, timeout.value), (1, 2.0));
    let other = find(&points, DURATION, &[("error.type", "_OTHER")]);
    assert_eq!(other.count, 6);
    let caller = find(&points, DURATION, &[("error.type", "invalid_arguments")]);
    assert_eq!(caller.count, 1);

    let total: u64 = hist.iter().map(|p| p.count).sum();
    assert_eq!(total, 10, "every call that ran, refusals excluded");
}

#[test]
fn tools_past_the_cap_fold_into_one_overflow_series() {
    let h = Harness::new(2);
    h.registry.record_success("a", ms(10));
    h.registry.record_success("b", ms(10));
    for tool in ["c", "d", "e", "f"] {
        h.registry.record_success(tool, ms(10));
    }
    h.registry.record_failure("g", ms(10));
    assert_eq!(h.registry.tracked_tools(), 2);

    let points = h.collect();
    for p in &points {
        let name = p.attr("gen_ai.tool.name").unwrap();
        assert!(["a", "b", OVERFLOW_TOOL_NAME].contains(&name), "{p:?}");
        assert_eq!(
            name == OVERFLOW_TOOL_NAME,
            p.attr("otel.metric.overflow") == Some("true"),
            "{p:?}"
        );
    }
    let overflow_calls = |outcome: &str| {
        find(
            &points,
            CALLS,
            &[
                ("otel.metric.overflow", "true"),
                ("tool_health.outcome", outcome),
            ],
        )
        .value
    };
    assert_eq!(overflow_calls("success"), 4.0);
    assert_eq!(overflow_calls("failure"), 1.0);
    let overflow_series = |metric: &str| {
        of(&points, metric)
            .into_iter()
            .filter(|p| p.attr("otel.metric.overflow").is_some())
            .count()
    };
    assert_eq!(
        overflow_series(CALLS),
        4,
        "one per outcome (success, failure, refused, cancelled), not one per tool"
    );
    assert_eq!(
        overflow_series(BREAKER_STATE),
        3,
        "the shared overflow breaker's state: one per state, not one per tool"
    );
    assert_eq!(overflow_series(DURATION), 2, "one, plus its failed calls");
    assert_eq!(overflow_series(SCORE), 0, "untracked tools have no score");
    let hist = find(
        &points,
        DURATION,
        &[("otel.metric.overflow", "true"), ("error.type", "_OTHER")],
    );
    assert_eq!(hist.count, 1);
}

#[test]
fn no_overflow_series_while_under_the_cap() {
    let h = Harness::new(2);
    h.registry.record_success("a", ms(10));
    let points = h.collect();
    assert!(points
        .iter()
        .all(|p| p.attr("otel.metric.overflow").is_none()));
}

#[test]
fn callbacks_hold_the_registry_weakly() {
    let h = Harness::new(100);
    h.registry.record_success("search", ms(10));
    assert!(!of(&h.collect(), SCORE).is_empty());

    let Harness {
        registry,
        provider,
        exporter,
        ..
    } = h;
    let weak = Arc::downgrade(&registry);
    drop(registry);
    assert!(
        weak.upgrade().is_none(),
        "the meter provider keeps no strong reference"
    );

    exporter.reset();
    provider
        .force_flush()
        .expect("collecting after the registry is gone is fine");
    let batches = exporter.get_finished_metrics().unwrap();
    let mut observed = Vec::new();
    for b in &batches {
        for s in b.scope_metrics() {
            for m in s.metrics() {
                flatten(m.name(), m.unit(), m.data(), &mut observed);
            }
        }
    }
    for metric in [SCORE, BREAKER_STATE, CALLS, TRANSITIONS] {
        assert!(of(&observed, metric).is_empty(), "{metric}: {observed:#?}");
    }
}

#[test]
fn the_histogram_counts_calls_from_publishing_on_counters_the_whole_history() {
    let clock = ManualClock::new();
    let registry = Arc::new(ToolHealthRegistry::builder().clock(clock.clone()).build());
    registry.record_success("search", ms(10)); // before publishing

    let h = Harness::publishing(registry, clock);
    h.registry.record_success("search", ms(10));
    let points = h.collect();
    let calls = find(&points, CALLS, &[("tool_health.outcome", "success")]);
    assert_eq!(calls.value, 2.0, "counters read the registry's atomics");
    assert_eq!(
        find(&points, DURATION, &[]).count,
        1,
        "the histogram starts at publish"
    );
}

#[test]
fn many_tools_and_collections_stay_consistent() {
    let h = Harness::new(1_000);
    for i in 0..200u64 {
        let tool = format!("tool_{i:03}");
        for j in 0..(i % 7) {
            if (i + j) % 3 == 0 {
                h.registry.record_failure(&tool, ms(j));
            } else {
                h.registry.record_success(&tool, ms(j));
            }
        }
        h.registry.record_success(&tool, ms(1));
    }
    for _ in 0..3 {
        let points = h.collect();
        assert_eq!(of(&points, SCORE).len(), 200);
        assert_eq!(of(&points, BREAKER_STATE).len(), 600);
        assert_eq!(of(&points, CALLS).len(), 800);
        assert_eq!(of(&points, TRANSITIONS).len(), 800);
        let ones = of(&points, BREAKER_STATE)
            .into_iter()
            .filter(|p| p.value == 1.0)
            .count();
        assert_eq!(ones, 200);
        let recorded: f64 = of(&points, CALLS)
            .into_iter()
            .filter(|p| p.attr("tool_health.outcome") != Some("refused"))
            .map(|p| p.value)
            .sum();
        let summary: u64 = h
            .registry
            .health_summary()
            .iter()
            .map(|s| s.total_calls)
            .sum();
        assert_eq!(recorded, summary as f64);
    }
}

#[test]
fn collecting_while_threads_record_is_consistent_and_never_panics() {
    let h = Harness::new(8);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let workers: Vec<_> = (0..2)
        .map(|t| {
            let registry = Arc::clone(&h.registry);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) || i < 2_000 {
                    let tool = format!("tool_{}", (i + t) % 12); // 12 names, cap 8
                    if registry.allow_request(&tool) {
                        if i % 5 == 0 {
                            registry.record_failure(&tool, ms(i % 50));
                        } else {
                            registry.record_success(&tool, ms(i % 50));
                        }
                    }
                    i += 1;
                }
            })
        })
        .collect();
    for _ in 0..20 {
        let points = h.collect();
        let tools: std::collections::BTreeSet<_> = of(&points, BREAKER_STATE)
            .into_iter()
            .filter(|p| p.attr("otel.metric.overflow").is_none())
            .map(|p| p.attr("gen_ai.tool.name").unwrap().to_owned())
            .collect();
        for tool in &tools {
            assert_eq!(states_reading_one(&points, tool).len(), 1, "{tool}");
        }
        assert!(tools.len() <= 8, "the cap, and the overflow breaker apart");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    let points = h.collect();
    let counted: f64 = of(&points, CALLS)
        .into_iter()
        .filter(|p| p.attr("tool_health.outcome") != Some("refused"))
        .map(|p| p.value)
        .sum();
    let hist: u64 = of(&points, DURATION).into_iter().map(|p| p.count).sum();
    assert_eq!(
        counted, hist as f64,
        "every recorded call is in both, overflow included"
    );
}

#[test]
fn shadow_mode_refusals_have_their_own_series_with_enforced_false() {
    let h = Harness::new(100);
    h.registry.record_failure("sql", ms(10));
    h.registry.record_failure("sql", ms(10));
    h.registry.record_failure("sql", ms(10)); // trips
    assert!(!h.registry.allow_request("sql")); // enforced refusal
    h.registry.set_shadow("sql", true);
    assert!(h.registry.allow_request("sql")); // would-be refusals, let through
    assert!(h.registry.allow_request("sql"));
    let points = h.collect();
    let shadow = find(
        &points,
        CALLS,
        &[
            ("gen_ai.tool.name", "sql"),
            ("tool_health.outcome", "refused"),
            ("enforced", "false"),
        ],
    );
    assert_eq!(shadow.value, 2.0);
    let refused: Vec<_> = of(&points, CALLS)
        .into_iter()
        .filter(|p| {
            p.attrs
                .iter()
                .any(|(k, v)| k == "tool_health.outcome" && v == "refused")
        })
        .collect();
    assert_eq!(
        refused.len(),
        2,
        "the enforced series and the shadow series"
    );
    // A tool never shadowed has no such series.
    h.registry.record_success("web", ms(1));
    let points = h.collect();
    assert!(of(&points, CALLS).iter().all(|p| !p
        .attrs
        .iter()
        .any(|(k, v)| k == "gen_ai.tool.name" && v == "web")
        || !p.attrs.iter().any(|(k, _)| k == "enforced")));
}

#[test]
fn a_coordinated_registry_reports_the_fleets_refusals_and_the_open_to_closed_edge() {
    let h = Harness::new(100);
    h.registry.record_success("sql", ms(10));
    // No coordinator: four edges, one refused series.
    let points = h.collect();
    let edges = |points: &[Point]| {
        of(points, TRANSITIONS)
            .iter()
            .filter(|p| p.attr("gen_ai.tool.name") == Some("sql"))
            .count()
    };
    assert_eq!(edges(&points), 4);
    h.registry.coordination().mark_coordinated();
    let points = h.collect();
    assert_eq!(
        edges(&points),
        5,
        "zeros included once a coordinator is attached"
    );
    let fleet = &[
        ("gen_ai.tool.name", "sql"),
        ("tool_health.outcome", "refused"),
        ("tool_health.gate.source", "fleet"),
    ];
    assert_eq!(find(&points, CALLS, fleet).value, 0.0);

    // Another replica tripped: two refusals are the fleet's; one local trip later, one is not.
    let opened = h
        .registry
        .coordination()
        .open_remotely("sql", Duration::from_secs(5), true)
        .unwrap();
    assert!(!h.registry.allow_request("sql"));
    assert!(!h.registry.allow_request("sql"));
    h.registry
        .coordination()
        .close_remotely("sql", opened.generation);
    h.registry.record_failure("sql", ms(1));
    h.registry.record_failure("sql", ms(1)); // trips here (threshold 2)
    assert!(!h.registry.allow_request("sql"));
    let points = h.collect();
    assert_eq!(find(&points, CALLS, fleet).value, 2.0);
    let local: Vec<_> = of(&points, CALLS)
        .into_iter()
        .filter(|p| {
            p.attr("gen_ai.tool.name") == Some("sql")
                && p.attr("tool_health.outcome") == Some("refused")
                && p.attr("tool_health.gate.source").is_none()
        })
        .collect();
    assert_eq!(local.len(), 1);
    assert_eq!(
        local[0].value, 1.0,
        "the plain series holds the local refusals only"
    );
    assert_eq!(h.registry.snapshot("sql").unwrap().refused_count, 3);
    let edge = |from: &str, to: &str| {
        find(
            &points,
            TRANSITIONS,
            &[
                ("gen_ai.tool.name", "sql"),
                ("tool_health.breaker.from", from),
                ("tool_health.breaker.to", to),
            ],
        )
        .value
    };
    assert_eq!(
        edge("closed", "open"),
        2.0,
        "the remote open and the local trip"
    );
    assert_eq!(
        edge("open", "closed"),
        1.0,
        "the remote close of an open breaker"
    );
}

#[test]
fn a_forced_open_tool_reads_open_in_the_state_gauge() {
    let h = Harness::new(100);
    h.registry.record_success("sql", ms(10));
    h.registry.force_open("sql");
    let points = h.collect();
    assert_eq!(states_reading_one(&points, "sql"), ["open"], "was closed");
    h.registry.release_control("sql");
    let points = h.collect();
    assert_eq!(states_reading_one(&points, "sql"), ["closed"]);
}

/// A reader collected on the test's own thread, so a panic in the SDK's aggregation (a counter
/// that went down, with delta temporality) fails the test where it happens.
#[derive(Debug, Clone)]
struct HandReader(Arc<opentelemetry_sdk::metrics::ManualReader>);

impl opentelemetry_sdk::metrics::reader::MetricReader for HandReader {
    fn register_pipeline(&self, pipeline: std::sync::Weak<opentelemetry_sdk::metrics::Pipeline>) {
        self.0.register_pipeline(pipeline)
    }
    fn collect(
        &self,
        rm: &mut opentelemetry_sdk::metrics::data::ResourceMetrics,
    ) -> opentelemetry_sdk::error::OTelSdkResult {
        self.0.collect(rm)
    }
    fn force_flush(&self) -> opentelemetry_sdk::error::OTelSdkResult {
        self.0.force_flush()
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> opentelemetry_sdk::error::OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }
    fn temporality(
        &self,
        kind: opentelemetry_sdk::metrics::InstrumentKind,
    ) -> opentelemetry_sdk::metrics::Temporality {
        self.0.temporality(kind)
    }
}

impl HandReader {
    /// The counter points of one collection: (metric, attributes) → value.
    fn collect_sums(&self) -> BTreeMap<(String, Attrs), u64> {
        use opentelemetry_sdk::metrics::reader::MetricReader as _;
        let mut rm = opentelemetry_sdk::metrics::data::ResourceMetrics::default();
        self.collect(&mut rm).expect("collect");
        let mut out = BTreeMap::new();
        for scope in rm.scope_metrics() {
            for m in scope.metrics() {
                if let AggregatedMetrics::U64(MetricData::Sum(s)) = m.data() {
                    for p in s.data_points() {
                        out.insert((m.name().to_owned(), attrs(p.attributes())), p.value());
                    }
                }
            }
        }
        out
    }
}

#[test]
fn exported_counters_never_go_down_across_reset_eviction_and_recreation() {
    use opentelemetry_sdk::metrics::Temporality;
    let key = |metric: &str, pairs: &[(&str, &str)]| -> (String, Attrs) {
        let mut a: Attrs = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        a.insert("gen_ai.tool.name".into(), "flaky_api".into());
        (metric.to_owned(), a)
    };
    let failures = key(CALLS, &[("tool_health.outcome", "failure")]);
    let successes = key(CALLS, &[("tool_health.outcome", "success")]);
    let cancellations = key(CALLS, &[("tool_health.outcome", "cancelled")]);
    let trips = key(
        TRANSITIONS,
        &[
            ("tool_health.breaker.from", "closed"),
            ("tool_health.breaker.to", "open"),
        ],
    );
    for temporality in [Temporality::Delta, Temporality::Cumulative] {
        let clock = ManualClock::new();
        let registry = Arc::new(
            ToolHealthRegistry::builder()
                .clock(clock.clone())
                .evictable()
                .build(),
        );
        let reader = HandReader(Arc::new(
            opentelemetry_sdk::metrics::ManualReader::builder()
                .with_temporality(temporality)
                .build(),
        ));
        let provider = SdkMeterProvider::builder()
            .with_reader(reader.clone())
            .build();
        publish_metrics(&registry, &provider.meter("monotonic"));
        // The exported totals, added up from deltas (or read directly when cumulative).
        let mut totals: BTreeMap<(String, Attrs), u64> = BTreeMap::new();
        let mut collect = || {
            let points = reader.collect_sums();
            for (k, v) in &points {
                match temporality {
                    Temporality::Delta => *totals.entry(k.clone()).or_default() += v,
                    _ => {
                        let before = totals.insert(k.clone(), *v).unwrap_or(0);
                        assert!(*v >= before, "{temporality:?} {k:?}: {before} → {v}");
                    }
                }
            }
            (totals.clone(), points)
        };

        registry.record_report("flaky_api", &CallReport::new(CallOutcome::Cancelled, ms(5)));
        for _ in 0..3 {
            registry.record_failure("flaky_api", ms(5)); // the third trips
        }
        let (t, _) = collect();
        assert_eq!(
            (t[&failures], t[&trips], t[&cancellations]),
            (3, 1, 1),
            "{temporality:?}"
        );

        // A reset zeroes what snapshots read, not the exported counters.
        registry.reset("flaky_api");
        assert_eq!(registry.snapshot("flaky_api").unwrap().failure_count, 0);
        registry.record_failure("flaky_api", ms(5));
        let (t, _) = collect(); // delta: was a panic in a debug build, 2^64 - 2 in release
        assert_eq!((t[&failures], t[&cancellations]), (4, 1), "{temporality:?}");

        // Evicted and tracked again before the next collection: the series continue.
        registry.record_success("flaky_api", ms(5)); // fresh-equivalent again
        let (t, _) = collect();
        assert_eq!(t[&successes], 1, "{temporality:?}");
        clock.advance(Duration::from_secs(60));
        assert_eq!(registry.evict_idle(Duration::ZERO), 1);
        registry.record_success("flaky_api", ms(5)); // a fresh entry
        let (t, _) = collect();
        assert_eq!(
            (t[&failures], t[&successes], t[&trips]),
            (4, 2, 1),
            "{temporality:?}: continued from the evicted entry"
        );

        // Evicted and absent from a collection: its series ended; a comeback starts anew.
        clock.advance(Duration::from_secs(60));
        assert_eq!(registry.evict_idle(Duration::ZERO), 1);
        let (_, points) = collect();
        assert!(
            !points.contains_key(&failures),
            "{temporality:?}: the series ended"
        );
        registry.record_success("flaky_api", ms(5));
        let points = reader.collect_sums();
        assert_eq!(points[&successes], 1, "{temporality:?}: a new series");
        assert_eq!(points[&failures], 0);
    }
}
