//! What no SDK client sends: lines that are not JSON, batches, oversized messages, params of
//! the wrong shape, hostile tool names, unknown methods — over stdio and over HTTP. Each gets
//! a clear JSON-RPC error, the gateway keeps serving, and nothing reaches an upstream or
//! creates a breaker.

use std::collections::HashMap;
use std::process::Stdio;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::support::{
    call, gateway_bin, http, http_raw, listening_port, rmcp_http, text, upstream, write_config,
    Log, WAIT,
};

/// The rmcp fixture's tools, as the registry keys them.
const LISTED: [&str; 9] = [
    "rs/die",
    "rs/drop_echo",
    "rs/echo",
    "rs/flaky",
    "rs/hang",
    "rs/mend",
    "rs/needs_int",
    "rs/ok",
    "rs/seen",
];

/// The tools of a `/v1/tools` document that saw any call (any outcome, refusals included).
fn called(tools: &Value) -> Vec<String> {
    tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| {
            t["calls"]
                .as_object()
                .unwrap()
                .values()
                .any(|n| n.as_u64() != Some(0))
        })
        .filter_map(|t| t["tool"].as_str().map(str::to_owned))
        .collect()
}

fn config() -> Value {
    json!({"mcpServers": {"rs": upstream::rmcp()}, "health": {"maxMessageBytes": 65536}})
}

fn tool_call(id: u64, name: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": {}}}).to_string()
}

pub async fn over_stdio() {
    let path = write_config(&config());
    let mut child = tokio::process::Command::new(gateway_bin())
        .arg("--config")
        .arg(&path)
        .args(["--listen", "127.0.0.1:0"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the gateway");
    let log = Log::spawn(child.stderr.take().unwrap(), "[gateway]");
    let port = listening_port(&log).await;
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();

    let big = "x".repeat(100_000);
    let oversized = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                           "params": {"name": "rs__echo", "arguments": {"text": big}}})
    .to_string();
    let lines: Vec<String> = vec![
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
        .to_string(),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
        "this is not json".to_owned(),
        r#"[{"jsonrpc":"2.0","id":2,"method":"ping"}]"#.to_owned(),
        oversized,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":5}}"#.to_owned(),
        tool_call(5, "rs__\u{1b}[31mred"),
        tool_call(6, &"a".repeat(200)),
        tool_call(7, "../../etc/passwd"),
        tool_call(8, "nosuch__tool"),
        tool_call(9, "flaky"),
        tool_call(10, "rs__caf\u{e9}"),
        r#"{"jsonrpc":"2.0","id":11,"method":"no/such/method"}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":12,"method":"resources/list"}"#.to_owned(),
        r#"{"jsonrpc":"1.0","id":13,"method":"ping"}"#.to_owned(),
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":"nonsense"}"#.to_owned(),
        json!({"jsonrpc": "2.0", "id": 14, "method": "tools/call",
               "params": {"name": "rs__echo", "arguments": {"text": "still here"}}})
        .to_string(),
        r#"{"jsonrpc":"2.0","id":15,"method":"ping"}"#.to_owned(),
    ];
    for line in &lines {
        stdin.write_all(line.as_bytes()).await.unwrap();
        stdin.write_all(b"\n").await.unwrap();
    }
    stdin.flush().await.unwrap();

    // Answers by id (`null` for the id-less ones, in order).
    let mut by_id: HashMap<String, Value> = HashMap::new();
    let mut idless: Vec<Value> = Vec::new();
    let want = 16; // ids 1 and 3..=15, and two id-less answers
    tokio::time::timeout(WAIT, async {
        while by_id.len() + idless.len() < want {
            let line = stdout
                .next_line()
                .await
                .unwrap()
                .expect("the gateway still answers");
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout carries JSON only: {line:?}: {e}"));
            if v.get("method").is_some() {
                continue; // a notification
            }
            match v.get("id") {
                Some(Value::Null) | None => idless.push(v),
                Some(id) => {
                    by_id.insert(id.to_string(), v);
                }
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("answers: {by_id:?} {idless:?}\n{}", log.text()));

    let code = |v: &Value| v["error"]["code"].as_i64().unwrap_or(0);
    let msg = |v: &Value| v["error"]["message"].as_str().unwrap_or("").to_owned();
    assert_eq!(idless.len(), 2, "{idless:?}");
    assert_eq!(code(&idless[0]), -32700, "not JSON: {:?}", idless[0]);
    assert_eq!(code(&idless[1]), -32600, "a batch: {:?}", idless[1]);
    assert!(msg(&idless[1]).contains("batches"), "{:?}", idless[1]);
    let get = |id: u64| {
        by_id
            .get(&id.to_string())
            .cloned()
            .unwrap_or_else(|| panic!("no answer to {id}: {by_id:?}"))
    };
    assert!(get(1)["result"]["capabilities"]["tools"]["listChanged"] == true);
    assert_eq!(code(&get(3)), -32600);
    assert!(msg(&get(3)).contains("too large"), "{}", msg(&get(3)));
    assert_eq!(code(&get(4)), -32602);
    assert!(
        msg(&get(4)).contains("invalid params for `tools/call`"),
        "{}",
        msg(&get(4))
    );
    for id in [5, 6, 7, 10] {
        assert_eq!(code(&get(id)), -32602, "{id}");
        assert!(
            msg(&get(id)).starts_with("invalid tool name"),
            "{id}: {}",
            msg(&get(id))
        );
    }
    assert!(
        !msg(&get(5)).contains('\u{1b}'),
        "a control character is never echoed"
    );
    assert!(
        msg(&get(8)).contains("no MCP server `nosuch`"),
        "{}",
        msg(&get(8))
    );
    assert!(
        msg(&get(9)).contains("{server}__{tool}"),
        "{}",
        msg(&get(9))
    );
    assert_eq!(code(&get(11)), -32601);
    // Resources pass through (issue 30): the fixture's, under the gateway's URIs.
    assert_eq!(
        get(12)["result"]["resources"][0]["uri"],
        "tool-health://rs/fixture://note",
        "{:?}",
        get(12)
    );
    assert_eq!(code(&get(13)), -32600, "{:?}", get(13));
    assert_eq!(
        get(14)["result"]["content"][0]["text"],
        "still here",
        "nothing lost for the other tools"
    );
    assert!(get(15)["result"].is_object());

    // Nothing reached the upstream but the one echo, and no breaker was made of a bad name.
    let (_, tools) = http(port, "GET", "/v1/tools", &[], "").await;
    let tracked: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["tool"].as_str())
        .collect();
    // The listed tools are declared (they keep their own breakers); no bad name made one.
    assert_eq!(tracked, LISTED, "{tools}");
    assert_eq!(called(&tools), ["rs/echo"], "{tools}");
    drop(stdin);
    let status = tokio::time::timeout(WAIT, child.wait())
        .await
        .expect("exits when stdin closes")
        .unwrap();
    assert!(status.success(), "{status}");
}

pub async fn over_http() {
    let gw = crate::support::Gateway::http(&config(), &[]).await;
    let mcp = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
    ];
    let (status, _, body) = http_raw(gw.port, "POST", "/mcp", &mcp, b"{this is not json").await;
    assert_eq!(status, 400, "{body}");
    let v: Value = serde_json::from_str(&body).expect("a JSON-RPC error");
    assert_eq!(v["error"]["code"], -32700, "{v}");
    assert_eq!(v["id"], Value::Null);
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"x":"{}"}}}}"#,
        "x".repeat(200_000)
    );
    let (status, _, body) = http_raw(gw.port, "POST", "/mcp", &mcp, big.as_bytes()).await;
    assert_eq!(status, 413, "{body}");
    let v: Value = serde_json::from_str(&body).expect("a JSON-RPC error");
    assert_eq!(v["error"]["code"], -32600, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("65536"),
        "{v}"
    );
    let (status, _, _) = http_raw(
        gw.port,
        "POST",
        "/mcp",
        &[("content-type", "text/plain"), mcp[1]],
        b"{}",
    )
    .await;
    assert_eq!(status, 415, "a wrong content type stays rmcp's answer");

    let (client, _) = rmcp_http(gw.port).await;
    for name in [
        "rs__\u{7}bell",
        "x".repeat(300).as_str(),
        "nosuch__tool",
        "rs__a b",
    ] {
        let e = call(&client, name, json!({})).await.expect_err("refused");
        assert_eq!(e.0, -32602, "{name:?}: {e:?}");
    }
    let e = call(&client, "rs__no_such_tool", json!({}))
        .await
        .expect_err("unknown upstream tool");
    assert_eq!(
        e.0, -32602,
        "the upstream's own answer, passed through: {e:?}"
    );
    let r = call(&client, "rs__ok", json!({})).await.expect("a result");
    assert_eq!(text(&r), "fine", "the session still works");

    // The API's own bad input.
    let (status, v) = gw.get(&format!("/v1/tools/{}", "a".repeat(2000))).await;
    assert_eq!(status, 400, "{v}");
    let (status, v) = gw.get("/v1/tools?limit=lots").await;
    assert_eq!(status, 400, "{v}");
    assert!(v["error"].as_str().unwrap().contains("limit"), "{v}");
    let (status, v) = gw.post("/v1/tools/t/report", "{nope").await;
    assert_eq!(status, 400, "{v}");
    let (status, v) = gw.post("/v1/tools/t/report", r#"{"outcome":"meh"}"#).await;
    assert_eq!(status, 400, "{v}");
    let (status, _, _) = http_raw(
        gw.port,
        "POST",
        "/v1/tools/t/report",
        &[("content-type", "application/json")],
        &vec![b' '; 100_000],
    )
    .await;
    assert_eq!(status, 413);
    let (_, tools) = gw.get("/v1/tools").await;
    let tracked: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["tool"].as_str())
        .collect();
    // The listed tools are declared (they keep their own breakers); no bad name made one.
    assert_eq!(tracked, LISTED, "{tools}");
    assert_eq!(called(&tools), ["rs/ok"], "{tools}");
}
