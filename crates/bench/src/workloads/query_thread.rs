//! iibench's query thread: once `begin` documents are in, it runs iibench's three queries in
//! turn, back to back, until the writer is done. Each is an `$or` over one compound index's
//! prefix with a projection on that index's fields and a limit (iibench: 10):
//!
//! 1. {price, dateandtime, customerid}: price = p and dateandtime = t and customerid >= c, or
//!    price = p and dateandtime > t, or price > p;
//! 2. {price, customerid}: price = p and customerid >= c, or price > p;
//! 3. {cashregisterid, price, customerid}: register = r and price = p and customerid >= c, or
//!    register = r and price > p, or register > r.
//!
//! A query the server refuses is counted; after `MAX_ERRORS` the thread stops and the first
//! error is reported.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bson::{Document, RawDocumentBuf, doc};
use mongodb::Collection;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::iibench::{CASH_REGISTERS, CUSTOMERS, price};
use crate::context::Context;

const MAX_ERRORS: u64 = 10;

pub struct QueryThread {
    pub collection: Collection<RawDocumentBuf>,
    /// Documents the writer has inserted so far.
    pub inserted: Arc<AtomicU64>,
    pub done: Arc<AtomicBool>,
    pub begin: u64,
    pub limit: i64,
    pub seed: u64,
}

#[derive(Default)]
pub struct QueryStats {
    queries: u64,
    returned: u64,
    seconds: f64,
    /// Each query's time, in microseconds.
    latencies: Vec<u64>,
    errors: u64,
    first_error: Option<String>,
}

impl QueryStats {
    pub fn record(&self, context: &mut Context, series: &str) {
        context.measure(series, "queries", self.queries as f64, "queries");
        if self.seconds > 0.0 {
            context.measure(series, "queries per second", self.queries as f64 / self.seconds, "queries/s");
            context.measure(series, "query mean", self.seconds * 1e3 / self.queries.max(1) as f64, "ms");
        }
        let mut latencies = self.latencies.clone();
        latencies.sort_unstable();
        for (name, fraction) in [("query p50", 0.5), ("query p99", 0.99)] {
            if !latencies.is_empty() {
                context.measure(series, name, super::percentile(&latencies, fraction) / 1e3, "ms");
            }
        }
        context.measure(series, "documents returned by queries", self.returned as f64, "docs");
        if let Some(error) = &self.first_error {
            let line = format!("{series}: iibench query failed {} times; first: {error}", self.errors);
            context.progress.println(&format!("server error: {line}"));
            context.results.errors.push(line);
        }
    }
}

pub async fn run(thread: QueryThread) -> QueryStats {
    let mut stats = QueryStats::default();
    let mut rng = StdRng::seed_from_u64(thread.seed ^ 0x5157);
    let started_millis = chrono::Utc::now().timestamp_millis();
    let mut which = 0;
    while !thread.done.load(Ordering::Relaxed) && stats.errors < MAX_ERRORS {
        if thread.inserted.load(Ordering::Relaxed) < thread.begin {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        }
        which = which % 3 + 1;
        let (filter, projection) = query(which, &mut rng, started_millis);
        let started = Instant::now();
        match run_query(&thread, filter, projection).await {
            Ok(returned) => {
                stats.queries += 1;
                stats.returned += returned;
                stats.seconds += started.elapsed().as_secs_f64();
                stats.latencies.push(u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX));
            }
            Err(error) => {
                stats.errors += 1;
                stats.first_error.get_or_insert_with(|| error.to_string());
            }
        }
    }
    stats
}

/// After the run: each of the three queries explained with `executionStats` (the plan the
/// server chose, keys and documents examined, its time), into the results' parameters as
/// `query plans/<series>`, and one line each on the console.
pub async fn explain_queries(context: &mut Context, thread: &QueryThread, series: &str) {
    let mut rng = StdRng::seed_from_u64(thread.seed ^ 0xe4b1);
    let started_millis = chrono::Utc::now().timestamp_millis() - 60_000;
    let mut plans = Vec::new();
    for which in 1..=3 {
        let (filter, projection) = query(which, &mut rng, started_millis);
        let find = doc! { "find": thread.collection.name(), "filter": filter, "projection": projection, "limit": thread.limit };
        let command = doc! { "explain": find, "verbosity": "executionStats" };
        let database = thread.collection.client().database(&thread.collection.namespace().db);
        match database.run_command(command).await {
            Ok(explain) => {
                let stats = explain.get_document("executionStats").cloned().unwrap_or_default();
                let plan = explain
                    .get_document("queryPlanner")
                    .and_then(|p| p.get_document("winningPlan"))
                    .cloned()
                    .unwrap_or_default();
                let number = |key: &str| stats.get(key).map(|v| v.to_string()).unwrap_or_default();
                context.progress.println(&format!(
                    "query {which}: {} keys and {} documents examined, {} returned, {} ms; plan {}",
                    number("totalKeysExamined"),
                    number("totalDocsExamined"),
                    number("nReturned"),
                    number("executionTimeMillis"),
                    stage_names(&plan)
                ));
                plans.push(serde_json::json!({ "query": which, "winningPlan": plan, "executionStats": stats }));
            }
            Err(error) => context.server_error(&format!("explaining iibench query {which}"), &error),
        }
    }
    context.parameter(&format!("query plans/{series}"), plans);
}

/// A plan's stages from the top, e.g. "PROJECTION_COVERED > OR > IXSCAN, IXSCAN".
fn stage_names(plan: &Document) -> String {
    let stage = plan.get_str("stage").unwrap_or("?").to_owned();
    if let Ok(input) = plan.get_document("inputStage") {
        return format!("{stage} > {}", stage_names(input));
    }
    if let Ok(inputs) = plan.get_array("inputStages") {
        let names: Vec<String> = inputs.iter().filter_map(|i| i.as_document()).map(stage_names).collect();
        return format!("{stage} > [{}]", names.join(", "));
    }
    stage
}

async fn run_query(thread: &QueryThread, filter: Document, projection: Document) -> mongodb::error::Result<u64> {
    let mut cursor = thread.collection.find(filter).projection(projection).limit(thread.limit).await?;
    let mut returned = 0;
    while cursor.advance().await? {
        returned += 1;
    }
    Ok(returned)
}

/// Query `which` (1..=3) with iibench's random parameters: a customer, a price near it, a
/// register, a time between the start and now.
fn query(which: u32, rng: &mut StdRng, started_millis: i64) -> (Document, Document) {
    let customer = rng.gen_range(0..CUSTOMERS);
    let price = price(rng, customer);
    let register = rng.gen_range(0..CASH_REGISTERS);
    let now = chrono::Utc::now().timestamp_millis();
    let time = started_millis + ((now - started_millis) as f64 * rng.r#gen::<f64>()) as i64;
    match which {
        1 => (
            doc! { "$or": [
                { "price": price, "dateandtime": time, "customerid": { "$gte": customer } },
                { "price": price, "dateandtime": { "$gt": time } },
                { "price": { "$gt": price } },
            ] },
            doc! { "price": 1, "dateandtime": 1, "customerid": 1, "_id": 0 },
        ),
        2 => (
            doc! { "$or": [
                { "price": price, "customerid": { "$gte": customer } },
                { "price": { "$gt": price } },
            ] },
            doc! { "price": 1, "customerid": 1, "_id": 0 },
        ),
        _ => (
            doc! { "$or": [
                { "cashregisterid": register, "price": price, "customerid": { "$gte": customer } },
                { "cashregisterid": register, "price": { "$gt": price } },
                { "cashregisterid": { "$gt": register } },
            ] },
            doc! { "cashregisterid": 1, "price": 1, "customerid": 1, "_id": 0 },
        ),
    }
}
