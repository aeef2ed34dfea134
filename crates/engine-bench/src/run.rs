//! `iibench run`: one engine, in this process, on an empty data directory. Prints JSON lines on
//! stdout: a `start` line, an `interval` line every `--report-every` inserts, and a `summary`.
//!
//! Bytes written are this process's from `/proc/self/io`, from just before the engine opens
//! to just after it closes, so background flushes, compactions and checkpoints count; where the
//! kernel does not report them, the final file sizes stand in (and the summary says so).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::heap;
use crate::measure::{dir_size, peak_rss_bytes, process_write_bytes, rss_bytes};
use crate::report::Line;
use crate::workload::{self, Backend, Sample, Workload};
use crate::{EngineName, RunArgs, WorkloadArgs};

pub fn run(args: &RunArgs) -> anyhow::Result<()> {
    prepare_dir(&args.dir)?;
    let engine = args.engine.as_str();
    let cache_size_bytes = usize::try_from(args.workload.cache_size).context("cache size does not fit in usize")?;
    let writes_before = process_write_bytes();
    let mut backend = open_backend(args.engine, &args.dir, cache_size_bytes, &args.workload)?;
    let workload = workload_of(&args.workload);
    emit(
        Line::new("start")
            .text("engine", engine)
            .text("durability", &backend.durability())
            .int("inserts", workload.inserts)
            .int("batch", workload.batch)
            .int("value_bytes", workload.value_bytes as u64)
            .int("cache_size_bytes", args.workload.cache_size),
    );
    let samples = workload::run(backend.as_mut(), &workload, |backend, now, previous| {
        emit(interval(engine, backend, now, previous))
    })?;
    let reads = match (args.workload.reads, args.workload.scans) {
        (0, 0) => None,
        (reads, scans) => {
            let inserted = workload::rates(&samples).inserts;
            workload::read_phase(backend.as_ref(), inserted, reads, scans, args.workload.seed).transpose()?
        }
    };
    let close_start = Instant::now();
    backend.close()?;
    let close_seconds = close_start.elapsed().as_secs_f64();
    let writes_after = process_write_bytes();
    let size = dir_size(&args.dir).with_context(|| format!("measuring {}", args.dir.display()))?;
    let (write_bytes, write_bytes_source) = match (writes_before, writes_after) {
        (Some(before), Some(after)) => (after.saturating_sub(before), "/proc/self/io write_bytes"),
        _ => (size.file_bytes, "final file sizes (no /proc/self/io accounting)"),
    };
    let rates = workload::rates(&samples);
    let inserts = rates.inserts.max(1);
    emit(
        Line::new("summary")
            .text("engine", engine)
            .int("requested_inserts", workload.inserts)
            .int("inserts", rates.inserts)
            .float("seconds", rates.elapsed.as_secs_f64())
            .float("close_seconds", close_seconds)
            .float("overall_rate", rates.overall)
            .float("first_tenth_rate", rates.first_tenth)
            .float("exit_rate", rates.exit)
            .int("write_bytes", write_bytes)
            .float("write_bytes_per_insert", write_bytes as f64 / inserts as f64)
            .text("write_bytes_source", write_bytes_source)
            .int("disk_bytes", size.file_bytes)
            .int("allocated_bytes", size.allocated_bytes)
            .int("peak_rss_bytes", peak_rss_bytes().unwrap_or(0)),
    );
    if let Some(reads) = reads {
        let line = Line::new("reads")
            .text("engine", engine)
            .int("reads", args.workload.reads)
            .int("scans", args.workload.scans)
            .float("reads_per_second", reads.reads_per_second)
            .float("scans_per_second", reads.scans_per_second);
        emit(match reads.node_bytes_per_read {
            Some(bytes) => line.float("node_bytes_per_read", bytes),
            None => line,
        });
    }
    Ok(())
}

fn open_backend(
    engine: EngineName,
    dir: &Path,
    cache_size_bytes: usize,
    args: &WorkloadArgs,
) -> anyhow::Result<Box<dyn Backend>> {
    Ok(match engine {
        EngineName::Strata => Box::new(crate::strata::Strata::open(dir, cache_size_bytes)?),
        EngineName::Redb => Box::new(crate::redb::Redb::open(dir, cache_size_bytes)?),
        EngineName::Fjall => Box::new(crate::fjall::Fjall::open(dir, cache_size_bytes, args.fjall_memtable_size)?),
    })
}

fn prepare_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    if std::fs::read_dir(dir)?.next().is_some() {
        bail!("{} is not empty: iibench starts from an empty engine", dir.display());
    }
    Ok(())
}

fn workload_of(args: &WorkloadArgs) -> Workload {
    Workload {
        inserts: args.inserts,
        batch: args.batch.max(1),
        value_bytes: args.value_bytes,
        seed: args.seed,
        report_every: args.report_every.max(1),
        max_duration: args.max_seconds.map(Duration::from_secs),
    }
}

/// One interval line; with the process's resident memory now and, where the engine reports it,
/// what it charges to its cache, so that memory outside the budget shows over the run.
fn interval(engine: &str, backend: &dyn Backend, now: Sample, previous: Sample) -> Line {
    let start = Sample { inserts: 0, elapsed: Duration::ZERO };
    let line = Line::new("interval")
        .text("engine", engine)
        .int("inserts", now.inserts)
        .float("seconds", now.elapsed.as_secs_f64())
        .float("interval_rate", workload::rate(previous, now))
        .float("cumulative_rate", workload::rate(start, now))
        .int("rss_bytes", rss_bytes().unwrap_or(0))
        .int("peak_rss_bytes", peak_rss_bytes().unwrap_or(0))
        .int("heap_bytes", heap::live_bytes() as u64)
        .int("heap_peak_bytes", heap::take_peak_bytes() as u64);
    match backend.cache_used_bytes() {
        Some(used) => line.int("cache_used_bytes", used),
        None => line,
    }
}

fn emit(line: Line) {
    println!("{}", line.to_json());
}
