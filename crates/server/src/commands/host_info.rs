//! `hostInfo`: the machine the server runs on (memory from /proc/meminfo where there is one).

use bson::{DateTime, RawDocumentBuf, doc};

use crate::command::Command;
use crate::commands::reply;
use crate::error::CommandError;
use crate::state::Context;

pub fn run(_context: &Context, _command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1) as i32;
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .unwrap_or_else(|_| "localhost".to_owned());
    reply(doc! {
        "system": {
            "currentTime": DateTime::now(),
            "hostname": hostname,
            "cpuAddrSize": 64,
            "memSizeMB": memory_megabytes(),
            "numCores": cores,
            "cpuArch": std::env::consts::ARCH,
        },
        "os": { "type": std::env::consts::OS, "name": std::env::consts::OS },
        "extra": {},
    })
}

/// Total memory in MiB from /proc/meminfo's `MemTotal: N kB`, 0 if unknown.
fn memory_megabytes() -> i64 {
    let Ok(text) = std::fs::read_to_string("/proc/meminfo") else {
        return 0;
    };
    text.lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<i64>().ok())
        .map_or(0, |kibibytes| kibibytes / 1024)
}
