//! Seed post 002 ("Mongodb and Symfony, Part 1: Inserts"): users {number, pet, name, email},
//! the post's loops — 50 rounds x 10,000 numbers x 5 pets = 2.5 million documents — inserted one
//! per call (the post's save()) and in batches, into an empty database without and with an index
//! on `number`; the post's figure is the total time of each. After each series, equality queries
//! ({number: k}, each must return rounds x 5 documents) and range queries over 10 numbers, each
//! checked against the count it must return.

use std::time::Instant;

use anyhow::bail;
use bson::{RawDocumentBuf, doc, rawdoc};
use mongodb::{Collection, IndexModel};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{count_found, index_choices};
use crate::args::{InsertMode, PetsArgs};
use crate::context::Context;
use crate::inserter::{Inserter, shared_recorder};

const PETS: [&str; 5] = ["cat", "dog", "sugar glider", "pigeon", "dove"];
const POST_NUMBERS: u64 = 10_000;
const RANGE_WIDTH: u64 = 10;

/// The post's loop shape scaled: `rounds` x `numbers` x 5 pets.
#[derive(Clone, Copy)]
struct Shape {
    rounds: u64,
    numbers: u64,
}

impl Shape {
    fn for_docs(docs: u64) -> Shape {
        let numbers = (docs / PETS.len() as u64).clamp(1, POST_NUMBERS);
        let rounds = (docs / (numbers * PETS.len() as u64)).max(1);
        Shape { rounds, numbers }
    }

    fn docs(self) -> u64 {
        self.rounds * self.numbers * PETS.len() as u64
    }
}

pub async fn run(context: &mut Context, args: &PetsArgs) -> anyhow::Result<()> {
    let shape = Shape::for_docs(context.common.scaled(args.docs));
    let docs = shape.docs();
    context.parameter("docs", docs);
    context.parameter("rounds", shape.rounds);
    context.parameter("numbers", shape.numbers);
    context.parameter("modes", &args.modes);
    context.parameter("batch", args.batch);
    context.parameter("queries", args.queries);
    context.parameter("write_concern", args.write_concern.label());
    let mut modes = args.modes.clone();
    modes.dedup();
    for mode in modes {
        for indexed in index_choices(&args.indexes) {
            let (batch, how) = match mode {
                InsertMode::Single => (1, "one per call".to_owned()),
                InsertMode::Batch => (args.batch, format!("batches of {}", args.batch)),
            };
            let name = format!("{how}, {}", if indexed { "index on number" } else { "no index" });
            let collection = context.fresh_database().await?.collection::<RawDocumentBuf>("users");
            if indexed {
                collection.create_index(IndexModel::builder().keys(doc! { "number": 1 }).build()).await?;
            }
            context.progress.phase(&name, docs);
            let recorder = shared_recorder(docs, context.interval_for(docs));
            let mut inserter = Inserter::new(
                collection.clone(),
                args.write_concern,
                batch,
                docs,
                recorder.clone(),
                context.progress.clone(),
            );
            let inserted = inserter.run_to_end(&mut |i| user(shape, i)).await;
            drop(inserter);
            context.finish_series(&name, indexed, args.write_concern, recorder, &collection, inserted).await?;
            queries(context, &collection, &name, shape, args.queries).await?;
        }
    }
    Ok(())
}

/// Document `i` of the post's loops: `for j in rounds { for i in numbers { for pet in PETS }}}`.
fn user(shape: Shape, i: u64) -> RawDocumentBuf {
    let pets = PETS.len() as u64;
    rawdoc! {
        "number": ((i / pets) % shape.numbers) as i32,
        "pet": PETS[(i % pets) as usize],
        "name": "Jason Mooberry",
        "email": "jason@barkingsnake.com",
    }
}

/// Equality and range queries on `number`; mean milliseconds of each kind, counts checked.
async fn queries(
    context: &mut Context,
    collection: &Collection<RawDocumentBuf>,
    series: &str,
    shape: Shape,
    count: u64,
) -> anyhow::Result<()> {
    if count == 0 {
        return Ok(());
    }
    let mut rng = StdRng::seed_from_u64(context.common.seed);
    let per_number = shape.rounds * PETS.len() as u64;
    let width = RANGE_WIDTH.min(shape.numbers);
    context.progress.phase(&format!("{series}: queries"), count * 2);
    for kind in ["equality", "range"] {
        let started = Instant::now();
        for _ in 0..count {
            let (filter, expected) = if kind == "equality" {
                let number = rng.gen_range(0..shape.numbers) as i32;
                (doc! { "number": number }, per_number)
            } else {
                let low = rng.gen_range(0..=shape.numbers - width) as i32;
                (doc! { "number": { "$gte": low, "$lt": low + width as i32 } }, per_number * width)
            };
            let found = match count_found(collection, filter.clone()).await {
                Ok(found) => found,
                Err(error) => {
                    context.server_error(&format!("{series}: {kind} query {filter}"), &error);
                    return Ok(());
                }
            };
            if found != expected {
                bail!("{series}: {kind} query {filter} found {found} documents, expected {expected}");
            }
            context.progress.advance(1);
        }
        let mean_millis = started.elapsed().as_secs_f64() * 1e3 / count as f64;
        context.measure(series, &format!("{kind} query on number, mean"), mean_millis, "ms");
    }
    Ok(())
}
