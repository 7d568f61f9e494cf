//! Building OTLP requests with the generated types, and reading a registry's counts.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::trace::v1::{
    span, status, ResourceSpans, ScopeSpans, Span, Status,
};
use prost::Message as _;
use tool_health::ToolHealthRegistry;

/// A fixture's bytes (a real request, captured from the framework).
pub(crate) fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/receiver/fixtures/{name}/otlp.pb",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// (success, failure, ignored) per tracked tool.
pub(crate) fn counts(registry: &ToolHealthRegistry) -> BTreeMap<String, (u64, u64, u64)> {
    registry
        .health_summary()
        .into_iter()
        .map(|s| {
            (
                s.tool.to_string(),
                (s.success_count, s.failure_count, s.ignored_count),
            )
        })
        .collect()
}

pub(crate) fn kv(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(value) }),
        ..Default::default()
    }
}

pub(crate) fn s(key: &str, value: &str) -> KeyValue {
    kv(key, any_value::Value::StringValue(value.into()))
}

/// Unix nanoseconds of `ago` before now.
pub(crate) fn ago(ago: Duration) -> u64 {
    let t = SystemTime::now() - ago;
    t.duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

/// A GenAI execute_tool span of `tool`, from `start_ago` to `end_ago` before now.
pub(crate) fn tool_span(tool: &str, start_ago: Duration, end_ago: Duration, failed: bool) -> Span {
    Span {
        trace_id: vec![1; 16],
        span_id: (rand_id()).to_be_bytes().to_vec(),
        name: format!("execute_tool {tool}"),
        kind: span::SpanKind::Internal as i32,
        start_time_unix_nano: ago(start_ago),
        end_time_unix_nano: ago(end_ago),
        attributes: vec![
            s("gen_ai.operation.name", "execute_tool"),
            s("gen_ai.tool.name", tool),
        ],
        status: Some(Status {
            code: if failed {
                status::StatusCode::Error as i32
            } else {
                status::StatusCode::Unset as i32
            },
            message: String::new(),
        }),
        ..Default::default()
    }
}

/// A unique non-zero span id.
pub(crate) fn rand_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0x1000);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A request with these spans in one scope.
pub(crate) fn request(scope: &str, spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: scope.into(),
                    ..Default::default()
                }),
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

pub(crate) fn encode(req: &ExportTraceServiceRequest) -> Vec<u8> {
    req.encode_to_vec()
}

/// Spans the OpenTelemetry SDK finished, as the body of one OTLP/protobuf request (what its
/// exporter sends).
pub(crate) fn exported(spans: Vec<opentelemetry_sdk::trace::SpanData>) -> Vec<u8> {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans {
                spans: spans.into_iter().map(Span::from).collect(),
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
    .encode_to_vec()
}
