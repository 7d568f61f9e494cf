//! `tool-health-gateway`: the MCP servers of a host's config behind tool-health's circuit
//! breakers, served as one MCP server — over stdio (a host launches the gateway as its only
//! server) and, with `--listen`, over streamable HTTP with a JSON API and the status page.
//!
//! The gateway holds no breaking logic of its own: every `tools/call` goes through the
//! library's [`ToolHealthClient`](tool_health::mcp::ToolHealthClient) (schema check, server and
//! tool breakers, timeout, span, soft refusals), `tools/list` is its `list_tools` (without what
//! refuses now), and the hosts' `notifications/tools/list_changed` are its change subscription.
//! What the gateway adds is wiring: the config, the supervisors that keep upstreams running,
//! the names hosts see, and the transports. `docs/gateway.md` is the guide.
//!
//! | module | concern |
//! |---|---|
//! | `cli` | the command line |
//! | `config` | the config file: `mcpServers` + `health`, checked with lines and fixes |
//! | `names` | the rule for the names hosts see: `{server}__{tool}` |
//! | `notify` | the hosts to tell when the tool list changes |
//! | `progress` | where an upstream's progress notifications go: the host that asked |
//! | `served` | the hosts' spans of the calls served (counted once by the receiver) |
//! | `token` | the operator-control token |
//! | `probes` | the probes agents hold through the API (`claim` → `report`) |
//! | `upstream` | one client per upstream server, its supervisor (restarts with backoff), the set of them |
//! | `gateway` | the assembled state |
//! | `server` | the MCP server side: the handler, the stdio transport |
//! | `http` | `--listen`: `/mcp`, the `/v1` API, controls, the status router, behind one guard |
//! | `telemetry` | the log (stderr, secrets masked) and OTLP export |
//! | `signals` | SIGTERM and SIGINT stop it gracefully, SIGHUP reloads |
//! | `reload` | the config reloaded on SIGHUP and when its file changes |
//! | `reloads` | how many reloads there were, how the last one went (for the API) |
//! | `healthcheck` | `--healthcheck URL`: the container image's health check |
//!
//! Dependencies point one way (`scripts/check_layers.py` checks it): the transports (`server`,
//! `http`) and `reload` hold the assembled `gateway`, which holds the `upstream`s, which tell
//! `notify`.
//!
//! (The OTLP receiver of issue 23 is the library's `tool_health::receiver`, mounted at
//! `/v1/traces`.)

mod cli;
mod config;
mod gateway;
mod healthcheck;
mod http;
mod names;
mod notify;
mod probes;
mod progress;
mod relay;
mod reload;
mod reloads;
mod served;
mod server;
mod signals;
mod telemetry;
mod token;
mod upstream;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceExt;
use tool_health::web::HttpGuard;

use crate::gateway::Gateway;
use crate::server::stdio::StdioTransport;
use crate::server::GatewayServer;
use crate::signals::Signals;
use crate::token::Token;

/// How long stopping may take (servers killed, the last metrics flushed).
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs the gateway with the command line `args` (the program's name first, as
/// `std::env::args` gives it). Exit status: 0 when it stopped normally (the host closed stdin
/// after a session, or SIGTERM or SIGINT), 2 for a usage or config error, 1 when it could not
/// serve.
pub fn run(args: impl IntoIterator<Item = String>) -> ExitCode {
    let args = match cli::parse(args.into_iter().skip(1)) {
        Ok(cli::Command::Run(a)) => a,
        Ok(cli::Command::Help) => {
            println!("{}", cli::USAGE);
            return ExitCode::SUCCESS;
        }
        Ok(cli::Command::Version) => {
            println!("tool-health-gateway {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Ok(cli::Command::Healthcheck(url)) => return healthcheck::run(&url),
        Err(e) => {
            eprintln!("tool-health-gateway: {e}");
            return ExitCode::from(2);
        }
    };
    let config = match config::load(&args.config) {
        Ok(c) => c,
        Err(e) => {
            eprint!("tool-health-gateway: {e}");
            return ExitCode::from(2);
        }
    };
    for w in &config.warnings {
        eprintln!("tool-health-gateway: warning: {w}");
    }
    let token = match read_token(&args) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("tool-health-gateway: {e}");
            return ExitCode::from(2);
        }
    };
    let guard = match http_guard(&args) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("tool-health-gateway: {e}");
            return ExitCode::from(2);
        }
    };
    if args.check && !config.absent.is_empty() {
        // What a server needs and this machine lacks fails the check.
        eprint!(
            "tool-health-gateway: {}",
            config::ConfigError {
                file: args.config.display().to_string(),
                problems: config.absent.clone(),
            }
        );
        return ExitCode::from(2);
    }
    for p in &config.absent {
        eprintln!(
            "tool-health-gateway: warning: {} (fix: {}); the other servers start",
            p.at(&args.config.display().to_string()),
            p.fix
        );
    }
    if args.check {
        eprintln!(
            "tool-health-gateway: {} is valid ({} server{})",
            args.config.display(),
            config.servers.len(),
            if config.servers.len() == 1 { "" } else { "s" }
        );
        return ExitCode::SUCCESS;
    }
    // rmcp's HTTP client and the OTLP exporter speak TLS through rustls: the pure-Rust provider
    // unless the process has one (no C toolchain, no cmake).
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        let _ = rustls_graviola::default_provider().install_default();
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("tool-health-gateway: no tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(serve(args, config, token, guard));
    runtime.shutdown_timeout(Duration::from_secs(1));
    code
}

/// Who may call the HTTP routes: the loopback names, `--allow-host`, `--allow-origin`.
fn http_guard(args: &cli::Args) -> Result<HttpGuard, String> {
    let mut b = HttpGuard::builder();
    for h in &args.allow_hosts {
        // `*`: every Host (a cluster whose probes and scrapers use the pod's address).
        b = if h == "*" {
            b.allow_any_host()
        } else {
            b.allow_host(h.clone())
        };
    }
    for o in &args.allow_origins {
        b = b.allow_origin(o.clone());
    }
    b.build().map_err(|e| {
        let flag = if e.setting == "allow_host" {
            "--allow-host"
        } else {
            "--allow-origin"
        };
        format!("{flag} {:?}: expected {}", e.value, e.expected)
    })
}

/// The control token from `--control-token-file` or `TOOL_HEALTH_GATEWAY_TOKEN`.
fn read_token(args: &cli::Args) -> Result<Option<Token>, String> {
    let text = match &args.token_file {
        Some(path) => Some(std::fs::read_to_string(path).map_err(|e| {
            format!(
                "--control-token-file {}: cannot be read: {e}",
                path.display()
            )
        })?),
        None => std::env::var("TOOL_HEALTH_GATEWAY_TOKEN")
            .ok()
            .filter(|t| !t.is_empty()),
    };
    text.map(|t| {
        let first = t.lines().next().unwrap_or("").trim_end().to_owned();
        Token::new(&first)
            .map_err(|e| format!("{e} (--control-token-file / TOOL_HEALTH_GATEWAY_TOKEN)"))
    })
    .transpose()
}

/// A fatal error, said once on stderr (the log may be filtered: this is not).
fn fatal(message: &str) -> ExitCode {
    eprintln!("tool-health-gateway: {message}");
    ExitCode::FAILURE
}

async fn serve(
    args: cli::Args,
    config: config::Config,
    token: Option<Token>,
    guard: HttpGuard,
) -> ExitCode {
    // First: a signal from now on stops the gateway gracefully.
    let mut signals = Signals::install();
    let registry = gateway::registry(&config);
    let secrets = Arc::new(config::Secrets::of(&config));
    let otlp = match telemetry::init(&registry, &secrets) {
        Ok(g) => g,
        Err(e) => return fatal(&e),
    };
    let meter = otlp.as_ref().map(|g| {
        use opentelemetry::metrics::MeterProvider as _;
        g.meter_provider().meter(tool_health::otlp::METER_SCOPE)
    });
    let gw = match Gateway::start(&config, registry, token, guard, meter.as_ref(), &secrets) {
        Ok(gw) => gw,
        Err(e) => return fatal(&e),
    };
    // From now on a SIGHUP or a change of the file reloads the config.
    gw.keep(reload::spawn(
        &gw,
        args.config.clone(),
        config.clone(),
        signals.hangups(),
        args.watch,
    ));
    tracing::info!(
        servers = config.servers.len(),
        "tool-health-gateway {} with {} MCP server{}: {}",
        env!("CARGO_PKG_VERSION"),
        config.servers.len(),
        if config.servers.len() == 1 { "" } else { "s" },
        config
            .servers
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    // Agents' traces (issue 23): OTLP/HTTP at /v1/traces with --listen, OTLP/gRPC with
    // --otlp-grpc, into the same registry as the MCP calls.
    let receiver = if args.listen.is_some() || args.otlp_grpc.is_some() {
        // An agent's span naming a gateway tool (`py__add`) feeds that tool's breaker
        // (`py/add`), as the API resolves it: one name, one breaker.
        let servers: std::collections::HashSet<String> =
            config.servers.iter().map(|s| s.name.clone()).collect();
        let mut b = tool_health::receiver::Receiver::builder(Arc::clone(&gw.registry))
            .guard(gw.guard.clone())
            .map_tool_names(move |name| names::key_of(name, |s| servers.contains(s)))
            // A host's spans of calls the gateway served (and recorded) count once.
            .recorded_elsewhere({
                let served = Arc::clone(&gw.served);
                move |span| served.contains(span)
            });
        if let Some(url) = &args.forward_traces {
            b = b.forward_to(url.clone());
        }
        match b.build() {
            Ok(r) => Some(r),
            Err(e) => {
                gw.stop(STOP_TIMEOUT).await;
                return fatal(&format!("the trace receiver: {e}"));
            }
        }
    } else {
        None
    };
    let mut code = ExitCode::SUCCESS;
    let mut grpc_task = None;
    if let (Some(addr), Some(receiver)) = (args.otlp_grpc, &receiver) {
        let listener = match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => l,
            Err(e) => {
                gw.stop(STOP_TIMEOUT).await;
                return fatal(&format!("--otlp-grpc {addr}: {e}"));
            }
        };
        let bound = listener.local_addr().unwrap_or(addr);
        tracing::info!("receiving OTLP/gRPC traces on {bound}");
        let receiver = receiver.clone();
        let stop = gw.shutdown.clone();
        grpc_task = Some(tokio::spawn(async move {
            receiver.serve_grpc(listener, stop.cancelled_owned()).await
        }));
    }
    let mut http_task = None;
    if let Some(addr) = args.listen {
        let listener = match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => l,
            Err(e) => {
                gw.stop(STOP_TIMEOUT).await;
                return fatal(&format!("--listen {addr}: {e}"));
            }
        };
        let bound = listener.local_addr().unwrap_or(addr);
        if !bound.ip().is_loopback() {
            tracing::warn!(
                "listening beyond loopback on {bound}: the API and /mcp have no authentication \
                 (only the controls need the token); put the gateway behind your own auth. \
                 Clients that reach it by a name or an address other than localhost need \
                 --allow-host NAME (every route refuses other Host headers with 403)"
            );
        }
        tracing::info!(
            "listening on http://{bound}: MCP at /mcp, the API at /v1/tools, the status page at /, \
             OTLP/HTTP traces at /v1/traces"
        );
        let router = http::router(&gw, receiver.as_ref());
        let stop = gw.shutdown.clone();
        // Every answer goes out when written: without TCP_NODELAY a response written in pieces
        // waits for the client's delayed ACK (~40 ms a call with the SDK clients).
        let listener = tool_health::web::nodelay(listener);
        http_task = Some(tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await
        }));
    }
    let why = if args.stdio {
        serve_stdio(
            &gw,
            http_task.is_some() || grpc_task.is_some(),
            &mut signals,
        )
        .await
    } else {
        signals.stopping().await.to_owned()
    };
    tracing::info!("{why}: stopping");
    gw.stop(STOP_TIMEOUT).await;
    if let Some(task) = http_task {
        if let Ok(Ok(Err(e))) = tokio::time::timeout(STOP_TIMEOUT, task).await {
            tracing::error!("the HTTP server failed: {e}");
            code = ExitCode::FAILURE;
        }
    }
    if let Some(task) = grpc_task {
        if let Ok(Ok(Err(e))) = tokio::time::timeout(STOP_TIMEOUT, task).await {
            tracing::error!("the OTLP/gRPC receiver failed: {e}");
            code = ExitCode::FAILURE;
        }
    }
    if let Some(receiver) = &receiver {
        // Calls whose late verdict was still awaited are recorded as their spans showed them.
        receiver.flush();
    }
    if let Some(fleet) = &gw.fleet {
        let _ = tokio::time::timeout(STOP_TIMEOUT, async {
            fleet.sync_now().await.ok();
        })
        .await;
    }
    if let Some(guard) = otlp {
        let _ = tokio::task::spawn_blocking(move || guard.shutdown()).await;
    }
    code
}

/// Serves MCP on stdin and stdout until the session ends or a signal stops the gateway: why
/// it stops. Stdin at its end before any session began (a service manager, `docker run`
/// without `-i`, `nohup`) stops a gateway that serves nothing else; with `--listen` (or
/// `--otlp-grpc`) it goes on serving those until a signal.
async fn serve_stdio(gw: &Arc<Gateway>, serves_more: bool, signals: &mut Signals) -> String {
    // A pipe or socket through the reactor, no blocking thread per message (`host_io.rs`).
    #[cfg(unix)]
    let (read, write) = (
        server::host_io::HostIn::open(),
        server::host_io::HostOut::open(),
    );
    #[cfg(not(unix))]
    let (read, write) = (tokio::io::stdin(), tokio::io::stdout());
    let transport = StdioTransport::new(read, write, gw.max_message_bytes);
    let session = GatewayServer::new(Arc::clone(gw)).serve(transport);
    let started = tokio::select! {
        s = session => s,
        signal = signals.stopping() => return signal.to_owned(),
    };
    match started {
        Ok(running) => tokio::select! {
            _ = running.waiting() => "the host closed stdin".to_owned(),
            signal = signals.stopping() => signal.to_owned(),
        },
        Err(e) if serves_more => {
            tracing::info!(
                "no MCP session on stdio ({e}): serving HTTP only, until SIGTERM or SIGINT \
                 (--no-stdio says so from the start)"
            );
            signals.stopping().await.to_owned()
        }
        Err(e) => format!("no MCP session on stdio ({e})"),
    }
}
