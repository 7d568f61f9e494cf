//! Keep AI-agent tools from being hammered while they are sick.
//!
//! Per tool, `tool-health` keeps lock-free health stats (success rate, an EWMA of success, a
//! score and a status) and a circuit breaker (closed → open → half-open with a single leased
//! probe). The gate refuses calls to a sick tool *softly* — the model is told
//! [`REFUSAL_MESSAGE`] and the run goes on — probes it once after a cooldown, and recovers on
//! its own.
//!
//! ```
//! use std::time::Duration;
//! use tool_health::{BreakerState, HealthStatus, ManualClock, ToolHealthRegistry, REFUSAL_MESSAGE};
//!
//! let clock = ManualClock::new();
//! let registry = ToolHealthRegistry::builder().clock(clock.clone()).build();
//!
//! // The database behind a tool dies: three failures in a row trip its breaker.
//! for _ in 0..3 {
//!     assert!(registry.allow_request("sql_query"));
//!     registry.record_failure("sql_query", Duration::from_secs(2));
//! }
//! assert!(!registry.allow_request("sql_query"));
//! assert_eq!(registry.get_health_status("sql_query"), HealthStatus::Unhealthy);
//! println!("to the model: {REFUSAL_MESSAGE}");
//!
//! // After the cooldown one caller gets the probe; it succeeds and the breaker closes.
//! clock.advance(Duration::from_secs(30));
//! assert!(registry.allow_request("sql_query"));
//! registry.record_success("sql_query", Duration::from_millis(40));
//! assert_eq!(registry.breaker_state("sql_query"), BreakerState::Closed);
//! ```
//!
//! # Where things are
//!
//! What an application names is at the crate root: the registry and its builder, the gate's
//! values ([`GateDecision`], [`Permit`]), outcomes and reports, the call helper
//! ([`ToolHealthRegistry::call`] → [`ToolCall`]), policies and controls, the router, the clock,
//! [`ToolHealthLayer`] and [`publish_metrics`]. Each other concept has a module of its own:
//!
//! | module | for |
//! |---|---|
//! | [`layer`] | span conventions, the outcome classifier, span attribute names and `error.type` values |
//! | [`metrics`] | instrument names |
//! | [`observe`] | observers of calls and transitions, the transition log's target |
//! | [`coordination`] | what a coordinator of several replicas reads and moves (`registry.coordination()`) |
//! | [`past`] | records of calls reported after the fact, by the call's own clock ([`ToolHealthRegistry::record_past`]) |
//! | `receiver` | feature `receiver`: an OTLP trace receiver (HTTP and gRPC) feeding the registry from any agent's spans |
//! | `otlp` | features `otlp-http` / `otlp-grpc`: one-call OTLP setup |
//! | `mcp` | feature `mcp`: an MCP client behind the breaker |
//! | `span_feed` | feature `span-feed`: finished spans made outside the crate (the Python package's processor) into the same inference, no SDK |
//! | `span_processor` | features `span-processor` (SDK 0.33, [`ToolHealthSpanProcessor`] at the root too) and `span-processor-sdk-0-32`: the same inference fed from OpenTelemetry SDK spans |
//! | `fleet` | feature `fleet`: decisions shared between replicas over Valkey or Redis |
//! | `status` | feature `status`: a live status page, the tools as JSON, an event stream (axum); `/metrics` with `prometheus` |
//! | `web` | features `status` / `receiver`: who may call those routers (`Host`, `Origin`, content types), one guard for every route |
//!
//! `ARCHITECTURE.md` draws the layers and follows one tool call through the files; `docs/` has
//! the guides.
//!
//! # Interactions to know (properties, not bugs)
//!
//! 1. **The gate keys on the requested name; recording keys on the resolved name.** A
//!    middleware that renames tools (or routes with [`HealthRouter`]) can split the two key
//!    spaces: gate and record the same name — the one actually called.
//! 2. **Everything retry-shaped re-fires per attempt.** Three failing retries record three
//!    failures, enough to open a breaker with the default threshold. Usually right (the tool
//!    is failing), but know it.
//! 3. **Repeated refusals by a safety layer count as failures if you record them as such.**
//!    Once the breaker opens, the gate refuses first and the model sees "temporarily
//!    unavailable" instead of the safety layer's reason. Record such blocks as
//!    [`CallOutcome::Ignored`] if they should not count.
//! 4. **Zero threshold ≠ never trip** in spirit: `failure_threshold: 0` disables tripping, but
//!    the consecutive-failure counter keeps counting (and shows in snapshots).
//! 5. **`is_tool_available` and `allow_request` agree at every instant**, expiry-aware
//!    half-open included; the first never consumes the probe. Property tests pin this.
//!
//! # Hot path
//!
//! After the first record of a tool name, the gate and the record paths take no lock and
//! allocate nothing: a guard-free index lookup (plain loads), then atomics on the tool's entry
//! (`tests/zero_alloc.rs` pins it with a counting allocator). A [`ToolHandle`] (from
//! [`ToolHealthRegistry::handle`]) skips the lookup. `BENCHMARKS.md` has the figures.

#![forbid(unsafe_code)]

// The layers, bottom to top, are drawn in ARCHITECTURE.md and enforced by
// scripts/check_layers.py (rustfmt keeps this list alphabetical).
mod breaker;
mod call;
mod call_helper;
mod clock;
mod control;
#[cfg(any(feature = "otlp-http", feature = "fleet-tls", feature = "receiver"))]
mod cpu;
#[cfg(any(feature = "_otlp", feature = "fleet"))]
mod environment;
#[cfg(feature = "fleet")]
pub mod fleet;
mod hook;
mod infer;
pub mod layer;
#[cfg(feature = "mcp")]
pub mod mcp;
pub mod metrics;
#[cfg(feature = "_otlp")]
pub mod otlp;
mod policy;
#[cfg(feature = "receiver")]
pub mod receiver;
mod registry;
mod router;
mod semconv;
#[cfg(feature = "span-feed")]
pub mod span_feed;
#[cfg(any(feature = "span-processor", feature = "span-processor-sdk-0-32"))]
pub mod span_processor;
mod stats;
#[cfg(feature = "status")]
pub mod status;
mod ticks;
#[cfg(any(feature = "status", feature = "receiver"))]
pub mod web;

// The crate root: what an application names. Everything else lives in the module of its
// concept (the crate docs' "Where things are"); the old root names of moved items stay as
// hidden aliases so that code written against them still compiles.
pub use breaker::{BreakerState, Recorded, Transition, TransitionReason};
pub use call::{CallOutcome, CallReport, GateDecision, NotRecorded, Permit, REFUSAL_MESSAGE};
pub use call_helper::{AllFailures, CallError, ClassifyError, ErrorClass, ToolCall};
pub use clock::{Clock, ManualClock, SystemClock};
pub use control::ToolControl;
pub use layer::ToolHealthLayer;
pub use metrics::publish_metrics;
pub use policy::{
    Apply, Backoff, CircuitBreakerConfig, JitterSource, SettingError, ToolPolicy, TripPolicy,
};
pub use registry::{
    NameError, RegistryBuilder, ToolHandle, ToolHealthRegistry, ToolHealthSnapshot, UnavailableTool,
};
pub use router::{HealthRouter, HealthRouterBuilder};
#[cfg(feature = "span-processor")]
pub use span_processor::ToolHealthSpanProcessor;
pub use stats::HealthStatus;

pub use registry::coordination;
pub use registry::past;

/// Watching a registry: observers of every call and transition, the transition log's target,
/// and the overflow count past the tool cap.
///
/// An observer is registered with [`ToolHealthRegistry::add_observer`]; it runs synchronously
/// on the thread that records (keep it short, never block). Without observers nothing is paid
/// on the record path but one relaxed load.
pub mod observe {
    pub use crate::registry::{
        CallEvent, Escaped, EvictedTool, HealthObserver, OverflowStats, LOG_TARGET,
    };
}

// Hidden aliases of names that moved off the root (see the modules named).
#[doc(hidden)]
pub use coordination::{CoordinationView, ProbeHold, RemoteOpen};
#[doc(hidden)]
pub use layer::{PANIC_ERROR_TYPE, REFUSAL_ERROR_TYPE, TIMEOUT_ERROR_TYPE};
#[doc(hidden)]
pub use observe::{CallEvent, EvictedTool, HealthObserver, OverflowStats, LOG_TARGET};
#[doc(hidden)]
pub use policy::WINDOW_BUCKETS;
#[doc(hidden)]
pub use registry::DEFAULT_MAX_TOOLS;
#[doc(hidden)]
pub use stats::{DEGRADED_SCORE, EWMA_SCALE, HEALTHY_SCORE};

/// The README's code blocks, compiled and run as doctests (so are the `docs/` pages').
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

#[cfg(doctest)]
#[doc = include_str!("../docs/spans.md")]
struct SpansDoctests;

#[cfg(doctest)]
#[doc = include_str!("../docs/call-helper.md")]
struct CallHelperDoctests;

#[cfg(doctest)]
#[doc = include_str!("../docs/controls.md")]
struct ControlsDoctests;

#[cfg(doctest)]
#[doc = include_str!("../docs/frameworks.md")]
struct FrameworksDoctests;

#[cfg(all(doctest, feature = "otlp-http"))]
#[doc = include_str!("../docs/opentelemetry.md")]
struct OpenTelemetryDoctests;

#[cfg(doctest)]
#[doc = include_str!("../docs/testing.md")]
struct TestingDoctests;

/// docs/receiver.md's code blocks, compiled as doctests (feature `receiver`).
#[cfg(all(doctest, feature = "receiver"))]
#[doc = include_str!("../docs/receiver.md")]
struct ReceiverDoctests;

/// docs/mcp.md's code blocks, compiled and run as doctests (feature `mcp`).
#[cfg(all(doctest, feature = "mcp"))]
#[doc = include_str!("../docs/mcp.md")]
struct McpDocDoctests;

#[cfg(all(doctest, feature = "prometheus"))]
#[doc = include_str!("../docs/status.md")]
struct StatusDoctests;

/// `docs/untrusted-input.md`'s code blocks, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../docs/untrusted-input.md")]
struct UntrustedInputDoctests;
