//! `ToolCall`: one call of one tool as a context manager, `with` and `async with` — the call
//! helper's gate, timing and record, in Rust. What is Python by nature stays in
//! `tool_health._call` and is called only when a call needs it: the application's `classify`
//! (when the body raised), the asyncio deadline (`async with` with a timeout), and the
//! bookkeeping with OpenTelemetry's current span (when a span processor is attached). A call
//! with none of these — the common one — runs no Python code of ours.

use pyo3::exceptions::PyTimeoutError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyString, PyTuple};

use crate::registry::{Permit, Registry};
use crate::settings::{self, Timeout};

/// The Python parts of the helper (`tool_health._call`), imported once when first needed.
static CLASSIFIED: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static ENTER_FEED: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static DEADLINE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static READY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

fn helper<'py>(
    py: Python<'py>,
    cell: &'static PyOnceLock<Py<PyAny>>,
    name: &str,
) -> PyResult<&'py Bound<'py, PyAny>> {
    cell.import(py, "tool_health._call", name)
}

/// One call of one tool: a context manager, sync (`with`) or async (`async with`).
///
/// After the block: `outcome` is what was recorded ("success", "failure", "ignored",
/// "cancelled" or "unrecorded"), `timed_out` whether the call overran its timeout.
#[pyclass(module = "tool_health")]
#[derive(Debug)]
pub(crate) struct ToolCall {
    registry: Py<Registry>,
    tool: Py<PyString>,
    timeout: Option<Timeout>,
    classify: Option<Py<PyAny>>,
    /// The registry's span feed when the call was made (a span processor is attached).
    feed: Option<Py<PyAny>>,
    /// The open-calls `ContextVar`'s token while the call is open (a processor is attached).
    open: Option<Py<PyAny>>,
    /// The asyncio deadline of an `async with` with a timeout (`tool_health._call._Deadline`).
    deadline: Option<Py<PyAny>>,
    /// The permit, once the gate admitted the call.
    #[pyo3(get)]
    permit: Option<Py<Permit>>,
    outcome: Option<&'static str>,
    /// Whether the call overran its timeout.
    #[pyo3(get)]
    timed_out: bool,
}

impl ToolCall {
    /// A call of `tool` through `registry` (its `timeout` checked already).
    pub(crate) fn new(
        registry: &Bound<'_, Registry>,
        tool: Bound<'_, PyString>,
        timeout: Option<Timeout>,
        classify: Option<Bound<'_, PyAny>>,
    ) -> Self {
        Self {
            registry: registry.clone().unbind(),
            tool: tool.unbind(),
            timeout,
            classify: classify.filter(|c| !c.is_none()).map(Bound::unbind),
            feed: feed_of(registry),
            open: None,
            deadline: None,
            permit: None,
            outcome: None,
            timed_out: false,
        }
    }
}

/// The span feed attached to `registry` (`registry._feed`, set by the span processor), if any:
/// looked up only once a feed was made on it.
fn feed_of(registry: &Bound<'_, Registry>) -> Option<Py<PyAny>> {
    if !registry
        .get()
        .fed
        .load(std::sync::atomic::Ordering::Relaxed)
    {
        return None;
    }
    let feed = registry.getattr(intern!(registry.py(), "_feed")).ok()?;
    (!feed.is_none()).then(|| feed.unbind())
}

/// The gate: the permit, or the refusal raised; with a feed, the span bookkeeping
/// (`tool_health._call._enter_feed`: the current span claimed, the call marked open).
fn gate(slf: &Bound<'_, ToolCall>) -> PyResult<()> {
    let py = slf.py();
    let (registry, tool, feed) = {
        let this = slf.borrow();
        (
            this.registry.clone_ref(py),
            this.tool.clone_ref(py),
            this.feed.as_ref().map(|f| f.clone_ref(py)),
        )
    };
    let registry = registry.bind(py);
    let tool = tool.bind(py);
    let permit = registry.get().begin(tool);
    let Some(feed) = feed else {
        slf.borrow_mut().permit = Some(Py::new(py, permit?)?);
        return Ok(());
    };
    let decision = match &permit {
        Ok(p) if p.permit.is_probe() => "probe",
        Ok(_) => "allowed",
        Err(_) => "refused",
    };
    let entered = helper(py, &ENTER_FEED, "_enter_feed")?.call1((feed, registry, tool, decision));
    let permit = Py::new(py, permit?)?;
    let token = entered?;
    let mut this = slf.borrow_mut();
    this.permit = Some(permit);
    this.open = (!token.is_none()).then(|| token.unbind());
    Ok(())
}

/// The record of a call that ended (`exc`: what its body raised, if anything): the outcome
/// as `classify` says, a timeout a failure; the open-calls mark undone.
fn settle(
    slf: &Bound<'_, ToolCall>,
    exc: Option<&Bound<'_, PyAny>>,
    timed_out: bool,
) -> PyResult<()> {
    let py = slf.py();
    let (registry, permit, classify, timeout, open) = {
        let mut this = slf.borrow_mut();
        (
            this.registry.clone_ref(py),
            this.permit.as_ref().map(|p| p.clone_ref(py)),
            this.classify.as_ref().map(|c| c.clone_ref(py)),
            this.timeout.as_ref().map(|t| t.seconds),
            this.open.take(),
        )
    };
    if let Some(token) = open {
        let token = token.bind(py);
        token
            .getattr(intern!(py, "var"))?
            .call_method1(intern!(py, "reset"), (token,))?;
    }
    let Some(permit) = permit else {
        return Ok(());
    };
    let registry = registry.get();
    let permit = permit.bind(py);
    let recorded = match exc {
        _ if timed_out => registry.finish(permit, "failure", Some("timeout"), None)?,
        // A sync call cannot be cut off: one that overran its timeout is a failure.
        None => registry.finish(permit, "success", None, timeout)?,
        Some(exc) => {
            let verdict = helper(py, &CLASSIFIED, "_classified")?.call1((exc, classify))?;
            let verdict = verdict.cast_into::<PyTuple>()?;
            let outcome = verdict.get_item(0)?;
            let error_type = verdict.get_item(1)?;
            let error_type = error_type
                .cast::<PyString>()
                .ok()
                .map(|s| s.to_str())
                .transpose()?;
            registry.finish(
                permit,
                outcome.cast::<PyString>()?.to_str()?,
                error_type,
                None,
            )?
        }
    };
    let mut this = slf.borrow_mut();
    this.outcome = Some(recorded);
    this.timed_out = timed_out || (exc.is_none() && recorded == "failure");
    Ok(())
}

/// An awaitable already done, giving `value` (what `__aenter__` and `__aexit__` return: the
/// gate and the record never wait): a coroutine of `tool_health._call._ready`, which an
/// `await` runs to its end at once — no `StopIteration` made, nothing allocated here.
fn ready(value: Bound<'_, PyAny>) -> PyResult<Bound<'_, PyAny>> {
    helper(value.py(), &READY, "_ready")?.call1((value,))
}

/// The exception of an `async with` cut off by its own deadline: `asyncio.TimeoutError`
/// (`TimeoutError` since 3.11), from the cancellation.
fn timeout_error(slf: &Bound<'_, ToolCall>, exc: Option<&Bound<'_, PyAny>>) -> PyResult<PyErr> {
    let py = slf.py();
    let this = slf.borrow();
    let timeout = match &this.timeout {
        Some(t) => t.value.bind(py).str()?.to_string(),
        None => String::new(),
    };
    let text = format!(
        "tool {} timed out after {timeout} s",
        this.tool.bind(py).repr()?
    );
    let error_type = py
        .import(intern!(py, "asyncio"))?
        .getattr(intern!(py, "TimeoutError"))
        .unwrap_or_else(|_| py.get_type::<PyTimeoutError>().into_any());
    let err = PyErr::from_value(error_type.call1((text,))?);
    if let Some(exc) = exc {
        err.set_cause(py, Some(PyErr::from_value(exc.clone())));
        let _ = err.value(py).setattr(intern!(py, "__context__"), exc);
    }
    Ok(err)
}

#[pymethods]
impl ToolCall {
    /// A call of `tool` through `registry` (what `registry.call(tool, timeout, classify)`
    /// returns).
    #[new]
    #[pyo3(signature = (registry, tool, timeout = None, classify = None))]
    fn py_new(
        registry: &Bound<'_, Registry>,
        tool: Bound<'_, PyString>,
        timeout: Option<Bound<'_, PyAny>>,
        classify: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        Ok(Self::new(
            registry,
            tool,
            settings::timeout(timeout)?,
            classify,
        ))
    }

    /// The tool's name.
    #[getter]
    fn tool(&self, py: Python<'_>) -> Py<PyString> {
        self.tool.clone_ref(py)
    }

    /// Whether this call holds the breaker's single probe.
    #[getter]
    fn is_probe(&self, py: Python<'_>) -> bool {
        self.permit
            .as_ref()
            .is_some_and(|p| p.bind(py).get().permit.is_probe())
    }

    /// What was recorded: "success", "failure", "ignored", "cancelled" or "unrecorded"
    /// (`None` before the call ends, or when it was refused).
    #[getter]
    fn outcome(&self) -> Option<&'static str> {
        self.outcome
    }

    fn __enter__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        {
            let mut this = slf.borrow_mut();
            if this.feed.is_none() {
                // The common case: the gate alone.
                let py = slf.py();
                let permit = this.registry.get().begin(this.tool.bind(py))?;
                this.permit = Some(Py::new(py, permit)?);
                drop(this);
                return Ok(slf);
            }
        }
        gate(&slf)?;
        Ok(slf)
    }

    #[pyo3(signature = (exc_type, exc, tb))]
    fn __exit__(
        slf: &Bound<'_, Self>,
        exc_type: Option<&Bound<'_, PyAny>>,
        exc: Option<&Bound<'_, PyAny>>,
        tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let _ = (exc_type, tb);
        let exc = exc.filter(|e| !e.is_none());
        {
            let mut this = slf.borrow_mut();
            if exc.is_none() && this.timeout.is_none() && this.open.is_none() {
                // The common case in one record: a success, no timeout, no span bookkeeping.
                if let Some(permit) = this.permit.as_ref() {
                    let recorded =
                        this.registry
                            .get()
                            .finish(permit.bind(slf.py()), "success", None, None)?;
                    this.outcome = Some(recorded);
                    return Ok(false);
                }
            }
        }
        settle(slf, exc, false)?;
        Ok(false)
    }

    fn __aenter__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, PyAny>> {
        let py = slf.py();
        gate(&slf)?;
        let timeout = slf.borrow().timeout.as_ref().map(|t| t.value.clone_ref(py));
        if let Some(timeout) = timeout {
            let deadline = helper(py, &DEADLINE, "_Deadline")?.call1((timeout,))?;
            deadline.call_method0(intern!(py, "arm"))?;
            slf.borrow_mut().deadline = Some(deadline.unbind());
        }
        ready(slf.into_any())
    }

    #[pyo3(signature = (exc_type, exc, tb))]
    fn __aexit__<'py>(
        slf: &Bound<'py, Self>,
        exc_type: Option<&Bound<'py, PyAny>>,
        exc: Option<&Bound<'py, PyAny>>,
        tb: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = (exc_type, tb);
        let py = slf.py();
        let exc = exc.filter(|e| !e.is_none());
        let deadline = slf.borrow_mut().deadline.take();
        if let Some(deadline) = deadline {
            let cut = deadline
                .bind(py)
                .call_method1(intern!(py, "disarm"), (exc,))?
                .is_truthy()?;
            if cut {
                // Our own deadline cancelled the body: a timeout, the tool's failure.
                settle(slf, exc, true)?;
                return Err(timeout_error(slf, exc)?);
            }
        }
        settle(slf, exc, false)?;
        ready(pyo3::types::PyBool::new(py, false).to_owned().into_any())
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let tool = self
            .tool
            .bind(py)
            .repr()
            .map(|r| r.to_string())
            .unwrap_or_default();
        format!("ToolCall(tool={tool}, outcome={:?})", self.outcome)
    }
}

/// Checks a call's `timeout` as `registry.call` does (for the decorator, when it is made).
#[pyfunction(name = "_check_timeout")]
#[pyo3(signature = (timeout))]
pub(crate) fn check_timeout(timeout: Option<Bound<'_, PyAny>>) -> PyResult<()> {
    settings::timeout(timeout).map(|_| ())
}
