//! A counting global allocator (per thread, so parallel tests do not disturb each other),
//! `measure` (peak heap) and `largest_request` (the largest single allocation), for the
//! test binaries that hold the library to memory bounds. Include it once per binary.

#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout as AllocLayout, System};
use std::cell::Cell;

pub struct CountingAlloc;

thread_local! {
    /// Heap bytes this thread holds.
    pub static LIVE: Cell<usize> = const { Cell::new(0) };
    /// The most `LIVE` reached since the last `measure` began.
    pub static PEAK: Cell<usize> = const { Cell::new(0) };
    /// The largest single request since the last `largest_request` began.
    pub static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note_request(n: usize) {
    let _ = LARGEST.try_with(|l| l.set(l.get().max(n)));
}

fn add_live(n: usize) {
    let _ = LIVE.try_with(|l| {
        let v = l.get().saturating_add(n);
        l.set(v);
        let _ = PEAK.try_with(|p| p.set(p.get().max(v)));
    });
}

fn sub_live(n: usize) {
    let _ = LIVE.try_with(|l| l.set(l.get().saturating_sub(n)));
}

// SAFETY: every method forwards to the system allocator unchanged; the bookkeeping only
// touches thread-local counters, which never allocate.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: AllocLayout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { System.alloc(layout) };
        note_request(layout.size());
        if !p.is_null() {
            add_live(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: AllocLayout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { System.alloc_zeroed(layout) };
        note_request(layout.size());
        if !p.is_null() {
            add_live(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: AllocLayout) {
        // SAFETY: `ptr` came from `System` with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        sub_live(layout.size());
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: AllocLayout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        note_request(new_size);
        if !p.is_null() {
            sub_live(layout.size());
            add_live(new_size);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

/// Run `f`; return its result and the largest single allocation it asked for (granted
/// or not).
pub fn largest_request<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LARGEST.with(|l| l.set(0));
    let out = f();
    (out, LARGEST.with(|l| l.get()))
}

/// Run `f`; return its result and the peak heap bytes it held above the starting level.
pub fn measure<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.with(|l| l.get());
    PEAK.with(|p| p.set(base));
    let out = f();
    (out, PEAK.with(|p| p.get()) - base)
}
