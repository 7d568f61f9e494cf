//! What of the config may be a secret, kept out of the log and of every answer.

/// A URL without its user info (for logs).
pub(crate) fn redact_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_password(None);
            let _ = u.set_username("");
            u.to_string()
        }
        Err(_) => "<unparsable URL>".to_owned(),
    }
}
