//! One-call OTLP setup (features `otlp-http`, `otlp-grpc`; `otlp` = `otlp-http`): traces and
//! metrics of a [`ToolHealthRegistry`] to any OpenTelemetry collector or backend.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Inside a multi-thread tokio runtime when exporting over gRPC.
//! let telemetry = tool_health::otlp::init("my-agent")?;
//! let registry = telemetry.registry().clone();
//! // ... tool spans, `registry.allow_request(tool)` inside them ...
//! telemetry.shutdown()?; // or just drop it: flushes and shuts down, bounded in time
//! # Ok(()) }
//! ```
//!
//! A service that already has a subscriber (a `fmt` layer, an `EnvFilter`) adds the layers
//! instead — [`OtlpBuilder::layers`] installs nothing:
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use tracing_subscriber::layer::SubscriberExt as _;
//! use tracing_subscriber::util::SubscriberInitExt as _;
//! # use tracing_subscriber::Layer as _;
//!
//! let (telemetry_layer, telemetry) = tool_health::otlp::builder("my-agent").layers()?;
//! tracing_subscriber::registry()
//!     // .with(fmt::layer().with_filter(EnvFilter::from_default_env()))  // your log output
//!     .with(telemetry_layer) // ToolHealthLayer, then OpenTelemetry behind a `Targets` filter
//!     .init();
//! let registry = telemetry.registry().clone();
//! # Ok(()) }
//! ```
//!
//! [`init`] (or [`builder`] for a registry of your own and a shutdown deadline):
//!
//! 1. refuses at once, before building anything, when a global `tracing` subscriber is
//!    already installed ([`OtlpError::SubscriberAlreadySet`]: use `layers()` then);
//! 2. builds a tracer provider (batch span processor) and a meter provider (periodic reader)
//!    with OTLP exporters configured by the standard environment variables:
//!    `OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_PROTOCOL` (`http/protobuf`, the
//!    default, or `grpc`), `OTEL_EXPORTER_OTLP_HEADERS` (so
//!    `x-honeycomb-team=YOUR_KEY` sends straight to Honeycomb), `OTEL_EXPORTER_OTLP_TIMEOUT`,
//!    their per-signal `*_TRACES_*` / `*_METRICS_*` forms, `OTEL_BSP_*`,
//!    `OTEL_METRIC_EXPORT_INTERVAL`, `OTEL_SERVICE_NAME` (wins over the name you pass) and
//!    `OTEL_RESOURCE_ATTRIBUTES`. The SDK's cardinality limit of this crate's instruments is
//!    sized from the registry's cap ([`cardinality_limit`]), so every tracked tool's series
//!    fit;
//! 3. installs the global `tracing` subscriber: a registry with the [`ToolHealthLayer`] first
//!    and the tracing-opentelemetry layer after it, so that on span close the health layer
//!    annotates the span (transition events, refusal status) before it is exported; the
//!    OpenTelemetry layer skips the exporters' own transport crates (`h2`, `hyper`, `tonic`,
//!    `tower`, `reqwest`, `opentelemetry*`: [`exporter_noise_filter`]) so exporting never
//!    traces itself;
//! 4. calls [`publish_metrics`] on the registry, and installs both providers as the
//!    `opentelemetry::global` ones;
//! 5. returns an [`OtlpGuard`] that flushes and shuts both providers down when dropped (or on
//!    [`OtlpGuard::shutdown`]), giving up after a deadline (default 5 s) so a collector that is
//!    down never hangs the program's exit.
//!
//! It refuses, with an [`OtlpError`] that says what to do and never a panic: a second call in
//! the same process; a gRPC exporter outside a tokio runtime (tonic spawns its connection task
//! on the current runtime: call `init` from inside one, preferably multi-thread — a
//! current-thread runtime only moves exports along while it is being driven); a protocol this
//! build does not carry (`http/json`, or the transport whose feature is off); an exporter the
//! SDK cannot build; a global subscriber already installed by someone else.
//!
//! # Transports and TLS
//!
//! | feature | transport | stack | TLS |
//! |---|---|---|---|
//! | `otlp-http` (= `otlp`) | `http/protobuf`, the default | reqwest (blocking client) | rustls with a pure-Rust crypto provider (graviola on x86-64 and aarch64): no C toolchain, no cmake; the platform's trust roots, `SSL_CERT_FILE` honoured |
//! | `otlp-grpc` | `grpc` | tonic | plain text, for a collector on the same host or network |
//!
//! With both features, `OTEL_EXPORTER_OTLP_PROTOCOL` picks; with `otlp-grpc` alone, gRPC is
//! the default. A process that installed its own rustls `CryptoProvider` (ring, aws-lc-rs)
//! before `init` keeps it. graviola needs AES, PCLMULQDQ, BMI1, ADX, AVX and AVX2 on x86-64
//! (NEON, AES, PMULL, SHA2 on aarch64); valgrind does not emulate ADX. Setup checks first and
//! answers [`OtlpError::TlsProviderUnsupported`] on such a CPU — installing your own provider
//! is the fix — rather than letting the provider panic at the first export
//! (`tests/otlp_tls_cpu.rs` runs the setup under valgrind).

mod error;
mod guard;
#[cfg(feature = "otlp-http")]
mod tls;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::InstrumentationScope;
use opentelemetry_otlp::{MetricExporter, SpanExporter};
#[cfg(feature = "otlp-http")]
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::metrics::{Instrument, PeriodicReader, SdkMeterProvider, Stream};
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing_core::Subscriber;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use crate::environment;
use crate::layer::ToolHealthLayer;
use crate::metrics::publish_metrics;
use crate::registry::ToolHealthRegistry;

pub use error::OtlpError;
pub use guard::OtlpGuard;

pub use crate::metrics::{cardinality_limit, METER_SCOPE, SERIES_PER_TOOL};
const SCOPE: &str = METER_SCOPE;

/// The SDK view that gives the instruments of meter [`METER_SCOPE`] the
/// [`cardinality_limit`] of a registry tracking up to `max_tools` tools. [`init`] and
/// [`OtlpBuilder::layers`] add it; add it yourself when you build the meter provider by hand
/// (`SdkMeterProvider::builder().with_view(cardinality_view(registry.max_tools()))`) and
/// publish on `meter_provider.meter(METER_SCOPE)`.
pub fn cardinality_view(
    max_tools: usize,
) -> impl Fn(&Instrument) -> Option<Stream> + Send + Sync + 'static {
    let limit = cardinality_limit(max_tools);
    move |i: &Instrument| {
        (i.scope().name() == SCOPE)
            .then(|| Stream::builder().with_cardinality_limit(limit).build().ok())
            .flatten()
    }
}

/// How long [`OtlpGuard`] waits for the final flush by default.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// Set by the first successful (or in-flight) [`OtlpBuilder::init`] of the process.
static INITIALIZED: AtomicBool = AtomicBool::new(false);

/// Sets up OTLP export for a new [`ToolHealthRegistry`] with the default config: see the
/// [module docs](self). `service_name` is the `service.name` unless `OTEL_SERVICE_NAME` is set.
pub fn init(service_name: &str) -> Result<OtlpGuard, OtlpError> {
    builder(service_name).init()
}

/// A builder for [`init`] with a registry of your own and a shutdown deadline.
pub fn builder(service_name: &str) -> OtlpBuilder {
    OtlpBuilder {
        service_name: service_name.to_owned(),
        registry: None,
        shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
        metric_export_interval: None,
    }
}

/// Configures [`init`]: see [`builder`].
#[derive(Debug)]
#[must_use]
pub struct OtlpBuilder {
    service_name: String,
    registry: Option<Arc<ToolHealthRegistry>>,
    shutdown_timeout: Duration,
    metric_export_interval: Option<Duration>,
}

impl OtlpBuilder {
    /// Feeds and publishes this registry (default: a new one with the default config).
    pub fn registry(mut self, registry: Arc<ToolHealthRegistry>) -> Self {
        self.registry = Some(registry);
        self
    }

    /// How long dropping the guard may wait for the final flush (default
    /// [`DEFAULT_SHUTDOWN_TIMEOUT`]).
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// How often metrics are exported (default: `OTEL_METRIC_EXPORT_INTERVAL`, else 60 s).
    /// Set here, it wins over the environment.
    pub fn metric_export_interval(mut self, interval: Duration) -> Self {
        self.metric_export_interval = Some(interval);
        self
    }

    /// Builds the providers and the layers, publishes the metrics, and returns the layers with
    /// the guard — installing nothing: no subscriber, no `opentelemetry::global` provider.
    /// For a service with a subscriber of its own: add the layer to it.
    ///
    /// The layer is the [`ToolHealthLayer`] followed by the tracing-opentelemetry layer
    /// filtered by [`exporter_noise_filter`] (the documented order: the health layer writes its
    /// annotations before the span is exported). Put your own filters on your own layers
    /// (`fmt::layer().with_filter(EnvFilter::from_default_env())`), not around this one: a
    /// global filter that drops INFO spans drops the tool spans too.
    pub fn layers<S>(self) -> Result<(impl Layer<S> + Send + Sync + 'static, OtlpGuard), OtlpError>
    where
        S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
    {
        let built = self.build()?;
        let layer = ToolHealthLayer::new(Arc::clone(&built.guard.registry)).and_then(
            tracing_opentelemetry::layer()
                .with_tracer(built.guard.tracer_provider.tracer(built.service_name))
                .with_filter(exporter_noise_filter()),
        );
        Ok((layer, built.guard))
    }

    /// Builds the providers, installs the subscriber and publishes the metrics.
    pub fn init(self) -> Result<OtlpGuard, OtlpError> {
        if INITIALIZED.swap(true, Ordering::AcqRel) {
            return Err(OtlpError::AlreadyInitialized);
        }
        self.try_init().inspect_err(|_| {
            // Nothing was installed: a later call may try again.
            INITIALIZED.store(false, Ordering::Release);
        })
    }

    fn try_init(self) -> Result<OtlpGuard, OtlpError> {
        // Before building anything: providers built for nothing log misleading errors when
        // they are shut down again.
        if tracing::dispatcher::has_been_set() {
            return Err(OtlpError::SubscriberAlreadySet);
        }
        let (layer, guard) = self.layers::<tracing_subscriber::Registry>()?;
        if tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))
            .is_err()
        {
            // Someone installed one in between: nothing was exported yet.
            let mut guard = guard;
            let _ = guard.tracer_provider.shutdown_with_timeout(Duration::ZERO);
            let _ = guard.meter_provider.shutdown_with_timeout(Duration::ZERO);
            guard.shut_down = true; // no second flush on drop
            return Err(OtlpError::SubscriberAlreadySet);
        }
        opentelemetry::global::set_tracer_provider(guard.tracer_provider.clone());
        opentelemetry::global::set_meter_provider(guard.meter_provider.clone());
        Ok(guard)
    }

    /// The providers, with the metrics published.
    fn build(self) -> Result<Built, OtlpError> {
        let traces = Transport::for_signal("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")?;
        let metrics = Transport::for_signal("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL")?;
        #[cfg(feature = "otlp-grpc")]
        for transport in [traces, metrics] {
            if transport == Transport::Grpc && tokio::runtime::Handle::try_current().is_err() {
                return Err(OtlpError::NoTokioRuntime);
            }
        }
        #[cfg(feature = "otlp-http")]
        if traces == Transport::Http || metrics == Transport::Http {
            tls::install_crypto_provider()?;
        }

        let span_exporter = match traces {
            #[cfg(feature = "otlp-grpc")]
            Transport::Grpc => SpanExporter::builder().with_tonic().build(),
            #[cfg(feature = "otlp-http")]
            Transport::Http => SpanExporter::builder()
                .with_http()
                .with_protocol(Protocol::HttpBinary)
                .build(),
        }
        .map_err(|e| OtlpError::Exporter {
            signal: "traces",
            error: e,
        })?;
        let metric_exporter = match metrics {
            #[cfg(feature = "otlp-grpc")]
            Transport::Grpc => MetricExporter::builder().with_tonic().build(),
            #[cfg(feature = "otlp-http")]
            Transport::Http => MetricExporter::builder()
                .with_http()
                .with_protocol(Protocol::HttpBinary)
                .build(),
        }
        .map_err(|e| OtlpError::Exporter {
            signal: "metrics",
            error: e,
        })?;

        // The name given here is the default: a non-empty `OTEL_SERVICE_NAME`, or a
        // `service.name` in `OTEL_RESOURCE_ATTRIBUTES`, wins (the SDK's detectors read both).
        // An empty variable counts as unset (`crate::environment`).
        let mut resource = Resource::builder();
        if !service_name_from_env() {
            resource = resource.with_service_name(self.service_name.clone());
        }
        let resource = resource.build();
        let tracer_provider = SdkTracerProvider::builder()
            .with_resource(resource.clone())
            .with_batch_exporter(span_exporter)
            .build();
        let mut reader = PeriodicReader::builder(metric_exporter);
        if let Some(interval) = self.metric_export_interval {
            reader = reader.with_interval(interval);
        }
        let registry = self.registry.unwrap_or_default();
        let meter_provider = SdkMeterProvider::builder()
            .with_resource(resource)
            .with_reader(reader.build())
            .with_view(cardinality_view(registry.max_tools()))
            .build();

        let scope = InstrumentationScope::builder(SCOPE)
            .with_version(env!("CARGO_PKG_VERSION"))
            .build();
        publish_metrics(&registry, &meter_provider.meter_with_scope(scope));
        Ok(Built {
            service_name: self.service_name,
            guard: OtlpGuard {
                registry,
                tracer_provider,
                meter_provider,
                shutdown_timeout: self.shutdown_timeout,
                endpoints: Endpoints::from_env(traces, metrics),
                shut_down: false,
            },
        })
    }
}

/// What [`OtlpBuilder::build`] made.
struct Built {
    service_name: String,
    guard: OtlpGuard,
}

/// Where each signal goes, for error messages.
#[derive(Debug, Clone)]
struct Endpoints {
    traces: String,
    metrics: String,
}

impl Endpoints {
    fn from_env(traces: Transport, metrics: Transport) -> Self {
        Self {
            traces: endpoint("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", traces, "/v1/traces"),
            metrics: endpoint(
                "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
                metrics,
                "/v1/metrics",
            ),
        }
    }

    fn of(&self, signal: &str) -> &str {
        if signal == "traces" {
            &self.traces
        } else {
            &self.metrics
        }
    }
}

/// The endpoint a signal is exported to, as the SDK resolves it from the environment.
#[cfg_attr(not(feature = "otlp-http"), allow(unused_variables))]
/// Whether the environment names the service: a non-empty `OTEL_SERVICE_NAME`, or a
/// non-empty `service.name` in `OTEL_RESOURCE_ATTRIBUTES`.
fn service_name_from_env() -> bool {
    environment::var("OTEL_SERVICE_NAME").is_some()
        || environment::var("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|attributes| {
            attributes.split(',').any(|pair| {
                pair.split_once('=')
                    .is_some_and(|(k, v)| k.trim() == "service.name" && !v.trim().is_empty())
            })
        })
}

fn endpoint(signal_var: &str, transport: Transport, path: &str) -> String {
    let set = |var: &str| environment::var(var).map(|v| v.trim().to_owned());
    if let Some(url) = set(signal_var) {
        return url;
    }
    let (default, path) = match transport {
        #[cfg(feature = "otlp-grpc")]
        Transport::Grpc => ("http://localhost:4317", ""),
        #[cfg(feature = "otlp-http")]
        Transport::Http => ("http://localhost:4318", path),
    };
    let base = set("OTEL_EXPORTER_OTLP_ENDPOINT").unwrap_or_else(|| default.to_owned());
    format!("{}{path}", base.trim_end_matches('/'))
}

/// The filter on the OpenTelemetry layer: everything except the exporters' own transport
/// crates (`h2`, `hyper`, `hyper_util`, `tonic`, `tower`, `reqwest`, `opentelemetry*`), which
/// are instrumented with `tracing` — exporting must never trace itself. Use it on your own
/// OpenTelemetry layer when you wire one by hand.
pub fn exporter_noise_filter() -> Targets {
    Targets::new()
        .with_default(LevelFilter::TRACE)
        .with_target("h2", LevelFilter::OFF)
        .with_target("hyper", LevelFilter::OFF)
        .with_target("hyper_util", LevelFilter::OFF)
        .with_target("tonic", LevelFilter::OFF)
        .with_target("tower", LevelFilter::OFF)
        .with_target("reqwest", LevelFilter::OFF)
        .with_target("opentelemetry", LevelFilter::OFF)
        .with_target("opentelemetry_sdk", LevelFilter::OFF)
        .with_target("opentelemetry_otlp", LevelFilter::OFF)
}

/// The OTLP transport of one signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transport {
    #[cfg(feature = "otlp-grpc")]
    Grpc,
    #[cfg(feature = "otlp-http")]
    Http,
}

impl Transport {
    /// The default: `http/protobuf` (the specification's), or gRPC when it is the only
    /// transport compiled in.
    const DEFAULT: Self = {
        #[cfg(feature = "otlp-http")]
        {
            Self::Http
        }
        #[cfg(not(feature = "otlp-http"))]
        {
            Self::Grpc
        }
    };

    /// The signal's protocol variable, else `OTEL_EXPORTER_OTLP_PROTOCOL`, else the default.
    fn for_signal(signal_var: &'static str) -> Result<Self, OtlpError> {
        for var in [signal_var, "OTEL_EXPORTER_OTLP_PROTOCOL"] {
            let Some(value) = environment::var(var) else {
                continue;
            };
            return match value.trim() {
                #[cfg(feature = "otlp-grpc")]
                "grpc" => Ok(Self::Grpc),
                #[cfg(not(feature = "otlp-grpc"))]
                "grpc" => Err(OtlpError::TransportNotCompiled {
                    variable: var,
                    value,
                    feature: "otlp-grpc",
                }),
                #[cfg(feature = "otlp-http")]
                "http/protobuf" => Ok(Self::Http),
                #[cfg(not(feature = "otlp-http"))]
                "http/protobuf" => Err(OtlpError::TransportNotCompiled {
                    variable: var,
                    value,
                    feature: "otlp-http",
                }),
                _ => Err(OtlpError::UnsupportedProtocol {
                    variable: var,
                    value,
                }),
            };
        }
        Ok(Self::DEFAULT)
    }
}
