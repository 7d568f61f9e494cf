//! `GET /metrics` (feature `prometheus`): the registry's instruments through the
//! OpenTelemetry SDK's Prometheus exporter (`opentelemetry-prometheus`, the SDK's release),
//! which applies the standard OpenTelemetry → Prometheus translation: dots become
//! underscores, the unit becomes a suffix (`s` → `_seconds`, `1` → `_ratio`; `{call}`-style
//! annotations are dropped), counters get `_total`, and each series carries
//! `otel_scope_name` (and the resource as `target_info`). `docs/status.md` lists the names
//! as Prometheus shows them; the dashboards and alert rules are written against those.

use std::fmt;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use opentelemetry::metrics::{Meter, MeterProvider as _};
use opentelemetry::InstrumentationScope;
use opentelemetry_prometheus::PrometheusExporter;
use opentelemetry_sdk::metrics::{Instrument, SdkMeterProvider, Stream};
use prometheus::{Encoder as _, TextEncoder};

use crate::metrics::{cardinality_limit, publish_metrics, METER_SCOPE};
use crate::registry::ToolHealthRegistry;

use super::Shared;

/// What `GET /metrics` serves: a Prometheus registry the SDK's exporter fills at each scrape,
/// and (from [`publish`](Self::publish)) the meter provider that feeds it. Clones share it.
#[derive(Clone)]
pub struct PrometheusMetrics {
    registry: prometheus::Registry,
    provider: Option<SdkMeterProvider>,
}

impl fmt::Debug for PrometheusMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PrometheusMetrics")
            .field("own_provider", &self.provider.is_some())
            .finish_non_exhaustive()
    }
}

/// The exporter could not be set up.
#[derive(Debug)]
pub struct PrometheusError(String);

impl fmt::Display for PrometheusError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "prometheus exporter: {}", self.0)
    }
}

impl std::error::Error for PrometheusError {}

impl PrometheusMetrics {
    /// A meter provider of its own whose one reader is the Prometheus exporter, with the
    /// registry's instruments ([`publish_metrics`]) published on it under scope
    /// [`METER_SCOPE`], each with room for every tool the registry can track
    /// ([`cardinality_limit`]). Publish more on [`meter_provider`](Self::meter_provider) (the
    /// fleet's instruments, say). The SDK's default resource applies (`OTEL_SERVICE_NAME`,
    /// `OTEL_RESOURCE_ATTRIBUTES`), shown as `target_info`.
    pub fn publish(registry: &Arc<ToolHealthRegistry>) -> Result<Self, PrometheusError> {
        let (exporter, mut metrics) = Self::exporter()?;
        let limit = cardinality_limit(registry.max_tools());
        let provider = SdkMeterProvider::builder()
            .with_reader(exporter)
            .with_view(move |i: &Instrument| {
                (i.scope().name() == METER_SCOPE)
                    .then(|| Stream::builder().with_cardinality_limit(limit).build().ok())
                    .flatten()
            })
            .build();
        let scope = InstrumentationScope::builder(METER_SCOPE)
            .with_version(env!("CARGO_PKG_VERSION"))
            .build();
        publish_metrics(registry, &provider.meter_with_scope(scope));
        metrics.provider = Some(provider);
        Ok(metrics)
    }

    /// For a meter provider you build: the exporter to add as its reader
    /// (`SdkMeterProvider::builder().with_reader(exporter)`), and what serves what it
    /// collects. Publish on that provider yourself ([`publish_metrics`]).
    pub fn exporter() -> Result<(PrometheusExporter, Self), PrometheusError> {
        let registry = prometheus::Registry::new();
        let exporter = opentelemetry_prometheus::exporter()
            .with_registry(registry.clone())
            .build()
            .map_err(|e| PrometheusError(e.to_string()))?;
        Ok((
            exporter,
            Self {
                registry,
                provider: None,
            },
        ))
    }

    /// The meter provider [`publish`](Self::publish) made (`None` after
    /// [`exporter`](Self::exporter): the provider is yours).
    pub fn meter_provider(&self) -> Option<&SdkMeterProvider> {
        self.provider.as_ref()
    }

    /// A meter of [`publish`](Self::publish)'s provider, scope [`METER_SCOPE`], for more
    /// instruments on the same endpoint (`fleet.publish_metrics(&metrics.meter()?)`).
    pub fn meter(&self) -> Option<Meter> {
        self.provider.as_ref().map(|p| p.meter(METER_SCOPE))
    }

    /// The Prometheus text exposition of everything collected now (what `GET /metrics`
    /// serves).
    pub fn encode(&self) -> Result<String, PrometheusError> {
        let families = self.registry.gather();
        let mut out = Vec::with_capacity(64 * 1024);
        TextEncoder::new()
            .encode(&families, &mut out)
            .map_err(|e| PrometheusError(e.to_string()))?;
        String::from_utf8(out).map_err(|e| PrometheusError(e.to_string()))
    }
}

/// `GET /metrics`: a collection on a blocking thread (callbacks read every tool).
pub(super) async fn metrics_route(State(shared): State<Arc<Shared>>) -> Response {
    let Some(metrics) = shared.prometheus.clone() else {
        return StatusCode::NOT_FOUND.into_response();
    };
    match tokio::task::spawn_blocking(move || metrics.encode()).await {
        Ok(Ok(body)) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            )],
            body,
        )
            .into_response(),
        Ok(Err(e)) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "collection failed").into_response(),
    }
}
