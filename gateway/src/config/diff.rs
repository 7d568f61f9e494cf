//! What a reload changes: the running config against the new one, server by server, and
//! which of the gateway-wide settings need a restart of the gateway.
//!
//! | a server's … | is |
//! |---|---|
//! | entry added | started |
//! | entry removed (or `disabled: true`) | stopped |
//! | `command`, `args`, `env`, `cwd`, `url`, `headers` | restarted with the new launch (a new process, or a new HTTP session) |
//! | `health.servers.NAME` settings, the `health` defaults it inherits | applied live: same process, same session |
//! | nothing | untouched |
//!
//! `health.maxMessageBytes` and `health.fleet` are read once, at start: a change of either is
//! reported as needing a restart of the gateway, and the running value is kept.

use std::fmt;

use super::{Config, Launch, ServerConfig, Settings};

/// What a reload changes (see the module docs).
#[derive(Debug, Clone, Default)]
pub(crate) struct Diff {
    /// Servers to start.
    pub(crate) added: Vec<ServerConfig>,
    /// Servers to stop, by name.
    pub(crate) removed: Vec<String>,
    /// Servers whose launch changed (what changed): restarted.
    pub(crate) restarted: Vec<(ServerConfig, Vec<String>)>,
    /// Servers whose settings alone changed (which): applied live.
    pub(crate) reconfigured: Vec<(ServerConfig, Vec<String>)>,
    /// How many servers are untouched.
    pub(crate) unchanged: usize,
    /// The `health` breaker defaults changed (breakers of no server created from now take them).
    pub(crate) defaults: bool,
    /// Gateway-wide keys that changed and need a restart of the gateway (the running values
    /// are kept).
    pub(crate) kept: Vec<&'static str>,
}

impl Diff {
    /// The changes from `old` (running) to `new`.
    pub(crate) fn between(old: &Config, new: &Config) -> Self {
        let mut d = Self::default();
        for server in &new.servers {
            match old.servers.iter().find(|s| s.name == server.name) {
                None => d.added.push(server.clone()),
                Some(before) => {
                    let launch = launch_changes(&before.launch, &server.launch);
                    if !launch.is_empty() {
                        d.restarted.push((server.clone(), launch));
                        continue;
                    }
                    let settings = settings_changes(before, server);
                    if settings.is_empty() {
                        d.unchanged += 1;
                    } else {
                        d.reconfigured.push((server.clone(), settings));
                    }
                }
            }
        }
        for before in &old.servers {
            if !new.servers.iter().any(|s| s.name == before.name) {
                d.removed.push(before.name.clone());
            }
        }
        d.defaults = old.health.defaults.breaker != new.health.defaults.breaker;
        if old.health.max_message_bytes != new.health.max_message_bytes {
            d.kept.push("health.maxMessageBytes");
        }
        if old.health.fleet != new.health.fleet {
            d.kept.push("health.fleet");
        }
        d
    }

    /// Whether the set of servers or any server's launch changes (hosts' lists may change).
    pub(crate) fn moves_servers(&self) -> bool {
        !(self.added.is_empty() && self.removed.is_empty() && self.restarted.is_empty())
    }
}

impl fmt::Display for Diff {
    /// One line for the log: `added `b`; removed `a`; restarted `c` (args changed); …`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        let names = |list: &mut dyn Iterator<Item = &str>| {
            list.map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if !self.added.is_empty() {
            parts.push(format!(
                "added {}",
                names(&mut self.added.iter().map(|s| s.name.as_str()))
            ));
        }
        if !self.removed.is_empty() {
            parts.push(format!(
                "removed {}",
                names(&mut self.removed.iter().map(String::as_str))
            ));
        }
        for (what, list) in [
            ("restarted", &self.restarted),
            ("re-configured live", &self.reconfigured),
        ] {
            for (s, keys) in list {
                parts.push(format!("{what} `{}` ({} changed)", s.name, keys.join(", ")));
            }
        }
        if self.defaults {
            parts.push("the `health` breaker defaults changed".to_owned());
        }
        if self.unchanged > 0 {
            parts.push(format!(
                "{} server{} unchanged",
                self.unchanged,
                if self.unchanged == 1 { "" } else { "s" }
            ));
        }
        for key in &self.kept {
            parts.push(format!(
                "`{key}` changed, which takes a restart of the gateway: the running value is kept"
            ));
        }
        if parts.is_empty() {
            f.write_str("nothing changed")
        } else {
            f.write_str(&parts.join("; "))
        }
    }
}

/// The keys of a launch that differ (`transport` when one is a command and the other a URL).
fn launch_changes(old: &Launch, new: &Launch) -> Vec<String> {
    let mut keys = Vec::new();
    match (old, new) {
        (
            Launch::Stdio {
                command,
                args,
                env,
                cwd,
            },
            Launch::Stdio {
                command: c2,
                args: a2,
                env: e2,
                cwd: w2,
            },
        ) => {
            for (key, differs) in [
                ("command", command != c2),
                ("args", args != a2),
                ("env", env != e2),
                ("cwd", cwd != w2),
            ] {
                if differs {
                    keys.push(key.to_owned());
                }
            }
        }
        (
            Launch::Http { url, headers },
            Launch::Http {
                url: u2,
                headers: h2,
            },
        ) => {
            for (key, differs) in [("url", url != u2), ("headers", headers != h2)] {
                if differs {
                    keys.push(key.to_owned());
                }
            }
        }
        _ => keys.push("transport".to_owned()),
    }
    keys
}

/// The settings keys of a server that differ, and `tools.NAME` for each tool whose own
/// settings differ (or that gained or lost settings of its own).
fn settings_changes(old: &ServerConfig, new: &ServerConfig) -> Vec<String> {
    let mut keys: Vec<String> = setting_keys(&old.settings, &new.settings)
        .into_iter()
        .map(str::to_owned)
        .collect();
    let tools = old.tools.keys().chain(new.tools.keys());
    let mut seen = std::collections::BTreeSet::new();
    for tool in tools {
        if seen.insert(tool) && old.tools.get(tool) != new.tools.get(tool) {
            keys.push(format!("tools.{tool}"));
        }
    }
    keys
}

/// The config keys of `Settings` that differ.
fn setting_keys(old: &Settings, new: &Settings) -> Vec<&'static str> {
    [
        (
            "failureThreshold",
            old.breaker.failure_threshold != new.breaker.failure_threshold,
        ),
        (
            "cooldownSeconds",
            old.breaker.recovery_duration != new.breaker.recovery_duration,
        ),
        (
            "probeTimeoutSeconds",
            old.breaker.probe_timeout != new.breaker.probe_timeout,
        ),
        ("timeoutSeconds", old.timeout != new.timeout),
        ("pingTimeoutSeconds", old.ping_timeout != new.ping_timeout),
        (
            "connectTimeoutSeconds",
            old.connect_timeout != new.connect_timeout,
        ),
        ("schemaCheck", old.schema_check != new.schema_check),
        ("restart", old.restart != new.restart),
        (
            "retryOnReconnect",
            old.retry_on_reconnect != new.retry_on_reconnect,
        ),
    ]
    .into_iter()
    .filter_map(|(key, differs)| differs.then_some(key))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        super::super::parse_with("gw.json", text, &|_| None).expect("a valid config")
    }

    #[test]
    fn each_server_is_added_removed_restarted_reconfigured_or_untouched() {
        let old = config(
            r#"{"mcpServers": {
                "keep": {"command": "k"},
                "gone": {"command": "g"},
                "moved": {"command": "m", "args": ["1"]},
                "tuned": {"url": "http://127.0.0.1:9/mcp"}
            }, "health": {"servers": {"tuned": {"timeoutSeconds": 5}}}}"#,
        );
        let new = config(
            r#"{"mcpServers": {
                "keep": {"command": "k"},
                "moved": {"command": "m", "args": ["2"], "env": {"A": "b"}},
                "tuned": {"url": "http://127.0.0.1:9/mcp"},
                "new": {"command": "n"}
            }, "health": {"servers": {"tuned": {"timeoutSeconds": 6, "tools": {"t": {"failureThreshold": 9}}}}}}"#,
        );
        let d = Diff::between(&old, &new);
        assert_eq!(d.added.iter().map(|s| &s.name).collect::<Vec<_>>(), ["new"]);
        assert_eq!(d.removed, ["gone"]);
        assert_eq!(d.restarted.len(), 1);
        assert_eq!(d.restarted[0].0.name, "moved");
        assert_eq!(d.restarted[0].1, ["args", "env"]);
        assert_eq!(d.reconfigured.len(), 1);
        assert_eq!(d.reconfigured[0].1, ["timeoutSeconds", "tools.t"]);
        assert_eq!(d.unchanged, 1);
        assert!(!d.defaults && d.kept.is_empty());
        assert!(d.moves_servers());
        assert_eq!(
            d.to_string(),
            "added `new`; removed `gone`; restarted `moved` (args, env changed); re-configured \
             live `tuned` (timeoutSeconds, tools.t changed); 1 server unchanged"
        );
    }

    #[test]
    fn a_default_inherited_by_a_server_reconfigures_it_and_gateway_keys_are_kept() {
        let old = config(r#"{"mcpServers": {"a": {"command": "a"}}}"#);
        let new = config(
            r#"{"mcpServers": {"a": {"command": "a"}}, "health": {"failureThreshold": 5,
                "maxMessageBytes": 2048, "fleet": {"url": "redis://127.0.0.1:1"}}}"#,
        );
        let d = Diff::between(&old, &new);
        assert!(d.defaults);
        assert_eq!(d.reconfigured[0].1, ["failureThreshold"]);
        assert_eq!(d.kept, ["health.maxMessageBytes", "health.fleet"]);
        assert!(!d.moves_servers());
        assert!(d.to_string().contains(
            "`health.fleet` changed, which takes a restart of the gateway: the running value is kept"
        ));
    }

    #[test]
    fn the_same_config_changes_nothing_and_a_transport_swap_restarts() {
        let text = r#"{"mcpServers": {"a": {"command": "a", "env": {"T": "x"}}}}"#;
        let d = Diff::between(&config(text), &config(text));
        assert!(!d.moves_servers() && d.reconfigured.is_empty() && !d.defaults);
        assert_eq!(d.to_string(), "1 server unchanged");
        let d = Diff::between(
            &config(text),
            &config(r#"{"mcpServers": {"a": {"url": "http://127.0.0.1:9/mcp"}}}"#),
        );
        assert_eq!(d.restarted[0].1, ["transport"]);
        let none = config(r#"{"mcpServers": {}}"#);
        assert_eq!(Diff::between(&none, &none).to_string(), "nothing changed");
    }
}
