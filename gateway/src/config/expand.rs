//! `${VAR}` in an entry, expanded from the gateway's environment when the config is read, as
//! hosts do (Claude Code's `.mcp.json`: `${VAR}` and `${VAR:-default}`), so that a config can
//! name a secret instead of holding it: `"Authorization": "Bearer ${GITHUB_TOKEN}"`.
//!
//! Expanded in `command`, `args`, `env` values, `url` and `headers` values; nowhere else (not
//! in names, not in `health`). `VAR` is a name of letters, digits and `_` not starting with a
//! digit; any other `${…}`, and a lone `$`, stay as written. A variable that is not set and
//! has no default is a problem of the config (exit 2 naming the key and the variable), never
//! an empty string passed on without a word. The values are secrets like the rest of `env`
//! and `headers`: never shown.

use std::borrow::Cow;

/// The environment `${VAR}` reads (the process's, or a test's).
pub(crate) type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// `text` with every `${VAR}` and `${VAR:-default}` replaced, or the first variable that is
/// not set and has no default.
pub(super) fn expand<'t>(text: &'t str, env: Env<'_>) -> Result<Cow<'t, str>, String> {
    if !text.contains("${") {
        return Ok(Cow::Borrowed(text));
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Ok(Cow::Owned(out));
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        if is_name(name) {
            match (env(name), default) {
                (Some(value), _) => out.push_str(&value),
                (None, Some(default)) => out.push_str(default),
                (None, None) => return Err(name.to_owned()),
            }
        } else {
            out.push_str(&rest[start..start + 2 + end + 1]);
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(Cow::Owned(out))
}

fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_are_expanded_with_defaults_and_the_rest_stays() {
        let env = |k: &str| (k == "TOKEN").then(|| "s3cr3t".to_owned());
        assert_eq!(expand("Bearer ${TOKEN}", &env).unwrap(), "Bearer s3cr3t");
        assert_eq!(expand("${NOPE:-dflt}/x", &env).unwrap(), "dflt/x");
        assert_eq!(expand("${TOKEN:-dflt}", &env).unwrap(), "s3cr3t");
        assert_eq!(
            expand("$5 ${1X} ${ } ${open", &env).unwrap(),
            "$5 ${1X} ${ } ${open"
        );
        assert_eq!(expand("a ${NOPE} b", &env).unwrap_err(), "NOPE");
        assert!(matches!(
            expand("plain", &env).unwrap(),
            Cow::Borrowed("plain")
        ));
    }
}
