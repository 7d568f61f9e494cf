//! Fleet mode from Python (feature `fleet`, in the wheel by default): a registry joins a fleet
//! over Valkey or Redis with the crate's own fleet code — the same protocol as Rust replicas,
//! so Python workers and Rust services share trips, one probe per fleet and operator controls.
//!
//! The fleet's background task runs on a tokio runtime of the extension's own: one worker
//! thread (`tool-health-fleet`), started at the first `join_fleet` and shared by every fleet of
//! the process. The gate and records never touch it (they stay the registry's atomics). Calls
//! that talk to the store release the GIL while they wait.
//!
//! A process that forks (multiprocessing, a pre-forking server) must join after the fork: the
//! runtime's thread does not survive into the child.

use std::sync::{OnceLock, PoisonError, RwLock};
use std::time::Duration;

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tool_health::fleet::{FleetBuilder, FleetError as RustFleetError};

use crate::registry::Registry;
use crate::settings;

create_exception!(
    tool_health,
    FleetError,
    PyException,
    "Fleet mode could not do something: a setting, the store out of reach, credentials \
     refused, the fleet stopped (the text says which; it never holds a credential)."
);

static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();

fn runtime() -> PyResult<&'static tokio::runtime::Runtime> {
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("tool-health-fleet")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| FleetError::new_err(format!("the fleet's runtime could not start: {e}")))
}

fn error(e: RustFleetError) -> PyErr {
    FleetError::new_err(e.to_string())
}

/// A running fleet member beside one registry (the crate's `Fleet`). `shutdown()` stops it;
/// the registry keeps working alone.
#[pyclass(module = "tool_health", frozen)]
#[derive(Debug)]
pub(crate) struct Fleet {
    inner: RwLock<Option<tool_health::fleet::Fleet>>,
}

impl Fleet {
    /// Runs `f` on the fleet with the GIL released, on the runtime.
    fn run<T: Send>(
        &self,
        py: Python<'_>,
        f: impl AsyncFnOnce(&tool_health::fleet::Fleet) -> Result<T, RustFleetError> + Send,
    ) -> PyResult<T> {
        let rt = runtime()?;
        py.detach(|| {
            let guard = self.inner.read().unwrap_or_else(PoisonError::into_inner);
            let fleet = guard.as_ref().ok_or(RustFleetError::Stopped)?;
            rt.block_on(f(fleet))
        })
        .map_err(error)
    }
}

/// `seconds` as a duration, for `field`.
fn duration(seconds: Option<f64>, field: &str) -> PyResult<Option<Duration>> {
    seconds.map(|s| settings::seconds_f64(s, field)).transpose()
}

/// Joins `registry` to the fleet on the store at `url` (`redis://host:port/db`): returns at
/// once, the store connected to in the background; `connect_timeout` seconds: wait that long
/// for the store first (a `FleetError` if it did not answer).
#[pyfunction]
#[pyo3(signature = (registry, url, *, prefix = None, poll_interval = None, command_timeout = None, probe_lease = None, username = None, password = None, connect_timeout = None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn join_fleet(
    py: Python<'_>,
    registry: &Bound<'_, Registry>,
    url: &str,
    prefix: Option<&str>,
    poll_interval: Option<f64>,
    command_timeout: Option<f64>,
    probe_lease: Option<f64>,
    username: Option<&str>,
    password: Option<&str>,
    connect_timeout: Option<f64>,
) -> PyResult<Fleet> {
    let mut builder = FleetBuilder::new(url);
    if let Some(p) = prefix {
        builder = builder.prefix(p);
    }
    if let Some(d) = duration(poll_interval, "poll_interval")? {
        builder = builder.poll_interval(d);
    }
    if let Some(d) = duration(command_timeout, "command_timeout")? {
        builder = builder.command_timeout(d);
    }
    if let Some(d) = duration(probe_lease, "probe_lease")? {
        builder = builder.probe_lease(d);
    }
    if let Some(u) = username {
        builder = builder.username(u);
    }
    if let Some(p) = password {
        builder = builder.password(p);
    }
    let connect = duration(connect_timeout, "connect_timeout")?;
    let rt = runtime()?;
    let registry = registry.get().inner.clone();
    let fleet = py
        .detach(|| {
            let _entered = rt.enter();
            let fleet = builder.start(&registry)?;
            if let Some(timeout) = connect {
                rt.block_on(fleet.wait_connected(timeout))?;
            }
            Ok(fleet)
        })
        .map_err(error)?;
    Ok(Fleet {
        inner: RwLock::new(Some(fleet)),
    })
}

#[pymethods]
impl Fleet {
    /// How the fleet is doing: `connected`, `sync_lag` (seconds, or None), `last_error`,
    /// `replica`, `applied`, `rejected`.
    fn status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let status = {
            let guard = self.inner.read().unwrap_or_else(PoisonError::into_inner);
            guard
                .as_ref()
                .ok_or_else(|| error(RustFleetError::Stopped))?
                .status()
        };
        let d = PyDict::new(py);
        d.set_item("connected", status.connected)?;
        d.set_item("sync_lag", status.sync_lag.map(|l| l.as_secs_f64()))?;
        d.set_item("last_error", status.last_error)?;
        d.set_item("replica", status.replica)?;
        d.set_item("applied", status.applied)?;
        d.set_item("rejected", status.rejected)?;
        Ok(d)
    }

    /// Waits until the store has answered, at most `timeout` seconds.
    fn wait_connected(&self, py: Python<'_>, timeout: f64) -> PyResult<()> {
        let timeout = settings::seconds_f64(timeout, "timeout")?;
        self.run(py, async |f| f.wait_connected(timeout).await)
    }

    /// One complete exchange with the store now (tests wait for the network with it).
    fn sync_now(&self, py: Python<'_>) -> PyResult<()> {
        self.run(py, async |f| f.sync_now().await)
    }

    /// Isolates `tool` on every replica for `seconds` (None: until released).
    #[pyo3(signature = (tool, seconds = None))]
    fn force_open(&self, py: Python<'_>, tool: &str, seconds: Option<f64>) -> PyResult<()> {
        let d = duration(seconds, "seconds")?;
        self.run(py, async |f| f.force_open(tool, d).await)
    }

    /// Lets every call to `tool` through on every replica.
    fn force_closed(&self, py: Python<'_>, tool: &str) -> PyResult<()> {
        self.run(py, async |f| f.force_closed(tool).await)
    }

    /// Ends a forced mode on every replica.
    fn release_control(&self, py: Python<'_>, tool: &str) -> PyResult<()> {
        self.run(py, async |f| f.release_control(tool).await)
    }

    /// Shadow mode on or off on every replica.
    fn set_shadow(&self, py: Python<'_>, tool: &str, on: bool) -> PyResult<()> {
        self.run(py, async |f| f.set_shadow(tool, on).await)
    }

    /// Resets `tool` on every replica.
    fn reset(&self, py: Python<'_>, tool: &str) -> PyResult<()> {
        self.run(py, async |f| f.reset(tool).await)
    }

    /// Stops the fleet's task (the registry keeps working alone). Idempotent.
    fn shutdown(&self, py: Python<'_>) -> PyResult<()> {
        let rt = runtime()?;
        py.detach(|| {
            let fleet = self
                .inner
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            if let Some(fleet) = fleet {
                rt.block_on(fleet.shutdown());
            }
        });
        Ok(())
    }

    fn __repr__(&self) -> String {
        let guard = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        match guard.as_ref() {
            Some(f) => format!(
                "Fleet(replica={:?}, connected={})",
                f.replica_id(),
                f.status().connected
            ),
            None => "Fleet(stopped)".to_owned(),
        }
    }
}
