//! A counting wrapper around the allocator Strata's binaries run on (jemalloc): the bytes the
//! process has allocated and not freed, and their highest value since the last interval. Beside the resident set it separates
//! memory the program holds (live heap) from memory the allocator keeps after a free
//! (retention), and the per-interval peak shows the transient highs that a sample every million
//! inserts misses and a memory cap does not.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicUsize, Ordering};

use storage::allocator::Jemalloc;

pub struct CountingAllocator;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let live = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

fn shrank(bytes: usize) {
    LIVE.fetch_sub(bytes, Ordering::Relaxed);
}

// SAFETY: every call is forwarded unchanged to jemalloc, which upholds `GlobalAlloc`'s contract;
// the counters are only arithmetic on the sizes passed in.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let pointer = unsafe { Jemalloc.alloc(layout) };
        if !pointer.is_null() {
            grew(layout.size());
        }
        pointer
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let pointer = unsafe { Jemalloc.alloc_zeroed(layout) };
        if !pointer.is_null() {
            grew(layout.size());
        }
        pointer
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        unsafe { Jemalloc.dealloc(pointer, layout) };
        shrank(layout.size());
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let moved = unsafe { Jemalloc.realloc(pointer, layout, new_size) };
        if !moved.is_null() {
            // Grown first: while a block moves, the old and the new are both held.
            grew(new_size);
            shrank(layout.size());
        }
        moved
    }
}

/// Bytes allocated and not yet freed.
pub fn live_bytes() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// The highest `live_bytes` since the previous call (or the start), and starts a new interval.
pub fn take_peak_bytes() -> usize {
    PEAK.swap(LIVE.load(Ordering::Relaxed), Ordering::Relaxed)
}
