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
//!
//! | file | concern |
//! |---|---|
//! | `mod.rs` | the checked config's types, `load` and `parse` |
//! | `check.rs` | the checker: problems and warnings with their lines, the file's top level |
//! | `diff.rs` | what a reload changes: servers added, removed, restarted, re-configured |
//! | `launch.rs` | one `mcpServers` entry: a command (stdio) or a URL (streamable HTTP) |
//! | `expand.rs` | `${VAR}` in an entry, from the gateway's environment |
//! | `settings.rs` | `health`: the settings, their ranges and defaults, per server and per tool |
//! | `problem.rs` | a problem, and the error that lists them |
//! | `words.rs` | how messages name paths and values, and "did you mean" |
//! | `redact.rs` | what of the config is a secret, kept out of logs and answers |
//! | `locate.rs` | each key's line |

mod check;
mod diff;
mod expand;
mod launch;
mod locate;
mod problem;
mod redact;
mod settings;
mod words;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use tool_health::mcp::SchemaCheck;
use tool_health::CircuitBreakerConfig;

use check::Checker;
pub(crate) use diff::Diff;
pub(crate) use expand::Env;
use locate::Index;
pub(crate) use problem::{ConfigError, Problem};
pub(crate) use redact::{redact_url, Secrets};
use words::dotted;

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
    /// What this machine lacks for a server to start: a `cwd` that is no directory, a
    /// `command` that is no program here. Problems for `--check` (exit 2); at start, warnings
    /// (the other servers still serve, and the server's `last_error` says why it does not).
    pub(crate) absent: Vec<Problem>,
}

/// One upstream server.
#[derive(Debug, Clone, PartialEq)]
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
#[derive(Clone, PartialEq, Eq)]
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
    /// A call of a read-only or idempotent tool that met the connection's end is made once
    /// more on the next connection (`retryOnReconnect`).
    pub(crate) retry_on_reconnect: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            breaker: CircuitBreakerConfig::default(),
            timeout: tool_health::mcp::DEFAULT_TIMEOUT,
            ping_timeout: tool_health::mcp::DEFAULT_PING_TIMEOUT,
            connect_timeout: Duration::from_secs(30),
            schema_check: SchemaCheck::default(),
            retry_on_reconnect: true,
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
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Fleet {
    /// The store's URL (may hold a password: never logged).
    pub(crate) url: String,
    /// The key prefix (one fleet per prefix).
    pub(crate) prefix: Option<String>,
    /// How many shards the fleet's keys are spread over (FLEET.md, "Cluster mode"); the
    /// library's default when absent. Every replica of a fleet must say the same.
    pub(crate) shards: Option<u16>,
}

impl fmt::Debug for Fleet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fleet")
            .field("url", &redact_url(&self.url))
            .field("prefix", &self.prefix)
            .field("shards", &self.shards)
            .finish()
    }
}

/// Reads and checks the config file at `path`.
pub(crate) fn load(path: &Path) -> Result<Config, ConfigError> {
    parse(&path.display().to_string(), &read(path)?)
}

/// Reads the config file at `path` (at most [`MAX_FILE_BYTES`], UTF-8), unchecked.
pub(crate) fn read(path: &Path) -> Result<String, ConfigError> {
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
    std::fs::read_to_string(path).map_err(|e| {
        fail(
            format!("cannot be read as UTF-8 text: {e}"),
            "save the file as UTF-8 JSON",
        )
    })
}

/// Checks the config `text` (named `file` in messages), `${VAR}` read from the process's
/// environment.
pub(crate) fn parse(file: &str, text: &str) -> Result<Config, ConfigError> {
    parse_with(file, text, &|name| std::env::var(name).ok())
}

/// Checks the config `text` (named `file` in messages), `${VAR}` read from `env`.
pub(crate) fn parse_with(file: &str, text: &str, env: Env<'_>) -> Result<Config, ConfigError> {
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
        absent: Vec::new(),
        file,
        env,
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
        config.absent = c.absent;
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

#[cfg(test)]
mod tests;
