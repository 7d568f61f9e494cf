//! OTLP/protobuf, read in place: an `ExportTraceServiceRequest`'s bytes walked field by field,
//! every name and value borrowed from the request body (no copy, no allocation per attribute).
//!
//! Only what the inference reads is decoded — a span's ids, name, times, status, attributes
//! and events, and its instrumentation scope's name — and every other field is skipped by its
//! wire type, so a newer OTLP with more fields reads the same. A value is decoded only when it
//! is read (a long JSON result that no convention looks at is never validated as UTF-8).
//!
//! Malformed input is handled at two levels:
//!
//! * the **envelopes** (the request, a `ResourceSpans`, a `ScopeSpans`): a broken length or
//!   wire type there means the rest cannot be found — the request is not OTLP and is refused
//!   as a whole ([`WireError`]);
//! * a **span** (or anything inside it) is length-delimited within a sound envelope: a broken
//!   span is rejected alone and counted (OTLP's partial success), and the next span is read.

use super::record::{Located, RawValue, Source, SpanRecord, WireError};

/// Protobuf wire types.
const VARINT: u8 = 0;
const I64: u8 = 1;
const LEN: u8 = 2;
const I32: u8 = 5;

/// A cursor over protobuf bytes.
#[derive(Clone, Copy)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

/// One field: its number and its value, by wire type.
#[derive(Clone, Copy)]
pub(crate) enum Field<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    fn varint(&mut self) -> Option<u64> {
        let mut value = 0u64;
        for shift in 0..10 {
            let b = *self.buf.get(self.pos)?;
            self.pos += 1;
            // The tenth byte may only carry the top bit of a u64.
            if shift == 9 && b > 1 {
                return None;
            }
            value |= u64::from(b & 0x7f) << (7 * shift);
            if b < 0x80 {
                return Some(value);
            }
        }
        None
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let bytes = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(bytes)
    }

    /// The next field, `None` at the end; `Err` when the bytes are not protobuf.
    pub(crate) fn next(&mut self) -> Result<Option<(u32, Field<'a>)>, WireError> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let bad = WireError("malformed protobuf");
        let key = self.varint().ok_or(bad)?;
        let number = u32::try_from(key >> 3).map_err(|_| bad)?;
        if number == 0 {
            return Err(bad);
        }
        let field = match (key & 7) as u8 {
            VARINT => Field::Varint(self.varint().ok_or(bad)?),
            I64 => Field::Fixed64(u64::from_le_bytes(
                self.take(8).ok_or(bad)?.try_into().map_err(|_| bad)?,
            )),
            LEN => {
                let n = usize::try_from(self.varint().ok_or(bad)?).map_err(|_| bad)?;
                Field::Bytes(self.take(n).ok_or(bad)?)
            }
            I32 => {
                self.take(4).ok_or(bad)?;
                Field::Fixed32
            }
            // Groups (3, 4) are not used by OTLP; anything else is not protobuf.
            _ => return Err(bad),
        };
        Ok(Some((number, field)))
    }
}

/// A length-delimited field's bytes, or an error naming what was expected.
fn bytes<'a>(field: Field<'a>, what: &'static str) -> Result<&'a [u8], WireError> {
    match field {
        Field::Bytes(b) => Ok(b),
        _ => Err(WireError(what)),
    }
}

/// A string field, UTF-8 checked.
fn text<'a>(field: Field<'a>, what: &'static str) -> Result<&'a str, WireError> {
    std::str::from_utf8(bytes(field, what)?).map_err(|_| WireError(what))
}

/// Finds every span of an `ExportTraceServiceRequest`, at most `max_spans` (`found` counts
/// them all, beyond the cap too). `Err` when an envelope is broken.
pub(crate) fn locate<'a>(
    body: &'a [u8],
    max_spans: usize,
    out: &mut Vec<Located<'a>>,
) -> Result<usize, WireError> {
    let mut found = 0usize;
    let mut request = Reader::new(body);
    while let Some((n, f)) = request.next()? {
        if n != 1 {
            continue; // not resource_spans
        }
        let mut resource = Reader::new(bytes(f, "malformed ResourceSpans")?);
        while let Some((n, f)) = resource.next()? {
            if n != 2 {
                continue; // resource (1), schema_url (3)
            }
            let scope_spans = bytes(f, "malformed ScopeSpans")?;
            // The scope may come after the spans: find it first.
            let mut scope = "";
            let mut r = Reader::new(scope_spans);
            while let Some((n, f)) = r.next()? {
                if n == 1 {
                    scope = scope_name(bytes(f, "malformed InstrumentationScope")?);
                }
            }
            let mut r = Reader::new(scope_spans);
            while let Some((n, f)) = r.next()? {
                if n != 2 {
                    continue;
                }
                let span = bytes(f, "malformed Span")?;
                found += 1;
                if out.len() < max_spans {
                    out.push(Located {
                        span: Source::Proto(span),
                        scope,
                        end: end_time(span),
                    });
                }
            }
        }
    }
    Ok(found)
}

/// An instrumentation scope's name ("" when absent or not UTF-8: no scope to match).
fn scope_name(scope: &[u8]) -> &str {
    let mut r = Reader::new(scope);
    while let Ok(Some((n, f))) = r.next() {
        if n == 1 {
            return text(f, "").unwrap_or("");
        }
    }
    ""
}

/// A span's end time, for ordering (0 when unreadable: such a span is rejected later).
fn end_time(span: &[u8]) -> u64 {
    let mut r = Reader::new(span);
    while let Ok(Some((n, f))) = r.next() {
        if let (8, Field::Fixed64(t)) = (n, f) {
            return t;
        }
    }
    0
}

/// A span's ids as the inference keys them (the first eight bytes, big-endian; zero when
/// absent or of another length).
fn span_id(b: &[u8]) -> u64 {
    <[u8; 8]>::try_from(b).map_or(0, u64::from_be_bytes)
}

/// Reads one `Span` message into `rec` (already cleared, its scope set), keeping at most
/// `max_attributes` attributes and `max_events` events (each with at most `max_attributes`
/// attributes). `Err`: the span is malformed (rejected alone).
pub(crate) fn read_span<'a>(
    span: &'a [u8],
    max_attributes: usize,
    max_events: usize,
    rec: &mut SpanRecord<'a>,
) -> Result<(), WireError> {
    let mut r = Reader::new(span);
    while let Some((n, f)) = r.next()? {
        match n {
            2 => rec.span_id = span_id(bytes(f, "malformed span id")?),
            4 => rec.parent_id = span_id(bytes(f, "malformed parent span id")?),
            5 => rec.name = text(f, "span name is not UTF-8")?,
            7 => rec.start = fixed64(f, "malformed start time")?,
            8 => rec.end = fixed64(f, "malformed end time")?,
            9 => {
                let kv = key_value(bytes(f, "malformed attribute")?)?;
                if rec.attributes.len() < max_attributes {
                    rec.attributes.push(kv);
                }
            }
            // Events past the cap are skipped unread.
            11 if rec.events.len() < max_events => {
                let at = rec.event_attributes.len();
                let name = event(
                    bytes(f, "malformed event")?,
                    max_attributes,
                    &mut rec.event_attributes,
                )?;
                rec.events.push((name, at, rec.event_attributes.len()));
            }
            15 => rec.status = status(bytes(f, "malformed status")?)?,
            _ => {}
        }
    }
    Ok(())
}

fn fixed64(field: Field<'_>, what: &'static str) -> Result<u64, WireError> {
    match field {
        Field::Fixed64(t) => Ok(t),
        _ => Err(WireError(what)),
    }
}

/// A `KeyValue`: its key (UTF-8 checked) and its value, undecoded.
fn key_value(kv: &[u8]) -> Result<(&str, RawValue<'_>), WireError> {
    let mut key = "";
    let mut value = RawValue::Empty;
    let mut r = Reader::new(kv);
    while let Some((n, f)) = r.next()? {
        match n {
            1 => key = text(f, "attribute key is not UTF-8")?,
            2 => value = RawValue::Proto(bytes(f, "malformed attribute value")?),
            _ => {}
        }
    }
    Ok((key, value))
}

/// An `Event`: its name, its attributes appended to `attributes` (at most `max`).
fn event<'a>(
    ev: &'a [u8],
    max: usize,
    attributes: &mut Vec<(&'a str, RawValue<'a>)>,
) -> Result<&'a str, WireError> {
    let mut name = "";
    let mut kept = 0;
    let mut r = Reader::new(ev);
    while let Some((n, f)) = r.next()? {
        match n {
            2 => name = text(f, "event name is not UTF-8")?,
            3 => {
                let kv = key_value(bytes(f, "malformed event attribute")?)?;
                if kept < max {
                    attributes.push(kv);
                    kept += 1;
                }
            }
            _ => {}
        }
    }
    Ok(name)
}

/// A `Status`'s code: 0 unset, 1 ok, 2 error.
fn status(st: &[u8]) -> Result<u8, WireError> {
    let mut code = 0;
    let mut r = Reader::new(st);
    while let Some((n, f)) = r.next()? {
        if let (3, Field::Varint(c)) = (n, f) {
            code = u8::try_from(c).unwrap_or(0);
        }
    }
    Ok(code)
}

/// An `AnyValue`'s bytes, decoded: the value the inference reads.
pub(crate) enum Decoded<'a> {
    Str(&'a str),
    Bool(bool),
    I64(i64),
    F64(f64),
    /// An array, a key-value list, bytes, or text that is not UTF-8: read by no convention.
    Opaque(&'static str),
    Empty,
}

/// Decodes an `AnyValue` (the last of its oneof fields wins, as protobuf says).
pub(crate) fn any_value(v: &[u8]) -> Decoded<'_> {
    let mut out = Decoded::Empty;
    let mut r = Reader::new(v);
    while let Ok(Some((n, f))) = r.next() {
        out = match (n, f) {
            (1, Field::Bytes(b)) => match std::str::from_utf8(b) {
                Ok(s) => Decoded::Str(s),
                Err(_) => Decoded::Opaque("<invalid UTF-8>"),
            },
            (2, Field::Varint(b)) => Decoded::Bool(b != 0),
            (3, Field::Varint(i)) => Decoded::I64(i as i64),
            (4, Field::Fixed64(x)) => Decoded::F64(f64::from_bits(x)),
            (5, _) => Decoded::Opaque("<array>"),
            (6, _) => Decoded::Opaque("<kvlist>"),
            (7, _) => Decoded::Opaque("<bytes>"),
            _ => continue,
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_their_limits() {
        let mut r = Reader::new(&[0x96, 0x01]);
        assert_eq!(r.varint(), Some(150));
        let max = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(Reader::new(&max).varint(), Some(u64::MAX));
        let over = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert_eq!(Reader::new(&over).varint(), None);
        assert_eq!(Reader::new(&[0x80]).varint(), None, "truncated");
        let eleven = [0x80; 11];
        assert_eq!(Reader::new(&eleven).varint(), None);
    }

    #[test]
    fn garbage_is_no_request_and_an_empty_body_is_an_empty_one() {
        let mut out = Vec::new();
        assert_eq!(locate(&[], 10, &mut out), Ok(0));
        // Field 1 with a length past the end.
        assert!(locate(&[0x0a, 0x05, 0x01], 10, &mut out).is_err());
        // Wire type 7 does not exist.
        assert!(locate(&[0x0f], 10, &mut out).is_err());
        // resource_spans as a varint.
        assert!(locate(&[0x08, 0x01], 10, &mut out).is_err());
        // Field number 0.
        assert!(locate(&[0x02, 0x00], 10, &mut out).is_err());
    }
}
