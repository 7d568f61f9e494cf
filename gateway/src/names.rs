//! The names the hosts see: one fixed rule, `{server}__{tool}`.
//!
//! Every tool of every upstream is shown to the host (and so to the model) as its server's
//! name from the config, two underscores, and the tool's own name: `github__search_issues`.
//! Always prefixed, whatever else is connected, so a name never changes because another
//! server appeared or went away, and two servers' `search` never collide.
//!
//! **Why `__`.** MCP tool names allow only `A-Z a-z 0-9 _ - .` (1 to 128 characters), so `/`
//! (the registry key's separator) cannot be shown. The model APIs hosts forward tools to are
//! stricter still: OpenAI's function names allow no `.`, so a dot separator would break there.
//! `__` passes everywhere, reads as a separator, and is what several hosts already use for
//! their own prefixes. It is unambiguous because a server name never contains `__` and never
//! ends with `_` ([`check_server_name`]): the first `__` of a shown name always ends the
//! server's part, and the rest — which may contain `__` itself — is the tool's name.
//!
//! The breaker of a tool is keyed `{server}/{tool}` (the library's
//! [`KEY_SEPARATOR`](tool_health::mcp::KEY_SEPARATOR)): the same server name, the tool's own
//! name.

use tool_health::observe::Escaped;

/// Between the server's name and the tool's in a shown name.
pub(crate) const SEPARATOR: &str = "__";

/// The longest server name accepted in the config.
pub(crate) const MAX_SERVER_NAME: usize = 64;

/// The longest tool name MCP allows (and so the longest shown name).
pub(crate) const MAX_TOOL_NAME: usize = 128;

/// Why a name was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NameError {
    /// Empty, too long, or a character MCP does not allow.
    Invalid(String),
    /// No `__`: not a gateway name.
    NoServer,
}

/// Whether `c` may appear in an MCP tool name.
fn allowed(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.')
}

/// Checks a server name from the config: 1 to [`MAX_SERVER_NAME`] ASCII letters, digits and
/// `-`, with single `_` between them (no `__`, no `_` at either end), no `.`. The reason on
/// `Err`.
pub(crate) fn check_server_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("is empty".to_owned());
    }
    if name.len() > MAX_SERVER_NAME {
        return Err(format!(
            "is {} bytes long, at most {MAX_SERVER_NAME}",
            name.len()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
    {
        return Err(format!(
            "contains {c:?}: only ASCII letters, digits, `-` and `_` are allowed"
        ));
    }
    if name.contains(SEPARATOR) {
        return Err("contains `__`, which separates a server's name from its tools'".to_owned());
    }
    if name.starts_with('_') || name.ends_with('_') {
        return Err("starts or ends with `_`".to_owned());
    }
    Ok(())
}

/// The name shown to hosts for `tool` of `server`, or why it cannot be shown (a character MCP
/// does not allow, or longer than [`MAX_TOOL_NAME`] with the prefix).
pub(crate) fn shown(server: &str, tool: &str) -> Result<String, NameError> {
    if tool.is_empty() {
        return Err(NameError::Invalid("the tool's name is empty".to_owned()));
    }
    if let Some(&c) = tool.as_bytes().iter().find(|&&c| !allowed(c)) {
        return Err(NameError::Invalid(format!(
            "the tool's name contains {}, which MCP tool names do not allow (only A-Z a-z 0-9 _ - .)",
            describe_byte(c)
        )));
    }
    let len = server.len() + SEPARATOR.len() + tool.len();
    if len > MAX_TOOL_NAME {
        return Err(NameError::Invalid(format!(
            "`{server}{SEPARATOR}` and the tool's name make {len} characters, MCP allows {MAX_TOOL_NAME}"
        )));
    }
    Ok(format!("{server}{SEPARATOR}{tool}"))
}

/// Splits a shown name into `(server, tool)`, checking it is a valid MCP tool name first.
pub(crate) fn split(name: &str) -> Result<(&str, &str), NameError> {
    if name.is_empty() {
        return Err(NameError::Invalid("the tool name is empty".to_owned()));
    }
    if name.len() > MAX_TOOL_NAME {
        return Err(NameError::Invalid(format!(
            "the tool name is {} bytes long, MCP allows {MAX_TOOL_NAME}",
            name.len()
        )));
    }
    if let Some(&c) = name.as_bytes().iter().find(|&&c| !allowed(c)) {
        return Err(NameError::Invalid(format!(
            "the tool name contains {}, which MCP tool names do not allow (only A-Z a-z 0-9 _ - .)",
            describe_byte(c)
        )));
    }
    match name.split_once(SEPARATOR) {
        Some((server, tool)) if !server.is_empty() && !tool.is_empty() => Ok((server, tool)),
        _ => Err(NameError::NoServer),
    }
}

/// The registry key of a shown name, `{server}__{tool}` → `{server}/{tool}`, when `server` is
/// one of the gateway's (`is_server`); `None` for any other name. The one rule every way in
/// uses — the API's paths, agents' spans through the receiver — so that a tool has one
/// breaker whichever feed reports it.
pub(crate) fn key_of(name: &str, is_server: impl Fn(&str) -> bool) -> Option<String> {
    let (server, tool) = split(name).ok()?;
    is_server(server).then(|| format!("{server}{}{tool}", tool_health::mcp::KEY_SEPARATOR))
}

/// The longest prompt name (with its prefix) and URI the gateway takes or shows.
pub(crate) const MAX_PROMPT_NAME: usize = 1_024;
/// The longest URI (with its prefix) the gateway takes or shows.
pub(crate) const MAX_URI: usize = 8_192;

/// The scheme of the URIs the gateway shows for its servers' resources:
/// `tool-health://{server}/{the server's own URI}`.
pub(crate) const URI_SCHEME: &str = "tool-health://";

/// The name shown to hosts for prompt `prompt` of `server`: `{server}__{prompt}`, the tools'
/// rule. A prompt's own name may hold any character MCP allows in one (prompts are not
/// forwarded to model APIs as functions); a control character or an empty name is refused.
pub(crate) fn shown_prompt(server: &str, prompt: &str) -> Result<String, NameError> {
    if prompt.is_empty() {
        return Err(NameError::Invalid("the prompt's name is empty".to_owned()));
    }
    if prompt.chars().any(char::is_control) {
        return Err(NameError::Invalid(
            "the prompt's name contains a control character".to_owned(),
        ));
    }
    let len = server.len() + SEPARATOR.len() + prompt.len();
    if len > MAX_PROMPT_NAME {
        return Err(NameError::Invalid(format!(
            "`{server}{SEPARATOR}` and the prompt's name make {len} bytes, at most {MAX_PROMPT_NAME}"
        )));
    }
    Ok(format!("{server}{SEPARATOR}{prompt}"))
}

/// Splits a shown prompt name into `(server, prompt)`.
pub(crate) fn split_prompt(name: &str) -> Result<(&str, &str), NameError> {
    if name.len() > MAX_PROMPT_NAME {
        return Err(NameError::Invalid(format!(
            "the prompt name is {} bytes long, at most {MAX_PROMPT_NAME}",
            name.len()
        )));
    }
    if name.chars().any(char::is_control) {
        return Err(NameError::Invalid(
            "the prompt name contains a control character".to_owned(),
        ));
    }
    match name.split_once(SEPARATOR) {
        Some((server, prompt)) if !server.is_empty() && !prompt.is_empty() => Ok((server, prompt)),
        _ => Err(NameError::NoServer),
    }
}

/// The URI shown to hosts for `uri` of `server` (a resource's, or a template's):
/// `tool-health://{server}/{uri}`. `None` for a URI too long to show.
pub(crate) fn shown_uri(server: &str, uri: &str) -> Option<String> {
    let len = URI_SCHEME.len() + server.len() + 1 + uri.len();
    (len <= MAX_URI).then(|| format!("{URI_SCHEME}{server}/{uri}"))
}

/// A URI a host sent: the gateway's form (`tool-health://{server}/{uri}`) split into the
/// server and its own URI, or the URI as it is (a server's own URI, copied from a tool's
/// result).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HostUri<'a> {
    /// `tool-health://{server}/{uri}`.
    Shown { server: &'a str, uri: &'a str },
    /// Any other URI.
    Raw(&'a str),
}

/// Reads a URI a host sent (see [`HostUri`]). The scheme is matched without regard to case
/// (URI schemes are case-insensitive).
pub(crate) fn host_uri(uri: &str) -> Result<HostUri<'_>, NameError> {
    if uri.is_empty() {
        return Err(NameError::Invalid("the URI is empty".to_owned()));
    }
    if uri.len() > MAX_URI {
        return Err(NameError::Invalid(format!(
            "the URI is {} bytes long, at most {MAX_URI}",
            uri.len()
        )));
    }
    if uri.chars().any(char::is_control) {
        return Err(NameError::Invalid(
            "the URI contains a control character".to_owned(),
        ));
    }
    let scheme = URI_SCHEME.len();
    if uri.len() >= scheme
        && uri.is_char_boundary(scheme)
        && uri[..scheme].eq_ignore_ascii_case(URI_SCHEME)
    {
        return match uri[scheme..].split_once('/') {
            Some((server, rest)) if !server.is_empty() && !rest.is_empty() => {
                Ok(HostUri::Shown { server, uri: rest })
            }
            _ => Err(NameError::Invalid(format!(
                "a gateway URI is {URI_SCHEME}{{server}}/{{the server's own URI}}"
            ))),
        };
    }
    Ok(HostUri::Raw(uri))
}

/// The longest resource template [`fits_template`] matches (a longer one fits nothing).
const MAX_TEMPLATE: usize = 1_024;

/// Whether `uri` fits `template` (RFC 6570, levels 1 to 4, as resource templates use it): the
/// literal parts match exactly, a simple `{var}` stands for one or more characters other than
/// `/`, `?` and `#`, every other expression (`{+var}`, `{#var}`, `{/var}`, `{?var}`, …) for
/// any run of characters. Used to find which server a URI of a template belongs to. Linear in
/// the URI for each piece of the template (the reachable positions are carried as a set, never
/// by backtracking); a template over [`MAX_TEMPLATE`] bytes fits nothing.
pub(crate) fn fits_template(template: &str, uri: &str) -> bool {
    if template.len() > MAX_TEMPLATE {
        return false;
    }
    let bytes = uri.as_bytes();
    let n = bytes.len();
    // Positions of `uri` the template's pieces so far can end at.
    let mut at = vec![false; n + 1];
    at[0] = true;
    let mut rest = template;
    loop {
        let (literal, op, next) = match rest.find('{') {
            Some(open) => match rest[open..].find('}') {
                Some(close) => {
                    let expr = &rest[open + 1..open + close];
                    let op = expr.chars().next().filter(|c| "+#./;?&".contains(*c));
                    (
                        &rest[..open],
                        Some(op.unwrap_or('s')),
                        &rest[open + close + 1..],
                    )
                }
                None => (rest, None, ""),
            },
            None => (rest, None, ""),
        };
        let lit = literal.as_bytes();
        let mut after = vec![false; n + 1];
        for p in (0..=n).filter(|&p| at[p]) {
            if bytes[p..].starts_with(lit) {
                after[p + lit.len()] = true;
            }
        }
        let Some(op) = op else {
            return after[n];
        };
        // The expression's value: one or more non-`/?#` characters for a simple one, any run
        // (empty too) for the others.
        let mut next_at = vec![false; n + 1];
        let mut open = false;
        for q in 0..=n {
            if op == 's' {
                if open {
                    next_at[q] = uri.is_char_boundary(q);
                }
                if q < n && matches!(bytes[q], b'/' | b'?' | b'#') {
                    open = false;
                }
                if after[q] && q < n && !matches!(bytes[q], b'/' | b'?' | b'#') {
                    open = true;
                }
            } else {
                open |= after[q];
                next_at[q] = open && uri.is_char_boundary(q);
            }
        }
        at = next_at;
        rest = next;
    }
}

/// A byte for an error message, never echoing a control character.
fn describe_byte(c: u8) -> String {
    if c.is_ascii_graphic() || c == b' ' {
        format!("{:?}", c as char)
    } else {
        format!("the byte 0x{c:02x}")
    }
}

/// `text` cut to `max` characters with every character a log line would hide replaced by `?`
/// (control characters, bidirectional controls, zero-width characters and the other
/// default-ignorable code points: the library's `Escaped::is_hidden`), for logs and messages.
pub(crate) fn printable(text: &str, max: usize) -> String {
    let mut out: String = text
        .chars()
        .take(max)
        .map(|c| if Escaped::is_hidden(c) { '?' } else { c })
        .collect();
    if text.chars().nth(max).is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_keep_the_split_unambiguous() {
        for good in ["github", "my-server", "a_b", "x1", "A-b_c-9"] {
            assert_eq!(check_server_name(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "a__b",
            "_a",
            "a_",
            "a.b",
            "a b",
            "a/b",
            "é",
            &"x".repeat(65),
        ] {
            assert!(check_server_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn shown_names_round_trip_through_split() {
        for (server, tool) in [
            ("github", "search_issues"),
            ("a_b", "c"),
            ("py", "x__y"),
            ("py", "_lead"),
            ("s", "v1.2-beta"),
        ] {
            let name = shown(server, tool).unwrap();
            assert_eq!(split(&name), Ok((server, tool)), "{name}");
        }
    }

    #[test]
    fn names_mcp_does_not_allow_are_refused_with_the_reason() {
        assert!(
            matches!(shown("py", "has space"), Err(NameError::Invalid(m)) if m.contains("' '"))
        );
        assert!(matches!(shown("py", "a/b"), Err(NameError::Invalid(_))));
        assert!(matches!(shown("py", ""), Err(NameError::Invalid(_))));
        assert!(
            matches!(shown("py", &"t".repeat(125)), Err(NameError::Invalid(m)) if m.contains("129"))
        );
        assert!(matches!(split("no_separator"), Err(NameError::NoServer)));
        assert!(matches!(split("__tool"), Err(NameError::NoServer)));
        assert!(matches!(split("server__"), Err(NameError::NoServer)));
        assert!(
            matches!(split("py__bad\u{1b}[31m"), Err(NameError::Invalid(m)) if m.contains("0x1b"))
        );
        assert!(matches!(
            split(&"a".repeat(129)),
            Err(NameError::Invalid(_))
        ));
    }

    #[test]
    fn prompts_take_the_tools_rule() {
        assert_eq!(
            shown_prompt("ev", "simple-prompt").unwrap(),
            "ev__simple-prompt"
        );
        assert_eq!(split_prompt("ev__a b__c"), Ok(("ev", "a b__c")));
        assert!(matches!(split_prompt("nope"), Err(NameError::NoServer)));
        assert!(matches!(
            shown_prompt("ev", "a\nb"),
            Err(NameError::Invalid(_))
        ));
        assert!(matches!(
            split_prompt("ev__a\u{7}"),
            Err(NameError::Invalid(_))
        ));
    }

    #[test]
    fn uris_are_prefixed_and_read_back() {
        let shown = shown_uri("ev", "demo://resource/static/document/a.md").unwrap();
        assert_eq!(
            shown,
            "tool-health://ev/demo://resource/static/document/a.md"
        );
        assert_eq!(
            host_uri(&shown),
            Ok(HostUri::Shown {
                server: "ev",
                uri: "demo://resource/static/document/a.md"
            })
        );
        assert_eq!(
            host_uri("TOOL-HEALTH://fs/file:///tmp/x"),
            Ok(HostUri::Shown {
                server: "fs",
                uri: "file:///tmp/x"
            })
        );
        assert_eq!(host_uri("file:///tmp/x"), Ok(HostUri::Raw("file:///tmp/x")));
        assert!(host_uri("tool-health://ev").is_err());
        assert!(host_uri("tool-health:///x").is_err());
        assert!(host_uri("").is_err());
        assert!(host_uri("a\u{0}b").is_err());
        assert!(shown_uri("ev", &"x".repeat(MAX_URI)).is_none());
    }

    #[test]
    fn templates_fit_their_uris_only() {
        let t = "demo://resource/dynamic/text/{resourceId}";
        assert!(fits_template(t, "demo://resource/dynamic/text/1"));
        assert!(!fits_template(t, "demo://resource/dynamic/text/"));
        assert!(!fits_template(t, "demo://resource/dynamic/text/1/2"));
        assert!(!fits_template(t, "demo://resource/dynamic/blob/1"));
        assert!(fits_template("file:///{+path}", "file:///a/b/c.txt"));
        assert!(fits_template("x://{a}/{b}{?q}", "x://1/2?q=3"));
        assert!(fits_template("x://{a}/{b}{?q}", "x://1/2"));
        assert!(!fits_template("x://{a}", "y://1"));
        assert!(fits_template("plain://uri", "plain://uri"));
    }

    #[test]
    fn printable_cuts_and_replaces_control_characters() {
        assert_eq!(printable("a\nb", 10), "a?b");
        assert_eq!(printable("abcdef", 3), "abc…");
    }

    #[test]
    fn printable_hides_no_bidi_nor_zero_width_character() {
        // A tool name a model sent: it must not read `py__exe.txt` in the log, nor hide a part.
        let shown = printable("py__\u{202e}txt.exe\u{2066}\u{200b}x\u{fe0f}\u{e0041}", 80);
        assert_eq!(shown, "py__?txt.exe??x??");
        assert_eq!(printable("café 検索", 80), "café 検索");
    }
}
