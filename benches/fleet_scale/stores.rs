//! The stores the scale bench runs against — one server, and a cluster of three primaries —
//! started here from the fleet tests' server binary (no credentials, `maxclients` raised), and
//! what they count: `INFO commandstats`, `stats`, `cpu`, `clients`, summed over the nodes.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Commands the protocol's scripts call: counted apart from the replicas' own.
const IN_SCRIPTS: &[&str] = &[
    "type",
    "get",
    "set",
    "del",
    "incr",
    "hset",
    "hmget",
    "hlen",
    "hincrby",
    "hgetall",
    "hdel",
    "sadd",
    "srem",
    "srandmember",
    "zadd",
    "zrange",
    "zrem",
    "zremrangebyscore",
    "zcard",
    "pexpire",
    "pttl",
    "time",
    "publish",
    "spublish",
];
/// Commands the bench itself sends.
const OURS: &[&str] = &["info", "cluster", "eval", "flushall", "config", "client"];

/// One server process.
pub(crate) struct Node {
    pub(crate) port: u16,
    child: Child,
    dir: PathBuf,
}

impl Node {
    fn start(bin: &Path, extra: &[&str]) -> Node {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let dir = std::env::temp_dir().join(format!("th-scale-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a dir");
        let child = Command::new(bin)
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args(["--save", "", "--appendonly", "no", "--maxclients", "50000"])
            .arg("--dir")
            .arg(&dir)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the server starts");
        let node = Node { port, child, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        while ask(port, &["PING"]).as_deref() != Some("+PONG") {
            assert!(Instant::now() < deadline, "the server did not start");
            std::thread::sleep(Duration::from_millis(10));
        }
        node
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A command on a raw socket; the whole reply as text (bounded: 1 MB, 2 s).
pub(crate) fn ask(port: u16, args: &[&str]) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let mut cmd = format!("*{}\r\n", args.len());
    for a in args {
        cmd.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    s.write_all(cmd.as_bytes()).ok()?;
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        let n = s.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
        if complete(&got) || got.len() > 1 << 20 {
            break;
        }
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    // A bulk string's body, or the simple reply's line.
    Some(match text.strip_prefix('$') {
        Some(rest) => rest.split_once("\r\n").map_or(rest, |(_, b)| b).to_owned(),
        None => text.trim_end().to_owned(),
    })
}

/// Whether a simple or bulk reply is complete.
fn complete(got: &[u8]) -> bool {
    let text = String::from_utf8_lossy(got);
    match text.as_bytes().first() {
        Some(b'$') => text
            .split_once("\r\n")
            .and_then(|(len, rest)| Some(rest.len() >= len[1..].parse::<usize>().ok()? + 2))
            .unwrap_or(false),
        Some(_) => text.ends_with("\r\n"),
        None => false,
    }
}

/// A store: one server, or the primaries of a cluster.
pub(crate) struct Store {
    pub(crate) nodes: Vec<Node>,
    pub(crate) cluster: bool,
}

impl Store {
    pub(crate) fn single(bin: &Path) -> Store {
        Store {
            nodes: vec![Node::start(bin, &[])],
            cluster: false,
        }
    }

    /// Three primaries splitting the slots evenly (no replicas: the cost of the fleet is the
    /// primaries').
    pub(crate) fn cluster(bin: &Path) -> Store {
        let nodes: Vec<Node> = (0..3)
            .map(|_| {
                Node::start(
                    bin,
                    &[
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        "nodes.conf",
                    ],
                )
            })
            .collect();
        for n in &nodes[1..] {
            ask(
                nodes[0].port,
                &["CLUSTER", "MEET", "127.0.0.1", &n.port.to_string()],
            );
        }
        for (i, n) in nodes.iter().enumerate() {
            let (lo, hi) = (i * 16384 / 3, (i + 1) * 16384 / 3 - 1);
            ask(
                n.port,
                &["CLUSTER", "ADDSLOTSRANGE", &lo.to_string(), &hi.to_string()],
            );
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while !nodes.iter().all(|n| {
            ask(n.port, &["CLUSTER", "INFO"]).is_some_and(|i| i.contains("cluster_state:ok"))
        }) {
            assert!(Instant::now() < deadline, "the cluster did not form");
            std::thread::sleep(Duration::from_millis(50));
        }
        Store {
            nodes,
            cluster: true,
        }
    }

    pub(crate) fn url(&self) -> String {
        let p = self.nodes[0].port;
        if self.cluster {
            let seeds: Vec<String> = self.nodes[1..]
                .iter()
                .map(|n| format!("node=127.0.0.1:{}", n.port))
                .collect();
            format!("redis-cluster://127.0.0.1:{p}?{}", seeds.join("&"))
        } else {
            format!("redis://127.0.0.1:{p}")
        }
    }

    /// The counters now, summed over the nodes (and the busiest node's CPU).
    pub(crate) fn counters(&self) -> Counters {
        let mut c = Counters::default();
        for n in &self.nodes {
            let info = ask(n.port, &["INFO", "commandstats", "stats", "cpu", "clients"])
                .unwrap_or_default();
            let mut cpu = 0.0;
            for line in info.lines() {
                let Some((k, v)) = line.split_once(':') else {
                    continue;
                };
                if let Some(cmd) = k.strip_prefix("cmdstat_") {
                    let calls = v
                        .split(',')
                        .find_map(|f| f.strip_prefix("calls="))
                        .and_then(|x| x.parse::<u64>().ok())
                        .unwrap_or(0);
                    *c.calls.entry(cmd.to_owned()).or_default() += calls;
                    continue;
                }
                let num = |v: &str| v.trim().parse::<f64>().unwrap_or(0.0);
                match k {
                    "total_net_input_bytes" => c.bytes_in += num(v) as u64,
                    "total_net_output_bytes" => c.bytes_out += num(v) as u64,
                    "used_cpu_sys" | "used_cpu_user" => cpu += num(v),
                    "connected_clients" => c.clients += num(v) as u64,
                    _ => {}
                }
            }
            c.cpu += cpu;
            c.node_cpu.push(cpu);
        }
        c
    }
}

/// What the store counted.
#[derive(Debug, Default, Clone)]
pub(crate) struct Counters {
    pub(crate) calls: BTreeMap<String, u64>,
    pub(crate) bytes_in: u64,
    pub(crate) bytes_out: u64,
    /// CPU seconds, all nodes.
    pub(crate) cpu: f64,
    pub(crate) node_cpu: Vec<f64>,
    pub(crate) clients: u64,
}

/// What happened between two readings.
#[derive(Debug, Default, Clone)]
pub(crate) struct Delta {
    /// Commands the replicas sent (scripts, subscriptions, connections' own).
    pub(crate) commands: u64,
    /// Commands their scripts ran inside the server.
    pub(crate) in_scripts: u64,
    /// `EVALSHA` alone.
    pub(crate) scripts: u64,
    pub(crate) bytes: u64,
    /// CPU seconds, all nodes; the busiest node's.
    pub(crate) cpu: f64,
    pub(crate) max_node_cpu: f64,
}

impl Counters {
    pub(crate) fn since(&self, before: &Counters) -> Delta {
        let mut d = Delta::default();
        for (cmd, calls) in &self.calls {
            let n = calls - before.calls.get(cmd).copied().unwrap_or(0);
            let base = cmd.split('|').next().unwrap_or(cmd);
            if IN_SCRIPTS.contains(&base) {
                d.in_scripts += n;
            } else if !OURS.contains(&base) {
                d.commands += n;
            }
            if base == "evalsha" {
                d.scripts += n;
            }
        }
        d.bytes = (self.bytes_in + self.bytes_out) - (before.bytes_in + before.bytes_out);
        d.cpu = self.cpu - before.cpu;
        d.max_node_cpu = self
            .node_cpu
            .iter()
            .zip(&before.node_cpu)
            .map(|(a, b)| a - b)
            .fold(0.0, f64::max);
        d
    }
}
