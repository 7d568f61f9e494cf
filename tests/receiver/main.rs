//! The OTLP receiver (feature `receiver`): the captured requests of real agent frameworks
//! replayed (`fixtures/`, copied from the captures: real request bytes), recovery and stale
//! results by the spans' clock, hostile input, and the transports (HTTP protobuf and JSON,
//! gzip, chunked bodies, gRPC through the OpenTelemetry SDK's own exporter, forwarding).
//!
//! The real agents themselves (Pydantic AI, the Vercel AI SDK, LangChain) run in
//! `tests/receiver_agents/`.

mod fixtures;
mod hostile;
mod recovery;
mod support;
mod transport;
