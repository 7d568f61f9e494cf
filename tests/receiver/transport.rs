//! The HTTP transports: OTLP/HTTP protobuf and JSON, gzip, a chunked body with no
//! `Content-Length` over a real socket (as Node's exporter sends), the answers' formats, and
//! the advisory gate (`GET /v1/tools/{tool}` the pure oracle, `POST /v1/tools/{tool}/claim`).

use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use http_body_util::BodyExt as _;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;
use prost::Message as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tool_health::receiver::Receiver;
use tool_health::{BreakerState, CircuitBreakerConfig, ManualClock, ToolHealthRegistry};
use tower::ServiceExt as _;

use crate::support::{counts, encode, fixture, request, tool_span};

fn app(registry: &Arc<ToolHealthRegistry>) -> axum::Router {
    let receiver = Receiver::new(registry.clone());
    receiver.router().merge(receiver.gate_router())
}

async fn call(
    app: &axum::Router,
    req: Request<Body>,
) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
    let response = app.clone().oneshot(req).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let body = response
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    (status, headers, body)
}

fn post(body: Vec<u8>, content_type: &str) -> Request<Body> {
    Request::post("/v1/traces")
        .header(header::CONTENT_TYPE, content_type)
        .body(Body::from(body))
        .unwrap()
}

fn failures(n: usize) -> Vec<u8> {
    let spans = (0..n)
        .map(|_| {
            tool_span(
                "search",
                Duration::from_millis(30),
                Duration::from_millis(20),
                true,
            )
        })
        .collect();
    encode(&request("my-agent", spans))
}

#[tokio::test]
async fn protobuf_and_json_requests_are_answered_in_their_format() {
    let registry = Arc::new(ToolHealthRegistry::new());
    let app = app(&registry);
    let (status, headers, body) = call(
        &app,
        post(fixture("pydantic-ai-v5-default"), "application/x-protobuf"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_TYPE], "application/x-protobuf");
    let answer = ExportTraceServiceResponse::decode(&*body).unwrap();
    assert_eq!(answer.partial_success, None, "every span read");
    assert_eq!(counts(&registry)["flaky"], (0, 1, 0));

    let json = serde_json::to_vec(
        &opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest::decode(
            &*failures(2),
        )
        .unwrap(),
    )
    .unwrap();
    let (status, headers, body) = call(&app, post(json, "application/json; charset=utf-8")).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    assert_eq!(headers[header::CONTENT_TYPE], "application/json");
    let _: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(counts(&registry)["search"], (0, 2, 0));

    let (status, ..) = call(&app, post(vec![1, 2, 3], "text/plain")).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
}

#[tokio::test]
async fn a_gzip_body_is_read() {
    let registry = Arc::new(ToolHealthRegistry::new());
    let app = app(&registry);
    let mut gz = gzip(&failures(3));
    let req = Request::post("/v1/traces")
        .header(header::CONTENT_TYPE, "application/x-protobuf")
        .header(header::CONTENT_ENCODING, "gzip")
        .body(Body::from(std::mem::take(&mut gz)))
        .unwrap();
    let (status, ..) = call(&app, req).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(registry.breaker_state("search"), BreakerState::Open);
    // A broken gzip stream is the request's fault.
    let req = Request::post("/v1/traces")
        .header(header::CONTENT_TYPE, "application/x-protobuf")
        .header(header::CONTENT_ENCODING, "gzip")
        .body(Body::from(vec![0x1f, 0x8b, 8, 0, 0, 0]))
        .unwrap();
    assert_eq!(call(&app, req).await.0, StatusCode::BAD_REQUEST);
}

/// gzip by hand (the test has no gzip crate of its own): stored deflate blocks, CRC-32.
fn gzip(data: &[u8]) -> Vec<u8> {
    let crc = {
        let mut table = [0u32; 256];
        for (i, t) in table.iter_mut().enumerate() {
            let mut c = i as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
            *t = c;
        }
        let mut c = 0xFFFF_FFFFu32;
        for &b in data {
            c = table[((c ^ u32::from(b)) & 0xFF) as usize] ^ (c >> 8);
        }
        c ^ 0xFFFF_FFFF
    };
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    let chunks: Vec<&[u8]> = data.chunks(65_535).collect();
    for (i, chunk) in chunks.iter().enumerate() {
        out.push(u8::from(i + 1 == chunks.len()));
        let len = chunk.len() as u16;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(chunk);
    }
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out
}

#[tokio::test]
async fn a_chunked_body_without_content_length_is_read_over_a_real_socket() {
    let registry = Arc::new(ToolHealthRegistry::new());
    let receiver = Receiver::new(registry.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = receiver.clone();
    tokio::spawn(async move { server.serve(listener, std::future::pending()).await });
    let body = failures(3);
    let mut raw = Vec::new();
    write!(
        raw,
        "POST /v1/traces HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/x-protobuf\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    for chunk in body.chunks(100) {
        write!(raw, "{:x}\r\n", chunk.len()).unwrap();
        raw.extend_from_slice(chunk);
        raw.extend_from_slice(b"\r\n");
    }
    raw.extend_from_slice(b"0\r\n\r\n");
    let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
    socket.write_all(&raw).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), socket.read_to_end(&mut answer))
        .await
        .unwrap()
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(counts(&registry)["search"], (0, 3, 0));
    assert_eq!(receiver.stats().requests, 1);
}

#[tokio::test]
async fn the_oracle_never_takes_the_probe_nor_creates_a_tool_and_the_claim_does() {
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(1000));
    let registry = Arc::new(
        ToolHealthRegistry::builder()
            .config(CircuitBreakerConfig {
                failure_threshold: 3,
                ..Default::default()
            })
            .clock(clock.clone())
            .build(),
    );
    let app = app(&registry);
    let get = |tool: &str| {
        Request::get(format!("/v1/tools/{tool}"))
            .body(Body::empty())
            .unwrap()
    };
    let claim = |tool: &str| {
        Request::post(format!("/v1/tools/{tool}/claim"))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from("{}"))
            .unwrap()
    };
    let json = |b: &[u8]| serde_json::from_slice::<serde_json::Value>(b).unwrap();

    // Never seen: 404, and the body is the tool fresh, not tracked (the gateway's contract).
    let (status, _, body) = call(&app, get("never_seen")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let v = json(&body);
    assert_eq!(
        (v["available"].clone(), v["tracked"].clone()),
        (true.into(), false.into()),
        "{v}"
    );
    assert_eq!(registry.tracked_tools(), 0, "no ghost breakers");
    // A claim a web page could send (no content type, text/plain) is refused before the gate.
    for content_type in [None, Some("text/plain")] {
        let mut r = Request::post("/v1/tools/never_seen/claim");
        if let Some(t) = content_type {
            r = r.header(header::CONTENT_TYPE, t);
        }
        let (status, _, _) = call(&app, r.body(Body::from("{}")).unwrap()).await;
        assert_eq!(
            status,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "{content_type:?}"
        );
    }
    assert_eq!(
        registry.tracked_tools(),
        0,
        "a refused claim creates nothing"
    );

    call(&app, post(failures(3), "application/x-protobuf")).await;
    let (status, _, body) = call(&app, get("search")).await;
    let v = json(&body);
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        (
            v["available"].clone(),
            v["state"].clone(),
            v["tracked"].clone()
        ),
        (false.into(), "open".into(), true.into())
    );
    let (status, headers, body) = call(&app, claim("search")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    let v = json(&body);
    assert_eq!(
        (v["decision"].clone(), v["refused_by"].clone()),
        ("refused".into(), "tool".into())
    );
    assert!(v["retry_after_ms"].as_u64().unwrap() > 29_000, "{v}");
    assert_eq!(headers[header::RETRY_AFTER], "30");

    clock.advance(Duration::from_secs(31));
    // Asked any number of times, the oracle says available and leaves the probe alone.
    for _ in 0..3 {
        let (_, _, body) = call(&app, get("search")).await;
        assert_eq!(json(&body)["available"], true);
    }
    assert_eq!(registry.breaker_state("search"), BreakerState::Open);
    let (_, _, body) = call(&app, claim("search")).await;
    let v = json(&body);
    assert_eq!(v["decision"], "probe", "{v}");
    assert!(v["probe_id"].as_str().is_some_and(|id| !id.is_empty()));
    assert_eq!(v["lease_ms"], 30_000, "{v}");
    assert_eq!(registry.breaker_state("search"), BreakerState::HalfOpen);
    // The probe is held: everyone else is refused, and the oracle agrees.
    assert_eq!(
        json(&call(&app, claim("search")).await.2)["decision"],
        "refused"
    );
    assert_eq!(json(&call(&app, get("search")).await.2)["available"], false);
    // The claimed call's span ends after the claim and arrives: closed.
    clock.advance(Duration::from_millis(500));
    let ok = encode(&request(
        "my-agent",
        vec![tool_span(
            "search",
            Duration::from_millis(300),
            Duration::from_millis(100),
            false,
        )],
    ));
    call(&app, post(ok, "application/x-protobuf")).await;
    assert_eq!(registry.breaker_state("search"), BreakerState::Closed);
    assert_eq!(
        json(&call(&app, claim("search")).await.2)["decision"],
        "allowed"
    );

    let long = "x".repeat(300);
    assert_eq!(call(&app, get(&long)).await.0, StatusCode::BAD_REQUEST);
    assert_eq!(call(&app, claim(&long)).await.0, StatusCode::BAD_REQUEST);
}

/// What the next endpoint saw: (content type, content encoding, body).
type Seen = Arc<std::sync::Mutex<Vec<(String, Option<String>, Vec<u8>)>>>;

/// A next OTLP endpoint of our own on 127.0.0.1 that keeps what it is sent (answers 200).
async fn sink() -> (String, Seen) {
    let seen: Seen = Arc::default();
    let kept = seen.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(
            move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let kept = kept.clone();
                async move {
                    let h = |n: header::HeaderName| {
                        headers.get(n).map(|v| v.to_str().unwrap().to_owned())
                    };
                    kept.lock().unwrap().push((
                        h(header::CONTENT_TYPE).unwrap_or_default(),
                        h(header::CONTENT_ENCODING),
                        body.to_vec(),
                    ));
                    StatusCode::OK
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1/traces", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_is_forwarded_byte_for_byte_with_its_encoding() {
    let (url, seen) = sink().await;
    let registry = Arc::new(ToolHealthRegistry::new());
    let receiver = Receiver::builder(registry.clone())
        .forward_to(url)
        .build()
        .unwrap();
    let app = receiver.router();
    let pb = fixture("vercel-ai6");
    let gz = gzip(&fixture("langchain-openinference"));
    let json = serde_json::to_vec(
        &opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest::decode(
            &*failures(1),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        call(&app, post(pb.clone(), "application/x-protobuf"))
            .await
            .0,
        StatusCode::OK
    );
    let req = Request::post("/v1/traces")
        .header(header::CONTENT_TYPE, "application/x-protobuf")
        .header(header::CONTENT_ENCODING, "gzip")
        .body(Body::from(gz.clone()))
        .unwrap();
    assert_eq!(call(&app, req).await.0, StatusCode::OK);
    assert_eq!(
        call(&app, post(json.clone(), "application/json")).await.0,
        StatusCode::OK
    );
    // Garbage is refused, and not passed on.
    assert_eq!(
        call(&app, post(vec![0xff; 10], "application/x-protobuf"))
            .await
            .0,
        StatusCode::BAD_REQUEST
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while receiver.stats().forwarded < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "{:?}",
            receiver.stats()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut seen = seen.lock().unwrap().clone();
    seen.sort_by_key(|(_, _, b)| b.len());
    let mut want = vec![
        ("application/x-protobuf".to_owned(), None, pb),
        (
            "application/x-protobuf".to_owned(),
            Some("gzip".to_owned()),
            gz,
        ),
        ("application/json".to_owned(), None, json),
    ];
    want.sort_by_key(|(_, _, b)| b.len());
    assert_eq!(seen, want);
    // And they were read on the way through.
    assert_eq!(counts(&registry)["flaky_handled"], (0, 1, 0));
}

#[tokio::test]
async fn every_route_checks_host_and_origin_and_a_body_a_page_could_send_is_refused() {
    let registry = Arc::new(ToolHealthRegistry::new());
    let app = app(&registry);
    let with = |method: &str, uri: &str, headers: &[(&str, &str)], body: Vec<u8>| {
        let mut r = Request::builder().method(method).uri(uri);
        for (k, v) in headers {
            r = r.header(*k, *v);
        }
        r.body(Body::from(body)).unwrap()
    };
    let routes = [
        ("POST", "/v1/traces", "application/x-protobuf", failures(3)),
        ("GET", "/v1/tools/search", "application/json", Vec::new()),
        (
            "POST",
            "/v1/tools/search/claim",
            "application/json",
            b"{}".to_vec(),
        ),
    ];
    for (method, uri, content_type, body) in &routes {
        let rebound = [
            ("host", "rebind.evil.example:4318"),
            ("content-type", *content_type),
        ];
        let (status, _, _) = call(&app, with(method, uri, &rebound, body.clone())).await;
        assert_eq!(
            status,
            StatusCode::FORBIDDEN,
            "{method} {uri}, DNS rebinding"
        );
        let foreign = [
            ("host", "127.0.0.1:4318"),
            ("origin", "http://evil.example"),
            ("content-type", *content_type),
        ];
        let (status, _, _) = call(&app, with(method, uri, &foreign, body.clone())).await;
        assert_eq!(
            status,
            StatusCode::FORBIDDEN,
            "{method} {uri}, another site's page"
        );
    }
    // Three error spans sent as a page can send them without asking (no content type, or
    // text/plain): refused, nothing recorded.
    for content_type in [None, Some("text/plain")] {
        let mut headers = vec![("host", "127.0.0.1:4318")];
        headers.extend(content_type.map(|t| ("content-type", t)));
        let (status, _, _) = call(&app, with("POST", "/v1/traces", &headers, failures(3))).await;
        assert_eq!(
            status,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "{content_type:?}"
        );
    }
    assert_eq!(registry.tracked_tools(), 0);
    // An exporter, as it sends them: recorded.
    let exporter = [
        ("host", "127.0.0.1:4318"),
        ("content-type", "application/x-protobuf"),
    ];
    let (status, _, _) = call(&app, with("POST", "/v1/traces", &exporter, failures(3))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(registry.breaker_state("search"), BreakerState::Open);
    // Behind a name (a compose service), the guard is told.
    let named = Receiver::builder(registry.clone())
        .guard(
            tool_health::web::HttpGuard::builder()
                .allow_host("receiver:4318")
                .build()
                .unwrap(),
        )
        .build()
        .unwrap()
        .router();
    let compose = [
        ("host", "receiver:4318"),
        ("content-type", "application/x-protobuf"),
    ];
    let (status, _, _) = call(&named, with("POST", "/v1/traces", &compose, failures(1))).await;
    assert_eq!(status, StatusCode::OK);
}
