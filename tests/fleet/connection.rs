//! Issue 20, items 5 and 6: what a replica says about its connection is true — no "the store
//! does not answer" at start when it answers, and `connected` only while the replica hears the
//! events channel (its subscription is back), so that a replica reading as connected misses no
//! trip.

use std::time::Duration;

use tool_health::fleet::FleetBuilder;
use tool_health::{BreakerState, ManualClock};

use crate::capture::Logs;
use crate::support::*;

/// The fleet's log lines at WARN or INFO (what an operator sees).
fn operator_lines(logs: &Logs) -> Vec<String> {
    logs.text()
        .lines()
        .filter(|l| l.contains(tool_health::fleet::LOG_TARGET))
        .filter(|l| l.contains(" WARN ") || l.contains(" INFO "))
        .map(str::to_owned)
        .collect()
}

/// Runs on a current-thread runtime: the fleet's task (and fred's) run on this thread, so the
/// thread's subscriber hears them and nothing from other tests.
pub(crate) async fn no_warning_at_start_when_the_store_answers() {
    let Some(store) = store() else { return };
    let logs = Logs::capture();
    let prefix = prefix("quiet-start");
    let replicas: Vec<Replica> = (0..3)
        .map(|_| {
            Replica::with(
                // The default command timeout, as an application starts it.
                FleetBuilder::new(store.url()).prefix(&prefix),
                ManualClock::new(),
                config(3, SEC, SEC),
            )
        })
        .collect();
    for r in &replicas {
        r.fleet
            .wait_connected(10 * SEC)
            .await
            .expect("the store answers");
    }
    // Past the moment the false warning came (≈ 260 ms after start) and the start's grace.
    tokio::time::sleep(2 * SEC).await; // real time: what the log says over it
    for r in &replicas {
        let s = r.fleet.status();
        assert!(s.connected && s.last_error.is_none(), "{s:?}");
    }
    let lines = operator_lines(&logs);
    assert!(
        lines.is_empty(),
        "the store answered throughout, yet the log says:\n{}",
        lines.join("\n")
    );
}

pub(crate) async fn a_store_down_at_start_is_said_once_and_its_arrival_once() {
    let Some(mut server) = Server::start() else {
        return;
    };
    server.kill9();
    let logs = Logs::capture();
    let prefix = prefix("late-store");
    let r = Replica::with(
        builder(&server.url(), &prefix),
        ManualClock::new(),
        config(3, SEC, SEC),
    );
    // Nobody answers: past the start's grace, said once.
    wait_for("the warning", 10 * SEC, || {
        operator_lines(&logs)
            .iter()
            .any(|l| l.contains("does not answer"))
    })
    .await;
    server.restart();
    r.fleet
        .wait_connected(10 * SEC)
        .await
        .expect("the store answers once it is up");
    // The round after the connection, then the log.
    r.fleet.sync_now().await.expect("round");
    let lines = operator_lines(&logs);
    assert_eq!(
        lines.iter().filter(|l| l.contains(" WARN ")).count(),
        1,
        "{}",
        lines.join("\n")
    );
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.contains(" INFO ") && l.contains("answers again"))
            .count(),
        1,
        "the arrival is news after the warning:\n{}",
        lines.join("\n")
    );
}

pub(crate) async fn a_replica_reads_as_connected_only_while_it_hears_the_events_channel() {
    // A private server: the test cuts every subscriber off it.
    let Some(server) = Server::start() else {
        return;
    };
    let url = server.url();
    let prefix = prefix("resubscribe");
    // No poll to rescue a lost message: only the events channel (and the resync after it is
    // back) can tell replica 0 about replica 1's trip.
    let all = replicas(&url, &prefix, 2, config(3, 30 * SEC, 10 * SEC)).await;
    let client = raw(&url).await;
    // Every pub/sub connection cut (as when the store restarts: the command connections come
    // back first); replica 1 trips at once, while replica 0 is not subscribed.
    let killed: i64 = cmd(&client, "CLIENT", vec!["KILL", "TYPE", "pubsub"]).await;
    assert!(killed >= 2, "{killed} subscribers cut");
    assert_eq!(all[1].fail("search", 3), 3);
    // Replica 0 reads as connected again only once subscribed — and then knows of the trip,
    // published while it heard nothing (the resync reads the store after subscribing).
    let took = wait_for("replica 0 to learn the trip", 10 * SEC, || {
        all[0].registry.breaker_state("search") == BreakerState::Open
    })
    .await;
    wait_for("replica 0 connected", 10 * SEC, || {
        all[0].fleet.status().connected
    })
    .await;
    println!("the trip missed on the events channel arrived after {took:?}");
    assert_eq!(all[0].registry.breaker_state("search"), BreakerState::Open);
    // Connected now means subscribed: the next trip arrives on the channel at once.
    for r in &all {
        wait_for("connected", 10 * SEC, || r.fleet.status().connected).await;
    }
    assert_eq!(all[1].fail("db", 3), 3);
    let took = wait_for("the next trip on the channel", 2 * SEC, || {
        all[0].registry.breaker_state("db") == BreakerState::Open
    })
    .await;
    assert!(took < Duration::from_secs(1), "{took:?}");
}

/// FLEET.md's promise, with the log as an operator reads it (INFO and up): nothing at start,
/// one WARN when the store goes away, one INFO when it is back (and one when it came back
/// empty: its data was lost).
pub(crate) async fn the_store_going_and_coming_back_is_said_once_each() {
    let Some(mut server) = Server::start() else {
        return;
    };
    let logs = Logs::capture();
    let prefix = prefix("said-once");
    let r = Replica::with(
        builder(&server.url(), &prefix).poll_interval(Duration::from_millis(100)),
        ManualClock::new(),
        config(3, SEC, SEC),
    );
    r.fleet.wait_connected(10 * SEC).await.expect("connected");
    assert!(
        operator_lines(&logs).is_empty(),
        "{:?}",
        operator_lines(&logs)
    );
    server.kill9();
    wait_for("the store to be missed", 10 * SEC, || {
        !r.fleet.status().connected
    })
    .await;
    // Some rounds while it is away: still one warning.
    tokio::time::sleep(Duration::from_millis(600)).await; // real time: the retries
    server.restart();
    r.fleet.wait_connected(10 * SEC).await.expect("back");
    r.fleet.sync_now().await.expect("round");
    let lines = operator_lines(&logs);
    println!("the fleet's log at INFO:\n{}", lines.join("\n"));
    let count = |needle: &str| lines.iter().filter(|l| l.contains(needle)).count();
    assert_eq!(count(" WARN "), 1, "{lines:#?}");
    assert_eq!(count("does not answer"), 1, "{lines:#?}");
    assert_eq!(count("answers again"), 1, "{lines:#?}");
    assert_eq!(count("lost its data"), 1, "{lines:#?}");
    assert_eq!(lines.len(), 3, "{lines:#?}");
}
