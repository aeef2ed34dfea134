//! The process allocator, which the engine's memory budget depends on.
//!
//! The cache charges nodes by their allocations, but a memory cap sees the process's resident
//! memory: what the allocator keeps from the system. Strata's binaries run on jemalloc (as
//! TokuMX did), declared at the root of each binary with
//!
//! ```ignore
//! storage::strata_allocator!();
//! ```
//!
//! and set by [`JEMALLOC_CONF`]: a background thread gives freed pages back to the system within
//! about 50 ms, so a process under a cap holds little beyond its live heap. glibc's malloc, which
//! the binaries used before, held on to memory freed inside its arenas (up to twice the cache with
//! its defaults), needed its arenas capped at two and trims from the evictor to stay under a
//! cap, and still peaked at the cap now and then; its arena locks, shared by the committing
//! thread and the engine's threads, also made an indexed insert wait
//! (docs/bench/history/02-collections-bio.md, sessions 9 and 10).
//!
//! A program that embeds the engine on another allocator still works; on glibc the engine trims
//! it after each checkpoint and from the evictor while the process is well over budget
//! ([`release_free_memory`]).

/// jemalloc's settings for Strata's binaries (`MALLOC_CONF`'s syntax; `_RJEM_MALLOC_CONF` in the
/// environment overrides them): purge freed pages from a background thread, 50 ms after they
/// are freed, straight back to the system (no lazy "muzzy" stage the kernel may or may not take).
#[cfg(unix)]
pub const JEMALLOC_CONF: &[u8] = b"background_thread:true,dirty_decay_ms:50,muzzy_decay_ms:0\0";

#[cfg(unix)]
pub use tikv_jemallocator::Jemalloc;

/// Makes jemalloc, set by [`JEMALLOC_CONF`], the allocator of the binary it is invoked in (at the
/// binary's root). `strata_allocator!(Type = value)` installs a wrapper around
/// [`Jemalloc`] instead (a benchmark's counting allocator).
#[cfg(unix)]
#[macro_export]
macro_rules! strata_allocator {
    () => {
        $crate::strata_allocator!($crate::allocator::Jemalloc = $crate::allocator::Jemalloc);
    };
    ($ty:ty = $value:expr) => {
        #[global_allocator]
        static STRATA_ALLOCATOR: $ty = $value;

        // jemalloc reads this C string (`const char *malloc_conf`, weak in jemalloc, so this
        // definition wins) at its first allocation. It lives in the binary's own object,
        // which the linker always keeps.
        #[allow(unsafe_code, non_upper_case_globals)]
        #[used]
        #[unsafe(export_name = "_rjem_malloc_conf")]
        static _rjem_malloc_conf: &u8 = &$crate::allocator::JEMALLOC_CONF[0];
    };
}

/// Gives the free pages inside every glibc malloc arena back to the system (for a program that
/// embeds the engine on glibc's allocator; under jemalloc, glibc holds next to nothing).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn release_free_memory() {
    // SAFETY: `malloc_trim` only returns free memory to the system (madvise on free chunks); it
    // takes each arena's lock and never touches memory in use.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn release_free_memory() {}

/// The process's resident memory (`VmRSS`), where /proc tells it.
pub fn resident_bytes() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:")?.trim().strip_suffix("kB")?.trim().parse::<usize>().ok())?;
    Some(kib * 1024)
}
