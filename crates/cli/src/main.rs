//! `strata`: the Strata server binary.
//!
//! `strata serve --dbpath DIR` opens the store in DIR and serves the MongoDB wire protocol on
//! `--bind`:`--port` (127.0.0.1:27017 by default) until SIGINT or SIGTERM, then stops accepting,
//! lets in-flight requests finish, checkpoints, and exits 0. Options may also come from a YAML
//! file (`--config`) with mongod.conf's key names; command-line flags win over the file.
//!
//! `strata bench <workload>` runs a named benchmark (crates/bench) through the MongoDB driver,
//! against `--uri` or against a `strata serve` it starts from this same executable;
//! `strata bench compare A.json B.json` prints two runs side by side.
//!
//! `strata dump` / `strata restore` copy databases in mongodump's layout (crates/tools).

// Library code returns errors instead of panicking; tests may unwrap.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod memory_limit;
mod options;
mod repair;
mod serve;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(name = "strata", version, about = "Strata: a MongoDB-wire-compatible document database")]
struct Cli {
    #[command(subcommand)]
    command: Commands,
}

#[derive(Subcommand, Debug)]
#[allow(clippy::large_enum_variant, reason = "parsed once at startup")]
enum Commands {
    /// Run the server on a data directory.
    Serve(options::ServeArgs),
    /// Run a benchmark workload (bio, fudge, pets, iibench, stores) or compare two runs.
    Bench(bench::BenchArgs),
    /// Write every collection to a directory in mongodump's layout (any MongoDB URI).
    Dump(tools::DumpArgs),
    /// Load a directory in mongodump's layout into a server (any MongoDB URI).
    Restore(tools::RestoreArgs),
    /// Write a collection as JSON lines (Extended JSON v2) or CSV (like mongoexport).
    Export(tools::ExportArgs),
    /// Load JSON lines or CSV into a collection (like mongoimport).
    Import(tools::ImportArgs),
    /// Watch a server: operations per second, cache, connections (like mongostat).
    Stat(tools::StatArgs),
    /// Salvage every readable document of a damaged data directory into a new one, rebuild its
    /// indexes, and report what was lost.
    Repair(repair::RepairArgs),
}

// The engine's memory budget depends on it (storage::allocator).
storage::strata_allocator!();

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Commands::Serve(args) => serve::run(args),
        Commands::Bench(args) => bench::run(args),
        Commands::Dump(args) => tools::dump(args),
        Commands::Restore(args) => tools::restore(args),
        Commands::Stat(args) => tools::stat(args),
        Commands::Export(args) => tools::export(args),
        Commands::Import(args) => tools::import(args),
        Commands::Repair(args) => repair::run(args),
    }
}
