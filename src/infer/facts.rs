//! The neutral shape of a tool call: the values a feed reads off a span ([`SpanFields`], one
//! visit at a time), what is known about the call so far ([`Observed`], the fold of every
//! visit, event and status), and the event values that matter ([`EventFields`]).
//!
//! Nothing here knows `tracing` or the OpenTelemetry SDK: a feed hands in field names and
//! values as text or numbers (the `tracing` visitor in `layer/visitor.rs`, the span
//! processor's attribute loop), and gets back the [`SpanFacts`] the classifier reads.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use crate::call::REFUSAL_MESSAGE;
use crate::semconv;

use super::classify::SpanFacts;
use super::conventions::{Compiled, Meaning};
use super::text::Text;

/// Values of the fields a convention reads on a span, from one visit (a span's creation, a
/// record, the OpenTelemetry span's attributes at its end).
#[derive(Debug, Default)]
pub(crate) struct SpanFields {
    /// The tool name and the rank of its source (lower wins).
    pub(crate) name: Option<(u8, Text)>,
    /// The kind checks recorded in this visit (bits), and those that did not match.
    pub(crate) kinds_seen: u8,
    pub(crate) kinds_bad: u8,
    /// An error type and the rank of its field (lower wins); empty: a marker, no failure.
    pub(crate) error_type: Option<(u8, Text)>,
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

/// The most of a `Debug` value's text a feed formats for a field it reads (a name, an error
/// type): beyond it the text is cut (and a name refused), so a hostile value costs no more
/// than this to read.
pub(crate) const DEBUG_TEXT_LIMIT: usize = 1024;

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

/// A `Debug` value's text, at most the larger of [`DEBUG_TEXT_LIMIT`] and the name limit plus
/// four: a text cut there (at a character boundary, up to three bytes short) is still longer
/// than a name may be, so a name cut short is refused, never taken truncated.
pub(crate) fn debug_text(value: &dyn fmt::Debug, max_name_len: usize) -> String {
    let mut out = Bounded {
        text: String::new(),
        limit: max_name_len.saturating_add(4).max(DEBUG_TEXT_LIMIT),
    };
    let _ = fmt::write(&mut out, format_args!("{value:?}"));
    out.text
}

/// A span's status: recorded as `otel.status_code`, or the OpenTelemetry span's own.
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

    /// Reads `field` = `value` (text) the way `convention` says (inlined into the visitor's
    /// `record_str`: the layer's hot path, as before the feeds shared it). A name longer than
    /// `max_name_len` bytes is refused, never copied ([`rejected_name`](Self::rejected_name)).
    #[inline(always)]
    pub(crate) fn read(
        &mut self,
        convention: &Compiled,
        field: &str,
        value: &str,
        max_name_len: usize,
    ) {
        for (field_name, meaning) in convention.fields.iter() {
            if field_name != field {
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
                    if self.name.as_ref().is_none_or(|(r, _)| rank <= r) {
                        if value.len() > max_name_len {
                            // No tool's name: refused, not copied (an empty name is no name).
                            self.name = Some((*rank, Text::default()));
                            self.rejected_name = u32::try_from(value.len()).unwrap_or(u32::MAX);
                        } else {
                            self.name = Some((*rank, Text::new(value)));
                        }
                    }
                }
                Meaning::Kind { bit, expected } => {
                    self.kinds_seen |= bit;
                    if value == expected {
                        self.kinds_bad &= !bit;
                    } else {
                        self.kinds_bad |= bit;
                    }
                }
                Meaning::ErrorType { rank } => {
                    if self.error_type.as_ref().is_none_or(|(r, _)| rank <= r) {
                        self.error_type = Some((*rank, Text::new(value)));
                    }
                }
                Meaning::Failure => {
                    self.failure = Some(self.failure == Some(true) || !value.is_empty());
                }
                Meaning::Outcome => self.outcome = Some(outcome_value(value)),
                Meaning::ErrorTypeWhen {
                    expected,
                    error_type,
                } => {
                    if value == &**expected {
                        self.error_type = Some((0, Text::new(error_type)));
                    }
                }
                Meaning::OutcomeInJson { path } => {
                    if let Some(verdict) = json_string_at(value, path) {
                        self.outcome = Some(outcome_value(verdict));
                    }
                }
                Meaning::Status => self.status = Some(Status::of_code(value)),
                Meaning::HttpStatus => self.http_status = value.trim().parse().ok(),
                Meaning::RetryAfter => {
                    self.retry_after(value.trim().parse().unwrap_or(f64::NAN));
                }
            }
        }
    }

    /// Reads a numeric `field`: the HTTP status or the retry hint take it as a number, every
    /// other field as its text (`text`, formatted only then, bounded).
    pub(crate) fn read_number(
        &mut self,
        convention: &Compiled,
        field: &str,
        value: f64,
        text: &dyn fmt::Debug,
        max_name_len: usize,
    ) {
        let mut as_text = false;
        for (field_name, meaning) in convention.fields.iter() {
            if field_name != field {
                continue;
            }
            match meaning {
                Meaning::HttpStatus => {
                    if (0.0..=999.0).contains(&value) {
                        self.http_status = Some(value as u64);
                    }
                }
                Meaning::RetryAfter => self.retry_after(value),
                _ => as_text = true,
            }
        }
        if as_text {
            let text = debug_text(text, max_name_len);
            self.read(convention, field, &text, max_name_len);
        }
    }

    /// The retry hint, seconds: negative, NaN or infinite values are no hint.
    fn retry_after(&mut self, value: f64) {
        self.retry_after = (value.is_finite() && value >= 0.0).then_some(value);
    }
}

impl Status {
    /// An `otel.status_code` value: `error` (any case) or anything else.
    pub(crate) fn of_code(value: &str) -> Self {
        if value.eq_ignore_ascii_case("error") {
            Status::Error
        } else {
            Status::Other
        }
    }
}

/// How deep [`json_string_at`] follows a path (deeper paths find nothing).
const JSON_PATH_MAX: usize = 8;

/// The string at `path` (object keys, outermost first) in the JSON text `text`, without its
/// quotes; `None` when the text is not such JSON, the value is not a string, or it holds an
/// escape (a verdict is a plain word). A single pass that skips every other value without
/// recursion: bounded work on any input, however nested or malformed.
pub(crate) fn json_string_at<'t, S: AsRef<str>>(text: &'t str, path: &[S]) -> Option<&'t str> {
    if path.is_empty() || path.len() > JSON_PATH_MAX {
        return None;
    }
    let b = text.as_bytes();
    let mut i = 0;
    let ws = |i: &mut usize| {
        while *i < b.len() && b[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    // A string starting at b[*i] == '"': its contents' range; advances past it.
    let string = |i: &mut usize| -> Option<(usize, usize, bool)> {
        let start = *i + 1;
        let mut j = start;
        let mut escaped = false;
        while j < b.len() {
            match b[j] {
                b'\\' => {
                    escaped = true;
                    j += 2;
                }
                b'"' => {
                    *i = j + 1;
                    return Some((start, j, escaped));
                }
                _ => j += 1,
            }
        }
        None
    };
    // Skips one value of any kind (strings aware of escapes, brackets counted).
    let skip = |i: &mut usize| -> Option<()> {
        ws(i);
        let mut depth = 0usize;
        loop {
            let c = *b.get(*i)?;
            match c {
                b'"' => {
                    string(i)?;
                }
                b'{' | b'[' => {
                    depth += 1;
                    *i += 1;
                }
                b'}' | b']' => {
                    if depth == 0 {
                        return Some(()); // the end of the enclosing container
                    }
                    depth -= 1;
                    *i += 1;
                }
                b',' if depth == 0 => return Some(()),
                _ => *i += 1,
            }
            if depth == 0 && matches!(c, b'"' | b'}' | b']') {
                return Some(());
            }
        }
    };
    for (level, key) in path.iter().enumerate() {
        ws(&mut i);
        if *b.get(i)? != b'{' {
            return None;
        }
        i += 1;
        loop {
            ws(&mut i);
            if *b.get(i)? != b'"' {
                return None; // `}` (not found) or malformed
            }
            let (ks, ke, _) = string(&mut i)?;
            ws(&mut i);
            if *b.get(i)? != b':' {
                return None;
            }
            i += 1;
            ws(&mut i);
            if &text[ks..ke] == key.as_ref() {
                if level + 1 == path.len() {
                    if *b.get(i)? != b'"' {
                        return None;
                    }
                    let (vs, ve, escaped) = string(&mut i)?;
                    return (!escaped).then(|| &text[vs..ve]);
                }
                break; // descend
            }
            skip(&mut i)?;
            ws(&mut i);
            match *b.get(i)? {
                b',' => i += 1,
                _ => return None,
            }
        }
    }
    None
}

/// Values of the fields read on an event (or an OpenTelemetry span event).
#[derive(Debug, Default)]
pub(crate) struct EventFields {
    pub(crate) error_type: Option<Text>,
    /// The event reports a refusal: its `error` field's text contains [`REFUSAL_MESSAGE`] (a
    /// tool returning the gate's refusal as its error, as `#[instrument(err)]` logs it), or its
    /// `error.type` is the refusal's.
    pub(crate) refusal: bool,
}

impl EventFields {
    /// Reads a text field.
    pub(crate) fn read(&mut self, field: &str, value: &str) {
        if field == semconv::ERROR_TYPE && !value.is_empty() {
            self.refusal |= value == semconv::REFUSAL_ERROR_TYPE;
            self.error_type = Some(Text::new(value));
        } else if field == semconv::ERROR_FIELD {
            self.refusal |= value.contains(REFUSAL_MESSAGE);
        }
    }

    /// Reads a field known only by its `Debug` form: the `error` field is searched while it is
    /// formatted (no allocation, however long the error's text).
    pub(crate) fn read_debug(&mut self, field: &str, value: &dyn fmt::Debug) {
        if field == semconv::ERROR_TYPE {
            self.read(field, &format!("{value:?}"));
        } else if field == semconv::ERROR_FIELD {
            self.refusal |= contains_formatted(REFUSAL_MESSAGE, value);
        }
    }
}

/// Whether `value`'s `Debug` text contains `needle`, searched while formatting.
pub(crate) fn contains_formatted(needle: &str, value: &dyn fmt::Debug) -> bool {
    let mut search = Contains::new(needle.as_bytes());
    let _ = fmt::write(&mut search, format_args!("{value:?}"));
    search.found
}

/// A streaming substring search (Knuth–Morris–Pratt) over formatted text.
pub(crate) struct Contains<'a> {
    needle: &'a [u8],
    /// Length of the needle's prefix matched so far.
    matched: usize,
    pub(crate) found: bool,
}

impl<'a> Contains<'a> {
    pub(crate) fn new(needle: &'a [u8]) -> Self {
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

/// What is known about one tool call so far, from every feed's visits, events and status:
/// the input of the classification.
#[derive(Debug)]
pub(crate) struct Observed {
    /// The tool name and the rank of the convention's source it came from.
    pub(crate) name: Option<(u8, Text)>,
    /// Kind checks of the convention whose last recorded value did not match (bits).
    pub(crate) kinds_bad: u8,
    /// The error type (non-empty) and the rank of its field.
    pub(crate) error_type: Option<(u8, Text)>,
    pub(crate) event_error_type: Option<Text>,
    /// A failure field of the convention was recorded non-empty.
    pub(crate) failure_field: bool,
    /// The framework's own verdict (`gen_ai.tool.call.outcome`).
    pub(crate) call_outcome: Option<Cow<'static, str>>,
    pub(crate) http_status: Option<u64>,
    pub(crate) retry_after: Option<f64>,
    pub(crate) status_error: bool,
    pub(crate) error_event: bool,
    pub(crate) panicked: bool,
    pub(crate) completed: bool,
    /// The call was refused: its tool returned the refusal as its error (an `error` field whose
    /// text contains [`REFUSAL_MESSAGE`](crate::REFUSAL_MESSAGE)), or recorded `error.type` =
    /// [`REFUSAL_ERROR_TYPE`](crate::layer::REFUSAL_ERROR_TYPE). A refused call is never a
    /// failure, whether or not the gate could bind to the span.
    pub(crate) refused: bool,
    /// The framework reported the call's failure after its span (a late verdict, see
    /// [`Convention::late_failure`](super::Convention::late_failure)).
    pub(crate) late_failure: bool,
    /// The call was recorded another way already (a receiver's span of a call its
    /// application served itself): it records nothing, nor does a span of the same tool that
    /// takes it in.
    pub(crate) recorded_elsewhere: bool,
}

impl Observed {
    /// Nothing seen yet. A convention that marks nothing on success starts completed: strict
    /// mode cannot apply to it.
    pub(crate) fn new(completion_marker: bool) -> Self {
        Self {
            name: None,
            kinds_bad: 0,
            error_type: None,
            event_error_type: None,
            failure_field: false,
            call_outcome: None,
            http_status: None,
            retry_after: None,
            status_error: false,
            error_event: false,
            panicked: false,
            completed: !completion_marker,
            refused: false,
            late_failure: false,
            recorded_elsewhere: false,
        }
    }

    /// Applies recorded field values.
    pub(crate) fn apply(&mut self, fields: SpanFields) {
        if let Some((rank, name)) = fields.name {
            if self.name.as_ref().is_none_or(|(r, _)| rank <= *r) {
                self.name = Some((rank, name));
            }
        }
        self.kinds_bad = (self.kinds_bad & !fields.kinds_seen) | fields.kinds_bad;
        if let Some((rank, error_type)) = fields.error_type {
            self.completed = true;
            self.refused |= error_type == semconv::REFUSAL_ERROR_TYPE;
            // An empty error type is a completion marker but no failure.
            if error_type.is_empty() {
                if self.error_type.as_ref().is_some_and(|(r, _)| *r == rank) {
                    self.error_type = None;
                }
            } else if self.error_type.as_ref().is_none_or(|(r, _)| rank <= *r) {
                self.error_type = Some((rank, error_type));
            }
        }
        if let Some(failed) = fields.failure {
            self.completed = true;
            self.failure_field |= failed;
        }
        if let Some(outcome) = fields.outcome {
            self.completed = true;
            self.call_outcome = Some(outcome);
        }
        if let Some(status) = fields.status {
            self.completed = true;
            self.status_error = status == Status::Error;
        }
        if fields.http_status.is_some() {
            self.http_status = fields.http_status;
        }
        if fields.retry_after.is_some() {
            self.retry_after = fields.retry_after;
        }
    }

    /// An event that failed the call (an ERROR event, an `error` field directly in the span),
    /// with the error type it carried.
    pub(crate) fn error_event(&mut self, error_type: Option<Text>) {
        self.error_event = true;
        if self.event_error_type.is_none() {
            self.event_error_type = error_type;
        }
    }

    /// The tool's retry hint: the retry-after field, when the HTTP status (if any) is one that
    /// carries it (429 Too Many Requests, 503 Service Unavailable). Used on failures only.
    pub(crate) fn retry_hint(&self) -> Option<Duration> {
        let status_ok = matches!(self.http_status, None | Some(429) | Some(503));
        self.retry_after
            .filter(|_| status_ok)
            .and_then(|s| Duration::try_from_secs_f64(s).ok())
    }

    /// Whether the span may still turn out to be a tool span (no kind check of its convention,
    /// such as `gen_ai.operation.name`, was recorded with another value).
    pub(crate) fn may_be_tool(&self) -> bool {
        self.kinds_bad == 0
    }

    /// The tool name, when the span is a tool span.
    pub(crate) fn tool_name(&self) -> Option<&str> {
        if !self.may_be_tool() {
            return None;
        }
        self.name
            .as_ref()
            .map(|(_, n)| n.as_str())
            .filter(|n| !n.is_empty())
    }

    /// What the classifier reads, for the call of `tool`.
    pub(crate) fn facts<'a>(&'a self, tool: &'a str) -> SpanFacts<'a> {
        SpanFacts {
            tool,
            error_type: self
                .error_type
                .as_ref()
                .map(|(_, t)| t.as_str())
                .or(self.event_error_type.as_deref()),
            call_outcome: self.call_outcome.as_deref(),
            failure_field: self.failure_field,
            status_error: self.status_error,
            error_event: self.error_event || self.late_failure,
            panicked: self.panicked,
            completed: self.completed || self.late_failure,
        }
    }

    /// Folds what was seen on a closed tool span of the same tool nested in this one into it
    /// (one call is one record).
    pub(crate) fn absorb(&mut self, inner: &mut Observed) {
        if self.error_type.is_none() {
            self.error_type = inner.error_type.take();
        }
        if self.event_error_type.is_none() {
            self.event_error_type = inner.event_error_type.take();
        }
        if self.http_status.is_none() {
            self.http_status = inner.http_status;
        }
        if self.retry_after.is_none() {
            self.retry_after = inner.retry_after;
        }
        if self.call_outcome.is_none() {
            // The framework's own verdict (`skipped`, `denied`) on the inner span holds for
            // the call.
            self.call_outcome = inner.call_outcome.take();
        }
        self.failure_field |= inner.failure_field;
        self.status_error |= inner.status_error;
        self.error_event |= inner.error_event;
        self.panicked |= inner.panicked;
        self.completed |= inner.completed;
        self.refused |= inner.refused;
        self.late_failure |= inner.late_failure;
        self.recorded_elsewhere |= inner.recorded_elsewhere;
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

    #[test]
    fn kinds_and_name_decide_tool_spans() {
        let mut s = Observed::new(true);
        assert_eq!(s.tool_name(), None);
        s.apply(SpanFields {
            name: Some((0, Text::default())),
            ..Default::default()
        });
        assert_eq!(s.tool_name(), None, "an empty name is no name");
        s.apply(SpanFields {
            name: Some((1, "later-source".into())),
            ..Default::default()
        });
        s.apply(SpanFields {
            name: Some((0, "x".into())),
            ..Default::default()
        });
        s.apply(SpanFields {
            name: Some((1, "ignored: an earlier source named it".into())),
            ..Default::default()
        });
        assert_eq!(s.tool_name(), Some("x"));
        s.apply(SpanFields {
            kinds_seen: 0b10,
            kinds_bad: 0b10,
            ..Default::default()
        });
        assert_eq!(s.tool_name(), None);
        assert!(!s.may_be_tool());
        // The same check recorded again with the expected value clears it; another check
        // matching does not.
        s.apply(SpanFields {
            kinds_seen: 0b01,
            ..Default::default()
        });
        assert!(!s.may_be_tool());
        s.apply(SpanFields {
            kinds_seen: 0b10,
            ..Default::default()
        });
        assert_eq!(s.tool_name(), Some("x"));
    }

    #[test]
    fn a_convention_without_marker_starts_completed() {
        assert!(Observed::new(false).completed);
        assert!(!Observed::new(true).completed);
    }

    #[test]
    fn markers_and_errors_from_fields() {
        let mut s = Observed::new(false);
        s.apply(SpanFields {
            error_type: Some((0, Text::default())),
            ..Default::default()
        });
        assert!(s.completed && s.error_type.is_none());
        s.apply(SpanFields {
            error_type: Some((1, "other".into())),
            ..Default::default()
        });
        s.apply(SpanFields {
            error_type: Some((0, "timeout".into())),
            ..Default::default()
        });
        s.apply(SpanFields {
            error_type: Some((1, "later, lower rank".into())),
            ..Default::default()
        });
        assert_eq!(
            s.error_type.as_ref().map(|(_, t)| t.as_str()),
            Some("timeout")
        );
        s.apply(SpanFields {
            outcome: Some("denied".into()),
            failure: Some(true),
            ..Default::default()
        });
        assert_eq!(s.call_outcome.as_deref(), Some("denied"));
        assert!(s.failure_field);
        s.apply(SpanFields {
            status: Some(Status::Error),
            ..Default::default()
        });
        assert!(s.status_error);
    }

    #[test]
    fn json_paths() {
        let lc = r#"{"type": "tool", "data": {"content": "{\"status\": \"success\"}", "additional_kwargs": {"status": "x"}, "response_metadata": {}, "artifact": [1, {"a": "}"}], "status": "error"}}"#;
        assert_eq!(json_string_at(lc, &["data", "status"]), Some("error"));
        assert_eq!(json_string_at(lc, &["type"]), Some("tool"));
        assert_eq!(json_string_at(lc, &["data", "missing"]), None);
        assert_eq!(json_string_at(lc, &["data", "additional_kwargs"]), None);
        // Text cut after the verdict (an SDK's attribute length limit) still says it.
        assert_eq!(
            json_string_at(r#"{"data": {"status": "error""#, &["data", "status"]),
            Some("error")
        );
        for bad in [
            "",
            "not json",
            "{",
            r#"{"data": {"status": 1}}"#,
            r#"{"data": {"status": "a\"b"}}"#,
            r#"["data"]"#,
            &"{\"data\": ".repeat(10_000),
            &"[".repeat(100_000),
        ] {
            assert_eq!(json_string_at(bad, &["data", "status"]), None, "{bad:.40}");
        }
    }

    #[test]
    fn a_late_failure_fails_the_call() {
        let mut s = Observed::new(false);
        s.apply(SpanFields {
            name: Some((0, "t".into())),
            ..Default::default()
        });
        assert!(!s.facts("t").error_event);
        s.late_failure = true;
        assert!(s.facts("t").error_event);
    }
}
