//! A memory cgroup for the server under test, as `../shared/memcap` makes one: the memory of
//! the server *and the page cache of its files* is capped, so "data larger than memory" can be
//! made on a machine with plenty of it.
//!
//! cgroup v1 when `/sys/fs/cgroup/memory` is writable (limit in `memory.limit_in_bytes`, peak in
//! `memory.max_usage_in_bytes`), else v2 when `/sys/fs/cgroup/cgroup.controllers` exists (limit
//! in `memory.max`, peak in `memory.peak`). The server joins the group before it execs (through
//! `sh`), so it and every process it starts are inside from its first allocation, and nothing
//! else is. The group is removed on drop, once its processes are gone.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};

const V1_ROOT: &str = "/sys/fs/cgroup/memory";
const V2_ROOT: &str = "/sys/fs/cgroup";

#[derive(Debug, Clone, Copy)]
enum Version {
    V1,
    V2,
}

#[derive(Debug)]
pub struct Cgroup {
    dir: PathBuf,
    version: Version,
}

impl Cgroup {
    /// Creates `strata-bench.<pid>.<n>` (`n`: the groups this process made before, one per
    /// server it starts) with a limit of `limit_bytes`, or explains why it cannot.
    pub fn create(limit_bytes: u64) -> anyhow::Result<Cgroup> {
        static CREATED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = CREATED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("strata-bench.{}.{n}", std::process::id());
        let (version, dir, limit_file) = if is_writable_dir(Path::new(V1_ROOT)) {
            (Version::V1, Path::new(V1_ROOT).join(&name), "memory.limit_in_bytes")
        } else if Path::new(V2_ROOT).join("cgroup.controllers").is_file() {
            (Version::V2, Path::new(V2_ROOT).join(&name), "memory.max")
        } else {
            bail!(
                "--memory-limit needs a writable cgroup memory controller (v1 at {V1_ROOT} or v2 at \
                 {V2_ROOT}) and root, and this machine has none; run without --memory-limit"
            );
        };
        std::fs::create_dir(&dir)
            .with_context(|| format!("--memory-limit: creating the cgroup {} (needs root)", dir.display()))?;
        let cgroup = Cgroup { dir, version };
        std::fs::write(cgroup.dir.join(limit_file), limit_bytes.to_string()).with_context(|| {
            format!(
                "--memory-limit: setting {limit_file} in {} (is the memory controller enabled?)",
                cgroup.dir.display()
            )
        })?;
        Ok(cgroup)
    }

    /// A command that runs `program args..` inside this group: `sh` writes its own pid into
    /// `cgroup.procs`, then execs the program (same pid), as memcap does.
    pub fn command(&self, program: &Path, args: &[String]) -> Command {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(r#"echo $$ >"$1/cgroup.procs" && shift && exec "$@""#)
            .arg("strata-bench")
            .arg(&self.dir)
            .arg(program)
            .args(args);
        command
    }

    /// The group's peak memory use so far, page cache included.
    pub fn peak_bytes(&self) -> Option<u64> {
        let file = match self.version {
            Version::V1 => "memory.max_usage_in_bytes",
            Version::V2 => "memory.peak",
        };
        std::fs::read_to_string(self.dir.join(file)).ok()?.trim().parse().ok()
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        // The kernel refuses to remove a group until its last process has been reaped.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        eprintln!("strata bench: could not remove the cgroup {}", self.dir.display());
    }
}

fn is_writable_dir(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|meta| meta.is_dir())
        && rustix::fs::access(path, rustix::fs::Access::WRITE_OK).is_ok()
}
