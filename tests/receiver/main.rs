//! The OTLP receiver (feature `receiver`): the captured requests of real agent frameworks
//! replayed (`fixtures/`, copied from the captures: real request bytes), recovery and stale
//! results by the spans' clock, hostile input, and the transports (HTTP protobuf and JSON,
//! gzip, chunked bodies over a real socket, the advisory gate, forwarding byte for byte).
//!
//! OTLP/gRPC from the OpenTelemetry SDK's own exporter: `tests/receiver_grpc.rs`. The real
//! agents themselves (Pydantic AI, the Vercel AI SDK, LangChain) and Rotel: `tests/agents/`.

mod fixtures;
mod hostile;
mod late_storm;
mod own;
mod recovery;
mod support;
mod transport;
