//! [`ToolHealthSpanProcessor`]: the same outcome inference as [`ToolHealthLayer`](crate::ToolHealthLayer), fed from
//! OpenTelemetry SDK spans (features `span-processor` for `opentelemetry_sdk` 0.33,
//! `span-processor-sdk-0-32` for 0.32).
//!
//! Spans written with the OpenTelemetry API (`tracer.start(..)`, `span.set_status(..)`), spans
//! bridged from `tracing` by tracing-opentelemetry, and frameworks that mark outcomes only
//! through the OpenTelemetry span API (autoagents) are invisible to a `tracing` layer, or
//! their outcome is. Add the processor to the tracer provider they end in:
//!
//! ```
//! # #[cfg(feature = "span-processor")] {
//! use std::sync::Arc;
//! use opentelemetry::trace::{Span as _, Status, Tracer as _, TracerProvider as _};
//! use opentelemetry::KeyValue;
//! use opentelemetry_sdk::trace::SdkTracerProvider;
//! use tool_health::{ToolHealthRegistry, ToolHealthSpanProcessor};
//!
//! let registry = Arc::new(ToolHealthRegistry::new());
//! let provider = SdkTracerProvider::builder()
//!     .with_span_processor(ToolHealthSpanProcessor::new(registry.clone()))
//!     // .with_batch_exporter(exporter) — your exporter, beside it
//!     .build();
//! let tracer = provider.tracer("my-agent");
//!
//! let mut span = tracer.start("execute_tool search");
//! span.set_attribute(KeyValue::new("gen_ai.operation.name", "execute_tool"));
//! span.set_attribute(KeyValue::new("gen_ai.tool.name", "search"));
//! span.set_attribute(KeyValue::new("error.type", "timeout"));
//! span.set_status(Status::error("upstream timed out"));
//! span.end();
//!
//! assert_eq!(registry.snapshot("search").unwrap().failure_count, 1);
//! # }
//! ```
//!
//! # What it reads
//!
//! The conventions are the layer's ([`Convention::builtin`](crate::layer::Convention::builtin),
//! or the builder's), matched on the span's target — tracing-opentelemetry's `target`
//! attribute, else `code.module.name` / `code.namespace`, else the instrumentation scope's
//! name —, its name (a convention reading its tool name from `otel.name` checks that instead:
//! tracing-opentelemetry turns `otel.name` into the span's name) and its attributes. The
//! classification is the same [`DefaultClassifier`](crate::layer::DefaultClassifier) on the
//! same facts, with the span's own data in place of `tracing` fields and events:
//!
//! | the span's | counts as |
//! |---|---|
//! | status `Error` / `Ok` | `otel.status_code` = `error` / `ok` (a failure / a completion marker) |
//! | attributes | the convention's fields: `error.type`, `gen_ai.tool.name`, `gen_ai.tool.call.outcome`, … |
//! | an `exception` event (`exception.type` its error type), an event with `level` = `ERROR` or an `error` attribute | an error event |
//! | an event with a `return` or `error` attribute | a completion marker |
//! | `error.type` = `circuit_breaker_open`, or an `error` text with the refusal | a refusal: nothing recorded |
//!
//! The duration is the span's own (end − start, its SDK's timestamps). Only the span's own
//! events count — not its children's (an ERROR in a child span fails a tool span through the
//! layer, not here). Late verdicts (adk, swiftide bridged by tracing-opentelemetry) are read
//! from the parent span's events when it ends (a call waits until then, or its due time).
//!
//! # One call, two feeds
//!
//! With the layer *and* tracing-opentelemetry feeding a provider with this processor, every
//! `tracing` tool span reaches both. The layer's record wins (it holds the gate's permit):
//!
//! * a span the layer bound a gate decision to carries `tool_health.gate.decision`: skipped;
//! * for the others the layer leaves a mark on its thread when it closes a tool span (its
//!   registry, the tool, the time); tracing-opentelemetry ends the OpenTelemetry span right
//!   after, in the same close, and the processor skips the span that matches the mark.
//!
//! This needs the documented layer order, `registry().with(ToolHealthLayer::new(..))
//! .with(otel_layer)` (the layer closes first). In the other order the processor records
//! first and the call is counted twice. Spans of conventions the layer cannot read
//! ([`Convention::sdk_only`](crate::layer::Convention::sdk_only): autoagents) are the
//! processor's alone.
//!
//! # SDK versions
//!
//! | feature | `SpanProcessor` of | pairs with |
//! |---|---|---|
//! | `span-processor` | `opentelemetry_sdk` 0.33 ([`ToolHealthSpanProcessor`]) | tracing-opentelemetry 0.34, this crate's own |
//! | `span-processor-sdk-0-32` | `opentelemetry_sdk` 0.32 ([`sdk_0_32::ToolHealthSpanProcessor`]) | tracing-opentelemetry 0.33: autoagents-telemetry 0.4 |
//!
//! Another SDK version's provider does not take these processors (the trait is the SDK's).
//! The default build depends on no SDK.

mod sdk;

/// The builder every version shares.
pub(crate) use crate::infer::feed_options::FeedOptions as Builder;

#[cfg(feature = "span-processor")]
mod sdk_0_33 {
    crate::span_processor::sdk::processor_for!(opentelemetry_sdk, opentelemetry, "0.33");
}

#[cfg(feature = "span-processor")]
pub use sdk_0_33::{ToolHealthSpanProcessor, ToolHealthSpanProcessorBuilder};

/// The processor for an `opentelemetry_sdk` 0.32 provider (feature `span-processor-sdk-0-32`):
/// autoagents-telemetry 0.4's, whose tool-call outcomes are only on the OpenTelemetry spans.
///
/// autoagents builds its own provider (SDK 0.32) and takes none from you. To feed a registry,
/// turn its subscriber off (`TelemetryConfig::install_tracing_subscriber = false`) and install
/// tracing-opentelemetry **0.33** with your own SDK 0.32 provider holding this processor:
///
/// ```text
/// let provider = opentelemetry_sdk_0_32::trace::SdkTracerProvider::builder()
///     .with_span_processor(tool_health::span_processor::sdk_0_32::ToolHealthSpanProcessor::new(registry.clone()))
///     .build();
/// tracing_subscriber::registry()
///     .with(tracing_opentelemetry_0_33::layer().with_tracer(provider.tracer("app")))
///     .init();
/// ```
///
/// (This crate's own tracing-opentelemetry is 0.34: autoagents' statuses never reach an SDK
/// 0.33 provider through it — every span would end `Unset`.) `integrations/tests/autoagents.rs`
/// runs it against the real crates.
#[cfg(feature = "span-processor-sdk-0-32")]
pub mod sdk_0_32 {
    crate::span_processor::sdk::processor_for!(opentelemetry_sdk_0_32, opentelemetry_0_32, "0.32");
}
