//! `publish_metrics` for an OpenTelemetry Python meter: the crate's own
//! [`tool_health::publish_metrics`] runs against a Rust `Meter` whose instrument provider
//! collects each instrument's description and callbacks ([`MetricSource`]); the Python side
//! creates the same instruments on its meter — names, units, descriptions, the GenAI bucket
//! boundaries — and hands their measurements over:
//!
//! * observable gauges and counters: the Python callback calls [`MetricSource::collect`], which
//!   runs the crate's callbacks (they read the registry's atomics) and returns
//!   `(value, attributes)` pairs — the same series, zeros, overflow and never-decreasing
//!   counters as in Rust;
//! * the duration histogram: the crate records each finished call into it (a registry
//!   observer); [`MetricSource::attach`] gives it the Python histogram's `record`, called with
//!   the GIL for each call.

use std::borrow::Cow;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use opentelemetry::metrics::{
    AsyncInstrument, AsyncInstrumentBuilder, Callback, Histogram, HistogramBuilder,
    InstrumentProvider, Meter, ObservableCounter, ObservableGauge, SyncInstrument,
};
use opentelemetry::{KeyValue, Value};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::registry::Registry;

/// A measurement, whatever the instrument's number type.
#[derive(Debug, Clone, Copy)]
enum Num {
    F(f64),
    I(i64),
    U(u64),
}

impl From<f64> for Num {
    fn from(x: f64) -> Self {
        Num::F(x)
    }
}

impl From<i64> for Num {
    fn from(x: i64) -> Self {
        Num::I(x)
    }
}

impl From<u64> for Num {
    fn from(x: u64) -> Self {
        Num::U(x)
    }
}

type Measurements = Vec<(Num, Vec<KeyValue>)>;
type Observe = Box<dyn Fn(&mut Measurements) + Send + Sync>;

/// What an observable instrument's callbacks observe during one collection.
struct Collector<T>(Mutex<Vec<(T, Vec<KeyValue>)>>);

impl<T: Send> AsyncInstrument<T> for Collector<T> {
    fn observe(&self, measurement: T, attributes: &[KeyValue]) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((measurement, attributes.to_vec()));
    }
}

/// The crate's callbacks of one observable instrument, as one collection.
fn observe<T: Into<Num> + Send + 'static>(callbacks: Vec<Callback<T>>) -> Observe {
    Box::new(move |out: &mut Measurements| {
        let collector = Collector(Mutex::new(Vec::new()));
        for callback in &callbacks {
            // A panic in a callback would be the crate's bug: observe nothing from it.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| callback(&collector)));
        }
        let observed = collector
            .0
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        out.extend(observed.into_iter().map(|(v, a)| (v.into(), a)));
    })
}

/// The duration histogram's measurements, handed to the Python histogram's `record`.
#[derive(Default)]
struct HistogramSink {
    record: OnceLock<Py<PyAny>>,
}

impl SyncInstrument<f64> for HistogramSink {
    fn measure(&self, measurement: f64, attributes: &[KeyValue]) {
        let Some(record) = self.record.get() else {
            return;
        };
        Python::attach(|py| {
            if let Ok(attrs) = dict(py, attributes) {
                // An exporter's error is not the call's: never raised into the record path.
                let _ = record.call1(py, (measurement, attrs));
            }
        });
    }
}

/// One instrument the crate's `publish_metrics` registered: what the Python meter creates.
#[pyclass(module = "tool_health", frozen)]
pub(crate) struct MetricSource {
    /// "gauge", "counter" or "histogram".
    #[pyo3(get)]
    kind: &'static str,
    #[pyo3(get)]
    name: String,
    #[pyo3(get)]
    unit: String,
    #[pyo3(get)]
    description: String,
    /// The histogram's explicit bucket boundaries (the GenAI ones), else `None`.
    #[pyo3(get)]
    boundaries: Option<Vec<f64>>,
    observe: Option<Observe>,
    sink: Option<Arc<HistogramSink>>,
}

impl std::fmt::Debug for MetricSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricSource")
            .field("kind", &self.kind)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

fn text(s: Option<Cow<'static, str>>) -> String {
    s.map(Cow::into_owned).unwrap_or_default()
}

impl MetricSource {
    fn observable<T: Into<Num> + Send + 'static>(
        kind: &'static str,
        name: Cow<'static, str>,
        unit: Option<Cow<'static, str>>,
        description: Option<Cow<'static, str>>,
        callbacks: Vec<Callback<T>>,
    ) -> Self {
        Self {
            kind,
            name: name.into_owned(),
            unit: text(unit),
            description: text(description),
            boundaries: None,
            observe: Some(observe(callbacks)),
            sink: None,
        }
    }
}

#[pymethods]
impl MetricSource {
    /// An observable instrument's measurements now: `(value, attributes)` pairs.
    fn collect<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let mut out = Vec::new();
        if let Some(observe) = &self.observe {
            observe(&mut out);
        }
        let list = PyList::empty(py);
        for (value, attrs) in out {
            let value = match value {
                Num::F(x) => x.into_pyobject(py)?.into_any(),
                Num::I(i) => i.into_pyobject(py)?.into_any(),
                Num::U(u) => u.into_pyobject(py)?.into_any(),
            };
            list.append((value, dict(py, &attrs)?))?;
        }
        Ok(list)
    }

    /// The histogram's `record(value, attributes)` callable, called for each finished call
    /// from now on (once: a second call is ignored).
    fn attach(&self, record: Py<PyAny>) {
        if let Some(sink) = &self.sink {
            let _ = sink.record.set(record);
        }
    }

    fn __repr__(&self) -> String {
        format!("MetricSource(kind={:?}, name={:?})", self.kind, self.name)
    }
}

/// Attributes as a Python dict (OpenTelemetry Python's attribute values).
fn dict<'py>(py: Python<'py>, attributes: &[KeyValue]) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for kv in attributes {
        let key = kv.key.as_str();
        match &kv.value {
            Value::Bool(b) => d.set_item(key, *b)?,
            Value::I64(i) => d.set_item(key, *i)?,
            Value::F64(x) => d.set_item(key, *x)?,
            Value::String(s) => d.set_item(key, s.as_str())?,
            other => d.set_item(key, other.to_string())?,
        }
    }
    Ok(d)
}

/// The instrument provider of the bridge meter: it records what is asked of it.
#[derive(Default)]
struct Bridge {
    sources: Mutex<Vec<MetricSource>>,
}

impl Bridge {
    fn push(&self, source: MetricSource) {
        self.sources
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(source);
    }
}

impl InstrumentProvider for Bridge {
    fn f64_observable_gauge(
        &self,
        b: AsyncInstrumentBuilder<'_, ObservableGauge<f64>, f64>,
    ) -> ObservableGauge<f64> {
        self.push(MetricSource::observable(
            "gauge",
            b.name,
            b.unit,
            b.description,
            b.callbacks,
        ));
        ObservableGauge::new()
    }

    fn i64_observable_gauge(
        &self,
        b: AsyncInstrumentBuilder<'_, ObservableGauge<i64>, i64>,
    ) -> ObservableGauge<i64> {
        self.push(MetricSource::observable(
            "gauge",
            b.name,
            b.unit,
            b.description,
            b.callbacks,
        ));
        ObservableGauge::new()
    }

    fn u64_observable_gauge(
        &self,
        b: AsyncInstrumentBuilder<'_, ObservableGauge<u64>, u64>,
    ) -> ObservableGauge<u64> {
        self.push(MetricSource::observable(
            "gauge",
            b.name,
            b.unit,
            b.description,
            b.callbacks,
        ));
        ObservableGauge::new()
    }

    fn u64_observable_counter(
        &self,
        b: AsyncInstrumentBuilder<'_, ObservableCounter<u64>, u64>,
    ) -> ObservableCounter<u64> {
        self.push(MetricSource::observable(
            "counter",
            b.name,
            b.unit,
            b.description,
            b.callbacks,
        ));
        ObservableCounter::new()
    }

    fn f64_observable_counter(
        &self,
        b: AsyncInstrumentBuilder<'_, ObservableCounter<f64>, f64>,
    ) -> ObservableCounter<f64> {
        self.push(MetricSource::observable(
            "counter",
            b.name,
            b.unit,
            b.description,
            b.callbacks,
        ));
        ObservableCounter::new()
    }

    fn f64_histogram(&self, b: HistogramBuilder<'_, Histogram<f64>>) -> Histogram<f64> {
        let sink = Arc::new(HistogramSink::default());
        self.push(MetricSource {
            kind: "histogram",
            name: b.name.into_owned(),
            unit: text(b.unit),
            description: text(b.description),
            boundaries: b.boundaries,
            observe: None,
            sink: Some(sink.clone()),
        });
        Histogram::new(sink)
    }
}

/// The instruments the crate's `publish_metrics` registers for `registry`, to be created on a
/// Python meter (`tool_health.publish_metrics` does it).
#[pyfunction]
pub(crate) fn metric_sources(registry: &Bound<'_, Registry>) -> Vec<MetricSource> {
    let bridge = Arc::new(Bridge::default());
    // `Meter::new` is the API's constructor for a meter of a given instrument provider (what an
    // SDK calls; hidden from the API's docs, public for SDKs): this bridge is one.
    let meter = Meter::new(bridge.clone());
    tool_health::publish_metrics(&registry.get().inner, &meter);
    let sources = std::mem::take(
        &mut *bridge
            .sources
            .lock()
            .unwrap_or_else(PoisonError::into_inner),
    );
    sources
}
