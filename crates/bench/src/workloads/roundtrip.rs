//! `strata bench roundtrip`: what one command costs when a client sends one per call (seed posts
//! 000, 002 and 004 insert that way). From one connection, `--calls` each of `ping`,
//! `insert_one` of a ~100-byte document into a collection with one secondary index, and
//! `find_one` by that indexed field; for each: calls/s, the server's CPU per call and the
//! client's (this process, driver included), both read from /proc. A loopback round trip costs
//! the client far more than the server, so calls/s mostly measures the client: the server's CPU
//! per call is the figure that says what the front door costs.
//!
//! `--beside-writer` then times point reads, on a client of their own with one connection, while
//! another connection inserts batches at full speed. The server's CPU per read is read twice: on
//! the thread serving the reads (found while they run alone, and kept by their connection while
//! its client keeps sending), and as the process's CPU less what the writer alone cost per
//! document (which assumes the writer costs beside the reads what it costs alone).
//!
//! With `--baseline <strata binary>`, that binary is started too and measured in the same run,
//! alternating which server goes first in each round; the medians over rounds are printed with
//! the ratio (server under test / baseline), so a change is measured against the build before it
//! on the same machine at the same time.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context as _, bail};
use bson::{Document, doc};
use mongodb::Client;

use super::process::{cpu_seconds, local_server_pid, thread_cpu_nanos};
use crate::args::RoundtripArgs;
use crate::context::Context;
use crate::target::Target;

const OPERATIONS: [&str; 3] = ["ping", "insert_one", "find_one"];

/// One server being measured.
struct Server {
    label: &'static str,
    client: Client,
    uri: String,
    pid: Option<u32>,
}

/// One operation's figures on one server in one round.
#[derive(Clone, Copy, Default)]
struct Figures {
    calls_per_second: f64,
    server_micros: Option<f64>,
    client_micros: f64,
}

pub async fn run(context: &mut Context, args: &RoundtripArgs) -> anyhow::Result<()> {
    let calls = context.common.scaled(args.calls);
    context.parameter("calls", calls);
    context.parameter("rounds", args.rounds);
    let mut servers = vec![Server::new("strata", context.client.clone(), context.uri.clone()).await?];
    let mut baseline = None;
    if let Some(binary) = &args.baseline {
        context.parameter("baseline", binary.display().to_string());
        let (target, server) = start_baseline(context, binary).await?;
        baseline = Some(target);
        servers.push(server);
    }
    let mut figures: Vec<Vec<[Figures; 3]>> = vec![Vec::new(); servers.len()];
    for round in 0..args.rounds.max(1) {
        for offset in 0..servers.len() {
            let index = (offset + round as usize) % servers.len();
            let measured = measure(context, &servers[index], calls).await?;
            figures[index].push(measured);
        }
    }
    let medians: Vec<[Figures; 3]> = figures.iter().map(|rounds| median_figures(rounds)).collect();
    report(context, &servers, &medians);
    if args.beside_writer {
        for server in &servers {
            reads_beside_writer(context, server, calls).await?;
        }
    }
    if let Some(target) = baseline {
        target.stop().await?;
    }
    Ok(())
}

impl Server {
    async fn new(label: &'static str, client: Client, uri: String) -> anyhow::Result<Server> {
        // The server's CPU can be read only when it runs on this machine.
        let pid = local_server_pid(&client).await.context("serverStatus")?;
        Ok(Server { label, client, uri, pid })
    }
}

async fn start_baseline(context: &Context, binary: &Path) -> anyhow::Result<(Target, Server)> {
    if context.common.uri.is_some() {
        bail!("--baseline starts a second server: it cannot be combined with --uri");
    }
    let mut common = context.common.clone();
    common.strata = Some(binary.to_path_buf());
    let target = Target::start(&common).await.with_context(|| format!("starting the baseline {}", binary.display()))?;
    let client = Client::with_uri_str(target.uri()).await?;
    let server = Server::new("baseline", client, target.uri().to_owned()).await?;
    Ok((target, server))
}

/// One round on one server: a fresh collection with an index on `k`, then each operation.
async fn measure(context: &Context, server: &Server, calls: u64) -> anyhow::Result<[Figures; 3]> {
    let database = server.client.database(&context.common.db);
    database.drop().await?;
    let collection = database.collection::<Document>("roundtrip");
    collection.create_index(mongodb::IndexModel::builder().keys(doc! { "k": 1 }).build()).await?;
    let admin = server.client.database("admin");
    let pad = "x".repeat(60);
    let mut figures = [Figures::default(); 3];
    for (slot, operation) in OPERATIONS.iter().enumerate() {
        let before = (server.pid.and_then(cpu_seconds), cpu_seconds(std::process::id()), Instant::now());
        for i in 0..calls as i64 {
            match *operation {
                "ping" => drop(admin.run_command(doc! { "ping": 1 }).await?),
                "insert_one" => drop(collection.insert_one(doc! { "_id": i, "k": i, "pad": &pad }).await?),
                _ => {
                    if collection.find_one(doc! { "k": i }).await?.is_none() {
                        bail!("find_one found no document with k = {i}");
                    }
                }
            }
        }
        let seconds = before.2.elapsed().as_secs_f64();
        let per_call = |start: Option<f64>, end: Option<f64>| Some((end? - start?) * 1e6 / calls as f64);
        figures[slot] = Figures {
            calls_per_second: calls as f64 / seconds,
            server_micros: per_call(before.0, server.pid.and_then(cpu_seconds)),
            client_micros: per_call(before.1, cpu_seconds(std::process::id())).unwrap_or(f64::NAN),
        };
        context.progress.println(&format!(
            "  {:8} {operation:10} {:8.0} calls/s, server {} us/call",
            server.label,
            figures[slot].calls_per_second,
            figures[slot].server_micros.map_or("?".into(), |us| format!("{us:.1}"))
        ));
    }
    Ok(figures)
}

fn median_figures(rounds: &[[Figures; 3]]) -> [Figures; 3] {
    let median = |values: Vec<f64>| -> f64 {
        let mut values = values;
        values.sort_by(f64::total_cmp);
        values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
    };
    std::array::from_fn(|slot| Figures {
        calls_per_second: median(rounds.iter().map(|r| r[slot].calls_per_second).collect()),
        server_micros: rounds.iter().map(|r| r[slot].server_micros).collect::<Option<Vec<f64>>>().map(median),
        client_micros: median(rounds.iter().map(|r| r[slot].client_micros).collect()),
    })
}

fn report(context: &mut Context, servers: &[Server], medians: &[[Figures; 3]]) {
    println!("median over rounds; ratio = strata / baseline");
    println!(
        "{:10} {:>9} {:>12} {:>12} {:>12} {:>12}",
        "call", "server", "calls/s", "server us", "client us", "server ratio"
    );
    for (slot, operation) in OPERATIONS.iter().enumerate() {
        for (server, figures) in servers.iter().zip(medians) {
            let figures = figures[slot];
            let ratio = match (figures.server_micros, medians.get(1).and_then(|b| b[slot].server_micros)) {
                (Some(ours), Some(theirs)) if server.label == "strata" && theirs > 0.0 => {
                    format!("{:.2}", ours / theirs)
                }
                _ => String::new(),
            };
            let server_us = figures.server_micros.map_or("?".to_owned(), |us| format!("{us:.1}"));
            println!(
                "{operation:10} {:>9} {:>12.0} {server_us:>12} {:>12.1} {ratio:>12}",
                server.label, figures.calls_per_second, figures.client_micros
            );
            context.measure(server.label, &format!("{operation} calls/s"), figures.calls_per_second, "calls/s");
            if let Some(us) = figures.server_micros {
                context.measure(server.label, &format!("{operation} server cpu"), us, "us/call");
            }
            context.measure(server.label, &format!("{operation} client cpu"), figures.client_micros, "us/call");
        }
    }
}

/// Point reads, from a client of their own, while a second connection inserts batches at full
/// speed. The server's CPU per read is read on the server thread serving the reads, and also
/// estimated from the whole process: the writer's CPU per document is measured alone first, and
/// what the writer inserted during the reads is charged at that rate and subtracted (which
/// assumes a document costs the writer as much beside the reads as alone).
async fn reads_beside_writer(context: &mut Context, server: &Server, calls: u64) -> anyhow::Result<()> {
    let database = server.client.database(&context.common.db);
    database.drop().await?;
    // The reads on a client of their own with one connection, so that one server thread serves
    // them all (see `reader_thread`).
    let mut options = mongodb::options::ClientOptions::parse(&server.uri).await?;
    options.max_pool_size = Some(1);
    let reads = Client::with_options(options)?.database(&context.common.db).collection::<Document>("roundtrip");
    reads.create_index(mongodb::IndexModel::builder().keys(doc! { "k": 1 }).build()).await?;
    let pad = "x".repeat(60);
    for start in (0..calls as i64).step_by(1_000) {
        let batch: Vec<Document> =
            (start..(start + 1_000).min(calls as i64)).map(|i| doc! { "_id": i, "k": i, "pad": &pad }).collect();
        reads.insert_many(batch).await?;
    }
    let written = database.collection::<Document>("written");
    written.create_index(mongodb::IndexModel::builder().keys(doc! { "k": 1 }).build()).await?;
    let alone = Writer::start(written.clone());
    let started = (server.pid.and_then(cpu_seconds), Instant::now());
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let (alone_docs, alone_seconds) = (alone.stop().await?, started.1.elapsed().as_secs_f64());
    let alone_cpu = server.pid.and_then(cpu_seconds).zip(started.0).map(|(end, start)| end - start);
    let reader_thread = reader_thread(server, &reads).await?;
    // Started with no pause in the reads, so that their connection stays on its thread.
    let writer = Writer::start(written);
    let reader_before =
        reader_thread.map(|(pid, tid, _)| (pid, tid, thread_cpu_nanos(pid, SERVING_THREADS).get(&tid).copied()));
    let reader_alone = reader_thread.map(|(.., nanos)| nanos as f64 / 1e3);
    let before = (server.pid.and_then(cpu_seconds), Instant::now());
    let mut latencies = Vec::with_capacity(calls as usize);
    for i in 0..calls as i64 {
        let call = Instant::now();
        if reads.find_one(doc! { "k": i }).await?.is_none() {
            bail!("find_one found no document with k = {i}");
        }
        latencies.push(call.elapsed().as_micros() as u64);
    }
    let seconds = before.1.elapsed().as_secs_f64();
    let beside_docs = writer.stop().await?;
    let cpu = server.pid.and_then(cpu_seconds).zip(before.0).map(|(end, start)| end - start);
    latencies.sort_unstable();
    let percentile = |fraction: f64| super::percentile(&latencies, fraction);
    let reader_per_read = reader_before.and_then(|(pid, tid, before)| {
        let used = thread_cpu_nanos(pid, SERVING_THREADS).get(&tid)?.checked_sub(before?)?;
        // Far less than a read can cost: the connection moved to another thread meanwhile.
        (used >= calls * MIN_READ_NANOS).then(|| used as f64 / 1e3 / calls as f64)
    });
    let per_read = match (cpu, alone_cpu) {
        (Some(cpu), Some(alone_cpu)) if alone_docs > 0 => {
            Some((cpu - alone_cpu / alone_docs as f64 * beside_docs as f64).max(0.0) * 1e6 / calls as f64)
        }
        _ => None,
    };
    let label = server.label;
    println!(
        "{label}: point reads beside a batch writer: p50 {:.0} us, p99 {:.0} us, server {} us/read on the reads' thread ({} alone; {} by the process's CPU less the writer's) (writer {:.0} docs/s alone, {:.0} beside the reads)",
        percentile(0.5),
        percentile(0.99),
        reader_per_read.map_or("?".into(), |us| format!("{us:.1}")),
        reader_alone.map_or("?".into(), |us| format!("{us:.1}")),
        per_read.map_or("?".into(), |us| format!("{us:.1}")),
        alone_docs as f64 / alone_seconds,
        beside_docs as f64 / seconds
    );
    context.measure(label, "find_one beside writer p50", percentile(0.5), "us");
    context.measure(label, "find_one beside writer p99", percentile(0.99), "us");
    if let Some(us) = per_read {
        context.measure(label, "find_one beside writer server cpu", us, "us/call");
    }
    if let Some(us) = reader_per_read {
        context.measure(label, "find_one beside writer reads thread cpu", us, "us/call");
    }
    if let Some(us) = reader_alone {
        context.measure(label, "find_one alone reads thread cpu", us, "us/call");
    }
    context.measure(label, "writer alone", alone_docs as f64 / alone_seconds, "docs/s");
    context.measure(label, "writer beside reads", beside_docs as f64 / seconds, "docs/s");
    Ok(())
}

/// A task inserting batches of 1,000 documents until stopped; `stop` returns how many it wrote.
/// The server's threads that serve connections (its runtime's, named so by `strata serve`).
const SERVING_THREADS: &str = "strata-io";

/// Point reads run alone to find the thread serving them (and what they cost it alone).
const READS_ALONE: u64 = 2_000;

/// Less CPU per read than this on the thread found serving the reads means it no longer was.
const MIN_READ_NANOS: u64 = 2_000;

/// The server thread serving `reads`' connection: the one of `SERVING_THREADS` that ran most
/// while `READS_ALONE` point reads ran alone (a connection is served by one thread while its
/// client keeps sending), with its CPU nanoseconds per read then. `None` if the server's
/// threads cannot be read here.
async fn reader_thread(
    server: &Server,
    reads: &mongodb::Collection<Document>,
) -> anyhow::Result<Option<(u32, u32, u64)>> {
    let Some(pid) = server.pid else { return Ok(None) };
    let before = thread_cpu_nanos(pid, SERVING_THREADS);
    for i in 0..READS_ALONE {
        reads.find_one(doc! { "k": i as i64 }).await?;
    }
    let after = thread_cpu_nanos(pid, SERVING_THREADS);
    let used = |tid: &u32, nanos: &u64| nanos.saturating_sub(before.get(tid).copied().unwrap_or(*nanos));
    let busiest = after.iter().max_by_key(|(tid, nanos)| used(tid, nanos));
    Ok(busiest.map(|(tid, nanos)| (pid, *tid, used(tid, nanos) / READS_ALONE)))
}

struct Writer {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<mongodb::error::Result<u64>>,
}

impl Writer {
    fn start(collection: mongodb::Collection<Document>) -> Writer {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&stop);
        let task = tokio::spawn(async move {
            let mut written = 0u64;
            let pad = "y".repeat(60);
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                let batch: Vec<Document> =
                    (0..1_000).map(|i| doc! { "k": (written + i) as i64, "pad": &pad }).collect();
                collection.insert_many(batch).await?;
                written += 1_000;
            }
            Ok(written)
        });
        Writer { stop, task }
    }

    async fn stop(self) -> anyhow::Result<u64> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        Ok(self.task.await.context("the writer task failed")??)
    }
}
