use std::time::Duration;

use super::*;

fn problems(text: &str) -> Vec<Problem> {
    parse("gw.json", text).expect_err("a config error").problems
}

fn one(text: &str) -> Problem {
    let mut all = problems(text);
    assert_eq!(all.len(), 1, "{all:#?}");
    all.remove(0)
}

#[test]
fn a_host_config_with_a_health_section_is_read() {
    let text = r#"{
  "globalShortcut": "Ctrl+Space",
  "mcpServers": {
    "py": {"command": "python3", "args": ["server.py", "stdio"], "env": {"K": "v"}, "alwaysAllow": ["x"]},
    "remote": {"url": "https://user:secret@mcp.example.com/mcp", "headers": {"Authorization": "Bearer s3cret"}, "type": "http"},
    "off": {"command": "nothing", "disabled": true}
  },
  "health": {
    "failureThreshold": 5,
    "cooldownSeconds": 0.5,
    "servers": {
      "py": {"timeoutSeconds": 2, "restart": {"initialBackoffSeconds": 0, "maxBackoffSeconds": 1},
             "tools": {"slow": {"timeoutSeconds": 60, "failureThreshold": 1}}}
    }
  }
}"#;
    let c = parse("gw.json", text).expect("valid");
    let names: Vec<&str> = c.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["py", "remote"], "the disabled server is left out");
    let py = &c.servers[0];
    assert_eq!(
        py.settings.breaker.failure_threshold, 5,
        "inherited from health"
    );
    assert_eq!(
        py.settings.breaker.recovery_duration,
        Duration::from_millis(500)
    );
    assert_eq!(py.settings.timeout, Duration::from_secs(2));
    assert_eq!(py.settings.restart.initial, Duration::ZERO);
    let slow = &py.tools["slow"];
    assert_eq!(slow.timeout, Duration::from_secs(60));
    assert_eq!(slow.breaker.failure_threshold, 1);
    assert_eq!(
        slow.breaker.recovery_duration,
        Duration::from_millis(500),
        "inherited from the server"
    );
    let remote = &c.servers[1];
    assert_eq!(
        remote.settings.timeout,
        Duration::from_secs(30),
        "the default"
    );
    assert!(matches!(&remote.launch, Launch::Http { headers, .. } if headers.len() == 1));
    // Debug output never shows credentials.
    let debug = format!("{:?}", c.servers);
    assert!(!debug.contains("secret"), "{debug}");
    // Host keys are warnings with their lines.
    assert_eq!(c.warnings.len(), 2, "{:?}", c.warnings);
    assert!(
        c.warnings
            .iter()
            .any(|w| w.starts_with("gw.json:2: `globalShortcut`")),
        "{:?}",
        c.warnings
    );
    assert!(
        c.warnings
            .iter()
            .any(|w| w.starts_with("gw.json:4: `mcpServers.py.alwaysAllow`")),
        "{:?}",
        c.warnings
    );
}

#[test]
fn a_setting_out_of_range_names_the_field_the_line_the_range_and_the_fix() {
    let p = one("{\"mcpServers\": {\"py\": {\"command\": \"x\"}},\n \"health\": {\n  \"servers\": {\"py\": {\n   \"cooldownSeconds\": 0}}}}");
    assert_eq!(p.path, "health.servers.py.cooldownSeconds");
    assert_eq!(p.line, Some(4));
    assert!(
        p.message.contains("from 0.001 to 86400 seconds"),
        "{}",
        p.message
    );
    assert!(p.fix.contains("30 is the default"), "{}", p.fix);
    let shown = ConfigError {
        file: "gw.json".into(),
        problems: vec![p],
    }
    .to_string();
    assert!(
        shown.contains("gw.json:4: `health.servers.py.cooldownSeconds` is 0, must be"),
        "{shown}"
    );
    assert!(shown.contains("fix: "), "{shown}");
}

#[test]
fn every_problem_is_reported_at_once_in_line_order() {
    let all = problems(
        "{\"mcpServers\": {\n \"a b\": {\"command\": \"x\"},\n \"ok\": {\"command\": \"x\", \"args\": [1]}},\n \"health\": {\"failureThreshold\": -1,\n \"timeoutSeconds\": \"30s\"}}",
    );
    let paths: Vec<&str> = all.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "mcpServers.\"a b\"",
            "mcpServers.ok.args.0",
            "health.failureThreshold",
            "health.timeoutSeconds"
        ],
        "{all:#?}"
    );
    assert!(
        all[0].message.contains("contains ' '"),
        "{}",
        all[0].message
    );
    assert!(all[1].fix.contains("quote it"), "{}", all[1].fix);
    assert!(
        all[3].fix.contains("without unit or quotes"),
        "{}",
        all[3].fix
    );
}

#[test]
fn typos_in_health_are_errors_with_a_suggestion() {
    let p = one(r#"{"mcpServers": {"py": {"command": "x"}}, "health": {"cooldown": 5}}"#);
    assert_eq!(p.path, "health.cooldown");
    assert!(
        p.fix.contains("did you mean `cooldownSeconds`"),
        "{}",
        p.fix
    );
    let p = one(r#"{"mcpServers": {"py": {"command": "x"}}, "health": {"servers": {"pyy": {}}}}"#);
    assert_eq!(p.path, "health.servers.pyy");
    assert!(p.fix.contains("did you mean `py`"), "{}", p.fix);
}

#[test]
fn transports_are_checked() {
    let p = one(r#"{"mcpServers": {"s": {"command": "x", "url": "http://h/mcp"}}}"#);
    assert!(p.message.contains("both"), "{}", p.message);
    let p = one(r#"{"mcpServers": {"s": {"url": "http://h/sse", "type": "sse"}}}"#);
    assert!(p.message.contains("not supported"), "{}", p.message);
    let p = one(r#"{"mcpServers": {"s": {"url": "ftp://h/x"}}}"#);
    assert!(p.message.contains("only http and https"), "{}", p.message);
    let p = one(r#"{"mcpServers": {"s": {"url": "http://h/mcp", "headers": {"X-Key": "a\nb"}}}}"#);
    assert!(
        p.message.contains("not a valid HTTP header value"),
        "{}",
        p.message
    );
    assert!(
        !p.message.contains("a\nb"),
        "a header value is never echoed"
    );
    let p = one(r#"{"mcpServers": {"s": {}}}"#);
    assert!(p.message.contains("neither"), "{}", p.message);
    let p = one(r#"{"servers": {}}"#);
    assert!(p.message.contains("no `mcpServers`"), "{}", p.message);
}

#[test]
fn an_empty_mcp_servers_is_a_gateway_of_traces_only() {
    let c = parse("gw.json", r#"{"mcpServers": {}}"#).expect("valid");
    assert!(c.servers.is_empty());
}

#[test]
fn a_misspelt_mcp_servers_gets_its_did_you_mean() {
    let p = one(r#"{"mcpServer": {"py": {"command": "x"}}}"#);
    assert!(p.message.contains("no `mcpServers`"), "{}", p.message);
    assert!(
        p.fix.contains("rename `mcpServer` to `mcpServers`"),
        "{}",
        p.fix
    );
}

#[test]
fn variables_are_expanded_and_an_unset_one_is_a_problem_naming_it() {
    let env = |k: &str| match k {
        "TOKEN" => Some("tok-123456".to_owned()),
        "PORT" => Some("9000".to_owned()),
        _ => None,
    };
    let c = parse_with(
        "gw.json",
        r#"{"mcpServers": {
            "py": {"command": "python3", "args": ["--port", "${PORT}"], "env": {"K": "${TOKEN}", "D": "${UNSET:-fallback}"}},
            "remote": {"url": "http://127.0.0.1:${PORT}/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}
        }}"#,
        &env,
    )
    .expect("valid");
    match &c.servers[0].launch {
        Launch::Stdio { args, env, .. } => {
            assert_eq!(args, &["--port", "9000"]);
            assert_eq!(env["K"], "tok-123456");
            assert_eq!(env["D"], "fallback");
        }
        other => panic!("{other:?}"),
    }
    match &c.servers[1].launch {
        Launch::Http { url, headers } => {
            assert_eq!(url, "http://127.0.0.1:9000/mcp");
            assert_eq!(headers[0].1, "Bearer tok-123456");
        }
        other => panic!("{other:?}"),
    }
    // The expanded values are secrets like the rest.
    let secrets = Secrets::of(&c);
    assert_eq!(secrets.scrub("sent tok-123456"), "sent ***");
    let all = parse_with(
        "gw.json",
        "{\"mcpServers\": {\"py\": {\"command\": \"x\",\n \"env\": {\"K\": \"${NOPE}\"}}}}",
        &env,
    )
    .expect_err("unset")
    .problems;
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_eq!(
        (all[0].path.as_str(), all[0].line),
        ("mcpServers.py.env.K", Some(2))
    );
    assert!(
        all[0].message.contains("`${NOPE}`, which is not set"),
        "{}",
        all[0].message
    );
    assert!(all[0].fix.contains("${NOPE:-"), "{}", all[0].fix);
}

#[test]
fn syntax_errors_and_repeated_keys_have_their_lines() {
    let p = one("{\n \"mcpServers\": {\n  \"py\": {\"command\": \"x\"}\n  \"ts\": {}\n }\n}");
    assert_eq!(p.line, Some(4));
    assert!(p.message.contains("not valid JSON"), "{}", p.message);
    let p = one("{\n // servers\n \"mcpServers\": {}}");
    assert!(p.fix.contains("comment"), "{}", p.fix);
    let p = one("{\"mcpServers\": {\"py\": {\"command\": \"x\"}},\n\"health\": {\"timeoutSeconds\": 1,\n \"timeoutSeconds\": 2}}");
    assert_eq!(
        (p.path.as_str(), p.line),
        ("health.timeoutSeconds", Some(3))
    );
    assert!(p.message.contains("twice"), "{}", p.message);
}

#[test]
fn restart_backoff_must_grow() {
    let p = one(
        r#"{"mcpServers": {"py": {"command": "x"}}, "health": {"restart": {"initialBackoffSeconds": 5, "maxBackoffSeconds": 1}}}"#,
    );
    assert_eq!(p.path, "health.restart.maxBackoffSeconds");
}

#[test]
fn the_committed_example_config_is_valid() {
    let text = include_str!("../../example.json");
    let c = parse("gateway/example.json", text).expect("the example is valid");
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    assert!(c.servers.len() >= 2);
}

#[test]
fn retry_on_reconnect_is_a_boolean_on_by_default_and_per_server() {
    let c = parse(
        "gw.json",
        r#"{"mcpServers": {"a": {"command": "a"}, "b": {"command": "b"}},
            "health": {"servers": {"b": {"retryOnReconnect": false}}}}"#,
    )
    .expect("valid");
    assert!(c.servers[0].settings.retry_on_reconnect, "on by default");
    assert!(!c.servers[1].settings.retry_on_reconnect);
    let p =
        one(r#"{"mcpServers": {"a": {"command": "a"}}, "health": {"retryOnReconnect": "yes"}}"#);
    assert_eq!(p.path, "health.retryOnReconnect");
    assert!(
        p.message.contains("must be true or false, got a string"),
        "{p:?}"
    );
    let p = one(r#"{"mcpServers": {"a": {"command": "a"}},
            "health": {"servers": {"a": {"tools": {"t": {"retryOnReconnect": false}}}}}}"#);
    assert!(
        p.path.ends_with("tools.t.retryOnReconnect"),
        "not per tool: {p:?}"
    );
}

#[test]
fn the_fleet_takes_a_number_of_shards_in_its_range() {
    let with = |shards: &str| {
        format!(
            r#"{{"mcpServers": {{}}, "health": {{"fleet": {{"url": "redis-cluster://127.0.0.1:7000", "shards": {shards}}}}}}}"#
        )
    };
    let c = parse("gw.json", &with("8")).expect("valid");
    assert_eq!(c.health.fleet.as_ref().and_then(|f| f.shards), Some(8));
    for bad in ["0", "65", "2.5", "\"3\""] {
        let p = one(&with(bad));
        assert_eq!(p.path, "health.fleet.shards", "{bad}: {p:?}");
        assert!(p.message.contains("from 1 to 64"), "{bad}: {p:?}");
    }
    let c = parse(
        "gw.json",
        r#"{"mcpServers": {}, "health": {"fleet": {"url": "redis://127.0.0.1:6379"}}}"#,
    )
    .expect("valid");
    assert_eq!(
        c.health.fleet.as_ref().and_then(|f| f.shards),
        None,
        "the library's default"
    );
}
