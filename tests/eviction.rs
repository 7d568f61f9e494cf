//! Idle eviction: bounded memory for churning tool sets, never at the cost of a breaker or a
//! record.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use tool_health::{
    BreakerState, CallOutcome, CircuitBreakerConfig, ManualClock, ToolHealthRegistry,
};

const MS: Duration = Duration::from_millis(1);
const MIN: Duration = Duration::from_secs(60);

fn setup() -> (ToolHealthRegistry, ManualClock) {
    let clock = ManualClock::new();
    let r = ToolHealthRegistry::builder()
        .clock(clock.clone())
        .evictable()
        .config(CircuitBreakerConfig {
            failure_threshold: 1,
            ..Default::default()
        })
        .build();
    (r, clock)
}

#[test]
fn idle_fresh_tools_are_evicted_and_come_back_fresh() {
    let (r, clock) = setup();
    r.record_success("old", MS);
    r.record_success("old", MS);
    // A sweep every minute; "old" was last seen in the epoch that ended at minute 1, so it has
    // been idle 5 minutes for sure at minute 6.
    for minute in 1..=5 {
        clock.advance(MIN);
        if minute == 5 {
            r.record_success("recent", MS);
        }
        assert_eq!(r.evict_idle(5 * MIN), 0, "minute {minute}");
    }
    clock.advance(MIN);
    assert_eq!(r.evict_idle(5 * MIN), 1);
    assert!(r.snapshot("old").is_none());
    assert!(r.snapshot("recent").is_some(), "seen a minute ago: kept");
    assert_eq!(r.tracked_tools(), 1);
    r.record_success("old", MS);
    assert_eq!(
        r.snapshot("old").unwrap().total_calls,
        1,
        "comes back fresh"
    );
}

#[test]
fn open_and_half_open_breakers_are_never_evicted() {
    let (r, clock) = setup();
    r.record_failure("open", MS);
    r.record_failure("probing", MS);
    clock.advance(30 * Duration::from_secs(1));
    assert!(r.allow_request("probing"));
    r.set_config(CircuitBreakerConfig {
        probe_timeout: Duration::ZERO,
        ..CircuitBreakerConfig::default()
    });
    clock.advance(24 * 60 * MIN);
    assert_eq!(r.evict_idle(Duration::ZERO), 0);
    assert_eq!(r.evict_idle(Duration::ZERO), 0);
    assert_eq!(r.breaker_state("open"), BreakerState::Open);
    assert!(r.snapshot("probing").is_some());
}

#[test]
fn tools_with_failures_or_controls_are_kept() {
    let clock = ManualClock::new();
    let r = ToolHealthRegistry::builder()
        .clock(clock.clone())
        .evictable()
        .build();
    r.record_failure("failing", MS); // closed (threshold 3) but failing
    r.record_success("isolated", MS);
    r.force_open("isolated");
    r.record_success("shadowed", MS);
    r.set_shadow("shadowed", true);
    clock.advance(60 * MIN);
    r.evict_idle(Duration::ZERO);
    assert_eq!(r.evict_idle(Duration::ZERO), 0);
    assert_eq!(r.tracked_tools(), 3);
}

#[test]
fn at_the_cap_idle_tools_make_room_for_new_ones() {
    let clock = ManualClock::new();
    let r = ToolHealthRegistry::builder()
        .clock(clock.clone())
        .max_tools(200)
        .evict_idle_after(MIN)
        .build();
    // 100 new tools every 2 minutes, a sweep every 2 minutes: each round's tools are idle by
    // the round after next, and there is always room.
    for round in 0..10 {
        for i in 0..100 {
            r.record_success(&format!("round{round}-tool{i}"), MS);
        }
        clock.advance(2 * MIN);
        r.evict_idle(MIN);
    }
    assert!(r.tracked_tools() <= 200);
    assert_eq!(r.overflow().records, 0, "eviction made room every round");
}

#[test]
fn with_no_periodic_sweep_the_cap_itself_triggers_eviction() {
    let clock = ManualClock::new();
    let r = ToolHealthRegistry::builder()
        .clock(clock.clone())
        .max_tools(10)
        .evict_idle_after(MIN)
        .build();
    for i in 0..10 {
        r.record_success(&format!("a{i}"), MS);
    }
    clock.advance(2 * MIN);
    // The first overflow starts a sweep epoch but nothing is provably idle yet...
    r.record_success("b0", MS);
    assert!(r.snapshot("b0").is_none());
    // ...a later one, past the sweep spacing, evicts the idle tools and makes room.
    clock.advance(2 * MIN);
    r.record_success("b1", MS);
    assert!(r.snapshot("b1").is_some());
    assert_eq!(r.tracked_tools(), 1);
}

#[test]
fn without_eviction_the_cap_holds_and_overflow_counts() {
    let clock = ManualClock::new();
    let r = ToolHealthRegistry::builder()
        .clock(clock.clone())
        .max_tools(10)
        .build();
    for i in 0..50 {
        r.record_success(&format!("t{i}"), MS);
    }
    assert_eq!(r.tracked_tools(), 10);
    assert_eq!(r.overflow().records, 40);
}

#[test]
fn a_failure_racing_a_sweep_is_never_lost() {
    const OPS: usize = 200_000;
    const TOOLS: usize = 16;
    let r = Arc::new(ToolHealthRegistry::builder().evictable().build());
    let done = Arc::new(AtomicBool::new(false));
    let sweeper = {
        let (r, done) = (r.clone(), done.clone());
        thread::spawn(move || {
            let mut evicted = 0;
            while !done.load(Ordering::Acquire) {
                evicted += r.evict_idle(Duration::ZERO);
            }
            evicted
        })
    };
    let names: Vec<String> = (0..TOOLS).map(|i| format!("t{i}")).collect();
    for i in 0..OPS {
        let n = &names[i % TOOLS];
        // A success makes the tool fresh-equivalent again: fair game for the sweeper, which
        // may evict it at any moment, also while the failure below is being recorded.
        r.record_success(n, MS);
        r.record_failure(n, MS);
        let s = r
            .snapshot(n)
            .unwrap_or_else(|| panic!("op {i}: {n} was evicted with a failure"));
        assert!(
            s.consecutive_failures >= 1,
            "op {i}: {n}'s failure was lost"
        );
    }
    done.store(true, Ordering::Release);
    let evicted = sweeper.join().unwrap();
    assert!(evicted > 0, "the sweeper did evict fresh tools meanwhile");
}

#[test]
fn a_registry_built_without_eviction_never_evicts() {
    let clock = ManualClock::new();
    let r = ToolHealthRegistry::builder().clock(clock.clone()).build();
    r.record_success("t", MS);
    for _ in 0..3 {
        clock.advance(60 * MIN);
        assert_eq!(r.evict_idle(Duration::ZERO), 0);
    }
    assert!(r.snapshot("t").is_some());
}

#[test]
fn a_handle_on_an_evicted_tool_follows_the_live_entry() {
    let clock = ManualClock::new();
    let r = Arc::new(
        ToolHealthRegistry::builder()
            .clock(clock.clone())
            .evictable()
            .config(CircuitBreakerConfig {
                failure_threshold: 1,
                ..Default::default()
            })
            .build(),
    );
    let h = r.handle("t").unwrap();
    h.record_success(MS);
    clock.advance(MIN);
    assert_eq!(r.evict_idle(Duration::ZERO), 1);
    assert!(r.snapshot("t").is_none());
    // The handle's entry is gone; its records and gates go to the live one.
    h.record_failure(MS);
    assert_eq!(r.breaker_state("t"), BreakerState::Open);
    assert!(!h.allow_request(), "the handle sees the live, open breaker");
    assert!(!h.is_tool_available());
    assert_eq!(r.snapshot("t").unwrap().failure_count, 1);
}

/// An evictable registry (threshold 2, cooldown 30 s, lease 10 s) whose tool `t` tripped and
/// recovered once (so its entry's generation is past its first), then was evicted; and a handle
/// on `t` taken before the eviction.
fn evicted_after_an_episode() -> (
    Arc<ToolHealthRegistry>,
    ManualClock,
    tool_health::ToolHandle,
) {
    let clock = ManualClock::new();
    let r = Arc::new(
        ToolHealthRegistry::builder()
            .clock(clock.clone())
            .evictable()
            .config(CircuitBreakerConfig {
                failure_threshold: 2,
                recovery_duration: Duration::from_secs(30),
                probe_timeout: Duration::from_secs(10),
            })
            .build(),
    );
    let h = r.handle("t").unwrap();
    h.record_failure(MS);
    h.record_failure(MS);
    clock.advance(Duration::from_secs(30));
    let probe = h.check().permit().unwrap();
    h.record_with_permit(probe, CallOutcome::Success, MS);
    assert_eq!(h.breaker_state(), BreakerState::Closed);
    clock.advance(MIN);
    assert_eq!(r.evict_idle(Duration::ZERO), 1);
    assert!(r.snapshot("t").is_none());
    (r, clock, h)
}

#[test]
fn a_handle_kept_across_eviction_follows_its_tool_and_generations_never_alias() {
    // By permit: the trip comes at the threshold, not a threshold late.
    let (r, clock, h) = evicted_after_an_episode();
    let before = h.check().permit().unwrap();
    for _ in 0..2 {
        let p = h.check().permit().expect("closed: admitted");
        assert_eq!(p.generation(), before.generation());
        h.record_with_permit(p, CallOutcome::Failure, MS);
    }
    assert_eq!(r.breaker_state("t"), BreakerState::Open);
    assert!(!h.allow_request(), "the handle sees the live, open breaker");
    assert_eq!(h.breaker_state(), BreakerState::Open);
    // The successor's next episodes never take an old permit's result for theirs.
    clock.advance(Duration::from_secs(30));
    let probe = h.check().permit().expect("the probe");
    assert!(probe.is_probe() && probe.generation() > before.generation());
    h.record_with_permit(before, CallOutcome::Success, MS); // a pre-trip call's late success
    assert_eq!(
        r.breaker_state("t"),
        BreakerState::HalfOpen,
        "stale: ignored"
    );
    h.record_with_permit(probe, CallOutcome::Success, MS);
    assert_eq!(r.breaker_state("t"), BreakerState::Closed);

    // Through the layer: ten failing calls gated by the old handle trip at 2, then refuse.
    let (r, _clock, h) = evicted_after_an_episode();
    let layer = tool_health::ToolHealthLayer::new(r.clone());
    let dispatch = tracing::Dispatch::new(tracing_subscriber::layer::SubscriberExt::with(
        tracing_subscriber::registry(),
        layer,
    ));
    tracing::dispatcher::with_default(&dispatch, || {
        for _ in 0..10 {
            let span = tracing::info_span!(
                "execute_tool t",
                gen_ai.operation.name = "execute_tool",
                gen_ai.tool.name = "t",
            );
            let _entered = span.enter();
            if h.allow_request() {
                tracing::error!("down");
            }
        }
    });
    let s = r.snapshot("t").unwrap();
    assert_eq!(
        s.breaker,
        BreakerState::Open,
        "was still closed after 10 failures"
    );
    assert_eq!((s.failure_count, s.refused_count), (2, 8));
}
