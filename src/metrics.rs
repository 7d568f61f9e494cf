//! Publishing health as OpenTelemetry metrics.
//!
//! [`publish_metrics`] registers five instruments on a [`Meter`]; every series carries
//! `gen_ai.tool.name`:
//!
//! | name | instrument | unit | other attributes |
//! |---|---|---|---|
//! | `tool_health.score` | observable gauge (f64) | `1` | — |
//! | `tool_health.breaker.state` | observable gauge (i64) | `1` | `tool_health.breaker.state` = `closed` / `open` / `half_open`: 1 for the current state, 0 for the others |
//! | `tool_health.calls` | observable counter (u64) | `{call}` | `tool_health.outcome` = `success` / `failure` / `refused` / `cancelled`; shadow-mode refusals as `refused` with `enforced = false` |
//! | `tool_health.breaker.transitions` | observable counter (u64) | `{transition}` | `tool_health.breaker.from`, `tool_health.breaker.to` |
//! | `gen_ai.execute_tool.duration` | histogram (f64) | `s` | `error.type` on failed calls only; [`DURATION_BOUNDARIES`] |
//!
//! With feature `mcp`, one more instrument reports the MCP servers' breakers (kept apart from
//! the tools': a server is never a `gen_ai.tool.name` series): `tool_health.server.breaker.state`,
//! an observable gauge (i64) with `mcp.server.name` and `tool_health.breaker.state` (1 for the
//! current state, 0 for the others), one series per state per server once a client named it.
//!
//! ```
//! use std::sync::Arc;
//! use opentelemetry::metrics::MeterProvider as _;
//! use opentelemetry_sdk::metrics::SdkMeterProvider;
//! use tool_health::{publish_metrics, ToolHealthRegistry};
//!
//! let registry = Arc::new(ToolHealthRegistry::new());
//! let provider = SdkMeterProvider::builder().build(); // add your OTLP reader here
//! publish_metrics(&registry, &provider.meter("tool-health"));
//! ```
//!
//! # Cost
//!
//! * **Gauges and counters are observable**: their callbacks read the registry's atomics when
//!   the SDK collects (every export interval), so they add nothing to the gate or record paths.
//!   The callbacks hold a [`Weak`] reference: once the registry is dropped they observe nothing.
//!   They take no lock (the registry's map is lock-free), never block and never panic.
//! * **The duration histogram is synchronous**: `publish_metrics` adds a
//!   [`HealthObserver`] to the registry, and every finished call is
//!   recorded once. The tool name attribute is built once per tool (an `Arc<str>` cached in a
//!   lock-free map) and borrowed afterwards, so a successful call allocates nothing here; a
//!   failed call allocates its `error.type` value. The cache holds the tracked tools only: an
//!   evicted tool's name leaves it ([`HealthObserver::on_evict`]), and a collection drops any
//!   straggler, so it stays bounded by the live tools however the tool set churns.
//! * **Without `publish_metrics` nothing is paid**: the registry has no observer and its hot
//!   path does one relaxed load to find that out.
//! * **A collection costs what the SDK charges per series**: twelve series per tracked tool,
//!   re-aggregated by the SDK at each collection (observable instruments), once per export
//!   interval, on the exporter's thread. `BENCHMARKS.md` has the figures against the SDK's own
//!   floor for the same series.
//!
//! # What is counted
//!
//! * `tool_health.calls` counts successes and failures (the calls that feed the breaker),
//!   refusals (calls the gate turned away) and cancellations (calls started and never
//!   finished: a dropped future, an outer timeout, a strict-mode span without a completion
//!   marker; not in the duration histogram). Calls recorded as
//!   [`CallOutcome::Ignored`] (the caller's fault) are not counted there;
//!   they appear in the duration histogram with their `error.type`.
//! * `gen_ai.execute_tool.duration` records every call that reached the tool — successes,
//!   failures and ignored calls, not refusals (they did not run). A call that failed carries
//!   `error.type`: the value the tracing layer read from the span, or `_OTHER` when none was
//!   given (the semantic conventions' fallback).
//! * `tool_health.breaker.state` is expiry-aware: a half-open breaker whose probe lease ran out
//!   reads `open`, exactly like [`ToolHealthRegistry::breaker_state`].
//! * Every tracked tool reports every series (zeros included: all three states, outcomes and
//!   the four state-machine edges), so series never appear mid-run and rate queries see their
//!   first increase.
//! * **Counters never go down.** Between two collections that both report a tool, each of its
//!   `tool_health.calls` and `tool_health.breaker.transitions` series is at least what it was
//!   (a decrease is a negative delta: the SDK's delta temporality would overflow on it).
//!   [`ToolHealthRegistry::reset`] zeroes what snapshots read, not what is exported; a tool
//!   evicted and tracked again before the next collection continues its series from where the
//!   evicted entry left them (its counts are carried over, by name, until that collection). A
//!   tool evicted and absent from a collection has ended its series: the SDK forgets it, and
//!   if it comes back later its series start again from zero (a new series for a delta
//!   reader; for a cumulative one, a counter reset after a gap, which backends handle).
//!
//! # Overflow
//!
//! Tools past the registry's cap ([`RegistryBuilder::max_tools`](crate::RegistryBuilder::max_tools))
//! are not tracked individually: they appear as one overflow series per instrument and
//! outcome, with `otel.metric.overflow = true` and `gen_ai.tool.name = "_OTHER"`, never as new
//! series. They share one overflow breaker: from the first overflow on, `tool_health.calls`
//! reports its successes, failures, refusals and cancellations, and `tool_health.breaker.state`
//! its state, in the `_OTHER` series; their durations go to the histogram's `_OTHER` series.
//!
//! Mind the SDK's own cardinality limit (2000 series per instrument by default): with all
//! series reported, `tool_health.breaker.transitions` has four per tool, so more than about 500
//! tracked tools need a higher limit (an SDK view) or a lower registry cap.

use std::collections::HashMap;
use std::fmt;
use std::slice;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use opentelemetry::metrics::{AsyncInstrument, Histogram, Meter};
use opentelemetry::{Key, KeyValue, Value};

use crate::breaker::{BreakerState, Transition};
use crate::call::CallOutcome;
use crate::registry::{CallEvent, EvictedTool, HealthObserver, ToolHealthRegistry};
use crate::semconv::{
    ENFORCED, ERROR_TYPE, GATE_SOURCE, METRIC_OVERFLOW as OVERFLOW, OTHER as OTHER_ERROR, OUTCOME,
    SOURCE_FLEET, TOOL_NAME, TRANSITION_FROM as FROM, TRANSITION_TO as TO,
};

/// The MCP servers' breaker gauge (feature `mcp`; see the module docs).
#[cfg(feature = "mcp")]
pub use crate::semconv::METRIC_SERVER_BREAKER_STATE as SERVER_BREAKER_STATE;
pub use crate::semconv::{
    METRIC_BREAKER_STATE as BREAKER_STATE, METRIC_CALLS as CALLS, METRIC_DURATION as DURATION,
    METRIC_SCORE as SCORE, METRIC_TRANSITIONS as TRANSITIONS, OTHER as OVERFLOW_TOOL_NAME,
};

/// The explicit bucket boundaries of [`DURATION`], in seconds: the ones the OpenTelemetry GenAI
/// semantic conventions advise for operation durations.
pub const DURATION_BOUNDARIES: [f64; 14] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];

/// The instrumentation scope (meter name) the metrics are published under by this crate's own
/// setups (`otlp`, the status router's Prometheus endpoint), which their cardinality views match.
pub const METER_SCOPE: &str = "tool_health";

/// Series per tracked tool the cardinality limit leaves room for, per instrument: the largest
/// instrument reports five per tool (`tool_health.calls`: four outcomes and the shadow
/// refusals), the duration histogram one plus one per `error.type`.
pub const SERIES_PER_TOOL: usize = 8;

/// The SDK cardinality limit this crate's setups give each of its instruments:
/// [`SERIES_PER_TOOL`] series for each tool the registry can track, plus the overflow series.
/// The SDK's default (2,000 per instrument) would fold the series of tools past about 500 into
/// its own overflow series, silently.
pub fn cardinality_limit(max_tools: usize) -> usize {
    max_tools
        .saturating_add(1)
        .saturating_mul(SERIES_PER_TOOL)
        .max(2_000)
}

/// The outcomes `tool_health.calls` reports, in order.
const CALL_OUTCOMES: [CallOutcome; 4] = [
    CallOutcome::Success,
    CallOutcome::Failure,
    CallOutcome::Refused,
    CallOutcome::Cancelled,
];

/// Registers the tool-health instruments on `meter` (see the [module docs](self)).
///
/// Gauges and counters read `registry` when the SDK collects, through a weak reference; the
/// duration histogram is recorded on every call from now on. Call it once per meter: a second
/// call on the same meter registers the callbacks again and the SDK reports the sum.
pub fn publish_metrics(registry: &Arc<ToolHealthRegistry>, meter: &Meter) {
    let names = Arc::new(ToolNames::default());
    let calls = Arc::new(Monotone::<6>::default());
    let transitions = Arc::new(Monotone::<5>::default());

    meter
        .f64_observable_gauge(SCORE)
        .with_unit("1")
        .with_description("Tool health score: 0.3 × success rate + 0.7 × EWMA of success")
        .with_callback(observe(registry, &names, |reg, names, obs| {
            reg.for_each_tool(|tool, view| {
                names.with(tool, |name| {
                    obs.observe(view.stats().score(), slice::from_ref(name));
                });
            });
        }))
        .build();

    meter
        .i64_observable_gauge(BREAKER_STATE)
        .with_unit("1")
        .with_description("Circuit breaker state: 1 for the current state, 0 for the others")
        .with_callback(observe(registry, &names, |reg, names, obs| {
            reg.for_each_tool(|tool, view| {
                let current = view.state();
                names.with(tool, |name| {
                    for state in BreakerState::ALL {
                        let attrs = [name.clone(), KeyValue::new(BREAKER_STATE, state.as_str())];
                        obs.observe(i64::from(state == current), &attrs);
                    }
                });
            });
            // The overflow breaker, once the cap was reached.
            reg.overflow_view(|view| {
                let current = view.state();
                for state in BreakerState::ALL {
                    let [a, b] = overflow_attrs();
                    let attrs = [a, b, KeyValue::new(BREAKER_STATE, state.as_str())];
                    obs.observe(i64::from(state == current), &attrs);
                }
            });
        }))
        .build();

    // The MCP servers' own breakers (feature `mcp`): a registry of their own, never among the
    // tools' series. Nothing is reported until a client names a server.
    #[cfg(feature = "mcp")]
    {
        let weak = Arc::downgrade(registry);
        meter
            .i64_observable_gauge(SERVER_BREAKER_STATE)
            .with_unit("1")
            .with_description(
                "MCP server circuit breaker state: 1 for the current state, 0 for the others",
            )
            .with_callback(move |obs| {
                let Some(reg) = weak.upgrade() else {
                    return;
                };
                let Some(servers) = reg.servers_if_any() else {
                    return;
                };
                servers.for_each_tool(|server, view| {
                    let current = view.state();
                    for state in BreakerState::ALL {
                        let attrs = [
                            KeyValue::new(crate::semconv::MCP_SERVER_NAME, server.to_owned()),
                            KeyValue::new(BREAKER_STATE, state.as_str()),
                        ];
                        obs.observe(i64::from(state == current), &attrs);
                    }
                });
            })
            .build();
    }

    meter
        .u64_observable_counter(CALLS)
        .with_unit("{call}")
        .with_description(
            "Tool calls by outcome: success, failure, refused (by the breaker), cancelled \
             (started, never finished)",
        )
        .with_callback(observe(registry, &names, {
            let calls = Arc::clone(&calls);
            move |reg, names, obs| {
                let coordinated = reg.coordination().is_coordinated();
                calls.collect(|series| {
                    reg.for_each_tool(|tool, view| {
                        let raw = view.raw();
                        let [success, failure, refused, cancelled, shadow_refused, fleet_refused] =
                            series.observe(
                                tool,
                                [
                                    raw.success,
                                    raw.failure,
                                    // The fleet's refusals have a series of their own.
                                    raw.refused.saturating_sub(raw.coordinated_refused),
                                    raw.cancelled,
                                    raw.shadow_refused,
                                    raw.coordinated_refused,
                                ],
                            );
                        names.with(tool, |name| {
                            for outcome in CALL_OUTCOMES {
                                let count = match outcome {
                                    CallOutcome::Success => success,
                                    CallOutcome::Failure => failure,
                                    CallOutcome::Cancelled => cancelled,
                                    _ => refused,
                                };
                                obs.observe(count, &[name.clone(), outcome_attr(outcome)]);
                            }
                            // Refusals decided but not enforced (shadow mode, force-closed), a
                            // series of their own (only once there are any, so tools never
                            // shadowed add no series).
                            if shadow_refused > 0 {
                                obs.observe(
                                    shadow_refused,
                                    &[
                                        name.clone(),
                                        outcome_attr(CallOutcome::Refused),
                                        KeyValue::new(ENFORCED, false),
                                    ],
                                );
                            }
                            // Refusals the fleet decided (a coordinator is attached: reported
                            // for every tool, zeros included).
                            if coordinated {
                                obs.observe(
                                    fleet_refused,
                                    &[
                                        name.clone(),
                                        outcome_attr(CallOutcome::Refused),
                                        KeyValue::new(GATE_SOURCE, SOURCE_FLEET),
                                    ],
                                );
                            }
                        });
                    });
                });
                names.prune(reg);
                let overflow = reg.overflow();
                if overflow.records > 0 || overflow.refused_count > 0 {
                    for (outcome, count) in [
                        (CallOutcome::Success, overflow.success_count),
                        (CallOutcome::Failure, overflow.failure_count),
                        (CallOutcome::Refused, overflow.refused_count),
                        (CallOutcome::Cancelled, overflow.cancelled_count),
                    ] {
                        let [a, b] = overflow_attrs();
                        obs.observe(count, &[a, b, outcome_attr(outcome)]);
                    }
                }
            }
        }))
        .build();

    meter
        .u64_observable_counter(TRANSITIONS)
        .with_unit("{transition}")
        .with_description("Circuit breaker state changes, by edge")
        .with_callback(observe(registry, &names, {
            let transitions = Arc::clone(&transitions);
            move |reg, names, obs| {
                // The open → closed edge only a coordinator takes: reported (for every tool)
                // once one is attached.
                let edges = if reg.coordination().is_coordinated() {
                    Transition::PAIRS.len()
                } else {
                    Transition::PAIRS.len() - 1
                };
                transitions.collect(|series| {
                    reg.for_each_tool(|tool, view| {
                        let counts = series.observe(tool, view.transitions());
                        names.with(tool, |name| {
                            for (count, (from, to)) in
                                counts.iter().zip(Transition::PAIRS).take(edges)
                            {
                                let attrs = [
                                    name.clone(),
                                    KeyValue::new(FROM, from.as_str()),
                                    KeyValue::new(TO, to.as_str()),
                                ];
                                obs.observe(*count, &attrs);
                            }
                        });
                    });
                });
            }
        }))
        .build();

    let histogram = meter
        .f64_histogram(DURATION)
        .with_unit("s")
        .with_description("Duration of tool executions")
        .with_boundaries(DURATION_BOUNDARIES.to_vec())
        .build();
    registry.add_observer(Arc::new(DurationRecorder {
        histogram,
        names,
        calls,
        transitions,
    }));
}

/// Wraps a collection callback: upgrade the weak registry (observe nothing once it is gone),
/// then run `f` with the name cache pinned once for the whole pass (one epoch guard per
/// collection instead of one per tool).
fn observe<T>(
    registry: &Arc<ToolHealthRegistry>,
    names: &Arc<ToolNames>,
    f: impl Fn(&ToolHealthRegistry, &PinnedNames<'_>, &dyn AsyncInstrument<T>) + Send + Sync + 'static,
) -> impl Fn(&dyn AsyncInstrument<T>) + Send + Sync + 'static {
    let registry: Weak<ToolHealthRegistry> = Arc::downgrade(registry);
    let names = Arc::clone(names);
    move |obs| {
        if let Some(reg) = registry.upgrade() {
            f(&reg, &PinnedNames(names.map.pin()), obs);
        }
    }
}

fn outcome_attr(outcome: CallOutcome) -> KeyValue {
    KeyValue::new(OUTCOME, outcome.as_str())
}

fn overflow_attrs() -> [KeyValue; 2] {
    [
        KeyValue::new(TOOL_NAME, OVERFLOW_TOOL_NAME),
        KeyValue::new(OVERFLOW, true),
    ]
}

/// The `gen_ai.tool.name` attribute of each tracked tool, built once.
///
/// Only tracked tools are inserted (the registry's callers and observers hand us names of
/// tracked tools only; overflow uses a static name). An evicted tool's name is removed
/// ([`HealthObserver::on_evict`]); a name inserted by a call racing its tool's eviction is
/// dropped by the next collection ([`ToolNames::prune`]). So the map is bounded by the live
/// tools. Lock-free: a lookup pins an epoch, no lock.
#[derive(Default)]
struct ToolNames {
    map: papaya::HashMap<Box<str>, KeyValue, foldhash::fast::RandomState>,
}

impl fmt::Debug for ToolNames {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolNames")
            .field("tools", &self.map.len())
            .finish()
    }
}

impl ToolNames {
    /// Runs `f` with the tool's name attribute, building it on first sight.
    #[inline]
    fn with<R>(&self, tool: &str, f: impl FnOnce(&KeyValue) -> R) -> R {
        let map = self.map.pin();
        if let Some(kv) = map.get(tool) {
            return f(kv);
        }
        let kv = KeyValue::new(
            Key::from_static_str(TOOL_NAME),
            Value::from(Arc::<str>::from(tool)),
        );
        f(map.get_or_insert(tool.into(), kv))
    }

    fn remove(&self, tool: &str) {
        self.map.pin().remove(tool);
    }
}

/// The name cache pinned for one collection pass.
struct PinnedNames<'a>(
    papaya::HashMapRef<'a, Box<str>, KeyValue, foldhash::fast::RandomState, papaya::LocalGuard<'a>>,
);

impl PinnedNames<'_> {
    /// Runs `f` with the tool's name attribute, building it on first sight.
    #[inline]
    fn with<R>(&self, tool: &str, f: impl FnOnce(&KeyValue) -> R) -> R {
        if let Some(kv) = self.0.get(tool) {
            return f(kv);
        }
        let kv = KeyValue::new(
            Key::from_static_str(TOOL_NAME),
            Value::from(Arc::<str>::from(tool)),
        );
        f(self.0.get_or_insert(tool.into(), kv))
    }

    /// Drops names of tools no longer tracked, when there are more names than tracked tools
    /// (a collection's safety net; in the steady state one comparison).
    fn prune(&self, registry: &ToolHealthRegistry) {
        if self.0.len() > registry.tracked_tools() {
            self.0.retain(|tool, _| registry.is_tracked(tool));
        }
    }
}

/// Counter series kept monotonic per tool, for one observable counter with `N` series per
/// tool (see "Counters never go down" in the module docs).
///
/// Per tool name: the values reported at the last collection and what evicted entries of
/// that name had counted (carried into the successor). Only names reported at the last
/// collection are kept — an absent name's series ended — so the map is bounded by the tools
/// tracked at the last collection. A collection holds the lock for its whole pass, so an
/// eviction's carry lands wholly before or wholly after it.
struct Monotone<const N: usize> {
    series: Mutex<MonotoneState<N>>,
}

struct MonotoneState<const N: usize> {
    collection: u64,
    by_tool: HashMap<Box<str>, Series<N>, foldhash::fast::RandomState>,
}

struct Series<const N: usize> {
    /// Reported at the last collection.
    last: [u64; N],
    /// Counted by evicted entries of this name since it was last reported.
    carry: [u64; N],
    /// The collection that last reported it.
    collection: u64,
}

impl<const N: usize> Default for Monotone<N> {
    fn default() -> Self {
        Self {
            series: Mutex::new(MonotoneState {
                collection: 0,
                by_tool: HashMap::default(),
            }),
        }
    }
}

impl<const N: usize> fmt::Debug for Monotone<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Monotone")
    }
}

impl<const N: usize> Monotone<N> {
    /// One collection's pass: `f` observes every reported tool; tools it did not report are
    /// forgotten afterwards.
    fn collect(&self, f: impl FnOnce(&mut MonotoneState<N>)) {
        let mut state = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        state.collection += 1;
        f(&mut state);
        let current = state.collection;
        state.by_tool.retain(|_, s| s.collection == current);
    }

    /// An entry of `tool` was evicted having counted `raw`: its successor continues from there.
    fn evicted(&self, tool: &str, raw: [u64; N]) {
        let mut state = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(s) = state.by_tool.get_mut(tool) {
            for (carry, r) in s.carry.iter_mut().zip(raw) {
                *carry = carry.saturating_add(r);
            }
        }
    }
}

impl<const N: usize> MonotoneState<N> {
    /// The values to report for `tool`, whose live entry counted `raw`: carried counts
    /// included, and never below what was reported before.
    fn observe(&mut self, tool: &str, raw: [u64; N]) -> [u64; N] {
        let collection = self.collection;
        let s = match self.by_tool.get_mut(tool) {
            Some(s) => s,
            None => self.by_tool.entry(tool.into()).or_insert(Series {
                last: [0; N],
                carry: [0; N],
                collection,
            }),
        };
        for ((last, carry), raw) in s.last.iter_mut().zip(s.carry).zip(raw) {
            *last = (*last).max(carry.saturating_add(raw));
        }
        s.collection = collection;
        s.last
    }
}

/// The registry observer that records `gen_ai.execute_tool.duration`, and hears of evictions
/// for the name cache and the counters.
#[derive(Debug)]
struct DurationRecorder {
    histogram: Histogram<f64>,
    names: Arc<ToolNames>,
    calls: Arc<Monotone<6>>,
    transitions: Arc<Monotone<5>>,
}

impl HealthObserver for DurationRecorder {
    fn on_evict(&self, evicted: &EvictedTool<'_>) {
        self.names.remove(evicted.tool);
        self.calls.evicted(
            evicted.tool,
            [
                evicted.success_count,
                evicted.failure_count,
                evicted
                    .refused_count
                    .saturating_sub(evicted.coordinated_refused_count),
                evicted.cancelled_count,
                evicted.shadow_refused_count,
                evicted.coordinated_refused_count,
            ],
        );
        self.transitions.evicted(evicted.tool, evicted.transitions);
    }

    fn on_call(&self, event: &CallEvent<'_>) {
        let failed = match event.outcome {
            CallOutcome::Success => false,
            CallOutcome::Failure | CallOutcome::Ignored => true,
            // Refused: the tool did not run. Cancelled: it never finished, so it has no
            // duration to report.
            _ => return,
        };
        let seconds = event.duration.as_secs_f64();
        let error = || {
            let value = match event.error_type {
                Some(e) => Value::from(e.to_owned()),
                None => Value::from(OTHER_ERROR),
            };
            KeyValue::new(ERROR_TYPE, value)
        };
        if event.overflow {
            let [a, b] = overflow_attrs();
            if failed {
                self.histogram.record(seconds, &[a, b, error()]);
            } else {
                self.histogram.record(seconds, &[a, b]);
            }
            return;
        }
        self.names.with(event.tool, |name| {
            if failed {
                self.histogram.record(seconds, &[name.clone(), error()]);
            } else {
                self.histogram.record(seconds, slice::from_ref(name));
            }
        });
    }
}
