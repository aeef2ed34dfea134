//! CPU time of threads, from `/proc/.../schedstat` (nanoseconds on CPU; 0 where the kernel does
//! not report it): steadier than wall time on a shared machine. Also included by `docstore`'s
//! `bio_bench`.

use std::path::Path;

/// CPU time of the calling thread so far.
pub fn thread_cpu_ns() -> u64 {
    schedstat_ns(Path::new("/proc/thread-self/schedstat"))
}

/// CPU time so far of this process's threads whose name starts with `prefix`.
#[allow(dead_code)] // not every benchmark that includes this module reads other threads
pub fn threads_cpu_ns(prefix: &str) -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return 0 };
    tasks
        .flatten()
        .filter(|task| std::fs::read_to_string(task.path().join("comm")).is_ok_and(|comm| comm.starts_with(prefix)))
        .map(|task| schedstat_ns(&task.path().join("schedstat")))
        .sum()
}

fn schedstat_ns(path: &Path) -> u64 {
    std::fs::read_to_string(path).ok().and_then(|text| text.split_whitespace().next()?.parse().ok()).unwrap_or(0)
}
