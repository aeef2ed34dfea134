//! `strata bench clients`: N connections, each inserting one document per call as fast as the
//! server answers, for `--seconds` per level, into a collection with one secondary index; w:1
//! and j:true. Per level: the total rate, p50/p99 latency of a call, and (j:true) the log syncs
//! and commits per sync the server reports, which show whether concurrent commits share syncs
//! (group commit), and the CPU each server process (each member of a replica set) and the
//! bench itself spent per insert, from /proc. The plot is the total rate against connections, one line per write concern.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use bson::{Document, doc};
use mongodb::Client;
use mongodb::options::ClientOptions;

use crate::args::{ClientsArgs, WriteMode};
use crate::context::Context;
use crate::recorder::{Interval, Rates};
use crate::results::Series;

/// What one level gave.
struct Level {
    connections: u64,
    inserts: u64,
    seconds: f64,
    p50_micros: f64,
    p99_micros: f64,
}

pub async fn run(context: &mut Context, args: &ClientsArgs) -> anyhow::Result<()> {
    if args.connections.is_empty() {
        bail!("--connections needs at least one level");
    }
    context.parameter("connections", &args.connections);
    context.parameter("seconds", args.seconds);
    if args.idle > 0 {
        measure_idle(context, args.idle).await?;
    }
    for &write in &args.write_concerns {
        let mut levels = Vec::new();
        for &connections in &args.connections {
            let before = log_counts(context).await;
            let watch = super::process::CpuWatch::find(&context.client).await;
            let cpu_before = watch.sample();
            let level = run_level(context, args, write, connections).await?;
            let cpu = watch.per_operation(&cpu_before, &watch.sample(), level.inserts);
            let syncs = match (before, log_counts(context).await) {
                (Some((syncs_before, commits_before)), Some((syncs, commits))) => {
                    let synced = syncs - syncs_before;
                    Some((synced, if synced > 0 { (commits - commits_before) as f64 / synced as f64 } else { 0.0 }))
                }
                _ => None,
            };
            context.progress.println(&format!(
                "{:6} {connections:4} connections: {:8.0} inserts/s, p50 {:7.0} us, p99 {:7.0} us{}",
                write.label(),
                level.inserts as f64 / level.seconds,
                level.p50_micros,
                level.p99_micros,
                syncs.map_or(String::new(), |(syncs, per_sync)| format!(
                    ", {syncs} log syncs, {per_sync:.1} commits per sync"
                )),
            ));
            let cpu_line: Vec<String> = cpu.iter().map(|(role, micros)| format!("{role} {micros:.0} us")).collect();
            context.progress.println(&format!(
                "{:6} {connections:4} connections: CPU per insert: {}",
                write.label(),
                cpu_line.join(", ")
            ));
            let series = write.label();
            for (role, micros) in &cpu {
                context.measure(series, &format!("{connections} connections, CPU per insert, {role}"), *micros, "us");
            }
            context.measure(
                series,
                &format!("{connections} connections, inserts/s"),
                level.inserts as f64 / level.seconds,
                "docs/s",
            );
            context.measure(series, &format!("{connections} connections, p50"), level.p50_micros, "us");
            context.measure(series, &format!("{connections} connections, p99"), level.p99_micros, "us");
            if let Some((_, per_sync)) = syncs {
                context.measure(
                    series,
                    &format!("{connections} connections, commits per log sync"),
                    per_sync,
                    "commits",
                );
            }
            levels.push(level);
        }
        context.results.series.push(series_of(write, &levels));
    }
    Ok(())
}

/// `--idle N`: what N idle connections cost the server (memory, threads).
async fn measure_idle(context: &mut Context, count: u64) -> anyhow::Result<()> {
    let Some(pid) = super::process::local_server_pid(&context.client).await? else {
        bail!("--idle reads the server's /proc: the server must run on this machine");
    };
    let address = context.uri.trim_start_matches("mongodb://").split(['/', '?']).next().unwrap_or_default().to_owned();
    let before = super::process::figures(pid).context("reading the server's /proc")?;
    let streams = super::idle::open_idle(&address, count).await?;
    let open = super::process::figures(pid).context("reading the server's /proc")?;
    tokio::time::sleep(super::idle::POOL_KEEP_ALIVE).await;
    let settled = super::process::figures(pid).context("reading the server's /proc")?;
    let per_connection = settled.resident_bytes.saturating_sub(before.resident_bytes) as f64 / count as f64;
    context.progress.println(&format!(
        "{count} idle connections: server resident {} -> {} MiB ({per_connection:.0} bytes each once settled), threads {} -> {} -> {} after the pool's keep-alive",
        before.resident_bytes >> 20,
        settled.resident_bytes >> 20,
        before.threads,
        open.threads,
        settled.threads
    ));
    context.measure(
        "idle",
        &format!("{count} idle connections, resident bytes per connection"),
        per_connection,
        "bytes",
    );
    context.measure("idle", &format!("{count} idle connections, server threads"), settled.threads as f64, "threads");
    context.measure("idle", "server threads before", before.threads as f64, "threads");
    drop(streams);
    Ok(())
}

/// One level: a fresh collection, `connections` tasks on their own pooled connections.
async fn run_level(context: &Context, args: &ClientsArgs, write: WriteMode, connections: u64) -> anyhow::Result<Level> {
    let database = context.fresh_database().await?;
    let collection = database.collection::<Document>("clients");
    collection.create_index(mongodb::IndexModel::builder().keys(doc! { "k": 1 }).build()).await?;
    let client = pooled_client(&context.uri, connections).await?;
    let collection = client.database(&context.common.db).collection::<Document>("clients");
    // Every connection opened before the clock starts.
    let warmups = (0..connections).map(|_| {
        let admin = client.database("admin");
        tokio::spawn(async move { admin.run_command(doc! { "ping": 1 }).await })
    });
    for warmup in futures_join(warmups).await {
        warmup.context("a client task failed")??;
    }
    let duration = Duration::from_secs_f64(args.seconds);
    let started = Instant::now();
    let concern = write.concern();
    let tasks = (0..connections).map(|client_index| {
        let (collection, concern) = (collection.clone(), concern.clone());
        tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut i = 0i64;
            while started.elapsed() < duration {
                let document = doc! { "_id": format!("{client_index}-{i}"), "k": i, "pad": "x".repeat(60) };
                let call = Instant::now();
                collection.insert_one(document).write_concern(concern.clone()).await?;
                latencies.push(call.elapsed().as_micros() as u64);
                i += 1;
            }
            Ok::<Vec<u64>, mongodb::error::Error>(latencies)
        })
    });
    let mut latencies = Vec::new();
    for task in futures_join(tasks).await {
        latencies.extend(task.context("a client task failed")??);
    }
    let seconds = started.elapsed().as_secs_f64();
    latencies.sort_unstable();
    let percentile = |fraction: f64| super::percentile(&latencies, fraction);
    let count = collection.count_documents(doc! {}).await?;
    if count != latencies.len() as u64 {
        bail!("{connections} connections inserted {} documents but the server counts {count}", latencies.len());
    }
    Ok(Level {
        connections,
        inserts: latencies.len() as u64,
        seconds,
        p50_micros: percentile(0.5),
        p99_micros: percentile(0.99),
    })
}

/// A client whose pool holds `connections` connections (the run's client keeps the default).
async fn pooled_client(uri: &str, connections: u64) -> anyhow::Result<Client> {
    let mut options = ClientOptions::parse(uri).await?;
    let size = u32::try_from(connections).unwrap_or(u32::MAX);
    options.max_pool_size = Some(size);
    options.min_pool_size = None;
    options.max_connecting = Some(size.min(64));
    Ok(Client::with_options(options)?)
}

/// Joins tasks in order.
async fn futures_join<T>(
    tasks: impl Iterator<Item = tokio::task::JoinHandle<T>>,
) -> Vec<Result<T, tokio::task::JoinError>> {
    let mut results = Vec::new();
    for task in tasks.collect::<Vec<_>>() {
        results.push(task.await);
    }
    results
}

/// The server's log syncs and commits so far; `None` from a server that does not report them.
async fn log_counts(context: &Context) -> Option<(i64, i64)> {
    let status = context.client.database("admin").run_command(doc! { "serverStatus": 1 }).await.ok()?;
    let strata = status.get_document("strata").ok()?;
    Some((strata.get_i64("logSyncs").ok()?, strata.get_i64("commits").ok()?))
}

/// The plot's line: x = connections (in `docs`), y = total inserts/s.
fn series_of(write: WriteMode, levels: &[Level]) -> Series {
    let intervals = levels
        .iter()
        .enumerate()
        .map(|(index, level)| Interval {
            number: index + 1,
            docs: level.connections,
            elapsed_seconds: level.seconds,
            interval_docs: level.inserts,
            interval_seconds: level.seconds,
            rate: level.inserts as f64 / level.seconds,
            cumulative_rate: level.inserts as f64 / level.seconds,
        })
        .collect::<Vec<_>>();
    let inserts: u64 = levels.iter().map(|l| l.inserts).sum();
    let seconds: f64 = levels.iter().map(|l| l.seconds).sum();
    let rates = Rates {
        docs: inserts,
        seconds,
        rate: inserts as f64 / seconds.max(f64::MIN_POSITIVE),
        first_tenth_rate: intervals.first().map_or(0.0, |i| i.rate),
        exit_velocity: intervals.last().map_or(0.0, |i| i.rate),
        intervals,
    };
    Series::new(format!("one insert per call, {}", write.label()), true, write.label(), rates)
}
