//! `health`: the gateway's defaults, `maxMessageBytes`, `fleet`, and the settings of each
//! server and tool over them — each with its range, and its default named in the fix.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Map, Value};
use tool_health::mcp::SchemaCheck;

use super::check::{child, p, Checker};
use super::words::kind;
use super::{Fleet, Settings, ToolSettings, DEFAULT_MAX_MESSAGE_BYTES};
use crate::names;

/// Keys of `health` and of `health.servers.NAME` (and which of them a tool may set).
pub(super) const HEALTH_KEYS: &[&str] = &[
    "failureThreshold",
    "cooldownSeconds",
    "probeTimeoutSeconds",
    "timeoutSeconds",
    "pingTimeoutSeconds",
    "connectTimeoutSeconds",
    "schemaCheck",
    "restart",
    "retryOnReconnect",
    "maxMessageBytes",
    "servers",
    "fleet",
];
pub(super) const SERVER_KEYS: &[&str] = &[
    "failureThreshold",
    "cooldownSeconds",
    "probeTimeoutSeconds",
    "timeoutSeconds",
    "pingTimeoutSeconds",
    "connectTimeoutSeconds",
    "schemaCheck",
    "restart",
    "retryOnReconnect",
    "tools",
];
pub(super) const TOOL_KEYS: &[&str] = &[
    "failureThreshold",
    "cooldownSeconds",
    "probeTimeoutSeconds",
    "timeoutSeconds",
];

impl Checker<'_> {
    /// `health`: the defaults, `maxMessageBytes`, `fleet`, and `servers` (returned for later).
    #[allow(clippy::type_complexity)]
    pub(super) fn health(
        &mut self,
        v: &Value,
    ) -> (
        Settings,
        usize,
        Option<Fleet>,
        Option<(Vec<String>, Map<String, Value>)>,
    ) {
        let path = p(&["health"]);
        let Some(m) = self.object(
            v,
            &path,
            "`health` is an object of settings (docs/gateway.md)",
        ) else {
            return (Settings::default(), DEFAULT_MAX_MESSAGE_BYTES, None, None);
        };
        self.unknown_keys(m, &path, HEALTH_KEYS, true);
        let defaults = self.settings(m, &path, &Settings::default());
        let mut max_message_bytes = DEFAULT_MAX_MESSAGE_BYTES;
        if let Some(v) = m.get("maxMessageBytes") {
            if let Some(n) = self.integer(
                v,
                &child(&path, "maxMessageBytes"),
                1024,
                64 * 1024 * 1024,
                "bytes",
            ) {
                max_message_bytes = n as usize;
            }
        }
        let fleet = m
            .get("fleet")
            .and_then(|f| self.fleet(f, &child(&path, "fleet")));
        let servers = m.get("servers").and_then(|s| {
            let spath = child(&path, "servers");
            self.object(s, &spath, "`servers` maps a server's name to its settings")
                .map(|map| (spath, map.clone()))
        });
        (defaults, max_message_bytes, fleet, servers)
    }

    pub(super) fn fleet(&mut self, v: &Value, path: &[String]) -> Option<Fleet> {
        let m = self.object(
            v,
            path,
            "`fleet` is `{\"url\": \"redis://host:6379\"}` (a cluster: `redis-cluster://host:6379`)",
        )?;
        self.unknown_keys(m, path, &["url", "prefix", "shards"], true);
        let url = match m.get("url") {
            Some(u) => self.string_field(
                u,
                &child(path, "url"),
                "the store's URL, e.g. `\"redis://127.0.0.1:6379\"` or, for a cluster, \
                 `\"redis-cluster://node:6379\"`",
            )?,
            None => {
                self.problem(
                    path,
                    "has no `url`",
                    "add `\"url\": \"redis://host:6379\"` (Valkey or Redis ≥ 7; a cluster: \
                     `redis-cluster://host:6379`)",
                );
                return None;
            }
        };
        let prefix = match m.get("prefix") {
            Some(v) => Some(self.string_field(
                v,
                &child(path, "prefix"),
                "a key prefix, e.g. `\"tool_health\"`",
            )?),
            None => None,
        };
        let shards = match m.get("shards") {
            Some(v) => Some(self.integer(
                v,
                &child(path, "shards"),
                1,
                u64::from(tool_health::fleet::MAX_SHARDS),
                "shards",
            )? as u16),
            None => None,
        };
        Some(Fleet {
            url,
            prefix,
            shards,
        })
    }

    /// `health.servers.NAME`: its settings over `defaults`, and its tools'.
    pub(super) fn server_settings(
        &mut self,
        v: &Value,
        path: &[String],
        defaults: &Settings,
    ) -> Option<(Settings, BTreeMap<String, ToolSettings>)> {
        let m = self.object(
            v,
            path,
            "a server's settings are an object (docs/gateway.md)",
        )?;
        self.unknown_keys(m, path, SERVER_KEYS, true);
        let settings = self.settings(m, path, defaults);
        let mut tools = BTreeMap::new();
        if let Some(t) = m.get("tools") {
            let tpath = child(path, "tools");
            if let Some(map) = self.object(
                t,
                &tpath,
                "`tools` maps a tool's name (as its server lists it) to its settings",
            ) {
                for (tool, tv) in map {
                    let at = child(&tpath, tool);
                    if let Err(names::NameError::Invalid(why)) = names::shown("x", tool) {
                        self.problem(
                            &at,
                            format!("is not a tool name MCP allows: {why}"),
                            "use the tool's name as its server lists it",
                        );
                        continue;
                    }
                    let Some(tm) = self.object(tv, &at, "a tool's settings are an object") else {
                        continue;
                    };
                    self.unknown_keys(tm, &at, TOOL_KEYS, true);
                    let s = self.settings(tm, &at, &settings);
                    tools.insert(
                        tool.clone(),
                        ToolSettings {
                            breaker: s.breaker,
                            timeout: s.timeout,
                        },
                    );
                }
            }
        }
        Some((settings, tools))
    }

    /// The settings of object `m` over `base`.
    pub(super) fn settings(
        &mut self,
        m: &Map<String, Value>,
        path: &[String],
        base: &Settings,
    ) -> Settings {
        let mut s = base.clone();
        if let Some(v) = m.get("failureThreshold") {
            if let Some(n) =
                self.integer(v, &child(path, "failureThreshold"), 0, 10_000, "failures")
            {
                s.breaker.failure_threshold = n as u32;
            }
        }
        let day = 86_400.0;
        if let Some(d) = self.seconds(m, path, "cooldownSeconds", 0.001, day, false) {
            s.breaker.recovery_duration = d;
        }
        if let Some(d) = self.seconds(m, path, "probeTimeoutSeconds", 0.001, day, true) {
            s.breaker.probe_timeout = d;
        }
        if let Some(d) = self.seconds(m, path, "timeoutSeconds", 0.001, 3_600.0, false) {
            s.timeout = d;
        }
        if let Some(d) = self.seconds(m, path, "pingTimeoutSeconds", 0.001, 600.0, false) {
            s.ping_timeout = d;
        }
        if let Some(d) = self.seconds(m, path, "connectTimeoutSeconds", 0.1, 600.0, false) {
            s.connect_timeout = d;
        }
        if let Some(v) = m.get("schemaCheck") {
            let at = child(path, "schemaCheck");
            match v.as_str() {
                Some("lax") => s.schema_check = SchemaCheck::Lax,
                Some("strict") => s.schema_check = SchemaCheck::Strict,
                Some("off") => s.schema_check = SchemaCheck::Off,
                _ => self.problem(
                    &at,
                    format!(
                        "must be \"lax\", \"strict\" or \"off\", got {}",
                        if v.is_string() {
                            "another string"
                        } else {
                            kind(v)
                        }
                    ),
                    "\"lax\" (the default) never refuses what an SDK server would accept",
                ),
            }
        }
        if let Some(v) = m.get("retryOnReconnect") {
            match v.as_bool() {
                Some(b) => s.retry_on_reconnect = b,
                None => self.problem(
                    &child(path, "retryOnReconnect"),
                    format!("must be true or false, got {}", kind(v)),
                    "true (the default) calls a read-only or idempotent tool once more after its \
                     connection ended under the call; false never does",
                ),
            }
        }
        if let Some(v) = m.get("restart") {
            let at = child(path, "restart");
            if let Some(r) = self.object(
                v,
                &at,
                "`restart` is `{\"initialBackoffSeconds\": 0.5, \"maxBackoffSeconds\": 30}`",
            ) {
                self.unknown_keys(
                    r,
                    &at,
                    &["initialBackoffSeconds", "maxBackoffSeconds"],
                    true,
                );
                if let Some(d) = self.seconds(r, &at, "initialBackoffSeconds", 0.0, 3_600.0, true) {
                    s.restart.initial = d;
                }
                if let Some(d) = self.seconds(r, &at, "maxBackoffSeconds", 0.001, 3_600.0, false) {
                    s.restart.max = d;
                }
                if s.restart.max < s.restart.initial {
                    self.problem(
                        &child(&at, "maxBackoffSeconds"),
                        format!(
                            "is {} s, less than `initialBackoffSeconds` ({} s)",
                            s.restart.max.as_secs_f64(),
                            s.restart.initial.as_secs_f64()
                        ),
                        "make the longest backoff at least the first one",
                    );
                }
            }
        }
        s
    }

    /// `m[key]` as a duration of seconds in `[min, max]` (or 0 when `zero_ok`).
    pub(super) fn seconds(
        &mut self,
        m: &Map<String, Value>,
        path: &[String],
        key: &str,
        min: f64,
        max: f64,
        zero_ok: bool,
    ) -> Option<Duration> {
        let v = m.get(key)?;
        let at = child(path, key);
        let range = if zero_ok {
            format!("0 (off) or from {min} to {max} seconds")
        } else {
            format!("from {min} to {max} seconds")
        };
        let Some(x) = v.as_f64() else {
            let fix = match v.as_str() {
                Some(s) if s.trim_end_matches(['s', 'm']).trim().parse::<f64>().is_ok() => {
                    "write a plain number of seconds without unit or quotes (`30`, `0.5`)"
                }
                _ => "write a number of seconds (`30`, `0.5`)",
            };
            self.problem(
                &at,
                format!("must be a number of seconds ({range}), got {}", kind(v)),
                fix,
            );
            return None;
        };
        if (zero_ok && x == 0.0) || (min..=max).contains(&x) {
            return Some(Duration::from_secs_f64(x));
        }
        self.problem(
            &at,
            format!("is {x}, must be {range}"),
            format!(
                "set a value in that range ({} is the default)",
                default_of(key)
            ),
        );
        None
    }

    /// `v` as a whole number in `[min, max]`.
    pub(super) fn integer(
        &mut self,
        v: &Value,
        at: &[String],
        min: u64,
        max: u64,
        unit: &str,
    ) -> Option<u64> {
        match v.as_u64() {
            Some(n) if (min..=max).contains(&n) => Some(n),
            _ => {
                let got = match v {
                    Value::Number(n) => n.to_string(),
                    other => kind(other).to_owned(),
                };
                let key = at.last().map(String::as_str).unwrap_or("");
                self.problem(
                    at,
                    format!("is {got}, must be a whole number from {min} to {max} {unit}"),
                    format!(
                        "set a whole number in that range ({} is the default)",
                        default_of(key)
                    ),
                );
                None
            }
        }
    }
}

/// The default of a setting, for fixes.
fn default_of(key: &str) -> &'static str {
    match key {
        "failureThreshold" => "3",
        "cooldownSeconds" | "probeTimeoutSeconds" | "timeoutSeconds" | "connectTimeoutSeconds" => {
            "30"
        }
        "pingTimeoutSeconds" => "5",
        "initialBackoffSeconds" => "0.5",
        "maxBackoffSeconds" => "30",
        "maxMessageBytes" => "4194304",
        "shards" => "3",
        _ => "the documented value",
    }
}
