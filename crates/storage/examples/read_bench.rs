//! Point reads from a tree many times larger than the cache, with partial eviction (readers read
//! a node's head and then one buffer or basement) and without it (nodes read and evicted whole,
//! as before partial eviction existed), alternating in the same run on the same data file.
//! Prints the command, the machine, the sizes, and per mode: reads/s, node bytes read from the
//! data file per point read, whole nodes / heads / sections read, and the ratios.
//!
//!     cargo run --release -p storage --example read_bench -- --keys 4000000 --cache-mib 32
//!     ../shared/memcap 160 target/release/examples/read_bench --keys 4000000 --cache-mib 32
//!
//! The load (random keys, 1000 per commit) runs once per `--dir`; later runs reuse it.

#[path = "support/machine.rs"]
mod machine;

use std::path::PathBuf;
use std::time::Instant;

use rand::{Rng, SeedableRng};
use storage::{Durability, Engine, Options, Stats};

struct Args {
    keys: u64,
    value_bytes: usize,
    cache_mib: usize,
    reads: u64,
    rounds: u64,
    dir: PathBuf,
}

fn parse_args() -> Args {
    let mut args = Args {
        keys: 4_000_000,
        value_bytes: 200,
        cache_mib: 32,
        reads: 20_000,
        rounds: 2,
        dir: PathBuf::from("/tmp/read_bench"),
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let (Some(flag), Some(value)) = (pair.first(), pair.get(1)) else { usage() };
        let number = || value.parse::<u64>().unwrap_or_else(|_| usage());
        match flag.as_str() {
            "--keys" => args.keys = number(),
            "--value-bytes" => args.value_bytes = number() as usize,
            "--cache-mib" => args.cache_mib = number() as usize,
            "--reads" => args.reads = number(),
            "--rounds" => args.rounds = number(),
            "--dir" => args.dir = PathBuf::from(value),
            _ => usage(),
        }
    }
    args
}

fn usage() -> ! {
    eprintln!("usage: read_bench [--keys N] [--value-bytes N] [--cache-mib N] [--reads N] [--rounds N] [--dir DIR]");
    std::process::exit(2)
}

/// Key `i` of the data set: spread over the key space, so the load is random inserts.
fn key(i: u64) -> [u8; 8] {
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes()
}

fn options(args: &Args, partial: bool) -> Options {
    let cache = args.cache_mib << 20;
    Options { cache_size_bytes: cache, partial_eviction: partial, ..Options::for_cache_size(cache) }
}

fn load(args: &Args) -> storage::Result<()> {
    let engine = Engine::open(&args.dir, options(args, true))?;
    if engine.tree("t").is_some() {
        return Ok(());
    }
    let tree = engine.create_tree("t")?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let started = Instant::now();
    for batch in 0..args.keys.div_ceil(1000) {
        let mut txn = engine.begin();
        for i in batch * 1000..((batch + 1) * 1000).min(args.keys) {
            let value: Vec<u8> = (0..args.value_bytes).map(|j| if j % 2 == 0 { rng.r#gen() } else { 0 }).collect();
            txn.put(tree, key(i).to_vec(), value);
        }
        txn.commit(Durability::None)?;
    }
    engine.close()?;
    println!("loaded {} keys of {} B values in {:.0} s", args.keys, args.value_bytes, started.elapsed().as_secs_f64());
    Ok(())
}

struct Measured {
    reads_per_second: f64,
    stats: Stats,
}

/// Opens the data file in one mode, warms the cache with `reads` reads, then times `reads` more.
fn measure(args: &Args, partial: bool, seed: u64) -> storage::Result<Measured> {
    let engine = Engine::open(&args.dir, options(args, partial))?;
    let tree = engine.tree("t").ok_or_else(|| storage::Error::TreeNotFound("t".into()))?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut read = |engine: &Engine| -> storage::Result<()> {
        let i = rng.gen_range(0..args.keys);
        match engine.snapshot().get(tree, &key(i))? {
            Some(_) => Ok(()),
            None => Err(storage::Error::Invariant(format!("key {i} missing"))),
        }
    };
    for _ in 0..args.reads {
        read(&engine)?;
    }
    let before = engine.stats();
    let started = Instant::now();
    for _ in 0..args.reads {
        read(&engine)?;
    }
    let seconds = started.elapsed().as_secs_f64();
    let after = engine.stats();
    engine.close()?;
    let stats = Stats {
        node_bytes_read: after.node_bytes_read - before.node_bytes_read,
        cache_loads: after.cache_loads - before.cache_loads,
        head_loads: after.head_loads - before.head_loads,
        section_loads: after.section_loads - before.section_loads,
        cache_used_bytes: after.cache_used_bytes,
        data_file_bytes: after.data_file_bytes,
        ..Stats::default()
    };
    Ok(Measured { reads_per_second: args.reads as f64 / seconds, stats })
}

fn report(name: &str, reads: u64, m: &Measured) {
    let per_read = |n: u64| n as f64 / reads as f64;
    println!(
        "  {name:<8} {:>9.0} reads/s  {:>9.0} node bytes read/read  whole nodes {:>6.3}/read  heads {:>6.3}/read  sections {:>6.3}/read  cache {} MiB",
        m.reads_per_second,
        per_read(m.stats.node_bytes_read),
        per_read(m.stats.cache_loads),
        per_read(m.stats.head_loads),
        per_read(m.stats.section_loads),
        m.stats.cache_used_bytes >> 20,
    );
}

// The allocator Strata's binaries run on: the memory budget depends on it.
storage::strata_allocator!();

fn main() {
    let args = parse_args();
    println!("command: {}", std::env::args().collect::<Vec<_>>().join(" "));
    println!("machine: {}", machine::machine());
    let shape = options(&args, true);
    println!(
        "sizes: {} keys, {} B values, cache {} MiB, node {} KiB, basement {} KiB; {} timed reads per mode per round",
        args.keys,
        args.value_bytes,
        args.cache_mib,
        shape.node_size_bytes >> 10,
        shape.basement_size_bytes >> 10,
        args.reads
    );
    if let Err(error) = load(&args) {
        eprintln!("load failed: {error}");
        std::process::exit(1);
    }
    let (mut partial_rate, mut whole_rate, mut partial_bytes, mut whole_bytes) = (0.0, 0.0, 0u64, 0u64);
    for round in 0..args.rounds {
        println!("round {}:", round + 1);
        for partial in [true, false] {
            let measured = match measure(&args, partial, 100 + round) {
                Ok(measured) => measured,
                Err(error) => {
                    eprintln!("reads failed: {error}");
                    std::process::exit(1);
                }
            };
            if round == 0 && partial {
                println!("  data file {} MiB", measured.stats.data_file_bytes >> 20);
            }
            report(if partial { "partial" } else { "whole" }, args.reads, &measured);
            if partial {
                partial_rate += measured.reads_per_second;
                partial_bytes += measured.stats.node_bytes_read;
            } else {
                whole_rate += measured.reads_per_second;
                whole_bytes += measured.stats.node_bytes_read;
            }
        }
    }
    println!(
        "partial/whole: reads/s {:.2}x, node bytes read per read {:.3}x",
        partial_rate / whole_rate,
        partial_bytes as f64 / whole_bytes.max(1) as f64
    );
}
