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
                assert!(matches!(registry.check("db"), GateDecision::Probe(_)));
                // The probe holder asking again keeps its probe.
                assert!(!registry.allow_request("db"));
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
        assert_eq!(calls(&registry, "db"), (2, 1, 0, 1), "{stack:?}");
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
