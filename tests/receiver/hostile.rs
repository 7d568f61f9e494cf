//! Hostile input: garbage, oversized bodies, a stream of a million distinct tool names,
//! attributes of every type, broken spans inside sound envelopes. Each is answered the OTLP way
//! (an error for the request, or partial success), memory stays bounded, and the real tools in
//! the same requests are still counted and protected.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use futures_util::StreamExt as _;
use http_body_util::BodyExt as _;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, ArrayValue, KeyValueList};
use prost::Message as _;
use tool_health::receiver::{Format, IngestError, Receiver};
use tool_health::{BreakerState, ToolHealthRegistry};
use tower::ServiceExt as _;

use crate::support::{counts, encode, kv, request, s, tool_span};

const MS: fn(u64) -> Duration = Duration::from_millis;

async fn post(app: &axum::Router, body: Body) -> (StatusCode, Vec<u8>) {
    let req = Request::post("/v1/traces")
        .header(header::CONTENT_TYPE, "application/x-protobuf")
        .body(body)
        .unwrap();
    let response = app.clone().oneshot(req).await.unwrap();
    let status = response.status();
    (
        status,
        response
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec(),
    )
}

fn three_failures_of(tool: &str) -> Vec<opentelemetry_proto::tonic::trace::v1::Span> {
    (0..3)
        .map(|_| tool_span(tool, MS(30), MS(20), true))
        .collect()
}

#[tokio::test]
async fn garbage_is_refused_as_a_whole_with_an_otlp_error() {
    let registry = Arc::new(ToolHealthRegistry::new());
    let receiver = Receiver::new(registry.clone());
    let app = receiver.router();
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    for len in [1usize, 7, 64, 4096, 100_000] {
        let garbage: Vec<u8> = (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed >> 24) as u8 | 0x80 // never a clean end of a varint
            })
            .collect();
        let (status, body) = post(&app, Body::from(garbage.clone())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{len} bytes");
        // The body is a google.rpc.Status: code 3 (INVALID_ARGUMENT) in field 1.
        assert_eq!(&body[..2], &[0x08, 3], "{len} bytes");
        assert!(matches!(
            receiver.ingest(&garbage, Format::Protobuf),
            Err(IngestError::Malformed(_))
        ));
        assert!(receiver.ingest(&garbage, Format::Json).is_err());
    }
    assert!(registry.health_summary().is_empty());
}

#[tokio::test]
async fn a_100_mb_body_is_refused_without_being_read_past_the_limit() {
    let registry = Arc::new(ToolHealthRegistry::new());
    let receiver = Receiver::new(registry.clone());
    let app = receiver.router();
    // Declared: refused before reading.
    let req = Request::post("/v1/traces")
        .header(header::CONTENT_TYPE, "application/x-protobuf")
        .header(header::CONTENT_LENGTH, 100u64 << 20)
        .body(Body::empty())
        .unwrap();
    assert_eq!(
        app.clone().oneshot(req).await.unwrap().status(),
        StatusCode::PAYLOAD_TOO_LARGE
    );
    // Chunked, 100 MB of 1 MB frames: the reader stops at the limit (8 MiB) and the frames
    // after it are never produced.
    let produced = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = produced.clone();
    let frames = futures_util::stream::iter(0..100).map(move |_| {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok::<_, std::io::Error>(vec![0x0a; 1 << 20])
    });
    let (status, _) = post(&app, Body::from_stream(frames)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    let n = produced.load(std::sync::atomic::Ordering::Relaxed);
    assert!(n <= 10, "{n} MB produced for an 8 MiB limit");
    assert_eq!(receiver.stats().too_large, 2);
    // The real tool after it is still protected.
    let (status, _) = post(
        &app,
        Body::from(encode(&request("agent", three_failures_of("search")))),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(registry.breaker_state("search"), BreakerState::Open);
}

#[test]
fn a_million_distinct_tool_names_stay_bounded_and_the_real_tool_is_protected() {
    let registry = Arc::new(ToolHealthRegistry::new());
    let receiver = Receiver::new(registry.clone());
    let cap = registry.max_tools();
    // The real tool is in use before the flood (a tool first seen after the cap is filled is
    // counted in the overflow, as any registry's: `RegistryBuilder::evictable` frees idle names).
    let ok = encode(&request(
        "agent",
        vec![tool_span("search", MS(30), MS(20), false)],
    ));
    receiver.ingest(&ok, Format::Protobuf).unwrap();
    let mut sent = 0usize;
    let mut batch = 0usize;
    while sent < 1_000_000 {
        let mut spans: Vec<_> = (0..50_000)
            .map(|i| tool_span(&format!("t{}", sent + i), MS(30), MS(20), i % 2 == 0))
            .collect();
        sent += spans.len();
        // The real tool's failures arrive in the middle of the flood.
        if batch == 10 {
            spans.extend(three_failures_of("search"));
        }
        batch += 1;
        let body = encode(&request("agent", spans));
        let ingested = receiver.ingest(&body, Format::Protobuf).unwrap();
        assert_eq!(ingested.rejected, 0);
    }
    assert!(
        registry.tracked_tools() <= cap,
        "{} > {cap}",
        registry.tracked_tools()
    );
    assert_eq!(registry.breaker_state("search"), BreakerState::Open);
    assert!(!registry.is_tool_available("search"));
    assert!(receiver.stats().spans >= 1_000_003);
}

#[test]
fn attributes_of_every_type_cost_only_themselves() {
    let registry = Arc::new(ToolHealthRegistry::new());
    let receiver = Receiver::new(registry.clone());
    use any_value::Value as V;
    let hostile: Vec<V> = vec![
        V::IntValue(-1),
        V::BoolValue(true),
        V::DoubleValue(f64::NAN),
        V::BytesValue(vec![0xff; 10_000]),
        V::StringValue(String::new()),
        V::StringValue("x".repeat(1 << 20)),
        V::StringValue("tool\u{0}with\nnewlines\u{202e}".into()),
        V::ArrayValue(ArrayValue {
            values: vec![
                AnyValue {
                    value: Some(V::StringValue("a".into()))
                };
                1000
            ],
        }),
        V::KvlistValue(KeyValueList {
            values: vec![s("gen_ai.tool.name", "nested"); 100],
        }),
    ];
    let mut spans = three_failures_of("search");
    for (i, value) in hostile.into_iter().enumerate() {
        let mut span = tool_span("placeholder", MS(30), MS(20), true);
        span.name = format!("execute_tool hostile{i}");
        // The tool's name as every type, and junk in every other attribute the conventions read.
        span.attributes = vec![
            s("gen_ai.operation.name", "execute_tool"),
            kv("gen_ai.tool.name", value.clone()),
            kv("error.type", value.clone()),
            kv("otel.status_code", value.clone()),
            kv("http.response.status_code", value.clone()),
            kv("tool.name", value.clone()),
            kv("openinference.span.kind", value),
        ];
        spans.push(span);
    }
    spans.extend((0..3).map(|_| tool_span("weather", MS(30), MS(20), false)));
    let ingested = receiver
        .ingest(&encode(&request("agent", spans)), Format::Protobuf)
        .unwrap();
    assert_eq!(ingested.rejected, 0, "{}", ingested.message);
    assert_eq!(registry.breaker_state("search"), BreakerState::Open);
    assert_eq!(counts(&registry)["weather"], (3, 0, 0));
    // A name that is not a string names no tool; a 1 MiB one is over the limit; the rest are
    // bounded names (escaped where they are shown).
    assert!(registry.tracked_tools() <= 2 + 9);
    assert!(registry
        .health_summary()
        .iter()
        .all(|t| t.tool.len() <= 256));
    assert!(receiver.stats().names_refused >= 1);
}

#[tokio::test]
async fn a_broken_span_or_invalid_utf8_is_rejected_alone_with_partial_success() {
    let registry = Arc::new(ToolHealthRegistry::new());
    let receiver = Receiver::new(registry.clone());
    let app = receiver.router();
    let mut spans = three_failures_of("search");
    spans.insert(1, tool_span("BROKEN", MS(30), MS(20), true));
    spans.insert(2, tool_span("UTF8", MS(30), MS(20), true));
    let mut body = encode(&request("agent", spans));
    // Inside the first span: the name field's tag (field 5, length-delimited: 0x2a) turned into
    // wire type 7, which does not exist; its envelope's length is untouched.
    let name = b"execute_tool BROKEN";
    let at = body.windows(name.len()).position(|w| w == name).unwrap();
    assert_eq!(body[at - 2], 0x2a);
    body[at - 2] = 0x2f;
    // The second: its tool name is not UTF-8 (same length, so every envelope stays sound).
    for w in [b"execute_tool UTF8".as_slice(), b"UTF8"] {
        let at = body.windows(w.len()).rposition(|x| x == w).unwrap();
        let end = at + w.len();
        body[end - 4..end].copy_from_slice(&[0xff, 0xfe, 0xc0, 0x80]);
    }
    let (status, answer) = post(&app, Body::from(body)).await;
    assert_eq!(status, StatusCode::OK);
    let answer = ExportTraceServiceResponse::decode(&*answer).unwrap();
    let partial = answer.partial_success.expect("partial success");
    assert!(partial.rejected_spans >= 1, "{partial:?}");
    assert!(!partial.error_message.is_empty());
    // The three real failures around them still tripped the tool.
    assert_eq!(registry.breaker_state("search"), BreakerState::Open);
    assert_eq!(counts(&registry)["search"], (0, 3, 0));
}
