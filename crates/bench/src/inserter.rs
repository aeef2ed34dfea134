//! One client's insert loop: builds a batch with the workload's generator, inserts it with the
//! series' write concern (one `insert_one` per document when the batch is 1, `insert_many`
//! otherwise), and counts it in a recorder that several inserters may share.

use std::sync::{Arc, Mutex};

use anyhow::{Context as _, anyhow};
use mongodb::Collection;
use serde::Serialize;

use crate::args::WriteMode;
use crate::progress::Progress;
use crate::recorder::{Interval, Recorder};

pub type SharedRecorder = Arc<Mutex<Recorder>>;

pub fn shared_recorder(total: u64, interval_docs: u64) -> SharedRecorder {
    Arc::new(Mutex::new(Recorder::new(total, interval_docs)))
}

pub struct Inserter<T: Send + Sync> {
    collection: Collection<T>,
    write: WriteMode,
    batch: u64,
    /// Documents this inserter still has to insert.
    remaining: u64,
    inserted: u64,
    recorder: SharedRecorder,
    progress: Progress,
}

impl<T: Serialize + Send + Sync> Inserter<T> {
    pub fn new(
        collection: Collection<T>,
        write: WriteMode,
        batch: u64,
        count: u64,
        recorder: SharedRecorder,
        progress: Progress,
    ) -> Self {
        Inserter { collection, write, batch: batch.max(1), remaining: count, inserted: 0, recorder, progress }
    }

    pub fn is_done(&self) -> bool {
        self.remaining == 0
    }

    /// Inserts the next batch; `make(i)` builds this inserter's `i`-th document (0-based).
    /// Returns the interval this batch completed, if any.
    pub async fn insert_next(&mut self, make: &mut impl FnMut(u64) -> T) -> anyhow::Result<Option<Interval>> {
        let count = self.batch.min(self.remaining);
        if count == 0 {
            return Ok(None);
        }
        let first = self.inserted;
        let documents: Vec<T> = (first..first + count).map(&mut *make).collect();
        let concern = self.write.concern();
        let outcome = if let [document] = documents.as_slice() {
            self.collection.insert_one(document).write_concern(concern).await.map(|_| ())
        } else {
            self.collection.insert_many(&documents).write_concern(concern).await.map(|_| ())
        };
        outcome.with_context(|| {
            format!("inserting documents {first}..{} into {}", first + count, self.collection.namespace())
        })?;
        self.inserted += count;
        self.remaining -= count;
        self.progress.advance(count);
        let mut recorder = self.recorder.lock().map_err(|_| anyhow!("an inserter panicked"))?;
        Ok(recorder.add(count))
    }

    /// Inserts everything that is left.
    pub async fn run_to_end(&mut self, make: &mut impl FnMut(u64) -> T) -> anyhow::Result<()> {
        while !self.is_done() {
            self.insert_next(make).await?;
        }
        Ok(())
    }
}
