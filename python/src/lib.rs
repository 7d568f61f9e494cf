//! The extension module `tool_health._core`: the Rust registry, breakers and span inference of
//! the `tool-health` crate bound for Python (PyO3, abi3). No breaking logic lives here: each
//! method converts its arguments, calls the crate, and converts the answer.
//!
//! | file | binds |
//! |---|---|
//! | `errors.rs` | `SettingError`, `Refused`, `InvalidToolName`: the crate's errors as Python exceptions |
//! | `settings.rs` | Python numbers into the crate's settings, each checked with its field and range |
//! | `registry.rs` | `Registry` (the gate, records, reads, controls), `Permit`, `ManualClock` |
//! | `call.rs` | `ToolCall`: the call helper (`registry.call(tool)`, `with` and `async with`) |
//! | `snapshot.rs` | `Snapshot`: one tool's `ToolHealthSnapshot` |
//! | `span.rs` | `PySpan`: an OpenTelemetry Python span read on demand (the crate's `SpanSource`) |
//! | `feed.rs` | `SpanFeed`: OpenTelemetry Python spans into `tool_health::span_feed` |
//! | `fleet.rs` | `join_fleet`, `Fleet`: fleet mode over Valkey/Redis (feature `fleet`) |
//! | `metrics.rs` | `publish_metrics`: the crate's instruments, measured into an OpenTelemetry Python meter |
//!
//! Panics: the crate's entry points used here do not panic on any input (names are bounded,
//! settings checked before they reach it); PyO3 turns any panic that would still happen into a
//! Python `PanicException` instead of unwinding into the interpreter.

use pyo3::prelude::*;

mod call;
mod errors;
mod feed;
#[cfg(feature = "fleet")]
mod fleet;
mod metrics;
mod registry;
mod settings;
mod snapshot;
mod span;

/// The extension module. Its types are `Sync` (an `Arc` of the lock-free registry, atomics):
/// safe without the GIL, so free-threaded interpreters keep it off.
#[pymodule(gil_used = false)]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("REFUSAL_MESSAGE", tool_health::REFUSAL_MESSAGE)?;
    m.add(
        "DEFAULT_MAX_TOOLS",
        tool_health::RegistryBuilder::DEFAULT_MAX_TOOLS,
    )?;
    m.add(
        "DEFAULT_MAX_NAME_LEN",
        tool_health::RegistryBuilder::DEFAULT_MAX_NAME_LEN,
    )?;
    m.add("SettingError", py.get_type::<errors::SettingError>())?;
    m.add("Refused", py.get_type::<errors::Refused>())?;
    m.add("InvalidToolName", py.get_type::<errors::InvalidToolName>())?;
    m.add_class::<registry::Registry>()?;
    m.add_class::<registry::Permit>()?;
    m.add_class::<registry::ManualClock>()?;
    m.add_class::<call::ToolCall>()?;
    m.add_function(wrap_pyfunction!(call::check_timeout, m)?)?;
    m.add_class::<snapshot::Snapshot>()?;
    m.add_class::<feed::SpanFeed>()?;
    m.add_class::<metrics::MetricSource>()?;
    m.add_function(wrap_pyfunction!(metrics::metric_sources, m)?)?;
    #[cfg(feature = "fleet")]
    {
        m.add("FleetError", py.get_type::<fleet::FleetError>())?;
        m.add_class::<fleet::Fleet>()?;
        m.add_function(wrap_pyfunction!(fleet::join_fleet, m)?)?;
    }
    Ok(())
}
