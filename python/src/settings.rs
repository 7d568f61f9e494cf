//! Python numbers into the crate's settings. Every value is checked here, before it reaches
//! the crate: a wrong type, a negative or non-finite number, an integer too large for the
//! crate's field — each a `SettingError` naming the field and its range, never an
//! `OverflowError`, a `TypeError` from deep inside, or a panic.

use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt};

use crate::errors::setting;

/// The largest number of seconds a `Duration` holds (about 5.8e11 years).
const MAX_SECONDS: f64 = u64::MAX as f64;

/// A number of seconds for `field`: an int or a float, finite, from 0 to `max` seconds.
pub(crate) fn seconds(value: &Bound<'_, PyAny>, field: &str) -> PyResult<Duration> {
    seconds_up_to(value, field, MAX_SECONDS)
}

/// A number of seconds for `field` of at most `max`.
pub(crate) fn seconds_up_to(value: &Bound<'_, PyAny>, field: &str, max: f64) -> PyResult<Duration> {
    let allowed = if max >= MAX_SECONDS {
        "a finite number of seconds from 0 to 1.8e19".to_owned()
    } else {
        format!("a finite number of seconds from 0 to {max}")
    };
    let x = number(value, field, &allowed)?;
    if !(x.is_finite() && (0.0..=max).contains(&x)) {
        return Err(setting(field, x, &allowed));
    }
    Duration::try_from_secs_f64(x).map_err(|_| setting(field, x, &allowed))
}

/// A number of seconds given as a float (already converted by PyO3): finite, 0 or more.
pub(crate) fn seconds_f64(x: f64, field: &str) -> PyResult<Duration> {
    let allowed = "a finite number of seconds from 0 to 1.8e19";
    if !(x.is_finite() && (0.0..=MAX_SECONDS).contains(&x)) {
        return Err(setting(field, x, allowed));
    }
    Duration::try_from_secs_f64(x).map_err(|_| setting(field, x, allowed))
}

/// A float of an int or a float (never a bool: `True` seconds is a mistake).
fn number(value: &Bound<'_, PyAny>, field: &str, allowed: &str) -> PyResult<f64> {
    if value.is_instance_of::<PyBool>()
        || !(value.is_instance_of::<PyInt>() || value.is_instance_of::<PyFloat>())
    {
        return Err(setting(field, repr(value), allowed));
    }
    // An int too large for a float reads as infinity, and is refused as out of range.
    value.extract::<f64>().or(Ok(f64::INFINITY))
}

/// A call's deadline: its seconds, and the value as given (a timeout's message shows it as
/// Python does: `5` or `5.0`).
#[derive(Debug)]
pub(crate) struct Timeout {
    pub(crate) seconds: f64,
    pub(crate) value: Py<PyAny>,
}

/// A call's `timeout`: `None`, or a finite number of seconds above 0.
pub(crate) fn timeout(value: Option<Bound<'_, PyAny>>) -> PyResult<Option<Timeout>> {
    const ALLOWED: &str = "None, or a finite number of seconds above 0";
    let Some(value) = value.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    let seconds = number(&value, "timeout", ALLOWED)?;
    if !(seconds.is_finite() && seconds > 0.0) {
        return Err(setting("timeout", repr(&value), ALLOWED));
    }
    Ok(Some(Timeout {
        seconds,
        value: value.unbind(),
    }))
}

/// An integer for `field` from `min` to `max`.
pub(crate) fn integer(value: &Bound<'_, PyAny>, field: &str, min: u64, max: u64) -> PyResult<u64> {
    let allowed = format!("an integer from {min} to {max}");
    if value.is_instance_of::<PyBool>() || !value.is_instance_of::<PyInt>() {
        return Err(setting(field, repr(value), &allowed));
    }
    match value.extract::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(setting(field, repr(value), &allowed)),
    }
}

/// A value as the error shows it (bounded: a huge int or string is cut).
fn repr(value: &Bound<'_, PyAny>) -> String {
    let text = value
        .repr()
        .map(|r| r.to_string())
        .unwrap_or_else(|_| "<unprintable>".to_owned());
    if text.len() > 80 {
        let cut = (0..=77)
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        format!("{}...", &text[..cut])
    } else {
        text
    }
}
