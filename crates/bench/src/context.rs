//! What a workload runs with: the client, its database, the options every workload has, the
//! progress bar, and the results being gathered.

use anyhow::{anyhow, bail};
use bson::doc;
use mongodb::{Client, Collection, Database};
use serde::Serialize;

use crate::args::{CommonArgs, WriteMode};
use crate::inserter::SharedRecorder;
use crate::progress::Progress;
use crate::results::{Measurement, RunResults, Series};

const DEFAULT_INTERVAL_DOCS: u64 = 100_000;

pub struct Context {
    pub client: Client,
    /// The server's URI (`--uri`, or the started server's), for workloads that open clients of
    /// their own.
    pub uri: String,
    pub common: CommonArgs,
    pub progress: Progress,
    pub results: RunResults,
}

impl Context {
    pub fn database(&self) -> Database {
        self.client.database(&self.common.db)
    }

    /// The workload's database, emptied: every series starts from nothing, as in the posts.
    pub async fn fresh_database(&self) -> anyhow::Result<Database> {
        let database = self.database();
        database.drop().await?;
        Ok(database)
    }

    /// Documents per rate interval for a series of `total`: --interval, else 100,000, or a tenth
    /// of the series when that is less (so a small run still draws a curve).
    pub fn interval_for(&self, total: u64) -> u64 {
        self.common.interval.unwrap_or_else(|| DEFAULT_INTERVAL_DOCS.min(total / 10)).max(1)
    }

    pub fn parameter(&mut self, key: &str, value: impl Serialize) {
        let value = serde_json::to_value(value).unwrap_or(serde_json::Value::Null);
        self.results.parameters.insert(key.to_owned(), value);
    }

    pub fn measure(&mut self, series: &str, name: &str, value: f64, unit: &str) {
        self.results.measurements.push(Measurement {
            series: series.to_owned(),
            name: name.to_owned(),
            value,
            unit: unit.to_owned(),
        });
    }

    /// A server error the run goes on after (a query Strata cannot run yet): recorded and shown.
    pub fn server_error(&mut self, what: &str, error: &mongodb::error::Error) {
        let line = format!("{what}: {error}");
        self.progress.println(&format!("server error: {line}"));
        self.results.errors.push(line);
    }

    /// Ends a series: records its rates (marked partial when `inserted` failed: the curve up to
    /// the failure is still worth having), checks the server counts exactly the documents
    /// inserted, and prints a one-line summary. Fails with the insert error or the mismatch.
    pub async fn finish_series<T: Send + Sync>(
        &mut self,
        name: &str,
        indexed: bool,
        write: WriteMode,
        recorder: SharedRecorder,
        collection: &Collection<T>,
        inserted: anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let rates = match std::sync::Arc::try_unwrap(recorder) {
            Ok(mutex) => mutex.into_inner().map_err(|_| anyhow!("an inserter panicked"))?.finish(),
            Err(_) => bail!("series {name}: an inserter still holds the recorder"),
        };
        let mut series = Series::new(name.to_owned(), indexed, write.label(), rates);
        let outcome = match inserted {
            Err(error) => {
                series.partial = true;
                Err(error)
            }
            Ok(()) => match count(collection).await {
                Ok(count) if count == series.docs => {
                    series.server_count = Some(count);
                    Ok(())
                }
                Ok(count) => {
                    series.server_count = Some(count);
                    Err(anyhow!("series {name}: inserted {} documents but the server counts {count}", series.docs))
                }
                Err(error) => Err(anyhow::Error::from(error).context(format!("series {name}: counting its documents"))),
            },
        };
        self.progress.println(&format!(
            "{name}: {} docs in {:.1} s, {:.0} docs/s (first 10%: {:.0}, exit velocity: {:.0}){}",
            series.docs,
            series.seconds,
            series.rate,
            series.first_tenth_rate,
            series.exit_velocity,
            if series.partial { ", stopped early" } else { "" }
        ));
        self.results.series.push(series);
        outcome
    }
}

/// The server's document count: the `count` command with an empty query (the shell's
/// `db.c.count()`, answered from a counter), not the driver's `count_documents`, an
/// aggregation with `$group` that scans the collection (and, before commit 10d4302, gathered
/// it in memory: it got the server OOM-killed under --memory-limit; docs/BENCHMARKS.md).
async fn count<T: Send + Sync>(collection: &Collection<T>) -> mongodb::error::Result<u64> {
    let reply = collection
        .client()
        .database(collection.namespace().db.as_str())
        .run_command(doc! { "count": collection.name(), "query": {} })
        .await?;
    let n = reply
        .get("n")
        .and_then(|n| n.as_i64().or_else(|| n.as_i32().map(i64::from)).or_else(|| n.as_f64().map(|f| f as i64)));
    Ok(n.and_then(|n| u64::try_from(n).ok()).unwrap_or(u64::MAX))
}
