//! A bad config stops the gateway before it starts anything: exit status 2, every problem
//! with its file, line, key, range and fix on stderr; `--check` says a good one is valid.

use serde_json::json;

use crate::support::{gateway_bin, scratch, upstream, write_config};

pub async fn a_bad_config_exits_2() {
    let dir = scratch();
    let path = dir.join("gateway.json");
    std::fs::write(
        &path,
        "{\n  \"mcpServers\": {\"py\": {\"command\": \"python3\"}},\n  \"health\": {\n    \"cooldownSeconds\": -1,\n    \"timeout\": 5\n  }\n}\n",
    )
    .unwrap();
    let out = tokio::process::Command::new(gateway_bin())
        .arg("--config")
        .arg(&path)
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    let file = path.display().to_string();
    assert!(err.contains("2 problems in the config file"), "{err}");
    assert!(
        err.contains(&format!(
            "{file}:4: `health.cooldownSeconds` is -1, must be from 0.001 to 86400 seconds"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("{file}:5: `health.timeout` is not a setting")),
        "{err}"
    );
    assert!(err.contains("did you mean `timeoutSeconds`?"), "{err}");
    assert!(err.contains("fix: "), "{err}");
    assert!(
        out.stdout.is_empty(),
        "stdout is the MCP channel: nothing on it"
    );

    let out = tokio::process::Command::new(gateway_bin())
        .args(["--config", "/nonexistent/gateway.json"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot be read"));

    let good = write_config(&json!({"mcpServers": {"rs": upstream::rmcp()}}));
    let out = tokio::process::Command::new(gateway_bin())
        .arg("--config")
        .arg(&good)
        .arg("--check")
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("is valid (1 server)"));
    let out = tokio::process::Command::new(gateway_bin())
        .args(["--config"])
        .arg(&good)
        .arg("--no-stdio")
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "nothing to serve");
}
