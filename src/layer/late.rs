//! Late verdicts in the `tracing` feed: calls of a convention whose framework reports failures
//! after the span ([`Convention::late_failure`](crate::layer::Convention::late_failure)) wait
//! in the inference's bounded table (`infer/deferred.rs`) for the framework's next move in the
//! parent span — read here from the layer's callbacks — and are recorded through the same
//! close path as every other call.
//!
//! Costs: a layer whose conventions have late failures (the built-in set: adk, swiftide)
//! pays one relaxed load per event while no such call waits, and nothing per span of
//! another kind; only the spans of those conventions and the events in a parent with a
//! waiting call look further. No allocation per call (the table's slots are allocated with the
//! layer; verdict events are read into stack buffers).

use std::fmt::{self, Write as _};
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tracing::span::Id;
use tracing::Event;
use tracing_core::field::{Field, Visit};

use crate::hook;
use crate::infer::conventions::{within, Compiled, LateFailure};
use crate::infer::deferred::{self, Closed, Deferred, Resolution, Resolved};

use super::span_state::{SpanCell, ToolSpan};
use super::{LayerCore, ToolHealthLayer};

/// A waiting call: its span's state, its id, and its tool name's hash (matched without
/// locking the state: the table's lock is never held while waiting for a span's).
pub(crate) type Waiting = (SpanCell, Id, u64);

/// The hash a waiting call's tool name is matched by (FNV-1a; no allocation).
pub(super) fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The longest tool name or message prefix a verdict event is read into (stack buffers).
const TEXT: usize = 256;

impl LayerCore {
    /// The table, when this layer's conventions have late failures and a call waits.
    #[inline]
    pub(super) fn late_busy(&self) -> Option<&Deferred<Waiting>> {
        self.late.as_ref().filter(|late| !late.is_idle())
    }

    /// A tool span of a late-failure convention starts under `parent`: it is registered. A new
    /// tool span in a parent is that framework's next move there.
    pub(super) fn late_open(
        &self,
        parent: Option<Id>,
        id: &Id,
        cell: &SpanCell,
        name: Option<u64>,
        late_convention: bool,
    ) {
        let Some(late) = self.late.as_ref() else {
            return;
        };
        let mut out = late.batch();
        if let Some(parent) = &parent {
            if !late.is_idle() {
                late.moved_on(parent.into_u64(), false, &mut out);
            }
            if late_convention {
                let item = (cell.clone(), id.clone(), name.unwrap_or(0));
                if late.open(parent.into_u64(), item, &mut out).is_ok() {
                    cell.lock().late = true;
                }
            }
        }
        self.record_late(out);
    }

    /// A late-failure tool span closed with what it showed so far: whether it now waits (the
    /// caller records nothing). `state` is locked; `cell` is its shared cell.
    pub(super) fn late_close(
        &self,
        cell: &SpanCell,
        state: &mut ToolSpan,
        end: Duration,
        nested: bool,
    ) -> bool {
        let Some(late) = self.late.as_ref().filter(|_| state.late) else {
            return false;
        };
        state.late = false;
        let is_item = |w: &Waiting| Arc::ptr_eq(&w.0 .0, &cell.0);
        if nested {
            // Folded into the span around it, which records the call.
            let _ = late.forget(is_item);
            return false;
        }
        let failed_already = {
            let name = state.tool_name();
            let settled = state.helper_recorded;
            let refused = state.refused
                || state
                    .binding
                    .as_ref()
                    .is_some_and(|b| !b.decision.is_allowed());
            match name {
                Some(name) if !settled && !refused && !state.late_failure => {
                    let facts = state.seen.facts(name);
                    self.classify(&facts) != Some(crate::CallOutcome::Success)
                }
                _ => true,
            }
        };
        if failed_already {
            // Decided by the span itself (or no tool call): recorded now, undeferred.
            if late.forget(is_item) == Some(true) {
                state.late_failure = true;
            }
            return false;
        }
        let probe_timeout = state
            .tool_name()
            .map_or(Duration::ZERO, |t| self.registry.probe_timeout_of(t));
        match late.close(end, deferred::due(end, probe_timeout), is_item) {
            Closed::Waits => {
                // Still "live" for `on_close`'s fast path: the parent's close must be seen.
                self.live_tool_spans.fetch_add(1, Ordering::Relaxed);
                hook::deferred_add(1);
                true
            }
            Closed::Failed(_) => {
                state.late_failure = true;
                false
            }
            Closed::NotFound => false,
        }
    }

    /// An event in a span that may be the parent of waiting calls: a verdict fails its call,
    /// another event of the framework's (its crate's target) is its next move there.
    pub(super) fn late_event(
        &self,
        late: &Deferred<Waiting>,
        parent: &Id,
        event: &Event<'_>,
        candidate: bool,
    ) {
        let key = parent.into_u64();
        if !late.has_parent(key) {
            return;
        }
        let mut out = late.batch();
        let mut is_verdict = false;
        if candidate {
            for c in self.compiled.iter() {
                let Some(lf) = c.late_failure.as_ref() else {
                    continue;
                };
                let meta = event.metadata();
                if !lf.may_match(meta.target(), *meta.level()) {
                    continue;
                }
                let mut v = VerdictVisitor::new(lf);
                event.record(&mut v);
                if !v.message_matched {
                    continue;
                }
                is_verdict = true;
                let name = v.name.whole().map(name_hash);
                late.verdict(key, |w| name.is_none_or(|n| w.2 == n), &mut out);
                break;
            }
        }
        // Only the framework's own events are its moves: an event an application hook logs in
        // the parent (swiftide's `after_tool`, say) may come before the framework's verdict.
        let target = event.metadata().target();
        let framework = self
            .compiled
            .iter()
            .filter_map(|c| c.late_failure.as_ref())
            .any(|lf| within(target, &lf.target));
        if !is_verdict && framework {
            late.moved_on(key, false, &mut out);
        }
        self.record_late(out);
    }

    /// A span closed that may be the parent of waiting calls: they are resolved.
    pub(super) fn late_parent_closed(&self, late: &Deferred<Waiting>, parent: &Id) {
        let key = parent.into_u64();
        if !late.has_parent(key) {
            return;
        }
        let mut out = late.batch();
        late.moved_on(key, true, &mut out);
        self.record_late(out);
    }

    /// Records the calls that are due now (two loads while none waits).
    #[inline]
    pub(super) fn late_flush_due(&self) {
        if let Some(late) = self.late_busy() {
            self.late_flush_due_slow(late);
        }
    }

    #[inline(never)]
    fn late_flush_due_slow(&self, late: &Deferred<Waiting>) {
        // The clock is read with no lock held (a clock may be user code).
        let now = self.registry.now();
        let mut out = late.batch();
        late.flush_due(now, &mut out);
        self.record_late(out);
    }

    /// Records resolved calls (no table lock held), through the layer's close path.
    fn record_late(&self, mut out: Resolved<Waiting>) {
        if out.is_empty() {
            return;
        }
        let Some(core) = self.me.get().and_then(std::sync::Weak::upgrade) else {
            return;
        };
        // The layer's record path, without a subscriber: the spans are closed, nothing is
        // written on them any more.
        let layer = ToolHealthLayer::detached(core);
        for ((cell, id, _), how, end) in out.drain() {
            let Some(end) = end else {
                // Let go while still open (its parent ended): it records at its own close.
                continue;
            };
            self.live_tool_spans.fetch_sub(1, Ordering::Relaxed);
            hook::deferred_add(-1);
            // The close path measures to "now": shift the start so that it measures the
            // call's own duration, from its first enter to its span's end.
            let now = self.registry.now();
            let mut state = cell.lock();
            let duration = end.saturating_sub(state.start);
            state.start = now.saturating_sub(duration);
            if how == Resolution::Failed {
                state.late_failure = true;
            }
            layer.finish(&id, &mut state, None);
        }
    }
}

impl hook::DeferredFlush for LayerCore {
    fn flush_due(&self, registry: usize) {
        if self.registry.address() == registry {
            self.late_flush_due();
        }
    }
}

/// Where a layer's core finds itself (to record from a flush), set when it is built.
pub(crate) type SelfRef = OnceLock<std::sync::Weak<LayerCore>>;

/// Whether `compiled` has a late failure.
pub(super) fn is_late(compiled: &Compiled) -> bool {
    compiled.late_failure.is_some()
}

/// Reads a verdict event: whether its message matches, and the tool name it names.
struct VerdictVisitor<'a> {
    lf: &'a LateFailure,
    message_matched: bool,
    name: Text,
}

impl<'a> VerdictVisitor<'a> {
    fn new(lf: &'a LateFailure) -> Self {
        Self {
            lf,
            message_matched: lf.messages.is_empty(),
            name: Text::default(),
        }
    }

    fn text(&mut self, field: &Field, value: &dyn fmt::Display) {
        if field.name() == "message" {
            let mut t = Text::default();
            let _ = write!(t, "{value}");
            self.message_matched |= self.lf.message_matches(t.prefix());
            return;
        }
        if self
            .lf
            .tool_name
            .as_ref()
            .is_some_and(|(f, _)| f == field.name())
        {
            let mut t = Text::default();
            let _ = write!(t, "{value}");
            // A plain name must be whole; a name inside a longer text needs only the part up
            // to its closing quote.
            let text = match self.lf.tool_name {
                Some((_, None)) => t.whole(),
                _ => Some(t.prefix()),
            };
            if let Some(name) = text.and_then(|text| self.lf.tool_name_of(field.name(), text)) {
                let mut n = Text::default();
                let _ = n.write_str(name);
                self.name = n;
            }
        }
    }
}

impl Visit for VerdictVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.text(field, &value);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.text(field, &format_args!("{value:?}"));
    }
}

/// Up to [`TEXT`] bytes of text on the stack; longer text is cut.
struct Text {
    buf: [u8; TEXT],
    len: usize,
    overflow: bool,
}

impl Default for Text {
    fn default() -> Self {
        Self {
            buf: [0; TEXT],
            len: 0,
            overflow: false,
        }
    }
}

impl Text {
    /// The text as far as it was kept (a message prefix is enough to match).
    fn prefix(&self) -> &str {
        let bytes = &self.buf[..self.len];
        match std::str::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or(""),
        }
    }

    /// The whole text, `None` when it was cut or is empty.
    fn whole(&self) -> Option<&str> {
        if self.overflow || self.len == 0 {
            return None;
        }
        std::str::from_utf8(&self.buf[..self.len]).ok()
    }
}

impl fmt::Write for Text {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = TEXT - self.len;
        let take = s.len().min(room);
        self.buf[self.len..self.len + take].copy_from_slice(&s.as_bytes()[..take]);
        self.len += take;
        if take < s.len() {
            self.overflow = true;
        }
        Ok(())
    }
}
