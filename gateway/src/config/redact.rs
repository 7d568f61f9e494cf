//! What of the config may be a secret, kept out of the log, of every answer and of every error.
//!
//! **What counts as a secret**: the user info and the query values of an upstream's `url` (and
//! of `health.fleet.url`), every `headers` value (and each word of it: the token of
//! `Bearer …`), every `env` value. The gateway never prints them itself ([`redact_url`],
//! the `Debug` of [`Launch`](super::Launch) shows names only); [`Secrets::scrub`] is the net for
//! the text it does not write — an HTTP client's error that repeats the URL, an upstream that
//! prints its own environment on stderr — applied to every log line (`telemetry.rs`), to
//! `last_error` (served by `GET /v1/servers`) and to what hosts read.
//!
//! Every URL of the config is replaced whole by its redacted form, whatever its length. A single
//! value is masked when it has at least [`MIN_SECRET`] characters: a shorter one is no
//! credential, and masking it would garble the log (`8080`, `true`, `debug` are common `env`
//! values).

use std::borrow::Cow;
use std::fmt;

use super::{Config, Launch};

/// The shortest value masked on its own (URLs are masked whole, whatever their length).
pub(crate) const MIN_SECRET: usize = 6;

/// What a masked value reads as.
pub(crate) const MASK: &str = "***";

/// A URL without its user info and with every query value masked (`?api_key=***`), its
/// fragment dropped: what logs and answers show of an upstream's address.
pub(crate) fn redact_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_password(None);
            let _ = u.set_username("");
            u.set_fragment(None);
            if u.query().is_some() {
                let keys: Vec<String> = u.query_pairs().map(|(k, _)| k.into_owned()).collect();
                u.set_query(None);
                if !keys.is_empty() {
                    let mut q = u.query_pairs_mut();
                    for k in &keys {
                        q.append_pair(k, MASK);
                    }
                }
            }
            // `append_pair` encodes the mask; the log reads better without `%2A`.
            u.to_string().replace("%2A%2A%2A", MASK)
        }
        Err(_) => "<unparsable URL>".to_owned(),
    }
}

/// The secrets of a config, and the masking of any text that might repeat them.
///
/// Shared by the log and every upstream; a reload adds the new config's secrets
/// ([`learn`](Self::learn)) before anything of the new config can be logged, and keeps the old
/// ones: a value that was a credential is masked for the gateway's whole life (a server being
/// stopped may still print it).
#[derive(Default)]
pub(crate) struct Secrets {
    /// `(text, replacement)`, longest text first (a secret inside a longer one is masked by the
    /// longer one's replacement first).
    pairs: arc_swap::ArcSwap<Vec<(String, String)>>,
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the values.
        f.debug_struct("Secrets")
            .field("count", &self.pairs.load().len())
            .finish()
    }
}

/// The pairs of one config, being collected.
#[derive(Default)]
struct Collect {
    pairs: Vec<(String, String)>,
}

/// Longest text first; each text once.
fn order(pairs: &mut Vec<(String, String)>) {
    pairs.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
    pairs.dedup_by(|a, b| a.0 == b.0);
}

impl Secrets {
    /// Every secret of `config` (see the module docs).
    pub(crate) fn of(config: &Config) -> Self {
        let mut s = Collect::default();
        for server in &config.servers {
            match &server.launch {
                Launch::Stdio { env, .. } => {
                    for v in env.values() {
                        s.value(v);
                    }
                }
                Launch::Http { url, headers } => {
                    s.url(url);
                    for (_, v) in headers {
                        s.value(v);
                        for word in v.split_whitespace() {
                            s.value(word);
                        }
                    }
                }
            }
        }
        if let Some(fleet) = &config.health.fleet {
            s.url(&fleet.url);
        }
        order(&mut s.pairs);
        Self {
            pairs: arc_swap::ArcSwap::from_pointee(s.pairs),
        }
    }

    /// Adds the secrets of `other` (a reloaded config's) to these.
    pub(crate) fn learn(&self, other: &Secrets) {
        let more = other.pairs.load_full();
        self.pairs.rcu(|pairs| {
            let mut all = Vec::clone(pairs);
            all.extend(more.iter().cloned());
            order(&mut all);
            all
        });
    }

    /// `text` with every secret masked.
    pub(crate) fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for (secret, replacement) in self.pairs.load().iter() {
            if out.contains(secret.as_str()) {
                out = Cow::Owned(out.replace(secret.as_str(), replacement));
            }
        }
        out
    }
}

impl Collect {
    fn value(&mut self, v: &str) {
        if v.chars().count() >= MIN_SECRET {
            self.pairs.push((v.to_owned(), MASK.to_owned()));
        }
    }

    /// The URL whole (as written and as an HTTP client prints it), its user info and its
    /// query values, each as written and decoded.
    fn url(&mut self, url: &str) {
        let redacted = redact_url(url);
        self.pairs.push((url.to_owned(), redacted.clone()));
        let Ok(u) = reqwest::Url::parse(url) else {
            return;
        };
        self.pairs.push((u.as_str().to_owned(), redacted));
        self.value(u.username());
        if let Some(p) = u.password() {
            self.value(p);
        }
        if let Some(q) = u.query() {
            for raw in q.split('&') {
                if let Some((_, v)) = raw.split_once('=') {
                    self.value(v);
                }
            }
        }
        for (_, v) in u.query_pairs() {
            self.value(&v);
        }
        for part in [
            u.username().to_owned(),
            u.password().unwrap_or("").to_owned(),
        ] {
            if let Ok(decoded) = percent_decode(&part) {
                self.value(&decoded);
            }
        }
    }
}

/// `%XX` sequences decoded (user info is stored encoded by the URL parser).
fn percent_decode(s: &str) -> Result<String, std::string::FromUtf8Error> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redacted_url_keeps_no_user_info_and_no_query_value() {
        assert_eq!(
            redact_url("https://user:pw@mcp.example.com:8443/mcp?api_key=abc&x=1#frag"),
            "https://mcp.example.com:8443/mcp?api_key=***&x=***"
        );
        assert_eq!(
            redact_url("http://127.0.0.1:9/mcp"),
            "http://127.0.0.1:9/mcp"
        );
        assert_eq!(redact_url("not a url"), "<unparsable URL>");
    }

    #[test]
    fn every_secret_of_the_config_is_masked_in_any_text() {
        let config = super::super::parse(
            "gw.json",
            r#"{"mcpServers": {
                "remote": {"url": "http://alice:pa%24%24word@127.0.0.1:9/mcp?api_key=qkey123456", "headers": {"Authorization": "Bearer hdrtoken99"}},
                "local": {"command": "x", "env": {"TOKEN": "envsecret7", "PORT": "8080"}}
            }}"#,
        )
        .expect("valid");
        let s = Secrets::of(&config);
        let text = "error sending request for url (http://alice:pa%24%24word@127.0.0.1:9/mcp?api_key=qkey123456): \
                    token qkey123456, header Bearer hdrtoken99, alone hdrtoken99, env envsecret7 \
                    pa$$word on 8080";
        let out = s.scrub(text);
        for secret in [
            "qkey123456",
            "hdrtoken99",
            "envsecret7",
            "pa$$word",
            "pa%24%24word",
            "alice",
        ] {
            assert!(!out.contains(secret), "{secret} in {out}");
        }
        assert!(out.contains("http://127.0.0.1:9/mcp?api_key=***"), "{out}");
        assert!(out.contains("on 8080"), "short values stay: {out}");
        assert!(!format!("{s:?}").contains("envsecret7"));
    }

    #[test]
    fn a_reloaded_configs_secrets_are_added_and_the_old_ones_kept() {
        let parse = |text| super::super::parse("gw.json", text).expect("valid");
        let s = Secrets::of(&parse(
            r#"{"mcpServers": {"a": {"command": "x", "env": {"TOKEN": "oldsecret1"}}}}"#,
        ));
        s.learn(&Secrets::of(&parse(
            r#"{"mcpServers": {"b": {"url": "http://127.0.0.1:9/mcp", "headers": {"X-Key": "newsecret2"}}}}"#,
        )));
        assert_eq!(s.scrub("oldsecret1 newsecret2"), "*** ***");
    }
}
