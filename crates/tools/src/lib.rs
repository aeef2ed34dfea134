//! MongoDB's database tools, as `strata` subcommands, through the official driver against any
//! MongoDB URI (Strata or mongod): `dump` and `restore` in mongodump's directory layout
//! (`layout`), `export` and `import` of JSON lines and CSV as mongoexport/mongoimport do, and
//! `stat`, a mongostat-like live view. MongoDB's own tools cannot be installed from the
//! package registries here; these speak the same files and flags where they mean the same.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod dump;
mod export;
mod layout;
mod restore;
mod stat;

pub use dump::DumpArgs;
pub use export::{ExportArgs, ImportArgs};
pub use restore::RestoreArgs;
pub use stat::StatArgs;

/// Runs an async tool on a fresh runtime.
fn block_on<F: std::future::Future<Output = anyhow::Result<()>>>(future: F) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(future)
}

pub fn dump(args: DumpArgs) -> anyhow::Result<()> {
    block_on(dump::run(args))
}

pub fn restore(args: RestoreArgs) -> anyhow::Result<()> {
    block_on(restore::run(args))
}

pub fn export(args: ExportArgs) -> anyhow::Result<()> {
    block_on(export::export(args))
}

pub fn import(args: ImportArgs) -> anyhow::Result<()> {
    block_on(export::import(args))
}

pub fn stat(args: StatArgs) -> anyhow::Result<()> {
    block_on(stat::run(args))
}

/// Databases the tools leave alone unless named: a server's own.
pub(crate) const SERVER_DATABASES: [&str; 2] = ["local", "config"];
