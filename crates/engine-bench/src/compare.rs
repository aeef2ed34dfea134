//! `iibench compare`: runs each engine as a child `iibench run` on the same workload, one after
//! another (so a memory cap and the machine belong to one engine at a time), echoes their
//! progress, and prints the comparison table and the target ratios.
//!
//! With `--memory-mib M` each child runs as `memcap M iibench run ...`: its memory, the page
//! cache of its files included, is capped by a cgroup. The child's stderr passes through, and
//! memcap's closing "peak" line is kept for the table. An engine that fails (say, killed for
//! memory) is reported as failed and the others still run.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

use crate::measure::{commit, machine};
use crate::report::{Record, mib, parse};
use crate::workload::{SECONDARY_KEY_BYTES, SECONDARY_TREES};
use crate::{CompareArgs, EngineName, WorkloadArgs};

/// What one child run left: its start and summary lines, memcap's peak, or why it failed.
pub struct Outcome {
    pub engine: EngineName,
    pub start: Option<Record>,
    pub summary: Option<Record>,
    /// The read phase's line, if reads were asked for and the engine measures them.
    pub reads: Option<Record>,
    pub memcap_peak_mib: Option<u64>,
    pub failure: Option<String>,
    /// Inserts done at the last interval line: how far a failed run got.
    pub last_reported_inserts: f64,
}

pub fn compare(args: &CompareArgs) -> anyhow::Result<()> {
    let memcap = match args.memory_mib {
        Some(memory_mib) => Some((check_memcap(args.memcap.as_deref())?, memory_mib)),
        None => None,
    };
    let base = args.dir.clone().unwrap_or_else(|| std::env::temp_dir().join(format!("iibench-{}", std::process::id())));
    print_header(args, memcap.as_ref(), &base);
    let mut outcomes = Vec::new();
    for &engine in &args.engines {
        let dir = base.join(engine.as_str());
        if dir.exists() {
            bail!("{} exists: remove it or pass another --dir", dir.display());
        }
        outcomes.push(run_child(engine, &dir, &args.workload, memcap.as_ref())?);
        if !args.keep {
            std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
        }
    }
    if !args.keep {
        // Only removes the parent if it is now empty, so a --dir holding other files stays.
        let _ = std::fs::remove_dir(&base);
    }
    crate::report::print_table(&outcomes);
    Ok(())
}

/// The memcap script, checked by running `memcap M true`: a clear error if cgroups are not
/// available here, before any engine runs.
fn check_memcap(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    let path = match given {
        Some(path) => path.to_path_buf(),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/memcap"),
    };
    let path =
        path.canonicalize().with_context(|| format!("memcap not found at {} (pass --memcap PATH)", path.display()))?;
    let probe =
        Command::new(&path).args(["16", "true"]).output().with_context(|| format!("running {}", path.display()))?;
    if !probe.status.success() {
        bail!(
            "memcap cannot cap memory here: {} (it needs root and a writable cgroup memory controller, v1 or v2; \
             run without --memory-mib to measure uncapped)",
            String::from_utf8_lossy(&probe.stderr).trim()
        );
    }
    Ok(path)
}

fn print_header(args: &CompareArgs, memcap: Option<&(PathBuf, u64)>, base: &Path) {
    let w = &args.workload;
    println!("command: {}", std::env::args().collect::<Vec<_>>().join(" "));
    println!("machine: {}", machine());
    println!("commit:  {}", commit());
    let primary_bytes = w.inserts * (8 + w.value_bytes as u64);
    let secondary_bytes = w.inserts * (SECONDARY_TREES * SECONDARY_KEY_BYTES) as u64;
    let per_insert = (SECONDARY_TREES * SECONDARY_KEY_BYTES) as u64;
    println!(
        "workload: {} inserts, {} per transaction; primary: 8-byte id -> {}-byte value; {} secondary trees: \
         {}-byte key (random u64 ++ id), empty value",
        w.inserts, w.batch, w.value_bytes, SECONDARY_TREES, SECONDARY_KEY_BYTES
    );
    println!(
        "sizes (logical, before any engine overhead): primary {:.0} MiB, secondaries {:.0} MiB = {:.2}x the {:.0} MiB cache \
         (10x needs {} inserts)",
        mib(primary_bytes as f64),
        mib(secondary_bytes as f64),
        secondary_bytes as f64 / w.cache_size.max(1) as f64,
        mib(w.cache_size as f64),
        (10 * w.cache_size).div_ceil(per_insert)
    );
    match memcap {
        Some((path, memory_mib)) => {
            println!("memory: each engine under {} {memory_mib} (MiB, page cache included)", path.display())
        }
        None => println!("memory: uncapped (pass --memory-mib to run each engine under memcap)"),
    }
    println!("data: {}", base.display());
}

fn run_child(
    engine: EngineName,
    dir: &Path,
    workload: &WorkloadArgs,
    memcap: Option<&(PathBuf, u64)>,
) -> anyhow::Result<Outcome> {
    let mut command = child_command(engine, dir, workload, memcap)?;
    let mut child =
        command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().context("starting a child iibench")?;
    let stderr = child.stderr.take().context("child stderr")?;
    let stderr_reader = std::thread::spawn(move || forward_stderr(stderr));
    let mut outcome = Outcome {
        engine,
        start: None,
        summary: None,
        reads: None,
        memcap_peak_mib: None,
        failure: None,
        last_reported_inserts: 0.0,
    };
    let stdout = child.stdout.take().context("child stdout")?;
    for line in BufReader::new(stdout).lines() {
        let line = line?;
        let Some(record) = parse(&line).map(Record) else {
            println!("{:<6} | {line}", engine.as_str());
            continue;
        };
        match record.text("type") {
            "start" => {
                println!("{:<6} started; durability: {}", engine.as_str(), record.text("durability"));
                outcome.start = Some(record);
            }
            "interval" => {
                print_interval(engine, &record);
                outcome.last_reported_inserts = record.number("inserts");
            }
            "summary" => outcome.summary = Some(record),
            "reads" => outcome.reads = Some(record),
            _ => println!("{:<6} | {line}", engine.as_str()),
        }
    }
    let status = child.wait()?;
    outcome.memcap_peak_mib = stderr_reader.join().ok().flatten();
    if !status.success() {
        outcome.failure = Some(describe_failure(status));
        println!("{:<6} FAILED: {}", engine.as_str(), outcome.failure.as_deref().unwrap_or(""));
    }
    Ok(outcome)
}

fn child_command(
    engine: EngineName,
    dir: &Path,
    w: &WorkloadArgs,
    memcap: Option<&(PathBuf, u64)>,
) -> anyhow::Result<Command> {
    let exe = std::env::current_exe().context("locating the iibench binary")?;
    let mut command = match memcap {
        Some((path, memory_mib)) => {
            let mut c = Command::new(path);
            c.arg(memory_mib.to_string()).arg(exe);
            c
        }
        None => Command::new(exe),
    };
    command.arg("run").args(["--engine", engine.as_str()]).arg("--dir").arg(dir);
    for (flag, value) in [
        ("--inserts", w.inserts),
        ("--batch", w.batch),
        ("--value-bytes", w.value_bytes as u64),
        ("--cache-size", w.cache_size),
        ("--fjall-memtable-size", w.fjall_memtable_size),
        ("--report-every", w.report_every),
        ("--seed", w.seed),
        ("--reads", w.reads),
        ("--scans", w.scans),
    ] {
        command.arg(flag).arg(value.to_string());
    }
    if let Some(seconds) = w.max_seconds {
        command.arg("--max-seconds").arg(seconds.to_string());
    }
    Ok(command)
}

fn print_interval(engine: EngineName, record: &Record) {
    println!(
        "{:<6} {:>12.0} inserts {:>9.1} s   interval {:>9.0}/s   cumulative {:>9.0}/s",
        engine.as_str(),
        record.number("inserts"),
        record.number("seconds"),
        record.number("interval_rate"),
        record.number("cumulative_rate")
    );
}

/// Passes the child's stderr through; returns memcap's peak ("memcap: peak N MiB of M MiB").
fn forward_stderr(stderr: std::process::ChildStderr) -> Option<u64> {
    let mut peak = None;
    for line in BufReader::new(stderr).lines().map_while(Result::ok) {
        eprintln!("{line}");
        if let Some(rest) = line.strip_prefix("memcap: peak ") {
            peak = rest.split_whitespace().next().and_then(|n| n.parse().ok());
        }
    }
    peak
}

fn describe_failure(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (_, Some(9)) => "killed by SIGKILL (under memcap: most likely out of memory)".into(),
        (_, Some(signal)) => format!("killed by signal {signal}"),
        (Some(137), _) => "exit status 137: killed by SIGKILL (under memcap: most likely out of memory)".into(),
        (Some(code), _) => format!("exit status {code}"),
        (None, None) => "ended abnormally".into(),
    }
}
