//! [`OtlpGuard`]: keeps the exporters running, flushes and shuts them down, bounded in time.

use std::fmt;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::SdkTracerProvider;

use crate::registry::ToolHealthRegistry;

use super::{Endpoints, OtlpError};

/// Keeps the exporters running; flushes and shuts them down on drop (bounded in time).
///
/// The global subscriber stays installed after the guard is gone (a global default cannot be
/// uninstalled); spans recorded after that still feed the registry but are not exported.
#[must_use = "dropping the guard shuts the exporters down"]
pub struct OtlpGuard {
    pub(super) registry: Arc<ToolHealthRegistry>,
    pub(super) tracer_provider: SdkTracerProvider,
    pub(super) meter_provider: SdkMeterProvider,
    pub(super) shutdown_timeout: Duration,
    pub(super) endpoints: Endpoints,
    pub(super) shut_down: bool,
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
    /// went wrong, per signal and endpoint (a collector that is down shows up here as an
    /// export error or a timeout).
    pub fn shutdown(mut self) -> Result<(), OtlpError> {
        self.shut_down = true;
        shutdown(
            &self.tracer_provider,
            &self.meter_provider,
            self.shutdown_timeout,
            &self.endpoints,
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
                &self.endpoints,
            );
        }
    }
}

/// Flushes then shuts both providers down on helper threads, in parallel, and waits until
/// `timeout`: an exporter stuck on a dead connection is abandoned (the process may exit), never
/// waited for. The flush comes first because its error says what failed (the export); the
/// shutdown's alone says only that shutting down failed.
fn shutdown(
    tracer: &SdkTracerProvider,
    meter: &SdkMeterProvider,
    timeout: Duration,
    endpoints: &Endpoints,
) -> Result<(), OtlpError> {
    let deadline = Instant::now() + timeout;
    let (tx, rx) = mpsc::channel();
    let (t, m) = (tracer.clone(), meter.clone());
    let mut errors: Vec<(&'static str, String)> = [
        detached("traces", tx.clone(), move || {
            let flushed = t.force_flush();
            let shut = t.shutdown_with_timeout(timeout);
            flushed.and(shut)
        }),
        detached("metrics", tx, move || {
            let flushed = m.force_flush();
            let shut = m.shutdown_with_timeout(timeout);
            flushed.and(shut)
        }),
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
        return Ok(());
    }
    let described: Vec<String> = errors
        .iter()
        .map(|(signal, e)| format!("{signal} to {}: {e}", endpoints.of(signal)))
        .collect();
    Err(OtlpError::Shutdown(described.join("; ")))
}

/// Runs `f` on a named helper thread that sends its result (with `signal`) to `tx`.
fn detached(
    signal: &'static str,
    tx: mpsc::Sender<Result<(), (&'static str, String)>>,
    f: impl FnOnce() -> opentelemetry_sdk::error::OTelSdkResult + Send + 'static,
) -> Result<(), (&'static str, String)> {
    std::thread::Builder::new()
        .name(format!("tool-health-{signal}-shutdown"))
        .spawn(move || {
            let _ = tx.send(f().map_err(|e| (signal, e.to_string())));
        })
        .map(drop)
        .map_err(|e| (signal, format!("cannot spawn the shutdown thread: {e}")))
}
