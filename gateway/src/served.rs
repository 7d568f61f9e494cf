//! The hosts' spans of calls the gateway served: a host that carries its trace context in the
//! `tools/call`'s `_meta.traceparent` (the Python SDK 2.x client does) names the span of its
//! own side of the call. The gateway recorded that call when it served it; if the host also
//! exports its spans to the gateway's receiver, the receiver must not count it again — neither
//! that span nor the framework's span of the same tool around it (`execute_tool rs__add`
//! mapped to `rs/add`). Remembered by span id, the last [`KEPT`] of them.

use std::collections::{HashSet, VecDeque};
use std::sync::{Mutex, PoisonError};

/// How many served calls' host spans are remembered (a host's export comes seconds later).
pub(crate) const KEPT: usize = 65_536;

/// The span ids of the calls served, oldest first.
#[derive(Debug, Default)]
pub(crate) struct ServedSpans {
    inner: Mutex<(VecDeque<u64>, HashSet<u64>)>,
}

impl ServedSpans {
    /// Remembers the host span a `traceparent` (`00-{trace}-{span}-{flags}`) names; anything
    /// else is ignored.
    pub(crate) fn served(&self, traceparent: &str) {
        let Some(id) = span_id(traceparent) else {
            return;
        };
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let (order, ids) = &mut *inner;
        if !ids.insert(id) {
            return;
        }
        order.push_back(id);
        if order.len() > KEPT {
            if let Some(old) = order.pop_front() {
                ids.remove(&old);
            }
        }
    }

    /// Whether the span `id` is a host's span of a call the gateway served.
    pub(crate) fn contains(&self, id: u64) -> bool {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .1
            .contains(&id)
    }
}

/// The parent span id of a W3C `traceparent`: version `00`, 32 and 16 hex digits, not zero.
fn span_id(traceparent: &str) -> Option<u64> {
    let mut parts = traceparent.split('-');
    let (_version, trace, span) = (parts.next()?, parts.next()?, parts.next()?);
    if trace.len() != 32 || span.len() != 16 {
        return None;
    }
    u64::from_str_radix(span, 16).ok().filter(|&id| id != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_names_its_span_and_the_oldest_are_forgotten() {
        let s = ServedSpans::default();
        s.served("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
        assert!(s.contains(0xb7ad_6b71_6920_3331));
        for bad in [
            "",
            "00-abc-def-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
        ] {
            s.served(bad);
        }
        assert!(!s.contains(0));
        for i in 1..=KEPT as u64 {
            s.served(&format!("00-0af7651916cd43dd8448eb211c80319c-{i:016x}-01"));
        }
        assert!(!s.contains(0xb7ad_6b71_6920_3331), "the oldest went");
        assert!(s.contains(KEPT as u64));
    }
}
