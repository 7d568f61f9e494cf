//! Config reload (issue 30, item 3) through the binary, with this binary as the rmcp upstream
//! and rmcp's client over streamable HTTP as the host: `SIGHUP` adds a server and the host's
//! session goes on (told, it lists the new tools); a change of the file — a symlink swapped as
//! Kubernetes swaps a ConfigMap — removes one and every process of it; a config with problems
//! is refused with the `--check` messages and the running one serves on; an unchanged server
//! keeps its process and its open breaker, a server with a new launch is restarted with its
//! breakers kept, one with new settings takes them live; a call under way to a removed server
//! is answered and counted nowhere.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::breakers::{after_change, seen};
use crate::lifecycle::{all_gone, launched_fixture};
use crate::supervise::server;
use crate::support::{
    alive, call, eventually, gateway_bin, list, pids_in, rmcp_http, scratch, seen_count, signal,
    text, upstream, Gateway, REFUSAL, WAIT,
};

fn has(names: &[String], name: &str) -> bool {
    names.iter().any(|n| n == name)
}

/// Writes `config` to `path` in place.
fn write(path: &Path, config: &Value) {
    std::fs::write(path, serde_json::to_string_pretty(config).unwrap()).unwrap();
}

/// Sends `SIGHUP` to the gateway.
fn hangup(gw: &Gateway) {
    signal(gw.child.id().expect("running"), "HUP");
}

/// `reloads` of `GET /v1/servers`.
async fn reloads(gw: &Gateway) -> Value {
    gw.get("/v1/servers").await.1["reloads"].clone()
}

/// The servers `GET /v1/servers` lists, by name.
async fn server_names(gw: &Gateway) -> Vec<String> {
    let (_, v) = gw.get("/v1/servers").await;
    v["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["server"].as_str().unwrap().to_owned())
        .collect()
}

/// The pid of a connected server.
async fn pid(gw: &Gateway, name: &str) -> u64 {
    eventually(&format!("`{name}` connected"), WAIT, || async {
        let s = server(gw, name).await;
        (s["connected"] == true)
            .then(|| s["pid"].as_u64())
            .flatten()
    })
    .await
}

/// `SIGHUP` adds a server: the host's session goes on, it is told, and its next list has the
/// new server's tools, which answer through the same session.
pub async fn sighup_adds_a_server_and_no_session_is_dropped() {
    let mut config = json!({"mcpServers": {"a": upstream::rmcp()}});
    // SIGHUP only: the watcher would reload the same change first.
    let gw = Gateway::http(&config, &["--no-watch"]).await;
    let (client, changes) = rmcp_http(gw.port).await;
    let names = list(&client).await;
    assert!(has(&names, "a__ok") && !has(&names, "b__ok"), "{names:?}");
    let a_pid = pid(&gw, "a").await;
    let before = changes.count();

    config["mcpServers"]["b"] = upstream::rmcp();
    write(&gw.config, &config);
    hangup(&gw);
    let (_, names) = after_change(&client, &changes, before, "b's tools listed", |n| {
        has(n, "b__ok")
    })
    .await;
    assert!(has(&names, "a__ok"), "{names:?}");
    // The same session, both servers through it.
    assert_eq!(
        text(&call(&client, "b__ok", json!({})).await.unwrap()),
        "fine"
    );
    assert_eq!(
        text(&call(&client, "a__ok", json!({})).await.unwrap()),
        "fine"
    );
    assert!(!client.peer().is_transport_closed());
    gw.log
        .wait_for(
            "config reloaded (SIGHUP): added `b`; 1 server unchanged",
            WAIT,
        )
        .await;
    assert_eq!(pid(&gw, "a").await, a_pid, "a is untouched");
    assert_eq!(server_names(&gw).await, ["a", "b"]);
    let (_, servers) = gw.get("/v1/servers").await;
    assert_eq!(
        servers["hosts"], 1,
        "the host's session is still there: {servers}"
    );
    let r = &servers["reloads"];
    assert_eq!(
        (&r["applied"], &r["refused"]),
        (&json!(1), &json!(0)),
        "{r}"
    );
    assert_eq!(r["last"]["trigger"], "SIGHUP", "{r}");
    assert_eq!(r["last"]["result"], "applied", "{r}");
    assert_eq!(r["last"]["changes"], "added `b`; 1 server unchanged", "{r}");
    let (_, health) = gw.get("/healthz").await;
    assert_eq!(health["servers"], 2, "{health}");
    assert_eq!(health["reloads"]["applied"], 1, "{health}");
}

/// The config's layout in a Kubernetes ConfigMap volume: `gw.json -> ..data/gw.json`,
/// `..data -> version` (swapped whole to update).
fn config_map(dir: &Path, version: &str, config: &Value) -> PathBuf {
    std::fs::create_dir_all(dir.join(version)).unwrap();
    write(&dir.join(version).join("gw.json"), config);
    let data = dir.join("..data");
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(version, &tmp).unwrap();
    // The swap: a rename over the old link, atomic.
    std::fs::rename(&tmp, &data).unwrap();
    let path = dir.join("gw.json");
    if std::fs::symlink_metadata(&path).is_err() {
        std::os::unix::fs::symlink("..data/gw.json", &path).unwrap();
    }
    path
}

/// A change of the file (no signal) removes a server: its tools leave the host's list (it is
/// told), every process of it (a `sh -c` launcher, its helpers, one deaf to SIGTERM) is gone,
/// and the other server is untouched.
pub async fn a_file_change_removes_a_server_and_its_processes_are_gone() {
    let dir = scratch();
    let pids = dir.join("gone.pids");
    let mut config =
        json!({"mcpServers": {"gone": launched_fixture(&pids), "keep": upstream::rmcp()}});
    let path = config_map(&dir.join("cm"), "v1", &config);
    let gw = Gateway::start(path, "127.0.0.1:0", &[], &[]).await;
    let (client, changes) = rmcp_http(gw.port).await;
    let names = list(&client).await;
    assert!(
        has(&names, "gone__ok") && has(&names, "keep__ok"),
        "{names:?}"
    );
    let keep_pid = pid(&gw, "keep").await;
    pid(&gw, "gone").await;
    let gone_pids = pids_in(&pids);
    assert_eq!(
        gone_pids.len(),
        3,
        "the launcher and its two helpers: {gone_pids:?}"
    );
    let before = changes.count();

    config["mcpServers"].as_object_mut().unwrap().remove("gone");
    let swapped = Instant::now();
    config_map(&dir.join("cm"), "v2", &config);
    let (_, names) = after_change(&client, &changes, before, "gone's tools left", |n| {
        !has(n, "gone__ok")
    })
    .await;
    println!(
        "a removed server's tools left the host's list {:.2} s after the ConfigMap swap",
        swapped.elapsed().as_secs_f64()
    );
    assert!(has(&names, "keep__ok"), "{names:?}");
    let left = all_gone(&gone_pids, WAIT).await;
    assert!(left.is_empty(), "outlived its removal: {left:?}");
    println!(
        "and its processes were all gone {:.2} s after it",
        swapped.elapsed().as_secs_f64()
    );
    gw.log
        .wait_for(
            "config reloaded (the file changed): removed `gone`; 1 server unchanged",
            WAIT,
        )
        .await;
    gw.log
        .wait_for(
            "MCP server `gone` was removed from the config and stopped",
            WAIT,
        )
        .await;
    assert_eq!(server_names(&gw).await, ["keep"]);
    assert_eq!(pid(&gw, "keep").await, keep_pid, "keep is untouched");
    let err = call(&client, "gone__ok", json!({})).await.unwrap_err();
    assert!(err.1.contains("no MCP server `gone`"), "{err:?}");
    assert_eq!(
        text(&call(&client, "keep__ok", json!({})).await.unwrap()),
        "fine"
    );
    let r = reloads(&gw).await;
    assert_eq!(r["last"]["trigger"], "the file changed", "{r}");
    assert_eq!(r["applied"], 1, "{r}");
}

/// The `  file:line: …` lines `--check` prints for the config at `path`.
async fn check_lines(path: &Path) -> (Option<i32>, Vec<String>) {
    let out = tokio::process::Command::new(gateway_bin())
        .arg("--config")
        .arg(path)
        .arg("--check")
        .output()
        .await
        .expect("run --check");
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    let lines = text
        .lines()
        .filter(|l| l.starts_with("  "))
        .map(str::to_owned)
        .collect();
    (out.status.code(), lines)
}

/// A config with problems is refused — the log says the same `file:line` problems and fixes
/// `--check` says — and the running config serves on; the next good one is applied.
pub async fn a_broken_config_is_refused_and_the_running_one_keeps_serving() {
    let mut config = json!({"mcpServers": {"a": upstream::rmcp()}});
    let gw = Gateway::http(&config, &["--no-watch"]).await;
    let (client, changes) = rmcp_http(gw.port).await;
    assert!(has(&list(&client).await, "a__ok"));
    let a_pid = pid(&gw, "a").await;

    let mut broken = config.clone();
    broken["mcpServers"]["b"] = upstream::rmcp();
    broken["health"] = json!({"failureThreshold": -1, "cooldownSeconds": "soon"});
    write(&gw.config, &broken);
    let (code, expected) = check_lines(&gw.config).await;
    assert_eq!(code, Some(2), "--check refuses it");
    assert_eq!(
        expected.len(),
        4,
        "two problems, each with its fix: {expected:?}"
    );
    hangup(&gw);
    gw.log
        .wait_for(
            "the config was not reloaded (SIGHUP): the gateway keeps running with the config it had",
            WAIT,
        )
        .await;
    // The event's lines after its first: the same lines `--check` printed.
    for line in &expected {
        gw.log.wait_for(line, WAIT).await;
    }
    let log = gw.log.text();
    assert!(
        log.lines()
            .any(|l| l.contains("ERROR") && l.contains("not reloaded")),
        "logged at ERROR:\n{log}"
    );
    // The running config serves on.
    assert_eq!(
        text(&call(&client, "a__ok", json!({})).await.unwrap()),
        "fine"
    );
    assert!(!has(&list(&client).await, "b__ok"));
    assert_eq!(server_names(&gw).await, ["a"]);
    let r = reloads(&gw).await;
    assert_eq!(
        (&r["applied"], &r["refused"]),
        (&json!(0), &json!(1)),
        "{r}"
    );
    assert_eq!(r["last"]["result"], "refused", "{r}");
    let problems = r["last"]["problems"].as_array().expect("the problems");
    assert_eq!(problems.len(), 2, "{r}");
    let first = expected[0].trim_start();
    assert!(
        first.starts_with(problems[0].as_str().unwrap()),
        "the API says the log's first problem: {first:?} vs {r}"
    );

    // Fixed: the next reload applies it.
    let before = changes.count();
    config["mcpServers"]["b"] = upstream::rmcp();
    write(&gw.config, &config);
    assert_eq!(check_lines(&gw.config).await.0, Some(0));
    hangup(&gw);
    after_change(&client, &changes, before, "b listed", |n| has(n, "b__ok")).await;
    let r = reloads(&gw).await;
    assert_eq!(
        (&r["applied"], &r["refused"]),
        (&json!(1), &json!(1)),
        "{r}"
    );
    assert_eq!(pid(&gw, "a").await, a_pid, "a is untouched by both reloads");
}

/// Trips `tool` (2 failures) and waits until it left the host's list.
async fn trip(
    client: &rmcp::service::RunningService<rmcp::RoleClient, crate::support::Changes>,
    changes: &crate::support::Changes,
    tool: &str,
) {
    let before = changes.count();
    for _ in 0..2 {
        let r = call(client, tool, json!({})).await.unwrap();
        assert_eq!(text(&r), "flaky: upstream answered 503");
    }
    after_change(client, changes, before, "the tripped tool hidden", |n| {
        !has(n, tool)
    })
    .await;
}

/// One reload, three servers: `keep` unchanged keeps its process and its open breaker; `moved`
/// (a new `env`) is restarted — a new process — with its open breaker kept; `tuned` (a new
/// `timeoutSeconds`) keeps its process and times out at the new bound at once.
pub async fn an_unchanged_server_keeps_its_pid_and_its_open_breaker() {
    let mut moved = upstream::rmcp();
    moved["env"]["VERSION"] = json!("1");
    let mut config = json!({
        "mcpServers": {"keep": upstream::rmcp(), "moved": moved, "tuned": upstream::rmcp()},
        "health": {"failureThreshold": 2, "cooldownSeconds": 3600,
                   "servers": {"tuned": {"timeoutSeconds": 30}}},
    });
    let gw = Gateway::http(&config, &["--no-watch"]).await;
    let (client, changes) = rmcp_http(gw.port).await;
    list(&client).await;
    trip(&client, &changes, "keep__flaky").await;
    trip(&client, &changes, "moved__flaky").await;
    let (keep_pid, moved_pid, tuned_pid) = (
        pid(&gw, "keep").await,
        pid(&gw, "moved").await,
        pid(&gw, "tuned").await,
    );

    config["mcpServers"]["moved"]["env"]["VERSION"] = json!("2");
    config["health"]["servers"]["tuned"]["timeoutSeconds"] = json!(1);
    write(&gw.config, &config);
    hangup(&gw);
    gw.log
        .wait_for(
            "config reloaded (SIGHUP): restarted `moved` (env changed); re-configured live \
             `tuned` (timeoutSeconds changed); 1 server unchanged",
            WAIT,
        )
        .await;

    // keep: the same process, its breaker as it was.
    assert_eq!(pid(&gw, "keep").await, keep_pid);
    let (_, doc) = gw.get("/v1/tools/keep%2Fflaky").await;
    assert_eq!(doc["breaker"], "open", "{doc}");
    let r = call(&client, "keep__flaky", json!({})).await.unwrap();
    assert!(text(&r).starts_with(REFUSAL), "{}", text(&r));

    // tuned: the same process, the new timeout at once.
    assert_eq!(pid(&gw, "tuned").await, tuned_pid);
    let started = Instant::now();
    let r = call(&client, "tuned__hang", json!({})).await.unwrap();
    assert!(
        text(&r).contains("did not answer within 1.0 s"),
        "{}",
        text(&r)
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );

    // moved: a new process, its breakers kept (its tool still refused, nothing reset).
    let new_pid = eventually("moved restarted", WAIT, || async {
        let s = server(&gw, "moved").await;
        let p = s["pid"].as_u64();
        (s["connected"] == true && p.is_some() && p != Some(moved_pid)).then_some(p.unwrap())
    })
    .await;
    assert!(!alive(moved_pid as u32), "the old process is gone");
    assert_ne!(new_pid, moved_pid);
    let (_, doc) = gw.get("/v1/tools/moved%2Fflaky").await;
    assert_eq!(doc["breaker"], "open", "{doc}");
    assert_eq!(doc["calls"]["failure"], 2, "{doc}");
    eventually("moved answers", WAIT, || async {
        let r = call(&client, "moved__ok", json!({})).await.ok()?;
        (text(&r) == "fine").then_some(())
    })
    .await;
    let r = call(&client, "moved__flaky", json!({})).await.unwrap();
    assert!(text(&r).starts_with(REFUSAL), "{}", text(&r));
    assert_eq!(server(&gw, "moved").await["restarts"], 1);
    assert_eq!(server(&gw, "keep").await["restarts"], 0);
    assert!(!client.peer().is_transport_closed());
}

/// A call under way to a server a reload removes may finish for 10 s; then it is answered
/// (a soft error saying why) and counts against nothing.
pub async fn a_call_under_way_to_a_removed_server_is_answered_and_counts_nowhere() {
    let mut config = json!({"mcpServers": {"rs": upstream::rmcp(), "other": upstream::rmcp()}});
    let gw = Gateway::http(&config, &["--no-watch"]).await;
    let (client, _changes) = rmcp_http(gw.port).await;
    list(&client).await;
    let peer = client.peer().clone();
    let hanging = tokio::spawn(async move {
        let p = rmcp::model::CallToolRequestParams::new("rs__hang");
        tokio::time::timeout(WAIT, peer.call_tool(p)).await
    });
    eventually("the hang reached the server", WAIT, || async {
        (seen_count(&seen(&client, "rs").await, "tools", "hang") == 1).then_some(())
    })
    .await;

    config["mcpServers"].as_object_mut().unwrap().remove("rs");
    write(&gw.config, &config);
    let removed = Instant::now();
    hangup(&gw);
    let r = hanging
        .await
        .unwrap()
        .expect("answered in time")
        .expect("a result");
    let waited = removed.elapsed();
    println!(
        "a call under way to a removed server was answered {:.2} s after the reload",
        waited.as_secs_f64()
    );
    assert_eq!(r.is_error, Some(true));
    assert!(
        text(&r).contains(
            "MCP server `rs` was removed from the gateway's config before tool `rs__hang` answered"
        ),
        "{}",
        text(&r)
    );
    assert!(
        waited >= Duration::from_secs(9),
        "it had its drain: {waited:?}"
    );
    gw.log
        .wait_for("1 call still under way after 10 s are cut short", WAIT)
        .await;
    let (status, doc) = gw.get("/v1/tools/rs%2Fhang").await;
    assert!(
        status == 404 || (doc["calls"]["failure"] == 0 && doc["breaker"] == "closed"),
        "counted nowhere: {status} {doc}"
    );
    assert_eq!(
        text(&call(&client, "other__ok", json!({})).await.unwrap()),
        "fine"
    );
}
