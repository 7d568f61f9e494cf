//! Fleet mode across three processes: this binary re-executes itself as each replica (the
//! `replica_process` test, a no-op unless `TH_FLEET_CHILD` is set), and the parent drives them
//! over stdin/stdout lines. Breaker time is each process's `ManualClock`, advanced on command;
//! only the store's own lease runs in real time (bounded waits).

#[path = "../harness/mod.rs"]
mod harness;

#[path = "../fleet/support.rs"]
mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tool_health::{BreakerState, CallOutcome, GateDecision, ManualClock, Permit};

use support::*;

const CHILD: &str = "TH_FLEET_CHILD";
const CHILD_URL: &str = "TH_FLEET_CHILD_URL";
const CHILD_PREFIX: &str = "TH_FLEET_CHILD_PREFIX";
const TOOL: &str = "search";
/// Every reply line holds this, then the reply (libtest prints its own lines too).
const MARK: &str = "@@ ";
const COOLDOWN: Duration = Duration::from_secs(1);
const LEASE: Duration = Duration::from_millis(400);

/// The child's side: one replica, driven by commands on stdin, one reply line each.
pub(crate) fn replica_process() {
    if std::env::var_os(CHILD).is_none() {
        return; // only as a child of the test below
    }
    let url = std::env::var(CHILD_URL).expect("url");
    let prefix = std::env::var(CHILD_PREFIX).expect("prefix");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let _enter = rt.enter();
    let r = Replica::with(
        builder(&url, &prefix),
        ManualClock::new(),
        config(3, COOLDOWN, LEASE),
    );
    rt.block_on(async {
        r.fleet.wait_connected(10 * SEC).await.expect("connected");
        r.fleet.sync_now().await.expect("a first round");
    });
    let say = |s: String| {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{MARK}{s}").expect("stdout");
        out.flush().expect("stdout");
    };
    say(format!("ready {}", r.fleet.replica_id()));
    let mut permit: Option<Permit> = None;
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("stdin");
        let words: Vec<&str> = line.split_whitespace().collect();
        let reply = match words[..] {
            ["fail", n] => format!("called {}", r.fail(TOOL, n.parse().expect("n"))),
            ["state"] => format!("{:?}", r.registry.breaker_state(TOOL)),
            ["advance", ms] => {
                r.clock
                    .advance(Duration::from_millis(ms.parse().expect("ms")));
                "ok".to_owned()
            }
            ["sync"] => format!("{:?}", rt.block_on(r.fleet.sync_now())),
            ["probe"] => match r.registry.check(TOOL) {
                GateDecision::Probe(p) => {
                    permit = Some(p);
                    "probe".to_owned()
                }
                d => format!("no {d:?}"),
            },
            ["succeed"] => {
                let p = permit.take().expect("a probe to report");
                r.registry
                    .record_with_permit(TOOL, p, CallOutcome::Success, MS);
                "ok".to_owned()
            }
            ["wait", state, ms] => {
                let want = match state {
                    "open" => BreakerState::Open,
                    _ => BreakerState::Closed,
                };
                let deadline = Instant::now() + Duration::from_millis(ms.parse().expect("ms"));
                let start = Instant::now();
                loop {
                    if r.registry.breaker_state(TOOL) == want {
                        break format!("after {}", start.elapsed().as_micros());
                    }
                    if Instant::now() > deadline {
                        break format!("timeout {:?}", r.registry.breaker_state(TOOL));
                    }
                    std::thread::sleep(Duration::from_micros(200)); // the network, not breaker time
                }
            }
            ["quit"] => break,
            _ => format!("unknown {line}"),
        };
        say(reply);
    }
    rt.block_on(r.fleet.shutdown());
}

/// One child process and its reply lines.
struct Proc {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    id: String,
}

impl Proc {
    fn spawn(url: &str, prefix: &str) -> Proc {
        let mut child = Command::new(std::env::current_exe().expect("this binary"))
            .args([
                "--exact",
                "replica_process",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(CHILD, "1")
            .env(CHILD_URL, url)
            .env(CHILD_PREFIX, prefix)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("a child process");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                // libtest may have begun the line ("test replica_process ... ").
                if let Some(at) = line.find(MARK) {
                    if tx.send(line[at + MARK.len()..].to_owned()).is_err() {
                        break;
                    }
                }
            }
        });
        let mut p = Proc {
            child,
            stdin,
            lines,
            id: String::new(),
        };
        let ready = p.reply("start-up");
        p.id = ready
            .strip_prefix("ready ")
            .unwrap_or_else(|| panic!("not ready: {ready}"))
            .to_owned();
        p
    }

    fn reply(&mut self, what: &str) -> String {
        self.lines
            .recv_timeout(10 * SEC)
            .unwrap_or_else(|e| panic!("process {}: no answer to {what}: {e}", self.id))
    }

    fn ask(&mut self, command: &str) -> String {
        writeln!(self.stdin, "{command}").expect("the child's stdin");
        self.stdin.flush().expect("flush");
        self.reply(command)
    }

    fn state(&mut self) -> String {
        self.ask("state")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every process asks the gate twice: the indexes of those granted the probe.
fn probes(procs: &mut [Proc]) -> Vec<usize> {
    let mut granted = Vec::new();
    for (i, p) in procs.iter_mut().enumerate() {
        for _ in 0..2 {
            let r = p.ask("probe");
            if r == "probe" {
                granted.push(i);
            } else {
                assert!(r.starts_with("no Refused"), "process {i}: {r}");
            }
        }
    }
    granted
}

fn advance_and_sync(procs: &mut [Proc], ms: u64) {
    for p in procs.iter_mut() {
        assert_eq!(p.ask(&format!("advance {ms}")), "ok");
    }
    for p in procs.iter_mut() {
        assert_eq!(p.ask("sync"), "Ok(())");
    }
}

pub(crate) async fn a_trip_spreads_one_process_probes_and_a_killed_probers_lease_passes_to_another()
{
    let Some(store) = store() else { return };
    let url = store.url();
    let prefix = prefix("procs");
    let started = Instant::now();
    let mut procs: Vec<Proc> = (0..3).map(|_| Proc::spawn(&url, &prefix)).collect();
    println!("three processes connected in {:?}", started.elapsed());

    // Process 0 trips the tool; the trip reaches the other two.
    assert_eq!(procs[0].ask("fail 3"), "called 3");
    assert_eq!(procs[0].state(), "Open");
    for (i, p) in procs.iter_mut().enumerate().skip(1) {
        let r = p.ask("wait open 5000");
        assert!(r.starts_with("after"), "process {i}: {r}");
        println!(
            "the trip reached process {i} {} µs after it was asked",
            &r[6..]
        );
    }

    // After the cooldown, exactly one process in the fleet gets the probe.
    advance_and_sync(&mut procs, 2000);
    let claimed = Instant::now();
    let granted = probes(&mut procs);
    assert_eq!(granted.len(), 1, "one probe in the fleet: {granted:?}");
    let dead = granted[0];

    // The prober dies before reporting (SIGKILL): its lease is not released.
    let mut prober = procs.remove(dead);
    prober.child.kill().expect("SIGKILL");
    let status = prober.child.wait().expect("reaped");
    assert!(!status.success(), "killed: {status:?}");
    println!("killed process {} (the prober): {status}", prober.id);
    drop(prober);
    assert!(
        probes(&mut procs).is_empty(),
        "no probe while the lease lives"
    );
    for p in procs.iter_mut() {
        assert_eq!(p.state(), "Open");
    }

    // The lease expires in the store (real time: its TTL).
    let client = raw(&url).await;
    let t = Instant::now();
    loop {
        let keys: Vec<String> = cmd(&client, "KEYS", vec![&format!("{prefix}:v1:p:*")]).await;
        if keys.is_empty() {
            break;
        }
        assert!(
            t.elapsed() < 10 * SEC,
            "the dead prober's lease never expired"
        );
        tokio::time::sleep(5 * MS).await; // the store's TTL, not breaker time
    }
    println!(
        "the dead prober's lease expired {:?} after the kill",
        t.elapsed()
    );

    // Another process takes the probe; its success closes the tool in every survivor. (The
    // clocks move on at least as far as the store's real time did since the claims: a clock
    // behind the store's would still believe in the lease it dropped.)
    let since = u64::try_from(claimed.elapsed().as_millis()).unwrap_or(u64::MAX);
    advance_and_sync(&mut procs, since + 2000);
    let granted = probes(&mut procs);
    assert_eq!(
        granted.len(),
        1,
        "one survivor takes the probe: {granted:?}"
    );
    let taker = granted[0];
    assert_eq!(procs[taker].ask("succeed"), "ok");
    for (i, p) in procs.iter_mut().enumerate() {
        let r = p.ask("wait closed 5000");
        assert!(r.starts_with("after"), "survivor {i}: {r}");
    }
    for p in procs.iter_mut() {
        assert_eq!(p.state(), "Closed");
    }
    for mut p in procs {
        let _ = writeln!(p.stdin, "quit");
    }
    println!("whole scenario: {:?}", started.elapsed());
}

fn main() -> std::process::ExitCode {
    harness::run(trials![
        plain replica_process,
        multi a_trip_spreads_one_process_probes_and_a_killed_probers_lease_passes_to_another,
    ])
}
