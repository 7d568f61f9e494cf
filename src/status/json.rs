//! A small JSON writer: strings escaped for any context, numbers without allocation.
//!
//! The status JSON is written by hand rather than through serde: it is one fixed shape
//! (`snapshot.rs` owns it), producing 10,000 tools stays within a few milliseconds, and the
//! feature pulls no serialisation crates. Every string goes through [`string`], which escapes
//! what JSON requires and also `<`, `>`, `&` and U+2028/U+2029, so a tool name stays text even
//! if a consumer pastes the JSON into HTML or a script.

use std::fmt::Write as _;

/// Appends `s` as a JSON string literal (quotes included).
pub(super) fn string(out: &mut String, s: &str) {
    out.reserve(s.len() + 2);
    out.push('"');
    let mut start = 0;
    for (i, c) in s.char_indices() {
        let escape: Option<&str> = match c {
            '"' => Some("\\\""),
            '\\' => Some("\\\\"),
            '\n' => Some("\\n"),
            '\r' => Some("\\r"),
            '\t' => Some("\\t"),
            '<' => Some("\\u003c"),
            '>' => Some("\\u003e"),
            '&' => Some("\\u0026"),
            '\u{2028}' => Some("\\u2028"),
            '\u{2029}' => Some("\\u2029"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => None,
            _ => continue,
        };
        out.push_str(&s[start..i]);
        match escape {
            Some(e) => out.push_str(e),
            None => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
        }
        start = i + c.len_utf8();
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// Appends one of the shape's own values (a state, a code: plain ASCII letters and `_`) as a
/// string, without the escaping pass.
pub(super) fn fixed(out: &mut String, s: &'static str) {
    debug_assert!(s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'));
    out.push('"');
    out.push_str(s);
    out.push('"');
}

/// Appends `"key":` (keys are fixed ASCII identifiers of the shape).
pub(super) fn key(out: &mut String, key: &str) {
    out.push('"');
    out.push_str(key);
    out.push_str("\":");
}

/// Appends an unsigned integer.
pub(super) fn uint(out: &mut String, n: u64) {
    out.push_str(itoa::Buffer::new().format(n));
}

/// Appends a finite number (non-finite values, which JSON cannot carry, as `null`), rounded to
/// `decimals` places (at most 9; trailing zeros dropped).
pub(super) fn number(out: &mut String, x: f64, decimals: u32) {
    if !x.is_finite() {
        out.push_str("null");
        return;
    }
    let unit = 10u64.pow(decimals.min(9));
    let scaled = (x.abs() * unit as f64).round();
    if scaled >= 9.0e15 {
        // Beyond exact integers: the shortest representation is good enough.
        let _ = write!(out, "{x}");
        return;
    }
    let scaled = scaled as u64;
    if x < 0.0 && scaled != 0 {
        out.push('-');
    }
    uint(out, scaled / unit);
    let mut frac = scaled % unit;
    if frac != 0 {
        out.push('.');
        // Leading zeros of the fraction, then its digits without the trailing ones.
        let mut width = decimals.min(9);
        while frac % 10 == 0 {
            frac /= 10;
            width -= 1;
        }
        let mut buf = itoa::Buffer::new();
        let digits = buf.format(frac);
        for _ in digits.len()..width as usize {
            out.push('0');
        }
        out.push_str(digits);
    }
}

/// Appends a whole percentage (0 to 100) without a formatter: the sparkline has many.
pub(super) fn percent(out: &mut String, p: u8) {
    let p = p.min(100);
    if p == 100 {
        out.push_str("100");
        return;
    }
    if p >= 10 {
        out.push(char::from(b'0' + p / 10));
    }
    out.push(char::from(b'0' + p % 10));
}

/// Appends `true` or `false`.
pub(super) fn boolean(out: &mut String, b: bool) {
    out.push_str(if b { "true" } else { "false" });
}

/// `value` written by `write`, or `null` when there is none.
pub(super) fn or_null<T>(out: &mut String, value: Option<T>, write: impl FnOnce(&mut String, T)) {
    match value {
        Some(v) => write(out, v),
        None => out.push_str("null"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> String {
        let mut out = String::new();
        string(&mut out, x);
        out
    }

    fn n(x: f64, d: u32) -> String {
        let mut out = String::new();
        number(&mut out, x, d);
        out
    }

    #[test]
    fn strings_are_escaped_for_json_and_html() {
        assert_eq!(s("plain"), "\"plain\"");
        assert_eq!(s("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(
            s("<script>&</script>"),
            "\"\\u003cscript\\u003e\\u0026\\u003c/script\\u003e\""
        );
        assert_eq!(s("\n\r\t\u{1}\u{7f}"), "\"\\n\\r\\t\\u0001\\u007f\"");
        assert_eq!(s("\u{2028}x\u{2029}"), "\"\\u2028x\\u2029\"");
        assert_eq!(s("ünï ✓"), "\"ünï ✓\"");
    }

    #[test]
    fn percentages() {
        for p in 0..=100u8 {
            let mut out = String::new();
            percent(&mut out, p);
            assert_eq!(out, p.to_string());
        }
    }

    #[test]
    fn numbers() {
        let mut out = String::new();
        for v in [0, 7, 10, 1234567890, u64::MAX] {
            out.clear();
            uint(&mut out, v);
            assert_eq!(out, v.to_string());
        }
        assert_eq!(n(0.0, 4), "0");
        assert_eq!(n(1.0, 4), "1");
        assert_eq!(n(0.49, 4), "0.49");
        assert_eq!(n(0.123456, 4), "0.1235");
        assert_eq!(n(0.05, 4), "0.05");
        assert_eq!(n(0.0001, 4), "0.0001");
        assert_eq!(n(0.00004, 4), "0");
        assert_eq!(n(-2.5, 3), "-2.5");
        assert_eq!(n(-0.00001, 3), "0");
        assert_eq!(n(12.0, 0), "12");
        assert_eq!(n(f64::NAN, 3), "null");
        assert_eq!(n(f64::INFINITY, 3), "null");
        assert_eq!(n(1.0e300, 3).parse::<f64>(), Ok(1.0e300));
    }
}
