//! The store's connections: per shard a command client and a subscriber (`conn.rs`), built
//! never to block and never to wait forever, and — on a cluster — routed to the primary of the
//! shard's slot (`cluster.rs`).
//!
//! * `fail_fast = false` and an endless constant reconnect policy: `start` never waits for the
//!   store, and a store that is down at startup is connected to as soon as it is up.
//! * A timeout on every command (`default_command_timeout`) and on the connection's own
//!   handshake: a paused store (SIGSTOP) is noticed only through timeouts, it never closes the
//!   connection.
//! * `max_command_attempts = 1`: a command is never replayed after a reconnect (the counts are
//!   not idempotent).
//! * The subscription is the task's to make, after every connection of a subscriber
//!   ([`Store::subscribe`] answers once the server confirmed it): a replica reads as connected
//!   only while it hears every shard's events channel — messages published while a
//!   subscription was down are read back by the poll that follows it.
//! * The store's kind must be the URL's: a `redis://` URL that reaches a cluster node, or a
//!   `redis-cluster://` one that reaches a single server, is a [`StoreError::Layout`] naming the
//!   URL to use — never a store that "does not answer".
//! * Credentials: fred's `Config` and `Builder` print the password in `Debug`; they are never
//!   formatted here, and every error text from the client goes through [`Store::redact`].

mod cluster;
mod conn;
mod url;

use std::time::{Duration, Instant};

use fred::error::{Error as FredError, ErrorKind};
use fred::prelude::*;
use fred::types::config::{Server, ServerConfig};
use fred::types::{ClusterHash, CustomCommand};
use tokio::sync::mpsc;

use super::config::{redact_url, FleetBuilder};
use super::keys::Keys;
use super::scripts::{Scripts, Which};
use super::wire;
use super::FleetError;

use conn::Conn;
pub(super) use conn::{ConnEvent, ShardEvent};
use url::{scheme, sentinel_credentials, with_kind, Kind};

/// What a command to the store came to, when it did not answer as expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum StoreError {
    /// No answer within the command timeout (a store down, paused, or out of reach).
    Timeout,
    /// The connection is down or failed.
    Unavailable(String),
    /// The store refused the credentials.
    Auth,
    /// The store answered with an error (redacted text).
    Server(String),
    /// The answer was not the shape the protocol defines.
    Reply,
    /// The store is not of the URL's kind (a cluster node behind `redis://`, a single server
    /// behind `redis-cluster://`): the message says which URL to use.
    Layout(String),
    /// A cluster node answered that the shard's slot is served elsewhere (its redirection).
    Moved(String),
    /// The shard's connection is down (its error was said when it went): not tried.
    NotConnected,
}

impl StoreError {
    pub(super) fn to_fleet(&self) -> FleetError {
        match self {
            StoreError::Timeout => {
                FleetError::Unavailable("the store did not answer in time".into())
            }
            StoreError::Unavailable(s) => FleetError::Unavailable(s.clone()),
            StoreError::Moved(s) => FleetError::Unavailable(format!("the slot moved: {s}")),
            StoreError::NotConnected => FleetError::Unavailable("not connected".into()),
            StoreError::Auth => FleetError::Auth,
            StoreError::Server(s) => FleetError::Unavailable(format!("the store answered: {s}")),
            StoreError::Reply => FleetError::Rejected,
            StoreError::Layout(s) => FleetError::Config(s.clone()),
        }
    }
}

/// How long the clients wait between two connection attempts: the poll interval, within
/// 50–500 ms.
pub(super) fn reconnect_delay(poll_interval: Duration) -> Duration {
    poll_interval.clamp(Duration::from_millis(50), Duration::from_millis(500))
}

/// The connections to the store.
pub(super) struct Store {
    pub(super) keys: Keys,
    scripts: Scripts,
    kind: Kind,
    /// What every client is built from (a cluster's: its seeds; each shard's client points at
    /// one node).
    config: Config,
    /// Per shard; `None` until a cluster's shard has a route.
    conns: Vec<Option<Conn>>,
    generation: u64,
    events: mpsc::Sender<ShardEvent>,
    timeout: Duration,
    reconnect: Duration,
    /// When the cluster's routes were last asked for.
    discovered: Option<Instant>,
    /// For redaction only.
    password: Option<String>,
    /// For messages: the URL without credentials.
    pub(super) shown_url: String,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("url", &self.shown_url)
            .field("shards", &self.keys.shards())
            .finish_non_exhaustive()
    }
}

impl Store {
    /// The store's settings, not connected yet; the receiver of what its connections report.
    pub(super) fn new(b: &FleetBuilder) -> Result<(Self, mpsc::Receiver<ShardEvent>), FleetError> {
        let url = &b.url.0;
        let shown_url = redact_url(url);
        let (tls, kind) = scheme(url)?;
        // fred would build its own TLS connector from an `s` scheme, eagerly (reading the whole
        // platform store); the connection's TLS is set below instead.
        let plain = match url.split_once("://") {
            Some((s, rest)) if tls => {
                let s = s.to_ascii_lowercase();
                let s = s
                    .replacen("rediss", "redis", 1)
                    .replacen("valkeys", "valkey", 1);
                format!("{s}://{rest}")
            }
            _ => url.clone(),
        };
        let mut config = Config::from_url(&plain).map_err(|_| {
            FleetError::Config(format!(
                "the fleet URL ({shown_url}) is not a valid redis:// URL: \
                 redis://[user[:password]@]host[:port][/db]"
            ))
        })?;
        if let Some(user) = &b.username {
            config.username = Some(user.clone());
        }
        if let Some(password) = &b.password {
            config.password = Some(password.0.clone());
        }
        sentinel_credentials(&mut config, &plain);
        if tls {
            #[cfg(feature = "fleet-tls")]
            {
                let tls = super::tls::client_config(b)?;
                config.tls = Some(fred::types::config::TlsConnector::from(tls).into());
            }
            #[cfg(not(feature = "fleet-tls"))]
            return Err(FleetError::TlsNotCompiled);
        }
        let keys = match kind {
            Kind::Cluster => Keys::cluster(&b.prefix, b.shards),
            _ => Keys::single(&b.prefix),
        };
        let (events, rx) = mpsc::channel(1024);
        let store = Self {
            conns: (0..keys.shards()).map(|_| None).collect(),
            keys,
            scripts: Scripts::new(),
            kind,
            password: config.password.clone(),
            config,
            generation: 0,
            events,
            timeout: b.command_timeout,
            reconnect: reconnect_delay(b.poll_interval),
            discovered: None,
            shown_url,
        };
        // Every client is built the same way: checked here, so that `start` says what is wrong.
        store
            .builder(store.config.clone())
            .build()
            .map_err(|e| FleetError::Config(format!("fleet client: {:?}", e.kind())))?;
        Ok((store, rx))
    }

    /// A client builder for `config` with the fleet's connection settings.
    fn builder(&self, config: Config) -> Builder {
        let t = self.timeout;
        let mut builder = Builder::from_config(config);
        builder
            .with_config(|c| c.fail_fast = false)
            .with_connection_config(|c| {
                c.connection_timeout = t.saturating_mul(4);
                c.internal_command_timeout = t.saturating_mul(2);
                c.max_command_attempts = 1;
                c.unresponsive.max_timeout = Some(t.saturating_mul(4));
                c.unresponsive.interval = t;
            })
            .with_performance_config(|p| p.default_command_timeout = t)
            .set_policy(ReconnectPolicy::new_constant(
                0,
                u32::try_from(self.reconnect.as_millis()).unwrap_or(500),
            ));
        builder
    }

    /// A client config for one cluster node.
    fn node_config(&self, node: &Server) -> Config {
        let mut config = self.config.clone();
        config.server = ServerConfig::Centralized {
            server: node.clone(),
        };
        config
    }

    /// Whether the fleet is laid out over a cluster's shards.
    pub(super) fn is_cluster(&self) -> bool {
        self.kind == Kind::Cluster
    }

    /// Starts connecting (never waits): a single server or Sentinel at once; a cluster's shards
    /// once their routes are known ([`discover`](Self::discover)).
    pub(super) fn connect(&mut self) -> Result<(), FleetError> {
        if self.kind != Kind::Cluster {
            self.generation += 1;
            let conn = Conn::start(
                &self.builder(self.config.clone()),
                0,
                self.generation,
                None,
                self.events.clone(),
            )?;
            self.conns[0] = Some(conn);
        }
        Ok(())
    }

    /// The generation of shard `shard`'s connections (events of another are stale).
    pub(super) fn generation(&self, shard: usize) -> Option<u64> {
        self.conns[shard].as_ref().map(|c| c.generation)
    }

    /// The node shard `shard` is routed to (cluster only), for messages.
    pub(super) fn node(&self, shard: usize) -> Option<String> {
        let c = self.conns.get(shard)?.as_ref()?;
        c.node.as_ref().map(|n| format!("{}:{}", n.host, n.port))
    }

    /// Whether shard `shard`'s subscriber is connected now.
    pub(super) fn subscriber_connected(&self, shard: usize) -> bool {
        self.conns[shard]
            .as_ref()
            .is_some_and(|c| c.subscriber.is_connected())
    }

    /// Subscribes to shard `shard`'s events channel on its subscriber's current connection;
    /// answers once the server confirmed it (bounded).
    pub(super) async fn subscribe(&self, shard: usize) -> Result<(), StoreError> {
        let Some(conn) = &self.conns[shard] else {
            return Err(no_route());
        };
        if !conn.subscriber.is_connected() && !conn.client.is_connected() {
            // The node is away (a subscriber still connecting, with its client up, is waited
            // for: its subscription comes with its first connection).
            return Err(StoreError::NotConnected);
        }
        let channel = self.keys.channel(shard);
        if self.kind == Kind::Cluster {
            self.bounded(conn.subscriber.ssubscribe(channel)).await
        } else {
            self.bounded(conn.subscriber.subscribe(channel)).await
        }
    }

    /// Runs `which` on shard `shard` with `keys` (all in the shard) and `args` after the
    /// publish command and the shard's channel; the reply's fields, bounded. On a cluster, a
    /// `MOVED` answer re-routes the shard and the script runs once more there.
    pub(super) async fn call(
        &mut self,
        shard: usize,
        which: Which,
        keys: Vec<String>,
        args: Vec<String>,
    ) -> Result<Vec<String>, StoreError> {
        let mut all = Vec::with_capacity(args.len() + 2);
        all.push(self.keys.publish().to_owned());
        all.push(self.keys.channel(shard));
        all.extend(args);
        let first = self
            .call_once(shard, which, keys.clone(), all.clone())
            .await;
        match first {
            Err(StoreError::Moved(details)) => {
                if let Some(node) = cluster::redirection(&details) {
                    self.route(shard, node)?;
                    // The new connection's first (bounded): the script runs once more there.
                    if let Some(conn) = &self.conns[shard] {
                        self.bounded(conn.client.wait_for_connect()).await?;
                    }
                }
                self.call_once(shard, which, keys, all).await
            }
            other => other,
        }
    }

    async fn call_once(
        &self,
        shard: usize,
        which: Which,
        keys: Vec<String>,
        args: Vec<String>,
    ) -> Result<Vec<String>, StoreError> {
        let Some(conn) = &self.conns[shard] else {
            return Err(no_route());
        };
        if !conn.client.is_connected() {
            // Not queued for a connection that may be long in coming: a shard whose node is
            // away costs the task nothing (the others' commands are not held up behind it).
            return Err(StoreError::NotConnected);
        }
        let script = self.scripts.get(which);
        let value: Value = self
            .bounded(script.evalsha_with_reload(&conn.client, keys, args))
            .await?;
        let Value::Array(values) = value else {
            return Err(StoreError::Reply);
        };
        if values.len() > wire::MAX_FIELDS {
            return Err(StoreError::Reply);
        }
        wire::fields(values.into_iter().map(|v| match v {
            Value::String(s) => Some(s.to_string()),
            Value::Bytes(b) => String::from_utf8(b.to_vec()).ok(),
            _ => None,
        }))
        .ok_or(StoreError::Reply)
    }

    /// A cluster's routes: asks `CLUSTER SLOTS` of a shard that answers (else of each node in
    /// the URL), and points every shard whose slot moved (or that had no route) at its
    /// primary. At most once per reconnection delay; the shards re-routed.
    pub(super) async fn discover(&mut self) -> Result<Vec<usize>, StoreError> {
        if self.kind != Kind::Cluster
            || self
                .discovered
                .is_some_and(|at| at.elapsed() < self.reconnect)
        {
            return Ok(Vec::new());
        }
        self.discovered = Some(Instant::now());
        let ranges = self.cluster_slots().await?;
        let mut moved = Vec::new();
        for shard in 0..self.keys.shards() {
            let Some(primary) = cluster::primary_of(&ranges, self.keys.slot(shard)) else {
                continue; // an unserved slot: CLUSTERDOWN for now
            };
            let current = self.conns[shard].as_ref().and_then(|c| c.node.as_ref());
            if current != Some(primary) {
                self.route(shard, primary.clone())?;
                moved.push(shard);
            }
        }
        Ok(moved)
    }

    /// `CLUSTER SLOTS` from the first node that answers.
    async fn cluster_slots(&self) -> Result<Vec<cluster::SlotRange>, StoreError> {
        let command = || CustomCommand::new_static("CLUSTER", ClusterHash::Random, false);
        let mut last = no_route();
        // The shards' own connections first: no new connection.
        for conn in self.conns.iter().flatten() {
            if !conn.client.is_connected() {
                continue;
            }
            let asked = conn
                .node
                .as_ref()
                .map_or_else(String::new, |n| n.host.to_string());
            match self
                .bounded(conn.client.custom(command(), vec!["SLOTS"]))
                .await
            {
                Ok(v) => return cluster::parse_slots(v, &asked).ok_or(StoreError::Reply),
                Err(e @ StoreError::Layout(_)) => return Err(e),
                Err(e) => last = e,
            }
        }
        for seed in self.config.server.hosts() {
            let client = self
                .builder(self.node_config(&seed))
                .build()
                .map_err(|e| StoreError::Unavailable(format!("{:?}", e.kind())))?;
            let asked = seed.host.to_string();
            let answer = async {
                self.bounded(async {
                    client.init().await?;
                    Ok(())
                })
                .await?;
                self.bounded(client.custom(command(), vec!["SLOTS"])).await
            }
            .await;
            let _ = tokio::time::timeout(self.timeout, client.quit()).await;
            match answer {
                Ok(v) => return cluster::parse_slots(v, &asked).ok_or(StoreError::Reply),
                Err(e @ (StoreError::Layout(_) | StoreError::Auth)) => return Err(e),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Points shard `shard` at `node` (new connections; the old ones close in the background).
    fn route(&mut self, shard: usize, node: Server) -> Result<(), StoreError> {
        if self.conns[shard]
            .as_ref()
            .is_some_and(|c| c.node.as_ref() == Some(&node))
        {
            return Ok(());
        }
        self.generation += 1;
        let conn = Conn::start(
            &self.builder(self.node_config(&node)),
            shard,
            self.generation,
            Some(node),
            self.events.clone(),
        )
        .map_err(|e| StoreError::Unavailable(e.to_string()))?;
        if let Some(old) = self.conns[shard].replace(conn) {
            tokio::spawn(old.quit(self.timeout));
        }
        Ok(())
    }

    /// `fut` under the command timeout (fred's own applies too; this one also bounds the
    /// script reload after `NOSCRIPT`, which is two commands).
    async fn bounded<T>(
        &self,
        fut: impl std::future::Future<Output = Result<T, FredError>>,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout(self.timeout.saturating_mul(3), fut).await {
            Err(_) => Err(StoreError::Timeout),
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(self.classify(&e)),
        }
    }

    fn classify(&self, e: &FredError) -> StoreError {
        let details = e.details();
        let cluster_answer = e.kind() == &ErrorKind::Cluster
            || details.starts_with("CROSSSLOT")
            || details.contains("non local key");
        if self.kind != Kind::Cluster && cluster_answer {
            return StoreError::Layout(format!(
                "the store at {} is a node of a Redis/Valkey cluster: use {} (the fleet's keys \
                 are then spread over the cluster's slots)",
                self.shown_url,
                with_kind(&self.shown_url, Kind::Cluster)
            ));
        }
        if self.kind == Kind::Cluster && details.contains("cluster support disabled") {
            return StoreError::Layout(format!(
                "the store at {} is not a cluster (cluster support disabled): use {}",
                self.shown_url,
                with_kind(&self.shown_url, Kind::Single)
            ));
        }
        if self.kind == Kind::Cluster && cluster::redirection(details).is_some() {
            return StoreError::Moved(self.redact(details));
        }
        match e.kind() {
            ErrorKind::Timeout => StoreError::Timeout,
            ErrorKind::Auth => StoreError::Auth,
            ErrorKind::IO | ErrorKind::Canceled | ErrorKind::Routing | ErrorKind::Cluster => {
                StoreError::Unavailable(self.redact(&format!("{:?}: {details}", e.kind())))
            }
            _ if details.starts_with("NOAUTH") || details.starts_with("WRONGPASS") => {
                StoreError::Auth
            }
            _ => StoreError::Server(self.redact(details)),
        }
    }

    /// A connection error as the status and logs show it: (a refusal of the credentials, the
    /// layout's error if the store is not of the URL's kind, the text).
    pub(super) fn describe(&self, e: &FredError) -> (bool, String) {
        match self.classify(e) {
            StoreError::Auth => (true, "the store refused the credentials".to_owned()),
            StoreError::Timeout => (false, "the store did not answer in time".to_owned()),
            StoreError::Unavailable(s)
            | StoreError::Server(s)
            | StoreError::Layout(s)
            | StoreError::Moved(s) => (false, s),
            StoreError::Reply => (false, "an unexpected reply".to_owned()),
            StoreError::NotConnected => (false, "not connected".to_owned()),
        }
    }

    /// `text` with the password (if any) and anything URL-like cut out, bounded.
    pub(super) fn redact(&self, text: &str) -> String {
        let mut t: String = text.chars().take(300).collect();
        if let Some(p) = self.password.as_deref().filter(|p| !p.is_empty()) {
            t = t.replace(p, "***");
        }
        if t.contains("://") {
            return "(details withheld: they held a URL)".to_owned();
        }
        t
    }

    /// Closes every connection (bounded).
    pub(super) async fn quit(&mut self) {
        for conn in self.conns.iter_mut().filter_map(Option::take) {
            conn.quit(self.timeout).await;
        }
    }
}

fn no_route() -> StoreError {
    StoreError::Unavailable("no route to the shard's node yet".to_owned())
}
