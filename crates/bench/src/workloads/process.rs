//! A local process's figures from /proc, for workloads that measure the server under test (its
//! pid comes from serverStatus, so the server must run on this machine) or the bench itself.

use bson::doc;
use mongodb::Client;

/// User and system CPU seconds of a process, from /proc/<pid>/stat (fields 14 and 15).
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; the fields after it are numbers.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / rustix::param::clock_ticks_per_second() as f64)
}

/// CPU nanoseconds of each thread of a process whose name starts with `prefix`, by thread id,
/// from /proc/<pid>/task/<tid>/schedstat (its first field: time on a core, in ns).
pub fn thread_cpu_nanos(pid: u32, prefix: &str) -> std::collections::HashMap<u32, u64> {
    let mut threads = std::collections::HashMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return threads };
    for task in tasks.flatten() {
        let Some(tid) = task.file_name().to_str().and_then(|tid| tid.parse::<u32>().ok()) else { continue };
        if !std::fs::read_to_string(task.path().join("comm")).is_ok_and(|name| name.starts_with(prefix)) {
            continue;
        }
        let schedstat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        if let Some(nanos) = schedstat.split_whitespace().next().and_then(|ns| ns.parse::<u64>().ok()) {
            threads.insert(tid, nanos);
        }
    }
    threads
}

/// What /proc/<pid>/status shows of a process's memory and threads.
#[derive(Clone, Copy, Debug)]
pub struct ProcessFigures {
    pub resident_bytes: u64,
    pub threads: u64,
}

pub fn figures(pid: u32) -> Option<ProcessFigures> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|line| line.starts_with(name))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    Some(ProcessFigures { resident_bytes: field("VmRSS:")? * 1024, threads: field("Threads:")? })
}

/// The server's pid (serverStatus), if that process can be read here.
pub async fn local_server_pid(client: &Client) -> mongodb::error::Result<Option<u32>> {
    let status = client.database("admin").run_command(doc! { "serverStatus": 1 }).await?;
    let pid = status.get("pid").and_then(|pid| pid.as_i64().or_else(|| pid.as_i32().map(i64::from)));
    Ok(pid.and_then(|pid| u32::try_from(pid).ok()).filter(|pid| cpu_seconds(*pid).is_some()))
}

/// The processes a run measures the CPU of: each server on this machine (every member of a
/// replica set, by its state) and this bench itself.
pub struct CpuWatch {
    processes: Vec<(String, u32)>,
}

impl CpuWatch {
    /// The server behind `client` (and, for a replica set, each member it lists) and this
    /// process. Members on other machines, or a server that does not report its pid, are left
    /// out.
    pub async fn find(client: &Client) -> CpuWatch {
        let mut processes = Vec::new();
        let status = client.database("admin").run_command(doc! { "replSetGetStatus": 1 }).await.ok();
        let members = status.as_ref().and_then(|s| s.get_array("members").ok()).cloned().unwrap_or_default();
        for member in members.iter().filter_map(|m| m.as_document()) {
            let (Ok(host), Ok(state)) = (member.get_str("name"), member.get_str("stateStr")) else { continue };
            let uri = format!("mongodb://{host}/?directConnection=true");
            let Ok(direct) = Client::with_uri_str(&uri).await else { continue };
            if let Ok(Some(pid)) = local_server_pid(&direct).await {
                processes.push((state.to_lowercase(), pid));
            }
        }
        if processes.is_empty()
            && let Ok(Some(pid)) = local_server_pid(client).await
        {
            processes.push(("server".to_owned(), pid));
        }
        processes.push(("this client".to_owned(), std::process::id()));
        CpuWatch { processes }
    }

    /// Each process's CPU seconds so far.
    pub fn sample(&self) -> Vec<f64> {
        self.processes.iter().map(|(_, pid)| cpu_seconds(*pid).unwrap_or(0.0)).collect()
    }

    /// Each process's CPU per operation between two samples: (its role, microseconds).
    pub fn per_operation(&self, before: &[f64], after: &[f64], operations: u64) -> Vec<(String, f64)> {
        let operations = operations.max(1) as f64;
        self.processes
            .iter()
            .zip(before.iter().zip(after))
            .map(|((role, _), (before, after))| (role.clone(), (after - before) * 1e6 / operations))
            .collect()
    }
}
