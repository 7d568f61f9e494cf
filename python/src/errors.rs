//! The crate's errors as Python exceptions, with their parts as attributes.

use std::convert::Infallible;
use std::time::Duration;

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;

create_exception!(
    tool_health,
    SettingError,
    PyValueError,
    "A setting outside its range: `field` names it, `found` says what was given, `allowed` \
     the range (the Rust crate's `SettingError`)."
);
create_exception!(
    tool_health,
    Refused,
    PyException,
    "The breaker refused the call; the tool was not called. Not a failure of the tool: \
     `str(e)` begins with REFUSAL_MESSAGE (tell the model), `retry_after` is in how many \
     seconds the gate could next admit a call (`math.inf`: not in any foreseeable time)."
);
create_exception!(
    tool_health,
    InvalidToolName,
    PyValueError,
    "A tool name longer than the registry's `max_name_len` bytes: no tool of the application's \
     has it (an invalid argument of the model's: tell it so, never REFUSAL_MESSAGE). Nothing \
     was called, recorded or copied."
);

/// A `SettingError` for `field`: `found` was given, `allowed` says what may be — the crate's
/// text (`invalid setting `field`: found; allowed: …`).
pub(crate) fn setting(field: &str, found: impl std::fmt::Display, allowed: &str) -> PyErr {
    let message = format!("invalid setting `{field}`: {found}; allowed: {allowed}");
    with_attrs::<SettingError>(
        message,
        &[
            ("field", field),
            ("found", &found.to_string()),
            ("allowed", allowed),
        ],
    )
}

/// The crate's own `SettingError`, as the Python one.
pub(crate) fn from_setting(e: &tool_health::SettingError) -> PyErr {
    with_attrs::<SettingError>(
        e.to_string(),
        &[
            ("field", e.field()),
            ("found", e.found()),
            ("allowed", e.allowed()),
        ],
    )
}

fn with_attrs<T: pyo3::PyTypeInfo>(message: String, attrs: &[(&str, &str)]) -> PyErr {
    Python::attach(|py| {
        let err = PyErr::from_type(py.get_type::<T>(), (message,));
        let value = err.value(py);
        for (k, v) in attrs {
            let _ = value.setattr(*k, *v);
        }
        err
    })
}

/// Seconds as Python reads a retry time: `inf` for `Duration::MAX`.
pub(crate) fn seconds(d: Duration) -> f64 {
    if d == Duration::MAX {
        f64::INFINITY
    } else {
        d.as_secs_f64()
    }
}

/// The refusal of `tool`, its text the crate's (`REFUSAL_MESSAGE (tool `x`, retry in 2.5 s)`).
pub(crate) fn refused(py: Python<'_>, tool: &str, retry_after: Duration) -> PyErr {
    let text = tool_health::CallError::<Infallible>::Refused {
        tool: tool.to_owned(),
        retry_after,
    }
    .to_string();
    let err = PyErr::from_type(py.get_type::<Refused>(), (text,));
    let value = err.value(py);
    let _ = value.setattr("tool", tool);
    let _ = value.setattr("retry_after", seconds(retry_after));
    err
}

/// A name too long for the registry, its text the crate's.
pub(crate) fn invalid_name(py: Python<'_>, e: tool_health::NameError) -> PyErr {
    let err = PyErr::from_type(py.get_type::<InvalidToolName>(), (e.to_string(),));
    let value = err.value(py);
    let _ = value.setattr("length", e.len());
    let _ = value.setattr("max", e.max());
    err
}
