//! The store's URL: its kind (a server, Sentinel, a cluster; TLS or not), the URL of the other
//! kind (for the message that says which to use), and Sentinel's credentials.

use fred::prelude::*;
use fred::types::config::ServerConfig;

use super::super::FleetError;

/// The URL's kind of store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Single,
    Sentinel,
    Cluster,
}

/// The URL's scheme, told apart: (TLS, kind).
pub(super) fn scheme(url: &str) -> Result<(bool, Kind), FleetError> {
    let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    let (tls, kind) = match scheme.as_deref() {
        Some("redis" | "valkey") => (false, Kind::Single),
        Some("rediss" | "valkeys") => (true, Kind::Single),
        Some("redis-sentinel" | "valkey-sentinel") => (false, Kind::Sentinel),
        Some("rediss-sentinel" | "valkeys-sentinel") => (true, Kind::Sentinel),
        Some("redis-cluster" | "valkey-cluster") => (false, Kind::Cluster),
        Some("rediss-cluster" | "valkeys-cluster") => (true, Kind::Cluster),
        _ => {
            return Err(FleetError::Config(
                "the fleet URL must start with redis://, rediss://, valkey://, valkeys://, \
                 redis-cluster://, rediss-cluster://, valkey-cluster://, valkeys-cluster:// or \
                 redis-sentinel:// (Unix sockets are not supported)"
                    .into(),
            ))
        }
    };
    Ok((tls, kind))
}

/// Sentinel's own credentials: the servers' (the URL's, or the builder's), as earlier
/// releases used them, unless the URL says otherwise with `sentinelUsername` /
/// `sentinelPassword` — an empty `sentinelPassword=` for sentinels that ask for none.
pub(super) fn sentinel_credentials(config: &mut Config, url: &str) {
    let ServerConfig::Sentinel {
        username, password, ..
    } = &mut config.server
    else {
        return;
    };
    let query = url.split_once('?').map_or("", |(_, q)| q);
    let said = |name: &str| {
        query
            .split('&')
            .any(|kv| kv.split_once('=').map_or(kv, |(k, _)| k) == name)
    };
    if !said("sentinelUsername") && !said("sentinelPassword") {
        *username = config.username.clone();
        *password = config.password.clone();
    }
    if password.as_deref() == Some("") {
        *password = None;
    }
    if username.as_deref() == Some("") {
        *username = None;
    }
}

/// The URL with its scheme's kind changed to `to` (for the message that says which to use).
pub(super) fn with_kind(shown_url: &str, to: Kind) -> String {
    let Some((scheme, rest)) = shown_url.split_once("://") else {
        return shown_url.to_owned();
    };
    let scheme = scheme.to_ascii_lowercase();
    let base = scheme
        .trim_end_matches("-cluster")
        .trim_end_matches("-sentinel");
    match to {
        Kind::Cluster => format!("{base}-cluster://{rest}"),
        _ => format!("{base}://{rest}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes_are_told_apart_and_the_rest_refused() {
        assert_eq!(scheme("redis://h").unwrap(), (false, Kind::Single));
        assert_eq!(scheme("VALKEYS://h").unwrap(), (true, Kind::Single));
        assert_eq!(
            scheme("rediss-sentinel://h").unwrap(),
            (true, Kind::Sentinel)
        );
        assert_eq!(scheme("redis-cluster://h").unwrap(), (false, Kind::Cluster));
        assert_eq!(
            scheme("valkeys-cluster://h").unwrap(),
            (true, Kind::Cluster)
        );
        for bad in ["redis+unix:///s", "http://h", "h:6379"] {
            assert!(scheme(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sentinels_are_authenticated_as_the_servers_unless_the_url_says_otherwise() {
        let sentinel = |url: &str| {
            let mut c = Config::from_url(url).expect("a sentinel URL");
            sentinel_credentials(&mut c, url);
            match c.server {
                ServerConfig::Sentinel {
                    username, password, ..
                } => (username, password),
                _ => unreachable!(),
            }
        };
        let s = |v: &str| Some(v.to_owned());
        assert_eq!(
            sentinel("redis-sentinel://u:p@h:26379?sentinelServiceName=m"),
            (s("u"), s("p"))
        );
        assert_eq!(
            sentinel("redis-sentinel://u:p@h:26379?sentinelServiceName=m&sentinelPassword=q"),
            (None, s("q"))
        );
        assert_eq!(
            sentinel("redis-sentinel://u:p@h:26379?sentinelServiceName=m&sentinelPassword="),
            (None, None)
        );
    }

    #[test]
    fn the_url_to_use_keeps_everything_but_the_kind() {
        assert_eq!(
            with_kind("redis://***@h:1", Kind::Cluster),
            "redis-cluster://***@h:1"
        );
        assert_eq!(
            with_kind("valkeys://h:1", Kind::Cluster),
            "valkeys-cluster://h:1"
        );
        assert_eq!(
            with_kind("rediss-cluster://h:1", Kind::Single),
            "rediss://h:1"
        );
    }
}
