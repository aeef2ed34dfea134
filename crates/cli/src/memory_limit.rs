//! The memory this process may use, as the operating system limits it: the tightest memory
//! limit of the cgroups the process is in (v2 `memory.max`, v1 `memory.limit_in_bytes`, each
//! level of the path up to the root, since a parent's limit binds its children), and the
//! machine's RAM. A server whose cache is sized past it would be OOM-killed instead of
//! evicting; `serve` sizes the cache to fit (`fit_to_memory_limit`).

use std::path::{Path, PathBuf};

/// Past this a cgroup "limit" means none (v1 reports 2^63 rounded down to a page).
const UNLIMITED_FROM: u64 = 1 << 60;

/// The smallest of the process's cgroup memory limits and the machine's RAM, if any is known.
pub fn memory_limit_bytes() -> Option<u64> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mut limits: Vec<u64> = Vec::new();
    for line in cgroups.lines() {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next(), fields.next().unwrap_or(""), fields.next().unwrap_or(""));
        let (root, file) = match controllers {
            "" => ("/sys/fs/cgroup", "memory.max"),
            list if list.split(',').any(|c| c == "memory") => ("/sys/fs/cgroup/memory", "memory.limit_in_bytes"),
            _ => continue,
        };
        limits.extend(ancestors(Path::new(root), path).iter().filter_map(|dir| read_limit(&dir.join(file))));
    }
    limits.extend(machine_ram_bytes());
    limits.into_iter().min()
}

/// The cgroup directory of `path` under `root` and each of its parents up to `root`.
fn ancestors(root: &Path, path: &str) -> Vec<PathBuf> {
    let mut dirs = vec![root.to_path_buf()];
    let mut dir = root.to_path_buf();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        dir.push(part);
        dirs.push(dir.clone());
    }
    dirs
}

fn read_limit(file: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(file).ok()?;
    text.trim().parse::<u64>().ok().filter(|limit| *limit < UNLIMITED_FROM)
}

fn machine_ram_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|line| line.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The share of the memory limit the cache may take: the rest is for connections, cursors,
/// sorts and groups, writers' copies of nodes, and (in a cgroup) the page cache of the files.
pub const CACHE_SHARE_PERCENT: u64 = 50;

/// ...leaving at least this much beside it: 10,000 connections saying hello at once took
/// 90 MiB (their threads' stacks while they are served), a 48 MB message as much again.
const WORKING_RESERVE_BYTES: u64 = 160 << 20;

/// The smallest cache the server runs with, however tight the limit.
const MIN_CACHE_BYTES: u64 = 16 << 20;

/// The cache size to use: `wanted`, or less if it would not fit `limit` (with the reason).
pub fn fit_cache(wanted: u64, limit: Option<u64>) -> (u64, Option<String>) {
    let Some(limit) = limit else { return (wanted, None) };
    let fits =
        (limit / 100 * CACHE_SHARE_PERCENT).min(limit.saturating_sub(WORKING_RESERVE_BYTES)).max(MIN_CACHE_BYTES);
    if wanted <= fits {
        return (wanted, None);
    }
    let mib = |bytes: u64| bytes >> 20;
    let why = format!(
        "the cache of {} MiB asked for would not fit the memory limit of {} MiB with room for everything else; using {} MiB",
        mib(wanted),
        mib(limit),
        mib(fits)
    );
    (fits, Some(why))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: the cache is cut to half the limit (and to the limit less a working reserve) only
    /// when it would not fit, never below 16 MiB.
    #[test]
    fn the_cache_is_cut_to_fit_the_limit() {
        assert_eq!(fit_cache(128 << 20, None), (128 << 20, None));
        assert_eq!(fit_cache(128 << 20, Some(1 << 30)).0, 128 << 20);
        let (cut, why) = fit_cache(1 << 30, Some(256 << 20));
        assert_eq!(cut, 96 << 20, "256 MiB less the working reserve");
        assert!(why.is_some_and(|w| w.contains("256 MiB")));
        assert_eq!(fit_cache(1 << 30, Some(8 << 20)).0, 16 << 20);
    }

    /// Goal: the limit read from this machine is a real number no larger than its RAM.
    #[test]
    fn the_limit_is_at_most_the_machines_memory() {
        let limit = memory_limit_bytes().expect("/proc/meminfo is readable on Linux");
        assert!(limit <= machine_ram_bytes().unwrap_or(u64::MAX) && limit > 0);
        assert_eq!(ancestors(Path::new("/r"), "/a/b"), [PathBuf::from("/r"), "/r/a".into(), "/r/a/b".into()]);
    }
}
