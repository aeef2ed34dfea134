//! Seed post 000 ("How MongoDB write/read speed varies with or without index on a field"):
//! documents {name, someId1, str1, date1, bio} of about 2,400 bytes (the bio is the post's
//! "I am a Java Developer. " a hundred times), inserted into an empty database without and then
//! with an index on `name`; the insert rate over each sixth of the run (the post's six batches
//! of 10 million), and after each sixth the post's find by name, run twice.
//!
//! The post looked up one name that appeared once per batch ("Shekhar Gulati", from its input
//! file); here the first document of each sixth carries it, so after sixth k the find must
//! return k documents, which is checked. Find time is not counted as insert time.

use std::time::Instant;

use anyhow::{anyhow, bail};
use bson::{RawDocumentBuf, doc, rawdoc};
use mongodb::{Collection, IndexModel};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{count_found, index_choices};
use crate::args::BioArgs;
use crate::context::Context;
use crate::inserter::{Inserter, SharedRecorder, shared_recorder};

const PROBE_NAME: &str = "Shekhar Gulati";
const FINDS_PER_SIXTH: usize = 2;

pub async fn run(context: &mut Context, args: &BioArgs) -> anyhow::Result<()> {
    let docs = context.common.scaled(args.docs);
    let sixth = docs.div_ceil(6);
    let interval = context.common.interval.unwrap_or(sixth);
    context.parameter("docs", docs);
    context.parameter("batch", args.batch);
    context.parameter("name_pool", args.name_pool);
    context.parameter("write_concern", args.write_concern.label());
    context.parameter("interval_docs", interval);
    let bio = "I am a Java Developer. ".repeat(100);
    for indexed in index_choices(&args.indexes) {
        let name = if indexed { "with index on name" } else { "without index" };
        let collection = context.fresh_database().await?.collection::<RawDocumentBuf>("users");
        if indexed {
            collection.create_index(IndexModel::builder().keys(doc! { "name": 1 }).build()).await?;
        }
        context.progress.phase(name, docs);
        let recorder = shared_recorder(docs, interval);
        let mut inserter = Inserter::new(
            collection.clone(),
            args.write_concern,
            args.batch,
            docs,
            recorder.clone(),
            context.progress.clone(),
        );
        let mut rng = StdRng::seed_from_u64(context.common.seed);
        let mut make = |sequence: u64| {
            let name = if sequence.is_multiple_of(sixth) {
                PROBE_NAME.to_owned()
            } else {
                format!("user{:07}", rng.gen_range(0..args.name_pool))
            };
            document(&mut rng, sequence, &name, &bio)
        };
        let mut completed_sixths = 0;
        let inserted = async {
            while !inserter.is_done() {
                let Some(done) = inserter.insert_next(&mut make).await? else { continue };
                let completed = if done.docs == docs { docs.div_ceil(sixth) } else { done.docs / sixth };
                if completed == completed_sixths {
                    continue;
                }
                completed_sixths = completed;
                let started = Instant::now();
                // One probe document starts each sixth: this many are in.
                let probes = done.docs.div_ceil(sixth);
                find_probe(context, &collection, name, completed, probes).await?;
                exclude(&recorder, started)?;
            }
            anyhow::Ok(())
        }
        .await;
        drop(inserter);
        context.finish_series(name, indexed, args.write_concern, recorder, &collection, inserted).await?;
    }
    Ok(())
}

fn document(rng: &mut StdRng, sequence: u64, name: &str, bio: &str) -> RawDocumentBuf {
    rawdoc! {
        "name": name,
        "someId1": 1_000_000_i64 + sequence as i64,
        "str1": char::from(rng.gen_range(b'A'..=b'Z')).to_string(),
        "date1": bson::DateTime::from_millis(rng.gen_range(0..1_300_000_000_000_i64)),
        "bio": bio,
    }
}

/// The post's find by name, twice; records each time and checks the count.
async fn find_probe(
    context: &mut Context,
    collection: &Collection<RawDocumentBuf>,
    series: &str,
    sixth: u64,
    expected: u64,
) -> anyhow::Result<()> {
    for run in 1..=FINDS_PER_SIXTH {
        let started = Instant::now();
        let found = match count_found(collection, doc! { "name": PROBE_NAME }).await {
            Ok(found) => found,
            Err(error) => {
                context.server_error(&format!("{series}: find by name after sixth {sixth}"), &error);
                return Ok(());
            }
        };
        let millis = started.elapsed().as_secs_f64() * 1e3;
        if found != expected {
            bail!("{series}: find by name after sixth {sixth} returned {found} documents, expected {expected}");
        }
        context.measure(series, &format!("find by name after sixth {sixth}, run {run}"), millis, "ms");
    }
    Ok(())
}

fn exclude(recorder: &SharedRecorder, started: Instant) -> anyhow::Result<()> {
    recorder.lock().map_err(|_| anyhow!("an inserter panicked"))?.exclude(started.elapsed());
    Ok(())
}
