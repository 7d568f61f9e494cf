//! The span-aware gate: a decision binds to the nearest tool span (from child spans too), a
//! refused span records only the refusal, probes belong to their span's generation, a
//! cancelled probe is released, renamed calls give the probe back, another registry's gate is
//! not bound.

use std::time::Duration;

use crate::calls;
use crate::support::{registry as new_registry, Harness, ALL_STACKS};
use tool_health::{BreakerState, GateDecision, ToolHealthLayer};

#[test]
fn a_refused_span_records_nothing_but_the_refusal() {
    for stack in ALL_STACKS {
        let (clock, registry) = new_registry(1);
        registry.record_failure("db", Duration::from_millis(1));
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| {
            let span = tool_span!("db");
            let _entered = span.enter();
            assert!(!registry.allow_request("db"));
            clock.advance(Duration::from_millis(7));
            // What a caller typically does with the refusal; must not count as a failure.
            tracing::error!("{}", tool_health::REFUSAL_MESSAGE);
            span.record("error.type", "circuit_breaker_open");
        });
        let s = registry.snapshot("db").expect("tracked");
        assert_eq!(
            (s.success_count, s.failure_count, s.refused_count),
            (0, 1, 1),
            "{stack:?}"
        );
        assert_eq!(s.max_duration, Duration::from_millis(1), "{stack:?}");
        assert_eq!(s.consecutive_failures, 1, "{stack:?}");
    }
}

#[test]
fn the_gate_binds_from_a_child_span_to_its_tool_span() {
    for stack in ALL_STACKS {
        let (_clock, registry) = new_registry(1);
        registry.record_failure("db", Duration::ZERO);
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| {
            tool_span!("db").in_scope(|| {
                tracing::info_span!("middleware").in_scope(|| {
                    assert!(!registry.allow_request("db"));
                    tracing::error!("refused");
                });
            });
        });
        assert_eq!(calls(&registry, "db"), (0, 1, 0, 1), "{stack:?}");
    }
}

#[test]
fn a_probe_bound_to_its_span_is_not_closed_by_an_older_spans_success() {
    for stack in ALL_STACKS {
        let (clock, registry) = new_registry(1);
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| {
            // A slow call admitted while closed...
            let old = tool_span!("db");
            old.in_scope(|| assert!(registry.allow_request("db")));
            // ...meanwhile the tool fails and the breaker opens...
            tool_span!("db").in_scope(|| {
                assert!(registry.allow_request("db"));
                tracing::error!("down");
            });
            assert_eq!(registry.breaker_state("db"), BreakerState::Open);
            // ...and after the cooldown a new span takes the probe.
            clock.advance(Duration::from_secs(30));
            let probe = tool_span!("db");
            probe.in_scope(|| {
                let GateDecision::Probe(permit) = registry.check("db") else {
                    panic!("the cooldown elapsed: probe");
                };
                // The probe holder asking again is the same call: it is answered its own
                // probe, not refused by it.
                assert_eq!(registry.check("db"), GateDecision::Probe(permit));
            });
            // The old call's success arrives: counted, but it cannot close the new episode.
            drop(old);
            assert_eq!(
                registry.breaker_state("db"),
                BreakerState::HalfOpen,
                "{stack:?}"
            );
            // The probe's own success closes it.
            drop(probe);
            assert_eq!(
                registry.breaker_state("db"),
                BreakerState::Closed,
                "{stack:?}"
            );
        });
        assert_eq!(calls(&registry, "db"), (2, 1, 0, 0), "{stack:?}");
    }
}

#[test]
fn a_probe_failure_reopens_and_an_older_failure_cannot_fail_a_newer_probe() {
    for stack in ALL_STACKS {
        let (clock, registry) = new_registry(1);
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| {
            let old = tool_span!("db");
            old.in_scope(|| assert!(registry.allow_request("db")));
            registry.record_failure("db", Duration::ZERO);
            clock.advance(Duration::from_secs(30));
            let probe = tool_span!("db");
            probe.in_scope(|| assert!(registry.allow_request("db")));
            old.record("error.type", "timeout");
            drop(old);
            assert_eq!(
                registry.breaker_state("db"),
                BreakerState::HalfOpen,
                "{stack:?}"
            );
            probe.record("error.type", "timeout");
            drop(probe);
            assert_eq!(
                registry.breaker_state("db"),
                BreakerState::Open,
                "{stack:?}"
            );
        });
    }
}

#[test]
fn strict_mode_releases_a_cancelled_probe_at_once() {
    for stack in ALL_STACKS {
        let (clock, registry) = new_registry(1);
        registry.record_failure("db", Duration::ZERO);
        clock.advance(Duration::from_secs(30));
        let layer = ToolHealthLayer::builder(registry.clone())
            .strict(true)
            .build();
        let h = Harness::new(stack, layer);
        h.run(|| {
            let span = tool_span!("db");
            span.in_scope(|| assert!(registry.allow_request("db")));
            assert!(!registry.is_tool_available("db"));
            clock.advance(Duration::from_secs(1));
            drop(span); // cancelled: no completion marker
        });
        // Released: the next call may probe now, not after the 10 s lease.
        assert!(registry.is_tool_available("db"), "{stack:?}");
        assert_eq!(calls(&registry, "db"), (0, 1, 0, 0), "{stack:?}");
        assert_eq!(registry.breaker_state("db"), BreakerState::Open);
    }
}

#[test]
fn renaming_records_under_the_span_name_and_gives_the_probe_back() {
    for stack in ALL_STACKS {
        let (clock, registry) = new_registry(1);
        registry.record_failure("search", Duration::ZERO);
        clock.advance(Duration::from_secs(30));
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| {
            // The gate is asked about "search"; a middleware ran "search_v2".
            tool_span!("search_v2").in_scope(|| {
                assert!(matches!(registry.check("search"), GateDecision::Probe(_)));
            });
        });
        assert_eq!(calls(&registry, "search_v2"), (1, 0, 0, 0), "{stack:?}");
        assert_eq!(calls(&registry, "search"), (0, 1, 0, 0), "{stack:?}");
        // The probe of "search" did not learn anything: it went back at once.
        assert!(registry.is_tool_available("search"), "{stack:?}");
    }
}

#[test]
fn the_gate_of_another_registry_is_not_bound() {
    for stack in ALL_STACKS {
        let (_clock, watched) = new_registry(1);
        let (_clock2, other) = new_registry(1);
        other.record_failure("db", Duration::ZERO);
        let h = Harness::new(stack, ToolHealthLayer::new(watched.clone()));
        h.run(|| {
            tool_span!("db").in_scope(|| assert!(!other.allow_request("db")));
        });
        // The span was not refused as far as `watched` knows: it records a success.
        assert_eq!(calls(&watched, "db"), (1, 0, 0, 0), "{stack:?}");
        assert_eq!(calls(&other, "db"), (0, 1, 0, 1), "{stack:?}");
    }
}

#[test]
fn a_probe_span_ending_in_a_caller_error_gives_the_probe_back() {
    for stack in ALL_STACKS {
        let (clock, registry) = new_registry(1);
        registry.record_failure("db", Duration::ZERO);
        clock.advance(Duration::from_secs(30));
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| {
            let span = tool_span!("db");
            span.in_scope(|| assert!(matches!(registry.check("db"), GateDecision::Probe(_))));
            span.record("error.type", "invalid_arguments"); // the model's fault
        });
        // The probe made no verdict on the tool: the next call may probe, now.
        assert!(registry.is_tool_available("db"), "{stack:?}");
        assert_eq!(calls(&registry, "db"), (0, 1, 1, 0), "{stack:?}");
    }
}

#[test]
fn another_tools_refusal_never_takes_the_spans_own_probe() {
    for stack in ALL_STACKS {
        let (clock, registry) = new_registry(1);
        registry.record_failure("research", Duration::ZERO);
        registry.record_failure("search", Duration::ZERO);
        clock.advance(Duration::from_secs(30));
        let _elsewhere = registry.check_detached("search"); // search's probe is taken
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| {
            tool_span!("research").in_scope(|| {
                assert!(matches!(registry.check("research"), GateDecision::Probe(_)));
                // research asks for a sub-call to search, which is refused.
                assert!(!registry.allow_request("search"));
            });
        });
        // research's probe was not released, and its span's success resolved it.
        assert_eq!(
            registry.breaker_state("research"),
            BreakerState::Closed,
            "{stack:?}"
        );
        assert_eq!(calls(&registry, "research"), (1, 1, 0, 0), "{stack:?}");
        assert_eq!(calls(&registry, "search"), (0, 1, 0, 1), "{stack:?}");
    }
}

#[test]
fn a_double_gate_is_answered_its_own_probe_and_records_its_outcome() {
    // A middleware gates the call, then the tool function gates again: one call, one probe.
    for stack in ALL_STACKS {
        let (clock, registry) = new_registry(1);
        registry.record_failure("db", Duration::ZERO);
        clock.advance(Duration::from_secs(30));
        let h = Harness::new(stack, ToolHealthLayer::new(registry.clone()));
        h.run(|| {
            let outer = tool_span!("db");
            let _o = outer.enter();
            let GateDecision::Probe(permit) = registry.check("db") else {
                panic!("probe")
            };
            // The tool's own span and gate, inside the middleware's.
            let result = tool_span!("db").in_scope(|| {
                assert_eq!(registry.check("db"), GateDecision::Probe(permit));
                if registry.allow_request("db") {
                    Ok(())
                } else {
                    Err(tool_health::REFUSAL_MESSAGE)
                }
            });
            // The middleware reports what the tool returned.
            if let Err(e) = result {
                tracing::error!("tool call failed: {e}");
            }
        });
        assert_eq!(
            registry.breaker_state("db"),
            BreakerState::Closed,
            "{stack:?}: the probe succeeded (it was recorded as failed)"
        );
        assert_eq!(
            calls(&registry, "db"),
            (1, 1, 0, 0),
            "{stack:?}: one call, one record"
        );
    }
}

/// The README's tool: `#[instrument(err)]`, the gate inside, the refusal returned as the error.
#[derive(Debug)]
enum SearchError {
    Unavailable(&'static str),
    Upstream,
}
impl std::fmt::Display for SearchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unavailable(why) => f.write_str(why),
            Self::Upstream => f.write_str("upstream down"),
        }
    }
}

#[tracing::instrument(
    err,
    skip(registry),
    fields(gen_ai.operation.name = "execute_tool", gen_ai.tool.name = "search")
)]
fn search(registry: &tool_health::ToolHealthRegistry, up: bool) -> Result<u32, SearchError> {
    if !registry.allow_request("search") {
        return Err(SearchError::Unavailable(tool_health::REFUSAL_MESSAGE));
    }
    if up {
        Ok(1)
    } else {
        Err(SearchError::Upstream)
    }
}

/// The same tool whose gate cannot bind (a gate the layer does not see).
#[tracing::instrument(
    err,
    skip(registry),
    fields(gen_ai.operation.name = "execute_tool", gen_ai.tool.name = "search")
)]
fn search_unbound(
    registry: &tool_health::ToolHealthRegistry,
    up: bool,
) -> Result<u32, SearchError> {
    if !registry.check_detached("search").is_allowed() {
        return Err(SearchError::Unavailable(tool_health::REFUSAL_MESSAGE));
    }
    if up {
        Ok(1)
    } else {
        Err(SearchError::Upstream)
    }
}

#[test]
fn the_gate_binds_through_a_reload_layer() {
    // One call a second for 120 s to a tool down until 40 s (threshold 1, cooldown 30 s,
    // lease 10 s), with the layer inside a real `reload::Layer`.
    for bound in [true, false] {
        let (clock, registry) = new_registry(1);
        let (layer, _reload) =
            tracing_subscriber::reload::Layer::new(ToolHealthLayer::new(registry.clone()));
        let dispatch = tracing::Dispatch::new(tracing_subscriber::layer::SubscriberExt::with(
            tracing_subscriber::registry(),
            layer,
        ));
        tracing::dispatcher::with_default(&dispatch, || {
            for second in 0..120 {
                let up = second >= 40;
                let _ = if bound {
                    search(&registry, up)
                } else {
                    search_unbound(&registry, up)
                };
                clock.advance(Duration::from_secs(1));
            }
        });
        // As under enforcement: fail at 0 s, refused to 30 s, the probe fails at 30 s, refused
        // to 60 s, the probe succeeds at 60 s. Before: 120 failures, 119 refusals, open.
        assert_eq!(
            calls(&registry, "search"),
            (60, 2, 0, 58),
            "bound through the reload layer: {bound}"
        );
        assert_eq!(registry.breaker_state("search"), BreakerState::Closed);
    }
}
