//! How messages name things: a key's path, a value's kind (never the value: it may be a
//! secret), a list of keys, and the known key closest to a mistyped one.

use serde_json::Value;

use crate::names;

/// A path as messages write it: `a.b."c d".0`.
pub(super) fn dotted(path: &[String]) -> String {
    path.iter()
        .map(|p| {
            if !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                p.clone()
            } else {
                serde_json::to_string(&names::printable(p, 80)).unwrap_or_default()
            }
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// The kind of a JSON value, for "got …" in messages (a value that may be a secret is never
/// echoed).
pub(super) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

pub(super) fn list(items: &[&str]) -> String {
    items
        .iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The known key closest to `key` (case-insensitive equal, or within a small edit distance).
pub(super) fn suggestion<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    let lower = key.to_ascii_lowercase();
    known
        .iter()
        .map(|k| (edit_distance(&lower, &k.to_ascii_lowercase()), *k))
        .filter(|(d, k)| *d <= 3.min(k.len() / 2) || lower == k.to_ascii_lowercase())
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
        .or_else(|| {
            // `cooldown` for `cooldownSeconds`.
            known
                .iter()
                .find(|k| k.to_ascii_lowercase().starts_with(&lower) && lower.len() >= 4)
                .copied()
        })
}

pub(super) fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}
