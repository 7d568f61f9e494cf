//! Shared harness of the layer tests: one fresh registry on a manual clock, and the subscriber
//! stacks every behaviour is checked on (a plain `Registry`, and tracing-opentelemetry with an
//! in-memory exporter in both layer orders). Also the layer's side of `controls.rs` and
//! `policies.rs`, which include this file by path.

#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::Value;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tool_health::{CircuitBreakerConfig, ManualClock, ToolHealthLayer, ToolHealthRegistry};
use tracing::Dispatch;
use tracing_subscriber::layer::SubscriberExt;

/// Where the layer sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stack {
    /// `registry().with(ToolHealthLayer)`.
    Plain,
    /// `registry().with(ToolHealthLayer).with(otel)`: the documented order.
    LayerThenOtel,
    /// `registry().with(otel).with(ToolHealthLayer)`: the wrong order, must degrade gracefully.
    OtelThenLayer,
}

pub const ALL_STACKS: [Stack; 3] = [Stack::Plain, Stack::LayerThenOtel, Stack::OtelThenLayer];
pub const OTEL_STACKS: [Stack; 2] = [Stack::LayerThenOtel, Stack::OtelThenLayer];

/// A registry with `failure_threshold` on a manual clock (cooldown 30 s, lease 10 s).
pub fn registry(failure_threshold: u32) -> (ManualClock, Arc<ToolHealthRegistry>) {
    let clock = ManualClock::new();
    let registry = ToolHealthRegistry::builder()
        .config(CircuitBreakerConfig {
            failure_threshold,
            recovery_duration: std::time::Duration::from_secs(30),
            probe_timeout: std::time::Duration::from_secs(10),
        })
        .clock(clock.clone())
        .build();
    (clock, Arc::new(registry))
}

/// A subscriber stack around `layer`.
pub struct Harness {
    pub stack: Stack,
    pub dispatch: Dispatch,
    pub exporter: Option<InMemorySpanExporter>,
    provider: Option<SdkTracerProvider>,
}

impl Harness {
    pub fn new(stack: Stack, layer: ToolHealthLayer) -> Self {
        if stack == Stack::Plain {
            return Self {
                stack,
                dispatch: Dispatch::new(tracing_subscriber::registry().with(layer)),
                exporter: None,
                provider: None,
            };
        }
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let tracer = provider.tracer("layer-tests");
        let dispatch = match stack {
            Stack::LayerThenOtel => Dispatch::new(
                tracing_subscriber::registry()
                    .with(layer)
                    .with(tracing_opentelemetry::layer().with_tracer(tracer)),
            ),
            _ => Dispatch::new(
                tracing_subscriber::registry()
                    .with(tracing_opentelemetry::layer().with_tracer(tracer))
                    .with(layer),
            ),
        };
        Self {
            stack,
            dispatch,
            exporter: Some(exporter),
            provider: Some(provider),
        }
    }

    /// Runs `f` with this stack as the thread's default subscriber.
    pub fn run<R>(&self, f: impl FnOnce() -> R) -> R {
        tracing::dispatcher::with_default(&self.dispatch, f)
    }

    /// Every exported span (empty without OpenTelemetry).
    pub fn spans(&self) -> Vec<SpanData> {
        self.exporter
            .as_ref()
            .map(|e| e.get_finished_spans().expect("in-memory exporter"))
            .unwrap_or_default()
    }

    /// The one exported span named `name`.
    pub fn span(&self, name: &str) -> SpanData {
        let mut found: Vec<_> = self
            .spans()
            .into_iter()
            .filter(|s| s.name == name)
            .collect();
        assert_eq!(
            found.len(),
            1,
            "{:?}: exactly one span named {name}",
            self.stack
        );
        found.remove(0)
    }
}

/// The string value of attribute `key` on `span`.
pub fn attr(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| match &kv.value {
            Value::String(s) => s.as_str().to_owned(),
            other => other.to_string(),
        })
}

/// `(from, to)` of every `tool_health.breaker.transition` event on `span`.
pub fn transitions(span: &SpanData) -> Vec<(String, String)> {
    span.events
        .iter()
        .filter(|e| e.name == "tool_health.breaker.transition")
        .map(|e| {
            let get = |k: &str| {
                e.attributes
                    .iter()
                    .find(|kv| kv.key.as_str() == k)
                    .map(|kv| kv.value.to_string())
                    .unwrap_or_default()
            };
            (
                get("tool_health.breaker.from"),
                get("tool_health.breaker.to"),
            )
        })
        .collect()
}
