//! The seed post 000 benchmark, in-process: 2,400-byte documents {name, someId1, str1, date1,
//! bio} with names drawn from a pool of 1M, inserted in batches of 1,000 without and then with
//! an index on `name`. Prints docs/s (time in `Store::insert` only, not in making the documents)
//! for each sixth of each run and the with/without ratio
//! (MongoDB 2.0 in the post: 0.27 after 20M documents; the aim is 0.8 or better), and per run
//! the CPU per document of the inserting thread (inside `insert`) and of the engine's threads,
//! steadier than wall time on a shared machine. With `--pairs N` the two runs alternate N times
//! (without, with, without, ...) and the medians of the pairs' ratios are printed last: on a
//! shared machine one pair's ratio moves by ±0.1 with the load of the moment. Each run of a pair
//! runs in a fresh process (this program again, with `--only`): see `run_in_child`.
//!
//! ```sh
//! cargo run --release -p docstore --example bio_bench -- --docs 1000000 --cache-size 134217728
//! /work/shared/memcap 256 target/release/examples/bio_bench --docs 1200000 --cache-size 134217728
//! ```
//!
//! Flags: `--docs N` (default 300,000), `--cache-size BYTES` (engine cache, default 128 MiB),
//! `--dir PATH` (default a fresh directory under the system temp dir, removed at the end),
//! `--batch N` (default 1,000), `--only without|with`, `--pairs N` (default 1). Commits use
//! `Durability::Periodic` (the log is synced at least every 100 ms: journaling on).
//! `STRATA_CHECKPOINT_LOG_BYTES`, `STRATA_NODE_SIZE` and `STRATA_FANOUT` in the environment
//! override the engine's checkpoint trigger and tree shape.

// Shared with the storage benchmarks: CPU time per thread, the machine's description.
#[path = "../../storage/examples/support/cpu.rs"]
mod cpu;
#[path = "../../storage/examples/support/machine.rs"]
mod machine;

use std::path::{Path, PathBuf};
use std::time::Instant;

use bson::{RawDocumentBuf, doc, rawdoc};
use docstore::{Store, StoreOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use storage::Durability;

const NAME_POOL: u64 = 1_000_000;
const DOCUMENT_BYTES: usize = 2_400;

struct Args {
    docs: u64,
    cache_size: usize,
    dir: Option<PathBuf>,
    batch: u64,
    only: Option<String>,
    pairs: usize,
    /// Run by a parent bio_bench for one run of a pair: no header.
    child: bool,
}

fn args() -> Args {
    let mut args =
        Args { docs: 300_000, cache_size: 128 << 20, dir: None, batch: 1_000, only: None, pairs: 1, child: false };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--child" {
            args.child = true;
            continue;
        }
        let value = it.next().unwrap_or_default();
        match flag.as_str() {
            "--docs" => args.docs = value.parse().unwrap_or(args.docs),
            "--cache-size" => args.cache_size = value.parse().unwrap_or(args.cache_size),
            "--dir" => args.dir = Some(PathBuf::from(value)),
            "--batch" => args.batch = value.parse().unwrap_or(args.batch),
            "--only" => args.only = Some(value),
            "--pairs" => args.pairs = value.parse().unwrap_or(args.pairs).max(1),
            other => {
                eprintln!("unknown flag {other}");
                std::process::exit(2);
            }
        }
    }
    args
}

fn document(rng: &mut StdRng, sequence: u64) -> RawDocumentBuf {
    let name = format!("name{:07}", rng.gen_range(0..NAME_POOL));
    let str1: String = (0..16).map(|_| char::from(rng.gen_range(b'a'..=b'z'))).collect();
    // Words from a small vocabulary: text that compresses about as prose does.
    const WORDS: [&str; 16] = [
        "data", "fractal", "tree", "index", "insert", "memory", "disk", "buffer", "node", "leaf", "query", "bio",
        "mongo", "strata", "write", "read",
    ];
    let mut bio = String::with_capacity(DOCUMENT_BYTES);
    while bio.len() < DOCUMENT_BYTES - 160 {
        bio.push_str(WORDS[rng.gen_range(0..WORDS.len())]);
        bio.push(' ');
    }
    rawdoc! {
        "name": name,
        "someId1": rng.gen_range(0..i64::MAX),
        "str1": str1,
        "date1": bson::DateTime::from_millis(1_300_000_000_000 + sequence as i64),
        "bio": bio,
    }
}

/// This process's resident memory now; 0 where /proc does not say.
fn resident_mib() -> usize {
    storage::allocator::resident_bytes().unwrap_or(0) >> 20
}

type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

/// What one run measured.
struct RunResult {
    /// docs/s in each sixth of the run.
    sixths: Vec<f64>,
    /// docs/s over the whole run.
    overall: f64,
    /// CPU per document of the inserting thread inside `insert`, in µs.
    insert_cpu_us: f64,
}

impl RunResult {
    /// The line a child process prints last, for its parent to read.
    fn encode(&self) -> String {
        format!("result: {} {} {}", self.overall, self.insert_cpu_us, list_exact(&self.sixths))
    }

    fn decode(line: &str) -> Option<RunResult> {
        let mut fields = line.strip_prefix("result: ")?.split(' ');
        let overall = fields.next()?.parse().ok()?;
        let insert_cpu_us = fields.next()?.parse().ok()?;
        let sixths = fields.next()?.split(',').map(str::parse).collect::<Result<_, _>>().ok()?;
        Some(RunResult { sixths, overall, insert_cpu_us })
    }
}

fn list_exact(values: &[f64]) -> String {
    values.iter().map(f64::to_string).collect::<Vec<_>>().join(",")
}

/// One run in a new process (this program with `--only`), its output passed through. Run in
/// one process one after the other, the second run found the allocator's arenas as the first
/// left them: glibc hands a new thread an arena an exited thread used, so the inserting thread
/// could end up sharing its arena with the new engine's threads, and the second run (the
/// indexed one, whose engine threads allocate more) blocked on the arena's lock about 20 times
/// per 1,000 documents instead of 2, which cost it 10-20% of its rate.
fn run_in_child(base: &Path, args: &Args, label: &str) -> BenchResult<RunResult> {
    use std::io::BufRead;
    let exe = std::env::current_exe()?;
    let mut child = std::process::Command::new(exe)
        .args([
            "--docs",
            &args.docs.to_string(),
            "--cache-size",
            &args.cache_size.to_string(),
            "--batch",
            &args.batch.to_string(),
        ])
        .args(["--dir", &base.display().to_string(), "--only", label, "--child"])
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    let mut result = None;
    if let Some(stdout) = child.stdout.take() {
        for line in std::io::BufReader::new(stdout).lines() {
            let line = line?;
            match RunResult::decode(&line) {
                Some(decoded) => result = Some(decoded),
                None => println!("{line}"),
            }
        }
    }
    let status = child.wait()?;
    match result {
        Some(result) if status.success() => Ok(result),
        _ => Err(format!("the {label} run's process failed ({status})").into()),
    }
}

/// Inserts `docs` documents into a fresh store at `dir`.
fn run(dir: &Path, args: &Args, indexed: bool) -> BenchResult<RunResult> {
    // How this run's lines start.
    let side = if indexed { "with   " } else { "without" };
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let mut options =
        StoreOptions { engine: storage::Options::for_cache_size(args.cache_size), ..StoreOptions::default() };
    // Knobs for sweeps, as in iibench: STRATA_CHECKPOINT_LOG_BYTES, STRATA_NODE_SIZE (bytes), STRATA_FANOUT.
    let knob = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    if let Some(bytes) = knob("STRATA_CHECKPOINT_LOG_BYTES") {
        options.engine.checkpoint_log_bytes = bytes;
    }
    if let Some(bytes) = knob("STRATA_NODE_SIZE") {
        options.engine.node_size_bytes = bytes as usize;
    }
    if let Some(fanout) = knob("STRATA_FANOUT") {
        options.engine.fanout = fanout as usize;
    }
    let store = Store::open(dir, options)?;
    if indexed {
        store.collection(("bench", "bio")).create_indexes(&[doc! {"key": {"name": 1}}])?;
    }
    let mut rng = StdRng::seed_from_u64(0);
    let sixth = (args.docs / 6).max(1);
    let mut rates = Vec::new();
    // Only the inserts are timed: generating the documents (random text) took about a third of
    // the CPU, the same in both runs, which would pull the ratio towards 1.
    let mut insert_time = std::time::Duration::ZERO;
    let mut sixth_time = std::time::Duration::ZERO;
    let mut inserted = 0u64;
    let mut insert_cpu_ns = 0u64;
    let engine_cpu_before = cpu::threads_cpu_ns("strata-");
    let times_before = cpu::ThreadTimes::now();
    while inserted < args.docs {
        let n = args.batch.min(args.docs - inserted);
        let batch: Vec<RawDocumentBuf> = (0..n).map(|i| document(&mut rng, inserted + i)).collect();
        let insert_started = Instant::now();
        let cpu_before = cpu::thread_cpu_ns();
        let outcome = store.collection(("bench", "bio")).insert(batch, true, Durability::Periodic);
        insert_cpu_ns += cpu::thread_cpu_ns().saturating_sub(cpu_before);
        let took = insert_started.elapsed();
        insert_time += took;
        sixth_time += took;
        if let Some((position, error)) = outcome.errors.first() {
            return Err(format!("insert failed at document {position} of a batch: {error}").into());
        }
        let before = inserted;
        inserted += n;
        if before / sixth != inserted / sixth || inserted == args.docs {
            let rate = (inserted - (rates.len() as u64) * sixth) as f64 / sixth_time.as_secs_f64();
            // Reading the engine's figures walks its trees: outside the timed inserts.
            let stats = store.engine_stats();
            println!(
                "  {} sixth {}: {inserted:>9} docs, {rate:>9.0} docs/s (cache {} MiB, resident {} MiB, data file {} MiB, flushes {} ({} detached, {} dropped), checkpoints {}, tree lock waits {} ms, throttle waits {}, nodes read whole {}, copies {})",
                side,
                rates.len() + 1,
                stats.cache_used_bytes >> 20,
                resident_mib(),
                stats.data_file_bytes >> 20,
                stats.flushes,
                stats.detached_flushes,
                stats.detached_flushes_abandoned,
                stats.checkpoints,
                stats.tree_lock_wait_micros / 1000,
                stats.throttle_waits,
                stats.cache_loads,
                stats.write_copies,
            );
            rates.push(rate);
            sixth_time = std::time::Duration::ZERO;
            if rates.len() == 6 {
                break;
            }
        }
    }
    let overall = args.docs as f64 / insert_time.as_secs_f64();
    // CPU is steadier than wall time on a shared machine: what the inserting thread spent in
    // `insert`, and what the engine's background threads (evictor, flusher, checkpointer) spent.
    let engine_cpu_ns = cpu::threads_cpu_ns("strata-").saturating_sub(engine_cpu_before);
    let insert_cpu_us = insert_cpu_ns as f64 / 1e3 / args.docs as f64;
    println!(
        "  {} CPU per document: inserting thread {insert_cpu_us:.2} µs, engine threads {:.2} µs",
        side,
        engine_cpu_ns as f64 / 1e3 / args.docs as f64,
    );
    let times = cpu::ThreadTimes::now().since(&times_before);
    let per_doc_us = |ms: u64| ms as f64 * 1e3 / args.docs as f64;
    println!(
        "  {} inserting thread over the run (making documents too): user {:.2} µs/doc, system {:.2}, waiting for a CPU {:.2}; per 1000 docs {:.1} blocks, {:.1} preemptions",
        side,
        per_doc_us(times.user_ms),
        per_doc_us(times.system_ms),
        times.runnable_wait_ns as f64 / 1e3 / args.docs as f64,
        times.voluntary_switches as f64 * 1000.0 / args.docs as f64,
        times.preemptions as f64 * 1000.0 / args.docs as f64,
    );
    let count = store.collection(("bench", "bio")).estimated_document_count()?;
    if count != args.docs {
        return Err(format!("the collection holds {count} documents, not {}", args.docs).into());
    }
    store.close()?;
    Ok(RunResult { sixths: rates, overall, insert_cpu_us })
}

// As Strata's server does: the memory budget depends on it.
storage::strata_allocator!();

fn main() {
    let args = args();
    let base =
        args.dir.clone().unwrap_or_else(|| std::env::temp_dir().join(format!("bio_bench-{}", std::process::id())));
    if args.child {
        run_pair(&base, &args);
        return;
    }
    println!("command: {}", std::env::args().collect::<Vec<_>>().join(" "));
    println!("machine: {}", machine::machine());
    println!(
        "bio_bench: {} docs of ~{DOCUMENT_BYTES} B (~{} MiB), batches of {}, cache {} MiB, names from a pool of {NAME_POOL}, {} pair(s) of runs",
        args.docs,
        (args.docs * DOCUMENT_BYTES as u64) >> 20,
        args.batch,
        args.cache_size >> 20,
        args.pairs,
    );
    let mut ratios = Vec::new();
    for pair in 1..=args.pairs {
        if args.pairs > 1 {
            println!("pair {pair} of {}", args.pairs);
        }
        if let Some(ratio) = run_pair(&base, &args) {
            ratios.push(ratio);
        }
    }
    if ratios.len() > 1 {
        let overall: Vec<f64> = ratios.iter().map(|r| r.overall).collect();
        let last: Vec<f64> = ratios.iter().map(|r| r.last_sixth).collect();
        let cpu: Vec<f64> = ratios.iter().map(|r| r.insert_cpu).collect();
        println!(
            "medians over {} pairs: with/without ratio overall {:.2} (pairs: {}), last sixth {:.2} (pairs: {}), inserting thread CPU {:.2}",
            ratios.len(),
            median(&overall),
            list(&overall),
            median(&last),
            list(&last),
            median(&cpu),
        );
    }
    if args.dir.is_none() {
        let _ = std::fs::remove_dir_all(&base);
    }
}

/// A pair's with/without ratios: of the rates overall and in the last sixth, and of the
/// inserting thread's CPU per document (without / with: below 1 when the index costs CPU).
struct PairRatio {
    overall: f64,
    last_sixth: f64,
    insert_cpu: f64,
}

/// Runs without and then with the index (or the one `--only` names); the pair's ratios if both ran.
fn run_pair(base: &Path, args: &Args) -> Option<PairRatio> {
    let mut results = Vec::new();
    for indexed in [false, true] {
        let label = if indexed { "with" } else { "without" };
        if args.only.as_deref().is_some_and(|only| only != label) {
            continue;
        }
        // A pair's runs each get a fresh process (see `run_in_child`); `--only` runs here.
        let result = if args.only.is_some() {
            run(&base.join(label), args, indexed).inspect(|result| println!("{}", result.encode()))
        } else {
            run_in_child(base, args, label)
        };
        let result = match result {
            Ok(result) => result,
            Err(error) => {
                eprintln!("bio_bench {label} index: {error}");
                std::process::exit(1);
            }
        };
        if !args.child {
            println!("{label} index on name: {:.0} docs/s overall", result.overall);
        }
        results.push(result);
    }
    let [without, with] = results.as_slice() else { return None };
    let sixths: Vec<f64> = without.sixths.iter().zip(&with.sixths).map(|(a, b)| b / a).collect();
    let ratio = PairRatio {
        overall: with.overall / without.overall,
        last_sixth: with.sixths.last().unwrap_or(&0.0) / without.sixths.last().unwrap_or(&1.0),
        insert_cpu: without.insert_cpu_us / with.insert_cpu_us,
    };
    println!("with/without ratio per sixth: [{}]", list(&sixths));
    println!(
        "with/without ratio overall: {:.2}; last sixth: {:.2}; inserting thread CPU per document: {:.2}",
        ratio.overall, ratio.last_sixth, ratio.insert_cpu
    );
    Some(ratio)
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

fn list(values: &[f64]) -> String {
    values.iter().map(|v| format!("{v:.2}")).collect::<Vec<_>>().join(", ")
}
