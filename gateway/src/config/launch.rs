//! One `mcpServers` entry: a child process (`command`, `args`, `env`, `cwd`) or a streamable
//! HTTP endpoint (`url`, `headers`); `disabled` and `type` as hosts write them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::check::{child, Checker};
use super::words::{kind, list, suggestion};
use super::{Launch, ServerConfig, Settings};
use crate::names;

/// Headers the streamable HTTP transport sets itself.
pub(super) const RESERVED_HEADERS: &[&str] = &[
    "Accept",
    "Mcp-Session-Id",
    "MCP-Protocol-Version",
    "Last-Event-Id",
];
pub(super) const ENTRY_KEYS: &[&str] = &[
    "command", "args", "env", "cwd", "url", "headers", "type", "disabled",
];

impl Checker<'_> {
    /// Whether this machine has what a stdio entry needs: its `cwd` a directory, its `command`
    /// a program (a path, or a name on the `PATH` the server gets: its own `env.PATH`, else
    /// the gateway's). What is missing goes to [`Checker::absent`]: problems under `--check`,
    /// warnings at start (the other servers still serve).
    fn machine_has(
        &mut self,
        command: &str,
        cwd: Option<&Path>,
        path_env: Option<&String>,
        at: &[String],
    ) {
        if let Some(dir) = cwd {
            if !dir.is_dir() {
                self.absent(
                    &child(at, "cwd"),
                    format!("is {}, which is not a directory here", dir.display()),
                    "create the directory, or give the path of one that exists",
                );
                return;
            }
        }
        if command.contains('/') {
            let program = match cwd {
                Some(dir) if Path::new(command).is_relative() => dir.join(command),
                _ => PathBuf::from(command),
            };
            if !is_program(&program) {
                self.absent(
                    &child(at, "command"),
                    format!("is {}, which is not a program here", program.display()),
                    "give the path of an executable file",
                );
            }
            return;
        }
        let search = path_env
            .cloned()
            .or_else(|| std::env::var("PATH").ok())
            .unwrap_or_default();
        if !std::env::split_paths(&search).any(|dir| is_program(&dir.join(command))) {
            self.absent(
                &child(at, "command"),
                format!(
                    "is `{}`, which is not on the PATH the server gets",
                    names::printable(command, 80)
                ),
                "install it, or give its full path (`command -v NAME` prints it where it works)",
            );
        }
    }

    /// One `mcpServers` entry (`None`: a problem, or disabled).
    pub(super) fn entry(&mut self, name: &str, v: &Value, at: &[String]) -> Option<ServerConfig> {
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

    pub(super) fn stdio(
        &mut self,
        m: &Map<String, Value>,
        command: &Value,
        at: &[String],
    ) -> Option<Launch> {
        let cpath = child(at, "command");
        let command = self.string_field(command, &cpath, "the program to start, e.g. `\"npx\"`")?;
        let command = self.expanded(&command, &cpath)?;
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
                            Value::String(s) if !s.contains('\0') => {
                                match self.expanded(s, &child(&apath, &i.to_string())) {
                                    Some(s) => args.push(s),
                                    None => ok = false,
                                }
                            }
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
                        Value::String(s) if !s.contains('\0') => match self.expanded(s, &kpath) {
                            Some(s) => {
                                env.insert(k.clone(), s);
                            }
                            None => ok = false,
                        },
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
            let dpath = child(at, "cwd");
            match self
                .string_field(d, &dpath, "a directory path")
                .and_then(|d| self.expanded(&d, &dpath))
            {
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
        if ok {
            self.machine_has(&command, cwd.as_deref(), env.get("PATH"), at);
        }
        ok.then_some(Launch::Stdio {
            command,
            args,
            env,
            cwd,
        })
    }

    pub(super) fn http(
        &mut self,
        m: &Map<String, Value>,
        url: &Value,
        at: &[String],
    ) -> Option<Launch> {
        let upath = child(at, "url");
        let url = self.string_field(
            url,
            &upath,
            "the server's streamable HTTP endpoint, e.g. `\"http://127.0.0.1:8000/mcp\"`",
        )?;
        let url = self.expanded(&url, &upath)?;
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
                        Value::String(s) => match self.expanded(s, &kpath) {
                            Some(s) if http::HeaderValue::from_str(&s).is_ok() => {
                                headers.push((k.clone(), s));
                            }
                            Some(_) => {
                                ok = false;
                                self.problem(
                                    &kpath,
                                    "has a value that is not a valid HTTP header value (a \
                                     control character or a line break)",
                                    "remove the control characters from the value",
                                );
                            }
                            None => ok = false,
                        },
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
}

/// Whether `path` is a file this process could run.
fn is_program(path: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        meta.is_file() && meta.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    {
        meta.is_file()
    }
}
