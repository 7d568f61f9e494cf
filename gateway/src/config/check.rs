//! The checker: collects every problem (with its line) and every warning, and reads the file's
//! top level — `mcpServers` (each entry in `launch.rs`) and `health` (`settings.rs`).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::expand::{expand, Env};
use super::locate::Index;
use super::words::{dotted, kind, list, suggestion};
use super::{Config, Health, Problem, Settings, ToolSettings, DEFAULT_MAX_MESSAGE_BYTES};
use crate::names;

pub(super) struct Checker<'a> {
    pub(super) index: &'a Index,
    pub(super) problems: Vec<Problem>,
    pub(super) warnings: Vec<String>,
    /// What this machine lacks (see [`Config::absent`]).
    pub(super) absent: Vec<Problem>,
    pub(super) file: &'a str,
    /// Where `${VAR}` is read.
    pub(super) env: Env<'a>,
}

pub(super) fn p(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| (*s).to_owned()).collect()
}

pub(super) fn child(path: &[String], key: &str) -> Vec<String> {
    let mut p = path.to_vec();
    p.push(key.to_owned());
    p
}

impl Checker<'_> {
    /// A problem at `path` (with its line).
    fn at(&self, path: &[String], message: impl Into<String>, fix: impl Into<String>) -> Problem {
        Problem {
            path: dotted(path),
            line: self.index.nearest_line(path),
            message: message.into(),
            fix: fix.into(),
        }
    }

    pub(super) fn problem(
        &mut self,
        path: &[String],
        message: impl Into<String>,
        fix: impl Into<String>,
    ) {
        let p = self.at(path, message, fix);
        self.problems.push(p);
    }

    /// Something this machine lacks (see [`Config::absent`]).
    pub(super) fn absent(
        &mut self,
        path: &[String],
        message: impl Into<String>,
        fix: impl Into<String>,
    ) {
        let p = self.at(path, message, fix);
        self.absent.push(p);
    }

    /// `text` with its `${VAR}` expanded (`expand.rs`), or a problem naming the variable.
    pub(super) fn expanded(&mut self, text: &str, path: &[String]) -> Option<String> {
        match expand(text, self.env) {
            Ok(t) => Some(t.into_owned()),
            Err(var) => {
                self.problem(
                    path,
                    format!("uses `${{{var}}}`, which is not set in the gateway's environment"),
                    format!("set {var} where the gateway runs, or give a default: `${{{var}:-…}}`"),
                );
                None
            }
        }
    }

    pub(super) fn warn(&mut self, path: &[String], message: &str) {
        let at = match self.index.nearest_line(path) {
            Some(line) => format!("{}:{line}", self.file),
            None => self.file.to_owned(),
        };
        self.warnings
            .push(format!("{at}: `{}` {message}", dotted(path)));
    }

    /// The object at `path`, or a problem.
    pub(super) fn object<'v>(
        &mut self,
        v: &'v Value,
        path: &[String],
        fix: &str,
    ) -> Option<&'v Map<String, Value>> {
        match v {
            Value::Object(m) => Some(m),
            other => {
                self.problem(path, format!("must be an object, got {}", kind(other)), fix);
                None
            }
        }
    }

    /// Reports keys of `m` not in `known` (problems when `strict`, else warnings).
    pub(super) fn unknown_keys(
        &mut self,
        m: &Map<String, Value>,
        path: &[String],
        known: &[&str],
        strict: bool,
    ) {
        for key in m.keys() {
            if known.contains(&key.as_str()) {
                continue;
            }
            let at = child(path, key);
            let hint = suggestion(key, known)
                .map(|s| format!("did you mean `{s}`? "))
                .unwrap_or_default();
            if strict {
                self.problem(
                    &at,
                    "is not a setting the gateway knows",
                    format!("{hint}the keys here are {}", list(known)),
                );
            } else {
                self.warn(
                    &at,
                    &format!("is ignored ({hint}not a key the gateway uses)"),
                );
            }
        }
    }

    pub(super) fn string_field(&mut self, v: &Value, path: &[String], fix: &str) -> Option<String> {
        match v {
            Value::String(s) => Some(s.clone()),
            other => {
                self.problem(path, format!("must be a string, got {}", kind(other)), fix);
                None
            }
        }
    }

    pub(super) fn config(&mut self, v: &Value) -> Option<Config> {
        let root = self.object(
            v,
            &[],
            "the file must be one JSON object with a `mcpServers` object inside",
        )?;
        for key in root.keys() {
            if key != "mcpServers" && key != "health" {
                let hint = suggestion(key, &["mcpServers", "health"])
                    .map(|s| format!(" (did you mean `{s}`?)"))
                    .unwrap_or_default();
                self.warn(&p(&[key]), &format!("is ignored{hint}"));
            }
        }
        let health = root.get("health");
        let (defaults, max_message_bytes, fleet, server_health) = match health {
            None => (Settings::default(), DEFAULT_MAX_MESSAGE_BYTES, None, None),
            Some(h) => self.health(h),
        };
        let Some(servers_value) = root.get("mcpServers") else {
            let typo = root
                .keys()
                .find(|k| suggestion(k, &["mcpServers"]).is_some())
                .map(|k| {
                    format!(
                        "rename `{}` to `mcpServers` (did you mean `mcpServers`?)",
                        names::printable(k, 40)
                    )
                });
            self.problem(
                &[],
                "has no `mcpServers` object",
                typo.unwrap_or_else(|| {
                    "add `\"mcpServers\": {\"name\": {\"command\": \"…\", \"args\": […]}}` with \
                     the servers to put behind the gateway (`{}` for none: a gateway that only \
                     receives agents' traces)"
                        .to_owned()
                }),
            );
            return None;
        };
        let path = p(&["mcpServers"]);
        let entries = self.object(
            servers_value,
            &path,
            "`mcpServers` maps each server's name to `{\"command\", \"args\", \"env\"}` or \
             `{\"url\", \"headers\"}`",
        )?;
        let mut servers = Vec::new();
        for (name, entry) in entries {
            let at = child(&path, name);
            if let Err(why) = names::check_server_name(name) {
                self.problem(
                    &at,
                    format!(
                        "is not a usable server name: it {why}. A server's name prefixes its \
                         tools (`{{server}}__{{tool}}`, see docs/gateway.md)"
                    ),
                    "rename it: 1 to 64 ASCII letters, digits and `-`, with single `_` inside \
                     (e.g. `my-server`)",
                );
                continue;
            }
            if let Some(server) = self.entry(name, entry, &at) {
                servers.push(server);
            }
        }
        // Per-server settings.
        let mut own: BTreeMap<String, (Settings, BTreeMap<String, ToolSettings>)> = BTreeMap::new();
        if let Some((servers_path, map)) = server_health {
            for (name, value) in map {
                let at = child(&servers_path, &name);
                if !entries.contains_key(&name) {
                    let known: Vec<&str> = entries.keys().map(String::as_str).collect();
                    let hint = suggestion(&name, &known)
                        .map(|s| format!("did you mean `{s}`? "))
                        .unwrap_or_default();
                    self.problem(
                        &at,
                        "names no server of `mcpServers`",
                        format!("{hint}use a name from `mcpServers` ({})", list(&known)),
                    );
                    continue;
                }
                if let Some(settings) = self.server_settings(&value, &at, &defaults) {
                    own.insert(name, settings);
                }
            }
        }
        for server in &mut servers {
            match own.remove(&server.name) {
                Some((settings, tools)) => {
                    server.settings = settings;
                    server.tools = tools;
                }
                None => server.settings = defaults.clone(),
            }
        }
        Some(Config {
            servers,
            health: Health {
                defaults,
                max_message_bytes,
                fleet,
            },
            warnings: Vec::new(),
            absent: Vec::new(),
        })
    }
}
