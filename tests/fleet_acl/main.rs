//! The least-privilege ACL user FLEET.md recommends is enough for the whole protocol, and a user
//! without the key pattern is refused by the server (against a real Valkey).

#[path = "../harness/mod.rs"]
mod harness;

#[path = "../fleet/support.rs"]
mod support;

use std::time::Duration;

use tool_health::fleet::FleetBuilder;
use tool_health::{BreakerState, CallOutcome, GateDecision, ManualClock};

use support::*;

/// The ACL rules of FLEET.md, "Security", for `prefix`.
fn fleet_acl(prefix: &str) -> String {
    format!(
        "on >fleetpw ~{prefix}:* &{prefix}:* +@scripting +@pubsub +ping +hello +auth \
         +client|setname +client|id +time +type +get +set +del +incr +hset +hmget +hlen \
         +hincrby +hgetall +hdel +sadd +srem +srandmember +zadd +zrange +zrem +zremrangebyscore \
         +zcard +pexpire +pttl"
    )
}

pub(crate) async fn the_documented_acl_user_runs_the_whole_protocol() {
    let Some(server) = Server::start() else {
        return;
    };
    let admin = raw(&server.url()).await;
    let prefix = "acl_fleet";
    let mut args = vec!["SETUSER", "fleet"];
    let rules = fleet_acl(prefix);
    args.extend(rules.split(' '));
    let _: String = cmd(&admin, "ACL", args).await;
    let url = format!("redis://fleet:fleetpw@127.0.0.1:{}", server.port);
    let make = || {
        Replica::with(
            FleetBuilder::new(url.clone())
                .prefix(prefix)
                .command_timeout(Duration::from_millis(200))
                .poll_interval(Duration::from_secs(3600)),
            ManualClock::new(),
            config(2, SEC, 10 * SEC),
        )
    };
    let (a, b) = (make(), make());
    for r in [&a, &b] {
        r.fleet
            .wait_connected(Duration::from_secs(10))
            .await
            .expect("the ACL user connects");
        r.fleet.sync_now().await.expect("a round under the ACL");
    }
    // Trip, spread, claim, probe, settle, counts, controls: every script.
    assert_eq!(a.fail("search", 2), 2);
    wait_for("the trip to spread", 5 * SEC, || {
        b.registry.breaker_state("search") == BreakerState::Open
    })
    .await;
    for r in [&a, &b] {
        r.clock.advance(2 * SEC);
    }
    for r in [&a, &b] {
        r.fleet.sync_now().await.expect("claims under the ACL");
    }
    let mut probes = Vec::new();
    for r in [&a, &b] {
        if let GateDecision::Probe(p) = r.registry.check("search") {
            probes.push((r, p));
        }
    }
    assert_eq!(probes.len(), 1, "one probe in the fleet");
    let (prober, permit) = probes.pop().expect("a probe");
    prober
        .registry
        .record_with_permit("search", permit, CallOutcome::Success, MS);
    for r in [&a, &b] {
        wait_for("the recovery to spread", 5 * SEC, || {
            r.registry.breaker_state("search") == BreakerState::Closed
        })
        .await;
    }
    a.fleet
        .force_open("db", None)
        .await
        .expect("a control under the ACL");
    wait_for("the control to spread", 5 * SEC, || {
        !b.registry.allow_request("db")
    })
    .await;
    assert!(
        a.fleet.status().last_error.is_none(),
        "{:?}",
        a.fleet.status()
    );
    assert!(
        b.fleet.status().last_error.is_none(),
        "{:?}",
        b.fleet.status()
    );
}

pub(crate) async fn a_user_limited_to_another_prefix_is_refused_by_the_server_and_breaks_locally() {
    let Some(server) = Server::start() else {
        return;
    };
    let admin = raw(&server.url()).await;
    let mut args = vec!["SETUSER", "fleet"];
    let rules = fleet_acl("other_fleet");
    args.extend(rules.split(' '));
    let _: String = cmd(&admin, "ACL", args).await;
    let url = format!("redis://fleet:fleetpw@127.0.0.1:{}", server.port);
    let r = Replica::with(
        FleetBuilder::new(url)
            .prefix("acl_fleet")
            .command_timeout(Duration::from_millis(200))
            .poll_interval(Duration::from_secs(3600)),
        ManualClock::new(),
        config(2, SEC, 10 * SEC),
    );
    let err = r.fleet.sync_now().await.expect_err("keys outside the ACL");
    let text = err.to_string();
    assert!(!text.contains("fleetpw"), "{text}");
    assert!(!r.fleet.status().connected);
    // The gate is untouched: local breaking as without a fleet.
    assert_eq!(r.fail("search", 2), 2);
    assert_eq!(r.registry.breaker_state("search"), BreakerState::Open);
    assert!(!r.registry.allow_request("search"));
}

fn main() -> std::process::ExitCode {
    harness::run(trials![
        multi the_documented_acl_user_runs_the_whole_protocol,
        multi a_user_limited_to_another_prefix_is_refused_by_the_server_and_breaks_locally,
    ])
}
