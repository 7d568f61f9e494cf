//! `Registry`, `Permit` and `ManualClock`: the crate's `ToolHealthRegistry`, `Permit` and
//! `ManualClock`, method for method.
//!
//! The gate and record methods take the tool name as a borrowed `&str` (no copy) and do what
//! the crate does — atomics, no lock, no allocation after a tool's first sight — with the GIL
//! held: they never wait, and releasing the GIL would cost more than the call.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyString;
use tool_health::{
    CallOutcome, CallReport, CircuitBreakerConfig, GateDecision, ToolHealthRegistry,
};

use crate::call::ToolCall;
use crate::errors;
use crate::settings;
use crate::snapshot::Snapshot;

/// Per-tool health stats and circuit breakers (the Rust `ToolHealthRegistry`).
#[pyclass(module = "tool_health", subclass, frozen)]
#[derive(Debug)]
pub(crate) struct Registry {
    pub(crate) inner: Arc<ToolHealthRegistry>,
    /// A span feed (the span processor) was made on this registry: the call helper then looks
    /// for its `_feed` (one relaxed load on every call until then).
    pub(crate) fed: AtomicBool,
}

/// Proof of admission: the call may be made; record its outcome through it, once.
#[pyclass(module = "tool_health", frozen)]
#[derive(Debug)]
pub(crate) struct Permit {
    pub(crate) permit: tool_health::Permit,
    tool: Py<PyString>,
    /// The registry's clock when the gate admitted the call.
    start: Duration,
    /// Recorded (or given back) already.
    done: AtomicBool,
    /// The registry that handed it out (its address).
    registry: usize,
}

/// A clock that moves only when told (`advance`): tests move time by hand. Give it to
/// `Registry(clock=...)`; copies share one time line.
#[pyclass(module = "tool_health", frozen)]
#[derive(Debug, Clone)]
pub(crate) struct ManualClock {
    pub(crate) inner: tool_health::ManualClock,
}

#[pymethods]
impl ManualClock {
    #[new]
    fn new() -> Self {
        Self {
            inner: tool_health::ManualClock::new(),
        }
    }

    /// Moves the time forward by `seconds` (0 or more).
    fn advance(&self, seconds: f64) -> PyResult<()> {
        self.inner
            .advance(settings::seconds_f64(seconds, "seconds")?);
        Ok(())
    }

    /// Seconds since the clock's origin.
    fn now(&self) -> f64 {
        use tool_health::Clock as _;
        self.inner.now().as_secs_f64()
    }

    fn __repr__(&self) -> String {
        format!("ManualClock(now={})", self.now())
    }
}

#[pymethods]
impl Permit {
    /// Whether this call is the breaker's single probe (its result closes or re-opens it).
    #[getter]
    fn is_probe(&self) -> bool {
        self.permit.is_probe()
    }

    /// The tool the call was admitted for.
    #[getter]
    fn tool(&self, py: Python<'_>) -> Py<PyString> {
        self.tool.clone_ref(py)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Permit(tool={}, is_probe={})",
            self.tool
                .bind(py)
                .repr()
                .map(|r| r.to_string())
                .unwrap_or_default(),
            self.permit.is_probe()
        )
    }
}

/// An outcome's name, as `record` takes it.
fn outcome(name: &str) -> PyResult<CallOutcome> {
    Ok(match name {
        "success" => CallOutcome::Success,
        "failure" => CallOutcome::Failure,
        "ignored" | "caller_error" => CallOutcome::Ignored,
        "cancelled" => CallOutcome::Cancelled,
        other => {
            return Err(PyValueError::new_err(format!(
            "outcome must be \"success\", \"failure\", \"ignored\" or \"cancelled\", not {other:?}"
        )))
        }
    })
}

impl Registry {
    /// The call helper's gate: a permit, or `Refused` / `InvalidToolName` raised.
    pub(crate) fn begin(&self, tool: &Bound<'_, PyString>) -> PyResult<Permit> {
        let name = tool.to_str()?;
        match self.inner.try_check(name) {
            Ok(GateDecision::Allowed(p) | GateDecision::Probe(p)) => Ok(self.permit(tool, p)),
            Ok(GateDecision::Refused { retry_after }) => {
                Err(errors::refused(tool.py(), name, retry_after))
            }
            Err(e) => Err(errors::invalid_name(tool.py(), e)),
        }
    }

    /// The call helper's record (see `_finish`): returns the outcome recorded.
    pub(crate) fn finish(
        &self,
        permit: &Bound<'_, Permit>,
        outcome: &str,
        error_type: Option<&str>,
        timeout: Option<f64>,
    ) -> PyResult<&'static str> {
        let p = self.take(permit.get())?;
        let tool = p.tool.bind(permit.py()).to_str()?;
        if outcome == "unrecorded" {
            let _ = self.inner.release(tool, p.permit);
            return Ok("unrecorded");
        }
        let mut o = self::outcome(outcome)?;
        let d = self.inner.now().saturating_sub(p.start);
        let mut error_type = error_type;
        if o == CallOutcome::Success && timeout.is_some_and(|t| d.as_secs_f64() > t) {
            o = CallOutcome::Failure;
            error_type = Some(tool_health::layer::TIMEOUT_ERROR_TYPE);
        }
        self.report(tool, p, o, d, error_type);
        Ok(o.as_str())
    }

    fn permit(&self, tool: &Bound<'_, PyString>, permit: tool_health::Permit) -> Permit {
        Permit {
            permit,
            tool: tool.clone().unbind(),
            start: self.inner.now(),
            done: AtomicBool::new(false),
            registry: Arc::as_ptr(&self.inner) as usize,
        }
    }

    /// Takes `permit` for one record: refuses a permit of another registry or one used already.
    fn take<'p>(&self, permit: &'p Permit) -> PyResult<&'p Permit> {
        if permit.registry != Arc::as_ptr(&self.inner) as usize {
            return Err(PyValueError::new_err("this permit is another registry's"));
        }
        if permit.done.swap(true, Ordering::AcqRel) {
            return Err(PyValueError::new_err(
                "this permit was recorded already: one record per call",
            ));
        }
        Ok(permit)
    }

    fn report(
        &self,
        tool: &str,
        permit: &Permit,
        outcome: CallOutcome,
        duration: Duration,
        error_type: Option<&str>,
    ) {
        let mut report = CallReport::new(outcome, duration).permit(permit.permit);
        if let Some(e) = error_type {
            report = report.error_type(e);
        }
        let _ = self.inner.record_report(tool, &report);
    }
}

#[pymethods]
impl Registry {
    /// A registry: every tool's breaker trips after `failure_threshold` consecutive failures
    /// (0: never), refuses calls for `recovery` seconds, then lets one probe through, whose
    /// lease lasts `probe_timeout` seconds (0: no lease). `tools`: the application's tools,
    /// tracked from the start and never pushed out; at most `max_tools` tools are tracked
    /// (the rest share one overflow breaker); names longer than `max_name_len` bytes are
    /// refused. `clock`: a `ManualClock` for tests. Every setting is checked: a `SettingError`
    /// names the first one outside its range.
    #[new]
    #[pyo3(
        signature = (failure_threshold = None, recovery = None, probe_timeout = None, tools = None, max_tools = None, *, max_name_len = None, clock = None, log_transitions = false),
        text_signature = "(failure_threshold=3, recovery=30.0, probe_timeout=30.0, tools=None, max_tools=10000, *, max_name_len=256, clock=None, log_transitions=False)"
    )]
    #[allow(clippy::too_many_arguments)]
    fn new(
        failure_threshold: Option<&Bound<'_, PyAny>>,
        recovery: Option<&Bound<'_, PyAny>>,
        probe_timeout: Option<&Bound<'_, PyAny>>,
        tools: Option<&Bound<'_, PyAny>>,
        max_tools: Option<&Bound<'_, PyAny>>,
        max_name_len: Option<&Bound<'_, PyAny>>,
        clock: Option<&Bound<'_, PyAny>>,
        log_transitions: bool,
    ) -> PyResult<Self> {
        let defaults = CircuitBreakerConfig::default();
        let config = CircuitBreakerConfig {
            failure_threshold: match failure_threshold {
                Some(v) => {
                    settings::integer(v, "failure_threshold", 0, u64::from(u32::MAX))? as u32
                }
                None => defaults.failure_threshold,
            },
            recovery_duration: match recovery {
                Some(v) => settings::seconds(v, "recovery")?,
                None => defaults.recovery_duration,
            },
            probe_timeout: match probe_timeout {
                Some(v) => settings::seconds(v, "probe_timeout")?,
                None => defaults.probe_timeout,
            },
        };
        let mut builder = ToolHealthRegistry::builder()
            .config(config)
            .log_transitions(log_transitions);
        if let Some(v) = max_tools {
            builder = builder
                .max_tools(settings::integer(v, "max_tools", 1, usize::MAX as u64)? as usize);
        }
        if let Some(v) = max_name_len {
            builder =
                builder.max_name_len(settings::integer(v, "max_name_len", 1, 65_536)? as usize);
        }
        if let Some(v) = tools {
            let names = tool_names(v)?;
            builder = builder.tools(names);
        }
        if let Some(c) = clock {
            let c = c.cast::<ManualClock>().map_err(|_| {
                errors::setting(
                    "clock",
                    "not a ManualClock",
                    "None (the system clock) or a tool_health.ManualClock",
                )
            })?;
            builder = builder.clock(c.get().inner.clone());
        }
        let inner = builder.try_build().map_err(|e| errors::from_setting(&e))?;
        Ok(Self {
            inner: Arc::new(inner),
            fed: AtomicBool::new(false),
        })
    }

    /// The gate: may a call to `tool` go through now? May grant the single probe (record the
    /// call's outcome afterwards so the breaker can close).
    fn allow(&self, tool: &str) -> bool {
        self.inner.allow_request(tool)
    }

    /// The gate with its permit: a `Permit` (allowed, or the probe), or `None` when refused
    /// (a name longer than `max_name_len` is refused too). Record the call with
    /// `record(tool, permit, outcome, seconds)`.
    fn check(&self, tool: &Bound<'_, PyString>) -> PyResult<Option<Permit>> {
        let name = tool.to_str()?;
        Ok(self
            .inner
            .check(name)
            .permit()
            .map(|p| self.permit(tool, p)))
    }

    /// The pure oracle: what `allow` would answer now, consuming nothing, creating nothing.
    fn is_available(&self, tool: &str) -> bool {
        self.inner.is_tool_available(tool)
    }

    /// Records a successful call that took `seconds`.
    #[pyo3(signature = (tool, seconds = 0.0))]
    fn record_success(&self, tool: &str, seconds: f64) -> PyResult<()> {
        let d = settings::seconds_f64(seconds, "seconds")?;
        let _ = self.inner.record_success(tool, d);
        Ok(())
    }

    /// Records a failed call that took `seconds`.
    #[pyo3(signature = (tool, seconds = 0.0))]
    fn record_failure(&self, tool: &str, seconds: f64) -> PyResult<()> {
        let d = settings::seconds_f64(seconds, "seconds")?;
        let _ = self.inner.record_failure(tool, d);
        Ok(())
    }

    /// Records a call that failed through the caller's fault (bad arguments from the model):
    /// counted apart, never against the tool.
    #[pyo3(signature = (tool, seconds = 0.0))]
    fn record_ignored(&self, tool: &str, seconds: f64) -> PyResult<()> {
        let d = settings::seconds_f64(seconds, "seconds")?;
        let _ = self
            .inner
            .record_report(tool, &CallReport::new(CallOutcome::Ignored, d));
        Ok(())
    }

    /// Records a call admitted with `permit`: `outcome` is "success", "failure", "ignored"
    /// (the caller's fault) or "cancelled" (given up: a probe goes back at once). A result from
    /// an older breaker episode never closes or re-opens a newer one. One record per permit.
    #[pyo3(signature = (tool, permit, outcome, seconds = 0.0, *, error_type = None))]
    fn record(
        &self,
        tool: &str,
        permit: &Bound<'_, Permit>,
        outcome: &str,
        seconds: f64,
        error_type: Option<&str>,
    ) -> PyResult<()> {
        let o = self::outcome(outcome)?;
        let d = settings::seconds_f64(seconds, "seconds")?;
        let p = self.take(permit.get())?;
        self.report(tool, p, o, d, error_type);
        Ok(())
    }

    /// The call helper's gate: a permit, or `Refused` / `InvalidToolName` raised.
    fn _begin(&self, tool: &Bound<'_, PyString>) -> PyResult<Permit> {
        self.begin(tool)
    }

    /// One call of `tool` as a context manager (`with` or `async with`): gated on entry
    /// (`Refused` raised when the breaker refuses it), recorded on exit.
    ///
    /// `timeout` (seconds): in `async with` the body is cancelled at the deadline and
    /// `asyncio.TimeoutError` raised; a sync body cannot be cut off, so one that overran is
    /// recorded as a failure when it ends. Either way a timeout is a failure of the tool
    /// (`error.type` = `timeout`). `classify` says how an exception counts.
    #[pyo3(signature = (tool, timeout = None, classify = None))]
    fn call(
        slf: &Bound<'_, Self>,
        tool: Bound<'_, PyString>,
        timeout: Option<Bound<'_, PyAny>>,
        classify: Option<Bound<'_, PyAny>>,
    ) -> PyResult<ToolCall> {
        let timeout = settings::timeout(timeout)?;
        Ok(ToolCall::new(slf, tool, timeout, classify))
    }

    /// The call helper's record: the duration from the permit's admission on the registry's
    /// clock; `outcome` as `record` takes it, or "unrecorded" (nothing recorded, the probe given
    /// back). A success that took longer than `timeout` seconds is a failure (`timeout`).
    /// Returns the outcome recorded.
    #[pyo3(signature = (permit, outcome, error_type = None, timeout = None))]
    fn _finish(
        &self,
        permit: &Bound<'_, Permit>,
        outcome: &str,
        error_type: Option<&str>,
        timeout: Option<f64>,
    ) -> PyResult<&'static str> {
        self.finish(permit, outcome, error_type, timeout)
    }

    /// One tool's stats and breaker, or `None` for a tool never seen.
    fn snapshot(&self, tool: &str) -> Option<Snapshot> {
        self.inner.snapshot(tool).map(Snapshot::from)
    }

    /// Every tracked tool's snapshot, sorted by name.
    fn health_summary(&self) -> Vec<Snapshot> {
        self.inner
            .health_summary()
            .into_iter()
            .map(Snapshot::from)
            .collect()
    }

    /// The tools the gate would refuse now: `(tool, retry_after_seconds)` (`inf`: not in any
    /// foreseeable time, e.g. forced open until released).
    fn unavailable_tools(&self) -> Vec<(String, f64)> {
        self.inner
            .unavailable_tools()
            .into_iter()
            .map(|u| (u.tool, errors::seconds(u.retry_after)))
            .collect()
    }

    /// "closed", "open" or "half_open" (expiry-aware: a probe whose lease ran out reads open).
    fn breaker_state(&self, tool: &str) -> &'static str {
        self.inner.breaker_state(tool).as_str()
    }

    /// "healthy", "degraded" or "unhealthy".
    fn health_status(&self, tool: &str) -> &'static str {
        self.inner.get_health_status(tool).as_str()
    }

    /// Operator control: refuse every call to `tool` for `seconds`. False when the tool cannot
    /// be tracked (the cap is reached, or the name is too long).
    fn force_open_for(&self, tool: &str, seconds: f64) -> PyResult<bool> {
        Ok(self
            .inner
            .force_open_for(tool, settings::seconds_f64(seconds, "seconds")?))
    }

    /// Operator control: refuse every call to `tool` until released.
    fn force_open(&self, tool: &str) -> bool {
        self.inner.force_open(tool)
    }

    /// Operator control: let every call to `tool` through (the breaker still runs, so its
    /// state shows what it would do).
    fn force_closed(&self, tool: &str) -> bool {
        self.inner.force_closed(tool)
    }

    /// Ends a force-open or force-closed: the breaker decides again.
    fn release_control(&self, tool: &str) {
        self.inner.release_control(tool)
    }

    /// Shadow mode for `tool`: the breaker moves as it would, but never refuses a call.
    fn set_shadow(&self, tool: &str, on: bool) -> bool {
        self.inner.set_shadow(tool, on)
    }

    /// Back to fresh: stats zeroed, breaker closed, controls released.
    fn reset(&self, tool: &str) {
        self.inner.reset(tool)
    }

    /// How many tools are tracked.
    #[getter]
    fn tracked_tools(&self) -> usize {
        self.inner.tracked_tools()
    }

    /// The longest tool name taken, in bytes.
    #[getter]
    fn max_name_len(&self) -> usize {
        self.inner.max_name_len()
    }

    /// The registry's clock, in seconds.
    fn now(&self) -> f64 {
        self.inner.now().as_secs_f64()
    }

    fn __repr__(&self) -> String {
        format!("Registry(tracked_tools={})", self.inner.tracked_tools())
    }
}

/// The names of `tools=`: an iterable of str (a lone str is a mistake: refused).
fn tool_names(value: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    let allowed = "an iterable of tool names (str)";
    if value.is_instance_of::<PyString>() {
        return Err(errors::setting("tools", "a str", allowed));
    }
    let iter = value
        .try_iter()
        .map_err(|_| errors::setting("tools", "not iterable", allowed))?;
    let mut names = Vec::new();
    for item in iter {
        let item = item?;
        let s = item
            .cast::<PyString>()
            .map_err(|_| errors::setting("tools", "an item that is not a str", allowed))?;
        names.push(s.to_str()?.to_owned());
    }
    Ok(names)
}
