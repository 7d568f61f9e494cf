//! The store connection: two fred clients (commands, and a subscriber), built never to block
//! and never to wait forever.
//!
//! * `fail_fast = false` and an endless constant reconnect policy: `start` never waits for the
//!   store, and a store that is down at startup is connected to as soon as it is up.
//! * A timeout on every command (`default_command_timeout`) and on the connection's own
//!   handshake: a paused store (SIGSTOP) is noticed only through timeouts, it never closes the
//!   connection.
//! * `max_command_attempts = 1`: a command is never replayed after a reconnect (the counts are
//!   not idempotent).
//! * The subscription is the task's to make, after every connection of the subscriber
//!   ([`Store::subscribe`] answers once the server confirmed it): a replica reads as connected
//!   only while it hears the events channel — messages published while the subscription was
//!   down are read back by the round that follows it (the poll comes after the subscribe).
//! * Credentials: fred's `Config` and `Builder` print the password in `Debug`; they are never
//!   formatted here, and every error text from the client goes through [`Store::redact`].

use std::time::Duration;

use fred::clients::SubscriberClient;
use fred::error::{Error as FredError, ErrorKind};
use fred::prelude::*;
use fred::types::scripts::Script;
use fred::types::Message;
use tokio::sync::broadcast;

use super::config::{redact_url, FleetBuilder};
use super::scripts::Scripts;
use super::wire;
use super::FleetError;

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
}

impl StoreError {
    pub(super) fn to_fleet(&self) -> FleetError {
        match self {
            StoreError::Timeout => {
                FleetError::Unavailable("the store did not answer in time".into())
            }
            StoreError::Unavailable(s) => FleetError::Unavailable(s.clone()),
            StoreError::Auth => FleetError::Auth,
            StoreError::Server(s) => FleetError::Unavailable(format!("the store answered: {s}")),
            StoreError::Reply => FleetError::Rejected,
        }
    }
}

/// The connection to the store.
pub(super) struct Store {
    client: Client,
    subscriber: SubscriberClient,
    pub(super) scripts: Scripts,
    prefix: String,
    channel: String,
    timeout: Duration,
    /// For redaction only.
    password: Option<String>,
    /// For messages: the URL without credentials.
    pub(super) shown_url: String,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("url", &self.shown_url)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

/// The URL's scheme, told apart: (TLS, Sentinel).
fn scheme(url: &str) -> Result<(bool, bool), FleetError> {
    let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    match scheme.as_deref() {
        Some("redis" | "valkey") => Ok((false, false)),
        Some("rediss" | "valkeys") => Ok((true, false)),
        Some("redis-sentinel" | "valkey-sentinel") => Ok((false, true)),
        Some("rediss-sentinel" | "valkeys-sentinel") => Ok((true, true)),
        _ => Err(FleetError::Config(
            "the fleet URL must start with redis://, rediss://, valkey://, valkeys:// or \
             redis-sentinel:// (Redis Cluster and Unix sockets are not supported)"
                .into(),
        )),
    }
}

/// How long the clients wait between two connection attempts: the poll interval, within
/// 50–500 ms.
pub(super) fn reconnect_delay(poll_interval: Duration) -> Duration {
    poll_interval.clamp(Duration::from_millis(50), Duration::from_millis(500))
}

impl Store {
    /// The clients, not connected yet.
    pub(super) fn new(b: &FleetBuilder) -> Result<Self, FleetError> {
        let url = &b.url.0;
        let shown_url = redact_url(url);
        let (tls, _sentinel) = scheme(url)?;
        // fred would build its own TLS connector from an `s` scheme, eagerly (reading the whole
        // platform store); the connection's TLS is set below instead.
        let plain = match url.split_once("://") {
            Some((s, rest)) if tls => {
                let s = s.to_ascii_lowercase();
                let s = match s.as_str() {
                    "rediss" => "redis",
                    "valkeys" => "valkey",
                    "rediss-sentinel" => "redis-sentinel",
                    _ => "valkey-sentinel",
                };
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
        if tls {
            #[cfg(feature = "fleet-tls")]
            {
                let tls = super::tls::client_config(b)?;
                config.tls = Some(fred::types::config::TlsConnector::from(tls).into());
            }
            #[cfg(not(feature = "fleet-tls"))]
            return Err(FleetError::TlsNotCompiled);
        }
        let password = config.password.clone();
        let t = b.command_timeout;
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
                u32::try_from(reconnect_delay(b.poll_interval).as_millis()).unwrap_or(500),
            ));
        let client = builder
            .build()
            .map_err(|e| FleetError::Config(format!("fleet client: {:?}", e.kind())))?;
        let subscriber = builder
            .build_subscriber_client()
            .map_err(|e| FleetError::Config(format!("fleet subscriber: {:?}", e.kind())))?;
        Ok(Self {
            client,
            subscriber,
            scripts: Scripts::new(),
            channel: format!("{}:v1:ev", b.prefix),
            prefix: b.prefix.clone(),
            timeout: t,
            password,
            shown_url,
        })
    }

    /// Starts both connections in the background (never waits).
    pub(super) fn connect(&self) {
        // Detached: the connection tasks live as long as the clients (until `quit`).
        drop(self.client.connect());
        drop(self.subscriber.connect());
    }

    /// The events channel's messages.
    pub(super) fn messages(&self) -> broadcast::Receiver<Message> {
        self.subscriber.message_rx()
    }

    /// Every successful connection of the command client, the first one included.
    pub(super) fn connections(&self) -> broadcast::Receiver<fred::types::config::Server> {
        self.client.reconnect_rx()
    }

    /// The connection errors of the command client (wrong password, refused connections).
    pub(super) fn errors(
        &self,
    ) -> broadcast::Receiver<(FredError, Option<fred::types::config::Server>)> {
        self.client.error_rx()
    }

    /// Every successful connection of the subscriber, the first one included: its subscription
    /// is gone with the connection it was made on.
    pub(super) fn subscriber_connections(
        &self,
    ) -> broadcast::Receiver<fred::types::config::Server> {
        self.subscriber.reconnect_rx()
    }

    /// The subscriber's connection errors (its connection closed or could not be made).
    pub(super) fn subscriber_errors(
        &self,
    ) -> broadcast::Receiver<(FredError, Option<fred::types::config::Server>)> {
        self.subscriber.error_rx()
    }

    /// Whether the subscriber's connection is up now.
    pub(super) fn subscriber_connected(&self) -> bool {
        self.subscriber.is_connected()
    }

    /// The events channel's name.
    pub(super) fn channel(&self) -> &str {
        &self.channel
    }

    /// Subscribes to the events channel on the subscriber's current connection; answers once
    /// the server confirmed it (bounded).
    pub(super) async fn subscribe(&self) -> Result<(), StoreError> {
        self.bounded(self.subscriber.subscribe(self.channel.clone()))
            .await
    }

    /// Runs a script with `args` after the prefix; the reply's fields, bounded.
    pub(super) async fn call(
        &self,
        script: &Script,
        args: Vec<String>,
    ) -> Result<Vec<String>, StoreError> {
        let mut all = Vec::with_capacity(args.len() + 1);
        all.push(self.prefix.clone());
        all.extend(args);
        let keys: Vec<String> = Vec::new();
        let value: Value = self
            .bounded(script.evalsha_with_reload(&self.client, keys, all))
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
        match e.kind() {
            ErrorKind::Timeout => StoreError::Timeout,
            ErrorKind::Auth => StoreError::Auth,
            ErrorKind::IO | ErrorKind::Canceled | ErrorKind::Routing => {
                StoreError::Unavailable(self.redact(&format!("{:?}: {}", e.kind(), e.details())))
            }
            _ if e.details().starts_with("NOAUTH") || e.details().starts_with("WRONGPASS") => {
                StoreError::Auth
            }
            _ => StoreError::Server(self.redact(e.details())),
        }
    }

    /// A connection error as the status and logs show it.
    pub(super) fn describe(&self, e: &FredError) -> (bool, String) {
        match self.classify(e) {
            StoreError::Auth => (true, "the store refused the credentials".to_owned()),
            StoreError::Timeout => (false, "the store did not answer in time".to_owned()),
            StoreError::Unavailable(s) | StoreError::Server(s) => (false, s),
            StoreError::Reply => (false, "an unexpected reply".to_owned()),
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

    /// Closes both connections (bounded).
    pub(super) async fn quit(&self) {
        let _ = tokio::time::timeout(self.timeout, self.subscriber.quit()).await;
        let _ = tokio::time::timeout(self.timeout, self.client.quit()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes_are_told_apart_and_the_rest_refused() {
        assert_eq!(scheme("redis://h").unwrap(), (false, false));
        assert_eq!(scheme("VALKEYS://h").unwrap(), (true, false));
        assert_eq!(scheme("rediss-sentinel://h").unwrap(), (true, true));
        for bad in ["redis-cluster://h", "redis+unix:///s", "http://h", "h:6379"] {
            assert!(scheme(bad).is_err(), "{bad}");
        }
    }
}
