//! Seed post 004 ("Document oriented data stores"): 5 million records {field1, field2, date, n}
//! with field1, field2 and n indexed (date not). Two inserter clients run at once, one from the
//! start of the range upwards and one from the end downwards, one record per call, each timed
//! on its own; then a select client takes every record and queries it by field1 and by field2
//! (10 million queries in the post), counting what it finds.
//!
//! The post's fields are strings it pulled from a MySQL table; here field1 and field2 are
//! distinct strings derived from n in scattered order (so each index takes random inserts), and
//! every query must find exactly its one record. The select client runs after the indexed series
//! only: without an index each query would scan the whole collection.

use std::time::{Duration, Instant};

use anyhow::bail;
use bson::{RawDocumentBuf, doc, rawdoc};
use mongodb::{Collection, IndexModel};

use super::{count_found, index_choices};
use crate::args::StoresArgs;
use crate::context::Context;
use crate::inserter::{Inserter, shared_recorder};

pub async fn run(context: &mut Context, args: &StoresArgs) -> anyhow::Result<()> {
    let records = context.common.scaled(args.records).max(2);
    let first_half = records.div_ceil(2);
    context.parameter("records", records);
    context.parameter("write_concern", args.write_concern.label());
    context.parameter("select", !args.no_select);
    for indexed in index_choices(&args.indexes) {
        let name = if indexed { "two inserters, field1 field2 n indexed" } else { "two inserters, no index" };
        let collection = context.fresh_database().await?.collection::<RawDocumentBuf>("records");
        if indexed {
            let keys = [doc! { "field1": 1 }, doc! { "field2": 1 }, doc! { "n": 1 }];
            collection.create_indexes(keys.into_iter().map(|keys| IndexModel::builder().keys(keys).build())).await?;
        }
        context.progress.phase(name, records);
        let recorder = shared_recorder(records, context.interval_for(records));
        let inserter = |count| {
            Inserter::new(collection.clone(), args.write_concern, 1, count, recorder.clone(), context.progress.clone())
        };
        let (mut upward, mut downward) = (inserter(first_half), inserter(records - first_half));
        let upward = tokio::spawn(async move { timed(upward.run_to_end(&mut |i| record(i + 1))).await });
        let downward = tokio::spawn(async move { timed(downward.run_to_end(&mut |i| record(records - i))).await });
        let (upward, downward) = match (upward.await?, downward.await?) {
            (Ok(upward), Ok(downward)) => (upward, downward),
            (Err(error), _) | (_, Err(error)) => {
                return context
                    .finish_series(name, indexed, args.write_concern, recorder, &collection, Err(error))
                    .await;
            }
        };
        context.finish_series(name, indexed, args.write_concern, recorder, &collection, Ok(())).await?;
        context.measure(name, &format!("insert client 1 (n = 1..{first_half}) seconds"), upward.as_secs_f64(), "s");
        context.measure(
            name,
            &format!("insert client 2 (n = {records}..{}) seconds", first_half + 1),
            downward.as_secs_f64(),
            "s",
        );
        if indexed && !args.no_select {
            select(context, &collection, name, records).await?;
        }
    }
    Ok(())
}

async fn timed(work: impl Future<Output = anyhow::Result<()>>) -> anyhow::Result<Duration> {
    let started = Instant::now();
    work.await?;
    Ok(started.elapsed())
}

/// A 64-bit mix (splitmix64's finalizer): scatters consecutive n over the key space.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn field1(n: u64) -> String {
    format!("{:016x}", mix(n))
}

fn field2(n: u64) -> String {
    format!("{:08x}-record-{n}", mix(n ^ 0x00ff_00ff_00ff_00ff) >> 32)
}

fn record(n: u64) -> RawDocumentBuf {
    rawdoc! {
        "field1": field1(n),
        "field2": field2(n),
        "date": bson::DateTime::from_millis(1_250_000_000_000 + n as i64 * 1_000),
        "n": n as i64,
    }
}

/// The select client: every record by field1, then by field2.
async fn select(
    context: &mut Context,
    collection: &Collection<RawDocumentBuf>,
    series: &str,
    records: u64,
) -> anyhow::Result<()> {
    context.progress.phase(&format!("{series}: select"), records * 2);
    let started = Instant::now();
    let mut found = 0;
    for n in 1..=records {
        for filter in [doc! { "field1": field1(n) }, doc! { "field2": field2(n) }] {
            match count_found(collection, filter.clone()).await {
                Ok(count) => found += count,
                Err(error) => {
                    context.server_error(&format!("{series}: select {filter}"), &error);
                    return Ok(());
                }
            }
        }
        context.progress.advance(2);
    }
    let seconds = started.elapsed().as_secs_f64();
    if found != records * 2 {
        bail!("{series}: the select client found {found} records, expected {}", records * 2);
    }
    context.measure(series, "select client seconds", seconds, "s");
    context.measure(series, "select client records found", found as f64, "docs");
    context.measure(series, "select client queries per second", (records * 2) as f64 / seconds, "queries/s");
    Ok(())
}
