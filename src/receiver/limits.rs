//! What one receiver accepts: request sizes, the memory all requests in flight may hold, how
//! much of a span is read, how long a tool name may be. Every limit is checked when the
//! receiver is built, with an error naming the setting and its range.

use std::fmt;

/// The receiver's limits (see each field; [`Limits::default`] gives the defaults).
///
/// Memory is bounded by them: requests in flight hold at most
/// [`max_in_flight_bytes`](Self::max_in_flight_bytes) of request bodies (decompressed), and
/// reading one request adds 40 bytes per span located plus one span's attributes and events at
/// a time (OTLP/JSON adds serde_json's document, a few times the body).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// The largest request body, after decompression (default 8 MiB; 1 KiB – 1 GiB). A larger
    /// one is refused (HTTP 413, gRPC `RESOURCE_EXHAUSTED` without retry information: the
    /// exporter drops it rather than retrying) and never read past the limit.
    pub max_request_bytes: usize,
    /// Request bytes all requests in flight may hold together (default 64 MiB; at least
    /// `max_request_bytes`, at most 16 GiB). A request that would go past it is answered with
    /// back-pressure: HTTP 429 with `Retry-After`, gRPC `RESOURCE_EXHAUSTED` with retry
    /// information — the exporter retries later.
    pub max_in_flight_bytes: usize,
    /// Spans read per request (default 65,536; 1 – 16,777,216). Spans past it are counted as
    /// rejected in the answer's partial success (and still forwarded).
    pub max_spans_per_request: usize,
    /// Attributes read per span and per span event (default 256; 1 – 65,536): the rest are
    /// not read.
    pub max_attributes_per_span: usize,
    /// Events read per span (default 128; 0 – 65,536).
    pub max_events_per_span: usize,
    /// The longest tool name taken (default 256 bytes, the fleet's; 1 – 65,536): a span whose
    /// tool name is longer records nothing and is counted ([`ReceiverStats::names_refused`](super::ReceiverStats::names_refused)).
    pub max_name_len: usize,
    /// The bytes waiting to be forwarded to the next endpoint (default 64 MiB; at least
    /// `max_request_bytes`, at most 16 GiB). While the next endpoint cannot keep up and this is
    /// full, requests are answered HTTP 503 with `Retry-After` (gRPC `UNAVAILABLE`): nothing
    /// received is dropped silently.
    pub max_forward_queue_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_request_bytes: 8 << 20,
            max_in_flight_bytes: 64 << 20,
            max_spans_per_request: 65_536,
            max_attributes_per_span: 256,
            max_events_per_span: 128,
            max_name_len: 256,
            max_forward_queue_bytes: 64 << 20,
        }
    }
}

/// A receiver setting out of its range.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReceiverError {
    /// A limit is outside its range.
    Limit {
        /// The setting (`Limits` field).
        field: &'static str,
        /// The value given.
        value: usize,
        /// The allowed range, in words.
        range: String,
    },
    /// The forwarding endpoint is not an `http://` or `https://` URL.
    ForwardUrl {
        /// The URL given.
        url: String,
        /// Why it was refused.
        reason: String,
    },
    /// A forwarding header's name or value is not valid HTTP.
    ForwardHeader {
        /// The header's name as given.
        name: String,
    },
    /// Forwarding is on (the HTTP client needs a TLS provider, even for `http://`) and no TLS
    /// provider is installed nor can the built-in one run on this CPU (the
    /// pure-Rust one needs AES, PCLMULQDQ, BMI1, ADX, AVX and AVX2 on x86-64): install a
    /// rustls crypto provider (e.g. `rustls::crypto::ring::default_provider().install_default()`)
    /// before building the receiver.
    TlsProviderUnsupported,
}

impl fmt::Display for ReceiverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Limit {
                field,
                value,
                range,
            } => write!(
                f,
                "receiver limit `{field}` = {value} is out of range ({range})"
            ),
            Self::ForwardUrl { url, reason } => {
                write!(f, "receiver forwarding endpoint {url:?}: {reason}")
            }
            Self::ForwardHeader { name } => {
                write!(
                    f,
                    "receiver forwarding header {name:?} is not a valid HTTP header"
                )
            }
            Self::TlsProviderUnsupported => f.write_str(
                "this CPU lacks what the pure-Rust TLS provider needs (the forwarding client \
                 needs one, even for http); install a rustls crypto provider before building the receiver",
            ),
        }
    }
}

impl std::error::Error for ReceiverError {}

impl Limits {
    /// Checks every limit against its range.
    pub fn validate(&self) -> Result<(), ReceiverError> {
        const KIB: usize = 1 << 10;
        const GIB: usize = 1 << 30;
        let check = |field: &'static str, value: usize, lo: usize, hi: usize, range: &str| {
            if (lo..=hi).contains(&value) {
                Ok(())
            } else {
                Err(ReceiverError::Limit {
                    field,
                    value,
                    range: range.to_owned(),
                })
            }
        };
        check(
            "max_request_bytes",
            self.max_request_bytes,
            KIB,
            GIB,
            "1 KiB to 1 GiB",
        )?;
        check(
            "max_in_flight_bytes",
            self.max_in_flight_bytes,
            self.max_request_bytes,
            16 * GIB,
            "max_request_bytes to 16 GiB",
        )?;
        check(
            "max_spans_per_request",
            self.max_spans_per_request,
            1,
            1 << 24,
            "1 to 16,777,216",
        )?;
        check(
            "max_attributes_per_span",
            self.max_attributes_per_span,
            1,
            65_536,
            "1 to 65,536",
        )?;
        check(
            "max_events_per_span",
            self.max_events_per_span,
            0,
            65_536,
            "0 to 65,536",
        )?;
        check("max_name_len", self.max_name_len, 1, 65_536, "1 to 65,536")?;
        check(
            "max_forward_queue_bytes",
            self.max_forward_queue_bytes,
            self.max_request_bytes,
            16 * GIB,
            "max_request_bytes to 16 GiB",
        )?;
        Ok(())
    }
}
