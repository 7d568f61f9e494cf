//! What the library's HTTP routers share (features `status` and `receiver`): who may call them
//! — one rule for every route, as one axum middleware ([`HttpGuard`]) that the status page, the
//! OTLP receiver and `tool-health-gateway` all apply before any route runs — and how to
//! listen for them ([`nodelay`]).
//!
//! A listening socket is an attack surface even on 127.0.0.1. A web page the operator visits
//! can make the browser send *simple* requests anywhere (a form, `fetch(url, {mode:
//! "no-cors", body})`: a `text/plain` body, no preflight), and it can point a name it controls
//! at 127.0.0.1 (DNS rebinding) so that the browser takes the router for the page's own origin
//! and lets it read the answers. The guard refuses both:
//!
//! | check | answer |
//! |---|---|
//! | `Host` is not an allowed host (default: `localhost`, `127.0.0.1`, `[::1]`, any port) | `403` |
//! | `Origin` is present and is neither the request's own origin (its `Host`) nor an allowed origin | `403` |
//! | a request that changes state, without `Origin`, says `Sec-Fetch-Site: cross-site` or `same-site` | `403` |
//!
//! So a request a browser makes for another site's page never reaches a route: it carries a
//! foreign `Origin` (every cross-origin `POST` and every cross-origin `fetch` does) or a
//! foreign `Host` (rebinding). Programs that are not browsers — OTLP exporters, MCP clients,
//! `curl` — send no `Origin` and a loopback `Host`, and pass.
//!
//! Behind the guard, each route that changes state takes only a body of its own declared type
//! or a bearer token — a report and a claim `application/json` ([`require_json`]), a trace
//! request an OTLP type, a control `Authorization: Bearer` — none of which a page can send
//! without the browser asking first (a CORS preflight, which no route here approves): a
//! second wall, should a browser ever omit `Origin`.
//!
//! ```
//! use tool_health::web::HttpGuard;
//!
//! // Behind a reverse proxy that answers as `health.example.com`, with a dashboard elsewhere
//! // reading the JSON from the browser:
//! let guard = HttpGuard::builder()
//!     .allow_host("health.example.com")
//!     .allow_origin("https://dashboards.example.com")
//!     .build()
//!     .expect("valid hosts and origins");
//! # let _ = guard;
//! let app = HttpGuard::loopback().apply(axum::Router::new());
//! # let _: axum::Router = app;
//! ```

use std::fmt;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;

/// The host names every guard allows (any port): the loopback names.
pub const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// The longest host or origin a guard takes, in bytes.
const MAX_ENTRY_LEN: usize = 512;

/// The rule every route of a router follows (see the [module docs](self)): `Host` and
/// `Origin` checked, and no `POST` a page could send without asking first. Cheap to clone.
#[derive(Clone)]
pub struct HttpGuard {
    rules: Arc<Rules>,
}

struct Rules {
    /// `None`: any host ([`HttpGuardBuilder::allow_any_host`]).
    hosts: Option<Vec<HostRule>>,
    origins: Vec<OriginRule>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct HostRule {
    host: String,
    /// `None`: any port.
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Port {
    Any,
    Exact(u16),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum OriginRule {
    Null,
    Tuple {
        scheme: String,
        host: String,
        port: Port,
    },
}

impl fmt::Debug for HttpGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpGuard")
            .field("hosts", &self.rules.hosts)
            .field("origins", &self.rules.origins)
            .finish()
    }
}

impl Default for HttpGuard {
    /// [`HttpGuard::loopback`].
    fn default() -> Self {
        Self::loopback()
    }
}

/// Builds an [`HttpGuard`]: the loopback names are always allowed; add the names clients
/// reach the router by and the origins of pages that may call it.
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct HttpGuardBuilder {
    hosts: Vec<String>,
    origins: Vec<String>,
    any_host: bool,
}

impl HttpGuardBuilder {
    /// A `Host` the router answers besides the loopback names: `name` (any port) or
    /// `name:port` (that port only); `[v6]` for an IPv6 address. Needed when the router
    /// listens beyond loopback and clients reach it by a name or an address.
    pub fn allow_host(mut self, host: impl Into<String>) -> Self {
        self.hosts.push(host.into());
        self
    }

    /// Every `Host` is answered: for a router behind a reverse proxy that checks `Host`
    /// itself. Without such a proxy, a page on any site can read the router through DNS
    /// rebinding.
    pub fn allow_any_host(mut self) -> Self {
        self.any_host = true;
        self
    }

    /// The origin of a page that may call the router from a browser (its own pages always
    /// may): `scheme://host` (the scheme's default port), `scheme://host:port`,
    /// `scheme://host:*` (any port), or `null` (sandboxed pages and `file:` — rarely what you
    /// want).
    pub fn allow_origin(mut self, origin: impl Into<String>) -> Self {
        self.origins.push(origin.into());
        self
    }

    /// The guard; an error names the setting and the value that is not a host or an origin.
    pub fn build(self) -> Result<HttpGuard, GuardError> {
        let mut hosts: Vec<HostRule> = LOOPBACK_HOSTS
            .iter()
            .filter_map(|h| parse_host_rule(h))
            .collect();
        for h in &self.hosts {
            hosts.push(parse_host_rule(h).ok_or_else(|| GuardError {
                setting: "allow_host",
                value: shown(h),
                expected: "a host name or address, with an optional :port (`gw.local`, `gw.local:8080`, `[fd00::1]`)",
            })?);
        }
        let mut origins = Vec::new();
        for o in &self.origins {
            origins.push(parse_origin_rule(o).ok_or_else(|| GuardError {
                setting: "allow_origin",
                value: shown(o),
                expected: "scheme://host, scheme://host:port, scheme://host:* or null (`https://app.example.com`)",
            })?);
        }
        Ok(HttpGuard {
            rules: Arc::new(Rules {
                hosts: (!self.any_host).then_some(hosts),
                origins,
            }),
        })
    }
}

/// A host or origin [`HttpGuardBuilder::build`] could not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardError {
    /// The builder method (`allow_host`, `allow_origin`).
    pub setting: &'static str,
    /// The value given (bounded, control characters escaped).
    pub value: String,
    /// What the setting takes.
    pub expected: &'static str,
}

impl fmt::Display for GuardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` {:?} is not valid: expected {}",
            self.setting, self.value, self.expected
        )
    }
}

impl std::error::Error for GuardError {}

/// A value for an error message: at most 100 characters, escaped.
fn shown(value: &str) -> String {
    let mut out: String = value
        .chars()
        .take(100)
        .flat_map(char::escape_debug)
        .collect();
    if value.chars().nth(100).is_some() {
        out.push('…');
    }
    out
}

/// Why the guard refused a request: the status to answer and what to tell the caller (never
/// the request's own header values).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    status: StatusCode,
    message: &'static str,
}

impl Refusal {
    /// `403` (host or origin) or `415` (a body a page could send without asking).
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// What was refused and how to allow it.
    pub fn message(&self) -> &'static str {
        self.message
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message)
    }
}

impl IntoResponse for Refusal {
    /// The status with `{"error": message}`.
    fn into_response(self) -> Response {
        // The messages are constants without quotes or backslashes: no escaping needed.
        let body = format!("{{\"error\":\"{}\"}}", self.message);
        (
            self.status,
            [
                (
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                ),
                (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            ],
            body,
        )
            .into_response()
    }
}

const HOST_REFUSED: Refusal = Refusal {
    status: StatusCode::FORBIDDEN,
    message: "this Host is not one the server answers to (a guard against DNS rebinding): \
              allow it (tool-health-gateway --allow-host NAME; HttpGuardBuilder::allow_host)",
};
const ORIGIN_REFUSED: Refusal = Refusal {
    status: StatusCode::FORBIDDEN,
    message: "requests from this Origin are refused (a guard against cross-site requests): \
              allow it (tool-health-gateway --allow-origin ORIGIN; HttpGuardBuilder::allow_origin)",
};
const CROSS_SITE_REFUSED: Refusal = Refusal {
    status: StatusCode::FORBIDDEN,
    message: "a cross-site request that changes state is refused",
};

const JSON_REQUIRED: Refusal = Refusal {
    status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
    message: "this route takes Content-Type: application/json",
};

/// `Ok` when the request says its body is JSON (`Content-Type: application/json`, parameters
/// allowed), else the `415` to answer: the check of a route whose body is JSON (the gates'
/// `claim` and `report`), on top of the guard's.
pub fn require_json(headers: &HeaderMap) -> Result<(), Refusal> {
    let essence = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|t| t.split(';').next())
        .map(str::trim);
    match essence {
        Some(t) if t.eq_ignore_ascii_case("application/json") => Ok(()),
        _ => Err(JSON_REQUIRED),
    }
}

impl HttpGuard {
    /// The default: the loopback names (any port), no other origin than the router's own.
    pub fn loopback() -> Self {
        HttpGuardBuilder::default()
            .build()
            .unwrap_or_else(|_| unreachable!("the loopback names parse"))
    }

    /// A builder, starting from [`loopback`](Self::loopback).
    pub fn builder() -> HttpGuardBuilder {
        HttpGuardBuilder::default()
    }

    /// Whether a request may reach a route. Its host is the `Host` header, else the URI's
    /// authority (HTTP/2's `:authority`); a request with neither (HTTP/1.0, a router called
    /// in process) comes from no browser, and only the other checks apply.
    pub fn check(&self, method: &Method, uri: &Uri, headers: &HeaderMap) -> Result<(), Refusal> {
        let host = match headers.get(header::HOST) {
            Some(h) => Some(h.to_str().map_err(|_| HOST_REFUSED)?),
            None => uri.authority().map(|a| a.as_str()),
        };
        if let (Some(rules), Some(host)) = (&self.rules.hosts, host) {
            let allowed =
                parse_authority(host).is_some_and(|(h, p)| rules.iter().any(|r| r.matches(&h, p)));
            if !allowed {
                return Err(HOST_REFUSED);
            }
        }
        let changes_state = !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
        match headers.get(header::ORIGIN) {
            Some(origin) => {
                let origin = origin.to_str().map_err(|_| ORIGIN_REFUSED)?;
                if !self.origin_allowed(origin, host) {
                    return Err(ORIGIN_REFUSED);
                }
            }
            None if changes_state => {
                let site = headers.get("sec-fetch-site").map(HeaderValue::as_bytes);
                if matches!(site, Some(b"cross-site" | b"same-site")) {
                    return Err(CROSS_SITE_REFUSED);
                }
            }
            None => {}
        }
        Ok(())
    }

    fn origin_allowed(&self, origin: &str, host: Option<&str>) -> bool {
        let origin = origin.trim();
        if origin.eq_ignore_ascii_case("null") {
            return self.rules.origins.contains(&OriginRule::Null);
        }
        let Some((scheme, o_host, o_port)) = parse_origin(origin) else {
            return false;
        };
        // Its own origin: the page came from this very router (`Host` was checked above).
        let same = host
            .and_then(parse_authority)
            .is_some_and(|(h, p)| h == o_host && p.or_else(|| default_port(&scheme)) == o_port);
        same || self.rules.origins.iter().any(|r| match r {
            OriginRule::Null => false,
            OriginRule::Tuple {
                scheme: s,
                host: h,
                port,
            } => {
                *s == scheme
                    && *h == o_host
                    && match port {
                        Port::Any => true,
                        Port::Exact(p) => o_port == Some(*p),
                    }
            }
        })
    }

    /// `router` with the guard in front of every route (and its fallback): what the status
    /// router, the receiver's routers and the gateway do.
    pub fn apply<S>(&self, router: Router<S>) -> Router<S>
    where
        S: Clone + Send + Sync + 'static,
    {
        router.layer(axum::middleware::from_fn_with_state(self.clone(), guard))
    }
}

/// The middleware [`HttpGuard::apply`] installs.
async fn guard(State(g): State<HttpGuard>, request: Request, next: Next) -> Response {
    match g.check(request.method(), request.uri(), request.headers()) {
        Ok(()) => next.run(request).await,
        Err(refusal) => {
            tracing::debug!(
                target: "tool_health::web",
                method = %request.method(),
                path = %shown(request.uri().path()),
                "refused: {}",
                refusal.message
            );
            refusal.into_response()
        }
    }
}

/// `listener` with `TCP_NODELAY` on every connection it accepts, for `axum::serve`: an answer
/// goes out when it is written. axum leaves Nagle's algorithm on, and an answer written in
/// pieces (headers, then a body or an event stream's frames) then waits for the client's
/// delayed ACK — about 40 ms a request with the official MCP TypeScript SDK client (issue 29:
/// the gateway's `tools/call` p50 went from 41.7 ms to 1.9 ms with it).
///
/// ```no_run
/// # async fn run() -> std::io::Result<()> {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:9464").await?;
/// let app = axum::Router::new();
/// axum::serve(tool_health::web::nodelay(listener), app).await
/// # }
/// ```
pub fn nodelay(
    listener: tokio::net::TcpListener,
) -> impl axum::serve::Listener<Io = tokio::net::TcpStream, Addr = std::net::SocketAddr> {
    use axum::serve::ListenerExt as _;
    listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(target: "tool_health::web", "TCP_NODELAY: {e}");
        }
    })
}

impl HostRule {
    fn matches(&self, host: &str, port: Option<u16>) -> bool {
        self.host == host && self.port.is_none_or(|p| port == Some(p))
    }
}

/// A host name for comparison: lower case, IPv6 brackets off.
fn normalize_host(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase()
}

/// `host[:port]` (a `Host` header, an allowed host).
fn parse_authority(value: &str) -> Option<(String, Option<u16>)> {
    let value = value.trim();
    if value.is_empty() || value.len() > MAX_ENTRY_LEN || value.contains(['/', '@', '?', '#']) {
        return None;
    }
    let a = axum::http::uri::Authority::try_from(value).ok()?;
    if a.host().is_empty() {
        return None;
    }
    // `Authority` takes `host:` and `host:x`; a port must be a number.
    if a.as_str().ends_with(':') || (a.as_str().len() > a.host().len() && a.port().is_none()) {
        return None;
    }
    Some((normalize_host(a.host()), a.port_u16()))
}

fn parse_host_rule(value: &str) -> Option<HostRule> {
    parse_authority(value).map(|(host, port)| HostRule { host, port })
}

/// `scheme://host[:port]`: the scheme, the host, the port (explicit or the scheme's default).
fn parse_origin(value: &str) -> Option<(String, String, Option<u16>)> {
    if value.len() > MAX_ENTRY_LEN {
        return None;
    }
    let (scheme, rest) = value.split_once("://")?;
    if scheme.is_empty()
        || !scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
    {
        return None;
    }
    let scheme = scheme.to_ascii_lowercase();
    let (host, port) = parse_authority(rest)?;
    let port = port.or_else(|| default_port(&scheme));
    Some((scheme, host, port))
}

fn parse_origin_rule(value: &str) -> Option<OriginRule> {
    let value = value.trim();
    if value.eq_ignore_ascii_case("null") {
        return Some(OriginRule::Null);
    }
    if let Some(base) = value.strip_suffix(":*") {
        let (scheme, host, _) = parse_origin(base)?;
        // No port before the wildcard.
        let (_, rest) = base.split_once("://")?;
        if parse_authority(rest)?.1.is_some() {
            return None;
        }
        return Some(OriginRule::Tuple {
            scheme,
            host,
            port: Port::Any,
        });
    }
    let (scheme, host, port) = parse_origin(value)?;
    Some(OriginRule::Tuple {
        scheme,
        host,
        port: port.map_or(Port::Any, Port::Exact),
    })
}

/// The port a scheme implies when an origin omits it.
fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    fn status(g: &HttpGuard, method: Method, pairs: &[(&str, &str)]) -> u16 {
        match g.check(&method, &Uri::from_static("/"), &headers(pairs)) {
            Ok(()) => 200,
            Err(r) => r.status().as_u16(),
        }
    }

    #[test]
    fn loopback_hosts_pass_and_others_are_refused() {
        let g = HttpGuard::loopback();
        for host in [
            "127.0.0.1:8080",
            "localhost",
            "LOCALHOST:1",
            "[::1]:9",
            "127.0.0.1",
        ] {
            assert_eq!(status(&g, Method::GET, &[("host", host)]), 200, "{host}");
        }
        for host in [
            "rebind.evil.example:8080",
            "127.0.0.1.evil.example",
            "0.0.0.0:8080",
            "127.0.0.2",
            "",
            "127.0.0.1:x",
            "user@127.0.0.1",
        ] {
            assert_eq!(status(&g, Method::GET, &[("host", host)]), 403, "{host:?}");
        }
        // No Host at all: no browser; the URI's authority when there is one (HTTP/2).
        assert_eq!(status(&g, Method::GET, &[]), 200);
        let h2 = |authority: &str| {
            let uri = Uri::try_from(format!("http://{authority}/tools")).unwrap();
            g.check(&Method::GET, &uri, &HeaderMap::new()).is_ok()
        };
        assert!(h2("127.0.0.1:9464"));
        assert!(!h2("rebind.evil.example:9464"));
        let any = HttpGuard::builder().allow_any_host().build().unwrap();
        assert_eq!(status(&any, Method::GET, &[("host", "x.example")]), 200);
    }

    #[test]
    fn allowed_hosts_match_their_port_when_they_name_one() {
        let g = HttpGuard::builder()
            .allow_host("GW.local")
            .allow_host("api.example:8443")
            .allow_host("[fd00::1]")
            .build()
            .unwrap();
        assert_eq!(status(&g, Method::GET, &[("host", "gw.local:1234")]), 200);
        assert_eq!(
            status(&g, Method::GET, &[("host", "api.example:8443")]),
            200
        );
        assert_eq!(
            status(&g, Method::GET, &[("host", "api.example:8444")]),
            403
        );
        assert_eq!(status(&g, Method::GET, &[("host", "api.example")]), 403);
        assert_eq!(status(&g, Method::GET, &[("host", "[fd00::1]:80")]), 200);
        for bad in ["", "a b", "http://x", "x:y", "x/y"] {
            let e = HttpGuard::builder().allow_host(bad).build().unwrap_err();
            assert_eq!(e.setting, "allow_host", "{bad:?}");
        }
    }

    #[test]
    fn an_origin_is_its_own_or_an_allowed_one() {
        let g = HttpGuard::builder()
            .allow_origin("https://app.example.com")
            .allow_origin("http://localhost:*")
            .build()
            .unwrap();
        let h = "127.0.0.1:8080";
        // Its own pages (the scheme is not compared: a TLS proxy in front serves the same
        // authority as https).
        assert_eq!(
            status(
                &g,
                Method::GET,
                &[("host", h), ("origin", "https://127.0.0.1:8080")]
            ),
            200
        );
        assert_eq!(
            status(
                &g,
                Method::POST,
                &[
                    ("host", h),
                    ("origin", "http://127.0.0.1:8080"),
                    ("authorization", "Bearer x")
                ]
            ),
            200
        );
        assert_eq!(
            status(
                &g,
                Method::GET,
                &[("host", "localhost"), ("origin", "http://localhost")]
            ),
            200
        );
        // Allowed ones.
        assert_eq!(
            status(
                &g,
                Method::GET,
                &[("host", h), ("origin", "https://app.example.com")]
            ),
            200
        );
        assert_eq!(
            status(
                &g,
                Method::GET,
                &[("host", h), ("origin", "https://app.example.com:443")]
            ),
            200
        );
        assert_eq!(
            status(
                &g,
                Method::GET,
                &[("host", h), ("origin", "http://localhost:3000")]
            ),
            200
        );
        // Others.
        for origin in [
            "http://evil.example",
            "http://127.0.0.1:3000",
            "http://app.example.com",
            "https://app.example.com:8443",
            "null",
            "garbage",
            "",
        ] {
            assert_eq!(
                status(&g, Method::GET, &[("host", h), ("origin", origin)]),
                403,
                "{origin:?}"
            );
        }
        let with_null = HttpGuard::builder().allow_origin("null").build().unwrap();
        assert_eq!(
            status(&with_null, Method::GET, &[("host", h), ("origin", "null")]),
            200
        );
        for bad in [
            "app.example.com",
            "https://",
            "https://a:443:*",
            "https://a/path",
        ] {
            let e = HttpGuard::builder().allow_origin(bad).build().unwrap_err();
            assert_eq!(e.setting, "allow_origin", "{bad:?}");
        }
    }

    #[test]
    fn a_cross_site_request_without_origin_is_refused_when_it_changes_state() {
        let g = HttpGuard::loopback();
        let h = ("host", "127.0.0.1:8080");
        let cross = ("sec-fetch-site", "cross-site");
        assert_eq!(status(&g, Method::POST, &[h, cross]), 403);
        assert_eq!(
            status(&g, Method::POST, &[h, ("sec-fetch-site", "same-site")]),
            403
        );
        assert_eq!(
            status(&g, Method::POST, &[h, ("sec-fetch-site", "same-origin")]),
            200
        );
        assert_eq!(
            status(&g, Method::POST, &[h, ("sec-fetch-site", "none")]),
            200
        );
        assert_eq!(status(&g, Method::GET, &[h, cross]), 200, "a link followed");
    }

    #[test]
    fn a_json_route_takes_json_only() {
        let ok = |ct: &str| require_json(&headers(&[("content-type", ct)])).is_ok();
        assert!(ok("application/json"));
        assert!(ok("Application/JSON; charset=utf-8"));
        for ct in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data",
            "application/jsonx",
            "",
        ] {
            assert!(!ok(ct), "{ct:?}");
        }
        let e = require_json(&HeaderMap::new()).unwrap_err();
        assert_eq!(e.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    }
}
