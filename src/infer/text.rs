//! [`Text`]: a short text a feed copies off a span (a tool name, an error type), in a buffer
//! recycled per thread — after a thread's first few spans, reading one allocates nothing.
//!
//! A span's values live only as long as the feed's callback (a `tracing` visit, a span the SDK
//! lends, a Python span), while what is known of a call outlives it (a call waiting for a late
//! verdict, the layer's per-span state): so the name and the error type are copied. A `String`
//! per copy would cost every tool span an allocation; a `Text` takes a buffer left by a `Text`
//! dropped earlier on the same thread and gives it back when dropped. The pool is small and
//! bounded ([`POOL`] buffers of at most [`KEPT`] bytes each), so a burst of long or many texts
//! costs what `String`s would and leaves nothing behind.

use std::cell::RefCell;
use std::fmt;
use std::ops::Deref;

/// How many buffers a thread keeps for reuse (a call's name, error type and event error type,
/// a few calls waiting or nested: enough for every text alive at once on the hot path).
const POOL: usize = 16;

/// The largest buffer kept for reuse, in bytes: a longer one is freed (a tool name is at most
/// the registry's `max_name_len`, 256 bytes by default).
const KEPT: usize = 4096;

thread_local! {
    /// Empty buffers of this thread, with their capacity.
    static BUFFERS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// A text copied off a span, in a recycled buffer (see the [module docs](self)).
#[derive(Default, PartialEq, Eq)]
pub(crate) struct Text(String);

impl Text {
    /// A copy of `s`, in a buffer this thread recycled when it has one.
    pub(crate) fn new(s: &str) -> Self {
        if s.is_empty() {
            return Self(String::new()); // no buffer needed
        }
        let recycled = BUFFERS
            .try_with(|b| b.try_borrow_mut().ok().and_then(|mut b| b.pop()))
            .ok()
            .flatten();
        let mut buf = recycled.unwrap_or_default();
        buf.push_str(s);
        Self(buf)
    }

    /// The text.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl Drop for Text {
    fn drop(&mut self) {
        let cap = self.0.capacity();
        if cap == 0 || cap > KEPT {
            return;
        }
        let mut buf = std::mem::take(&mut self.0);
        buf.clear();
        // During the thread's teardown the pool may be gone: the buffer is then just freed.
        let _ = BUFFERS.try_with(|b| {
            if let Ok(mut b) = b.try_borrow_mut() {
                if b.len() < POOL {
                    b.push(buf);
                }
            }
        });
    }
}

impl Clone for Text {
    fn clone(&self) -> Self {
        Self::new(&self.0)
    }
}

impl Deref for Text {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for Text {
    fn from(s: &str) -> Self {
        Self::new(s)
    }
}

impl From<String> for Text {
    fn from(s: String) -> Self {
        Self(s)
    }
}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_texts_buffer_is_reused_on_its_thread() {
        let first = Text::new("search");
        let ptr = first.as_ptr();
        drop(first);
        let second = Text::new("fetch");
        assert_eq!(second.as_ptr(), ptr, "the buffer came back");
        assert_eq!(&*second, "fetch");
        assert_eq!(second.clone(), second);
    }

    #[test]
    fn the_pool_is_bounded() {
        let many: Vec<Text> = (0..POOL * 2).map(|i| Text::new(&i.to_string())).collect();
        drop(many);
        assert!(BUFFERS.with(|b| b.borrow().len()) <= POOL);
        let long = Text::new(&"x".repeat(KEPT + 1));
        drop(long);
        assert!(BUFFERS.with(|b| b.borrow().iter().all(|s| s.capacity() <= KEPT)));
    }
}
