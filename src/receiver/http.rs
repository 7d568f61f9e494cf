//! OTLP/HTTP: `POST /v1/traces` as an axum router, protobuf (`application/x-protobuf`) and
//! OTLP/JSON (`application/json`), plain or gzip (`Content-Encoding: gzip`), with or without a
//! `Content-Length` (Node's exporter sends chunked bodies): the body is read frame by frame,
//! never past [`Limits::max_request_bytes`](super::Limits::max_request_bytes), and every byte
//! held counts against the in-flight budget while the request is handled.
//!
//! | answer | when |
//! |---|---|
//! | `200` + `ExportTraceServiceResponse` (partial success when spans were rejected) | read |
//! | `400` + `google.rpc.Status` | not an OTLP trace request (garbage, broken envelopes, bad gzip) |
//! | `413` | larger than the limit, compressed or not (not retried) |
//! | `415` | another content type or encoding, or none |
//! | `429` + `Retry-After: 1` | the in-flight budget is spent (retried later) |
//! | `503` + `Retry-After` | forwarding is on and its queue is full (retried later) |
//!
//! Error bodies are `google.rpc.Status`, in the request's format (protobuf for anything else).

use std::io::Read as _;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use bytes::Bytes;
use http_body_util::BodyExt as _;
use tokio::sync::OwnedSemaphorePermit;

use super::answer::{self, Code};
use super::{Counters, Format, IngestError, Receiver};

/// How long an exporter throttled for the in-flight budget should wait.
const RETRY_BUSY: Duration = Duration::from_secs(1);

const PROTOBUF: &str = "application/x-protobuf";
const JSON: &str = "application/json";

/// The router: `POST /v1/traces`, behind the receiver's guard.
pub(super) fn router(receiver: Receiver) -> Router {
    let guard = receiver.inner.guard.clone();
    guard.apply(
        Router::new()
            .route("/v1/traces", post(export))
            .with_state(receiver),
    )
}

/// An answer in the request's format.
fn reply(status: StatusCode, format: Format, body: Vec<u8>) -> Response {
    let content_type = match format {
        Format::Protobuf => PROTOBUF,
        Format::Json => JSON,
    };
    (
        status,
        [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
        body,
    )
        .into_response()
}

/// An error answer (`google.rpc.Status`), with `Retry-After` when the exporter should retry.
fn error(
    status: StatusCode,
    format: Format,
    code: Code,
    message: &str,
    retry: Option<Duration>,
) -> Response {
    let body = match format {
        Format::Protobuf => answer::status_proto(code, message, retry),
        Format::Json => answer::status_json(code, message, retry),
    };
    let mut response = reply(status, format, body);
    if let Some(delay) = retry {
        let secs = delay.as_secs().max(1);
        if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
            response.headers_mut().insert(header::RETRY_AFTER, v);
        }
    }
    response
}

/// The request's format, from its content type (`None`: unsupported). OTLP exporters always
/// send one; a body without one is what a web page can send without a preflight.
fn format_of(content_type: Option<&HeaderValue>) -> Option<Format> {
    let v = content_type?;
    let media = v.to_str().ok()?.split(';').next()?.trim();
    if media.eq_ignore_ascii_case(PROTOBUF) || media.eq_ignore_ascii_case("application/protobuf") {
        Some(Format::Protobuf)
    } else if media.eq_ignore_ascii_case(JSON) {
        Some(Format::Json)
    } else {
        None
    }
}

/// Why a body could not be read.
enum BodyError {
    TooLarge,
    Busy,
    Broken(String),
}

/// Bytes held against the in-flight budget: permits taken as the bytes arrive.
struct Held {
    permit: Option<OwnedSemaphorePermit>,
}

impl Held {
    fn take(&mut self, receiver: &Receiver, n: usize) -> Result<(), BodyError> {
        if n == 0 {
            return Ok(());
        }
        let n = u32::try_from(n).map_err(|_| BodyError::TooLarge)?;
        let more = receiver
            .inner
            .in_flight
            .clone()
            .try_acquire_many_owned(n)
            .map_err(|_| BodyError::Busy)?;
        match &mut self.permit {
            Some(p) => p.merge(more),
            None => self.permit = Some(more),
        }
        Ok(())
    }
}

/// Reads the body frame by frame (no `Content-Length` needed), at most `max` bytes.
async fn read_body(
    receiver: &Receiver,
    body: Body,
    max: usize,
    held: &mut Held,
) -> Result<Vec<u8>, BodyError> {
    let mut body = body;
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| BodyError::Broken(e.to_string()))?;
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        if out.len() + data.len() > max {
            return Err(BodyError::TooLarge);
        }
        held.take(receiver, data.len())?;
        out.extend_from_slice(&data);
    }
    Ok(out)
}

/// A gzip body, decompressed: at most `max` bytes, each counted against the budget.
fn gunzip(
    receiver: &Receiver,
    gz: &[u8],
    max: usize,
    held: &mut Held,
) -> Result<Vec<u8>, BodyError> {
    let mut decoder = flate2::read::GzDecoder::new(gz);
    let mut out = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let n = decoder
            .read(&mut chunk)
            .map_err(|e| BodyError::Broken(format!("invalid gzip body: {e}")))?;
        if n == 0 {
            return Ok(out);
        }
        if out.len() + n > max {
            return Err(BodyError::TooLarge);
        }
        held.take(receiver, n)?;
        out.extend_from_slice(&chunk[..n]);
    }
}

/// `POST /v1/traces`.
async fn export(State(receiver): State<Receiver>, request: Request) -> Response {
    receiver.start();
    let inner = &receiver.inner;
    Counters::add(&inner.counters.requests, 1);
    let (parts, body) = request.into_parts();
    let Some(format) = format_of(parts.headers.get(header::CONTENT_TYPE)) else {
        return error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Format::Protobuf,
            Code::InvalidArgument,
            "Content-Type must be application/x-protobuf or application/json",
            None,
        );
    };
    let encoding = parts.headers.get(header::CONTENT_ENCODING).cloned();
    let gzip = match encoding.as_ref().map(|v| v.to_str().map(str::trim)) {
        None => false,
        Some(Ok(e)) if e.is_empty() || e.eq_ignore_ascii_case("identity") => false,
        Some(Ok(e)) if e.eq_ignore_ascii_case("gzip") => true,
        Some(_) => {
            return error(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format,
                Code::InvalidArgument,
                "content encoding must be gzip or none",
                None,
            )
        }
    };
    let max = inner.limits.max_request_bytes;
    let too_large = |receiver: &Receiver| {
        Counters::add(&receiver.inner.counters.too_large, 1);
        error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format,
            Code::ResourceExhausted,
            &format!("request larger than the receiver's limit of {max} bytes"),
            None,
        )
    };
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return too_large(&receiver);
    }
    let mut held = Held { permit: None };
    let busy = |receiver: &Receiver| {
        Counters::add(&receiver.inner.counters.throttled, 1);
        error(
            StatusCode::TOO_MANY_REQUESTS,
            format,
            Code::ResourceExhausted,
            "the receiver is busy: retry later",
            Some(RETRY_BUSY),
        )
    };
    let raw = match read_body(&receiver, body, max, &mut held).await {
        Ok(b) => b,
        Err(BodyError::TooLarge) => return too_large(&receiver),
        Err(BodyError::Busy) => return busy(&receiver),
        Err(BodyError::Broken(why)) => {
            Counters::add(&inner.counters.malformed_requests, 1);
            return error(
                StatusCode::BAD_REQUEST,
                format,
                Code::InvalidArgument,
                &why,
                None,
            );
        }
    };
    let raw = Bytes::from(raw);
    let plain = if gzip {
        match gunzip(&receiver, &raw, max, &mut held) {
            Ok(b) => Bytes::from(b),
            Err(BodyError::TooLarge) => return too_large(&receiver),
            Err(BodyError::Busy) => return busy(&receiver),
            Err(BodyError::Broken(why)) => {
                Counters::add(&inner.counters.malformed_requests, 1);
                return error(
                    StatusCode::BAD_REQUEST,
                    format,
                    Code::InvalidArgument,
                    &why,
                    None,
                );
            }
        }
    } else {
        raw.clone()
    };
    // Room to forward it first: a request that cannot be passed on is not taken in (the
    // exporter retries it, and it would be counted twice).
    let reservation = match &inner.forward {
        None => None,
        Some(f) => match f.reserve(raw.len()) {
            Some(r) => Some(r),
            None => {
                Counters::add(&inner.counters.throttled, 1);
                return error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format,
                    Code::Unavailable,
                    "the next endpoint is not keeping up: retry later",
                    Some(f.retry_hint()),
                );
            }
        },
    };
    let result = super::feed::ingest(inner, &plain, format);
    receiver.count(&result);
    drop(plain);
    drop(held); // the bytes in flight are the forwarder's (its own budget) from here
    match result {
        Ok(ingested) => {
            if let (Some(f), Some(r)) = (&inner.forward, reservation) {
                let content_type = match format {
                    Format::Protobuf => PROTOBUF,
                    Format::Json => JSON,
                };
                f.send(r, raw, content_type, gzip.then_some("gzip"));
            }
            let body = match format {
                Format::Protobuf => answer::response_proto(ingested.rejected, &ingested.message),
                Format::Json => answer::response_json(ingested.rejected, &ingested.message),
            };
            reply(StatusCode::OK, format, body)
        }
        Err(IngestError::Malformed(why)) => error(
            StatusCode::BAD_REQUEST,
            format,
            Code::InvalidArgument,
            &why,
            None,
        ),
    }
}

impl Receiver {
    /// The axum router serving OTLP/HTTP traces at `POST /v1/traces` (see `http.rs`'s table of
    /// answers). Merge it into your server's router: `app.merge(receiver.router())`.
    pub fn router(&self) -> Router {
        self.start();
        router(self.clone())
    }
}
