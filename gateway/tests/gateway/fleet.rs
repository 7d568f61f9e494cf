//! Two gateway replicas on one Redis (or Valkey) share their breakers: a trip on one is a
//! refusal on the other, which never calls the sick tool, and its hosts are told.

use std::process::Stdio;

use serde_json::json;

use crate::breakers::after_change;
use crate::support::{
    call, eventually, list, rmcp_http, seen_count, skip, text, upstream, Gateway, WAIT,
};

/// A Redis or Valkey server binary: `TOOL_HEALTH_FLEET_TEST_SERVER`, else one on the PATH.
fn store_binary() -> Result<String, String> {
    if let Ok(p) = std::env::var("TOOL_HEALTH_FLEET_TEST_SERVER") {
        if !p.is_empty() {
            return Ok(p);
        }
    }
    for name in ["valkey-server", "redis-server"] {
        let found = std::process::Command::new(name)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if found {
            return Ok(name.to_owned());
        }
    }
    Err(
        "no Redis or Valkey server (set TOOL_HEALTH_FLEET_TEST_SERVER, or install redis-server)"
            .into(),
    )
}

/// A store process on a free port (`extra` arguments after the usual ones), listening.
async fn store(binary: &str, extra: &[&str]) -> (tokio::process::Child, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = std::env::temp_dir().join(format!("gw-store-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let child = tokio::process::Command::new(binary)
        .args([
            "--bind",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .arg("--dir")
        .arg(&dir)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the store");
    eventually("the store listens", WAIT, || async {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()
            .map(drop)
    })
    .await;
    (child, port)
}

/// One command on a raw connection; the reply's text.
async fn ask(port: u16, args: &[&str]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("the store");
    let mut cmd = format!("*{}\r\n", args.len());
    for a in args {
        cmd.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    s.write_all(cmd.as_bytes()).await.expect("a command");
    let mut buf = vec![0u8; 4096];
    let n = s.read(&mut buf).await.expect("a reply");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

pub async fn replicas_share_a_trip() {
    let binary = store_binary().unwrap_or_else(|why| skip(&why));
    let (_store, port) = store(&binary, &[]).await;
    share_a_trip(&format!("redis://127.0.0.1:{port}")).await;
}

/// The same on a cluster of three primaries (`redis-cluster://`): the gateway's `fleet`
/// section takes a cluster's URL.
pub async fn replicas_share_a_trip_on_a_cluster() {
    let binary = store_binary().unwrap_or_else(|why| skip(&why));
    let cluster = [
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
    ];
    let mut nodes = Vec::new();
    for _ in 0..3 {
        nodes.push(store(&binary, &cluster).await);
    }
    for (_, p) in &nodes[1..] {
        ask(
            nodes[0].1,
            &["CLUSTER", "MEET", "127.0.0.1", &p.to_string()],
        )
        .await;
    }
    for (i, (_, p)) in nodes.iter().enumerate() {
        let (lo, hi) = (i * 16384 / 3, (i + 1) * 16384 / 3 - 1);
        let reply = ask(
            *p,
            &["CLUSTER", "ADDSLOTSRANGE", &lo.to_string(), &hi.to_string()],
        )
        .await;
        assert!(reply.starts_with("+OK"), "{reply}");
    }
    for (_, p) in &nodes {
        eventually("the cluster to form", WAIT, || async {
            ask(*p, &["CLUSTER", "INFO"])
                .await
                .contains("cluster_state:ok")
                .then_some(())
        })
        .await;
    }
    let seeds: Vec<String> = nodes[1..]
        .iter()
        .map(|(_, p)| format!("node=127.0.0.1:{p}"))
        .collect();
    share_a_trip(&format!(
        "redis-cluster://127.0.0.1:{}?{}",
        nodes[0].1,
        seeds.join("&")
    ))
    .await;
}

async fn share_a_trip(url: &str) {
    let prefix = format!("gw-test-{}", std::process::id());
    let config = json!({
        "mcpServers": {"rs": upstream::rmcp()},
        "health": {"failureThreshold": 3, "cooldownSeconds": 120,
                   "fleet": {"url": url, "prefix": prefix}},
    });
    let a = Gateway::http(&config, &[]).await;
    let b = Gateway::http(&config, &[]).await;
    let (client_a, _) = rmcp_http(a.port).await;
    let (client_b, changes_b) = rmcp_http(b.port).await;
    assert!(list(&client_b).await.iter().any(|t| t == "rs__flaky"));
    let seen = changes_b.count();
    for _ in 0..3 {
        let r = call(&client_a, "rs__flaky", json!({})).await.unwrap();
        assert_eq!(text(&r), "flaky: upstream answered 503");
    }
    // Replica B refuses a tool it never saw fail, and tells its hosts.
    eventually("B refuses rs/flaky", WAIT, || async {
        let (_, v) = b.get("/v1/tools/rs__flaky").await;
        (v["available"] == false).then_some(())
    })
    .await;
    after_change(&client_b, &changes_b, seen, "B hides flaky", |n| {
        !n.iter().any(|t| t == "rs__flaky")
    })
    .await;
    let r = call(&client_b, "rs__flaky", json!({})).await.unwrap();
    assert!(
        text(&r).starts_with(crate::support::REFUSAL),
        "{}",
        text(&r)
    );
    let seen_b = call(&client_b, "rs__seen", json!({})).await.unwrap();
    let seen_b: serde_json::Value = serde_json::from_str(&text(&seen_b)).unwrap();
    assert_eq!(
        seen_count(&seen_b, "tools", "flaky"),
        0,
        "B's upstream was never called: {seen_b}"
    );
    assert!(b.log.text().contains("fleet mode on"), "{}", b.log.text());
}
