//! What the receiver answers, encoded by hand (a few fields): OTLP's
//! `ExportTraceServiceResponse` with its partial success, and `google.rpc.Status` for errors
//! (with `RetryInfo` when the exporter should retry), in protobuf or OTLP/JSON.

use std::time::Duration;

/// Appends a protobuf varint.
fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends a length-delimited field.
fn len_field(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    varint(out, u64::from(number) << 3 | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Appends a varint field.
fn varint_field(out: &mut Vec<u8>, number: u32, v: u64) {
    varint(out, u64::from(number) << 3);
    varint(out, v);
}

/// `ExportTraceServiceResponse`, protobuf: empty when everything was accepted, else its
/// `partial_success` (`rejected_spans`, `error_message`).
pub(crate) fn response_proto(rejected: u64, message: &str) -> Vec<u8> {
    if rejected == 0 && message.is_empty() {
        return Vec::new();
    }
    let mut partial = Vec::new();
    if rejected != 0 {
        varint_field(&mut partial, 1, rejected);
    }
    if !message.is_empty() {
        len_field(&mut partial, 2, message.as_bytes());
    }
    let mut out = Vec::new();
    len_field(&mut out, 1, &partial);
    out
}

/// A JSON string literal.
fn json_string(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

/// `ExportTraceServiceResponse`, OTLP/JSON (64-bit integers as strings).
pub(crate) fn response_json(rejected: u64, message: &str) -> Vec<u8> {
    if rejected == 0 && message.is_empty() {
        return b"{}".to_vec();
    }
    format!(
        "{{\"partialSuccess\":{{\"rejectedSpans\":\"{rejected}\",\"errorMessage\":{}}}}}",
        json_string(message)
    )
    .into_bytes()
}

/// gRPC status codes the receiver answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Code {
    InvalidArgument = 3,
    ResourceExhausted = 8,
    Unavailable = 14,
}

/// `google.rpc.RetryInfo { retry_delay }` packed in an `Any`.
fn retry_info_any(delay: Duration) -> Vec<u8> {
    let mut d = Vec::new();
    if delay.as_secs() != 0 {
        varint_field(&mut d, 1, delay.as_secs());
    }
    if delay.subsec_nanos() != 0 {
        varint_field(&mut d, 2, u64::from(delay.subsec_nanos()));
    }
    let mut info = Vec::new();
    len_field(&mut info, 1, &d);
    let mut any = Vec::new();
    len_field(&mut any, 1, b"type.googleapis.com/google.rpc.RetryInfo");
    len_field(&mut any, 2, &info);
    any
}

/// `google.rpc.Status`, protobuf: the code, the message, `RetryInfo` when given.
pub(crate) fn status_proto(code: Code, message: &str, retry: Option<Duration>) -> Vec<u8> {
    let mut out = Vec::new();
    varint_field(&mut out, 1, code as u64);
    len_field(&mut out, 2, message.as_bytes());
    if let Some(delay) = retry {
        len_field(&mut out, 3, &retry_info_any(delay));
    }
    out
}

/// `google.rpc.Status`, JSON.
pub(crate) fn status_json(code: Code, message: &str, retry: Option<Duration>) -> Vec<u8> {
    let details = match retry {
        Some(d) => format!(
            ",\"details\":[{{\"@type\":\"type.googleapis.com/google.rpc.RetryInfo\",\"retryDelay\":\"{}s\"}}]",
            d.as_secs_f64()
        ),
        None => String::new(),
    };
    format!(
        "{{\"code\":{},\"message\":{}{details}}}",
        code as u8,
        json_string(message)
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_success_is_an_empty_response() {
        assert!(response_proto(0, "").is_empty());
        assert_eq!(response_json(0, ""), b"{}");
        // partial_success { rejected_spans: 2, error_message: "x" }
        assert_eq!(
            response_proto(2, "x"),
            vec![0x0a, 0x05, 0x08, 0x02, 0x12, 0x01, b'x']
        );
        let j: serde_json::Value = serde_json::from_slice(&response_json(2, "a\"b")).unwrap();
        assert_eq!(j["partialSuccess"]["rejectedSpans"], "2");
        assert_eq!(j["partialSuccess"]["errorMessage"], "a\"b");
    }

    #[test]
    fn statuses_carry_retry_info() {
        let s = status_proto(Code::Unavailable, "busy", Some(Duration::from_secs(1)));
        assert_eq!(&s[..2], &[0x08, 14]);
        assert!(s
            .windows(b"google.rpc.RetryInfo".len())
            .any(|w| w == b"google.rpc.RetryInfo"));
        let j: serde_json::Value =
            serde_json::from_slice(&status_json(Code::InvalidArgument, "bad", None)).unwrap();
        assert_eq!(j["code"], 3);
    }
}
