//! Seed post 003 ("10x Insertion Performance Increase for MongoDB with Fractal Tree Indexes")
//! and the benchmark behind it, Tokutek's iibench. One writer inserts 1,000 documents per call
//! into an empty database; the insert rate every 100,000 documents, the cumulative rate and the
//! exit velocity (the rate over the last 10%), with w:1 (the post's "journaling disabled") and
//! with j:true ("journaling enabled"), with the secondary indexes and without them.
//!
//! Variants: `tokutek` is iibench's purchases {dateandtime, cashregisterid, customerid,
//! productid, price} with its three compound indexes {price, customerid}, {cashregisterid,
//! price, customerid}, {price, dateandtime, customerid}; `post` is the post's own documents {uri,
//! name, origin, creation, expiration} with four single-field indexes (uri, name, origin,
//! creation). With --query-thread, iibench's query thread runs beside the writer on the tokutek
//! variant (`query_thread.rs`). Against a replica set, each series also reports how far the
//! secondaries fell behind the primary (`lag.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bson::{Document, RawDocumentBuf, doc, rawdoc};
use mongodb::IndexModel;
use rand::distributions::Alphanumeric;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::index_choices;
use super::lag::LagWatch;
use super::query_thread::{self, QueryThread};
use crate::args::{IibenchArgs, IibenchVariant, WriteMode};
use crate::context::Context;
use crate::inserter::{Inserter, shared_recorder};

/// iibench's value ranges.
pub const CASH_REGISTERS: i32 = 1_000;
pub const PRODUCTS: i32 = 10_000;
pub const CUSTOMERS: i32 = 100_000;
pub const MAX_PRICE: f64 = 500.0;

pub async fn run(context: &mut Context, args: &IibenchArgs) -> anyhow::Result<()> {
    let docs = context.common.scaled(args.docs);
    let query_begin = context.common.scaled(args.query_begin);
    context.parameter("docs", docs);
    context.parameter("batch", args.batch);
    context.parameter("variants", &args.variants);
    context.parameter("write_concerns", args.write_concerns.iter().map(|w| w.label()).collect::<Vec<_>>());
    context.parameter("query_thread", args.query_thread);
    if args.query_thread {
        context.parameter("query_limit", args.query_limit);
        context.parameter("query_begin", query_begin);
    }
    let mut variants = args.variants.clone();
    variants.dedup();
    if args.query_thread && !variants.contains(&IibenchVariant::Tokutek) {
        context.progress.println(
            "--query-thread: iibench's queries run on the tokutek variant only (the post had none); no queries",
        );
    }
    for variant in variants {
        for &write in &args.write_concerns {
            for indexed in index_choices(&args.indexes) {
                let queries = (args.query_thread && variant == IibenchVariant::Tokutek)
                    .then_some((query_begin, args.query_limit));
                series(context, variant, write, indexed, docs, args.batch, queries).await?;
            }
        }
    }
    Ok(())
}

async fn series(
    context: &mut Context,
    variant: IibenchVariant,
    write: WriteMode,
    indexed: bool,
    docs: u64,
    batch: u64,
    queries: Option<(u64, i64)>,
) -> anyhow::Result<()> {
    let indexes = secondary_indexes(variant);
    let (variant_name, collection_name) = match variant {
        IibenchVariant::Tokutek => ("iibench", "purchases_index"),
        IibenchVariant::Post => ("post", "documents"),
    };
    let index_label = if indexed { format!("{} indexes", indexes.len()) } else { "no index".to_owned() };
    let name = format!("{variant_name}, {}, {index_label}", write.label());
    let collection = context.fresh_database().await?.collection::<RawDocumentBuf>(collection_name);
    if indexed {
        collection.create_indexes(indexes.into_iter().map(|keys| IndexModel::builder().keys(keys).build())).await?;
    }
    context.progress.phase(&name, docs);
    let recorder = shared_recorder(docs, context.interval_for(docs));
    let mut inserter =
        Inserter::new(collection.clone(), write, batch, docs, recorder.clone(), context.progress.clone());
    let inserted = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let query_task = queries.map(|(begin, limit)| {
        let thread = QueryThread {
            collection: collection.clone(),
            inserted: inserted.clone(),
            done: done.clone(),
            begin,
            limit,
            seed: context.common.seed,
        };
        tokio::spawn(query_thread::run(thread))
    });
    let lag = LagWatch::start(&context.client).await;
    // Against a replica set: each member's CPU per document, the secondaries' catch-up included.
    let cpu = match lag {
        Some(_) => Some(super::process::CpuWatch::find(&context.client).await),
        None => None,
    };
    let cpu_before = cpu.as_ref().map(|watch| watch.sample()).unwrap_or_default();
    let mut rng = StdRng::seed_from_u64(context.common.seed);
    let mut make = |_: u64| match variant {
        IibenchVariant::Tokutek => purchase(&mut rng),
        IibenchVariant::Post => post_document(&mut rng),
    };
    let outcome = async {
        while !inserter.is_done() {
            inserter.insert_next(&mut make).await?;
            inserted.store(recorder_docs(&recorder), Ordering::Relaxed);
        }
        anyhow::Ok(())
    }
    .await;
    done.store(true, Ordering::Relaxed);
    let lag = match lag {
        Some(watch) => Some(watch.finish().await),
        None => None,
    };
    let stats = match query_task {
        Some(task) => Some(task.await?),
        None => None,
    };
    drop(inserter);
    context.finish_series(&name, indexed, write, recorder, &collection, outcome).await?;
    if let Some(lag) = lag {
        lag.record(context, &name);
    }
    if let Some(watch) = cpu {
        let per_doc = watch.per_operation(&cpu_before, &watch.sample(), docs);
        let line: Vec<String> = per_doc.iter().map(|(role, micros)| format!("{role} {micros:.1} us")).collect();
        context.progress.println(&format!("{name}: CPU per document: {}", line.join(", ")));
        for (role, micros) in &per_doc {
            context.measure(&name, &format!("CPU per document, {role}"), *micros, "us");
        }
    }
    if let (Some(stats), Some((_, limit))) = (stats, queries) {
        stats.record(context, &name);
        let thread =
            QueryThread { collection: collection.clone(), inserted, done, begin: 0, limit, seed: context.common.seed };
        query_thread::explain_queries(context, &thread, &name).await;
    }
    Ok(())
}

fn recorder_docs(recorder: &crate::inserter::SharedRecorder) -> u64 {
    recorder.lock().map(|recorder| recorder.docs()).unwrap_or(0)
}

fn secondary_indexes(variant: IibenchVariant) -> Vec<Document> {
    match variant {
        IibenchVariant::Tokutek => vec![
            doc! { "price": 1, "customerid": 1 },
            doc! { "cashregisterid": 1, "price": 1, "customerid": 1 },
            doc! { "price": 1, "dateandtime": 1, "customerid": 1 },
        ],
        IibenchVariant::Post => {
            vec![doc! { "uri": 1 }, doc! { "name": 1 }, doc! { "origin": 1 }, doc! { "creation": 1 }]
        }
    }
}

/// iibench's price: ((random * max price) + customer id) / 100.
pub fn price(rng: &mut StdRng, customer: i32) -> f64 {
    (rng.r#gen::<f64>() * MAX_PRICE + f64::from(customer)) / 100.0
}

fn purchase(rng: &mut StdRng) -> RawDocumentBuf {
    let customer = rng.gen_range(0..CUSTOMERS);
    rawdoc! {
        "dateandtime": chrono::Utc::now().timestamp_millis(),
        "cashregisterid": rng.gen_range(0..CASH_REGISTERS),
        "customerid": customer,
        "productid": rng.gen_range(0..PRODUCTS),
        "price": price(rng, customer),
    }
}

fn random_text(rng: &mut StdRng, length: usize) -> String {
    (0..length).map(|_| char::from(rng.sample(Alphanumeric))).collect()
}

fn post_document(rng: &mut StdRng) -> RawDocumentBuf {
    let now = chrono::Utc::now().timestamp_millis();
    let uri = format!("http://{}.example.com/{}", random_text(rng, 8), random_text(rng, 24));
    let name = random_text(rng, 16);
    let origin = random_text(rng, 12);
    let expiration = now + rng.gen_range(1..=365_i64) * 86_400_000;
    rawdoc! {
        "uri": uri,
        "name": name,
        "origin": origin,
        "creation": bson::DateTime::from_millis(now),
        "expiration": bson::DateTime::from_millis(expiration),
    }
}
