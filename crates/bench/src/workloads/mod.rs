//! The workloads, one per seed post (and iibench), each a function from its options to series
//! and measurements in the context's results.

mod bio;
mod clients;
mod fudge;
mod idle;
mod iibench;
mod lag;
mod pets;
mod process;
mod query_thread;
mod roundtrip;
mod stores;

use anyhow::bail;

use crate::args::{BenchCommand, IndexChoice};
use crate::context::Context;

pub async fn run(context: &mut Context, command: &BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Bio(args) => bio::run(context, args).await,
        BenchCommand::Fudge(args) => fudge::run(context, args).await,
        BenchCommand::Pets(args) => pets::run(context, args).await,
        BenchCommand::Iibench(args) => iibench::run(context, args).await,
        BenchCommand::Stores(args) => stores::run(context, args).await,
        BenchCommand::Roundtrip(args) => roundtrip::run(context, args).await,
        BenchCommand::Clients(args) => clients::run(context, args).await,
        BenchCommand::Compare(_) => bail!("compare is not a workload"),
    }
}

/// `--indexes` as given, without repeats, in the order given.
fn index_choices(choices: &[IndexChoice]) -> Vec<bool> {
    let mut indexed = Vec::new();
    for choice in choices {
        let with = *choice == IndexChoice::With;
        if !indexed.contains(&with) {
            indexed.push(with);
        }
    }
    indexed
}

/// Runs a find and counts what its cursor returns (the documents are fetched, not decoded).
async fn count_found(
    collection: &mongodb::Collection<bson::RawDocumentBuf>,
    filter: bson::Document,
) -> mongodb::error::Result<u64> {
    let mut cursor = collection.find(filter).await?;
    let mut found = 0;
    while cursor.advance().await? {
        found += 1;
    }
    Ok(found)
}

/// The value at `fraction` (0.5: the median, 0.99: p99) of sorted samples; 0 when there are none.
fn percentile(sorted: &[u64], fraction: f64) -> f64 {
    let at = ((sorted.len() as f64 * fraction) as usize).min(sorted.len().saturating_sub(1));
    sorted.get(at).copied().unwrap_or(0) as f64
}
