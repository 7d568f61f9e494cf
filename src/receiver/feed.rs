//! One request into the inference: its spans located, put in the order they ended, each read
//! in place and handed to the span processor's core, recorded by the spans' own clock.
//!
//! The order matters: a batch holds a tool's failures and then, after its cooldown, the call
//! that probes it; applied by end time, the failures trip the breaker and the later call is
//! its probe, whatever order the exporter wrote them in. (Node's SDK stamps span starts in
//! whole milliseconds: ends order reliably, starts may tie.)

use std::cell::Cell;

use crate::infer::span_core::Arrival;

use super::record::{Located, Source, SpanRecord, WireError};
use super::span::View;
use super::{json, wire};
use super::{Counters, Format, IngestError, Ingested, Inner};

/// Reads `body` into the registry.
pub(super) fn ingest(inner: &Inner, body: &[u8], format: Format) -> Result<Ingested, IngestError> {
    let limits = &inner.limits;
    let arrival = Arrival::now(inner.core.registry());
    let doc;
    let mut located: Vec<Located<'_>> = Vec::new();
    let found = match format {
        Format::Protobuf => wire::locate(body, limits.max_spans_per_request, &mut located),
        Format::Json => {
            doc = serde_json::from_slice::<serde_json::Value>(body)
                .map_err(|e| IngestError::Malformed(format!("invalid JSON: {e}")))?;
            json::locate(&doc, limits.max_spans_per_request, &mut located)
        }
    }
    .map_err(|e| IngestError::Malformed(e.to_string()))?;
    // Stable: spans that ended at the same instant keep the exporter's order.
    located.sort_by_key(|l| l.end);
    let mut out = Ingested {
        rejected: (found - located.len()) as u64,
        ..Ingested::default()
    };
    if out.rejected > 0 {
        out.message = format!(
            "{} spans past the receiver's limit of {} per request",
            out.rejected, limits.max_spans_per_request
        );
    }
    let name_fields: Vec<&str> = inner.name_fields.iter().map(|f| &**f).collect();
    let refused_name = Cell::new(false);
    let mut rec = SpanRecord::default();
    let mut first_error: Option<String> = None;
    for l in &located {
        if let Err(e) = read_span(
            l,
            limits.max_attributes_per_span,
            limits.max_events_per_span,
            &mut rec,
        ) {
            out.rejected += 1;
            first_error.get_or_insert_with(|| e.to_string());
            continue;
        }
        out.spans += 1;
        refused_name.set(false);
        let view = View {
            span: &rec,
            name_fields: &name_fields,
            max_name_len: limits.max_name_len,
            refused_name: &refused_name,
        };
        inner.core.on_end(&view, Some(&arrival));
        if refused_name.get() {
            Counters::add(&inner.counters.names_refused, 1);
        }
    }
    if let Some(e) = first_error {
        let malformed = out.rejected - (found - located.len()) as u64;
        let sep = if out.message.is_empty() { "" } else { "; " };
        out.message = format!(
            "{}{sep}{malformed} malformed spans (first: {e})",
            out.message
        );
    }
    Ok(out)
}

/// Reads one located span into `rec` (cleared first) with the reader of its format.
fn read_span<'a>(
    located: &Located<'a>,
    max_attributes: usize,
    max_events: usize,
    rec: &mut SpanRecord<'a>,
) -> Result<(), WireError> {
    rec.clear();
    rec.scope = located.scope;
    match located.span {
        Source::Proto(b) => wire::read_span(b, max_attributes, max_events, rec),
        Source::Json(v) => json::read_span(v, max_attributes, max_events, rec),
    }
}
