//! One-call OTLP setup (feature `otlp`): traces and metrics of a [`ToolHealthRegistry`] to any
//! OpenTelemetry collector or backend.
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
//! [`init`] (or [`builder`] for a registry of your own and a shutdown deadline):
//!
//! 1. builds a tracer provider (batch span processor) and a meter provider (periodic reader)
//!    with OTLP exporters configured by the standard environment variables:
//!    `OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_PROTOCOL` (`http/protobuf`, the
//!    default, or `grpc`), `OTEL_EXPORTER_OTLP_HEADERS` (so
//!    `x-honeycomb-team=YOUR_KEY` sends straight to Honeycomb), `OTEL_EXPORTER_OTLP_TIMEOUT`,
//!    their per-signal `*_TRACES_*` / `*_METRICS_*` forms, `OTEL_BSP_*`,
//!    `OTEL_METRIC_EXPORT_INTERVAL`, `OTEL_SERVICE_NAME` (wins over the name you pass) and
//!    `OTEL_RESOURCE_ATTRIBUTES`;
//! 2. installs the global `tracing` subscriber: a registry with the [`ToolHealthLayer`] first
//!    and the tracing-opentelemetry layer after it, so that on span close the health layer
//!    annotates the span (transition events, refusal status) before it is exported; the
//!    OpenTelemetry layer skips the exporters' own transport crates (`h2`, `hyper`, `tonic`,
//!    `tower`, `reqwest`) so exporting never traces itself;
//! 3. calls [`publish_metrics`] on the registry, and installs both providers as the
//!    `opentelemetry::global` ones;
//! 4. returns an [`OtlpGuard`] that flushes and shuts both providers down when dropped (or on
//!    [`OtlpGuard::shutdown`]), giving up after a deadline (default 5 s) so a collector that is
//!    down never hangs the program's exit.
//!
//! It refuses, with an [`OtlpError`] and never a panic: a second call in the same process;
//! a gRPC exporter outside a tokio runtime (tonic spawns its connection task on the current
//! runtime: call `init` from inside one, preferably multi-thread — a current-thread runtime
//! only moves exports along while it is being driven); `http/json` (not compiled in); an
//! exporter the SDK cannot build; a global subscriber already installed by someone else.
//!
//! To compose your own subscriber instead (another layer, a filter), see the wiring in
//! the README ("See it in Jaeger / Honeycomb"): it is a few lines, and this module is those lines.

use std::error::Error;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::InstrumentationScope;
use opentelemetry_otlp::{
    ExporterBuildError, MetricExporter, Protocol, SpanExporter, WithExportConfig,
};
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::Layer as _;

use crate::layer::ToolHealthLayer;
use crate::metrics::publish_metrics;
use crate::registry::ToolHealthRegistry;

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
        let traces = Transport::for_signal("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")?;
        let metrics = Transport::for_signal("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL")?;
        for transport in [traces, metrics] {
            if transport == Transport::Grpc && tokio::runtime::Handle::try_current().is_err() {
                return Err(OtlpError::NoTokioRuntime);
            }
        }

        let span_exporter = match traces {
            Transport::Grpc => SpanExporter::builder().with_tonic().build(),
            Transport::Http => SpanExporter::builder()
                .with_http()
                .with_protocol(Protocol::HttpBinary)
                .build(),
        }
        .map_err(OtlpError::Exporter)?;
        let metric_exporter = match metrics {
            Transport::Grpc => MetricExporter::builder().with_tonic().build(),
            Transport::Http => MetricExporter::builder()
                .with_http()
                .with_protocol(Protocol::HttpBinary)
                .build(),
        }
        .map_err(OtlpError::Exporter)?;

        let mut resource = Resource::builder();
        if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
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
        let meter_provider = SdkMeterProvider::builder()
            .with_resource(resource)
            .with_reader(reader.build())
            .build();

        let registry = self.registry.unwrap_or_default();
        let otel_layer = tracing_opentelemetry::layer()
            .with_tracer(tracer_provider.tracer(self.service_name))
            .with_filter(exporter_noise_filter());
        let subscriber = tracing_subscriber::registry()
            .with(ToolHealthLayer::new(Arc::clone(&registry)))
            .with(otel_layer);
        if tracing::subscriber::set_global_default(subscriber).is_err() {
            // Flush nothing, keep nothing: the providers hold no data yet.
            let _ = tracer_provider.shutdown_with_timeout(Duration::ZERO);
            let _ = meter_provider.shutdown_with_timeout(Duration::ZERO);
            return Err(OtlpError::SubscriberAlreadySet);
        }

        let scope = InstrumentationScope::builder("tool_health")
            .with_version(env!("CARGO_PKG_VERSION"))
            .build();
        publish_metrics(&registry, &meter_provider.meter_with_scope(scope));
        opentelemetry::global::set_tracer_provider(tracer_provider.clone());
        opentelemetry::global::set_meter_provider(meter_provider.clone());

        Ok(OtlpGuard {
            registry,
            tracer_provider,
            meter_provider,
            shutdown_timeout: self.shutdown_timeout,
            shut_down: false,
        })
    }
}

/// Keeps the exporters running; flushes and shuts them down on drop (bounded in time).
///
/// The global subscriber stays installed after the guard is gone (a global default cannot be
/// uninstalled); spans recorded after that still feed the registry but are not exported.
#[must_use = "dropping the guard shuts the exporters down"]
pub struct OtlpGuard {
    registry: Arc<ToolHealthRegistry>,
    tracer_provider: SdkTracerProvider,
    meter_provider: SdkMeterProvider,
    shutdown_timeout: Duration,
    shut_down: bool,
}

impl fmt::Debug for OtlpGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OtlpGuard")
            .field("registry", &self.registry)
            .field("shutdown_timeout", &self.shutdown_timeout)
            .finish_non_exhaustive()
    }
}

impl OtlpGuard {
    /// The registry the installed layer feeds and whose metrics are published.
    pub fn registry(&self) -> &Arc<ToolHealthRegistry> {
        &self.registry
    }

    /// The tracer provider (also installed as the global one).
    pub fn tracer_provider(&self) -> &SdkTracerProvider {
        &self.tracer_provider
    }

    /// The meter provider (also installed as the global one).
    pub fn meter_provider(&self) -> &SdkMeterProvider {
        &self.meter_provider
    }

    /// Flushes and shuts both providers down, waiting at most the shutdown timeout; says what
    /// went wrong (a collector that is down shows up here as an export error or a timeout).
    pub fn shutdown(mut self) -> Result<(), OtlpError> {
        self.shut_down = true;
        shutdown(
            &self.tracer_provider,
            &self.meter_provider,
            self.shutdown_timeout,
        )
    }
}

impl Drop for OtlpGuard {
    fn drop(&mut self) {
        if !self.shut_down {
            let _ = shutdown(
                &self.tracer_provider,
                &self.meter_provider,
                self.shutdown_timeout,
            );
        }
    }
}

/// Shuts both providers down on helper threads, in parallel, and waits until `timeout`: an
/// exporter stuck on a dead connection is abandoned (the process may exit), never waited for.
fn shutdown(
    tracer: &SdkTracerProvider,
    meter: &SdkMeterProvider,
    timeout: Duration,
) -> Result<(), OtlpError> {
    let deadline = Instant::now() + timeout;
    let (tx, rx) = mpsc::channel();
    let (t, m) = (tracer.clone(), meter.clone());
    let mut errors: Vec<String> = [
        detached("traces", tx.clone(), move || {
            t.shutdown_with_timeout(timeout)
        }),
        detached("metrics", tx, move || m.shutdown_with_timeout(timeout)),
    ]
    .into_iter()
    .filter_map(Result::err)
    .collect();
    // Every sender is now owned by a helper: the channel closes when both have reported.
    loop {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(result) => errors.extend(result.err()),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                return Err(OtlpError::ShutdownTimedOut(timeout))
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(OtlpError::Shutdown(errors.join("; ")))
    }
}

/// Runs `f` on a named helper thread that sends its result (prefixed by `signal`) to `tx`.
fn detached(
    signal: &'static str,
    tx: mpsc::Sender<Result<(), String>>,
    f: impl FnOnce() -> opentelemetry_sdk::error::OTelSdkResult + Send + 'static,
) -> Result<(), String> {
    std::thread::Builder::new()
        .name(format!("tool-health-{signal}-shutdown"))
        .spawn(move || {
            let _ = tx.send(f().map_err(|e| format!("{signal}: {e}")));
        })
        .map(drop)
        .map_err(|e| format!("{signal}: cannot spawn the shutdown thread: {e}"))
}

/// The exporters' transport crates are instrumented with `tracing`: never export their spans.
fn exporter_noise_filter() -> Targets {
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
    Grpc,
    Http,
}

impl Transport {
    /// The signal's protocol variable, else `OTEL_EXPORTER_OTLP_PROTOCOL`, else `http/protobuf`
    /// (the specification's default).
    fn for_signal(signal_var: &'static str) -> Result<Self, OtlpError> {
        for var in [signal_var, "OTEL_EXPORTER_OTLP_PROTOCOL"] {
            let Ok(value) = std::env::var(var) else {
                continue;
            };
            return match value.trim() {
                "" => continue,
                "grpc" => Ok(Self::Grpc),
                "http/protobuf" => Ok(Self::Http),
                _ => Err(OtlpError::UnsupportedProtocol {
                    variable: var,
                    value,
                }),
            };
        }
        Ok(Self::Http)
    }
}

/// Why [`init`] or [`OtlpGuard::shutdown`] failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum OtlpError {
    /// `init` was already called in this process.
    AlreadyInitialized,
    /// A gRPC exporter was asked for outside a tokio runtime.
    NoTokioRuntime,
    /// A protocol variable names a protocol this build does not support.
    UnsupportedProtocol {
        /// The environment variable.
        variable: &'static str,
        /// Its value.
        value: String,
    },
    /// The SDK could not build an exporter (an invalid endpoint or header, say).
    Exporter(ExporterBuildError),
    /// Another global `tracing` subscriber is already installed.
    SubscriberAlreadySet,
    /// Flushing or shutting down failed (e.g. the collector is unreachable).
    Shutdown(String),
    /// The final flush did not finish within the shutdown timeout.
    ShutdownTimedOut(Duration),
}

impl fmt::Display for OtlpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::AlreadyInitialized => f.write_str("tool_health::otlp::init was already called"),
            Self::NoTokioRuntime => f.write_str(
                "OTLP over gRPC needs a tokio runtime: call init from inside one \
                 (or set OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf)",
            ),
            Self::UnsupportedProtocol { variable, value } => write!(
                f,
                "{variable}={value:?} is not supported (use grpc or http/protobuf)"
            ),
            Self::Exporter(e) => write!(f, "cannot build the OTLP exporter: {e}"),
            Self::SubscriberAlreadySet => {
                f.write_str("a global tracing subscriber is already installed")
            }
            Self::Shutdown(e) => write!(f, "OTLP flush or shutdown failed: {e}"),
            Self::ShutdownTimedOut(t) => write!(f, "OTLP flush did not finish within {t:?}"),
        }
    }
}

impl Error for OtlpError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Self::Exporter(e) => Some(e),
            _ => None,
        }
    }
}
