//! The machine a run was taken on: CPU model, cores, memory, OS. Read from `/proc` and
//! `/etc/os-release` (Linux); "unknown" where they are missing.

use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct Machine {
    pub cpu_model: String,
    pub cores: usize,
    pub memory_bytes: u64,
    pub os: String,
    pub kernel: String,
}

impl Machine {
    pub fn detect() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let os_release = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
        Machine {
            cpu_model: field(&cpuinfo, "model name", ':').unwrap_or_else(|| "unknown".to_owned()),
            cores: std::thread::available_parallelism().map(usize::from).unwrap_or(0),
            memory_bytes: field(&meminfo, "MemTotal", ':')
                .and_then(|kib| kib.trim_end_matches("kB").trim().parse::<u64>().ok())
                .map_or(0, |kib| kib * 1024),
            os: field(&os_release, "PRETTY_NAME", '=')
                .map(|name| name.trim_matches('"').to_owned())
                .unwrap_or_else(|| std::env::consts::OS.to_owned()),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|release| release.trim().to_owned())
                .unwrap_or_else(|_| "unknown".to_owned()),
        }
    }

    /// One line for tables and plot captions.
    pub fn summary(&self) -> String {
        format!(
            "{}, {} cores, {:.0} GiB, {}",
            self.cpu_model,
            self.cores,
            self.memory_bytes as f64 / (1u64 << 30) as f64,
            self.os
        )
    }
}

/// The value of the first `key<separator>value` line.
fn field(text: &str, key: &str, separator: char) -> Option<String> {
    text.lines().find_map(|line| {
        let (name, value) = line.split_once(separator)?;
        (name.trim() == key).then(|| value.trim().to_owned())
    })
}
