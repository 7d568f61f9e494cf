//! The attribute keys a span core asks a span for, made once per feed: a table of every key
//! its conventions match on and read, and for each convention, by key, what decides that a
//! span is its tool span and what it reads then.
//!
//! A feed whose spans keep their attributes in a map of their own (a Python span's dict) looks
//! each key up by its place in the table, with a key object it made once; a span is then read
//! in the order a decision needs: the target and the fields that match a convention first —
//! most spans are no tool call and cost just those lookups —, then only the keys the matched
//! convention reads, never the span's other attributes. A feed whose spans are lists (an SDK's
//! `SpanData`, a received OTLP span) reads them as before ([`Attributes::each_of`] defaults to
//! every pair).

use std::borrow::Cow;

use crate::infer::conventions::{Compiled, Convention};
use crate::semconv;

use super::span_view::{Attributes, Key, Keys};

type Str = Cow<'static, str>;

/// Where a span's target comes from, before its instrumentation scope: tracing-opentelemetry's
/// `target`, then the code's module.
const TARGET_KEYS: [&str; 3] = ["target", "code.module.name", "code.namespace"];

/// The places of the keys the core always asks by name (the first in the table).
const TARGET: [usize; 3] = [0, 1, 2];
const GATE_DECISION: usize = 3;
const REGISTRY_ID: usize = 4;

/// What one convention asks of a span, by place (`None`: a field every span declares —
/// `otel.name` is the span's name, `otel.status_code` its status).
#[derive(Debug)]
struct Shape {
    /// Must all be declared.
    required: Box<[Option<usize>]>,
    /// One of them must be declared.
    names: Box<[Option<usize>]>,
    /// The keys its compiled table reads, each once, in the table's order.
    reads: Box<[usize]>,
}

/// Every attribute key a core asks for, and each convention's shape by key.
#[derive(Debug)]
pub(crate) struct SpanKeys {
    /// The table: each key once.
    names: Box<[Str]>,
    /// Each convention's, in the conventions' order.
    shapes: Box<[Shape]>,
}

/// `name`'s place in `names`, added when new.
fn place(names: &mut Vec<Str>, name: &str) -> usize {
    match names.iter().position(|n| n == name) {
        Some(i) => i,
        None => {
            names.push(Cow::Owned(name.to_owned()));
            names.len() - 1
        }
    }
}

impl SpanKeys {
    /// The table of `conventions` (and of their compiled tables, in the same order).
    pub(crate) fn new(conventions: &[Convention], compiled: &[Compiled]) -> Self {
        let mut names: Vec<Str> = TARGET_KEYS.iter().map(|&k| Cow::Borrowed(k)).collect();
        names.push(Cow::Borrowed(semconv::GATE_DECISION));
        names.push(Cow::Borrowed(semconv::REGISTRY_ID));
        let shapes = conventions
            .iter()
            .zip(compiled)
            .map(|(c, table)| {
                let mut field = |f: &str| {
                    (f != semconv::OTEL_NAME && f != semconv::OTEL_STATUS_CODE)
                        .then(|| place(&mut names, f))
                };
                let required = c.required_fields().map(&mut field).collect();
                let named = c.name_fields().map(&mut field).collect();
                let mut reads: Vec<usize> = Vec::new();
                for (f, _) in table.fields.iter() {
                    let i = place(&mut names, f);
                    if !reads.contains(&i) {
                        reads.push(i);
                    }
                }
                Shape {
                    required,
                    names: named,
                    reads: reads.into_boxed_slice(),
                }
            })
            .collect();
        Self {
            names: names.into_boxed_slice(),
            shapes,
        }
    }

    /// Every key, in the order of their places.
    pub(crate) fn names(&self) -> impl ExactSizeIterator<Item = &str> {
        self.names.iter().map(|n| &**n)
    }

    /// The place of `name` in the table, if it has one.
    pub(crate) fn index_of(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    fn key(&self, index: usize) -> Key<'_> {
        Key {
            index,
            name: &self.names[index],
        }
    }

    /// `target`, `code.module.name`, `code.namespace`: where a span's target comes from,
    /// before its instrumentation scope.
    pub(crate) fn target(&self) -> [Key<'_>; 3] {
        TARGET.map(|i| self.key(i))
    }

    /// [`semconv::GATE_DECISION`].
    pub(crate) fn gate_decision(&self) -> Key<'_> {
        self.key(GATE_DECISION)
    }

    /// [`semconv::REGISTRY_ID`].
    #[cfg_attr(not(feature = "receiver"), allow(dead_code))]
    pub(crate) fn registry_id(&self) -> Key<'_> {
        self.key(REGISTRY_ID)
    }

    /// Whether `span` declares the fields the convention at `index` matches on (its target and
    /// static name checked already): every required field, and one of its name fields.
    pub(crate) fn declares(&self, index: usize, span: &dyn Attributes) -> bool {
        let Some(shape) = self.shapes.get(index) else {
            return false;
        };
        let declared = |f: &Option<usize>| f.is_none_or(|i| span.get_key(self.key(i)).is_some());
        shape.required.iter().all(declared) && shape.names.iter().any(declared)
    }

    /// The keys the convention at `index` reads.
    pub(crate) fn reads(&self, index: usize) -> Keys<'_> {
        Keys {
            names: &self.names,
            places: self.shapes.get(index).map_or(&[], |s| &s.reads),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::semconv;

    #[test]
    fn every_key_has_one_place_and_each_convention_its_keys() {
        let conventions = {
            let mut c = Convention::other_languages();
            c.extend(Convention::builtin());
            c
        };
        let compiled: Vec<Compiled> = conventions
            .iter()
            .map(|c| c.compile(&Cow::Borrowed(semconv::RETRY_AFTER)))
            .collect();
        let keys = SpanKeys::new(&conventions, &compiled);
        let names: Vec<&str> = keys.names().collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "each key once: {names:?}");
        assert_eq!(keys.target().map(|k| k.name), TARGET_KEYS);
        assert_eq!(keys.gate_decision().name, semconv::GATE_DECISION);
        // Every field a convention reads or matches on has its place (otel.name and
        // otel.status_code are declared by every span: no key needed to match).
        for (i, (c, table)) in conventions.iter().zip(&compiled).enumerate() {
            let reads: Vec<&str> = keys.reads(i).iter().map(|k| k.name).collect();
            for (f, _) in table.fields.iter() {
                assert!(reads.contains(&&**f), "{}: {f}", c.name());
            }
            for f in c.required_fields().chain(c.name_fields()) {
                assert!(
                    f == semconv::OTEL_NAME || keys.index_of(f).is_some(),
                    "{}: {f}",
                    c.name()
                );
            }
        }
    }
}
