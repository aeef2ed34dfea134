//! `iibench`: the iibench insert pattern at the engine level, run against Strata's Bε-tree,
//! redb (a B-tree) and fjall (an LSM) on the same data, to see whether insert rates hold up when
//! the data grows far beyond the cache.
//!
//!     iibench run --engine strata --dir /tmp/ii --inserts 1000000      # one engine, JSON lines
//!     iibench compare --inserts 1000000 --memory-mib 256                # all three, a table
//!
//! `compare` runs each engine as a child `iibench run`, one after another, so that a memory
//! cap (`../shared/memcap`) applies to one engine at a time. See docs/BENCHMARKS.md.

// Library code returns errors instead of panicking; tests may unwrap.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod compare;
mod fjall;
mod heap;
mod measure;
mod redb;
mod report;
mod run;
mod strata;
mod workload;

use std::path::PathBuf;

// Counts live heap bytes for the interval lines (see `heap`) around the allocator Strata's
// binaries run on, set as they set it.
storage::strata_allocator!(heap::CountingAllocator = heap::CountingAllocator);

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(name = "iibench", about = "iibench at the engine level: strata vs redb vs fjall")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs one engine in this process and prints JSON lines (intervals, then a summary).
    Run(RunArgs),
    /// Runs each engine as a child `iibench run` (under memcap if asked) and compares them.
    Compare(CompareArgs),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum EngineName {
    Strata,
    Redb,
    Fjall,
}

impl EngineName {
    pub fn as_str(self) -> &'static str {
        match self {
            EngineName::Strata => "strata",
            EngineName::Redb => "redb",
            EngineName::Fjall => "fjall",
        }
    }
}

/// The workload and cache, the same for `run` and `compare` (which passes them on).
#[derive(Args, Clone, Debug)]
pub struct WorkloadArgs {
    /// Total inserts (each: 1 primary entry + 3 secondary entries).
    #[arg(long, default_value_t = 1_000_000)]
    pub inserts: u64,
    /// Inserts per transaction.
    #[arg(long, default_value_t = 1000)]
    pub batch: u64,
    /// Bytes in each primary value (half random, half zeros).
    #[arg(long, default_value_t = 1000)]
    pub value_bytes: usize,
    /// Cache budget of each engine: bytes, or with a KiB/MiB/GiB suffix.
    #[arg(long, default_value = "128MiB", value_parser = parse_size)]
    pub cache_size: u64,
    /// fjall only: the most each of its 4 keyspaces' memtables holds (fjall's default: 64 MiB),
    /// memory that fjall keeps outside its block cache.
    #[arg(long, default_value = "64MiB", value_parser = parse_size)]
    pub fjall_memtable_size: u64,
    /// Print the rate every this many inserts.
    #[arg(long, default_value_t = 100_000)]
    pub report_every: u64,
    /// Seed of the random secondary keys and values (the same rows for every engine).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Stop an engine after this many seconds of inserting (its run is then reported partial).
    #[arg(long)]
    pub max_seconds: Option<u64>,
    /// After the inserts: this many random point reads of the primary tree, timed after as many
    /// untimed ones (strata and redb).
    #[arg(long, default_value_t = 0)]
    pub reads: u64,
    /// After the reads: this many scans of 1,000 consecutive entries of a secondary tree, each
    /// from a random place (strata and redb).
    #[arg(long, default_value_t = 0)]
    pub scans: u64,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    #[arg(long, value_enum)]
    pub engine: EngineName,
    /// Data directory; created if missing, must be empty.
    #[arg(long)]
    pub dir: PathBuf,
    #[command(flatten)]
    pub workload: WorkloadArgs,
}

#[derive(Args, Debug)]
pub struct CompareArgs {
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// Run each engine under `memcap MIB` (needs root and a writable cgroup memory controller).
    #[arg(long)]
    pub memory_mib: Option<u64>,
    /// The memcap script; by default ../shared/memcap beside the repository.
    #[arg(long)]
    pub memcap: Option<PathBuf>,
    /// Parent of the engines' data directories; by default a new directory under the temp dir.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Engines to run, in order.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "strata,redb,fjall")]
    pub engines: Vec<EngineName>,
    /// Keep each engine's data directory after its run (by default it is removed).
    #[arg(long)]
    pub keep: bool,
}

fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let number: u64 = digits.parse().map_err(|_| format!("not a size: {text:?}"))?;
    let shift = match unit.trim() {
        "" | "B" => 0,
        "KiB" | "K" => 10,
        "MiB" | "M" => 20,
        "GiB" | "G" => 30,
        other => return Err(format!("unknown unit {other:?} (use B, KiB, MiB or GiB)")),
    };
    number.checked_mul(1 << shift).ok_or_else(|| format!("size too large: {text:?}"))
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Run(args) => run::run(&args),
        Command::Compare(args) => compare::compare(&args),
    }
}
