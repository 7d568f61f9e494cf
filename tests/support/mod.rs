//! What several test binaries share: a counting global allocator and a tiny deterministic
//! random generator. Each binary that counts bytes declares
//! `#[global_allocator] static ALLOC: support::Counting = support::Counting;`.

#![allow(dead_code)]
// each binary uses a part
// The counting allocator needs `unsafe impl GlobalAlloc`; the library itself forbids unsafe.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering};

/// Live heap bytes of the process, kept by [`Counting`].
pub(crate) static LIVE: AtomicI64 = AtomicI64::new(0);

/// Every heap byte the process ever asked for (never decreases), kept by [`Counting`]: what a
/// call allocated even if it freed it again.
pub(crate) static ALLOCATED: AtomicI64 = AtomicI64::new(0);

std::thread_local! {
    /// Every heap byte this thread ever asked for, kept by [`Counting`]: what a call on this
    /// thread allocated, whatever other threads of the process (a metrics reader, another
    /// test's background task) do meanwhile. Const-initialised, no destructor: safe to touch
    /// from the allocator.
    static THREAD_ALLOCATED: std::cell::Cell<i64> = const { std::cell::Cell::new(0) };
}

/// Every heap byte the calling thread ever asked for (see [`Counting`]).
pub(crate) fn thread_allocated() -> i64 {
    THREAD_ALLOCATED.with(std::cell::Cell::get)
}

fn count_thread(bytes: usize) {
    let _ = THREAD_ALLOCATED.try_with(|c| c.set(c.get() + bytes as i64));
}

/// A global allocator that counts live heap bytes in [`LIVE`].
pub(crate) struct Counting;

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        ALLOCATED.fetch_add(layout.size() as i64, Ordering::Relaxed);
        count_thread(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        ALLOCATED.fetch_add(new_size as i64, Ordering::Relaxed);
        count_thread(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// A tiny deterministic generator (xorshift64), so tests need no extra dependency.
pub(crate) struct XorShift(pub(crate) u64);

impl XorShift {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}
