//! `bench`: the experiments of the seed posts (`../shared/seeds/`) and Tokutek's iibench as
//! named workloads, run through the official Rust `mongodb` driver against any `mongodb://`
//! URI, so the same numbers can be taken from Strata, MongoDB or any compatible server.
//! `strata bench <workload>` (crates/cli) is the front end.
//!
//! A run: start the server under test (`target.rs`: by default `strata serve` on a temporary
//! directory and a free port, optionally inside a memory cgroup, `cgroup.rs`), run the workload
//! (`workloads/`), each series on an empty database, then stop the server and write
//! `<out>/<name>.{json,csv,svg,png}` (`results.rs`, `plot.rs`). `compare.rs` reads two JSON
//! files and prints them side by side.
//!
//! Invariants: every series checks the server's document count against what it inserted and
//! fails the run on a mismatch; query errors from the server are recorded in the results and
//! printed, never hidden; results are written even when the run fails midway (with the error).
//! Does not know: Strata's crates. The server is reached only through the driver.
//! Threads: one tokio runtime per run; concurrent clients (stores' two inserters, iibench's query
//! thread) are tasks on it.

// Library code returns errors instead of panicking; tests may unwrap.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod args;
mod cgroup;
mod compare;
mod context;
mod inserter;
mod machine;
mod plot;
mod progress;
mod recorder;
mod results;
mod runner;
pub mod size;
mod target;
mod workloads;

pub use args::{BenchArgs, BenchCommand};
pub use results::RunResults;

/// Runs one `strata bench` command to the end.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.command {
        BenchCommand::Compare(compare_args) => compare::run(&compare_args),
        workload => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .thread_name("strata-bench")
                .build()
                .map_err(|error| anyhow::anyhow!("starting the async runtime: {error}"))?;
            runtime.block_on(runner::execute(workload))
        }
    }
}
