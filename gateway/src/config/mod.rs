//! The config file: the `mcpServers` map MCP hosts already use, plus a `health` section.
//!
//! ```json
//! {
//!   "mcpServers": {
//!     "files":  {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},
//!     "remote": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer …"}}
//!   },
//!   "health": {
//!     "failureThreshold": 3, "cooldownSeconds": 30, "timeoutSeconds": 30,
//!     "servers": {"files": {"timeoutSeconds": 10, "tools": {"search_files": {"timeoutSeconds": 60}}}}
//!   }
//! }
//! ```
//!
//! Everything is checked before anything starts, and every problem is reported at once with
//! the file, the line, the key's path, the accepted range and a fix (`docs/gateway.md` lists the
//! keys). Keys the gateway does not know are errors inside `health` (a typo there would
//! silently keep a default) and warnings elsewhere: host config files carry settings of their
//! own (`alwaysAllow`, `disabled`, …) that must not stop a copy-paste.

mod locate;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};
use tool_health::mcp::SchemaCheck;
use tool_health::CircuitBreakerConfig;

use crate::names;
use locate::Index;

/// The largest config file read (a host's config is a few kilobytes).
const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// The default of `health.maxMessageBytes`: the largest JSON-RPC message accepted from a host.
pub(crate) const DEFAULT_MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// A checked config.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    /// The upstream servers, by name (disabled ones left out).
    pub(crate) servers: Vec<ServerConfig>,
    /// The gateway-wide settings.
    pub(crate) health: Health,
    /// What was ignored, each with its line.
    pub(crate) warnings: Vec<String>,
}

/// One upstream server.
#[derive(Debug, Clone)]
pub(crate) struct ServerConfig {
    /// Its name in `mcpServers`: the prefix of its tools, the first part of their keys.
    pub(crate) name: String,
    /// How to reach it.
    pub(crate) launch: Launch,
    /// Its settings (the `health` defaults with its own on top).
    pub(crate) settings: Settings,
    /// Settings of single tools (the server's with the tool's on top), by the tool's own name.
    pub(crate) tools: BTreeMap<String, ToolSettings>,
}

/// How an upstream is reached.
#[derive(Clone)]
pub(crate) enum Launch {
    /// A child process speaking MCP over its stdin and stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
    },
    /// A streamable HTTP endpoint.
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
}

impl fmt::Debug for Launch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Environment values and header values are often credentials: never shown.
        match self {
            Self::Stdio {
                command, args, env, ..
            } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env", &env.keys().collect::<Vec<_>>())
                .finish_non_exhaustive(),
            Self::Http { url, headers } => f
                .debug_struct("Http")
                .field("url", &redact_url(url))
                .field(
                    "headers",
                    &headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
                )
                .finish(),
        }
    }
}

/// A URL without its user info (for logs).
pub(crate) fn redact_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_password(None);
            let _ = u.set_username("");
            u.to_string()
        }
        Err(_) => "<unparsable URL>".to_owned(),
    }
}

/// What a server (and each of its tools, unless overridden) runs with.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Settings {
    /// Threshold, cooldown and probe lease of the server's breaker and its tools'.
    pub(crate) breaker: CircuitBreakerConfig,
    /// How long a call may take.
    pub(crate) timeout: Duration,
    /// How long a `ping` may take.
    pub(crate) ping_timeout: Duration,
    /// How long connecting (process start and handshake) may take.
    pub(crate) connect_timeout: Duration,
    /// The argument check.
    pub(crate) schema_check: SchemaCheck,
    /// Restarts of a stdio server that exited.
    pub(crate) restart: Restart,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            breaker: CircuitBreakerConfig::default(),
            timeout: tool_health::mcp::DEFAULT_TIMEOUT,
            ping_timeout: tool_health::mcp::DEFAULT_PING_TIMEOUT,
            connect_timeout: Duration::from_secs(30),
            schema_check: SchemaCheck::default(),
            restart: Restart::default(),
        }
    }
}

/// Settings of one tool.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolSettings {
    pub(crate) breaker: CircuitBreakerConfig,
    pub(crate) timeout: Duration,
}

/// The backoff between restarts of a server that exited: `initial`, doubling up to `max`; back
/// to `initial` once a start has stayed up for a minute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Restart {
    pub(crate) initial: Duration,
    pub(crate) max: Duration,
}

impl Default for Restart {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(500),
            max: Duration::from_secs(30),
        }
    }
}

/// The gateway-wide part of `health`.
#[derive(Debug, Clone)]
pub(crate) struct Health {
    /// The defaults every server starts from.
    pub(crate) defaults: Settings,
    /// The largest message accepted from a host, in bytes.
    pub(crate) max_message_bytes: usize,
    /// Fleet mode: decisions shared with other replicas.
    pub(crate) fleet: Option<Fleet>,
}

/// `health.fleet`.
#[derive(Clone)]
pub(crate) struct Fleet {
    /// The store's URL (may hold a password: never logged).
    pub(crate) url: String,
    /// The key prefix (one fleet per prefix).
    pub(crate) prefix: Option<String>,
}

impl fmt::Debug for Fleet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fleet")
            .field("url", &redact_url(&self.url))
            .field("prefix", &self.prefix)
            .finish()
    }
}

/// One problem in a config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Problem {
    /// The key's path, as written in messages (`health.servers.py.cooldownSeconds`).
    pub(crate) path: String,
    /// Its line, when known.
    pub(crate) line: Option<usize>,
    /// What is wrong, with the accepted range.
    pub(crate) message: String,
    /// What to do about it.
    pub(crate) fix: String,
}

/// Why a config could not be used: every problem found, or a file that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConfigError {
    pub(crate) file: String,
    pub(crate) problems: Vec<Problem>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.problems.len();
        writeln!(
            f,
            "{n} problem{} in the config file {}:",
            if n == 1 { "" } else { "s" },
            self.file
        )?;
        for p in &self.problems {
            match p.line {
                Some(line) => write!(f, "  {}:{line}: ", self.file)?,
                None => write!(f, "  {}: ", self.file)?,
            }
            if p.path.is_empty() {
                writeln!(f, "{}", p.message)?;
            } else {
                writeln!(f, "`{}` {}", p.path, p.message)?;
            }
            writeln!(f, "    fix: {}", p.fix)?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

/// Reads and checks the config file at `path`.
pub(crate) fn load(path: &Path) -> Result<Config, ConfigError> {
    let file = path.display().to_string();
    let fail = |message: String, fix: &str| ConfigError {
        file: file.clone(),
        problems: vec![Problem {
            path: String::new(),
            line: None,
            message,
            fix: fix.to_owned(),
        }],
    };
    let meta = std::fs::metadata(path).map_err(|e| {
        fail(
            format!("cannot be read: {e}"),
            "pass the path of an existing JSON file with `--config FILE`",
        )
    })?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(fail(
            format!(
                "is {} bytes, more than the {MAX_FILE_BYTES} a config may be",
                meta.len()
            ),
            "pass the MCP config file itself (a few kilobytes)",
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| {
        fail(
            format!("cannot be read as UTF-8 text: {e}"),
            "save the file as UTF-8 JSON",
        )
    })?;
    parse(&file, &text)
}

/// Checks the config `text` (named `file` in messages).
pub(crate) fn parse(file: &str, text: &str) -> Result<Config, ConfigError> {
    let value: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            let near = text.lines().nth(e.line().saturating_sub(1)).unwrap_or("");
            let fix = if near.trim_start().starts_with("//") || near.contains("/*") {
                "remove the comment: JSON has no comments".to_owned()
            } else if e.is_eof() {
                "the file ends too early: close every `{` and `[` and quote".to_owned()
            } else {
                "check this line and the one before it for a missing `,`, `:` or quote, or a \
                 trailing comma"
                    .to_owned()
            };
            return Err(ConfigError {
                file: file.to_owned(),
                problems: vec![Problem {
                    path: String::new(),
                    line: Some(e.line()),
                    message: format!("is not valid JSON: {e}"),
                    fix,
                }],
            });
        }
    };
    let index = Index::build(text);
    let mut c = Checker {
        index: &index,
        problems: Vec::new(),
        warnings: Vec::new(),
        file,
    };
    for (path, line) in &index.duplicates {
        c.problems.push(Problem {
            path: dotted(path),
            line: Some(*line),
            message: "appears twice in the same object (JSON keeps only the last one)".into(),
            fix: "remove one of the two".into(),
        });
    }
    let config = c.config(&value);
    if c.problems.is_empty() {
        let mut config = config.expect("no problems, a config");
        config.warnings = c.warnings;
        Ok(config)
    } else {
        c.problems
            .sort_by_key(|p| (p.line.unwrap_or(usize::MAX), p.path.clone()));
        Err(ConfigError {
            file: file.to_owned(),
            problems: c.problems,
        })
    }
}

/// A path as messages write it: `a.b."c d".0`.
fn dotted(path: &[String]) -> String {
    path.iter()
        .map(|p| {
            if !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                p.clone()
            } else {
                serde_json::to_string(&names::printable(p, 80)).unwrap_or_default()
            }
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// The kind of a JSON value, for "got …" in messages (a value that may be a secret is never
/// echoed).
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Keys of `health` and of `health.servers.NAME` (and which of them a tool may set).
const HEALTH_KEYS: &[&str] = &[
    "failureThreshold",
    "cooldownSeconds",
    "probeTimeoutSeconds",
    "timeoutSeconds",
    "pingTimeoutSeconds",
    "connectTimeoutSeconds",
    "schemaCheck",
    "restart",
    "maxMessageBytes",
    "servers",
    "fleet",
];
const SERVER_KEYS: &[&str] = &[
    "failureThreshold",
    "cooldownSeconds",
    "probeTimeoutSeconds",
    "timeoutSeconds",
    "pingTimeoutSeconds",
    "connectTimeoutSeconds",
    "schemaCheck",
    "restart",
    "tools",
];
const TOOL_KEYS: &[&str] = &[
    "failureThreshold",
    "cooldownSeconds",
    "probeTimeoutSeconds",
    "timeoutSeconds",
];
/// Headers the streamable HTTP transport sets itself.
const RESERVED_HEADERS: &[&str] = &[
    "Accept",
    "Mcp-Session-Id",
    "MCP-Protocol-Version",
    "Last-Event-Id",
];
const ENTRY_KEYS: &[&str] = &[
    "command", "args", "env", "cwd", "url", "headers", "type", "disabled",
];

struct Checker<'a> {
    index: &'a Index,
    problems: Vec<Problem>,
    warnings: Vec<String>,
    file: &'a str,
}

fn p(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| (*s).to_owned()).collect()
}

fn child(path: &[String], key: &str) -> Vec<String> {
    let mut p = path.to_vec();
    p.push(key.to_owned());
    p
}

impl Checker<'_> {
    fn problem(&mut self, path: &[String], message: impl Into<String>, fix: impl Into<String>) {
        self.problems.push(Problem {
            path: dotted(path),
            line: self.index.nearest_line(path),
            message: message.into(),
            fix: fix.into(),
        });
    }

    fn warn(&mut self, path: &[String], message: &str) {
        let at = match self.index.nearest_line(path) {
            Some(line) => format!("{}:{line}", self.file),
            None => self.file.to_owned(),
        };
        self.warnings
            .push(format!("{at}: `{}` {message}", dotted(path)));
    }

    /// The object at `path`, or a problem.
    fn object<'v>(
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
    fn unknown_keys(
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

    fn config(&mut self, v: &Value) -> Option<Config> {
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
            self.problem(
                &[],
                "has no `mcpServers` object",
                "add `\"mcpServers\": {\"name\": {\"command\": \"…\", \"args\": […]}}` with the \
                 servers to put behind the gateway",
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
        if servers.is_empty()
            && entries.values().all(|e| !is_disabled(e))
            && self.problems.is_empty()
        {
            self.problem(
                &path,
                "is empty: a gateway with no server serves nothing",
                "add at least one server: `\"name\": {\"command\": \"…\"}` or `{\"url\": \"…\"}`",
            );
        }
        Some(Config {
            servers,
            health: Health {
                defaults,
                max_message_bytes,
                fleet,
            },
            warnings: Vec::new(),
        })
    }

    /// One `mcpServers` entry (`None`: a problem, or disabled).
    fn entry(&mut self, name: &str, v: &Value, at: &[String]) -> Option<ServerConfig> {
        let m = self.object(
            v,
            at,
            "a server is `{\"command\": \"…\", \"args\": […]}` or `{\"url\": \"…\"}`",
        )?;
        for key in m.keys() {
            if ENTRY_KEYS.contains(&key.as_str()) {
                continue;
            }
            let k = child(at, key);
            if key == "timeout" {
                self.warn(
                    &k,
                    &format!(
                        "is ignored: the gateway's timeouts are `health.servers.{name}.timeoutSeconds`"
                    ),
                );
            } else {
                let hint = suggestion(key, ENTRY_KEYS)
                    .map(|s| format!("did you mean `{s}`? "))
                    .unwrap_or_default();
                self.warn(
                    &k,
                    &format!("is ignored ({hint}not a key the gateway uses)"),
                );
            }
        }
        if let Some(d) = m.get("disabled") {
            match d {
                Value::Bool(true) => return None,
                Value::Bool(false) => {}
                other => {
                    self.problem(
                        &child(at, "disabled"),
                        format!("must be true or false, got {}", kind(other)),
                        "write `\"disabled\": true` to leave the server out",
                    );
                    return None;
                }
            }
        }
        let ty = match m.get("type") {
            None => None,
            Some(Value::String(t)) => Some(t.as_str()),
            Some(other) => {
                self.problem(
                    &child(at, "type"),
                    format!("must be a string, got {}", kind(other)),
                    "`\"stdio\"` or `\"http\"`, or leave it out",
                );
                return None;
            }
        };
        let launch = match (m.get("command"), m.get("url")) {
            (Some(_), Some(_)) => {
                self.problem(
                    at,
                    "has both `command` and `url`",
                    "keep `command` (a local process) or `url` (a streamable HTTP endpoint), not both",
                );
                return None;
            }
            (None, None) => {
                self.problem(
                    at,
                    "has neither `command` nor `url`",
                    "add `\"command\": \"…\"` (with `args`) for a local server, or `\"url\": \"…\"` \
                     for a streamable HTTP one",
                );
                return None;
            }
            (Some(command), None) => {
                if let Some(t) = ty {
                    if t != "stdio" {
                        self.problem(
                            &child(at, "type"),
                            format!("is {t:?}, but the server has a `command` (stdio)"),
                            "write `\"type\": \"stdio\"`, or leave `type` out",
                        );
                        return None;
                    }
                }
                self.stdio(m, command, at)?
            }
            (None, Some(url)) => {
                match ty {
                    None
                    | Some("http" | "streamable-http" | "streamableHttp" | "streamable_http") => {}
                    Some("sse") => {
                        self.problem(
                            &child(at, "type"),
                            "is \"sse\": the old HTTP+SSE transport is not supported (the \
                             gateway's client speaks streamable HTTP)",
                            "use the server's streamable HTTP endpoint (often `…/mcp`) and \
                             `\"type\": \"http\"`",
                        );
                        return None;
                    }
                    Some(t) => {
                        self.problem(
                            &child(at, "type"),
                            format!(
                                "is {:?}, not a transport the gateway knows",
                                names::printable(t, 40)
                            ),
                            "`\"http\"` for a `url`, `\"stdio\"` for a `command`",
                        );
                        return None;
                    }
                }
                self.http(m, url, at)?
            }
        };
        Some(ServerConfig {
            name: name.to_owned(),
            launch,
            settings: Settings::default(),
            tools: BTreeMap::new(),
        })
    }

    fn string_field(&mut self, v: &Value, path: &[String], fix: &str) -> Option<String> {
        match v {
            Value::String(s) => Some(s.clone()),
            other => {
                self.problem(path, format!("must be a string, got {}", kind(other)), fix);
                None
            }
        }
    }

    fn stdio(&mut self, m: &Map<String, Value>, command: &Value, at: &[String]) -> Option<Launch> {
        let cpath = child(at, "command");
        let command = self.string_field(command, &cpath, "the program to start, e.g. `\"npx\"`")?;
        if command.trim().is_empty() || command.contains('\0') {
            self.problem(
                &cpath,
                "is empty",
                "name the program to start, e.g. `\"npx\"`",
            );
            return None;
        }
        let mut ok = true;
        let mut args = Vec::new();
        if let Some(a) = m.get("args") {
            let apath = child(at, "args");
            match a {
                Value::Array(items) => {
                    for (i, item) in items.iter().enumerate() {
                        match item {
                            Value::String(s) if !s.contains('\0') => args.push(s.clone()),
                            Value::String(_) => {
                                ok = false;
                                self.problem(
                                    &child(&apath, &i.to_string()),
                                    "contains a NUL byte",
                                    "remove it",
                                );
                            }
                            other => {
                                ok = false;
                                self.problem(
                                    &child(&apath, &i.to_string()),
                                    format!("must be a string, got {}", kind(other)),
                                    "quote it: every argument is a string (`\"8080\"`, not `8080`)",
                                );
                            }
                        }
                    }
                }
                other => {
                    ok = false;
                    self.problem(
                        &apath,
                        format!("must be an array of strings, got {}", kind(other)),
                        "write the arguments as `[\"-y\", \"package\"]`",
                    );
                }
            }
        }
        let mut env = BTreeMap::new();
        if let Some(e) = m.get("env") {
            let epath = child(at, "env");
            if let Some(map) = self.object(e, &epath, "write `\"env\": {\"NAME\": \"value\"}`") {
                for (k, v) in map {
                    let kpath = child(&epath, k);
                    if k.is_empty() || k.contains('=') || k.contains('\0') {
                        ok = false;
                        self.problem(
                            &kpath,
                            "is not a usable variable name",
                            "a name without `=` or NUL, e.g. `API_KEY`",
                        );
                        continue;
                    }
                    match v {
                        Value::String(s) if !s.contains('\0') => {
                            env.insert(k.clone(), s.clone());
                        }
                        other => {
                            ok = false;
                            self.problem(
                                &kpath,
                                format!(
                                    "must be a string, got {}",
                                    if other.is_string() {
                                        "a string with a NUL byte"
                                    } else {
                                        kind(other)
                                    }
                                ),
                                "quote the value: environment values are strings",
                            );
                        }
                    }
                }
            } else {
                ok = false;
            }
        }
        let mut cwd = None;
        if let Some(d) = m.get("cwd") {
            match self.string_field(d, &child(at, "cwd"), "a directory path") {
                Some(d) => cwd = Some(PathBuf::from(d)),
                None => ok = false,
            }
        }
        for key in ["url", "headers"] {
            if m.contains_key(key) {
                self.warn(
                    &child(at, key),
                    "is ignored: the server is started with `command`",
                );
            }
        }
        ok.then_some(Launch::Stdio {
            command,
            args,
            env,
            cwd,
        })
    }

    fn http(&mut self, m: &Map<String, Value>, url: &Value, at: &[String]) -> Option<Launch> {
        let upath = child(at, "url");
        let url = self.string_field(
            url,
            &upath,
            "the server's streamable HTTP endpoint, e.g. `\"http://127.0.0.1:8000/mcp\"`",
        )?;
        match reqwest::Url::parse(&url) {
            Ok(u) if (u.scheme() == "http" || u.scheme() == "https") && u.host().is_some() => {}
            Ok(u) => {
                self.problem(
                    &upath,
                    format!(
                        "has the scheme `{}`; only http and https are supported",
                        names::printable(u.scheme(), 20)
                    ),
                    "write the endpoint as `http://host:port/path` or `https://…`",
                );
                return None;
            }
            Err(e) => {
                self.problem(
                    &upath,
                    format!("is not a URL: {e}"),
                    "write the endpoint as `http://host:port/path` or `https://…`",
                );
                return None;
            }
        }
        let mut headers = Vec::new();
        let mut ok = true;
        if let Some(h) = m.get("headers") {
            let hpath = child(at, "headers");
            if let Some(map) = self.object(
                h,
                &hpath,
                "write `\"headers\": {\"Authorization\": \"Bearer …\"}`",
            ) {
                for (k, v) in map {
                    let kpath = child(&hpath, k);
                    if http::HeaderName::from_bytes(k.as_bytes()).is_err() {
                        ok = false;
                        self.problem(
                            &kpath,
                            "is not a valid HTTP header name",
                            "use letters, digits and `-`, e.g. `X-Api-Key`",
                        );
                        continue;
                    }
                    if RESERVED_HEADERS.iter().any(|r| k.eq_ignore_ascii_case(r)) {
                        ok = false;
                        self.problem(
                            &kpath,
                            "is set by the MCP transport itself",
                            format!("remove it (the transport sets {})", list(RESERVED_HEADERS)),
                        );
                        continue;
                    }
                    match v {
                        // The value is never echoed: it is often a credential.
                        Value::String(s) if http::HeaderValue::from_str(s).is_ok() => {
                            headers.push((k.clone(), s.clone()));
                        }
                        Value::String(_) => {
                            ok = false;
                            self.problem(
                                &kpath,
                                "has a value that is not a valid HTTP header value (a control \
                                 character or a line break)",
                                "remove the control characters from the value",
                            );
                        }
                        other => {
                            ok = false;
                            self.problem(
                                &kpath,
                                format!("must be a string, got {}", kind(other)),
                                "quote the value",
                            );
                        }
                    }
                }
            } else {
                ok = false;
            }
        }
        for key in ["args", "env", "cwd"] {
            if m.contains_key(key) {
                self.warn(
                    &child(at, key),
                    "is ignored: the server is reached at `url`",
                );
            }
        }
        ok.then_some(Launch::Http { url, headers })
    }

    /// `health`: the defaults, `maxMessageBytes`, `fleet`, and `servers` (returned for later).
    #[allow(clippy::type_complexity)]
    fn health(
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

    fn fleet(&mut self, v: &Value, path: &[String]) -> Option<Fleet> {
        let m = self.object(
            v,
            path,
            "`fleet` is `{\"url\": \"redis://host:6379\"}` (a cluster: `redis-cluster://host:6379`)",
        )?;
        self.unknown_keys(m, path, &["url", "prefix"], true);
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
        Some(Fleet { url, prefix })
    }

    /// `health.servers.NAME`: its settings over `defaults`, and its tools'.
    fn server_settings(
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
    fn settings(&mut self, m: &Map<String, Value>, path: &[String], base: &Settings) -> Settings {
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
    fn seconds(
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
    fn integer(&mut self, v: &Value, at: &[String], min: u64, max: u64, unit: &str) -> Option<u64> {
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

fn is_disabled(v: &Value) -> bool {
    v.get("disabled") == Some(&Value::Bool(true))
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
        _ => "the documented value",
    }
}

fn list(items: &[&str]) -> String {
    items
        .iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The known key closest to `key` (case-insensitive equal, or within a small edit distance).
fn suggestion<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    let lower = key.to_ascii_lowercase();
    known
        .iter()
        .map(|k| (edit_distance(&lower, &k.to_ascii_lowercase()), *k))
        .filter(|(d, k)| *d <= 3.min(k.len() / 2) || lower == k.to_ascii_lowercase())
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
        .or_else(|| {
            // `cooldown` for `cooldownSeconds`.
            known
                .iter()
                .find(|k| k.to_ascii_lowercase().starts_with(&lower) && lower.len() >= 4)
                .copied()
        })
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests;
