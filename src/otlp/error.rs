//! [`OtlpError`]: why setup or shutdown failed, each message saying what to do.

use std::error::Error;
use std::fmt;
use std::time::Duration;

use opentelemetry_otlp::ExporterBuildError;

#[cfg(doc)]
use super::{init, OtlpBuilder, OtlpGuard};

/// Why [`init`], [`OtlpBuilder::layers`] or [`OtlpGuard::shutdown`] failed. Each message says
/// what to do.
#[derive(Debug)]
#[non_exhaustive]
pub enum OtlpError {
    /// `init` was already called in this process.
    AlreadyInitialized,
    /// A gRPC exporter was asked for outside a tokio runtime.
    NoTokioRuntime,
    /// A protocol variable names a protocol OTLP exporters here do not speak (`http/json`).
    UnsupportedProtocol {
        /// The environment variable.
        variable: &'static str,
        /// Its value.
        value: String,
    },
    /// A protocol variable names a transport whose feature is off in this build.
    TransportNotCompiled {
        /// The environment variable.
        variable: &'static str,
        /// Its value.
        value: String,
        /// The tool-health feature that carries it.
        feature: &'static str,
    },
    /// The SDK could not build an exporter (an invalid endpoint or header, say).
    Exporter {
        /// `traces` or `metrics`.
        signal: &'static str,
        /// The SDK's error.
        error: ExporterBuildError,
    },
    /// Another global `tracing` subscriber is already installed.
    SubscriberAlreadySet,
    /// OTLP over HTTP needs a rustls crypto provider; the built-in pure-Rust one (graviola)
    /// needs AES, PCLMULQDQ, BMI1, ADX, AVX and AVX2 (x86-64) or NEON, AES, PMULL and SHA2
    /// (aarch64), which this CPU (or valgrind) does not offer, and the process installed none.
    TlsProviderUnsupported,
    /// Flushing or shutting down failed (e.g. the collector is unreachable): per signal, the
    /// endpoint and the SDK's error.
    Shutdown(String),
    /// The final flush did not finish within the shutdown timeout.
    ShutdownTimedOut(Duration),
}

impl fmt::Display for OtlpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::AlreadyInitialized => f.write_str(
                "tool_health::otlp::init was already called in this process: keep the first \
                 OtlpGuard (its registry is guard.registry()), or build layers for another \
                 subscriber with tool_health::otlp::builder(..).layers()",
            ),
            Self::NoTokioRuntime => f.write_str(
                "OTLP over gRPC needs a tokio runtime: call init from inside one \
                 (or set OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf)",
            ),
            Self::UnsupportedProtocol { variable, value } => write!(
                f,
                "{variable}={value:?} is not supported: set it to http/protobuf or grpc"
            ),
            Self::TransportNotCompiled {
                variable,
                value,
                feature,
            } => write!(
                f,
                "{variable}={value:?} needs tool-health's `{feature}` feature, which this build \
                 does not have: add it (features = [\"{feature}\"]) or change {variable}"
            ),
            Self::Exporter { signal, error } => write!(
                f,
                "cannot build the OTLP {signal} exporter: {error} (check \
                 OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS and their \
                 per-signal forms)"
            ),
            Self::SubscriberAlreadySet => f.write_str(
                "a global tracing subscriber is already installed, so otlp::init cannot \
                 install its own: add tool-health's layers to yours instead — \
                 `let (layer, guard) = tool_health::otlp::builder(\"my-service\").layers()?;` \
                 then `.with(layer)` where you build your subscriber",
            ),
            Self::TlsProviderUnsupported => f.write_str(
                "this CPU lacks the instructions tool-health's pure-Rust TLS provider (graviola) \
                 needs (x86-64: AES, PCLMULQDQ, BMI1, ADX, AVX, AVX2; valgrind lacks ADX): \
                 install a rustls crypto provider before calling init — e.g. \
                 `rustls::crypto::ring::default_provider().install_default()` with rustls's \
                 `ring` feature — or export over gRPC (feature otlp-grpc, \
                 OTEL_EXPORTER_OTLP_PROTOCOL=grpc)",
            ),
            Self::Shutdown(e) => write!(
                f,
                "OTLP export failed at shutdown ({e}): is the collector running and \
                 reachable? (OTEL_EXPORTER_OTLP_ENDPOINT)"
            ),
            Self::ShutdownTimedOut(t) => write!(
                f,
                "OTLP flush did not finish within {t:?}: the collector is slow or unreachable \
                 (raise otlp::builder(..).shutdown_timeout(..) to wait longer)"
            ),
        }
    }
}

impl Error for OtlpError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Self::Exporter { error, .. } => Some(error),
            _ => None,
        }
    }
}
