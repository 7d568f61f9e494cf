//! The operator-control token (`--control-token-file`, `TOOL_HEALTH_GATEWAY_TOKEN`): the
//! library's check ([`ControlToken`]) and the token itself for the status page's router.

use std::fmt;

use axum::http::HeaderMap;
use tool_health::status::ControlToken;

/// The control token: the library's check ([`ControlToken`]: length, visible ASCII,
/// constant-time comparison), and the token itself for the status page's router, which checks
/// its own copy. Its `Debug` never shows it.
#[derive(Clone)]
pub(crate) struct Token {
    check: ControlToken,
    raw: Box<str>,
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl Token {
    /// Checks the token's form (the reason on `Err`, without the token); a file's final
    /// newline is not part of it.
    pub(crate) fn new(token: &str) -> Result<Self, String> {
        let token = token.trim_end_matches(['\n', '\r']);
        let check = ControlToken::new(token).map_err(|e| format!("the control token {e}"))?;
        Ok(Self {
            check,
            raw: token.into(),
        })
    }

    /// The token itself, for the status page's router (which checks its own copy).
    pub(crate) fn expose(&self) -> String {
        self.raw.to_string()
    }

    /// Whether the request carries `Authorization: Bearer <token>`.
    pub(crate) fn authorizes(&self, headers: &HeaderMap) -> bool {
        self.check.authorizes(headers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::header;

    #[test]
    fn the_token_is_checked_whole_and_never_shown() {
        let t = Token::new("0123456789abcdef-token\n").unwrap();
        assert_eq!(format!("{t:?}"), "Token(<redacted>)");
        let mut h = HeaderMap::new();
        assert!(!t.authorizes(&h));
        h.insert(
            header::AUTHORIZATION,
            "Bearer 0123456789abcdef-token".parse().unwrap(),
        );
        assert!(t.authorizes(&h));
        h.insert(
            header::AUTHORIZATION,
            "Bearer 0123456789abcdef-toke".parse().unwrap(),
        );
        assert!(!t.authorizes(&h));
        h.insert(
            header::AUTHORIZATION,
            "Bearer 0123456789abcdef-tokenX".parse().unwrap(),
        );
        assert!(!t.authorizes(&h));
        h.insert(
            header::AUTHORIZATION,
            "Basic 0123456789abcdef-token".parse().unwrap(),
        );
        assert!(!t.authorizes(&h));
        assert!(Token::new("short").is_err());
        assert!(Token::new("has a space in it, sixteen+").is_err());
    }
}
