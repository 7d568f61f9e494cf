//! Another site's page against the gateway in a real browser (Debian's Chromium, headless,
//! through playwright-core): `tests/web/cross-origin.mjs` sends what issue 29 reproduced —
//! text/plain failure reports, a bare claim, forged error spans as a Blob, a form post — from
//! `http://evil.test`, then opens the gateway under a rebound name. Nothing may move: checked
//! here through the API. Needs node, `npm ci --prefix tests/web` (scripts/status_e2e.sh runs
//! it) and chromium; without them the test is ignored with the reason (failing under
//! `CI=true`).

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{skip, upstream, workspace, Gateway};

fn chromium() -> PathBuf {
    for p in ["/usr/bin/chromium", "/usr/bin/chromium-browser"] {
        if std::path::Path::new(p).exists() {
            return PathBuf::from(p);
        }
    }
    skip("no chromium (Debian: apt-get install chromium)")
}

pub async fn another_sites_page_moves_nothing() {
    let browser = chromium();
    let web = workspace().join("tests/web");
    if !web.join("node_modules/playwright-core").exists() {
        skip("playwright-core is not installed (npm ci --prefix tests/web)");
    }
    let config = json!({"mcpServers": {"rs": upstream::rmcp()},
                        "health": {"failureThreshold": 3, "cooldownSeconds": 30}});
    let gw = Gateway::http(&config, &[]).await;
    let out = tokio::process::Command::new("node")
        .arg(web.join("cross-origin.mjs"))
        .arg(gw.port.to_string())
        .arg("rs__ok")
        .arg(&browser)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), out)
        .await
        .expect("the browser run ends within 2 min")
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}");
    // Nothing the page sent counted: the tool is closed with no failure, no probe is held,
    // no forged span made a tool.
    let (_, v): (u16, Value) = gw.get("/v1/tools/rs__ok").await;
    assert_eq!(
        (v["state"].as_str(), v["calls"]["failure"].as_u64()),
        (Some("closed"), Some(0)),
        "{v}"
    );
    let (status, v) = gw.post("/v1/tools/rs__ok/claim", "{}").await;
    assert_eq!(
        (status, v["decision"].as_str()),
        (200, Some("allowed")),
        "no probe was taken: {v}"
    );
    assert_eq!(gw.get("/v1/tools/victim").await.0, 404, "no forged span");
    // What the page could see (the rebound name refused).
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
