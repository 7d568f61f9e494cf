//! The servers under test, started the same way whatever they are written with: the official
//! Python and TypeScript SDK servers over stdio and streamable HTTP, and the rmcp demo server
//! in-process.

use std::collections::HashMap;
use std::sync::Arc;

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::RoleClient;
use tool_health::mcp::{SessionId, ToolHealthClient, Transport};
use tool_health::ToolHealthRegistry;
use tool_health_integrations::mcp_demo::{self, Demo};
use tool_health_integrations::mcp_servers::{HttpServer, Launcher, Sdk, StdioServer};

/// The name every test gives its server: tool keys are `fixture/{tool}`.
pub const NAME: &str = "fixture";

/// Where a test's server comes from.
#[derive(Debug, Clone)]
pub enum Target {
    /// An SDK's fixture server over stdio (`http: false`) or streamable HTTP.
    Sdk { launcher: Launcher, http: bool },
    /// rmcp's demo server in-process, over an in-memory pipe.
    Rmcp,
}

/// What keeps a started server alive.
#[allow(dead_code)] // held for their drop (the processes are killed on drop)
enum Keep {
    Stdio(tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStderr>>),
    Http(HttpServer),
    Task(tokio::task::JoinHandle<()>),
}

/// One started server and a client connected to it.
pub struct Server {
    pub running: RunningService<RoleClient, ()>,
    pub transport: Transport,
    pub session: Option<SessionId>,
    /// The HTTP server's port.
    pub port: Option<u16>,
    _keep: Keep,
}

/// What a server received (from its `seen` tool): requests by method (`None` for rmcp, which
/// answers them below the tools), and `tools/call` by tool name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Seen {
    pub methods: Option<HashMap<String, u64>>,
    pub tools: HashMap<String, u64>,
}

impl Seen {
    pub fn tool(&self, name: &str) -> u64 {
        self.tools.get(name).copied().unwrap_or(0)
    }

    /// Requests of `method`, when the server can say.
    pub fn method(&self, method: &str) -> Option<u64> {
        self.methods
            .as_ref()
            .map(|m| m.get(method).copied().unwrap_or(0))
    }
}

impl Target {
    /// `python_stdio`, `typescript_http`, `rmcp_in_process`, …
    pub fn name(&self) -> String {
        match self {
            Self::Sdk { launcher, http } => format!(
                "{}_{}",
                launcher.sdk().name(),
                if *http { "http" } else { "stdio" }
            ),
            Self::Rmcp => "rmcp_in_process".to_owned(),
        }
    }

    pub fn sdk(&self) -> Option<Sdk> {
        match self {
            Self::Sdk { launcher, .. } => Some(launcher.sdk()),
            Self::Rmcp => None,
        }
    }

    pub fn is_http(&self) -> bool {
        matches!(self, Self::Sdk { http: true, .. })
    }

    /// Starts a fresh server and connects to it.
    pub async fn start(&self) -> Server {
        match self {
            Self::Sdk {
                launcher,
                http: false,
            } => {
                let StdioServer {
                    running, stderr, ..
                } = launcher.stdio().await.expect("start the stdio server");
                Server {
                    running,
                    transport: Transport::stdio(),
                    session: None,
                    port: None,
                    _keep: Keep::Stdio(stderr),
                }
            }
            Self::Sdk {
                launcher,
                http: true,
            } => {
                let http = launcher.http().await.expect("start the HTTP server");
                let (running, session) = http.connect().await.expect("connect over HTTP");
                Server {
                    running,
                    transport: Transport::http(&http.url).session(session.clone()),
                    session: Some(session),
                    port: Some(http.port),
                    _keep: Keep::Http(http),
                }
            }
            Self::Rmcp => {
                let (task, running) = mcp_demo::in_process(Demo::new())
                    .await
                    .expect("serve in-process");
                Server {
                    running,
                    transport: Transport::default(),
                    session: None,
                    port: None,
                    _keep: Keep::Task(task),
                }
            }
        }
    }

    /// The text a raising `flaky` answers with.
    pub fn raised_text(&self) -> &'static str {
        match self.sdk() {
            // The Python SDK leaves the exception's message out.
            Some(Sdk::Python) => "Error executing tool flaky",
            _ => "flaky: upstream answered 503",
        }
    }
}

impl Server {
    /// A client for this server in `registry`, named [`NAME`], with its transport.
    pub fn client(&self, registry: &Arc<ToolHealthRegistry>) -> ToolHealthClient {
        ToolHealthClient::new(self.running.peer().clone(), Arc::clone(registry))
            .server(NAME)
            .transport(self.transport.clone())
    }

    /// Calls `tool` directly on the peer (no breaker): the tests' own hand on the server.
    async fn raw(&self, tool: &'static str) -> String {
        let r = self
            .running
            .peer()
            .call_tool(CallToolRequestParams::new(tool))
            .await
            .expect("a raw call");
        text(&r).to_owned()
    }

    /// What the server received so far.
    pub async fn seen(&self) -> Seen {
        let json: serde_json::Value =
            serde_json::from_str(&self.raw("seen").await).expect("seen answers JSON");
        let map = |v: &serde_json::Value| -> HashMap<String, u64> {
            v.as_object()
                .map(|o| {
                    o.iter()
                        .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
                        .collect()
                })
                .unwrap_or_default()
        };
        Seen {
            methods: json.get("methods").map(map),
            tools: json.get("tools").map(map).unwrap_or_default(),
        }
    }

    /// Mends `flaky`.
    pub async fn mend(&self) {
        assert_eq!(self.raw("mend").await, "mended");
    }
}

/// The text of a result's first content block ("" if none).
pub fn text(r: &rmcp::model::CallToolResult) -> &str {
    r.content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.as_str())
        .unwrap_or("")
}
