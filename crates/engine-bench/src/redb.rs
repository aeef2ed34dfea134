//! redb (a copy-on-write B-tree) under the workload: one database file, four tables, each batch
//! one write transaction.
//!
//! redb 4 has two durabilities, `Immediate` (fsync per commit) and `None` (no fsync; not durable
//! until a later `Immediate` commit, and pages it frees are not reused until then). To match
//! the others' periodic sync, commits use `None` and one commit at least every 100 ms uses
//! `Immediate`; `close` ends with an `Immediate` commit.

use std::path::Path;

use ::redb::{Database, Durability, ReadableDatabase, TableDefinition};
use anyhow::Context;

use crate::workload::{Backend, Row, SyncClock};

type Table = TableDefinition<'static, &'static [u8], &'static [u8]>;

const PRIMARY: Table = TableDefinition::new("primary");
const SECONDARIES: [Table; 3] =
    [TableDefinition::new("secondary_1"), TableDefinition::new("secondary_2"), TableDefinition::new("secondary_3")];

pub struct Redb {
    database: Database,
    clock: SyncClock,
}

impl Redb {
    pub fn open(dir: &Path, cache_size_bytes: usize) -> anyhow::Result<Redb> {
        let path = dir.join("iibench.redb");
        let database = Database::builder()
            .set_cache_size(cache_size_bytes)
            .create(&path)
            .with_context(|| format!("opening redb at {}", path.display()))?;
        Ok(Redb { database, clock: SyncClock::new() })
    }

    fn commit(&mut self, rows: &[Row], durability: Durability) -> anyhow::Result<()> {
        let mut txn = self.database.begin_write()?;
        txn.set_durability(durability)?;
        {
            let mut primary = txn.open_table(PRIMARY)?;
            for row in rows {
                primary.insert(row.id.as_slice(), row.value.as_slice())?;
            }
        }
        for (index, definition) in SECONDARIES.iter().enumerate() {
            let mut table = txn.open_table(*definition)?;
            for row in rows {
                let key = row.secondary_keys.get(index).context("a row has three secondary keys")?;
                table.insert(key.as_slice(), [].as_slice())?;
            }
        }
        txn.commit()?;
        Ok(())
    }
}

impl Backend for Redb {
    fn durability(&self) -> String {
        "Durability::None per commit, Immediate (fsync) on a commit at least every 100 ms".into()
    }

    fn insert_batch(&mut self, rows: &[Row]) -> anyhow::Result<()> {
        let durability = if self.clock.sync_due() { Durability::Immediate } else { Durability::None };
        self.commit(rows, durability)
    }

    fn read(&self, id: &[u8; 8]) -> Option<anyhow::Result<bool>> {
        let found = || -> anyhow::Result<bool> {
            let txn = self.database.begin_read()?;
            let table = txn.open_table(PRIMARY)?;
            Ok(table.get(id.as_slice())?.is_some())
        };
        Some(found())
    }

    fn scan(&self, start: &[u8], count: usize) -> Option<anyhow::Result<usize>> {
        let seen = || -> anyhow::Result<usize> {
            let txn = self.database.begin_read()?;
            let table = txn.open_table(SECONDARIES[0])?;
            let mut seen = 0;
            for item in table.range(start..)?.take(count) {
                item?;
                seen += 1;
            }
            Ok(seen)
        };
        Some(seen())
    }

    fn close(mut self: Box<Self>) -> anyhow::Result<()> {
        self.commit(&[], Durability::Immediate)?;
        drop(self.database);
        Ok(())
    }
}
