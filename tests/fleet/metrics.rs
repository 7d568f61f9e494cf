//! The fleet's own metrics, collected by the OpenTelemetry SDK: `tool_health.fleet.connected`
//! follows the store going away and coming back, `tool_health.fleet.sync_lag` grows while it is
//! away, `tool_health.fleet.applied` counts other replicas' decisions applied here, and
//! `tool_health.fleet.rejected` the values from the store not trusted.

use std::time::Duration;

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use tool_health::fleet::{
    ACTION_ATTRIBUTE, APPLIED, CONNECTED, REJECTED, SYNC_LAG, VALUE_ATTRIBUTE,
};
use tool_health::{BreakerState, ManualClock};

use crate::support::*;

const TOOL: &str = "search";

/// One collection: every point as (metric, its attribute as `key=value` or "", value).
fn collect(
    provider: &SdkMeterProvider,
    exporter: &InMemoryMetricExporter,
) -> Vec<(String, String, f64)> {
    exporter.reset();
    provider.force_flush().expect("a collection");
    let mut out = Vec::new();
    for rm in exporter
        .get_finished_metrics()
        .expect("the exported metrics")
    {
        for scope in rm.scope_metrics() {
            for m in scope.metrics() {
                let attr = |attrs: &mut dyn Iterator<Item = &opentelemetry::KeyValue>| {
                    attrs
                        .next()
                        .map(|kv| format!("{}={}", kv.key, kv.value))
                        .unwrap_or_default()
                };
                match m.data() {
                    AggregatedMetrics::I64(MetricData::Gauge(g)) => {
                        for p in g.data_points() {
                            out.push((
                                m.name().to_owned(),
                                attr(&mut p.attributes()),
                                p.value() as f64,
                            ));
                        }
                    }
                    AggregatedMetrics::F64(MetricData::Gauge(g)) => {
                        for p in g.data_points() {
                            out.push((m.name().to_owned(), attr(&mut p.attributes()), p.value()));
                        }
                    }
                    AggregatedMetrics::U64(MetricData::Sum(s)) => {
                        for p in s.data_points() {
                            out.push((
                                m.name().to_owned(),
                                attr(&mut p.attributes()),
                                p.value() as f64,
                            ));
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    out
}

fn value(points: &[(String, String, f64)], metric: &str, attr: &str) -> Option<f64> {
    points
        .iter()
        .find(|(m, a, _)| m == metric && a == attr)
        .map(|(_, _, v)| *v)
}

pub(crate) async fn the_fleets_metrics_follow_the_store_and_count_what_was_applied_and_rejected() {
    let Some(mut server) = Server::start() else {
        return;
    };
    let url = server.url();
    let prefix = prefix("metrics");
    let all = replicas_with(2, config(3, 30 * SEC, 10 * SEC), |_| {
        (
            builder(&url, &prefix).poll_interval(Duration::from_millis(100)),
            ManualClock::new(),
        )
    })
    .await;
    let (tripper, watched) = (&all[0], &all[1]);
    let exporter = InMemoryMetricExporter::default();
    let provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(exporter.clone()).build())
        .build();
    watched.fleet.publish_metrics(&provider.meter("fleet"));

    let points = collect(&provider, &exporter);
    assert_eq!(value(&points, CONNECTED, ""), Some(1.0), "{points:?}");
    let lag = value(&points, SYNC_LAG, "").expect("a sync lag once synced");
    assert!(lag < 5.0, "{lag}");
    let action = |a: &str| format!("{ACTION_ATTRIBUTE}={a}");
    for a in ["open", "close", "hold", "control"] {
        assert_eq!(
            value(&points, APPLIED, &action(a)),
            Some(0.0),
            "{a}: {points:?}"
        );
    }

    // Another replica trips: the open applied here is counted.
    assert_eq!(tripper.fail(TOOL, 3), 3);
    wait_all(
        &all,
        TOOL,
        BreakerState::Open,
        "the trip to spread",
        5 * SEC,
    )
    .await;
    let points = collect(&provider, &exporter);
    assert_eq!(
        value(&points, APPLIED, &action("open")),
        Some(1.0),
        "{points:?}"
    );

    // A message no replica wrote: rejected, by kind.
    let raw_client = raw(&url).await;
    let channel = format!("{prefix}:v1:ev");
    let _: i64 = cmd(
        &raw_client,
        "PUBLISH",
        vec![channel.as_str(), "v9 nonsense"],
    )
    .await;
    wait_for("the bad message to be counted", 5 * SEC, || {
        watched.fleet.status().rejected >= 1
    })
    .await;
    let points = collect(&provider, &exporter);
    assert!(
        value(&points, REJECTED, &format!("{VALUE_ATTRIBUTE}=message")).is_some_and(|v| v >= 1.0),
        "{points:?}"
    );

    // The store goes away: connected drops to 0 and the lag grows.
    drop(raw_client);
    server.kill9();
    wait_for("the store's loss to be noticed", 10 * SEC, || {
        !watched.fleet.status().connected
    })
    .await;
    let points = collect(&provider, &exporter);
    assert_eq!(value(&points, CONNECTED, ""), Some(0.0), "{points:?}");
    let lag_away = value(&points, SYNC_LAG, "").expect("the lag while away");
    let start = std::time::Instant::now();
    wait_for("the lag to grow", 10 * SEC, || {
        start.elapsed() > Duration::from_millis(300)
    })
    .await;
    let points = collect(&provider, &exporter);
    let later = value(&points, SYNC_LAG, "").expect("the lag while away");
    assert!(
        later > lag_away,
        "the lag grows while the store is away: {lag_away} → {later}"
    );

    // Back (empty): connected again, the lag small again.
    server.restart();
    wait_for("the store's return to be noticed", 10 * SEC, || {
        watched.fleet.status().connected
    })
    .await;
    let points = collect(&provider, &exporter);
    assert_eq!(value(&points, CONNECTED, ""), Some(1.0), "{points:?}");
    assert!(
        value(&points, SYNC_LAG, "").is_some_and(|l| l < later),
        "{points:?}"
    );
}
