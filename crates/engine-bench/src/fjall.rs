//! fjall (an LSM-tree) under the workload: one database, four keyspaces, each batch one atomic
//! cross-keyspace `WriteBatch`.
//!
//! fjall writes each batch to its journal in the OS's buffers without a sync; to match the
//! others' periodic sync, the journal is synced (`PersistMode::SyncData`) after a commit at
//! least every 100 ms, and `close` syncs everything. Flushes and compactions run on fjall's own
//! worker threads. Memtables (up to `--fjall-memtable-size` per keyspace) are memory beside the
//! block cache, which alone gets the cache budget.

use std::path::Path;

use ::fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};
use anyhow::Context;

use crate::workload::{Backend, Row, SECONDARY_TREES, SyncClock};

pub struct Fjall {
    database: Database,
    primary: Keyspace,
    secondaries: Vec<Keyspace>,
    clock: SyncClock,
    memtable_size_bytes: u64,
}

impl Fjall {
    pub fn open(dir: &Path, cache_size_bytes: usize, memtable_size_bytes: u64) -> anyhow::Result<Fjall> {
        let database = Database::builder(dir)
            .cache_size(cache_size_bytes as u64)
            .open()
            .with_context(|| format!("opening fjall in {}", dir.display()))?;
        let options = || KeyspaceCreateOptions::default().max_memtable_size(memtable_size_bytes);
        let primary = database.keyspace("primary", options)?;
        let secondaries = (1..=SECONDARY_TREES)
            .map(|k| database.keyspace(&format!("secondary_{k}"), options))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Fjall { database, primary, secondaries, clock: SyncClock::new(), memtable_size_bytes })
    }
}

impl Backend for Fjall {
    fn durability(&self) -> String {
        format!(
            "batch commit to OS buffers (no sync), journal synced (SyncData) at least every 100 ms; \
             memtables up to {} MiB per keyspace, outside the block cache",
            self.memtable_size_bytes >> 20
        )
    }

    fn insert_batch(&mut self, rows: &[Row]) -> anyhow::Result<()> {
        let mut batch = self.database.batch();
        for row in rows {
            batch.insert(&self.primary, row.id.as_slice(), row.value.as_slice());
            for (keyspace, key) in self.secondaries.iter().zip(&row.secondary_keys) {
                batch.insert(keyspace, key.as_slice(), [].as_slice());
            }
        }
        batch.commit()?;
        if self.clock.sync_due() {
            self.database.persist(PersistMode::SyncData)?;
        }
        Ok(())
    }

    fn close(self: Box<Self>) -> anyhow::Result<()> {
        self.database.persist(PersistMode::SyncAll)?;
        drop(self.secondaries);
        drop(self.primary);
        drop(self.database);
        Ok(())
    }
}
