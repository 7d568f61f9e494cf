//! The status router (feature `status`), driven in process: the JSON shape, ordering, filters
//! and paging, the event stream's order and content, slow clients, and the controls behind
//! the token. The page in a real browser and `/metrics` under a real Prometheus are tested by
//! `scripts/status_e2e.sh` (`.ci/run`).

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt as _;
use serde_json::Value;
use tool_health::status::{self, ToolsQuery};
use tool_health::{BreakerState, CircuitBreakerConfig, ManualClock, ToolHealthRegistry};
use tower::ServiceExt as _;

const TOKEN: &str = "a-test-token-0123456789";
/// Every bounded wait in these tests (generous: a loaded CI machine).
const WAIT: Duration = Duration::from_secs(20);
const HOSTILE: &str = "<img src=x onerror=\"window.pwned=1\"><script>alert(1)</script>&amp;";

fn registry_on(clock: &ManualClock) -> Arc<ToolHealthRegistry> {
    Arc::new(
        ToolHealthRegistry::builder()
            .clock(clock.clone())
            .config(CircuitBreakerConfig {
                failure_threshold: 3,
                recovery_duration: Duration::from_secs(30),
                probe_timeout: Duration::from_secs(30),
            })
            .build(),
    )
}

fn trip(registry: &ToolHealthRegistry, tool: &str) {
    for _ in 0..3 {
        registry.record_failure(tool, Duration::from_millis(5));
    }
    assert_eq!(registry.breaker_state(tool), BreakerState::Open);
}

async fn send(
    app: &Router,
    method: Method,
    uri: &str,
    token: Option<&str>,
) -> (StatusCode, String) {
    let mut req = Request::builder().method(method).uri(uri);
    if let Some(t) = token {
        req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let res = app
        .clone()
        .oneshot(req.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = res.status();
    let body = res.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(body.to_vec()).unwrap())
}

async fn get_json(app: &Router, uri: &str) -> Value {
    let (status, body) = send(app, Method::GET, uri, None).await;
    assert_eq!(status, StatusCode::OK, "{uri}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{uri}: {e}: {body}"))
}

fn names(doc: &Value) -> Vec<&str> {
    doc["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["tool"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn read_only_by_default_the_page_and_json_are_served() {
    let clock = ManualClock::new();
    let registry = registry_on(&clock);
    registry.record_success("search", Duration::from_millis(10));
    let app = status::router(Arc::clone(&registry));

    let res = app
        .clone()
        .oneshot(Request::get("/").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(
        res.headers()[header::CONTENT_TYPE],
        "text/html; charset=utf-8"
    );
    let csp = res.headers()[header::CONTENT_SECURITY_POLICY]
        .to_str()
        .unwrap();
    assert!(csp.contains("default-src 'none'") && csp.contains("connect-src 'self'"));
    let page = res.into_body().collect().await.unwrap().to_bytes();
    assert!(std::str::from_utf8(&page)
        .unwrap()
        .contains("<title>tool-health</title>"));

    let doc = get_json(&app, "/tools").await;
    assert_eq!(doc["controls"], false);
    assert_eq!(names(&doc), ["search"]);

    // No control route exists without a token, whatever the request carries.
    for action in ["force-open", "force-closed", "release", "reset"] {
        let (status, _) = send(
            &app,
            Method::POST,
            &format!("/tools/search/{action}"),
            Some(TOKEN),
        )
        .await;
        assert!(
            status == StatusCode::NOT_FOUND || status == StatusCode::METHOD_NOT_ALLOWED,
            "{action}: {status}"
        );
    }
    assert_eq!(registry.control("search"), tool_health::ToolControl::Normal);
    // No Prometheus endpoint unless configured.
    assert_eq!(
        send(&app, Method::GET, "/metrics", None).await.0,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn the_json_shape_of_every_state() {
    let clock = ManualClock::new();
    let registry = registry_on(&clock);
    registry.record_success("healthy", Duration::from_millis(10));
    // Degraded: score 0.3 × 2/3 + 0.7 × 0.7 = 0.69.
    registry.record_success("degraded", Duration::from_millis(10));
    registry.record_success("degraded", Duration::from_millis(10));
    registry.record_failure("degraded", Duration::from_millis(30));
    trip(&registry, "open");
    assert!(!registry.allow_request("open")); // one refusal
    trip(&registry, "half_open");
    registry.record_success("forced", Duration::ZERO);
    registry.force_open_for("forced", Duration::from_secs(120));
    registry.record_success("pinned", Duration::ZERO);
    registry.force_closed("pinned");
    clock.advance(Duration::from_secs(10));
    // 20 s left on "open"'s cooldown; "half_open" gets its probe 30 s after its trip.
    clock.advance(Duration::from_secs(20));
    trip(&registry, "open"); // fresh bad news: 30 s again
    assert!(registry.allow_request("half_open"));
    assert_eq!(registry.breaker_state("half_open"), BreakerState::HalfOpen);

    let app = status::router(Arc::clone(&registry));
    let doc = get_json(&app, "/tools").await;
    assert_eq!(doc["version"], 1);
    assert_eq!(doc["at_ms"], 30_000);
    assert_eq!(doc["sample_interval_ms"], 1000);
    assert_eq!(
        doc["counts"],
        serde_json::json!({"tracked": 6, "closed": 3, "open": 2, "half_open": 1, "forced": 2,
                           "group_refused": 0, "healthy": 2, "degraded": 1, "unhealthy": 3})
    );
    assert_eq!(
        (
            doc["matched"].as_u64(),
            doc["offset"].as_u64(),
            doc["limit"].as_u64()
        ),
        (Some(6), Some(0), Some(100))
    );
    // Sick first: open (lower score first), half-open, degraded, then controlled, then healthy.
    assert_eq!(
        names(&doc),
        [
            "open",
            "forced",
            "half_open",
            "degraded",
            "pinned",
            "healthy"
        ]
    );

    let tool = |name: &str| {
        doc["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["tool"] == name)
            .unwrap()
            .clone()
    };
    let open = tool("open");
    assert_eq!(open["state"], "open");
    assert_eq!(open["breaker"], "open");
    assert_eq!(open["status"], "unhealthy");
    assert_eq!(open["available"], false);
    assert_eq!(open["retry_after_ms"], 30_000);
    assert_eq!(open["control"], "normal");
    assert_eq!(open["control_remaining_ms"], Value::Null);
    assert_eq!(open["consecutive_failures"], 6);
    assert_eq!(
        open["calls"],
        serde_json::json!({"success": 0, "failure": 6, "refused": 1, "ignored": 0,
                           "cancelled": 0, "shadow_refused": 0})
    );
    assert_eq!(open["score"], 0.0824); // 0.7 × 0.7⁶
    assert_eq!(open["duration_ms"], serde_json::json!({"avg": 5, "max": 5}));
    assert_eq!(open["rates"], Value::Null, "no samples yet");
    assert_eq!(open["score_history"], serde_json::json!([]));

    let forced = tool("forced");
    assert_eq!(
        (forced["state"].as_str(), forced["breaker"].as_str()),
        (Some("forced_open"), Some("open"))
    );
    assert_eq!(forced["control"], "forced_open");
    assert_eq!(forced["control_remaining_ms"], 90_000);
    assert_eq!(forced["retry_after_ms"], 90_000);
    assert_eq!(forced["score"], 1.0, "the score is what the calls say");

    let half = tool("half_open");
    assert_eq!(
        (half["state"].as_str(), half["available"].as_bool()),
        (Some("half_open"), Some(false))
    );
    let pinned = tool("pinned");
    assert_eq!(
        (pinned["state"].as_str(), pinned["control"].as_str()),
        (Some("forced_closed"), Some("forced_closed"))
    );
    let degraded = tool("degraded");
    assert_eq!(degraded["status"], "degraded");
    assert_eq!(degraded["score"], 0.69);
    assert_eq!(degraded["success_rate"], 0.6667);
    assert_eq!(degraded["ewma_success"], 0.7);
    assert_eq!(degraded["duration_ms"]["avg"], 16.667);
    assert_eq!(tool("healthy")["available"], true);
    assert_eq!(tool("healthy")["retry_after_ms"], Value::Null);

    // One tool alone: the same object; an unknown one is 404 and creates nothing.
    let one = get_json(&app, "/tools/open").await;
    assert_eq!(one, open);
    let (status, body) = send(&app, Method::GET, "/tools/ghost", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert!(registry.snapshot("ghost").is_none());
    // The library's own accessors give the same documents (what the gateway serves).
    let built = status::builder(Arc::clone(&registry)).build().unwrap();
    let lib: Value = serde_json::from_str(&built.tools_json(&ToolsQuery::default())).unwrap();
    assert_eq!(names(&lib), names(&doc));
    assert_eq!(
        serde_json::from_str::<Value>(&built.tool_json("open").unwrap()).unwrap(),
        open
    );
}

#[tokio::test]
async fn filters_states_sorting_and_paging() {
    let clock = ManualClock::new();
    let registry = registry_on(&clock);
    for i in 0..250 {
        registry.record_success(&format!("tool_{i:03}"), Duration::ZERO);
    }
    trip(&registry, "tool_200");
    trip(&registry, "Web_Search");
    let app = status::router(Arc::clone(&registry));

    let doc = get_json(&app, "/tools").await;
    assert_eq!(doc["matched"], 251);
    assert_eq!(doc["tools"].as_array().unwrap().len(), 100);
    assert_eq!(&names(&doc)[..3], ["Web_Search", "tool_200", "tool_000"]);

    let page = get_json(&app, "/tools?offset=240&limit=50").await;
    assert_eq!(page["tools"].as_array().unwrap().len(), 11);
    assert_eq!(names(&page).last(), Some(&"tool_249"));
    let beyond = get_json(&app, "/tools?offset=1000").await;
    assert_eq!(
        (
            beyond["matched"].as_u64(),
            beyond["tools"].as_array().unwrap().len()
        ),
        (Some(251), 0)
    );

    let by_name = get_json(&app, "/tools?sort=name&limit=2").await;
    assert_eq!(names(&by_name), ["Web_Search", "tool_000"]);
    let open = get_json(&app, "/tools?state=open").await;
    assert_eq!(names(&open), ["Web_Search", "tool_200"]);
    let sick = get_json(&app, "/tools?state=sick").await;
    assert_eq!(sick["matched"], 2);
    let filtered = get_json(&app, "/tools?filter=SEARCH").await;
    assert_eq!(names(&filtered), ["Web_Search"]);
    let both = get_json(&app, "/tools?filter=tool_2&state=closed&limit=0").await;
    assert_eq!(
        (
            both["matched"].as_u64(),
            both["tools"].as_array().unwrap().len()
        ),
        (Some(49), 0)
    );
    assert_eq!(
        both["counts"]["tracked"], 251,
        "the counts are over every tool"
    );

    for bad in [
        "/tools?limit=10001",
        "/tools?state=dead",
        "/events?offset=-3",
    ] {
        let (status, body) = send(&app, Method::GET, bad, None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert!(
            v["error"]
                .as_str()
                .unwrap()
                .starts_with("query parameter `"),
            "{body}"
        );
    }
}

#[tokio::test]
async fn markup_in_a_tool_name_stays_text_in_the_json() {
    let clock = ManualClock::new();
    let registry = registry_on(&clock);
    trip(&registry, HOSTILE);
    let app = status::router(Arc::clone(&registry));
    let (_, body) = send(&app, Method::GET, "/tools", None).await;
    assert!(
        !body.contains('<') && !body.contains('>') && !body.contains('&'),
        "{body}"
    );
    let doc: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(names(&doc), [HOSTILE]);
    let encoded: String = HOSTILE
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    assert_eq!(
        get_json(&app, &format!("/tools/{encoded}")).await["tool"],
        HOSTILE
    );
}

#[tokio::test]
async fn history_gives_rates_sparkline_and_transitions() {
    let clock = ManualClock::new();
    let registry = registry_on(&clock);
    // Samples taken by hand only (the task's first is a minute away).
    let built = status::builder(Arc::clone(&registry))
        .sample_interval(Duration::from_secs(60))
        .build()
        .unwrap();
    let app = built.router();
    registry.record_success("search", Duration::ZERO);
    built.sample();
    for _ in 0..8 {
        registry.record_success("search", Duration::ZERO);
    }
    trip(&registry, "search");
    for _ in 0..4 {
        assert!(!registry.allow_request("search"));
    }
    clock.advance(Duration::from_secs(2));
    built.sample();
    // The transition reaches the log through the status task (bounded wait).
    let deadline = Instant::now() + WAIT;
    let doc = loop {
        let doc = get_json(&app, "/tools/search").await;
        if !doc["transitions"].as_array().unwrap().is_empty() || Instant::now() > deadline {
            break doc;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        doc["rates"],
        serde_json::json!({"calls": 5.5, "failures": 1.5, "refusals": 2})
    );
    assert_eq!(doc["score_history"], serde_json::json!([100, 47]));
    assert_eq!(
        doc["transitions"],
        serde_json::json!([{"from": "closed", "to": "open", "reason": "tripped",
                            "reason_text": "consecutive failures reached the threshold",
                            "at_ms": 0}])
    );
    let all = get_json(&app, "/tools").await;
    assert_eq!(all["recent_transitions"][0]["tool"], "search");
}

#[tokio::test]
async fn controls_need_the_token_and_act_on_tracked_tools_only() {
    let clock = ManualClock::new();
    let registry = registry_on(&clock);
    registry.record_success("search", Duration::ZERO);
    let app = status::builder(Arc::clone(&registry))
        .control_token(TOKEN)
        .build()
        .unwrap()
        .router();
    assert_eq!(get_json(&app, "/tools").await["controls"], true);

    for token in [
        None,
        Some("wrong-token-0123456789"),
        Some(&TOKEN[..TOKEN.len() - 1]),
    ] {
        let (status, body) = send(&app, Method::POST, "/tools/search/force-open", token).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{token:?}");
        assert!(!body.contains(TOKEN));
    }
    assert_eq!(registry.control("search"), tool_health::ToolControl::Normal);

    let (status, body) = send(
        &app,
        Method::POST,
        "/tools/search/force-open?seconds=60",
        Some(TOKEN),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (v["state"].as_str(), v["control_remaining_ms"].as_u64()),
        (Some("forced_open"), Some(60_000))
    );
    assert!(!registry.allow_request("search"));

    let (status, _) = send(
        &app,
        Method::POST,
        "/tools/search/force-closed",
        Some(TOKEN),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        registry.control("search"),
        tool_health::ToolControl::ForcedClosed
    );
    let (status, _) = send(&app, Method::POST, "/tools/search/release", Some(TOKEN)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(registry.control("search"), tool_health::ToolControl::Normal);
    trip(&registry, "search");
    let (status, body) = send(&app, Method::POST, "/tools/search/reset", Some(TOKEN)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["state"],
        "closed"
    );
    assert_eq!(registry.snapshot("search").unwrap().failure_count, 0);

    // Bad input is refused with the parameter named; nothing creates a tool.
    let (status, body) = send(
        &app,
        Method::POST,
        "/tools/search/force-open?seconds=0",
        Some(TOKEN),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("seconds"));
    let (status, _) = send(&app, Method::POST, "/tools/ghost/force-open", Some(TOKEN)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(registry.snapshot("ghost").is_none());
    let (status, _) = send(&app, Method::POST, "/tools/search/explode", Some(TOKEN)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let long = "x".repeat(status::MAX_TOOL_NAME_LEN + 1);
    let (status, _) = send(
        &app,
        Method::POST,
        &format!("/tools/{long}/reset"),
        Some(TOKEN),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[test]
fn settings_are_checked_with_the_field_named() {
    let registry = Arc::new(ToolHealthRegistry::new());
    let field = |b: status::StatusBuilder| b.build().unwrap_err().field;
    let b = || status::builder(Arc::clone(&registry));
    assert_eq!(field(b().control_token("short")), "control_token");
    assert_eq!(
        field(b().control_token("sixteen chars ok but spaces")),
        "control_token"
    );
    assert_eq!(
        field(b().snapshot_interval(Duration::from_millis(99))),
        "snapshot_interval"
    );
    assert_eq!(
        field(b().sample_interval(Duration::from_secs(61))),
        "sample_interval"
    );
    assert_eq!(field(b().history_len(1)), "history_len");
    assert_eq!(field(b().event_buffer(15)), "event_buffer");
    assert_eq!(field(b().max_event_streams(0)), "max_event_streams");
    assert_eq!(field(b().max_event_streams(10_001)), "max_event_streams");
    let e = b().history_len(601).build().unwrap_err();
    assert!(e.to_string().contains("`history_len`") && e.to_string().contains("2 to 600"));
    // A builder's Debug never shows the token.
    assert!(!format!("{:?}", b().control_token(TOKEN)).contains(TOKEN));
    // Outside a runtime the router builds (its task starts with the first request).
    assert!(b().build().is_ok());
}

/// Reads SSE events (`event:` name, `data:` line) from a response body.
struct Events {
    body: Body,
    buf: String,
}

impl Events {
    async fn open(app: &Router, uri: &str) -> Self {
        let res = app
            .clone()
            .oneshot(Request::get(uri).body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(res.headers()[header::CONTENT_TYPE], "text/event-stream");
        Self {
            body: res.into_body(),
            buf: String::new(),
        }
    }

    /// The next event as (name, data, retry field), within the bounded wait.
    async fn next(&mut self) -> (String, String, Option<String>) {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let (mut name, mut data, mut retry) = (String::new(), String::new(), None);
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event: ") {
                        name = v.to_owned();
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        data = v.to_owned();
                    } else if let Some(v) = line.strip_prefix("retry: ") {
                        retry = Some(v.to_owned());
                    }
                }
                if name.is_empty() {
                    continue; // a keep-alive comment
                }
                return (name, data, retry);
            }
            let frame = tokio::time::timeout_at(deadline, self.body.frame())
                .await
                .expect("an event within the bounded wait")
                .expect("the stream goes on")
                .unwrap();
            if let Ok(data) = frame.into_data() {
                self.buf.push_str(std::str::from_utf8(&data).unwrap());
            }
        }
    }

    async fn next_named(&mut self, name: &str) -> Value {
        loop {
            let (n, data, _) = self.next().await;
            if n == name {
                return serde_json::from_str(&data).unwrap();
            }
        }
    }
}

#[tokio::test]
async fn the_stream_sends_a_snapshot_then_transitions_in_order_then_a_fresh_snapshot() {
    let clock = ManualClock::new();
    let registry = registry_on(&clock);
    registry.record_success("search", Duration::ZERO);
    let app = status::router(Arc::clone(&registry));
    let mut events = Events::open(&app, "/events?filter=search").await;

    let (name, data, retry) = events.next().await;
    assert_eq!(
        (name.as_str(), retry.as_deref()),
        ("snapshot", Some("1000"))
    );
    let first: Value = serde_json::from_str(&data).unwrap();
    assert_eq!(first["tools"][0]["state"], "closed");

    trip(&registry, "search");
    clock.advance(Duration::from_secs(30));
    assert!(registry.allow_request("search")); // the probe: open → half-open
    registry.record_success("search", Duration::ZERO); // half-open → closed

    let mut seen = Vec::new();
    for _ in 0..3 {
        let t = events.next_named("transition").await;
        assert_eq!(t["tool"], "search");
        seen.push((
            t["from"].as_str().unwrap().to_owned(),
            t["to"].as_str().unwrap().to_owned(),
            t["reason"].as_str().unwrap().to_owned(),
            t["at_ms"].as_u64().unwrap(),
        ));
    }
    let expect = [
        ("closed", "open", "tripped", 0),
        ("open", "half_open", "probe_granted", 30_000),
        ("half_open", "closed", "probe_succeeded", 30_000),
    ];
    assert_eq!(
        seen,
        expect.map(|(a, b, c, d)| (a.to_owned(), b.to_owned(), c.to_owned(), d))
    );
    // A snapshot follows shortly (brought forward by the transitions), with the tool closed
    // and its last transitions.
    let snap = events.next_named("snapshot").await;
    assert_eq!(snap["tools"][0]["state"], "closed");
    assert_eq!(snap["matched"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_transitions_reach_a_reading_client_in_order() {
    let registry = Arc::new(ToolHealthRegistry::with_config(CircuitBreakerConfig {
        failure_threshold: 1,
        recovery_duration: Duration::from_secs(3600),
        probe_timeout: Duration::from_secs(3600),
    }));
    let app = status::router(Arc::clone(&registry));
    let mut events = Events::open(&app, "/events?limit=0").await;
    events.next_named("snapshot").await;
    let recorder = {
        let registry = Arc::clone(&registry);
        thread::spawn(move || {
            for i in 0..1000 {
                registry.record_failure(&format!("tool_{i:04}"), Duration::ZERO);
            }
        })
    };
    for i in 0..1000 {
        let t = events.next_named("transition").await;
        assert_eq!(t["tool"], format!("tool_{i:04}"));
        assert_eq!(
            (t["from"].as_str(), t["to"].as_str()),
            (Some("closed"), Some("open"))
        );
    }
    recorder.join().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_does_not_read_is_lagged_and_never_blocks_the_recording_thread() {
    let registry = Arc::new(ToolHealthRegistry::with_config(CircuitBreakerConfig {
        failure_threshold: 1,
        ..CircuitBreakerConfig::default()
    }));
    let app = status::builder(Arc::clone(&registry))
        .event_buffer(16)
        .build()
        .unwrap()
        .router();
    let mut events = Events::open(&app, "/events?limit=0").await;
    events.next_named("snapshot").await;
    // The client reads nothing while 1,000 transitions are recorded on another thread.
    let recorder = {
        let registry = Arc::clone(&registry);
        thread::spawn(move || {
            for i in 0..1000 {
                registry.record_failure(&format!("tool_{i:04}"), Duration::ZERO);
            }
        })
    };
    let deadline = Instant::now() + WAIT;
    while !recorder.is_finished() {
        assert!(
            Instant::now() < deadline,
            "the recording thread was blocked by a slow client"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    recorder.join().unwrap();
    // Now it reads: told what it missed, then the latest transitions, then a fresh snapshot.
    let lagged = events.next_named("lagged").await;
    let missed = lagged["missed"].as_u64().unwrap();
    assert!((984..=1000).contains(&missed), "missed {missed}");
    let mut last = String::new();
    loop {
        let (name, data, _) = events.next().await;
        let v: Value = serde_json::from_str(&data).unwrap();
        match name.as_str() {
            "transition" => last = v["tool"].as_str().unwrap().to_owned(),
            "snapshot" => {
                assert_eq!(v["counts"]["open"], 1000);
                break;
            }
            other => panic!("unexpected event {other}"),
        }
    }
    assert_eq!(
        last, "tool_0999",
        "the newest transitions are the ones kept"
    );
}

#[tokio::test]
async fn mounted_under_a_prefix_the_routes_answer_there() {
    let registry = Arc::new(ToolHealthRegistry::new());
    registry.record_success("search", Duration::ZERO);
    let app = Router::new().nest("/health", status::router(Arc::clone(&registry)));
    let (status, page) = send(&app, Method::GET, "/health", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("<title>tool-health</title>"));
    // The page finds its routes relative to its own address: /health → /health/tools.
    assert!(page.contains("location.pathname + '/'"));
    assert_eq!(names(&get_json(&app, "/health/tools").await), ["search"]);
    assert_eq!(
        get_json(&app, "/health/tools/search").await["tool"],
        "search"
    );
}

/// One request with these headers: its status.
async fn status_with(app: &Router, method: Method, uri: &str, headers: &[(&str, &str)]) -> u16 {
    let mut req = Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    app.clone()
        .oneshot(req.body(Body::empty()).unwrap())
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test]
async fn every_route_checks_host_and_origin_and_the_guard_can_name_more() {
    let registry = Arc::new(ToolHealthRegistry::new());
    registry.record_success("search", Duration::ZERO);
    let app = status::builder(Arc::clone(&registry))
        .control_token(TOKEN)
        .build()
        .unwrap()
        .router();
    let bearer = format!("Bearer {TOKEN}");
    let routes = [
        (Method::GET, "/"),
        (Method::GET, "/tools"),
        (Method::GET, "/tools/search"),
        (Method::GET, "/events"),
        (Method::POST, "/tools/search/force-open"),
        (Method::GET, "/no-such-route"),
    ];
    for (method, uri) in &routes {
        // DNS rebinding: the browser sends the attacker's name.
        let rebound = [
            ("host", "rebind.evil.example:9464"),
            ("authorization", bearer.as_str()),
        ];
        assert_eq!(
            status_with(&app, method.clone(), uri, &rebound).await,
            403,
            "{method} {uri}"
        );
        // Another site's page.
        let foreign = [
            ("host", "127.0.0.1:9464"),
            ("origin", "http://evil.example"),
            ("authorization", bearer.as_str()),
        ];
        assert_eq!(
            status_with(&app, method.clone(), uri, &foreign).await,
            403,
            "{method} {uri}"
        );
    }
    // The page's own requests pass.
    let own = [
        ("host", "127.0.0.1:9464"),
        ("origin", "http://127.0.0.1:9464"),
    ];
    assert_eq!(status_with(&app, Method::GET, "/tools", &own).await, 200);
    assert_eq!(
        registry.breaker_state("search"),
        BreakerState::Closed,
        "nothing forced"
    );
    // Served under a name: the guard is told.
    let named = status::builder(Arc::clone(&registry))
        .guard(
            tool_health::web::HttpGuard::builder()
                .allow_host("health.example.com")
                .build()
                .unwrap(),
        )
        .build()
        .unwrap()
        .router();
    let host = [("host", "health.example.com")];
    assert_eq!(status_with(&named, Method::GET, "/tools", &host).await, 200);
    assert_eq!(status_with(&app, Method::GET, "/tools", &host).await, 403);
}

#[tokio::test]
async fn event_streams_are_capped_and_a_closed_one_frees_its_place() {
    let registry = Arc::new(ToolHealthRegistry::new());
    let app = status::builder(Arc::clone(&registry))
        .max_event_streams(2)
        .build()
        .unwrap()
        .router();
    let first = Events::open(&app, "/events").await;
    let _second = Events::open(&app, "/events").await;
    let res = app
        .clone()
        .oneshot(Request::get("/events").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(res.headers()[header::RETRY_AFTER], "5");
    drop(first);
    let _third = Events::open(&app, "/events").await;
}

/// Groups (a gateway's servers) beside the tools: each shown with its state, connection,
/// restarts and last error; a tool its group refuses is refused on the page and in the counts,
/// whatever its own breaker says; a group with no tool tracked is still shown.
#[tokio::test]
async fn a_tool_its_group_refuses_is_shown_and_counted_as_refused() {
    let clock = ManualClock::new();
    let registry = registry_on(&clock);
    for tool in ["py/add", "py/sub", "ts/echo"] {
        registry.record_success(tool, Duration::from_millis(3));
    }
    trip(&registry, "ts/echo");
    // The servers' breakers, kept where the application keeps them.
    let servers = Arc::new(ToolHealthRegistry::builder().clock(clock.clone()).build());
    servers.force_open_for("py", Duration::from_secs(60));
    let groups = Arc::clone(&servers);
    let app = status::builder(registry.clone())
        .groups("server", move || {
            let mut py = status::Group::new("py", "py/")
                .connected(true)
                .restarts(2)
                .tools(2);
            if let Some(s) = groups.snapshot("py") {
                py = py.breaker(&s);
            }
            vec![
                py,
                status::Group::new("ts", "ts/").connected(true),
                status::Group::new("never", "never/")
                    .connected(false)
                    .last_error("`npx` could not be started: No such file or directory"),
            ]
        })
        .build()
        .unwrap()
        .router();
    let doc = get_json(&app, "/tools?sort=name").await;
    let tool = |name: &str| {
        doc["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["tool"] == name)
            .unwrap_or_else(|| panic!("{name} in {doc}"))
            .clone()
    };
    let add = tool("py/add");
    assert_eq!(add["breaker"], "closed", "its own breaker: {add}");
    assert_eq!(add["available"], false, "{add}");
    assert_eq!(add["refused_by"], "server", "{add}");
    assert_eq!(add["group"], "py", "{add}");
    assert_eq!(add["retry_after_ms"], 60_000, "{add}");
    let echo = tool("ts/echo");
    assert_eq!(
        (echo["available"].as_bool(), echo["refused_by"].as_str()),
        (Some(false), Some("tool")),
        "{echo}"
    );
    assert_eq!(doc["counts"]["open"], 1, "{doc}");
    assert_eq!(doc["counts"]["group_refused"], 2, "{doc}");
    assert_eq!(doc["group_noun"], "server");
    let groups = doc["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 3, "{doc}");
    assert_eq!(groups[0]["name"], "py");
    assert_eq!(groups[0]["state"], "forced_open");
    assert_eq!(groups[0]["available"], false);
    assert_eq!(groups[0]["restarts"], 2);
    assert_eq!(groups[0]["tools_tracked"], 2);
    assert_eq!(
        groups[2]["connected"], false,
        "never connected, still shown"
    );
    assert_eq!(
        groups[2]["last_error"],
        "`npx` could not be started: No such file or directory"
    );
    // Sick first: the refused tools lead, and `state=sick` keeps them.
    let sick = get_json(&app, "/tools?state=sick").await;
    let mut got = names(&sick);
    got.sort_unstable();
    assert_eq!(got, ["py/add", "py/sub", "ts/echo"], "{sick}");
    // One tool's object says the same.
    let one = get_json(&app, "/tools/py%2Fsub").await;
    assert_eq!(
        (one["available"].as_bool(), one["refused_by"].as_str()),
        (Some(false), Some("server")),
        "{one}"
    );
    // Released, its tools are available again.
    servers.release_control("py");
    let doc = get_json(&app, "/tools/py%2Fadd").await;
    assert_eq!(doc["available"], true, "{doc}");
    assert_eq!(doc["refused_by"], Value::Null, "{doc}");
    // Without groups nothing changes but the fields' presence.
    let plain = status::router(registry.clone());
    let doc = get_json(&plain, "/tools").await;
    assert_eq!(doc["groups"], serde_json::json!([]));
    assert_eq!(doc["counts"]["group_refused"], 0);
}
