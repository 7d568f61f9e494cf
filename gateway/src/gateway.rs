//! The assembled gateway: the library's registry (with fleet mode when configured), the status
//! service, the upstreams and their supervisors, the hosts to notify, what the reloads did.
//! Built once by [`Gateway::start`]; the transports (`server/`, `http/`) hold it in an `Arc`
//! and read the set of upstreams through [`Gateway::upstreams`] (a reload swaps it whole).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tool_health::fleet::{Fleet, FleetBuilder};
use tool_health::status::{PrometheusMetrics, Status};
use tool_health::web::HttpGuard;
use tool_health::{ToolHealthRegistry, ToolPolicy};

use crate::config::{Config, Secrets};
use crate::notify::Hosts;
use crate::probes::Probes;
use crate::reloads::Reloads;
use crate::token::Token;
use crate::upstream::{Supervised, Upstreams};

/// The gateway's state.
pub(crate) struct Gateway {
    pub(crate) registry: Arc<ToolHealthRegistry>,
    /// The upstreams and their supervisors (read them through [`upstreams`](Self::upstreams)).
    pub(crate) servers: Supervised,
    pub(crate) hosts: Arc<Hosts>,
    pub(crate) status: Status,
    pub(crate) fleet: Option<Fleet>,
    pub(crate) probes: Probes,
    /// The hosts' spans of the calls served (see `server/served.rs`).
    pub(crate) served: Arc<crate::served::ServedSpans>,
    pub(crate) token: Option<Token>,
    /// Who may call the HTTP routes (every one of them: the API, `/mcp`, the status page, the
    /// trace receiver).
    pub(crate) guard: HttpGuard,
    pub(crate) max_message_bytes: usize,
    /// The config's secrets, masked in the log and in answers (a reload adds its own).
    pub(crate) secrets: Arc<Secrets>,
    /// How many reloads there were, and how the last one went.
    pub(crate) reloads: Reloads,
    /// Cancelled when the gateway stops: supervisors, the HTTP server and sessions end.
    pub(crate) shutdown: CancellationToken,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("servers", &self.servers)
            .field("hosts", &self.hosts)
            .field("fleet", &self.fleet.as_ref().map(|fl| fl.status()))
            .finish_non_exhaustive()
    }
}

/// The registry every breaker lives in, with the config's defaults.
pub(crate) fn registry(config: &Config) -> Arc<ToolHealthRegistry> {
    let registry = ToolHealthRegistry::builder()
        .config(config.health.defaults.breaker.clone())
        .build();
    registry.set_default_policy(ToolPolicy::from(config.health.defaults.breaker.clone()));
    Arc::new(registry)
}

impl Gateway {
    /// Starts everything but the transports: fleet mode, the status service (with Prometheus
    /// and the control token), the notifier, one supervisor per upstream. Inside a tokio
    /// runtime.
    pub(crate) fn start(
        config: &Config,
        registry: Arc<ToolHealthRegistry>,
        token: Option<Token>,
        guard: HttpGuard,
        meter: Option<&opentelemetry::metrics::Meter>,
        secrets: &Arc<Secrets>,
    ) -> Result<Arc<Self>, String> {
        // Created now, with the tools' defaults (a server's own policy is set per server).
        let _ = tool_health::mcp::server_registry(&registry);
        let fleet = match &config.health.fleet {
            Some(f) => {
                let mut b = FleetBuilder::new(f.url.clone());
                if let Some(p) = &f.prefix {
                    b = b.prefix(p.clone());
                }
                if let Some(n) = f.shards {
                    b = b.shards(n);
                }
                Some(b)
            }
            None => FleetBuilder::from_env().map_err(|e| format!("fleet mode: {e}"))?,
        };
        let fleet = fleet
            .map(|b| b.start(&registry))
            .transpose()
            .map_err(|e| format!("fleet mode (`health.fleet`): {e}"))?;
        let prometheus = PrometheusMetrics::publish(&registry)
            .map_err(|e| format!("the Prometheus exporter: {e}"))?;
        if let Some(fleet) = &fleet {
            if let Some(m) = prometheus.meter() {
                fleet.publish_metrics(&m);
            }
            if let Some(meter) = meter {
                fleet.publish_metrics(meter);
            }
            tracing::info!(replica = %fleet.replica_id(), "fleet mode on: breaker decisions are shared with the other replicas");
        }
        let hosts = Hosts::new();
        let shutdown = CancellationToken::new();
        let servers = Supervised::new(&config.servers, &registry, &hosts, secrets, &shutdown);
        // The servers are the status page's groups: each shown with its connection and
        // breaker, and a tool its server refuses shown as refused — the set as it is now,
        // whatever reloads changed.
        if let Some(m) = prometheus.meter() {
            crate::telemetry::publish_servers(&m, servers.view());
        }
        if let Some(meter) = meter {
            crate::telemetry::publish_servers(meter, servers.view());
        }
        let view = servers.view();
        let mut status = tool_health::status::builder(Arc::clone(&registry))
            .prometheus(prometheus)
            .guard(guard.clone())
            .groups("server", move || {
                view.now().iter().map(|u| u.group()).collect()
            });
        if let Some(t) = &token {
            status = status.control_token(t.expose());
        }
        let status = status.build().map_err(|e| e.to_string())?;
        let tasks = vec![tokio::spawn(Arc::clone(&hosts).run())];
        servers.supervise();
        Ok(Arc::new(Self {
            registry,
            servers,
            hosts,
            status,
            fleet,
            probes: Probes::default(),
            served: Arc::default(),
            token,
            guard,
            max_message_bytes: config.health.max_message_bytes,
            secrets: Arc::clone(secrets),
            reloads: Reloads::default(),
            shutdown,
            tasks: Mutex::new(tasks),
        }))
    }

    /// The upstreams now: one view of the set, for one request (a reload swaps it whole).
    pub(crate) fn upstreams(&self) -> Arc<Upstreams> {
        self.servers.now()
    }

    /// Keeps `task` (a reloader) to be waited for when the gateway stops.
    pub(crate) fn keep(&self, task: JoinHandle<()>) {
        self.tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(task);
    }

    /// Stops the supervisors (their servers are killed) and waits for them, at most `timeout`.
    pub(crate) async fn stop(&self, timeout: Duration) {
        self.shutdown.cancel();
        let mut tasks: Vec<JoinHandle<()>> =
            std::mem::take(&mut *self.tasks.lock().unwrap_or_else(PoisonError::into_inner));
        if !tasks.is_empty() {
            tasks.remove(0).abort(); // the notifier
        }
        let deadline = tokio::time::Instant::now() + timeout;
        let _ = tokio::time::timeout_at(deadline, futures_util::future::join_all(tasks)).await;
        self.servers
            .stopped(deadline.saturating_duration_since(tokio::time::Instant::now()))
            .await;
    }
}
