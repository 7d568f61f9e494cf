//! A Sentinel set-up (`redis-sentinel://`): a primary, its replica and one sentinel, from the
//! same server binary (`--sentinel`), the sentinel asking for the servers' credentials (the
//! URL's, which the fleet gives the sentinels too unless `sentinelPassword` says otherwise).
//! The primary is killed mid-outage; the sentinel promotes the replica; the fleet's
//! connections follow it through the sentinel, and one probe per recovery holds.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tool_health::{BreakerState, ManualClock};

use crate::gate::*;
use crate::spread::{one_probe_then_closed, COOLDOWN};
use crate::support::*;

const SERVICE: &str = "fleet-primary";

fn hex(tool: &str) -> String {
    tool.bytes().map(|b| format!("{b:02x}")).collect()
}

/// One sentinel watching `SERVICE`: killed when dropped.
struct Sentinel {
    port: u16,
    dir: PathBuf,
    child: Child,
}

impl Sentinel {
    fn start(bin: &std::path::Path, primary: u16) -> Sentinel {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("th-sentinel-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("sentinel dir");
        let conf = dir.join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {}\n\
                 user default off\n\
                 user {USER} on >{PASSWORD} ~* &* +@all\n\
                 sentinel monitor {SERVICE} 127.0.0.1 {primary} 1\n\
                 sentinel auth-user {SERVICE} {USER}\n\
                 sentinel auth-pass {SERVICE} {PASSWORD}\n\
                 sentinel down-after-milliseconds {SERVICE} 1000\n\
                 sentinel failover-timeout {SERVICE} 5000\n",
                dir.display()
            ),
        )
        .expect("sentinel.conf");
        let log = std::fs::File::create(dir.join("log")).expect("sentinel log");
        let child = Command::new(bin)
            .arg(&conf)
            .arg("--sentinel")
            .stdout(Stdio::from(log.try_clone().expect("log")))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("the sentinel starts");
        let s = Sentinel { port, dir, child };
        let deadline = Instant::now() + Duration::from_secs(10);
        while s.ask(&["PING"]).as_deref() != Some("+PONG") {
            assert!(Instant::now() < deadline, "the sentinel did not start");
            std::thread::sleep(Duration::from_millis(10)); // process start-up
        }
        s
    }

    /// A command on a raw socket, as the test user; the reply's lines after AUTH's `+OK`
    /// (at least `lines` of them).
    fn ask_lines(&self, args: &[&str], lines: usize) -> Option<Vec<String>> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
        let mut cmd = String::new();
        for c in [&["AUTH", USER, PASSWORD][..], args] {
            cmd.push_str(&format!("*{}\r\n", c.len()));
            for a in c {
                cmd.push_str(&format!("${}\r\n{a}\r\n", a.len()));
            }
        }
        s.write_all(cmd.as_bytes()).ok()?;
        let mut got = Vec::new();
        let mut buf = [0u8; 256];
        while String::from_utf8_lossy(&got).lines().count() < lines + 1 {
            let n = s.read(&mut buf).ok()?;
            if n == 0 {
                return None;
            }
            got.extend_from_slice(&buf[..n]);
        }
        let text = String::from_utf8_lossy(&got).into_owned();
        let mut all = text.lines().map(str::to_owned);
        (all.next()? == "+OK").then(|| all.collect())
    }

    /// A command's first reply line.
    fn ask(&self, args: &[&str]) -> Option<String> {
        self.ask_lines(args, 1)?.into_iter().next()
    }

    /// The port of the primary the sentinel names now.
    fn primary_port(&self) -> Option<u16> {
        // `*2 $9 127.0.0.1 $5 port`: five lines.
        let lines = self.ask_lines(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE], 5)?;
        lines.get(4)?.trim().parse().ok()
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub(crate) async fn a_sentinel_failover_is_followed_and_one_probe_per_recovery_holds() {
    // A replica's first sync at once (not after 5 s, waiting for others).
    let fast_sync = || vec!["--repl-diskless-sync-delay".to_owned(), "0".to_owned()];
    let Some(mut primary) = Server::start_with(fast_sync()) else {
        return;
    };
    let Some(bin) = server_binary() else { return };
    let Some(replica) = Server::start_with(vec![
        "--replicaof".into(),
        "127.0.0.1".into(),
        primary.port.to_string(),
        "--masteruser".into(),
        USER.into(),
        "--masterauth".into(),
        PASSWORD.into(),
    ]) else {
        return;
    };
    let admin = raw(&format!(
        "redis://{USER}:{PASSWORD}@127.0.0.1:{}",
        replica.port
    ))
    .await;
    let deadline = Instant::now() + 10 * SEC;
    loop {
        let info: String = cmd(&admin, "INFO", vec!["replication"]).await;
        if info.contains("master_link_status:up") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the replica never synced: {info}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await; // the replica's first sync
    }
    let sentinel = Sentinel::start(&bin, primary.port);
    let url = format!(
        "redis-sentinel://{USER}:{PASSWORD}@127.0.0.1:{}?sentinelServiceName={SERVICE}",
        sentinel.port
    );
    let prefix = prefix("sentinel");
    let all = replicas_with(3, config(3, COOLDOWN, 10 * SEC), |_| {
        (
            builder(&url, &prefix).poll_interval(Duration::from_millis(100)),
            ManualClock::new(),
        )
    })
    .await;
    // Through the sentinel: a trip spreads, one probe per recovery.
    assert_eq!(all[0].fail("warm-up", 3), 3);
    wait_all(
        &all,
        "warm-up",
        BreakerState::Open,
        "the trip to spread",
        5 * SEC,
    )
    .await;
    one_probe_then_closed(&all, "warm-up", "through a sentinel").await;
    // Mid-outage, the primary dies; the sentinel promotes its replica.
    let callers = Callers::start(&all.iter().collect::<Vec<_>>());
    let mut gate = Gate::default();
    assert_eq!(timed_fail(&all[1], "down", 3, &mut gate), 3);
    wait_all(
        &all,
        "down",
        BreakerState::Open,
        "the trip to spread",
        5 * SEC,
    )
    .await;
    let key = format!("{prefix}:v1:t:{}", hex("down"));
    let ep: Option<String> = cmd(&admin, "HGET", vec![&key, "ep"]).await;
    assert!(
        ep.is_some(),
        "replicated to the replica before the primary dies"
    );
    primary.kill9();
    wait_for("the sentinel to promote the replica", 30 * SEC, || {
        sentinel.primary_port() == Some(replica.port)
    })
    .await;
    for r in &all {
        wait_for("the replica to follow the new primary", 30 * SEC, || {
            r.fleet.status().connected
        })
        .await;
    }
    for r in &all {
        assert_eq!(r.registry.breaker_state("down"), BreakerState::Open);
    }
    // What the promoted replica had is kept: the same episode (nothing to re-publish).
    let admin = raw(&format!(
        "redis://{USER}:{PASSWORD}@127.0.0.1:{}",
        replica.port
    ))
    .await;
    let now: Option<String> = cmd(&admin, "HGET", vec![&key, "ep"]).await;
    assert_eq!(now, ep);
    // The next outage spreads through the new primary; one probe per recovery, both.
    assert_eq!(timed_fail(&all[2], "next", 3, &mut gate), 3);
    wait_all(
        &all,
        "next",
        BreakerState::Open,
        "a trip after the failover",
        10 * SEC,
    )
    .await;
    one_probe_then_closed(&all, "down", "after a sentinel failover").await;
    one_probe_then_closed(&all, "next", "after a sentinel failover").await;
    gate.add(callers.finish());
    gate.check("a sentinel failover");
}
