//! An OTLP trace receiver (feature `receiver`): tool health from the traces any agent already
//! exports — Python, TypeScript, anything with an OpenTelemetry SDK — by pointing its
//! `OTEL_EXPORTER_OTLP_ENDPOINT` here. No code in the agent.
//!
//! ```no_run
//! # async fn run() -> std::io::Result<()> {
//! use std::sync::Arc;
//! use tool_health::receiver::Receiver;
//! use tool_health::ToolHealthRegistry;
//!
//! let registry = Arc::new(ToolHealthRegistry::new());
//! let receiver = Receiver::builder(registry.clone())
//!     // .forward_to("http://127.0.0.1:4318/v1/traces")  // the collector you already have
//!     .build()
//!     .expect("valid settings");
//! // OTLP/HTTP (protobuf and JSON) at /v1/traces, on your axum server:
//! let app = axum::Router::new().merge(receiver.router());
//! let http = tokio::net::TcpListener::bind("127.0.0.1:4318").await?;
//! tokio::spawn(async move { axum::serve(http, app).await });
//! // OTLP/gRPC:
//! let grpc = tokio::net::TcpListener::bind("127.0.0.1:4317").await?;
//! receiver.serve_grpc(grpc, std::future::pending()).await
//! # }
//! ```
//!
//! Every span goes through the same inference as [`ToolHealthLayer`](crate::ToolHealthLayer)
//! and the [span processor](crate::span_processor): the conventions of
//! [`Convention::other_languages`](crate::layer::Convention::other_languages) (Pydantic AI, the
//! Vercel AI SDK, LangChain and the OpenAI Agents SDK through OpenInference or OpenLLMetry,
//! LangSmith), then the built-in ones (OpenTelemetry GenAI and MCP, the Rust frameworks). The
//! calls are recorded by their spans' own clock ([`ToolHealthRegistry::record_past`]): the
//! stale-result rules hold by when a call ended, not when its batch arrived, and a span that
//! started after a cooldown ended is the probe — one agent's spans alone bring a tool back.
//! `docs/receiver.md` says what each framework needs and where each is blind.
//!
//! # A pipeline citizen
//!
//! * **Forwarding** ([`ReceiverBuilder::forward_to`]): every request received is sent on,
//!   byte for byte (its content type and encoding kept; gRPC requests as OTLP/HTTP protobuf,
//!   the same message), to the next OTLP/HTTP endpoint — put the receiver between your agents
//!   and the collector you have. The next endpoint's own back-pressure is honoured (retries
//!   with its `Retry-After`); while it cannot keep up and the queue is full, new requests are
//!   answered with back-pressure instead of being dropped.
//! * **Answers**: OTLP's partial success (spans that could not be read are counted as
//!   rejected, the rest are used), `400` / `INVALID_ARGUMENT` for a request that is not OTLP,
//!   `413` / `RESOURCE_EXHAUSTED` (no retry) for one too large, `429` / `RESOURCE_EXHAUSTED`
//!   with retry information while the in-flight budget is spent, `503` / `UNAVAILABLE` with
//!   `Retry-After` while the forwarding queue is full.
//! * **Bounds** ([`Limits`]): request size (decompressed, never read past), bytes in flight,
//!   spans, attributes and events read, tool-name length. One malformed span, a hostile
//!   attribute value (any type, any size, invalid UTF-8) costs only itself.
//!
//! | file | owns |
//! |---|---|
//! | `record.rs` | what the readers fill: a located span, its borrowed fields, a raw value, `WireError` |
//! | `wire.rs` | OTLP/protobuf read in place (no copy), the two levels of malformed input |
//! | `json.rs` | OTLP/JSON into the same borrowed spans |
//! | `span.rs` | a received span as the inference's `SpanView`, values decoded when read; tool names bounded |
//! | `feed.rs` | a request into the inference: located, ordered by end time, recorded by the spans' clock |
//! | `http.rs` | the axum router for `/v1/traces`: content types, gzip, chunked bodies, limits, answers |
//! | `grpc.rs` | the tonic `TraceService` (raw bytes: the same reader), `serve_grpc` |
//! | `gate.rs` | the advisory gate over HTTP: `GET /v1/tools/{tool}` (the pure oracle), `POST /v1/tools/{tool}/claim` (the gate) |
//! | `forward.rs` | the next endpoint: a bounded queue, retries, back-pressure |
//! | `answer.rs` | `ExportTraceServiceResponse` and `google.rpc.Status`, protobuf and JSON |
//! | `limits.rs` | [`Limits`], their ranges, [`ReceiverError`] |

mod answer;
mod feed;
mod forward;
mod gate;
mod grpc;
mod http;
mod json;
mod limits;
mod record;
mod span;
mod wire;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::infer::classify::{DefaultClassifier, OutcomeClassifier};
use crate::infer::conventions::Convention;
use crate::infer::span_core::{Feed, SpanCore};
use crate::registry::ToolHealthRegistry;
use crate::web::HttpGuard;

pub use grpc::TraceService;
pub use limits::{Limits, ReceiverError};

/// The encodings of an OTLP request body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Format {
    /// `application/x-protobuf`: an `ExportTraceServiceRequest`.
    Protobuf,
    /// `application/json`: OTLP/JSON.
    Json,
}

/// What one request gave the inference (see [`Receiver::ingest`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Ingested {
    /// Spans read and given to the inference.
    pub spans: u64,
    /// Spans rejected: malformed, or past [`Limits::max_spans_per_request`] (OTLP's
    /// `rejected_spans`).
    pub rejected: u64,
    /// Why spans were rejected, for the answer's partial success (empty when none were).
    pub message: String,
}

/// Why a request was refused as a whole.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum IngestError {
    /// The body is not an OTLP trace request in the format it claims.
    Malformed(String),
}

impl std::fmt::Display for IngestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Malformed(why) => write!(f, "not an OTLP trace request: {why}"),
        }
    }
}

impl std::error::Error for IngestError {}

/// The receiver's counters since it was built (see [`Receiver::stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ReceiverStats {
    /// Requests read (HTTP and gRPC), refused ones included.
    pub requests: u64,
    /// Spans given to the inference.
    pub spans: u64,
    /// Spans rejected (malformed, past the per-request cap).
    pub rejected_spans: u64,
    /// Requests refused as malformed (400 / `INVALID_ARGUMENT`).
    pub malformed_requests: u64,
    /// Requests refused for their size (413 / `RESOURCE_EXHAUSTED`).
    pub too_large: u64,
    /// Requests answered with back-pressure (429 / 503, `RESOURCE_EXHAUSTED` / `UNAVAILABLE`
    /// with retry information).
    pub throttled: u64,
    /// Spans whose tool name was longer than [`Limits::max_name_len`] (nothing recorded).
    pub names_refused: u64,
    /// Requests the next endpoint accepted.
    pub forwarded: u64,
    /// Requests given up on after the next endpoint refused them or stayed unreachable
    /// (logged at WARN, target `tool_health::receiver`).
    pub forward_failed: u64,
}

#[derive(Debug, Default)]
struct Counters {
    requests: AtomicU64,
    spans: AtomicU64,
    rejected_spans: AtomicU64,
    malformed_requests: AtomicU64,
    too_large: AtomicU64,
    throttled: AtomicU64,
    names_refused: AtomicU64,
    forwarded: AtomicU64,
    forward_failed: AtomicU64,
}

impl Counters {
    fn add(counter: &AtomicU64, n: u64) {
        // Relaxed: independent statistics, read as a snapshot.
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// What every clone of a [`Receiver`] shares.
#[derive(Debug)]
struct Inner {
    core: Arc<SpanCore>,
    limits: Limits,
    /// The fields some convention takes a tool name from.
    name_fields: Box<[Box<str>]>,
    counters: Counters,
    /// Request bytes in flight (one permit per byte).
    in_flight: Arc<tokio::sync::Semaphore>,
    forward: Option<forward::Forwarder>,
    /// The background work (forwarding workers, the flush of waiting calls) is started once,
    /// from inside a runtime.
    started: std::sync::Once,
    /// Who may call the HTTP routes.
    guard: HttpGuard,
}

/// An OTLP trace receiver feeding a [`ToolHealthRegistry`] (see the [module docs](self)).
/// Cheap to clone: clones share everything.
#[derive(Debug, Clone)]
pub struct Receiver {
    inner: Arc<Inner>,
}

/// Builds a [`Receiver`]: conventions, outcome rules, limits, forwarding.
#[derive(Debug)]
#[must_use]
pub struct ReceiverBuilder {
    registry: Arc<ToolHealthRegistry>,
    conventions: Vec<Convention>,
    added: usize,
    default_classifier: DefaultClassifier,
    classifier: Option<ClassifierBox>,
    limits: Limits,
    forward: Option<forward::Config>,
    guard: HttpGuard,
    keys: Option<KeysBox>,
    elsewhere: Option<ElsewhereBox>,
}

struct ElsewhereBox(crate::infer::span_core::RecordedElsewhere);

impl std::fmt::Debug for ElsewhereBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("recorded_elsewhere")
    }
}

struct KeysBox(crate::infer::span_core::KeyMap);

impl std::fmt::Debug for KeysBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("map_tool_names")
    }
}

struct ClassifierBox(Arc<dyn OutcomeClassifier>);

impl std::fmt::Debug for ClassifierBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OutcomeClassifier")
    }
}

impl ReceiverBuilder {
    /// Adds a convention, tried before the others (one of the same name is replaced in
    /// place). A convention with a [`filter`](crate::layer::Convention::filter) (a `tracing`
    /// metadata predicate) never matches a received span.
    pub fn convention(mut self, convention: Convention) -> Self {
        crate::infer::conventions::add_to(&mut self.conventions, &mut self.added, convention);
        self
    }

    /// Replaces every convention (default:
    /// [`Convention::other_languages`](crate::layer::Convention::other_languages), then
    /// [`Convention::builtin`](crate::layer::Convention::builtin)).
    pub fn conventions(mut self, conventions: impl IntoIterator<Item = Convention>) -> Self {
        self.conventions = conventions.into_iter().collect();
        self.added = 0;
        self
    }

    /// Strict mode (default off), as the layer's: a span with no completion marker was
    /// cancelled. Most other languages' frameworks mark nothing on success (their conventions
    /// say so), so it changes little here.
    pub fn strict(mut self, strict: bool) -> Self {
        self.default_classifier = self.default_classifier.strict(strict);
        self
    }

    /// The `error.type` values that are the caller's fault, as the layer's (default
    /// [`DEFAULT_CALLER_ERRORS`](crate::layer::DEFAULT_CALLER_ERRORS); the other languages'
    /// conventions read their frameworks' caller errors as `invalid_arguments`).
    pub fn caller_errors<I>(mut self, errors: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        self.default_classifier = self.default_classifier.caller_errors(errors);
        self
    }

    /// Replaces the outcome rules, as the layer's.
    pub fn classifier(mut self, classifier: impl OutcomeClassifier) -> Self {
        self.classifier = Some(ClassifierBox(Arc::new(classifier)));
        self
    }

    /// How a span's tool name maps to the registry key its call is recorded under: `map(name)`
    /// = `Some(key)` records it under `key`, `None` under the name itself. For a server whose
    /// own gate names tools its own way — the gateway answers `/v1/tools/py__add` for the MCP
    /// tool keyed `py/add` — so that one tool has one breaker whichever feed reports it (an
    /// agent's span naming `py__add` feeds `py/add`). Runs for each recorded call (not on the
    /// hot path of any gate).
    pub fn map_tool_names(
        mut self,
        map: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.keys = Some(KeysBox(Arc::new(map)));
        self
    }

    /// Spans of calls the application recorded another way: `recorded(span_id)` true (the
    /// span's 64-bit id) records nothing for that span, nor for a span of the same tool it
    /// nests in (one call, seen from the caller's side). For a server that is itself on the
    /// call's path — the gateway served the `tools/call` whose `_meta.traceparent` named that
    /// span, and recorded it then — so that the caller's own spans of it, exported here too,
    /// do not count it again.
    pub fn recorded_elsewhere(
        mut self,
        recorded: impl Fn(u64) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.elsewhere = Some(ElsewhereBox(Arc::new(recorded)));
        self
    }

    /// The limits (default [`Limits::default`]).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Forwards every request received, unchanged, to the OTLP/HTTP traces endpoint `url`
    /// (the full URL, as `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`: `http://collector:4318/v1/traces`).
    pub fn forward_to(mut self, url: impl Into<String>) -> Self {
        self.forward
            .get_or_insert_with(forward::Config::default)
            .url = url.into();
        self
    }

    /// A header sent with every forwarded request (an API key, say).
    pub fn forward_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.forward
            .get_or_insert_with(forward::Config::default)
            .headers
            .push((name.into(), value.into()));
        self
    }

    /// Who may call the HTTP routes ([`router`](Receiver::router),
    /// [`gate_router`](Receiver::gate_router)); default [`HttpGuard::loopback`]: `Host` must
    /// be a loopback name, and no web page of another origin may call them. Give it the names
    /// exporters reach the receiver by when it listens beyond loopback (`collector:4318` in a
    /// compose file). The gRPC service needs none: no browser speaks gRPC to it.
    pub fn guard(mut self, guard: HttpGuard) -> Self {
        self.guard = guard;
        self
    }

    /// The receiver; an error names a setting out of its range.
    pub fn build(self) -> Result<Receiver, ReceiverError> {
        self.limits.validate()?;
        let forward = match self.forward {
            Some(config) => Some(forward::Forwarder::new(
                config,
                self.limits.max_forward_queue_bytes,
            )?),
            None => None,
        };
        let mut name_fields: Vec<Box<str>> = self
            .conventions
            .iter()
            .flat_map(|c| c.name_fields().map(Box::from).collect::<Vec<_>>())
            .collect();
        name_fields.sort();
        name_fields.dedup();
        let core = SpanCore::new(
            self.registry,
            self.conventions,
            self.classifier.map(|c| c.0),
            self.default_classifier,
            Feed::Remote,
            self.keys.map(|k| k.0),
            self.elsewhere.map(|e| e.0),
        );
        Ok(Receiver {
            inner: Arc::new(Inner {
                core,
                in_flight: Arc::new(tokio::sync::Semaphore::new(self.limits.max_in_flight_bytes)),
                limits: self.limits,
                name_fields: name_fields.into_boxed_slice(),
                counters: Counters::default(),
                forward,
                started: std::sync::Once::new(),
                guard: self.guard,
            }),
        })
    }
}

impl Receiver {
    /// A receiver feeding `registry` with the default conventions and limits, forwarding
    /// nowhere.
    pub fn new(registry: Arc<ToolHealthRegistry>) -> Self {
        match Self::builder(registry).build() {
            Ok(r) => r,
            // The defaults are in range (a unit test pins it).
            Err(e) => unreachable!("default receiver settings: {e}"),
        }
    }

    /// A builder for conventions, outcome rules, limits and forwarding.
    pub fn builder(registry: Arc<ToolHealthRegistry>) -> ReceiverBuilder {
        let mut conventions = Convention::other_languages();
        conventions.extend(Convention::builtin());
        ReceiverBuilder {
            registry,
            conventions,
            added: 0,
            default_classifier: DefaultClassifier::new(),
            classifier: None,
            limits: Limits::default(),
            forward: None,
            guard: HttpGuard::loopback(),
            keys: None,
            elsewhere: None,
        }
    }

    /// The registry this receiver feeds.
    pub fn registry(&self) -> &Arc<ToolHealthRegistry> {
        self.inner.core.registry()
    }

    /// The limits it runs with.
    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// The conventions, in the order they are tried.
    pub fn convention_names(&self) -> Vec<String> {
        self.inner
            .core
            .convention_names()
            .map(str::to_owned)
            .collect()
    }

    /// Its counters so far.
    pub fn stats(&self) -> ReceiverStats {
        let c = &self.inner.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ReceiverStats {
            requests: get(&c.requests),
            spans: get(&c.spans),
            rejected_spans: get(&c.rejected_spans),
            malformed_requests: get(&c.malformed_requests),
            too_large: get(&c.too_large),
            throttled: get(&c.throttled),
            names_refused: get(&c.names_refused),
            forwarded: get(&c.forwarded),
            forward_failed: get(&c.forward_failed),
        }
    }

    /// How many calls wait to be recorded: MCP client spans waiting for their parent span,
    /// calls waiting for a framework's late verdict (each at most
    /// [`DEFERRED_VERDICT_BOUND`](crate::layer::DEFERRED_VERDICT_BOUND)).
    pub fn waiting(&self) -> usize {
        self.inner.core.waiting()
    }

    /// Records every waiting call now, as its span showed it (before shutting down).
    pub fn flush(&self) {
        self.inner.core.flush_all();
    }

    /// Reads one request body (already decompressed) into the registry, with no transport:
    /// what the HTTP and gRPC services do with each request, for other transports and tests.
    /// Nothing is forwarded.
    pub fn ingest(&self, body: &[u8], format: Format) -> Result<Ingested, IngestError> {
        Counters::add(&self.inner.counters.requests, 1);
        let result = feed::ingest(&self.inner, body, format);
        self.count(&result);
        result
    }

    fn count(&self, result: &Result<Ingested, IngestError>) {
        let c = &self.inner.counters;
        match result {
            Ok(i) => {
                Counters::add(&c.spans, i.spans);
                Counters::add(&c.rejected_spans, i.rejected);
            }
            Err(_) => Counters::add(&c.malformed_requests, 1),
        }
    }

    /// The advisory gate's router on this receiver's registry: `GET /v1/tools/{tool}` (the
    /// pure oracle: available or not, `retry_after_ms`; never takes the probe; 404 for a tool
    /// never seen) and `POST /v1/tools/{tool}/claim` (the gate: `allowed`, `probe` with its
    /// `probe_id`, or `503` `refused` with `retry_after_ms`). JSON, the same contract as
    /// `tool-health-gateway`'s gate; see `docs/receiver.md`. Behind the receiver's
    /// [`guard`](ReceiverBuilder::guard). A server that already serves these paths (the
    /// gateway) mounts only [`router`](Self::router).
    pub fn gate_router(&self) -> axum::Router {
        self.inner.guard.apply(gate::router(
            self.registry().clone(),
            self.inner.limits.max_name_len,
        ))
    }

    /// Serves OTLP/HTTP (`POST /v1/traces`) and the advisory gate
    /// ([`gate_router`](Self::gate_router)) on `listener` until `shutdown` completes, then
    /// records every call still waiting ([`flush`](Self::flush)). The small standalone server
    /// (`examples/receiver.rs`); a server of your own merges the routers instead.
    pub async fn serve(
        &self,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let app = self.router().merge(self.gate_router());
        // Answers go out at once (no Nagle delay waiting for the exporter's ACK).
        let result = axum::serve(crate::web::nodelay(listener), app)
            .with_graceful_shutdown(shutdown)
            .await;
        self.flush();
        result
    }

    /// Starts the background work once, from inside a tokio runtime: the forwarding workers
    /// and a flush of calls whose wait is due (every 250 ms while any waits).
    fn start(&self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        self.inner.started.call_once(|| {
            if let Some(f) = &self.inner.forward {
                f.start(&runtime, Arc::downgrade(&self.inner));
            }
            let weak = Arc::downgrade(&self.inner);
            runtime.spawn(async move {
                let mut tick = tokio::time::interval(std::time::Duration::from_millis(250));
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tick.tick().await;
                    let Some(inner) = weak.upgrade() else {
                        return; // the receiver is gone
                    };
                    if inner.core.waiting() > 0 {
                        inner.core.flush_waiting();
                    }
                }
            });
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_in_range_and_each_limit_is_checked() {
        Limits::default().validate().unwrap();
        let r = Arc::new(ToolHealthRegistry::new());
        let err = Receiver::builder(r.clone())
            .limits(Limits {
                max_name_len: 0,
                ..Limits::default()
            })
            .build()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "receiver limit `max_name_len` = 0 is out of range (1 to 65,536)"
        );
        let err = Receiver::builder(r.clone())
            .limits(Limits {
                max_in_flight_bytes: 1024,
                ..Limits::default()
            })
            .build()
            .unwrap_err();
        assert!(matches!(
            err,
            ReceiverError::Limit {
                field: "max_in_flight_bytes",
                ..
            }
        ));
        let err = Receiver::builder(r)
            .forward_to("ftp://x/v1/traces")
            .build()
            .unwrap_err();
        assert!(matches!(err, ReceiverError::ForwardUrl { .. }), "{err}");
    }
}
