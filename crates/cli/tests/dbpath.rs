//! The data directory through the real binary: one server at a time (the directory's lock), a
//! `kill -9` leaves no stale lock, and a crash loop's restarts stay as fast as the first.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Strata, temp_dir};
use mongodb::bson::{Document, doc};
use mongodb::options::WriteConcern;
use mongodb::{Client, Collection};

async fn collection(server: &Strata) -> Collection<Document> {
    Client::with_uri_str(server.uri()).await.unwrap().database("d").collection("c")
}

/// Inserts documents `range` one per call with `j: true`.
async fn insert_journaled(collection: &Collection<Document>, range: std::ops::Range<i64>) {
    let journaled = WriteConcern::builder().journal(true).build();
    for i in range {
        collection
            .insert_one(doc! { "_id": i, "pad": "x".repeat(100) })
            .write_concern(journaled.clone())
            .await
            .unwrap();
    }
}

/// Goal: a second server on a directory in use exits at once, non-zero, naming the directory
/// and the PID holding it; the first keeps serving and loses nothing.
#[tokio::test]
async fn a_second_server_on_the_same_directory_is_refused() {
    let dir = temp_dir("locked");
    let first = Strata::start(&dir);
    let c = collection(&first).await;
    insert_journaled(&c, 0..200).await;

    let started = Instant::now();
    let second = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["serve", "--dbpath"])
        .arg(&dir)
        .args(["--port", "0"])
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    assert!(!second.status.success(), "the second server exited 0");
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(stderr.contains(&dir.display().to_string()), "the message does not name the directory: {stderr}");
    assert!(
        stderr.contains(&format!("PID {}", first.child.id())),
        "the message does not name the holder's PID: {stderr}"
    );
    assert!(
        second.stdout.is_empty(),
        "the second server said it was listening: {:?}",
        String::from_utf8_lossy(&second.stdout)
    );
    assert!(started.elapsed() < Duration::from_secs(5), "the refusal took {:?}", started.elapsed());

    insert_journaled(&c, 200..400).await;
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 400);
    assert!(first.terminate().success());
    let again = Strata::start(&dir);
    assert_eq!(collection(&again).await.count_documents(doc! {}).await.unwrap(), 400);
    drop(again);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Goal: a server killed with SIGKILL leaves no lock behind: a new one starts at once on the
/// same directory with every acknowledged write.
#[tokio::test]
async fn a_killed_server_restarts_at_once() {
    let dir = temp_dir("killed");
    let server = Strata::start(&dir);
    insert_journaled(&collection(&server).await, 0..100).await;
    drop(server); // SIGKILL
    let started = Instant::now();
    let server = Strata::start(&dir);
    println!("restarted after kill -9 in {:?}", started.elapsed());
    assert_eq!(collection(&server).await.count_documents(doc! {}).await.unwrap(), 100);
    drop(server);
    std::fs::remove_dir_all(&dir).unwrap();
}

fn log_bytes(dbpath: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dbpath.join("log")) else { return 0 };
    entries.map(|entry| entry.unwrap().metadata().unwrap().len()).sum()
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

/// Goal: a server killed again and again (a crash loop) restarts as fast after many cycles as
/// after the first, its log stays small, and no acknowledged write is lost. Each cycle starts
/// the server, checks every write acknowledged so far is there, inserts with `j: true`, and
/// kills it with SIGKILL; every fifth cycle kills it as soon as it listens, while the checkpoint
/// of what it replayed may be running. `STRATA_CRASH_CYCLES` sets the cycles (default 50),
/// `STRATA_CRASH_WRITES` the inserts per cycle (default 150).
#[tokio::test]
async fn a_crash_loop_restarts_in_flat_time_with_a_small_log() {
    let cycles: usize = std::env::var("STRATA_CRASH_CYCLES").ok().and_then(|n| n.parse().ok()).unwrap_or(50);
    let per_cycle: i64 = std::env::var("STRATA_CRASH_WRITES").ok().and_then(|n| n.parse().ok()).unwrap_or(150);
    let dir = temp_dir("crashloop");
    let (mut ready, mut logs, mut replayed) = (Vec::new(), Vec::new(), Vec::new());
    let mut acked = 0i64;
    println!("cycle  ready_ms  log_bytes_at_start  replayed_records");
    for cycle in 0..cycles {
        let log_at_start = log_bytes(&dir);
        let started = Instant::now();
        let server = Strata::start(&dir);
        let ready_ms = started.elapsed().as_secs_f64() * 1000.0;
        let client = Client::with_uri_str(server.uri()).await.unwrap();
        let c = client.database("d").collection::<Document>("c");
        let status = client.database("admin").run_command(doc! { "serverStatus": 1 }).await.unwrap();
        let records = status
            .get_document("strata")
            .unwrap()
            .get_document("recovery")
            .unwrap()
            .get_i64("replayedRecords")
            .unwrap();
        assert_eq!(c.count_documents(doc! {}).await.unwrap() as i64, acked, "cycle {cycle}: acknowledged writes lost");
        if cycle % 5 != 4 {
            insert_journaled(&c, acked..acked + per_cycle).await;
            acked += per_cycle;
        }
        drop(server); // SIGKILL
        println!("{cycle:5}  {ready_ms:8.1}  {log_at_start:18}  {records:16}");
        ready.push(ready_ms);
        logs.push(log_at_start as f64);
        replayed.push(records);
    }
    let tenth = (cycles / 5).max(1);
    let (early, late) = (median(&ready[..tenth]), median(&ready[cycles - tenth..]));
    println!("{cycles} cycles: median start {early:.1} ms over the first {tenth}, {late:.1} ms over the last {tenth}");
    assert!(late <= early * 3.0 + 100.0, "restarts slowed from {early:.1} ms to {late:.1} ms");
    let worst_late_log = logs[cycles - tenth..].iter().copied().fold(0.0, f64::max);
    assert!(worst_late_log <= (4 << 20) as f64, "the log reached {worst_late_log} bytes at a start");
    // One cycle's inserts (and the collection's creation), and the unreplayed previous cycle's
    // when the last one was killed before its checkpoint.
    let bound = 2 * per_cycle + 20;
    assert!(replayed.iter().all(|&r| r <= bound), "a start replayed more than two cycles' work: {replayed:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
