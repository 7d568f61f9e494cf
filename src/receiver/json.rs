//! OTLP/JSON: the same request as protobuf, in the protobuf JSON mapping OTLP specifies —
//! lowerCamelCase keys (snake_case accepted too), ids as hex, 64-bit integers as strings or
//! numbers, enums as integers (their names accepted too). Parsed with serde_json, then read
//! in place like the protobuf: spans borrow their names and values from the document.
//!
//! A document that is not a JSON object, or whose `resourceSpans` / `scopeSpans` / `spans` are
//! not arrays, is refused as a whole; a span that is not an object is rejected alone; fields of
//! the wrong type read as absent.

use serde_json::Value;

use crate::infer::span_core::Val;

use super::record::{Located, RawValue, Source, SpanRecord, WireError};

/// A member by its lowerCamelCase name, else its snake_case one.
fn member<'a>(v: &'a Value, camel: &str, snake: &str) -> Option<&'a Value> {
    let o = v.as_object()?;
    o.get(camel).or_else(|| o.get(snake))
}

/// An array member (absent: empty); `Err` when present and not an array.
fn array<'a>(
    v: &'a Value,
    camel: &str,
    snake: &str,
    what: &'static str,
) -> Result<&'a [Value], WireError> {
    match member(v, camel, snake) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(_) => Err(WireError(what)),
    }
}

/// A 64-bit unsigned integer given as a number or a decimal string.
fn u64_of(v: Option<&Value>) -> Option<u64> {
    match v? {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// A span id (16 hex digits) as the inference keys it; zero when absent or malformed.
fn id_of(v: Option<&Value>) -> u64 {
    v.and_then(Value::as_str)
        .filter(|s| s.len() == 16)
        .and_then(|s| u64::from_str_radix(s, 16).ok())
        .unwrap_or(0)
}

/// Finds every span of an OTLP/JSON `ExportTraceServiceRequest`, at most `max_spans`; how
/// many there were.
pub(crate) fn locate<'a>(
    doc: &'a Value,
    max_spans: usize,
    out: &mut Vec<Located<'a>>,
) -> Result<usize, WireError> {
    if !doc.is_object() {
        return Err(WireError("not an OTLP/JSON request"));
    }
    let mut found = 0;
    for rs in array(
        doc,
        "resourceSpans",
        "resource_spans",
        "resourceSpans is not an array",
    )? {
        for ss in array(
            rs,
            "scopeSpans",
            "scope_spans",
            "scopeSpans is not an array",
        )? {
            let scope = member(ss, "scope", "scope")
                .and_then(|s| s.get("name"))
                .and_then(Value::as_str)
                .unwrap_or("");
            for span in array(ss, "spans", "spans", "spans is not an array")? {
                found += 1;
                if out.len() < max_spans {
                    out.push(Located {
                        span: Source::Json(span),
                        scope,
                        end: u64_of(member(span, "endTimeUnixNano", "end_time_unix_nano"))
                            .unwrap_or(0),
                    });
                }
            }
        }
    }
    Ok(found)
}

/// Reads one span object into `rec` (already cleared, its scope set).
pub(crate) fn read_span<'a>(
    span: &'a Value,
    max_attributes: usize,
    max_events: usize,
    rec: &mut SpanRecord<'a>,
) -> Result<(), WireError> {
    if !span.is_object() {
        return Err(WireError("a span is not a JSON object"));
    }
    rec.span_id = id_of(member(span, "spanId", "span_id"));
    rec.parent_id = id_of(member(span, "parentSpanId", "parent_span_id"));
    rec.name = member(span, "name", "name")
        .and_then(Value::as_str)
        .unwrap_or("");
    rec.start = u64_of(member(span, "startTimeUnixNano", "start_time_unix_nano")).unwrap_or(0);
    rec.end = u64_of(member(span, "endTimeUnixNano", "end_time_unix_nano")).unwrap_or(0);
    rec.status = member(span, "status", "status")
        .and_then(|s| s.get("code"))
        .map_or(0, |c| match c {
            Value::Number(n) => n.as_u64().and_then(|c| u8::try_from(c).ok()).unwrap_or(0),
            Value::String(s) => match s.as_str() {
                "STATUS_CODE_OK" | "1" => 1,
                "STATUS_CODE_ERROR" | "2" => 2,
                _ => 0,
            },
            _ => 0,
        });
    attributes(span, "attributes", max_attributes, &mut rec.attributes);
    if let Some(Value::Array(events)) = member(span, "events", "events") {
        for ev in events.iter().take(max_events) {
            let name = member(ev, "name", "name")
                .and_then(Value::as_str)
                .unwrap_or("");
            let at = rec.event_attributes.len();
            attributes(ev, "attributes", max_attributes, &mut rec.event_attributes);
            rec.events.push((name, at, rec.event_attributes.len()));
        }
    }
    Ok(())
}

/// The `KeyValue`s of `v[key]`, at most `max`, appended to `out`.
fn attributes<'a>(v: &'a Value, key: &str, max: usize, out: &mut Vec<(&'a str, RawValue<'a>)>) {
    let Some(Value::Array(list)) = v.get(key) else {
        return;
    };
    for kv in list.iter().take(max) {
        let Some(k) = kv.get("key").and_then(Value::as_str) else {
            continue;
        };
        let value = kv.get("value").map_or(RawValue::Empty, RawValue::Json);
        out.push((k, value));
    }
}

/// An OTLP/JSON `AnyValue` as the inference reads it.
pub(crate) fn any_value(v: &Value) -> Val<'_> {
    let Some(o) = v.as_object() else {
        return Val::Other(&"<not an AnyValue>");
    };
    if let Some(Value::String(s)) = o.get("stringValue").or_else(|| o.get("string_value")) {
        return Val::Str(s);
    }
    if let Some(Value::Bool(b)) = o.get("boolValue").or_else(|| o.get("bool_value")) {
        return Val::Bool(*b);
    }
    if let Some(i) = o.get("intValue").or_else(|| o.get("int_value")) {
        let n = match i {
            Value::Number(n) => n.as_i64(),
            Value::String(s) => s.parse().ok(),
            _ => None,
        };
        if let Some(n) = n {
            return Val::I64(n);
        }
    }
    if let Some(d) = o.get("doubleValue").or_else(|| o.get("double_value")) {
        let x = match d {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => s.parse().ok(),
            _ => None,
        };
        if let Some(x) = x {
            return Val::F64(x);
        }
    }
    if o.contains_key("arrayValue") || o.contains_key("array_value") {
        return Val::Other(&"<array>");
    }
    if o.contains_key("kvlistValue") || o.contains_key("kvlist_value") {
        return Val::Other(&"<kvlist>");
    }
    if o.contains_key("bytesValue") || o.contains_key("bytes_value") {
        return Val::Other(&"<bytes>");
    }
    Val::Other(&"<empty>")
}
