//! Measurements outside the engines: bytes this process wrote to storage, the size of a data
//! directory, and the machine and commit a run happened on.

use std::path::Path;

/// Bytes this process (all its threads) caused to be written to storage so far:
/// `write_bytes - cancelled_write_bytes` from `/proc/self/io`. `None` where the kernel does not
/// account I/O per task.
pub fn process_write_bytes() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    let field =
        |name: &str| io.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(':')?.trim().parse::<u64>().ok());
    Some(field("write_bytes")?.saturating_sub(field("cancelled_write_bytes").unwrap_or(0)))
}

/// The apparent size of every file under `dir` and the bytes allocated to them.
#[derive(Clone, Copy, Debug, Default)]
pub struct DirSize {
    pub file_bytes: u64,
    pub allocated_bytes: u64,
}

pub fn dir_size(dir: &Path) -> std::io::Result<DirSize> {
    use std::os::unix::fs::MetadataExt;
    let mut total = DirSize::default();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let metadata = entry.metadata()?;
        if metadata.is_dir() {
            let inner = dir_size(&entry.path())?;
            total.file_bytes += inner.file_bytes;
            total.allocated_bytes += inner.allocated_bytes;
        } else {
            total.file_bytes += metadata.len();
            total.allocated_bytes += metadata.blocks() * 512;
        }
    }
    Ok(total)
}

/// "cpu model, N cores, M GiB RAM".
pub fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name")?.split_once(':').map(|(_, v)| v.trim().to_string()))
        .unwrap_or_else(|| "unknown cpu".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory_kib = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:")?.trim().strip_suffix("kB")?.trim().parse::<u64>().ok())
        .unwrap_or(0);
    format!("{cpu}, {cores} cores, {:.0} GiB RAM", memory_kib as f64 / (1024.0 * 1024.0))
}

/// The commit of the working tree this binary was run from, marked when the tree has changes.
pub fn commit() -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match (git(&["rev-parse", "--short", "HEAD"]), git(&["status", "--porcelain"])) {
        (Some(head), Some(status)) if status.is_empty() => head,
        (Some(head), _) => format!("{head} (working tree has changes)"),
        _ => "unknown".into(),
    }
}

/// This process's peak resident set (`VmHWM`), which, unlike memcap's peak, leaves out the
/// kernel's page cache.
pub fn peak_rss_bytes() -> Option<u64> {
    proc_status_bytes("VmHWM:")
}

/// This process's resident set now (`VmRSS`).
pub fn rss_bytes() -> Option<u64> {
    proc_status_bytes("VmRSS:")
}

fn proc_status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib =
        status.lines().find_map(|l| l.strip_prefix(field)?.trim().strip_suffix("kB")?.trim().parse::<u64>().ok())?;
    Some(kib * 1024)
}
