//! `strata stat`: a mongostat-like live view — every interval, one line of what the server did
//! per second since the last (inserts, queries, updates, deletes, getMores, commands, flushes,
//! log syncs) and what it holds now (cache used of budget, open connections), from
//! `serverStatus`. Works against mongod too (Strata's engine columns then stay empty).

use std::time::{Duration, Instant};

use anyhow::Context as _;
use bson::{Document, doc};
use mongodb::Client;

#[derive(clap::Args, Debug, Clone)]
pub struct StatArgs {
    /// The server to watch.
    #[arg(long, default_value = "mongodb://127.0.0.1:27017")]
    pub uri: String,
    /// Seconds between lines.
    #[arg(long, default_value_t = 1.0)]
    pub interval: f64,
    /// Stop after this many lines (default: run until interrupted).
    #[arg(long, short = 'n')]
    pub rows: Option<u64>,
}

const COUNTERS: [(&str, &str); 6] = [
    ("insert", "insert"),
    ("query", "query"),
    ("update", "update"),
    ("delete", "delete"),
    ("getmore", "getmore"),
    ("command", "command"),
];

pub async fn run(args: StatArgs) -> anyhow::Result<()> {
    let client = Client::with_uri_str(&args.uri).await.with_context(|| format!("connecting to {}", args.uri))?;
    let admin = client.database("admin");
    let interval = Duration::from_secs_f64(args.interval.max(0.05));
    let mut previous = (admin.run_command(doc! { "serverStatus": 1 }).await?, Instant::now());
    println!("{}", header());
    let mut rows = 0;
    while args.rows.is_none_or(|limit| rows < limit) {
        tokio::time::sleep(interval).await;
        let now = (admin.run_command(doc! { "serverStatus": 1 }).await?, Instant::now());
        println!("{}", line(&previous.0, &now.0, now.1.duration_since(previous.1).as_secs_f64()));
        previous = now;
        rows += 1;
    }
    Ok(())
}

fn header() -> String {
    format!(
        "{:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>15} {:>6} {:>8}",
        "insert", "query", "update", "delete", "getmore", "command", "flushes", "syncs", "cache MiB", "conn", "time"
    )
}

fn number(document: &Document, path: &[&str]) -> Option<f64> {
    let (last, parents) = path.split_last()?;
    let mut current = document;
    for key in parents {
        current = current.get_document(key).ok()?;
    }
    match current.get(last)? {
        bson::Bson::Int32(n) => Some(f64::from(*n)),
        bson::Bson::Int64(n) => Some(*n as f64),
        bson::Bson::Double(n) => Some(*n),
        _ => None,
    }
}

/// One row: per-second rates between two serverStatus replies, and the current state.
fn line(before: &Document, now: &Document, seconds: f64) -> String {
    let rate = |path: &[&str]| match (number(before, path), number(now, path)) {
        (Some(a), Some(b)) if seconds > 0.0 => format!("{:.0}", ((b - a) / seconds).max(0.0)),
        _ => "-".to_owned(),
    };
    let counters: Vec<String> = COUNTERS.iter().map(|(_, key)| rate(&["opcounters", key])).collect();
    let cache = match (number(now, &["strata", "cache", "usedBytes"]), number(now, &["strata", "cache", "budgetBytes"]))
    {
        (Some(used), Some(budget)) => format!("{:.0}/{:.0}", used / 1048576.0, budget / 1048576.0),
        _ => "-".to_owned(),
    };
    let connections = number(now, &["connections", "current"]).map_or("-".to_owned(), |n| format!("{n:.0}"));
    let time = now.get_datetime("localTime").ok().and_then(|t| t.try_to_rfc3339_string().ok()).unwrap_or_default();
    let clock = time.get(11..19).unwrap_or("-");
    format!(
        "{:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>15} {:>6} {:>8}",
        counters[0],
        counters[1],
        counters[2],
        counters[3],
        counters[4],
        counters[5],
        rate(&["strata", "flushes"]),
        rate(&["strata", "logSyncs"]),
        cache,
        connections,
        clock
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_per_second() {
        let before = doc! { "opcounters": { "insert": 100i64, "query": 5 }, "connections": { "current": 3 } };
        let now = doc! {
            "opcounters": { "insert": 300i64, "query": 5 },
            "connections": { "current": 4 },
            "strata": { "cache": { "usedBytes": 10485760i64, "budgetBytes": 134217728i64 } },
        };
        let row = line(&before, &now, 2.0);
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[0], "100", "{row}");
        assert_eq!(cells[1], "0");
        assert_eq!(cells[8], "10/128");
        assert_eq!(cells[9], "4");
        assert_eq!(header().split_whitespace().count(), 12);
    }
}
