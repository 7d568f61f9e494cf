//! OTLP/gRPC: the `opentelemetry.proto.collector.trace.v1.TraceService/Export` method as a
//! tonic service. The message is taken as raw bytes (a codec of its own) and read by the same
//! in-place reader as OTLP/HTTP, so one malformed span costs only itself here too.
//!
//! | status | when |
//! |---|---|
//! | `OK` + `ExportTraceServiceResponse` (partial success when spans were rejected) | read |
//! | `INVALID_ARGUMENT` | not an OTLP trace request |
//! | `RESOURCE_EXHAUSTED` (tonic's own, no retry information) | larger than the limit |
//! | `RESOURCE_EXHAUSTED` + `RetryInfo` | the in-flight budget is spent (retried later) |
//! | `UNAVAILABLE` + `RetryInfo` | forwarding is on and its queue is full (retried later) |
//!
//! A request's bytes count against
//! [`Limits::max_in_flight_bytes`](super::Limits::max_in_flight_bytes) as they arrive, frame by
//! frame, before tonic buffers them ([`Charged`]): many large messages sent at once cost the
//! budget, not memory past it (`gateway/tests/gateway/flood.rs` floods 3 connections with 8
//! streams of 8 MB each). A decompressed message is charged for what it grew by.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf as _, BufMut as _, Bytes};
use http_body::{Frame, SizeHint};
use tokio::sync::OwnedSemaphorePermit;
use tonic::body::Body;
use tonic::codec::{Codec, CompressionEncoding, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::server::{Grpc, NamedService, UnaryService};
use tonic::{Request, Response, Status};

use super::answer::{self, Code};
use super::{Counters, Format, IngestError, Receiver};

/// The gRPC method's path.
const EXPORT: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

/// Messages as bytes, both ways.
#[derive(Debug, Clone, Copy, Default)]
struct RawCodec;

#[derive(Debug, Clone, Copy, Default)]
struct RawBytes;

impl Encoder for RawBytes {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for RawBytes {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

impl Codec for RawCodec {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = RawBytes;
    type Decoder = RawBytes;

    fn encoder(&mut self) -> RawBytes {
        RawBytes
    }

    fn decoder(&mut self) -> RawBytes {
        RawBytes
    }
}

/// The OTLP/gRPC trace service of a [`Receiver`] ([`Receiver::grpc_service`]): add it to a
/// `tonic::transport::Server`, or let [`Receiver::serve_grpc`] run one.
#[derive(Debug, Clone)]
pub struct TraceService {
    receiver: Receiver,
}

impl NamedService for TraceService {
    const NAME: &'static str = "opentelemetry.proto.collector.trace.v1.TraceService";
}

/// A status with `RetryInfo`: OTLP exporters retry `RESOURCE_EXHAUSTED` only with it.
fn retry_status(code: Code, message: &str, delay: Duration) -> Status {
    let tonic_code = match code {
        Code::Unavailable => tonic::Code::Unavailable,
        Code::ResourceExhausted => tonic::Code::ResourceExhausted,
        Code::InvalidArgument => tonic::Code::InvalidArgument,
    };
    Status::with_details(
        tonic_code,
        message.to_owned(),
        Bytes::from(answer::status_proto(code, message, Some(delay))),
    )
}

/// The status of a request past the in-flight budget.
fn busy() -> Status {
    retry_status(
        Code::ResourceExhausted,
        "the receiver is busy: retry later",
        Duration::from_secs(1),
    )
}

/// The bytes one request holds against the in-flight budget: taken by its body as frames
/// arrive ([`Charged`]) and by the call for what decompression added, given back when the
/// call has answered.
#[derive(Clone)]
struct Charge {
    receiver: Receiver,
    held: Arc<Mutex<Held>>,
}

#[derive(Default)]
struct Held {
    permit: Option<OwnedSemaphorePermit>,
    bytes: usize,
    /// The budget was spent: the request was refused with back-pressure.
    refused: bool,
}

impl Charge {
    fn new(receiver: Receiver) -> Self {
        Self {
            receiver,
            held: Arc::default(),
        }
    }

    /// Takes `n` more bytes from the budget; `Err` when it is spent.
    fn take(&self, n: usize) -> Result<(), Status> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if n == 0 {
            return Ok(());
        }
        let more = u32::try_from(n).ok().and_then(|n| {
            self.receiver
                .inner
                .in_flight
                .clone()
                .try_acquire_many_owned(n)
                .ok()
        });
        let Some(more) = more else {
            held.refused = true;
            return Err(busy());
        };
        match &mut held.permit {
            Some(p) => p.merge(more),
            None => held.permit = Some(more),
        }
        held.bytes += n;
        Ok(())
    }

    /// Takes what a message of `len` bytes needs beyond what its body already took.
    fn top_up(&self, len: usize) -> Result<(), Status> {
        let have = self
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .bytes;
        self.take(len.max(1).saturating_sub(have))
    }

    fn refused(&self) -> bool {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .refused
    }
}

/// A request body whose data frames are charged against the in-flight budget as they arrive,
/// before tonic buffers them: past the budget the body ends with `RESOURCE_EXHAUSTED` (and
/// retry information), which tonic answers as it is.
struct Charged {
    body: Body,
    charge: Charge,
}

impl http_body::Body for Charged {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled {
            if let Some(data) = frame.data_ref() {
                if let Err(status) = self.charge.take(data.len()) {
                    return Poll::Ready(Some(Err(status)));
                }
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// One `Export` call.
#[derive(Clone)]
struct Export(Charge);

impl UnaryService<Bytes> for Export {
    type Response = Bytes;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Bytes>, Status>> + Send>>;

    fn call(&mut self, request: Request<Bytes>) -> Self::Future {
        let charge = self.0.clone();
        Box::pin(async move { export(&charge, request.into_inner()) })
    }
}

fn export(charge: &Charge, message: Bytes) -> Result<Response<Bytes>, Status> {
    let receiver = &charge.receiver;
    let inner = &receiver.inner;
    Counters::add(&inner.counters.requests, 1);
    // Its bytes were charged as they arrived; a compressed message is charged for what it
    // grew by (the budget counts what the receiver holds).
    charge.top_up(message.len())?;
    let reservation = match &inner.forward {
        None => None,
        Some(f) => match f.reserve(message.len()) {
            Some(r) => Some(r),
            None => {
                Counters::add(&inner.counters.throttled, 1);
                return Err(retry_status(
                    Code::Unavailable,
                    "the next endpoint is not keeping up: retry later",
                    f.retry_hint(),
                ));
            }
        },
    };
    let result = super::feed::ingest(inner, &message, Format::Protobuf);
    receiver.count(&result);
    match result {
        Ok(ingested) => {
            if let (Some(f), Some(r)) = (&inner.forward, reservation) {
                f.send(r, message, "application/x-protobuf", None);
            }
            Ok(Response::new(Bytes::from(answer::response_proto(
                ingested.rejected,
                &ingested.message,
            ))))
        }
        Err(IngestError::Malformed(why)) => Err(Status::invalid_argument(why)),
    }
}

impl tower_service::Service<http::Request<Body>> for TraceService {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let receiver = self.receiver.clone();
        Box::pin(async move {
            if request.uri().path() != EXPORT {
                return Ok(Status::unimplemented("only TraceService/Export is served").into_http());
            }
            let max = receiver.inner.limits.max_request_bytes;
            let mut grpc = Grpc::new(RawCodec)
                .accept_compressed(CompressionEncoding::Gzip)
                .apply_max_message_size_config(Some(max), None);
            let charge = Charge::new(receiver.clone());
            let request = request.map(|body| Charged {
                body,
                charge: charge.clone(),
            });
            let response = grpc.unary(Export(charge.clone()), request).await;
            if charge.refused() {
                Counters::add(&receiver.inner.counters.throttled, 1);
            }
            // The request's bytes go back to the budget here (the forwarder holds its own).
            drop(charge);
            Ok(response)
        })
    }
}

impl Receiver {
    /// The OTLP/gRPC trace service (`opentelemetry.proto.collector.trace.v1.TraceService`),
    /// for a `tonic::transport::Server` of your own:
    /// `Server::builder().add_service(receiver.grpc_service())`.
    pub fn grpc_service(&self) -> TraceService {
        self.start();
        TraceService {
            receiver: self.clone(),
        }
    }

    /// Serves OTLP/gRPC on `listener` (plain text, HTTP/2) until `shutdown` completes.
    pub async fn serve_grpc(
        &self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send,
    ) -> std::io::Result<()> {
        // Answers go out at once (no Nagle delay waiting for the exporter's ACK).
        let incoming =
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
        tonic::transport::Server::builder()
            .add_service(self.grpc_service())
            .serve_with_incoming_shutdown(incoming, shutdown)
            .await
            .map_err(std::io::Error::other)
    }
}
