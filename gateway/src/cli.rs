//! The command line.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

/// What `--help` prints.
pub(crate) const USAGE: &str = "\
tool-health-gateway: MCP servers behind circuit breakers, for any MCP host

usage: tool-health-gateway --config FILE [--listen ADDR] [--no-stdio]
                           [--control-token-file FILE] [--allow-host HOST]...
                           [--allow-origin ORIGIN]...
                           [--otlp-grpc ADDR] [--forward-traces URL] [--no-watch]
                           [--check]
       tool-health-gateway --healthcheck URL

  --config FILE              the MCP servers (`mcpServers`, as hosts write it) and a `health`
                             section (docs/gateway.md)
  --listen ADDR              also serve HTTP on ADDR (127.0.0.1 unless it says otherwise;
                             `8080` means 127.0.0.1:8080): MCP at /mcp, the API at /v1/tools,
                             the status page at /, agents' OTLP/HTTP traces at /v1/traces
  --no-stdio                 no MCP over stdin/stdout (with --listen: an HTTP-only gateway)
  --control-token-file FILE  turn the operator controls on, behind the token in FILE (or set
                             TOOL_HEALTH_GATEWAY_TOKEN); 16 to 256 visible ASCII characters
  --allow-host HOST          a Host every route accepts besides localhost, 127.0.0.1 and [::1]
                             (repeatable; `name` any port, `name:port` that one): needed when
                             clients reach a non-loopback --listen by name or address; `*`
                             accepts every Host (only where no browser reaches the port)
  --allow-origin ORIGIN      a web page's origin that may call the routes from a browser
                             besides the gateway's own pages (repeatable;
                             `https://app.example.com`, `http://localhost:*`)
  --otlp-grpc ADDR           also receive agents' traces over OTLP/gRPC on ADDR (as --listen:
                             127.0.0.1 unless it says otherwise; 4317 is OTLP's port)
  --forward-traces URL       forward every trace request received, unchanged, to this
                             OTLP/HTTP traces endpoint (http://collector:4318/v1/traces)
  --no-watch                 reload the config on SIGHUP only (by default also when the file
                             changes: written, replaced, or its symlink swapped)
  --check                    check the config and exit (0: valid)
  --healthcheck URL          GET a gateway's http://…/healthz and exit (0: it answered 200):
                             a health check for images without curl
  --version, --help

The log goes to stderr (TOOL_HEALTH_GATEWAY_LOG or RUST_LOG filter it); OTLP export is on when
OTEL_EXPORTER_OTLP_ENDPOINT is set.";

/// The parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Args {
    pub(crate) config: PathBuf,
    pub(crate) listen: Option<SocketAddr>,
    pub(crate) stdio: bool,
    pub(crate) token_file: Option<PathBuf>,
    pub(crate) allow_hosts: Vec<String>,
    /// `--allow-origin`: origins of pages that may call the HTTP routes.
    pub(crate) allow_origins: Vec<String>,
    pub(crate) check: bool,
    /// `--otlp-grpc`: where the OTLP/gRPC trace receiver listens.
    pub(crate) otlp_grpc: Option<SocketAddr>,
    /// `--forward-traces`: the next OTLP/HTTP traces endpoint.
    pub(crate) forward_traces: Option<String>,
    /// The config file is watched (a change reloads it); `--no-watch`: SIGHUP only.
    pub(crate) watch: bool,
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Command {
    Run(Args),
    Help,
    Version,
    /// `--healthcheck URL`: one GET of a gateway's `/healthz` (`healthcheck.rs`).
    Healthcheck(String),
}

/// `8080`, `:8080`, `localhost:8080`, `127.0.0.1:8080`, `[::1]:8080`, `0.0.0.0:8080`.
pub(crate) fn listen_addr(s: &str) -> Result<SocketAddr, String> {
    let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
    if let Ok(port) = s.trim_start_matches(':').parse::<u16>() {
        return Ok(SocketAddr::new(loopback, port));
    }
    if let Some(port) = s.strip_prefix("localhost:") {
        if let Ok(port) = port.parse::<u16>() {
            return Ok(SocketAddr::new(loopback, port));
        }
    }
    s.parse::<SocketAddr>().map_err(|_| {
        format!("--listen {s:?}: give an address and port, e.g. `127.0.0.1:8080` or `8080`")
    })
}

/// Parses the arguments after the program's name.
pub(crate) fn parse(args: impl IntoIterator<Item = String>) -> Result<Command, String> {
    let mut config = None;
    let mut listen = None;
    let mut stdio = true;
    let mut token_file = None;
    let mut allow_hosts = Vec::new();
    let mut allow_origins = Vec::new();
    let mut check = false;
    let mut otlp_grpc = None;
    let mut forward_traces = None;
    let mut watch = true;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_owned(), Some(v.to_owned())),
            _ => (arg.clone(), None),
        };
        let mut value = |name: &str| -> Result<String, String> {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{name} needs a value (see --help)"))
        };
        match flag.as_str() {
            "--config" | "-c" => config = Some(PathBuf::from(value("--config")?)),
            "--listen" => listen = Some(listen_addr(&value("--listen")?)?),
            "--no-stdio" => stdio = false,
            "--control-token-file" => {
                token_file = Some(PathBuf::from(value("--control-token-file")?))
            }
            "--allow-host" => allow_hosts.push(value("--allow-host")?),
            "--allow-origin" => allow_origins.push(value("--allow-origin")?),
            "--check" => check = true,
            "--no-watch" => watch = false,
            "--otlp-grpc" => {
                let v = value("--otlp-grpc")?;
                otlp_grpc = Some(listen_addr(&v).map_err(|e| e.replace("--listen", "--otlp-grpc"))?)
            }
            "--forward-traces" => {
                let url = value("--forward-traces")?;
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(format!(
                        "--forward-traces {url:?}: give the next collector's OTLP/HTTP traces URL, \
                         e.g. `http://127.0.0.1:4318/v1/traces`"
                    ));
                }
                forward_traces = Some(url);
            }
            "--help" | "-h" => return Ok(Command::Help),
            "--version" | "-V" => return Ok(Command::Version),
            "--healthcheck" => return Ok(Command::Healthcheck(value("--healthcheck")?)),
            other => return Err(format!("unknown argument {other:?} (see --help)")),
        }
    }
    let Some(config) = config else {
        return Err("--config FILE is required (see --help)".to_owned());
    };
    if !stdio && listen.is_none() && otlp_grpc.is_none() && !check {
        return Err("--no-stdio without --listen serves nothing: add --listen ADDR".to_owned());
    }
    if forward_traces.is_some() && listen.is_none() && otlp_grpc.is_none() {
        return Err(
            "--forward-traces forwards what the receiver gets: add --listen ADDR or --otlp-grpc ADDR"
                .to_owned(),
        );
    }
    Ok(Command::Run(Args {
        config,
        listen,
        stdio,
        token_file,
        allow_hosts,
        allow_origins,
        check,
        otlp_grpc,
        forward_traces,
        watch,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Result<Command, String> {
        parse(s.split_whitespace().map(str::to_owned))
    }

    #[test]
    fn the_command_line_is_read() {
        let Command::Run(a) =
            args("--config gw.json --listen 8080 --no-stdio --allow-host=gw.local --allow-origin http://localhost:*").unwrap()
        else {
            panic!()
        };
        assert_eq!(a.listen, Some("127.0.0.1:8080".parse().unwrap()));
        assert!(!a.stdio);
        assert!(a.watch);
        assert_eq!(a.allow_hosts, ["gw.local"]);
        assert_eq!(a.allow_origins, ["http://localhost:*"]);
        assert_eq!(
            listen_addr("localhost:9").unwrap(),
            "127.0.0.1:9".parse().unwrap()
        );
        assert_eq!(
            listen_addr("0.0.0.0:9").unwrap(),
            "0.0.0.0:9".parse().unwrap()
        );
        assert!(listen_addr("nowhere").is_err());
        assert!(args("--listen 8080").unwrap_err().contains("--config"));
        assert!(args("--config x --no-stdio")
            .unwrap_err()
            .contains("--listen"));
        assert!(args("--config x --bogus").unwrap_err().contains("--bogus"));
        assert_eq!(args("--help").unwrap(), Command::Help);
        assert_eq!(
            args("--healthcheck http://127.0.0.1:8080/healthz").unwrap(),
            Command::Healthcheck("http://127.0.0.1:8080/healthz".into())
        );
        assert!(args("--healthcheck").unwrap_err().contains("--healthcheck"));
        let Command::Run(a) =
            args("--config x --no-stdio --otlp-grpc 4317 --forward-traces http://c:4318/v1/traces")
                .unwrap()
        else {
            panic!()
        };
        assert_eq!(a.otlp_grpc, Some("127.0.0.1:4317".parse().unwrap()));
        assert_eq!(a.forward_traces.as_deref(), Some("http://c:4318/v1/traces"));
        let Command::Run(a) = args("--config x --no-watch").unwrap() else {
            panic!()
        };
        assert!(!a.watch);
        assert!(args("--config x --otlp-grpc nowhere")
            .unwrap_err()
            .contains("--otlp-grpc"));
        assert!(args("--config x --listen 1 --forward-traces c:4318")
            .unwrap_err()
            .contains("OTLP/HTTP traces URL"));
        assert!(args("--config x --forward-traces http://c/v1/traces")
            .unwrap_err()
            .contains("--listen"));
    }
}
