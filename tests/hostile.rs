//! The model is untrusted input (issue 25). These tests play the model — and a prompt
//! injection writing tool names for an attacker — against every entry point, and check what
//! RELIABILITY.md ("Against a hostile model") promises:
//!
//! * **protection**: a million invented names never disarm the tools the application declared,
//!   and past the cap a new name is still behind a breaker (the shared overflow breaker);
//! * **memory**: bounded by the cap, at most 512 bytes plus the name per tracked tool (twice the
//!   name in an evictable registry), and nothing per overflowed or refused name;
//! * **names**: longer than `max_name_len` refused by every entry point without a copy, never
//!   with the breaker's refusal text; escaped in log messages, exact in snapshots and metric
//!   attributes;
//! * **settings**: every one at and past its bounds, refused with its field and range;
//! * **permits** belong to their tool.
//!
//! The counting allocator sees the whole process: the tests run one at a time (`serial`).

mod capture;
mod support;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use capture::Captured;
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use support::LIVE;
use tool_health::{
    publish_metrics, Backoff, BreakerState, CallError, CallOutcome, CircuitBreakerConfig,
    GateDecision, ManualClock, NotRecorded, RegistryBuilder, ToolControl, ToolHealthLayer,
    ToolHealthRegistry, ToolPolicy, TripPolicy, REFUSAL_MESSAGE,
};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{fmt, EnvFilter, Layer};

#[global_allocator]
static ALLOC: support::Counting = support::Counting;

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

const MS: Duration = Duration::from_millis(1);
const COOLDOWN: Duration = Duration::from_secs(30);

/// The application's tools.
const REAL: [&str; 4] = ["search", "payments", "sql_query", "send_email"];

fn config() -> CircuitBreakerConfig {
    CircuitBreakerConfig {
        failure_threshold: 3,
        recovery_duration: COOLDOWN,
        probe_timeout: Duration::from_secs(10),
    }
}

/// Heap bytes allocated (not net: freed bytes count too) while `f` runs.
/// What `f` allocated on this thread (the gate and the record run on the caller's thread;
/// other threads of the process, such as a metrics reader left by an earlier test, allocate
/// when they like).
fn allocated_by<R>(f: impl FnOnce() -> R) -> (R, i64) {
    let before = support::thread_allocated();
    let r = f();
    (r, support::thread_allocated() - before)
}

/// The bound RELIABILITY.md documents for one tracked tool, in bytes: 512 plus its name (plus
/// its name once more in an evictable registry, whose map keeps its own copy of the key).
fn bound(name_len: usize, evictable: bool) -> i64 {
    (512 + name_len * if evictable { 2 } else { 1 }) as i64
}

/// Trips `tool` (threshold 3), checks it is refused, waits the cooldown and closes it with the
/// probe: what a real tool that keeps failing and recovering does.
fn trip_and_recover(r: &ToolHealthRegistry, clock: &ManualClock, tool: &str) {
    for _ in 0..3 {
        assert!(r.allow_request(tool), "{tool}: admitted before the trip");
        r.record_failure(tool, MS);
    }
    assert_eq!(r.breaker_state(tool), BreakerState::Open, "{tool}");
    assert!(!r.allow_request(tool), "{tool}: refused once tripped");
    clock.advance(COOLDOWN);
    let probe = r.check(tool);
    assert!(matches!(probe, GateDecision::Probe(_)), "{tool}: {probe:?}");
    r.record_with_permit(tool, probe.permit().unwrap(), CallOutcome::Success, MS);
    assert_eq!(r.breaker_state(tool), BreakerState::Closed, "{tool}");
}

// ------------------------------------------------------------------------------------------
// Protection and memory under a flood of invented names
// ------------------------------------------------------------------------------------------

#[test]
fn a_million_invented_names_never_disarm_the_declared_tools() {
    let _serial = serial();
    let clock = ManualClock::new();
    let r = ToolHealthRegistry::builder()
        .config(config())
        .clock(clock.clone())
        .tools(REAL)
        .build();
    let live_before = LIVE.load(Ordering::Relaxed);
    let mut name = String::with_capacity(32);
    let mut trips = 0;
    for i in 0..1_000_000u32 {
        name.clear();
        use std::fmt::Write;
        let _ = write!(name, "hallucinated_tool_{i}");
        // The model calls a tool it made up; the framework reports the failure (or not).
        if r.allow_request(&name) {
            if i % 2 == 0 {
                r.record_failure(&name, MS);
            } else {
                r.record_success(&name, MS);
            }
        }
        // Meanwhile the real tools keep failing and recovering, each on its own breaker.
        if i % 50_000 == 0 {
            for tool in REAL {
                trip_and_recover(&r, &clock, tool);
                trips += 1;
            }
        }
    }
    let grown = LIVE.load(Ordering::Relaxed) - live_before;
    let max = RegistryBuilder::DEFAULT_MAX_TOOLS;
    assert_eq!(r.tracked_tools(), max, "the cap holds");
    assert_eq!(r.declared_tools(), REAL.len());
    assert_eq!(trips, 20 * REAL.len());
    for tool in REAL {
        let s = r.snapshot(tool).expect("a declared tool is always tracked");
        assert_eq!(
            s.failure_count, 60,
            "{tool}: every failure counted on its own breaker"
        );
        assert_eq!(s.success_count, 20, "{tool}: every probe");
        assert!(r.is_tool_available(tool));
    }
    let o = r.overflow();
    assert_eq!(o.records, 1_000_000 - (max - REAL.len()) as u64);
    assert_eq!(o.success_count + o.failure_count, o.records);
    // Memory: bounded by the cap, whatever the number of names, with each tracked name counted.
    let tracked_bytes: i64 = r
        .health_summary()
        .iter()
        .map(|s| bound(s.tool.len(), false))
        .sum();
    assert!(
        grown <= tracked_bytes,
        "heap +{grown} bytes for {max} tracked tools (bound {tracked_bytes})"
    );
    eprintln!(
        "1,000,000 invented names: {} tracked, {} overflow records, heap +{grown} bytes \
         ({} per tracked tool, its name included; bound {})",
        r.tracked_tools(),
        o.records,
        grown / max as i64,
        tracked_bytes / max as i64,
    );

    // An invented name that keeps failing trips the shared overflow breaker: every undeclared
    // name past the cap is refused with it (protected, never unguarded)...
    for _ in 0..3 {
        r.record_failure("made_up_tool", MS);
    }
    assert!(!r.allow_request("made_up_tool"));
    assert!(!r.allow_request("another_made_up_tool"));
    assert_eq!(r.breaker_state("late_real_tool"), BreakerState::Open);
    assert_eq!(r.overflow().breaker, BreakerState::Open);
    // ...while the declared tools keep their own breakers, and can still be isolated.
    for tool in REAL {
        assert!(r.allow_request(tool), "{tool}");
    }
    assert!(
        r.force_open("payments"),
        "a declared tool always has its breaker"
    );
    assert!(!r.allow_request("payments"));
    r.release_control("payments");
    // A tool the application learns later (an MCP server's tools/list) gets its own breaker
    // even with the cap full of invented names; an operator control on a new name does too.
    assert_eq!(r.declare_tools(["late_real_tool"]), Ok(1));
    assert!(r.allow_request("late_real_tool"), "its own breaker, closed");
    trip_and_recover(&r, &clock, "late_real_tool");
    assert!(r.force_open("isolate_me_too"));
    assert_eq!(r.breaker_state("isolate_me_too"), BreakerState::Open);
    assert_eq!(
        r.tracked_tools(),
        max + 2,
        "declarations past the cap are honoured"
    );
}

#[test]
fn memory_per_tracked_tool_stays_within_its_bound_name_included() {
    let _serial = serial();
    for evictable in [false, true] {
        for len in [8, 16, 256] {
            let n = 10_000;
            let names: Vec<String> = (0..n + 100).map(|i| format!("{i:0len$x}")).collect();
            let b = ToolHealthRegistry::builder().max_tools(n + 100);
            let r = if evictable {
                b.evictable().build()
            } else {
                b.build()
            };
            for name in &names[..100] {
                r.record_success(name, MS);
            }
            let before = LIVE.load(Ordering::Relaxed);
            for name in &names[100..] {
                r.record_success(name, MS);
            }
            let per_tool = (LIVE.load(Ordering::Relaxed) - before) / n as i64;
            eprintln!("evictable {evictable}, {len}-byte names: {per_tool} B/tool");
            assert!(
                per_tool <= bound(len, evictable),
                "evictable {evictable}, {len}-byte names: {per_tool} B/tool > {}",
                bound(len, evictable)
            );
        }
    }
}

// ------------------------------------------------------------------------------------------
// Names too long: refused by every entry point, never copied
// ------------------------------------------------------------------------------------------

#[test]
fn a_name_longer_than_the_limit_is_refused_everywhere_without_a_copy() {
    let _serial = serial();
    let r = Arc::new(ToolHealthRegistry::builder().config(config()).build());
    let huge = "n".repeat(1 << 20);
    // No entry point may copy the name: far less than its MiB is allocated.
    const NO_COPY: i64 = 16 * 1024;

    let ((), bytes) = allocated_by(|| {
        assert_eq!(
            r.check(&huge),
            GateDecision::Refused {
                retry_after: Duration::MAX
            }
        );
        assert!(!r.allow_request(&huge));
        assert!(
            !r.is_tool_available(&huge),
            "the oracle agrees with the gate"
        );
    });
    assert!(bytes < NO_COPY, "the gate allocated {bytes} bytes");
    eprintln!("1 MiB name, gate: {bytes} bytes allocated");
    let ((), again) = allocated_by(|| {
        for _ in 0..100 {
            assert!(!r.allow_request(&huge));
        }
    });
    assert_eq!(
        again, 0,
        "after the first (which logs once), the gate allocates nothing"
    );
    let err = r.try_check(&huge).unwrap_err();
    assert_eq!((err.len(), err.max()), (1 << 20, 256));
    assert_eq!(
        err.to_string(),
        "invalid tool name: 1048576 bytes, longer than the 256 allowed"
    );
    assert!(!err.to_string().contains(REFUSAL_MESSAGE));

    let (recorded, bytes) = allocated_by(|| {
        [
            r.record_failure(&huge, MS),
            r.record_success(&huge, MS),
            r.record_with_permit(
                &huge,
                r.check("search").permit().unwrap(),
                CallOutcome::Failure,
                MS,
            ),
        ]
    });
    assert!(bytes < NO_COPY, "the records allocated {bytes} bytes");
    eprintln!("1 MiB name, records: {bytes} bytes allocated");
    for rec in recorded {
        assert_eq!(rec.not_recorded, Some(NotRecorded::InvalidName));
        assert!(!rec.is_recorded());
    }

    let ((), bytes) = allocated_by(|| {
        assert!(!r.force_open(&huge));
        assert!(!r.force_open_for(&huge, COOLDOWN));
        assert!(!r.force_closed(&huge));
        assert!(!r.set_shadow(&huge, true));
        assert!(r.handle(&huge).is_none());
        r.set_tool_policy(&huge, ToolPolicy::default(), tool_health::Apply::Now);
    });
    assert!(bytes < NO_COPY, "the controls allocated {bytes} bytes");
    eprintln!("1 MiB name, controls: {bytes} bytes allocated");
    let err = r
        .try_set_tool_policy(&huge, ToolPolicy::default(), tool_health::Apply::Now)
        .unwrap_err();
    assert_eq!(err.field(), "tool");
    let err = r.declare_tools([huge.as_str()]).unwrap_err();
    assert_eq!(err.field(), "tools");

    // The call helper: an invalid-argument error, the tool never called, no span, no record.
    let (result, bytes) = allocated_by(|| {
        r.call(&huge)
            .run_blocking(|| -> Result<(), std::io::Error> { panic!("never called") })
    });
    assert!(bytes < NO_COPY, "the helper allocated {bytes} bytes");
    eprintln!("1 MiB name, helper: {bytes} bytes allocated");
    match result {
        Err(CallError::InvalidName(e)) => {
            assert_eq!(e.len(), 1 << 20);
            let text = CallError::<std::io::Error>::InvalidName(e).to_string();
            assert!(text.starts_with("invalid tool name"), "{text}");
            assert!(!text.contains(REFUSAL_MESSAGE));
        }
        other => panic!("{other:?}"),
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let result = rt.block_on(r.call(&huge).timeout(COOLDOWN).run(async {
        if true {
            panic!("never called");
        }
        Ok::<(), std::io::Error>(())
    }));
    assert!(
        matches!(result, Err(CallError::InvalidName(_))),
        "{result:?}"
    );

    // The layer: a tool span with the name is no tool span; its gate refuses as above.
    let subscriber = tracing_subscriber::registry().with(ToolHealthLayer::new(r.clone()));
    let ((), bytes) = allocated_by(|| {
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!(
                "execute_tool",
                gen_ai.operation.name = "execute_tool",
                gen_ai.tool.name = huge.as_str(),
                error.type = "boom",
            );
            let _in = span.enter();
            assert!(!r.allow_request(&huge));
        })
    });
    assert!(bytes < NO_COPY, "the layer allocated {bytes} bytes");
    eprintln!("1 MiB name, layer: {bytes} bytes allocated");

    // Nothing was tracked or counted for it; each refused gate call, record, helper call and
    // tool span is counted as a rejected name (102 gate calls, 3 records, 2 helper calls, the
    // span and its gate call).
    assert_eq!(r.tracked_tools(), 0, "the gate creates nothing");
    assert!(r.snapshot(&huge).is_none());
    let o = r.overflow();
    assert_eq!((o.records, o.success_count + o.failure_count), (0, 0));
    assert_eq!(o.rejected_names, 109, "{o:?}");
}

#[test]
fn the_limit_is_exact_and_configurable() {
    let _serial = serial();
    let r = ToolHealthRegistry::new();
    let at = "a".repeat(256);
    let past = "a".repeat(257);
    r.record_success(&at, MS);
    assert_eq!(
        r.snapshot(&at).unwrap().total_calls,
        1,
        "256 bytes is a name"
    );
    assert!(r.record_success(&past, MS).not_recorded.is_some());
    assert!(r.snapshot(&past).is_none(), "257 is not");
    // Multi-byte characters count in bytes.
    let wide = "ツ".repeat(86); // 258 bytes
    assert!(r.validate_name(&wide).is_err());

    let small = ToolHealthRegistry::builder().max_name_len(8).build();
    assert!(small.allow_request("12345678"));
    assert!(!small.allow_request("123456789"));
    assert_eq!(small.try_check("123456789").unwrap_err().max(), 8);
    let large = ToolHealthRegistry::builder()
        .max_name_len(64 * 1024)
        .build();
    let big = "b".repeat(64 * 1024);
    large.record_failure(&big, MS);
    assert_eq!(large.snapshot(&big).unwrap().failure_count, 1);
}

// ------------------------------------------------------------------------------------------
// Names in logs, snapshots, metrics
// ------------------------------------------------------------------------------------------

/// Names a model (or an injection) might write: a forged log line, colours, quotes, a bidi
/// override, HTML and JSON.
const HOSTILE: [&str; 8] = [
    "x\n1999-01-01T00:00:00Z  WARN auth: admin login ok user=root",
    "\x1b[31mred\x1b[0m",
    "tab\tand\rreturn",
    "quote\"back`tick\\",
    "\u{202e}evil\u{202c}",
    "<script>alert(1)</script>",
    "{\"tool\":\"x\",\"admin\":true}",
    "line\u{2028}separator\u{85}",
];

#[test]
fn names_never_forge_log_lines() {
    let _serial = serial();
    let clock = ManualClock::new();
    let r = Arc::new(
        ToolHealthRegistry::builder()
            .config(CircuitBreakerConfig {
                failure_threshold: 1,
                ..config()
            })
            .clock(clock.clone())
            .build(),
    );
    let out = Captured::default();
    let subscriber = tracing_subscriber::registry()
        .with(ToolHealthLayer::new(r.clone()))
        .with(
            fmt::layer()
                .with_writer(out.clone())
                .with_ansi(false)
                .with_filter(EnvFilter::new("tool_health=info")),
        );
    tracing::subscriber::with_default(subscriber, || {
        for name in HOSTILE {
            r.record_failure(name, MS); // WARN: opened
        }
        clock.advance(COOLDOWN);
        for name in HOSTILE {
            let p = r.check(name).permit().unwrap(); // INFO: half-open
            r.record_with_permit(name, p, CallOutcome::Success, MS); // INFO: closed
        }
    });
    let text = out.text();
    let lines: Vec<&str> = text.lines().collect();
    // One line per transition, and nothing else: no name wrote a line of its own.
    assert_eq!(lines.len(), 3 * HOSTILE.len(), "{text}");
    for line in &lines {
        assert!(
            line.contains(" WARN tool_health:") || line.contains(" INFO tool_health:"),
            "a line the registry did not write: {line:?}"
        );
        assert!(!line.contains('\x1b'), "a raw escape: {line:?}");
        assert!(!line.contains('\r') && !line.contains('\u{2028}') && !line.contains('\u{85}'));
        assert!(!line.contains('\u{202e}'), "a raw bidi override: {line:?}");
    }
    assert!(
        !text.contains("\nx\n")
            && !lines.iter().any(|l| l.starts_with("1999")
                || l.contains(" WARN auth:") && !l.contains("tool_health"))
    );
    // The message shows the name escaped (as Rust escapes it), the field carries it exactly
    // (the formatter escapes field values itself).
    let forged = HOSTILE[0];
    assert!(
        text.contains(&format!("calls to `{}`", forged.escape_debug())),
        "{text}"
    );
    assert!(text.contains(&format!("tool={forged:?}")), "{text}");
}

#[test]
fn names_are_exact_in_snapshots_and_metric_attributes() {
    let _serial = serial();
    let clock = ManualClock::new();
    let r = Arc::new(
        ToolHealthRegistry::builder()
            .config(config())
            .clock(clock.clone())
            .build(),
    );
    let exporter = InMemoryMetricExporter::default();
    let reader = PeriodicReader::builder(exporter.clone())
        .with_interval(Duration::from_secs(3600))
        .build();
    let provider = SdkMeterProvider::builder().with_reader(reader).build();
    publish_metrics(&r, &provider.meter("hostile"));
    for name in HOSTILE {
        r.record_success(name, MS);
        r.force_open(name);
    }
    let summary: Vec<String> = r.health_summary().into_iter().map(|s| s.tool).collect();
    let mut expected: Vec<String> = HOSTILE.iter().map(|s| s.to_string()).collect();
    expected.sort();
    assert_eq!(summary, expected, "snapshots carry the names exactly");
    let unavailable: Vec<String> = r.unavailable_tools().into_iter().map(|t| t.tool).collect();
    assert_eq!(unavailable, expected);

    provider.force_flush().unwrap();
    let mut exported = std::collections::BTreeSet::new();
    for batch in exporter.get_finished_metrics().unwrap() {
        for scope in batch.scope_metrics() {
            for m in scope.metrics() {
                if let AggregatedMetrics::F64(MetricData::Gauge(g)) = m.data() {
                    for p in g.data_points() {
                        for kv in p.attributes() {
                            if kv.key.as_str() == "gen_ai.tool.name" {
                                exported.insert(kv.value.as_str().into_owned());
                            }
                        }
                    }
                }
            }
        }
    }
    let expected: std::collections::BTreeSet<String> = expected.into_iter().collect();
    assert_eq!(
        exported, expected,
        "metric attributes carry the names exactly"
    );
}

#[test]
fn invalid_utf8_and_huge_debug_values_through_span_fields() {
    use std::os::unix::ffi::OsStrExt;
    let _serial = serial();
    let r = Arc::new(ToolHealthRegistry::new());
    let subscriber = tracing_subscriber::registry().with(ToolHealthLayer::new(r.clone()));
    let invalid = std::ffi::OsStr::from_bytes(b"\xff\xfe tool");
    let huge_bytes = vec![0xffu8; 1 << 20];
    let huge_invalid = std::ffi::OsStr::from_bytes(&huge_bytes);
    let ((), bytes) = allocated_by(|| {
        tracing::subscriber::with_default(subscriber, || {
            for value in [invalid, huge_invalid] {
                let span = tracing::info_span!(
                    "execute_tool",
                    gen_ai.operation.name = "execute_tool",
                    gen_ai.tool.name = tracing::field::debug(value),
                );
                drop(span.entered());
            }
            let span = tracing::info_span!(
                "execute_tool",
                gen_ai.operation.name = "execute_tool",
                gen_ai.tool.name = tracing::field::debug(&huge_bytes[..]),
            );
            drop(span.entered());
        })
    });
    // Read through their `Debug` text, cut at 1 KiB: the 1 MiB values (≈ 4 MiB of text) are
    // refused without being formatted whole.
    assert!(bytes < 64 * 1024, "the layer allocated {bytes} bytes");
    eprintln!("invalid UTF-8 and 1 MiB Debug values on span fields: {bytes} bytes allocated");
    let shown = format!("{invalid:?}");
    assert_eq!(r.snapshot(&shown).unwrap().success_count, 1, "{shown}");
    assert_eq!(r.tracked_tools(), 1);
    assert_eq!(r.overflow().rejected_names, 2);
}

// ------------------------------------------------------------------------------------------
// Settings at and past their bounds
// ------------------------------------------------------------------------------------------

fn panic_text(f: impl FnOnce()) -> String {
    let err = catch_unwind(AssertUnwindSafe(f)).expect_err("panics");
    err.downcast_ref::<String>()
        .cloned()
        .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

#[test]
fn every_registry_setting_at_and_past_its_bounds() {
    let _serial = serial();
    let b = ToolHealthRegistry::builder;
    let field = |r: Result<ToolHealthRegistry, tool_health::SettingError>| {
        r.map(|_| ()).map_err(|e| e.field().to_owned())
    };
    assert_eq!(field(b().max_tools(0).try_build()), Err("max_tools".into()));
    assert_eq!(field(b().max_tools(1).try_build()), Ok(()));
    assert_eq!(
        field(b().max_name_len(0).try_build()),
        Err("max_name_len".into())
    );
    assert_eq!(field(b().max_name_len(1).try_build()), Ok(()));
    assert_eq!(field(b().max_name_len(65_536).try_build()), Ok(()));
    assert_eq!(
        field(b().max_name_len(65_537).try_build()),
        Err("max_name_len".into())
    );
    assert_eq!(
        field(b().evict_idle_after(Duration::ZERO).try_build()),
        Err("evict_idle_after".into())
    );
    assert_eq!(
        field(b().evict_idle_after(Duration::from_nanos(1)).try_build()),
        Ok(())
    );
    assert_eq!(
        field(b().max_name_len(4).tools(["four", "fiver"]).try_build()),
        Err("tools".into())
    );
    assert_eq!(
        field(b().max_tools(2).tools(["a", "b", "a"]).try_build()),
        Ok(()),
        "duplicates count once"
    );
    assert_eq!(
        field(b().max_tools(2).tools(["a", "b", "c"]).try_build()),
        Err("tools".into())
    );
    let err = b().max_tools(0).try_build().unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid setting `max_tools`: 0; allowed: at least 1 (a registry that tracks no tool \
         protects none)"
    );
    // The infallible form panics with the same text.
    assert_eq!(
        panic_text(|| drop(b().max_tools(0).build())),
        err.to_string()
    );
    assert!(panic_text(|| drop(b().max_name_len(0).build())).contains("`max_name_len`"));

    // Declarations at run time: at most max_tools, and all or nothing.
    let r = b().max_tools(3).build();
    assert_eq!(r.declare_tools(["a", "b"]), Ok(2));
    assert_eq!(r.declare_tools(["b", "c"]), Ok(1));
    let err = r.declare_tools(["d"]).unwrap_err();
    assert_eq!(err.field(), "tools");
    assert_eq!(r.declared_tools(), 3);
    // Overrides: at most max_tools tools.
    for t in ["a", "b", "c"] {
        r.try_set_tool_policy(t, ToolPolicy::default(), tool_health::Apply::Now)
            .unwrap();
    }
    let err = r
        .try_set_tool_policy("d", ToolPolicy::default(), tool_health::Apply::Now)
        .unwrap_err();
    assert_eq!(err.field(), "tool policies");
    r.try_set_tool_policy("a", ToolPolicy::default(), tool_health::Apply::Now)
        .expect("replacing an override is no new one");
}

fn rate(ratio: f64) -> ToolPolicy {
    ToolPolicy {
        breaker: CircuitBreakerConfig {
            failure_threshold: 0,
            ..config()
        },
        trip: TripPolicy::FailureRate {
            ratio,
            min_calls: 4,
            window: Duration::from_secs(60),
        },
        ..ToolPolicy::default()
    }
}

#[test]
fn every_policy_setting_at_and_past_its_bounds() {
    let _serial = serial();
    let r = ToolHealthRegistry::new();
    for bad in [
        f64::NAN,
        1.5,
        50.0,
        -1.0,
        0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ] {
        let err = r
            .try_set_tool_policy("t", rate(bad), tool_health::Apply::Now)
            .unwrap_err();
        assert_eq!(err.field(), "trip.ratio", "{bad}");
        assert!(err.allowed().contains("0 < ratio ≤ 1"), "{err}");
        assert!(
            panic_text(|| r.set_default_policy(rate(bad))).contains("`trip.ratio`"),
            "{bad}"
        );
    }
    assert_eq!(r.tool_policy("t"), ToolPolicy::default(), "nothing was set");
    let window0 = ToolPolicy {
        trip: TripPolicy::FailureRate {
            ratio: 0.5,
            min_calls: 1,
            window: Duration::ZERO,
        },
        ..ToolPolicy::default()
    };
    assert_eq!(window0.validate().unwrap_err().field(), "trip.window");
    let slow0 = ToolPolicy {
        slow_call: Some(Duration::ZERO),
        ..ToolPolicy::default()
    };
    assert_eq!(slow0.validate().unwrap_err().field(), "slow_call");
    let backoff = |b: Backoff| ToolPolicy {
        backoff: Some(b),
        ..ToolPolicy::default()
    };
    assert_eq!(
        backoff(Backoff {
            multiplier: 0,
            ..Backoff::default()
        })
        .validate()
        .unwrap_err()
        .field(),
        "backoff.multiplier"
    );
    assert_eq!(
        backoff(Backoff {
            max_jitter: Duration::from_secs(1),
            ..Backoff::default()
        })
        .validate()
        .unwrap_err()
        .field(),
        "backoff.max_jitter"
    );
    // At the bounds: valid, and meaning what they say.
    for ok in [
        rate(1.0),
        rate(f64::MIN_POSITIVE),
        backoff(Backoff {
            multiplier: 1,
            max_recovery: Duration::ZERO,
            stable_after: Duration::MAX,
            ..Backoff::default()
        }),
        ToolPolicy {
            slow_call: Some(Duration::from_nanos(1)),
            ..ToolPolicy::default()
        },
        ToolPolicy::from(CircuitBreakerConfig {
            failure_threshold: u32::MAX,
            recovery_duration: Duration::MAX,
            probe_timeout: Duration::MAX,
        }),
        ToolPolicy::from(CircuitBreakerConfig {
            failure_threshold: 0,
            recovery_duration: Duration::ZERO,
            probe_timeout: Duration::ZERO,
        }),
    ] {
        assert_eq!(ok.validate(), Ok(()), "{ok:?}");
    }
    // A ratio of 1 trips on 4 failures of 4, not on 3 of 4 (it used to be possible to ask for
    // 1.5, which never tripped, or −1, which tripped on successes).
    r.set_tool_policy("all", rate(1.0), tool_health::Apply::NewBreakers);
    for _ in 0..3 {
        r.record_failure("all", MS);
    }
    r.record_success("all", MS);
    assert_eq!(r.breaker_state("all"), BreakerState::Closed, "3 of 4");
    r.set_tool_policy("every", rate(1.0), tool_health::Apply::NewBreakers);
    for _ in 0..4 {
        r.record_failure("every", MS);
    }
    assert_eq!(r.breaker_state("every"), BreakerState::Open, "4 of 4");
}

#[test]
fn saturating_durations_give_sensible_model_facing_text() {
    let _serial = serial();
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(3600));
    let r = Arc::new(ToolHealthRegistry::builder().clock(clock.clone()).build());
    let refusal = |tool: &str| match r.call(tool).run_blocking(|| Ok::<(), std::io::Error>(())) {
        Err(e @ CallError::Refused { .. }) => (e.retry_after().unwrap(), e.to_string()),
        other => panic!("{other:?}"),
    };

    assert!(r.force_open_for("forever", Duration::MAX));
    let (retry_after, text) = refusal("forever");
    assert_eq!(retry_after, Duration::MAX);
    assert_eq!(
        text,
        format!("{REFUSAL_MESSAGE} (tool `forever`, until released)")
    );
    assert_eq!(
        r.snapshot("forever").unwrap().control,
        ToolControl::ForcedOpen { until: None },
        "isolated until released, not until a 34-year deadline"
    );
    assert_eq!(r.unavailable_tools()[0].retry_after, Duration::MAX);

    let year = Duration::from_secs(365 * 86_400);
    for (d, shown) in [
        (Duration::from_millis(2_500), "retry in 2.5 s"),
        (Duration::from_secs(90), "retry in 2 min"),
        (Duration::from_secs(3 * 3600), "retry in 3 h"),
        (30 * year, "retry in 10950 d"),
    ] {
        let tool = format!("for {d:?}");
        r.force_open_for(&tool, d);
        let (retry_after, text) = refusal(&tool);
        assert_eq!(retry_after, d);
        assert!(text.starts_with(REFUSAL_MESSAGE), "{text}");
        assert!(text.ends_with(&format!("{shown})")), "{text}");
    }
    clock.advance(Duration::from_secs(100 * 365 * 86_400));
    assert!(!r.allow_request("forever"), "never lapses");
    // A cooldown too long to represent reads the same: until released.
    let latched = Arc::new(ToolHealthRegistry::with_config(CircuitBreakerConfig {
        failure_threshold: 1,
        recovery_duration: Duration::MAX,
        ..config()
    }));
    latched.record_failure("t", MS);
    let text = latched
        .call("t")
        .run_blocking(|| Ok::<(), std::io::Error>(()))
        .unwrap_err()
        .to_string();
    assert!(text.starts_with(REFUSAL_MESSAGE) && text.ends_with("until released)"));
}

// ------------------------------------------------------------------------------------------
// Permits belong to their tool
// ------------------------------------------------------------------------------------------

#[test]
fn a_permit_recorded_for_another_tool_is_refused_and_its_probe_given_back() {
    let _serial = serial();
    let clock = ManualClock::new();
    let r = Arc::new(
        ToolHealthRegistry::builder()
            .config(config())
            .clock(clock.clone())
            .build(),
    );
    for _ in 0..3 {
        r.record_failure("flaky", MS);
    }
    r.record_success("other", MS);
    clock.advance(COOLDOWN);
    let probe = r.check("flaky").permit().unwrap();
    assert!(probe.is_probe());
    assert!(!r.allow_request("flaky"), "the probe is out");

    // Recorded under another tool's name: refused, neither tool counts it.
    let rec = r.record_with_permit("other", probe, CallOutcome::Success, MS);
    assert_eq!(rec.not_recorded, Some(NotRecorded::ForeignPermit));
    assert_eq!(r.snapshot("other").unwrap().total_calls, 1);
    assert_eq!(r.snapshot("flaky").unwrap().total_calls, 3);
    // ...and the probe went back to its own tool: the next call probes at once, instead of
    // waiting for the lease.
    assert_eq!(r.breaker_state("flaky"), BreakerState::Open);
    let again = r.check("flaky");
    assert!(matches!(again, GateDecision::Probe(_)), "{again:?}");

    // An ordinary permit of one tool recorded for another: refused too, by name and by handle,
    // whatever the outcome.
    let permit = r.check("other").permit().unwrap();
    let handle = r.handle("third").unwrap();
    for outcome in [
        CallOutcome::Success,
        CallOutcome::Failure,
        CallOutcome::Ignored,
    ] {
        let rec = handle.record_with_permit(permit, outcome, MS);
        assert_eq!(
            rec.not_recorded,
            Some(NotRecorded::ForeignPermit),
            "{outcome}"
        );
    }
    assert_eq!(r.snapshot("third").unwrap().total_calls, 0);
    assert_eq!(r.snapshot("third").unwrap().ignored_count, 0);
    // Its own tool takes it.
    let rec = r.record_with_permit("other", permit, CallOutcome::Success, MS);
    assert!(rec.is_recorded());
    assert_eq!(r.snapshot("other").unwrap().success_count, 2);

    // A probe given back by name of another tool goes back to its own.
    let p = again.permit().unwrap();
    r.release("other", p);
    assert!(matches!(r.check("flaky"), GateDecision::Probe(_)));
}

// ------------------------------------------------------------------------------------------
// The first overflow: logged once, with the fix, and counted in the metrics
// ------------------------------------------------------------------------------------------

#[test]
fn the_first_overflow_is_logged_once_with_the_fix() {
    let _serial = serial();
    let r = Arc::new(ToolHealthRegistry::builder().max_tools(2).build());
    let out = Captured::default();
    let subscriber = tracing_subscriber::registry().with(
        fmt::layer()
            .with_writer(out.clone())
            .with_ansi(false)
            .with_filter(EnvFilter::new("tool_health=warn")),
    );
    tracing::subscriber::with_default(subscriber, || {
        for i in 0..1_000 {
            let tool = format!("invented_{i}");
            if r.allow_request(&tool) {
                r.record_success(&tool, MS);
            }
        }
        for _ in 0..10 {
            r.record_success(&"z".repeat(300), MS);
        }
    });
    let overflow = out.lines_with("overflow circuit breaker opened");
    assert_eq!(
        overflow.len(),
        0,
        "nothing failed: the overflow breaker never opened"
    );
    let warned = out.lines_with("new tool names now share one overflow");
    assert_eq!(warned.len(), 1, "{}", out.text());
    assert!(
        warned[0].contains("Declare the application's tools"),
        "{}",
        warned[0]
    );
    assert!(
        warned[0].contains("RegistryBuilder::max_tools"),
        "{}",
        warned[0]
    );
    let rejected = out.lines_with("was refused: tool names are at most 256 bytes");
    assert_eq!(rejected.len(), 1, "{}", out.text());
    assert_eq!(r.overflow().records, 998);
    assert_eq!(r.overflow().rejected_names, 10);
}
