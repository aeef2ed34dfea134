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

/// Where the calling thread's time went so far: user and system CPU (from `stat`, in clock
/// ticks of 10 ms), time runnable but waiting for a CPU (`schedstat`), and context switches,
/// voluntary (it blocked: a lock, the disk) and not (it was preempted).
#[allow(dead_code)] // not every benchmark that includes this module reads them
#[derive(Clone, Copy, Debug, Default)]
pub struct ThreadTimes {
    pub user_ms: u64,
    pub system_ms: u64,
    pub runnable_wait_ns: u64,
    pub voluntary_switches: u64,
    pub preemptions: u64,
}

#[allow(dead_code)]
impl ThreadTimes {
    pub fn now() -> ThreadTimes {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
        // The fields after the command name (which may hold spaces) start at the state, field 3.
        let fields: Vec<&str> =
            stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
        let ticks = |field: usize| fields.get(field - 3).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0) * 10;
        let schedstat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
        let status = std::fs::read_to_string("/proc/thread-self/status").unwrap_or_default();
        let status_field = |name: &str| {
            status.lines().find_map(|line| line.strip_prefix(name)?.trim().parse::<u64>().ok()).unwrap_or(0)
        };
        ThreadTimes {
            user_ms: ticks(14),
            system_ms: ticks(15),
            runnable_wait_ns: schedstat.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0),
            voluntary_switches: status_field("voluntary_ctxt_switches:"),
            preemptions: status_field("nonvoluntary_ctxt_switches:"),
        }
    }

    /// What happened between `earlier` and this snapshot.
    pub fn since(&self, earlier: &ThreadTimes) -> ThreadTimes {
        ThreadTimes {
            user_ms: self.user_ms.saturating_sub(earlier.user_ms),
            system_ms: self.system_ms.saturating_sub(earlier.system_ms),
            runnable_wait_ns: self.runnable_wait_ns.saturating_sub(earlier.runnable_wait_ns),
            voluntary_switches: self.voluntary_switches.saturating_sub(earlier.voluntary_switches),
            preemptions: self.preemptions.saturating_sub(earlier.preemptions),
        }
    }
}
