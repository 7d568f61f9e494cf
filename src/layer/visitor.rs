//! Reading field values: a span's attributes and records into [`SpanFields`], an event's into
//! [`EventFields`].
//!
//! Field values are always visited into these local structs *before* a span's extensions are
//! locked: visiting may run user `Debug` / `Display` code, which may log, and logging re-enters
//! the layer.

use std::borrow::Cow;
use std::fmt;

use tracing_core::field::{Field, Visit};

use crate::call::REFUSAL_MESSAGE;
use crate::semconv;

use super::conventions::{Compiled, Meaning};

/// Values of the fields the layer reads on a span, visited without any lock held.
#[derive(Debug, Default)]
pub(crate) struct SpanFields {
    /// The tool name and the rank of its source (lower wins).
    pub(crate) name: Option<(u8, String)>,
    /// The kind checks recorded in this visit (bits), and those that did not match.
    pub(crate) kinds_seen: u8,
    pub(crate) kinds_bad: u8,
    /// An error type and the rank of its field (lower wins); empty: a marker, no failure.
    pub(crate) error_type: Option<(u8, String)>,
    /// A failure field was recorded: non-empty or not.
    pub(crate) failure: Option<bool>,
    /// The framework's verdict.
    pub(crate) outcome: Option<Cow<'static, str>>,
    pub(crate) status: Option<Status>,
    pub(crate) http_status: Option<u64>,
    /// Seconds.
    pub(crate) retry_after: Option<f64>,
    /// The length (saturated) of a name value refused for being longer than the registry
    /// takes, 0 for none: the span then has no name from that source (it is no tool span), and
    /// nothing is copied. Four bytes, in the padding the one-byte fields leave: a span's fields
    /// are moved by value, and a wider struct costs every tool span.
    pub(crate) rejected_name: u32,
}

impl SpanFields {
    pub(crate) fn is_empty(&self) -> bool {
        self.name.is_none()
            && self.kinds_seen == 0
            && self.error_type.is_none()
            && self.failure.is_none()
            && self.outcome.is_none()
            && self.status.is_none()
            && self.http_status.is_none()
            && self.retry_after.is_none()
            && self.rejected_name == 0
    }
}

/// A recorded `otel.status_code`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    Error,
    Other,
}

/// The outcome values known in advance, kept without allocating.
fn outcome_value(value: &str) -> Cow<'static, str> {
    match value {
        "success" => Cow::Borrowed("success"),
        "error" => Cow::Borrowed("error"),
        "denied" => Cow::Borrowed("denied"),
        "skipped" => Cow::Borrowed("skipped"),
        other => Cow::Owned(other.to_owned()),
    }
}

/// Visits a span's `Attributes` or `Record` into [`SpanFields`], reading the fields its
/// convention names.
pub(crate) struct SpanVisitor<'a> {
    pub(crate) convention: &'a Compiled,
    pub(crate) out: &'a mut SpanFields,
    /// The longest tool name the registry takes: a longer name is refused, never copied.
    pub(crate) max_name_len: usize,
}

/// The most of a `Debug` value's text the layer formats for a field it reads (a name, an
/// error type): beyond it the text is cut (and a name refused), so a hostile value costs no
/// more than this to read.
const DEBUG_TEXT_LIMIT: usize = 1024;

/// A `fmt::Write` that keeps at most `limit` bytes (cut at a character boundary) and stops
/// the formatting there.
struct Bounded {
    text: String,
    limit: usize,
}

impl fmt::Write for Bounded {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = self.limit - self.text.len();
        if s.len() <= room {
            self.text.push_str(s);
            return Ok(());
        }
        let mut end = room;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.text.push_str(&s[..end]);
        Err(fmt::Error) // stop formatting: the rest is not wanted
    }
}

impl SpanVisitor<'_> {
    /// A `Debug` value's text, at most the larger of [`DEBUG_TEXT_LIMIT`] and the name limit
    /// plus four: a text cut there (at a character boundary, up to three bytes short) is still
    /// longer than a name may be, so a name cut short is refused, never taken truncated.
    fn debug_text(&self, value: &dyn fmt::Debug) -> String {
        let mut out = Bounded {
            text: String::new(),
            limit: self.max_name_len.saturating_add(4).max(DEBUG_TEXT_LIMIT),
        };
        let _ = fmt::write(&mut out, format_args!("{value:?}"));
        out.text
    }

    fn value(&mut self, field: &Field, value: &str) {
        let name = field.name();
        for (field_name, meaning) in self.convention.fields.iter() {
            if field_name != name {
                continue;
            }
            match meaning {
                Meaning::Name { rank, strip_prefix } => {
                    let value = match strip_prefix {
                        Some(prefix) => match value.strip_prefix(&**prefix) {
                            Some(rest) => rest,
                            None => continue,
                        },
                        None => value,
                    };
                    if self.out.name.as_ref().is_none_or(|(r, _)| rank <= r) {
                        if value.len() > self.max_name_len {
                            // No tool's name: refused, not copied (an empty name is no name).
                            self.out.name = Some((*rank, String::new()));
                            self.out.rejected_name = u32::try_from(value.len()).unwrap_or(u32::MAX);
                        } else {
                            self.out.name = Some((*rank, value.to_owned()));
                        }
                    }
                }
                Meaning::Kind { bit, expected } => {
                    self.out.kinds_seen |= bit;
                    if value == expected {
                        self.out.kinds_bad &= !bit;
                    } else {
                        self.out.kinds_bad |= bit;
                    }
                }
                Meaning::ErrorType { rank } => {
                    if self.out.error_type.as_ref().is_none_or(|(r, _)| rank <= r) {
                        self.out.error_type = Some((*rank, value.to_owned()));
                    }
                }
                Meaning::Failure => {
                    self.out.failure = Some(self.out.failure == Some(true) || !value.is_empty());
                }
                Meaning::Outcome => self.out.outcome = Some(outcome_value(value)),
                Meaning::Status => {
                    self.out.status = Some(if value.eq_ignore_ascii_case("error") {
                        Status::Error
                    } else {
                        Status::Other
                    });
                }
                Meaning::HttpStatus => self.out.http_status = value.trim().parse().ok(),
                Meaning::RetryAfter => {
                    self.retry_after(value.trim().parse().unwrap_or(f64::NAN));
                }
            }
        }
    }

    /// The retry hint, seconds: negative, NaN or infinite values are no hint.
    fn retry_after(&mut self, value: f64) {
        self.out.retry_after = (value.is_finite() && value >= 0.0).then_some(value);
    }

    /// A numeric value: the HTTP status or the retry hint take it as a number, every other
    /// field as its text.
    fn number(&mut self, field: &Field, value: f64, text: &dyn fmt::Debug) {
        let name = field.name();
        let mut as_text = false;
        for (field_name, meaning) in self.convention.fields.iter() {
            if field_name != name {
                continue;
            }
            match meaning {
                Meaning::HttpStatus => {
                    if (0.0..=999.0).contains(&value) {
                        self.out.http_status = Some(value as u64);
                    }
                }
                Meaning::RetryAfter => self.retry_after(value),
                _ => as_text = true,
            }
        }
        if as_text {
            let text = self.debug_text(text);
            self.value(field, &text);
        }
    }
}

impl Visit for SpanVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.value(field, value);
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.number(field, value as f64, &value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.number(field, value as f64, &value);
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.number(field, value, &value);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        // Only format the fields we read: the others may be large or slow to format.
        if self.convention.reads(field.name()) {
            let text = self.debug_text(value);
            self.value(field, &text);
        }
    }
}

/// Values of the fields the layer reads on an event.
#[derive(Debug, Default)]
pub(crate) struct EventFields {
    pub(crate) error_type: Option<String>,
    /// The event reports a refusal: its `error` field's text contains
    /// [`REFUSAL_MESSAGE`] (a tool returning the gate's refusal as its error, as
    /// `#[instrument(err)]` logs it), or its `error.type` is the refusal's.
    pub(crate) refusal: bool,
}

impl Visit for EventFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == semconv::ERROR_TYPE && !value.is_empty() {
            self.refusal |= value == semconv::REFUSAL_ERROR_TYPE;
            self.error_type = Some(value.to_owned());
        } else if field.name() == semconv::ERROR_FIELD {
            self.refusal |= value.contains(REFUSAL_MESSAGE);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == semconv::ERROR_TYPE {
            self.record_str(field, &format!("{value:?}"));
        } else if field.name() == semconv::ERROR_FIELD {
            // Searched while formatting: no allocation, however long the error's text.
            let mut search = Contains::new(REFUSAL_MESSAGE.as_bytes());
            let _ = fmt::write(&mut search, format_args!("{value:?}"));
            self.refusal |= search.found;
        }
    }
}

/// A streaming substring search (Knuth–Morris–Pratt) over formatted text.
struct Contains<'a> {
    needle: &'a [u8],
    /// Length of the needle's prefix matched so far.
    matched: usize,
    found: bool,
}

impl<'a> Contains<'a> {
    fn new(needle: &'a [u8]) -> Self {
        Self {
            needle,
            matched: 0,
            found: needle.is_empty(),
        }
    }

    /// The length of the longest proper prefix of `needle[..len]` that is also its suffix.
    fn fallback(&self, len: usize) -> usize {
        (1..len)
            .rev()
            .find(|&k| self.needle[..k] == self.needle[len - k..len])
            .unwrap_or(0)
    }
}

impl fmt::Write for Contains<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for &b in s.as_bytes() {
            if self.found {
                return Ok(());
            }
            while self.matched > 0 && self.needle[self.matched] != b {
                self.matched = self.fallback(self.matched);
            }
            if self.needle[self.matched] == b {
                self.matched += 1;
                if self.matched == self.needle.len() {
                    self.found = true;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt::Write as _;

    fn contains(haystack: &[&str], needle: &str) -> bool {
        let mut c = Contains::new(needle.as_bytes());
        for part in haystack {
            c.write_str(part).unwrap();
        }
        c.found
    }

    #[test]
    fn the_streaming_search_finds_what_str_contains_finds() {
        let needles = ["aab", "abab", "tool temporarily unavailable", "a"];
        let hays = [
            "",
            "aaab",
            "ababab",
            "aabaab",
            "xx tool temporarily unavailable: y",
            "b",
        ];
        for n in needles {
            for h in hays {
                // Split the haystack at every point: a match across writes is still found.
                for cut in 0..=h.len() {
                    let (a, b) = h.split_at(cut);
                    assert_eq!(
                        contains(&[a, b], n),
                        h.contains(n),
                        "{n:?} in {h:?} cut {cut}"
                    );
                }
            }
        }
    }
}
