//! Wrong passwords: `wait_connected` says `Auth` promptly, the password is never shown (status,
//! errors, `Debug`, anything logged), and the registry keeps breaking locally.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tool_health::fleet::{FleetBuilder, FleetError};
use tool_health::{BreakerState, ManualClock, ToolHealthRegistry};

use crate::capture::Logs;
use crate::support::*;

/// Starts a fleet from `builder` against `server`, whose password it gets wrong, and checks
/// everything said about it. `secrets`: every spelling of the wrong password.
async fn refused(builder: FleetBuilder, secrets: &[&str], how: &str) {
    let logs = Logs::capture();
    let shown_builder = format!("{builder:?}");
    let clock = ManualClock::new();
    let registry = Arc::new(
        ToolHealthRegistry::builder()
            .clock(clock.clone())
            .config(config(3, 10 * SEC, SEC))
            .log_transitions(true)
            .build(),
    );
    let started = Instant::now();
    let fleet = builder.start(&registry).expect("the fleet starts");
    let err = fleet
        .wait_connected(Duration::from_secs(10))
        .await
        .expect_err("a wrong password never connects");
    let took = started.elapsed();
    println!("{how}: FleetError::Auth after {took:?}");
    assert_eq!(err, FleetError::Auth, "{how}: {err:?}");
    assert!(took < 2 * SEC, "{how}: the refusal took {took:?}");
    let sync = fleet.sync_now().await;
    assert!(
        sync.is_err(),
        "{how}: a round without credentials: {sync:?}"
    );
    assert_ne!(sync, Err(FleetError::Stopped), "{how}: the task is alive");

    // The registry keeps breaking locally, without waiting on the store.
    let gate = Instant::now();
    for _ in 0..3 {
        assert!(registry.allow_request("search"));
        registry.record_failure("search", MS);
    }
    assert_eq!(registry.breaker_state("search"), BreakerState::Open);
    assert!(!registry.allow_request("search"));
    assert!(
        gate.elapsed() < 50 * MS,
        "the gate waited: {:?}",
        gate.elapsed()
    );

    // The client retries (every ≤ 500 ms): several refusals, one warning.
    let mut status = fleet.status();
    let retry = Instant::now();
    while retry.elapsed() < 1200 * MS {
        tokio::time::sleep(100 * MS).await; // reconnect attempts, not breaker time
        status = fleet.status();
        assert!(!status.connected, "{how}: connected with a wrong password");
    }
    let last_error = status.last_error.clone().expect("the status says why");
    assert!(
        last_error.contains("credentials"),
        "{how}: a clear reason: {last_error}"
    );
    let shown_fleet = format!("{fleet:?}");
    fleet.shutdown().await;
    let log = logs.text();
    assert_eq!(
        logs.fleet_warnings("refused the credentials"),
        1,
        "{how}: the refusal is said, once, not once per retry:\n{log}"
    );
    assert!(
        logs.fleet_warnings("fleet: the store") <= 2,
        "{how}: at most a first timeout and the refusal:\n{log}"
    );
    for (what, text) in [
        ("the error's Display", err.to_string()),
        ("the error's Debug", format!("{err:?}")),
        ("sync_now's error", format!("{sync:?}")),
        ("status().last_error", last_error),
        ("the status' Debug", format!("{status:?}")),
        ("the builder's Debug", shown_builder),
        ("the fleet's Debug", shown_fleet),
        ("the log", log),
    ] {
        for secret in secrets {
            assert!(
                !text.contains(secret),
                "{how}: {what} shows the password {secret:?}:\n{text}"
            );
        }
        assert!(
            !text.contains(PASSWORD),
            "{how}: {what} shows the server's password"
        );
    }
}

pub(crate) async fn a_wrong_password_in_the_url_is_an_auth_error_and_never_shown() {
    let Some(server) = Server::start() else {
        return;
    };
    // Percent-encoded in the URL: neither spelling may appear.
    let url = format!("redis://{USER}:url-Secret%21x9@127.0.0.1:{}", server.port);
    let b = builder(&url, &prefix("auth-url"));
    refused(b, &["url-Secret%21x9", "url-Secret!x9"], "URL").await;
}

pub(crate) async fn a_wrong_password_from_the_builder_is_an_auth_error_and_never_shown() {
    let Some(server) = Server::start() else {
        return;
    };
    // The builder's password wins over the URL's (right) one.
    let b = builder(&server.url(), &prefix("auth-builder"))
        .username(USER)
        .password("builder-Secret-77q");
    refused(b, &["builder-Secret-77q"], "builder").await;
}

pub(crate) async fn a_wrong_password_from_the_environment_is_an_auth_error_and_never_shown() {
    use tool_health::fleet::env;
    let Some(server) = Server::start() else {
        return;
    };
    // Only this test sets these variables (no other test of this binary reads them).
    let vars = [
        (env::URL, format!("redis://127.0.0.1:{}", server.port)),
        (env::USERNAME, USER.to_owned()),
        (env::PASSWORD, "env-Secret-5kz".to_owned()),
        (env::PREFIX, prefix("auth-env")),
        (env::COMMAND_TIMEOUT_MS, "200".to_owned()),
    ];
    for (k, v) in &vars {
        std::env::set_var(k, v);
    }
    let b = FleetBuilder::from_env();
    for (k, _) in &vars {
        std::env::remove_var(k);
    }
    let b = b.expect("valid").expect("the URL is set");
    refused(b, &["env-Secret-5kz"], "environment").await;
}
