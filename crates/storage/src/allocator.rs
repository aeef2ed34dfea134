//! The process allocator's settings that keep the engine's memory budget honest.
//!
//! The cache charges nodes by their allocations, but the process's resident memory is what the
//! allocator keeps from the system. glibc's malloc gives each thread that meets contention an
//! arena of its own (up to eight per core) and holds on to memory freed inside an arena; with a
//! committing thread, the flusher, the evictor and the checkpointer all allocating node-sized
//! buffers, that retention grew to about twice the cache (iibench, 6M inserts, 128 MiB cache:
//! 299 MiB peak resident with glibc's defaults, 247 MiB with two arenas; see docs/BENCHMARKS.md).
//!
//! So a binary that embeds the engine calls [`limit_malloc_arenas`] first thing in `main`, and
//! the engine calls [`release_free_memory`] after each checkpoint (and the evictor while the
//! process is well over its cache budget: see `store`). Elsewhere than glibc both do nothing.

/// Caps the number of malloc arenas. Returns whether the allocator took the setting.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn limit_malloc_arenas(arenas: i32) -> bool {
    // SAFETY: `mallopt` sets one of glibc's malloc tunables; it takes two integers, touches no
    // memory of ours and takes the allocator's own locks, so any thread may call it at any time.
    unsafe { libc::mallopt(libc::M_ARENA_MAX, arenas) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn limit_malloc_arenas(_arenas: i32) -> bool {
    false
}

/// Gives the free pages inside every malloc arena back to the system.
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
    let kib = status.lines().find_map(|line| line.strip_prefix("VmRSS:")?.trim().strip_suffix("kB")?.trim().parse::<usize>().ok())?;
    Some(kib * 1024)
}
