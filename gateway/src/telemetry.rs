//! The gateway's own log and metrics.
//!
//! * **The log goes to stderr** — stdout is the MCP stdio channel. Events only (no span
//!   lines), filtered by `TOOL_HEALTH_GATEWAY_LOG`, else `RUST_LOG`, else `info` with rmcp's
//!   own log off (the gateway says each failure in its words). Breaker transitions are logged
//!   by the library (target `tool_health`, WARN when a breaker opens), servers' connections by
//!   the gateway, and each upstream's stderr line by line at DEBUG (target
//!   `tool_health_gateway::upstream`; the end of it comes with the WARN that says a server
//!   ended). Every line is written through
//!   [`Secrets::scrub`](crate::config::Secrets::scrub): what the gateway did not write itself (an
//!   HTTP client's error repeating a URL, an upstream printing its environment) never shows a
//!   secret of the config either.
//! * **OTLP** when an endpoint is configured the standard way (`OTEL_EXPORTER_OTLP_ENDPOINT`,
//!   or its `…_METRICS_…` / `…_TRACES_…` forms; `OTEL_SDK_DISABLED=true` turns it off): the
//!   library's one-call setup (`tool_health::otlp`) publishes the breakers' metrics and exports
//!   every `tools/call` client span. Without an endpoint nothing is exported and nothing paid.

use std::io::IsTerminal as _;
use std::sync::Arc;

use tool_health::otlp::OtlpGuard;
use tool_health::ToolHealthRegistry;
use tracing_subscriber::filter::{filter_fn, EnvFilter, FilterExt as _};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::Layer as _;

use crate::config::Secrets;
use crate::upstream::View;

/// The log filter when no variable sets one. rmcp's own log is off: the gateway says every
/// failure of a connection in its words, where rmcp's repeats it with its structs dumped
/// (`TOOL_HEALTH_GATEWAY_LOG=info,rmcp=debug` shows it).
const DEFAULT_FILTER: &str = "info,rmcp=off";

/// Whether an OTLP endpoint is configured in the environment.
fn otlp_configured() -> bool {
    let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty());
    let disabled = std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.eq_ignore_ascii_case("true"));
    !disabled
        && (set("OTEL_EXPORTER_OTLP_ENDPOINT")
            || set("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
            || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
}

/// Stderr, with the config's secrets masked in every line.
#[derive(Debug, Clone)]
struct Masked {
    secrets: Arc<Secrets>,
}

/// One event's writer: the fmt layer formats an event whole, then writes it in one piece.
#[derive(Debug)]
struct MaskedLine<'a> {
    secrets: &'a Secrets,
}

impl<'a> MakeWriter<'a> for Masked {
    type Writer = MaskedLine<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        MaskedLine {
            secrets: &self.secrets,
        }
    }
}

impl std::io::Write for MaskedLine<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        std::io::stderr().write_all(self.secrets.scrub(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// Installs the log (and OTLP export when configured) for `registry`, masking `secrets`.
/// Inside a tokio runtime.
pub(crate) fn init(
    registry: &Arc<ToolHealthRegistry>,
    secrets: &Arc<Secrets>,
) -> Result<Option<OtlpGuard>, String> {
    let filter = std::env::var("TOOL_HEALTH_GATEWAY_LOG")
        .ok()
        .filter(|v| !v.is_empty())
        .or_else(|| std::env::var("RUST_LOG").ok().filter(|v| !v.is_empty()))
        .unwrap_or_else(|| DEFAULT_FILTER.to_owned());
    let filter = EnvFilter::try_new(&filter)
        .map_err(|e| format!("the log filter `{filter}` is not valid: {e}"))?;
    let log = tracing_subscriber::fmt::layer()
        .with_writer(Masked {
            secrets: Arc::clone(secrets),
        })
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(true)
        // Events only: the tool spans are for OTLP; formatting them would cost every call.
        .with_filter(filter.and(filter_fn(|meta| meta.is_event())));
    let (otlp, guard) = if otlp_configured() {
        let (layer, guard) = tool_health::otlp::builder("tool-health-gateway")
            .registry(Arc::clone(registry))
            .layers()
            .map_err(|e| format!("OTLP export: {e}"))?;
        (Some(layer), Some(guard))
    } else {
        (None, None)
    };
    // Without OTLP no layer is added in its place: an absent `Option` layer enables every
    // span (its interest is "always"), and the registry would then store the spans of every
    // call (rmcp's and the MCP client's) for nobody.
    let installed = match otlp {
        Some(otlp) => tracing_subscriber::registry()
            .with(log)
            .with(otlp)
            .try_init(),
        None => tracing_subscriber::registry().with(log).try_init(),
    };
    installed.map_err(|e| format!("the log: {e}"))?;
    Ok(guard)
}

/// Publishes each server's connection on `meter`, beside the library's breaker series
/// (`tool_health.server.breaker.state`): `tool_health.server.connected` (1 or 0) and
/// `tool_health.server.restarts` (how many times it was started again), attribute
/// `mcp.server.name`. A server that never connected is a series too (0): it is not invisible.
/// The servers are those of the set at each collection (`servers`: a reload changes it).
pub(crate) fn publish_servers(meter: &opentelemetry::metrics::Meter, servers: View) {
    let each = move |f: &mut dyn FnMut(&str, &crate::upstream::State)| {
        for u in servers.now().iter() {
            f(&u.name, &u.state());
        }
    };
    let each = Arc::new(each);
    let connected = Arc::clone(&each);
    meter
        .i64_observable_gauge("tool_health.server.connected")
        .with_unit("1")
        .with_description("MCP server connected: 1 while connected, 0 otherwise")
        .with_callback(move |obs| {
            connected(&mut |name, state| {
                let attrs = [opentelemetry::KeyValue::new(
                    "mcp.server.name",
                    name.to_owned(),
                )];
                obs.observe(i64::from(state.connected), &attrs);
            });
        })
        .build();
    meter
        .u64_observable_counter("tool_health.server.restarts")
        .with_unit("{restart}")
        .with_description("Times the MCP server was started (or connected) again")
        .with_callback(move |obs| {
            each(&mut |name, state| {
                let attrs = [opentelemetry::KeyValue::new(
                    "mcp.server.name",
                    name.to_owned(),
                )];
                obs.observe(state.starts.saturating_sub(1), &attrs);
            });
        })
        .build();
}
