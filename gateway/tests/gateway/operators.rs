//! What an operator meets, through the binary: secrets of the config never shown (answers,
//! log, errors), a server that exits at start says why, `--check` finds what this machine
//! lacks, `${VAR}` is expanded, a port in use is said once, `DELETE /mcp` answers 200, and a
//! gateway with no MCP server (traces only) starts.

use std::time::Duration;

use serde_json::json;

use crate::supervise::server;
use crate::support::{
    eventually, free_port, gateway_bin, http_raw, scratch, write_config, Gateway, WAIT,
};

/// Item 4 and item 23: the URL's user info and query, a header, an `env` value never reach
/// `/v1/servers`, the log or an error; a server that exits at start leaves its exit status and
/// the end of its stderr in `last_error` (secrets masked there too), in one WARN line.
pub async fn secrets_never_show_and_a_server_that_exits_says_why() {
    let closed = free_port();
    let config = json!({
        "mcpServers": {
            "remote": {
                "url": format!("http://alice:Pa55-user-secret@127.0.0.1:{closed}/mcp?api_key=Q-query-secret-1"),
                "headers": {"Authorization": "Bearer H-header-secret-1"},
            },
            "crashy": {
                "command": "sh",
                "args": ["-c", "echo \"starting with token $TOKEN and $SIGNED\" >&2; \
                                echo 'Traceback (most recent call last):' >&2; \
                                echo 'RuntimeError: no database' >&2; exit 3"],
                "env": {"TOKEN": "E-env-secret-1", "SIGNED": "${GATEWAY_TEST_SIGNED}"},
            },
        },
    });
    let gw =
        Gateway::http_with_env(&config, &[], &[("GATEWAY_TEST_SIGNED", "V-var-secret-1")]).await;
    let (remote, crashy) = eventually("both failed once", WAIT, || async {
        let r = server(&gw, "remote").await;
        let c = server(&gw, "crashy").await;
        (r["last_error"].is_string() && c["last_error"].is_string()).then_some((r, c))
    })
    .await;
    let (_, servers) = gw.get("/v1/servers").await;
    // A second round of attempts, so the log has said everything once.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let log = gw.log.text();
    for secret in [
        "Pa55-user-secret",
        "Q-query-secret-1",
        "H-header-secret-1",
        "E-env-secret-1",
        "V-var-secret-1",
    ] {
        assert!(
            !servers.to_string().contains(secret),
            "{secret} in /v1/servers: {servers}"
        );
        assert!(!log.contains(secret), "{secret} in the log:\n{log}");
    }
    let remote = remote["last_error"].as_str().unwrap();
    assert!(
        remote.contains(&format!("http://127.0.0.1:{closed}/mcp?api_key=***")),
        "{remote}"
    );
    assert!(remote.contains("could not be reached"), "{remote}");
    let crashy = crashy["last_error"].as_str().unwrap();
    assert!(crashy.contains("exited with status 3"), "{crashy}");
    assert!(crashy.contains("RuntimeError: no database"), "{crashy}");
    assert!(
        crashy.contains("starting with token *** and ***"),
        "{crashy}"
    );
    // The traceback is in the WARN that says the server ended, not in lines of its own.
    let info_lines = log
        .lines()
        .filter(|l| l.contains(" INFO ") && l.contains("Traceback"))
        .count();
    assert_eq!(info_lines, 0, "{log}");
    assert!(
        log.lines()
            .any(|l| l.contains(" WARN ") && l.contains("RuntimeError: no database")),
        "{log}"
    );
}

/// Item 23: `--check` reports a `cwd` that does not exist and a `command` that is not on the
/// PATH, each at its key (a missing `cwd` is not blamed on the command); `${VAR}` not set is a
/// problem naming it; and at start a missing `cwd` is said as such.
pub async fn check_finds_what_this_machine_lacks() {
    let dir = scratch();
    let config = json!({"mcpServers": {
        "nodir": {"command": "sh", "args": ["-c", "exit 0"], "cwd": dir.join("nowhere").display().to_string()},
        "noprog": {"command": "no-such-program-anywhere"},
    }});
    let path = write_config(&config);
    let out = tokio::process::Command::new(gateway_bin())
        .arg("--config")
        .arg(&path)
        .arg("--check")
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("`mcpServers.nodir.cwd` is "), "{err}");
    assert!(err.contains("which is not a directory here"), "{err}");
    assert!(
        !err.contains("`mcpServers.nodir.command`"),
        "the command is fine: {err}"
    );
    assert!(
        err.contains(
            "`mcpServers.noprog.command` is `no-such-program-anywhere`, which is not on the PATH"
        ),
        "{err}"
    );

    let unset = write_config(&json!({"mcpServers": {
        "x": {"command": "sh", "env": {"K": "${GATEWAY_TEST_NEVER_SET_VAR}"}},
    }}));
    let out = tokio::process::Command::new(gateway_bin())
        .arg("--config")
        .arg(&unset)
        .arg("--check")
        .env_remove("GATEWAY_TEST_NEVER_SET_VAR")
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("`mcpServers.x.env.K` uses `${GATEWAY_TEST_NEVER_SET_VAR}`, which is not set"),
        "{err}"
    );

    // At start: a warning, the other servers serve, and `last_error` names the `cwd`.
    let gw = Gateway::http(&config, &[]).await;
    let nodir = eventually("nodir failed", WAIT, || async {
        let s = server(&gw, "nodir").await;
        s["last_error"].as_str().map(str::to_owned)
    })
    .await;
    assert!(
        nodir.contains("`cwd`") && nodir.contains("not a directory"),
        "{nodir}"
    );
    assert!(
        !nodir.contains("could not be started"),
        "not blamed on the command: {nodir}"
    );
    assert!(gw.log.text().contains("warning:"), "{}", gw.log.text());
}

/// Item 23: a port in use is said once, and the gateway exits 1.
pub async fn a_port_in_use_is_said_once() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let path = write_config(&json!({"mcpServers": {"rs": crate::support::upstream::rmcp()}}));
    let out = tokio::process::Command::new(gateway_bin())
        .arg("--config")
        .arg(&path)
        .args(["--no-stdio", "--listen", &format!("127.0.0.1:{port}")])
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err.matches(&format!("--listen 127.0.0.1:{port}")).count(),
        1,
        "{err}"
    );
    drop(taken);
}

/// Item 23: a gateway with an empty `mcpServers` (one that only receives agents' traces)
/// starts; `DELETE /mcp` that ends a session answers 200 (the Python SDK's client warns on
/// anything but 200 and 204).
pub async fn an_empty_gateway_serves_and_delete_ends_a_session_with_200() {
    let gw = Gateway::http(&json!({"mcpServers": {}}), &[]).await;
    let (status, body) = gw.get("/healthz").await;
    assert_eq!(status, 200, "{body}");
    let mcp = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
    ];
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}});
    let (status, headers, body) =
        http_raw(gw.port, "POST", "/mcp", &mcp, init.to_string().as_bytes()).await;
    assert_eq!(status, 200, "{body}");
    let session = headers
        .iter()
        .find(|(k, _)| k == "mcp-session-id")
        .map(|(_, v)| v.clone())
        .expect("a session");
    let (status, _, body) = http_raw(
        gw.port,
        "DELETE",
        "/mcp",
        &[
            ("mcp-session-id", &session),
            ("mcp-protocol-version", "2025-06-18"),
        ],
        b"",
    )
    .await;
    assert_eq!(status, 200, "{body}");
}
