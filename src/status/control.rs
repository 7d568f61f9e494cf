//! Operator controls over HTTP, behind a token: force a tool open or closed, release the
//! control, reset the tool's numbers. Mounted only when the builder was given a token; without
//! one the router is read-only (the control routes do not exist) and the page shows no
//! buttons.
//!
//! | route | does |
//! |---|---|
//! | `POST /tools/{tool}/force-open?seconds=N` | [`force_open_for`](crate::ToolHealthRegistry::force_open_for) N seconds (1 to 604,800; default 300) |
//! | `POST /tools/{tool}/force-closed` | [`force_closed`](crate::ToolHealthRegistry::force_closed) |
//! | `POST /tools/{tool}/release` | [`release_control`](crate::ToolHealthRegistry::release_control): the breaker decides again |
//! | `POST /tools/{tool}/reset` | [`reset`](crate::ToolHealthRegistry::reset) |
//!
//! Each needs `Authorization: Bearer <token>` (else 401), acts on a tracked tool only (else
//! 404: no control creates a tool), and answers with the tool's object as `GET /tools/{tool}`
//! shows it. The token is compared in time that depends on the configured token's length
//! only, never on how much of it a guess got right; it is never logged, never in the page,
//! never in a response. A header, not a cookie, carries it: a page elsewhere cannot make the
//! browser send it (no cross-site request forgery).

use std::fmt;
use std::time::Duration;

use axum::http::{header, HeaderMap, StatusCode};

/// The shortest control token accepted, in bytes.
pub const MIN_TOKEN_LEN: usize = 16;
/// The longest control token accepted, in bytes.
pub const MAX_TOKEN_LEN: usize = 256;
/// The longest isolation `force-open` accepts, in seconds (a week).
pub const MAX_FORCE_OPEN_SECS: u64 = 7 * 24 * 3600;
/// The isolation `force-open` applies without `seconds`.
pub const DEFAULT_FORCE_OPEN_SECS: u64 = 300;

/// An operator-control bearer token, as the status router checks it (and a server of your
/// own that serves controls, such as `tool-health-gateway`): [`MIN_TOKEN_LEN`] to
/// [`MAX_TOKEN_LEN`] bytes of visible ASCII, compared in time that depends on its length only.
/// Its `Debug` never shows it.
///
/// ```
/// use axum::http::{header, HeaderMap};
/// use tool_health::status::ControlToken;
///
/// let token = ControlToken::new("0123456789abcdef-token").unwrap();
/// let mut headers = HeaderMap::new();
/// headers.insert(header::AUTHORIZATION, "Bearer 0123456789abcdef-token".parse().unwrap());
/// assert!(token.authorizes(&headers));
/// assert!(ControlToken::new("short").is_err());
/// ```
#[derive(Clone)]
pub struct ControlToken(Box<[u8]>);

impl fmt::Debug for ControlToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl ControlToken {
    /// Checks the token's form: [`MIN_TOKEN_LEN`] to [`MAX_TOKEN_LEN`] bytes of visible ASCII.
    /// The error says what is wrong ("must be …"), never the token.
    pub fn new(token: impl Into<String>) -> Result<Self, String> {
        let token = token.into();
        let len = token.len();
        if !(MIN_TOKEN_LEN..=MAX_TOKEN_LEN).contains(&len) {
            return Err(format!(
                "must be {MIN_TOKEN_LEN} to {MAX_TOKEN_LEN} bytes long, got {len}"
            ));
        }
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("must be visible ASCII characters only (no spaces)".to_owned());
        }
        Ok(Self(token.into_bytes().into_boxed_slice()))
    }

    /// Whether `presented` is the token, in time independent of where they differ.
    fn matches(&self, presented: &[u8]) -> bool {
        let mut diff = u8::from(presented.len() != self.0.len());
        for (i, expected) in self.0.iter().enumerate() {
            let got = presented.get(i).copied().unwrap_or(0);
            diff |= expected ^ got;
        }
        std::hint::black_box(diff) == 0
    }

    /// Whether the request carries the token as `Authorization: Bearer <token>`.
    pub fn authorizes(&self, headers: &HeaderMap) -> bool {
        let Some(value) = headers.get(header::AUTHORIZATION) else {
            return false;
        };
        let value = value.as_bytes();
        let Some(presented) = value
            .strip_prefix(b"Bearer ")
            .or_else(|| value.strip_prefix(b"bearer "))
        else {
            return false;
        };
        self.matches(presented)
    }
}

/// One control action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    ForceOpen(Duration),
    ForceClosed,
    Release,
    Reset,
}

impl Action {
    /// The action named by the route's last segment, with its query (`seconds`).
    pub(super) fn parse(name: &str, query: Option<&str>) -> Result<Self, (StatusCode, String)> {
        match name {
            "force-open" => {
                let mut seconds = DEFAULT_FORCE_OPEN_SECS;
                for pair in query.unwrap_or("").split('&') {
                    if let Some(v) = pair.strip_prefix("seconds=") {
                        seconds = v
                            .parse()
                            .ok()
                            .filter(|s| (1..=MAX_FORCE_OPEN_SECS).contains(s))
                            .ok_or_else(|| {
                                (
                                    StatusCode::BAD_REQUEST,
                                    format!(
                                        "query parameter `seconds`: a whole number from 1 to \
                                         {MAX_FORCE_OPEN_SECS}"
                                    ),
                                )
                            })?;
                    }
                }
                Ok(Self::ForceOpen(Duration::from_secs(seconds)))
            }
            "force-closed" => Ok(Self::ForceClosed),
            "release" => Ok(Self::Release),
            "reset" => Ok(Self::Reset),
            _ => Err((
                StatusCode::NOT_FOUND,
                "no such control: force-open, force-closed, release, reset".to_owned(),
            )),
        }
    }

    /// Applies the action to a tracked tool.
    pub(super) fn apply(self, registry: &crate::ToolHealthRegistry, tool: &str) {
        match self {
            Self::ForceOpen(d) => {
                registry.force_open_for(tool, d);
            }
            Self::ForceClosed => {
                registry.force_closed(tool);
            }
            Self::Release => registry.release_control(tool),
            Self::Reset => registry.reset(tool),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn token_form_is_checked() {
        assert!(ControlToken::new("short")
            .unwrap_err()
            .contains("16 to 256"));
        assert!(ControlToken::new("x".repeat(257))
            .unwrap_err()
            .contains("got 257"));
        assert!(ControlToken::new("has a space in it!").is_err());
        assert!(ControlToken::new("0123456789abcdef").is_ok());
        assert_eq!(
            format!("{:?}", ControlToken::new("0123456789abcdef").unwrap()),
            "Token(<redacted>)"
        );
    }

    #[test]
    fn only_the_exact_bearer_token_authorizes() {
        let token = ControlToken::new("0123456789abcdef").unwrap();
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::AUTHORIZATION, HeaderValue::from_str(v).unwrap());
            token.authorizes(&h)
        };
        assert!(with("Bearer 0123456789abcdef"));
        assert!(!with("Bearer 0123456789abcdeF"));
        assert!(!with("Bearer 0123456789abcde"));
        assert!(!with("Bearer 0123456789abcdef0"));
        assert!(!with("Bearer "));
        assert!(!with("Basic 0123456789abcdef"));
        assert!(!with("0123456789abcdef"));
        assert!(!token.authorizes(&HeaderMap::new()));
    }

    #[test]
    fn actions_parse_with_bounded_seconds() {
        assert_eq!(
            Action::parse("force-open", None).unwrap(),
            Action::ForceOpen(Duration::from_secs(300))
        );
        assert_eq!(
            Action::parse("force-open", Some("seconds=5")).unwrap(),
            Action::ForceOpen(Duration::from_secs(5))
        );
        for bad in ["seconds=0", "seconds=604801", "seconds=x"] {
            let (code, msg) = Action::parse("force-open", Some(bad)).unwrap_err();
            assert_eq!(code, StatusCode::BAD_REQUEST);
            assert!(msg.contains("seconds"));
        }
        assert_eq!(Action::parse("reset", None).unwrap(), Action::Reset);
        assert_eq!(
            Action::parse("explode", None).unwrap_err().0,
            StatusCode::NOT_FOUND
        );
    }
}
