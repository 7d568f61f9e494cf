//! Ingest: the same OTLP/HTTP protobuf requests sent over loopback to the receiver (forwarding
//! off) and to Rotel (blackhole exporter, no debug log), one after the other on the same
//! cores, in one run; spans per second and their ratio.
//!
//! ```text
//! scripts/agents.sh     # installs rotel into target/agents/rotel (or set ROTEL_AGENT)
//! CARGO_PROFILE_BENCH_DEBUG=0 cargo bench --bench ingest --features receiver
//! ```
//!
//! Workloads: the captured requests of the 11 framework setups (`tests/receiver/fixtures/`,
//! replayed in turn), and synthetic requests of 512 GenAI tool spans each. The load generator is
//! this process: `CONNECTIONS` keep-alive HTTP/1.1 connections, each sending its next request
//! as soon as the previous one is answered, for `SECONDS` per target and workload. The receiver
//! is served in this process on a runtime of its own (2 worker threads), Rotel as its own
//! process; both share the machine's cores with the load generator alike. Prints one line per
//! workload and a JSON line (`ingest-ratio {...}`) for BENCHMARKS.md. Without Rotel, only the
//! receiver's numbers are printed.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tool_health::receiver::Receiver;
use tool_health::ToolHealthRegistry;

const CONNECTIONS: usize = 8;
const SECONDS: f64 = 4.0;

/// One request: its body and how many spans it carries.
#[derive(Clone)]
struct Req {
    body: Arc<Vec<u8>>,
    spans: u64,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Counts spans in an ExportTraceServiceRequest by walking its envelopes (no dev-dependency
/// on the generated types in the bench).
fn span_count(body: &[u8]) -> u64 {
    fn fields(mut b: &[u8], mut f: impl FnMut(u64, &[u8])) {
        fn varint(b: &mut &[u8]) -> u64 {
            let mut v = 0u64;
            for shift in (0..64).step_by(7) {
                let byte = b[0];
                *b = &b[1..];
                v |= u64::from(byte & 0x7f) << shift;
                if byte & 0x80 == 0 {
                    break;
                }
            }
            v
        }
        while !b.is_empty() {
            let tag = varint(&mut b);
            match tag & 7 {
                0 => {
                    varint(&mut b);
                }
                1 => b = &b[8..],
                5 => b = &b[4..],
                2 => {
                    let n = varint(&mut b) as usize;
                    f(tag >> 3, &b[..n]);
                    b = &b[n..];
                }
                _ => panic!("not protobuf"),
            }
        }
    }
    let mut n = 0;
    fields(body, |f, rs| {
        if f == 1 {
            fields(rs, |f, ss| {
                if f == 2 {
                    fields(ss, |f, _| n += u64::from(f == 2));
                }
            });
        }
    });
    n
}

fn fixtures() -> Vec<Req> {
    let dir = root().join("tests/receiver/fixtures");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path().join("otlp.pb"))
        .filter(|p| p.exists())
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|p| {
            let body = std::fs::read(p).unwrap();
            Req {
                spans: span_count(&body),
                body: Arc::new(body),
            }
        })
        .collect()
}

/// Protobuf by hand: a request of `n` execute_tool spans over 16 tools, a third failed.
fn synthetic(n: usize) -> Req {
    fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    fn len(out: &mut Vec<u8>, field: u64, bytes: &[u8]) {
        varint(out, field << 3 | 2);
        varint(out, bytes.len() as u64);
        out.extend_from_slice(bytes);
    }
    fn fixed64(out: &mut Vec<u8>, field: u64, v: u64) {
        varint(out, field << 3 | 1);
        out.extend_from_slice(&v.to_le_bytes());
    }
    fn attr(key: &str, value: &str) -> Vec<u8> {
        let mut any = Vec::new();
        len(&mut any, 1, value.as_bytes());
        let mut kv = Vec::new();
        len(&mut kv, 1, key.as_bytes());
        len(&mut kv, 2, &any);
        kv
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let mut scope_spans = Vec::new();
    let mut scope = Vec::new();
    len(&mut scope, 1, b"bench-agent");
    len(&mut scope_spans, 1, &scope);
    for i in 0..n {
        let tool = format!("tool_{}", i % 16);
        let mut span = Vec::new();
        len(&mut span, 1, &[7; 16]);
        len(&mut span, 2, &(i as u64 + 1).to_be_bytes());
        len(&mut span, 4, &[9; 8]);
        len(&mut span, 5, format!("execute_tool {tool}").as_bytes());
        varint(&mut span, 6 << 3);
        varint(&mut span, 1);
        fixed64(&mut span, 7, now - 2_000_000);
        fixed64(&mut span, 8, now - 1_000_000);
        len(&mut span, 9, &attr("gen_ai.operation.name", "execute_tool"));
        len(&mut span, 9, &attr("gen_ai.tool.name", &tool));
        len(
            &mut span,
            9,
            &attr("gen_ai.tool.call.id", &format!("call_{i}")),
        );
        if i % 3 == 0 {
            let mut status = Vec::new();
            len(&mut status, 2, b"boom");
            varint(&mut status, 3 << 3);
            varint(&mut status, 2);
            len(&mut span, 15, &status);
        }
        len(&mut scope_spans, 2, &span);
    }
    let mut resource_spans = Vec::new();
    len(&mut resource_spans, 2, &scope_spans);
    let mut body = Vec::new();
    len(&mut body, 1, &resource_spans);
    Req {
        spans: span_count(&body),
        body: Arc::new(body),
    }
}

/// Sends `reqs` round-robin over keep-alive connections for `SECONDS`; spans per second.
async fn load(port: u16, reqs: &[Req]) -> f64 {
    let spans = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs_f64(SECONDS);
    let mut tasks = Vec::new();
    for c in 0..CONNECTIONS {
        let reqs = reqs.to_vec();
        let spans = spans.clone();
        tasks.push(tokio::spawn(async move {
            let mut socket = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
            socket.set_nodelay(true).unwrap();
            let mut buf = vec![0u8; 64 * 1024];
            let mut i = c;
            while Instant::now() < deadline {
                let r = &reqs[i % reqs.len()];
                i += 1;
                let head = format!(
                    "POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/x-protobuf\r\nContent-Length: {}\r\n\r\n",
                    r.body.len()
                );
                socket.write_all(head.as_bytes()).await.unwrap();
                socket.write_all(&r.body).await.unwrap();
                // The answer: headers, then Content-Length bytes.
                let mut have = 0usize;
                let (status, body_start, body_len) = loop {
                    let n = socket.read(&mut buf[have..]).await.unwrap();
                    assert!(n > 0, "connection closed");
                    have += n;
                    if let Some(end) = buf[..have].windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = std::str::from_utf8(&buf[..end]).unwrap();
                        let status: u16 = head[9..12].parse().unwrap();
                        let len = head
                            .lines()
                            .find_map(|l| {
                                let (k, v) = l.split_once(':')?;
                                k.eq_ignore_ascii_case("content-length").then(|| v.trim().parse::<usize>().ok())?
                            })
                            .unwrap_or(0);
                        break (status, end + 4, len);
                    }
                };
                while have < body_start + body_len {
                    let n = socket.read(&mut buf[have..]).await.unwrap();
                    assert!(n > 0, "connection closed");
                    have += n;
                }
                assert_eq!(status, 200, "HTTP {status}");
                spans.fetch_add(r.spans, Ordering::Relaxed);
            }
        }));
    }
    let started = Instant::now();
    for t in tasks {
        t.await.unwrap();
    }
    spans.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

fn rotel_agent() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("ROTEL_AGENT") {
        return Some(p.into());
    }
    let lib = root().join("target/agents/rotel/lib");
    std::fs::read_dir(lib)
        .ok()?
        .filter_map(Result::ok)
        .find_map(|d| {
            let p = d.path().join("site-packages/rotel/rotel-agent");
            p.exists().then_some(p)
        })
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this too: then only build.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let workloads = [
        ("captured requests (11)", fixtures()),
        ("synthetic, 512 spans", vec![synthetic(512)]),
    ];
    let client = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    // The receiver, on a runtime of its own.
    let server = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let registry = Arc::new(ToolHealthRegistry::new());
    let receiver = Receiver::new(registry);
    let port = server.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let app = receiver.router();
        tokio::spawn(async move { axum::serve(listener, app).await });
        port
    });

    let rotel = rotel_agent().map(|bin| {
        let (grpc, http) = (free_port(), free_port());
        let child = Command::new(bin)
            .args([
                "start",
                "--otlp-grpc-endpoint",
                &format!("127.0.0.1:{grpc}"),
            ])
            .args(["--otlp-http-endpoint", &format!("127.0.0.1:{http}")])
            .args(["--exporter", "blackhole"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", http)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "Rotel did not listen"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        (child, http)
    });
    if rotel.is_none() {
        println!(
            "ingest: rotel-agent not found (scripts/agents.sh or ROTEL_AGENT): the receiver alone"
        );
    }

    let mut results = Vec::new();
    for (name, reqs) in &workloads {
        // One after the other, the same requests.
        let ours = client.block_on(load(port, reqs));
        let theirs = rotel.as_ref().map(|(_, p)| client.block_on(load(*p, reqs)));
        match theirs {
            Some(t) => println!(
                "ingest {name}: receiver {ours:.0} spans/s, rotel {t:.0} spans/s, ratio {:.2}",
                ours / t
            ),
            None => println!("ingest {name}: receiver {ours:.0} spans/s"),
        }
        results.push(format!(
            "{{\"workload\":\"{name}\",\"receiver\":{ours:.0},\"rotel\":{},\"ratio\":{}}}",
            theirs.map_or("null".into(), |t| format!("{t:.0}")),
            theirs.map_or("null".into(), |t| format!("{:.3}", ours / t)),
        ));
    }
    println!("ingest-ratio [{}]", results.join(","));
    if let Some((mut child, _)) = rotel {
        let _ = child.kill();
        let _ = child.wait();
    }
    drop(server);
}
