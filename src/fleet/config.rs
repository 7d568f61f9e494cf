//! [`FleetBuilder`]: the store's URL, credentials, key prefix, timings and policies, from code
//! or from the environment. Credentials never appear in `Debug`, errors or logs: the URL is
//! kept as a [`Secret`] and shown only without its password.

use std::fmt;
#[cfg(feature = "fleet-tls")]
use std::sync::Arc;
use std::time::Duration;

use super::FleetError;

/// How fleet-wide failure rates combine with each replica's own window (tools whose policy is
/// [`TripPolicy::FailureRate`](crate::TripPolicy::FailureRate)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum RateScope {
    /// Each replica trips on its own window only; no counts are shared.
    Local,
    /// Only the fleet's window trips (every replica's calls, summed in the store). While the
    /// store is unreachable each replica falls back to its own window, so it keeps breaking.
    Fleet,
    /// Either window trips (the default): a replica that sees enough failures trips at once,
    /// and replicas that each see too few calls trip together.
    #[default]
    Either,
}

impl RateScope {
    fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "local" => Some(Self::Local),
            "fleet" => Some(Self::Fleet),
            "either" => Some(Self::Either),
            _ => None,
        }
    }
}

/// A value that never prints (a password, a URL that may hold one).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Secret(pub(crate) String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"***\"")
    }
}

/// The default key prefix: `tool_health`.
pub const DEFAULT_PREFIX: &str = "tool_health";
/// The default poll interval: 1 s.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);
/// The default timeout of each command to the store: 250 ms.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_millis(250);
/// The probe lease used for tools whose `probe_timeout` is zero (no local lease): 30 s.
pub const DEFAULT_PROBE_LEASE: Duration = Duration::from_secs(30);

/// The environment variables [`FleetBuilder::from_env`] reads.
pub mod env {
    /// The store's URL: `redis://[user[:password]@]host[:port][/db]` (`valkey://` too),
    /// `rediss://` / `valkeys://` for TLS (feature `fleet-tls`), `redis-sentinel://` for a
    /// Sentinel-managed primary, `redis-cluster://host:port[?node=host:port&..]`
    /// (`valkey-cluster://`, `rediss-cluster://`) for a Redis or Valkey cluster. Required.
    pub const URL: &str = "TOOL_HEALTH_FLEET_URL";
    /// On a cluster, how many shards the fleet's keys are spread over (default 3; 1–64):
    /// every replica of a fleet must use the same number.
    pub const SHARDS: &str = "TOOL_HEALTH_FLEET_SHARDS";
    /// The ACL user, if not in the URL.
    pub const USERNAME: &str = "TOOL_HEALTH_FLEET_USERNAME";
    /// The password, so that it need not be in the URL (it wins over the URL's).
    pub const PASSWORD: &str = "TOOL_HEALTH_FLEET_PASSWORD";
    /// The key prefix (default `tool_health`): fleets sharing a store are isolated by it.
    pub const PREFIX: &str = "TOOL_HEALTH_FLEET_PREFIX";
    /// The poll interval in milliseconds (default 1000).
    pub const POLL_INTERVAL_MS: &str = "TOOL_HEALTH_FLEET_POLL_INTERVAL_MS";
    /// The timeout of each command in milliseconds (default 250).
    pub const COMMAND_TIMEOUT_MS: &str = "TOOL_HEALTH_FLEET_COMMAND_TIMEOUT_MS";
    /// `local`, `fleet` or `either` (default).
    pub const RATE_SCOPE: &str = "TOOL_HEALTH_FLEET_RATE_SCOPE";
    /// Replicas that must trip before the fleet opens (default 1).
    pub const QUORUM: &str = "TOOL_HEALTH_FLEET_QUORUM";
    /// A PEM file of CA certificates to trust for `rediss://` instead of the platform's roots.
    pub const TLS_CA_FILE: &str = "TOOL_HEALTH_FLEET_TLS_CA_FILE";
}

/// Configures fleet mode for one registry: see the [module docs](super).
///
/// ```no_run
/// # async fn run() -> Result<(), tool_health::fleet::FleetError> {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use tool_health::fleet::{FleetBuilder, RateScope};
/// use tool_health::ToolHealthRegistry;
///
/// let registry = Arc::new(ToolHealthRegistry::new());
/// let fleet = FleetBuilder::new("redis://agent:s3cret@valkey.internal:6379")
///     .prefix("checkout-agents")
///     .poll_interval(Duration::from_millis(500))
///     .rate_scope(RateScope::Either)
///     .start(&registry)?; // inside a tokio runtime; never waits for the store
/// # let _ = fleet; Ok(()) }
/// ```
#[derive(Clone)]
#[must_use]
pub struct FleetBuilder {
    pub(crate) url: Secret,
    pub(crate) username: Option<String>,
    pub(crate) password: Option<Secret>,
    pub(crate) prefix: String,
    pub(crate) poll_interval: Duration,
    pub(crate) command_timeout: Duration,
    pub(crate) probe_lease: Duration,
    pub(crate) rate_scope: RateScope,
    pub(crate) quorum: u32,
    pub(crate) quorum_window: Duration,
    pub(crate) shards: u16,
    pub(crate) tls_ca_file: Option<std::path::PathBuf>,
    #[cfg(feature = "fleet-tls")]
    pub(crate) tls: Option<Arc<rustls::ClientConfig>>,
}

impl fmt::Debug for FleetBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetBuilder")
            .field("url", &redact_url(&self.url.0))
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("prefix", &self.prefix)
            .field("poll_interval", &self.poll_interval)
            .field("command_timeout", &self.command_timeout)
            .field("probe_lease", &self.probe_lease)
            .field("rate_scope", &self.rate_scope)
            .field("quorum", &self.quorum)
            .field("quorum_window", &self.quorum_window)
            .field("shards", &self.shards)
            .field("tls_ca_file", &self.tls_ca_file)
            .field("tls_config", &self.has_tls_config())
            .finish()
    }
}

impl FleetBuilder {
    /// A fleet on the store at `url` (see [`env::URL`] for the forms), with the defaults: key
    /// prefix [`DEFAULT_PREFIX`], poll every [`DEFAULT_POLL_INTERVAL`], commands time out after
    /// [`DEFAULT_COMMAND_TIMEOUT`], [`RateScope::Either`], quorum 1. The URL is checked by
    /// [`start`](Self::start).
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: Secret(url.into()),
            username: None,
            password: None,
            prefix: DEFAULT_PREFIX.to_owned(),
            poll_interval: DEFAULT_POLL_INTERVAL,
            command_timeout: DEFAULT_COMMAND_TIMEOUT,
            probe_lease: DEFAULT_PROBE_LEASE,
            rate_scope: RateScope::default(),
            quorum: 1,
            quorum_window: Duration::from_secs(60),
            shards: super::keys::DEFAULT_SHARDS,
            tls_ca_file: None,
            #[cfg(feature = "fleet-tls")]
            tls: None,
        }
    }

    fn has_tls_config(&self) -> bool {
        #[cfg(feature = "fleet-tls")]
        return self.tls.is_some();
        #[cfg(not(feature = "fleet-tls"))]
        false
    }

    /// A builder from the environment ([`mod@env`] lists the variables); `Ok(None)` when
    /// [`env::URL`] is not set (fleet mode off), an error when a variable is set but invalid
    /// (the error names the variable, never its value).
    pub fn from_env() -> Result<Option<Self>, FleetError> {
        let var = crate::environment::var;
        let Some(url) = var(env::URL) else {
            return Ok(None);
        };
        let mut b = Self::new(url);
        if let Some(u) = var(env::USERNAME) {
            b = b.username(u);
        }
        if let Some(p) = var(env::PASSWORD) {
            b = b.password(p);
        }
        if let Some(p) = var(env::PREFIX) {
            b = b.prefix(p);
        }
        let millis = |name: &'static str| -> Result<Option<Duration>, FleetError> {
            var(name)
                .map(|v| {
                    v.trim()
                        .parse::<u64>()
                        .ok()
                        .filter(|ms| *ms > 0)
                        .map(Duration::from_millis)
                        .ok_or_else(|| {
                            FleetError::Config(format!("{name} must be a positive integer"))
                        })
                })
                .transpose()
        };
        if let Some(d) = millis(env::POLL_INTERVAL_MS)? {
            b = b.poll_interval(d);
        }
        if let Some(d) = millis(env::COMMAND_TIMEOUT_MS)? {
            b = b.command_timeout(d);
        }
        if let Some(s) = var(env::RATE_SCOPE) {
            let scope = RateScope::parse(&s).ok_or_else(|| {
                FleetError::Config(format!(
                    "{} must be `local`, `fleet` or `either`",
                    env::RATE_SCOPE
                ))
            })?;
            b = b.rate_scope(scope);
        }
        if let Some(q) = var(env::QUORUM) {
            let q = q
                .trim()
                .parse::<u32>()
                .ok()
                .filter(|q| *q >= 1)
                .ok_or_else(|| {
                    FleetError::Config(format!("{} must be an integer ≥ 1", env::QUORUM))
                })?;
            b = b.quorum(q);
        }
        if let Some(n) = var(env::SHARDS) {
            let n = n.trim().parse::<u16>().ok().ok_or_else(|| {
                FleetError::Config(format!(
                    "{} must be an integer from 1 to {}",
                    env::SHARDS,
                    super::keys::MAX_SHARDS
                ))
            })?;
            b = b.shards(n);
        }
        if let Some(path) = var(env::TLS_CA_FILE) {
            b = b.tls_ca_file(path);
        }
        Ok(Some(b))
    }

    /// The ACL user (wins over the URL's).
    pub fn username(mut self, username: impl Into<String>) -> Self {
        self.username = Some(username.into());
        self
    }

    /// The password (wins over the URL's), so that it need not be in the URL.
    pub fn password(mut self, password: impl Into<String>) -> Self {
        self.password = Some(Secret(password.into()));
        self
    }

    /// The key prefix (default [`DEFAULT_PREFIX`]): replicas sharing a prefix are one fleet;
    /// fleets sharing a store are isolated by it. 1–64 characters of `A–Z a–z 0–9 _ - .`.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// How often the store is polled (default 1 s): the bound on how late a replica learns of a
    /// decision whose message it missed, and the period of the fleet-wide failure-rate counts.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// How long any command to the store may take (default 250 ms). A hanging store (a paused
    /// process, a black-holed network) is only ever noticed through it.
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// The probe lease for tools without a local one (`probe_timeout` zero); default 30 s.
    /// Tools with a `probe_timeout` lease the fleet's probe for that long. A won claim lasts
    /// the lease plus twice `lead` (2 × the command timeout) past the cooldown — the winner's
    /// gate may grant the probe until `lead` before it ends — and a probe granted is covered
    /// for its lease plus `lead` from then (a prober that died frees it after that).
    pub fn probe_lease(mut self, lease: Duration) -> Self {
        self.probe_lease = lease;
        self
    }

    /// How fleet-wide failure rates combine with local ones (default [`RateScope::Either`]).
    pub fn rate_scope(mut self, scope: RateScope) -> Self {
        self.rate_scope = scope;
        self
    }

    /// Open fleet-wide only after `k` replicas tripped within the quorum window (default 1:
    /// any replica's trip opens everywhere). A replica's own breaker opens on its own trip
    /// either way.
    pub fn quorum(mut self, k: u32) -> Self {
        self.quorum = k;
        self
    }

    /// How recent a replica's trip must be to count toward the quorum (default 60 s).
    pub fn quorum_window(mut self, window: Duration) -> Self {
        self.quorum_window = window;
        self
    }

    /// On a cluster (`redis-cluster://`), how many shards the fleet's keys are spread over
    /// (default 3, at most 64): shard `i` lives in a slot of the `i`-th of that many equal parts
    /// of the slot space, so set it to the cluster's number of primaries to give each one shard
    /// (FLEET.md, "Cluster mode"). Every replica of a fleet must use the same number, as it
    /// must the same prefix. Ignored on a single server.
    pub fn shards(mut self, shards: u16) -> Self {
        self.shards = shards;
        self
    }

    /// A PEM file of CA certificates to trust for `rediss://` instead of the platform's roots
    /// (which honour `SSL_CERT_FILE` / `SSL_CERT_DIR`). Needs feature `fleet-tls`.
    pub fn tls_ca_file(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.tls_ca_file = Some(path.into());
        self
    }

    /// A complete rustls client config for `rediss://` (roots, client certificates, provider):
    /// used as is. Needs feature `fleet-tls`.
    #[cfg(feature = "fleet-tls")]
    pub fn tls_config(mut self, config: rustls::ClientConfig) -> Self {
        self.tls = Some(Arc::new(config));
        self
    }

    /// Checks every setting: the errors [`start`](Self::start) would give, without starting.
    pub(crate) fn validate(&self) -> Result<(), FleetError> {
        let p = &self.prefix;
        if p.is_empty()
            || p.len() > 64
            || !p
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        {
            return Err(FleetError::Config(
                "the key prefix must be 1–64 characters of A–Z a–z 0–9 _ - .".into(),
            ));
        }
        let positive = |name: &str, d: Duration| {
            if d.is_zero() || d > Duration::from_secs(24 * 3600) {
                Err(FleetError::Config(format!(
                    "{name} must be above zero and at most a day"
                )))
            } else {
                Ok(())
            }
        };
        positive("the poll interval", self.poll_interval)?;
        positive("the command timeout", self.command_timeout)?;
        positive("the probe lease", self.probe_lease)?;
        positive("the quorum window", self.quorum_window)?;
        if self.quorum == 0 || self.quorum > 1000 {
            return Err(FleetError::Config("the quorum must be 1–1000".into()));
        }
        if self.shards == 0 || self.shards > super::keys::MAX_SHARDS {
            return Err(FleetError::Config(format!(
                "the number of shards must be 1–{}",
                super::keys::MAX_SHARDS
            )));
        }
        Ok(())
    }
}

/// The URL without its password (and without anything after the host): for messages.
pub(crate) fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "<not a URL>".to_owned();
    };
    let rest = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    let host: String = rest
        .chars()
        .take_while(|c| !matches!(c, '/' | '?' | '#'))
        .take(128)
        .collect();
    let user = url
        .split_once("://")
        .and_then(|(_, r)| r.rsplit_once('@'))
        .map(|(creds, _)| if creds.is_empty() { "" } else { "***@" })
        .unwrap_or("");
    format!("{scheme}://{user}{host}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_shown_without_credentials() {
        assert_eq!(
            redact_url("redis://th:s3cret@127.0.0.1:6379/2"),
            "redis://***@127.0.0.1:6379"
        );
        assert_eq!(redact_url("rediss://:p%40ss@h:1"), "rediss://***@h:1");
        assert_eq!(redact_url("redis://h"), "redis://h");
        assert_eq!(redact_url("s3cret"), "<not a URL>");
        let b = FleetBuilder::new("redis://u:s3cret@h:1").password("s3cret2");
        let shown = format!("{b:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
    }

    #[test]
    fn settings_are_checked() {
        assert!(FleetBuilder::new("redis://h").validate().is_ok());
        for b in [
            FleetBuilder::new("redis://h").prefix(""),
            FleetBuilder::new("redis://h").prefix("a b"),
            FleetBuilder::new("redis://h").prefix("x".repeat(65)),
            FleetBuilder::new("redis://h").poll_interval(Duration::ZERO),
            FleetBuilder::new("redis://h").command_timeout(Duration::from_secs(100_000)),
            FleetBuilder::new("redis://h").quorum(0),
            FleetBuilder::new("redis-cluster://h").shards(0),
            FleetBuilder::new("redis-cluster://h").shards(65),
        ] {
            assert!(b.validate().is_err(), "{b:?}");
        }
    }
}
