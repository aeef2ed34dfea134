//! In-memory engine benchmark beside `std::collections::BTreeMap`, in the same run: sequential
//! and random inserts (one transaction per insert), point reads and a full scan of N small keys.
//! Prints the command, the machine, the sizes, and our time as a ratio of BTreeMap's.
//!
//!     cargo run --release -p storage --example engine_bench -- --keys 10000000

#[path = "support/machine.rs"]
mod machine;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use storage::{Durability, Engine, Options};

struct Args {
    keys: u64,
    node_size_bytes: usize,
    basement_size_bytes: usize,
    fanout: usize,
}

fn parse_args() -> Args {
    let mut args = Args { keys: 10_000_000, node_size_bytes: 4 << 20, basement_size_bytes: 64 << 10, fanout: 16 };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let value = pair.get(1).and_then(|v| v.parse::<u64>().ok()).unwrap_or_else(|| usage());
        match pair.first().map(String::as_str) {
            Some("--keys") => args.keys = value,
            Some("--node-size") => args.node_size_bytes = value as usize,
            Some("--basement-size") => args.basement_size_bytes = value as usize,
            Some("--fanout") => args.fanout = value as usize,
            _ => usage(),
        }
    }
    args
}

fn usage() -> ! {
    eprintln!("usage: engine_bench [--keys N] [--node-size BYTES] [--basement-size BYTES] [--fanout N]");
    std::process::exit(2)
}

fn report(name: &str, n: u64, ours: Duration, theirs: Duration) {
    let rate = |d: Duration| n as f64 / d.as_secs_f64();
    println!(
        "{name:<18} strata {:>12.0} ops/s   btreemap {:>12.0} ops/s   strata/btreemap time ratio {:>6.2}",
        rate(ours),
        rate(theirs),
        ours.as_secs_f64() / theirs.as_secs_f64()
    );
}

// The allocator Strata's binaries run on: the memory budget depends on it.
storage::strata_allocator!();

fn main() {
    if let Err(error) = run() {
        eprintln!("engine_bench: {error}");
        std::process::exit(1);
    }
}

fn run() -> storage::Result<()> {
    let args = parse_args();
    println!("command: {}", std::env::args().collect::<Vec<_>>().join(" "));
    println!("machine: {}", machine::machine());
    println!(
        "keys: {} x (8-byte key, 8-byte value); node {} B, basement {} B, fanout {}; one transaction per insert",
        args.keys, args.node_size_bytes, args.basement_size_bytes, args.fanout
    );
    let options = Options {
        node_size_bytes: args.node_size_bytes,
        basement_size_bytes: args.basement_size_bytes,
        fanout: args.fanout,
        ..Options::default()
    };
    let n = args.keys;
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    let random_keys: Vec<u64> = (0..n).map(|_| rng.r#gen()).collect();

    for (name, keys) in [("sequential insert", None), ("random insert", Some(&random_keys))] {
        let key_at = |i: u64| keys.map_or(i, |k| k[i as usize]).to_be_bytes();
        let engine = Engine::open_in_memory(options.clone())?;
        let tree = engine.create_tree("bench")?;
        let start = Instant::now();
        for i in 0..n {
            let mut txn = engine.begin();
            txn.put(tree, key_at(i).to_vec(), i.to_le_bytes().to_vec());
            txn.commit(Durability::None)?;
        }
        engine.flush_all()?;
        let ours = start.elapsed();
        let start = Instant::now();
        let mut map = BTreeMap::new();
        for i in 0..n {
            map.insert(key_at(i).to_vec(), i.to_le_bytes().to_vec());
        }
        let theirs = start.elapsed();
        report(name, n, ours, theirs);

        if keys.is_some() {
            let snapshot = engine.snapshot();
            let start = Instant::now();
            for _ in 0..n {
                let k = key_at(rng.gen_range(0..n));
                std::hint::black_box(snapshot.get(tree, &k)?);
            }
            let ours = start.elapsed();
            let start = Instant::now();
            for _ in 0..n {
                let k = key_at(rng.gen_range(0..n));
                std::hint::black_box(map.get(k.as_slice()));
            }
            report("random point read", n, ours, start.elapsed());

            let start = Instant::now();
            let count = snapshot.iter(tree).try_fold(0usize, |count, entry| entry.map(|_| count + 1))?;
            let ours = start.elapsed();
            let start = Instant::now();
            // Both sides hand out owned copies of each key and value, as the engine's iterator does.
            let theirs_count = map.iter().fold(0usize, |count, (k, v)| {
                std::hint::black_box((k.clone(), v.clone()));
                count + 1
            });
            report("full scan", count as u64, ours, start.elapsed());
            assert_eq!(count, theirs_count, "scan saw every key");
            println!("engine stats after random inserts: {:?}", engine.stats());
        }
    }
    Ok(())
}
