//! What a workload runs with: the client, its database, the options every workload has, the
//! progress bar, and the results being gathered.

use anyhow::bail;
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
        self.results.measurements.push(Measurement { series: series.to_owned(), name: name.to_owned(), value, unit: unit.to_owned() });
    }

    /// A server error the run goes on after (a query Strata cannot run yet): recorded and shown.
    pub fn server_error(&mut self, what: &str, error: &mongodb::error::Error) {
        let line = format!("{what}: {error}");
        self.progress.println(&format!("server error: {line}"));
        self.results.errors.push(line);
    }

    /// Ends a series: checks the server holds exactly the documents inserted, records the rates
    /// and prints a one-line summary.
    pub async fn finish_series<T: Send + Sync>(
        &mut self,
        name: &str,
        indexed: bool,
        write: WriteMode,
        recorder: SharedRecorder,
        collection: &Collection<T>,
    ) -> anyhow::Result<()> {
        let rates = match std::sync::Arc::try_unwrap(recorder) {
            Ok(mutex) => mutex.into_inner().map_err(|_| anyhow::anyhow!("an inserter panicked"))?.finish(),
            Err(_) => bail!("series {name}: an inserter still holds the recorder"),
        };
        let server_count = collection.count_documents(doc! {}).await?;
        if server_count != rates.docs {
            bail!("series {name}: inserted {} documents but the server counts {server_count}", rates.docs);
        }
        self.progress.println(&format!(
            "{name}: {} docs in {:.1} s, {:.0} docs/s (first 10%: {:.0}, exit velocity: {:.0})",
            rates.docs, rates.seconds, rates.rate, rates.first_tenth_rate, rates.exit_velocity
        ));
        self.results.series.push(Series::new(name.to_owned(), indexed, write.label(), rates, server_count));
        Ok(())
    }
}
