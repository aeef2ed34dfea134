//! Time spent per collection, by kind of command: what `top` reports and `$collStats`'
//! `latencyStats` reads. `dispatch::run` records every command that names a collection
//! (a getMore names it in `collection`) after it ran; times are microseconds of the command's
//! whole run, counted since the server started.
//!
//! `top`'s `readLock`/`writeLock` say which kind of lock MongoDB would have taken: Strata's
//! readers take none and its writers one per collection, so they are the reads' and the
//! writes' totals. `latencyStats` keeps, per kind (reads, writes, commands), the total latency,
//! the count and a histogram of power-of-two buckets of microseconds.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use bson::{Bson, Document, doc};

/// A time and a count.
#[derive(Debug, Default, Clone, Copy)]
struct Counter {
    micros: u64,
    count: u64,
}

impl Counter {
    fn add(&mut self, micros: u64) {
        self.micros += micros;
        self.count += 1;
    }

    fn document(self) -> Document {
        doc! {"time": self.micros as i64, "count": self.count as i64}
    }
}

/// Buckets of latency: bucket `i` holds latencies in `[2^i, 2^(i+1))` µs (0 µs in bucket 0).
const BUCKETS: usize = 40;

/// One kind of operation's latencies (`latencyStats.reads`, ...).
#[derive(Debug, Clone)]
struct Latency {
    total: Counter,
    histogram: [u64; BUCKETS],
}

impl Default for Latency {
    fn default() -> Latency {
        Latency { total: Counter::default(), histogram: [0; BUCKETS] }
    }
}

impl Latency {
    fn add(&mut self, micros: u64) {
        self.total.add(micros);
        let bucket = (u64::BITS - micros.max(1).leading_zeros() - 1) as usize;
        if let Some(count) = self.histogram.get_mut(bucket.min(BUCKETS - 1)) {
            *count += 1;
        }
    }

    fn document(&self, histograms: bool) -> Document {
        let mut latency = doc! {"latency": self.total.micros as i64, "ops": self.total.count as i64};
        if histograms {
            let buckets: Vec<Bson> = self
                .histogram
                .iter()
                .enumerate()
                .filter(|(_, count)| **count > 0)
                .map(|(bucket, count)| Bson::Document(doc! {"micros": 1i64 << bucket, "count": *count as i64}))
                .collect();
            latency.insert("histogram", buckets);
        }
        latency
    }
}

/// One collection's figures.
#[derive(Debug, Default, Clone)]
struct Usage {
    total: Counter,
    read_lock: Counter,
    write_lock: Counter,
    queries: Counter,
    getmore: Counter,
    insert: Counter,
    update: Counter,
    remove: Counter,
    commands: Counter,
    reads: Latency,
    writes: Latency,
    other: Latency,
}

/// What kind of work a command is, for both reports.
enum Kind {
    Read,
    Write,
    Command,
}

impl Usage {
    fn record(&mut self, command: &str, micros: u64) {
        self.total.add(micros);
        let (counter, kind) = match command {
            "find" | "aggregate" | "count" | "distinct" => (&mut self.queries, Kind::Read),
            "getMore" => (&mut self.getmore, Kind::Read),
            "insert" => (&mut self.insert, Kind::Write),
            "update" | "findAndModify" => (&mut self.update, Kind::Write),
            "delete" => (&mut self.remove, Kind::Write),
            _ => (&mut self.commands, Kind::Command),
        };
        counter.add(micros);
        match kind {
            Kind::Read => {
                self.read_lock.add(micros);
                self.reads.add(micros);
            }
            Kind::Write => {
                self.write_lock.add(micros);
                self.writes.add(micros);
            }
            Kind::Command => self.other.add(micros),
        }
    }

    fn top_document(&self) -> Document {
        doc! {
            "total": self.total.document(),
            "readLock": self.read_lock.document(),
            "writeLock": self.write_lock.document(),
            "queries": self.queries.document(),
            "getmore": self.getmore.document(),
            "insert": self.insert.document(),
            "update": self.update.document(),
            "remove": self.remove.document(),
            "commands": self.commands.document(),
        }
    }
}

/// The figures of every collection, by database then collection.
#[derive(Default)]
pub struct Top {
    databases: Mutex<HashMap<String, HashMap<String, Usage>>>,
}

impl Top {
    /// Records a command that ran `elapsed` on `db.collection`.
    pub fn record(&self, db: &str, collection: &str, command: &str, elapsed: Duration) {
        let micros = elapsed.as_micros() as u64;
        let mut databases = self.databases.lock().unwrap_or_else(PoisonError::into_inner);
        // Looked up by `&str` first: a command on a known collection allocates nothing.
        if let Some(usage) = databases.get_mut(db).and_then(|collections| collections.get_mut(collection)) {
            usage.record(command, micros);
            return;
        }
        let usage = databases.entry(db.to_owned()).or_default().entry(collection.to_owned()).or_default();
        usage.record(command, micros);
    }

    /// `top`'s `totals` (without its `note`): `"db.collection": {total, readLock, ...}`.
    pub fn totals(&self) -> Document {
        let databases = self.databases.lock().unwrap_or_else(PoisonError::into_inner);
        let mut names: Vec<(&String, &String, &Usage)> = databases
            .iter()
            .flat_map(|(db, collections)| collections.iter().map(move |(name, usage)| (db, name, usage)))
            .collect();
        names.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        let mut totals = Document::new();
        for (db, collection, usage) in names {
            totals.insert(format!("{db}.{collection}"), usage.top_document());
        }
        totals
    }

    /// `$collStats`' `latencyStats` for one collection.
    pub fn latency_stats(&self, db: &str, collection: &str, histograms: bool) -> Document {
        let databases = self.databases.lock().unwrap_or_else(PoisonError::into_inner);
        let usage = databases.get(db).and_then(|collections| collections.get(collection)).cloned().unwrap_or_default();
        doc! {
            "reads": usage.reads.document(histograms),
            "writes": usage.writes.document(histograms),
            "commands": usage.other.document(histograms),
            "transactions": Latency::default().document(histograms),
        }
    }
}

/// The collection a command works on, if it names one.
pub fn collection_of<'c>(name: &str, body: &'c Document) -> Option<&'c str> {
    let field = if name == "getMore" { "collection" } else { name };
    match body.get(field) {
        Some(Bson::String(collection)) if !collection.is_empty() => Some(collection),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each command lands in its kind's counters and bucket.
    #[test]
    fn commands_are_counted_by_kind() {
        let top = Top::default();
        top.record("db", "c", "find", Duration::from_micros(3));
        top.record("db", "c", "insert", Duration::from_micros(100));
        top.record("db", "c", "createIndexes", Duration::from_micros(0));
        let totals = top.totals();
        let usage = totals.get_document("db.c").unwrap();
        assert_eq!(usage.get_document("total").unwrap(), &doc! {"time": 103i64, "count": 3i64});
        assert_eq!(usage.get_document("readLock").unwrap(), &doc! {"time": 3i64, "count": 1i64});
        assert_eq!(usage.get_document("commands").unwrap().get_i64("count").unwrap(), 1);
        let latency = top.latency_stats("db", "c", true);
        let writes = latency.get_document("writes").unwrap();
        assert_eq!(writes.get_i64("ops").unwrap(), 1);
        assert_eq!(
            writes.get_array("histogram").unwrap(),
            &vec![Bson::Document(doc! {"micros": 64i64, "count": 1i64})]
        );
    }
}
