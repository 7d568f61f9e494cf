//! Issue 30, item 2, "Done when": a host configured with `server-everything` and
//! `server-filesystem` (pinned in `integrations/servers/everything`) sees the same tools,
//! resources, templates, prompts, completions, progress, subscription updates and log messages
//! through the gateway as without it — the same survey run by the official TypeScript SDK 1.32
//! client (`integrations/servers/typescript/survey.mjs`) against each server directly and
//! against the gateway in front of both, over stdio (the client launches the gateway) and over
//! streamable HTTP, compared item by item once the gateway's names (`ev__…`,
//! `tool-health://ev/…`, the `ev/` of a logger) are taken off. The Python SDK client
//! (`integrations/servers/python/survey.py`) adds what only it exercises: MCP 2026-07-28 with the
//! gateway (per-request envelopes, `resultType`, a resource update on `subscriptions/listen`)
//! against server-everything on 2025-11-25 directly.

use std::path::PathBuf;
use std::process::Stdio;

use serde_json::{json, Value};

use crate::support::{
    gateway_bin, node, python, scratch, skip, workspace, write_config, Gateway, WAIT,
};

/// The pinned reference servers' entry points, or why they cannot run.
fn servers() -> (String, String) {
    if let Err(why) = node() {
        skip(&why);
    }
    let dir =
        workspace().join("integrations/servers/everything/node_modules/@modelcontextprotocol");
    let ev = dir.join("server-everything/dist/index.js");
    let fs = dir.join("server-filesystem/dist/index.js");
    for p in [&ev, &fs] {
        if !p.exists() {
            skip(&format!(
                "{} is not installed (bash scripts/mcp_sdks.sh)",
                p.display()
            ));
        }
    }
    (ev.display().to_string(), fs.display().to_string())
}

/// Runs a survey script with `program` on `args` and the `env`: what it printed.
async fn survey(program: &PathBuf, script: &str, args: &[&str], env: &[(&str, &str)]) -> Value {
    let script = workspace().join(script);
    let out = tokio::time::timeout(
        WAIT * 2,
        tokio::process::Command::new(program)
            .arg(&script)
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap_or_else(|_| panic!("{} did not finish", script.display()))
    .expect("the survey runs");
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "{} printed no survey ({e}): {text}\n{}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// `v` with the gateway's names taken off: `tool-health://ev/` and the `ev__`/`fs__` prefixes.
fn unnamed(v: &Value) -> Value {
    let text = v
        .to_string()
        .replace("tool-health://ev/", "")
        .replace("\"ev__", "\"")
        .replace("\"fs__", "\"");
    serde_json::from_str(&text).unwrap()
}

/// The names of a list of tools, sorted.
fn names(tools: &Value) -> Vec<String> {
    let mut names: Vec<String> = tools
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t.as_str().map(str::to_owned))
        .collect();
    names.sort();
    names
}

/// server-everything's tools listed only to a client that offers roots, sampling or
/// elicitation (form and URL). The gateway offers them to its servers whatever a host offers,
/// so a host sees all 17 of its tools (2026.8.31), not the 13 of a client that offers nothing;
/// its two task-based tools need `tasks`, which the gateway does not pass.
const GATED: [&str; 4] = [
    "get-roots-list",
    "trigger-sampling-request",
    "trigger-elicitation-request",
    "trigger-url-elicitation",
];

/// The gateway's `ev__` tools, without the prefix: all 17 of server-everything's, the
/// [`GATED`] ones among them.
fn everythings_all(through: &Value, how: &str) {
    let ev: Vec<String> = names(&through["tools"])
        .into_iter()
        .filter_map(|t| t.strip_prefix("ev__").map(str::to_owned))
        .collect();
    for t in GATED {
        assert!(ev.iter().any(|e| e == t), "{how}: {t} listed: {ev:?}");
    }
    assert_eq!(ev.len(), 17, "{how}: server-everything's tools: {ev:?}");
}

/// Log messages as `(level, logger, data)`, the server's name taken off the logger, sorted;
/// server-everything's simulated messages (a random level each) apart, counted.
fn logs(v: &Value) -> (Vec<(String, String, String)>, usize) {
    let mut kept = Vec::new();
    let mut simulated = 0;
    for l in v["logs"].as_array().into_iter().flatten() {
        let data = l["data"].to_string();
        if data.contains("level message")
            || data.contains("level-message")
            || data.contains("-level message")
        {
            simulated += 1;
            continue;
        }
        let logger = match l["logger"].as_str() {
            None | Some("ev") => String::new(),
            Some(other) => other.strip_prefix("ev/").unwrap_or(other).to_owned(),
        };
        kept.push((l["level"].to_string(), logger, data));
    }
    kept.sort();
    (kept, simulated)
}

/// The same, for each item the survey reports; the counts, said.
fn compare(direct: &Value, gateway: &Value, how: &str) -> String {
    let g = unnamed(gateway);
    for key in [
        "resources",
        "templates",
        "reads",
        "prompts",
        "gets",
        "completions",
        "updates",
        "longRunning",
        "sampling",
        "roots",
        "links",
        "linkReads",
        "allowed",
        "file",
    ] {
        assert_eq!(direct[key], g[key], "{how}: {key} differ");
    }
    // Progress: the 4 steps. server-everything sends the last one just before its answer, and
    // the TypeScript client drops progress that comes after the answer — directly too, on a
    // loaded machine: each run heard the steps in order, the last one possibly missed.
    let all = json!([[1, 4], [2, 4], [3, 4], [4, 4]]);
    for (who, heard) in [
        ("directly", &direct["progress"]),
        ("through the gateway", &g["progress"]),
    ] {
        let heard = heard.as_array().unwrap();
        assert!(
            heard.len() >= 3 && heard[..] == all.as_array().unwrap()[..heard.len()],
            "{how}: progress {who}: {heard:?}"
        );
    }
    // The elicitation's answer, but for the server's echo of the raw result (key order).
    assert_eq!(
        (
            &direct["elicitation"]["text"][0],
            &direct["elicitation"]["text"][1]
        ),
        (&g["elicitation"]["text"][0], &g["elicitation"]["text"][1]),
        "{how}: elicitation"
    );
    let (direct_logs, direct_simulated) = logs(direct);
    let (gateway_logs, gateway_simulated) = logs(gateway);
    assert_eq!(direct_logs, gateway_logs, "{how}: log messages");
    assert!(
        direct_simulated >= 1 && gateway_simulated >= 1,
        "{how}: simulated log messages"
    );
    let n = |k: &str| g[k].as_array().map_or(0, Vec::len);
    format!(
        "{how}: the same {} tools, {} resources ({} read), {} templates, {} prompts ({} got), {} \
         completions, {} progress notifications, {} subscription update, {} log messages, and \
         the sampling, elicitation and roots answers",
        n("tools"),
        n("resources"),
        g["reads"].as_object().map_or(0, |o| o.len()),
        n("templates"),
        n("prompts"),
        g["gets"].as_object().map_or(0, |o| o.len()),
        n("completions"),
        n("progress"),
        n("updates"),
        gateway_logs.len() + gateway_simulated,
    )
}

/// The TypeScript SDK client sees the same through the gateway as directly, over stdio and
/// streamable HTTP.
pub async fn typescript_host_sees_the_same_through_the_gateway() {
    let node = node().unwrap_or_else(|why| skip(&why));
    let (ev, fs) = servers();
    let root = scratch();
    let file = root.join("a.txt");
    std::fs::write(&file, "hello from the survey\n").unwrap();
    let root = root.display().to_string();
    let file = file.display().to_string();
    let script = "integrations/servers/typescript/survey.mjs";
    let base = [
        ("SURVEY_ROOT", root.as_str()),
        ("SURVEY_FILE", file.as_str()),
    ];

    // Directly: one connection per server, as a host configured with both has.
    let mut env = base.to_vec();
    env.extend([("SURVEY_EVERYTHING", ""), ("SURVEY_URI", "")]);
    let direct_ev = survey(&node, script, &["stdio", "node", &ev, "stdio"], &env).await;
    let mut env = base.to_vec();
    env.push(("SURVEY_FILES", ""));
    let direct_fs = survey(&node, script, &["stdio", "node", &fs, &root], &env).await;
    let mut direct = direct_ev.clone();
    let mut tools: Vec<Value> = direct_ev["tools"].as_array().unwrap().clone();
    tools.extend(direct_fs["tools"].as_array().unwrap().iter().cloned());
    direct["tools"] = json!(tools);
    for key in ["allowed", "file"] {
        direct[key] = direct_fs[key].clone();
    }
    let mut direct_logs: Vec<Value> = direct_ev["logs"].as_array().unwrap().clone();
    direct_logs.extend(direct_fs["logs"].as_array().unwrap().iter().cloned());
    direct["logs"] = json!(direct_logs);

    let config = json!({"mcpServers": {
        "ev": {"command": "node", "args": [ev, "stdio"]},
        "fs": {"command": "node", "args": [fs, root]},
    }});
    let mut env = base.to_vec();
    env.extend([
        ("SURVEY_EVERYTHING", "ev__"),
        ("SURVEY_URI", "tool-health://ev/"),
        ("SURVEY_FILES", "fs__"),
    ]);
    // Over stdio: the client launches the gateway, as a host does.
    let path = write_config(&config);
    let path = path.display().to_string();
    let over_stdio = survey(
        &node,
        script,
        &["stdio", gateway_bin(), "--config", &path],
        &env,
    )
    .await;
    // Over streamable HTTP.
    let gw = Gateway::http(&config, &[]).await;
    let over_http = survey(&node, script, &["http", &gw.url("/mcp")], &env).await;

    for (how, through) in [("stdio", &over_stdio), ("http", &over_http)] {
        everythings_all(through, how);
        assert_eq!(
            names(&direct["tools"]),
            names(&unnamed(through)["tools"]),
            "{how}: tools"
        );
        // What a host reads of the gateway: what the servers have, but "tasks" (not passed).
        let caps = through["capabilities"].to_string();
        assert_eq!(
            caps, r#"["completions","logging","prompts","resources","tools"]"#,
            "{how}"
        );
        let asked = through["asked"].to_string();
        for request in [
            "sampling/createMessage",
            "elicitation/create (form)",
            "roots/list",
        ] {
            assert!(
                asked.contains(request),
                "{how}: {request} asked of the host: {asked}"
            );
        }
        eprintln!("{}", compare(&direct, through, how));
    }
}

/// The Python SDK client, on MCP 2026-07-28 with the gateway and on 2025-11-25 with
/// server-everything directly, reads the same resources, templates, prompts and completions,
/// and hears a resource update either way (on `subscriptions/listen` through the gateway).
pub async fn python_host_on_2026_07_28_sees_the_same_through_the_gateway() {
    let python = python().unwrap_or_else(|why| skip(&why));
    let (ev, _) = servers();
    let script = "integrations/servers/python/survey.py";
    let direct = survey(
        &python,
        script,
        &["stdio", "node", &ev, "stdio"],
        &[("SURVEY_EVERYTHING", ""), ("SURVEY_URI", "")],
    )
    .await;
    let config = json!({"mcpServers": {"ev": {"command": "node", "args": [ev, "stdio"]}}});
    let path = write_config(&config).display().to_string();
    let through = survey(
        &python,
        script,
        &["stdio", gateway_bin(), "--config", &path],
        &[
            ("SURVEY_EVERYTHING", "ev__"),
            ("SURVEY_URI", "tool-health://ev/"),
        ],
    )
    .await;
    assert_eq!(through["protocol"], "2026-07-28", "{through}");
    assert_ne!(direct["protocol"], "2026-07-28", "{direct}");
    let g = unnamed(&through);
    for key in [
        "resources",
        "templates",
        "reads",
        "prompts",
        "gets",
        "completions",
        "updates",
    ] {
        assert_eq!(direct[key], g[key], "{key} differ");
    }
    assert_eq!(
        direct["updates"].as_array().map(Vec::len),
        Some(1),
        "{direct}"
    );
    // This host offers nothing: directly, server-everything leaves its gated tools out. The
    // gateway offers its servers what a host may answer, whatever this host offers
    // (docs/gateway.md): the tools that need it are listed besides the others.
    let alone = names(&direct["tools"]);
    assert_eq!(alone.len(), 13, "{alone:?}");
    assert!(
        GATED.iter().all(|t| !alone.iter().any(|a| a == t)),
        "{alone:?}"
    );
    everythings_all(&through, "python");
    let listed = names(&g["tools"]);
    for t in names(&direct["tools"]) {
        assert!(listed.contains(&t), "{t} listed");
    }
    eprintln!(
        "python on 2026-07-28: the same {} resources, {} templates, {} prompts, {} completions \
         and 1 subscription update",
        g["resources"].as_array().map_or(0, Vec::len),
        g["templates"].as_array().map_or(0, Vec::len),
        g["prompts"].as_array().map_or(0, Vec::len),
        g["completions"].as_array().map_or(0, Vec::len),
    );
}
