//! A tracing layer that keeps every span's fields, to read what the client wrote on its MCP
//! spans.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::Subscriber;
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

/// One span: its name and its fields (as text).
#[derive(Debug, Clone, Default)]
pub struct SpanRecord {
    pub name: String,
    pub fields: BTreeMap<String, String>,
}

impl SpanRecord {
    pub fn get(&self, field: &str) -> Option<&str> {
        self.fields.get(field).map(String::as_str)
    }
}

/// Every span seen, in creation order.
#[derive(Debug, Clone, Default)]
pub struct SpanLog(Arc<Mutex<Vec<SpanRecord>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }
}

/// The index of a span's record, in its extensions.
struct Index(usize);

impl SpanLog {
    pub fn new() -> Self {
        Self::default()
    }

    /// The spans named `name`, in creation order.
    pub fn named(&self, name: &str) -> Vec<SpanRecord> {
        self.0
            .lock()
            .expect("log")
            .iter()
            .filter(|s| s.name == name)
            .cloned()
            .collect()
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for SpanLog {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut record = SpanRecord {
            name: attrs.metadata().name().to_owned(),
            ..SpanRecord::default()
        };
        attrs.record(&mut Fields(&mut record.fields));
        let mut log = self.0.lock().expect("log");
        log.push(record);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(Index(log.len() - 1));
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else {
            return;
        };
        let Some(index) = span.extensions().get::<Index>().map(|i| i.0) else {
            return;
        };
        let mut log = self.0.lock().expect("log");
        if let Some(record) = log.get_mut(index) {
            values.record(&mut Fields(&mut record.fields));
        }
    }
}
