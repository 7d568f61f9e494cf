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
