//! Strata's Bε-tree under the workload: one engine, a primary tree and three secondary trees,
//! each batch one `Transaction` committed with `Durability::Periodic` (the engine syncs its log
//! at least every 100 ms; no commit waits for a sync).

use std::path::Path;

use anyhow::Context;
use storage::{Durability, Engine, Options, TreeId};

use crate::workload::{Backend, Row, SECONDARY_TREES};

pub struct Strata {
    engine: Engine,
    primary: TreeId,
    secondaries: [TreeId; SECONDARY_TREES],
    opened: &'static str,
}

impl Strata {
    pub fn open(dir: &Path, cache_size_bytes: usize) -> anyhow::Result<Strata> {
        let (engine, opened) = open_engine(dir, cache_size_bytes)?;
        let primary = engine.create_tree("primary")?;
        let secondaries = [
            engine.create_tree("secondary_1")?,
            engine.create_tree("secondary_2")?,
            engine.create_tree("secondary_3")?,
        ];
        Ok(Strata { engine, primary, secondaries, opened })
    }
}

/// The durable engine in `dir`, with one memory budget for the whole engine.
fn open_engine(dir: &Path, cache_size_bytes: usize) -> anyhow::Result<(Engine, &'static str)> {
    // Nodes sized for the cache, as `strata serve` sizes them (a 4 MiB node beside a 16 MiB
    // cache does not fit a small memory cap).
    let defaults = Options::for_cache_size(cache_size_bytes);
    // Knobs for sweeps: STRATA_NODE_SIZE, STRATA_BASEMENT_SIZE (bytes), STRATA_FANOUT,
    // STRATA_CHECKPOINT_LOG_BYTES.
    let knob = |name: &str, default: usize| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let checkpoint_log_bytes = knob("STRATA_CHECKPOINT_LOG_BYTES", defaults.checkpoint_log_bytes as usize);
    let options = Options {
        cache_size_bytes,
        node_size_bytes: knob("STRATA_NODE_SIZE", defaults.node_size_bytes),
        basement_size_bytes: knob("STRATA_BASEMENT_SIZE", defaults.basement_size_bytes),
        fanout: knob("STRATA_FANOUT", defaults.fanout),
        checkpoint_log_bytes: checkpoint_log_bytes as u64,
        ..defaults
    };
    eprintln!("strata options: {options:?}");
    let engine = Engine::open(dir, options).with_context(|| format!("opening strata in {}", dir.display()))?;
    Ok((engine, "Engine::open (durable, files in the data dir)"))
}

impl Backend for Strata {
    fn durability(&self) -> String {
        format!("Durability::Periodic (log synced at least every 100 ms); {}", self.opened)
    }

    fn insert_batch(&mut self, rows: &[Row]) -> anyhow::Result<()> {
        let mut txn = self.engine.begin();
        for row in rows {
            txn.put(self.primary, row.id.to_vec(), row.value.clone());
            for (tree, key) in self.secondaries.iter().zip(&row.secondary_keys) {
                txn.put(*tree, key.to_vec(), Vec::new());
            }
        }
        txn.commit(Durability::Periodic)?;
        Ok(())
    }

    fn cache_used_bytes(&self) -> Option<u64> {
        Some(self.engine.stats().cache_used_bytes)
    }

    fn read(&self, id: &[u8; 8]) -> Option<anyhow::Result<bool>> {
        Some(self.engine.snapshot().get(self.primary, id).map(|value| value.is_some()).map_err(Into::into))
    }

    fn scan(&self, start: &[u8], count: usize) -> Option<anyhow::Result<usize>> {
        let snapshot = self.engine.snapshot();
        let range = (std::ops::Bound::Included(start), std::ops::Bound::Unbounded);
        let mut seen = 0;
        for item in snapshot.range(self.secondaries[0], range).take(count) {
            if let Err(error) = item {
                return Some(Err(error.into()));
            }
            seen += 1;
        }
        Some(Ok(seen))
    }

    fn node_bytes_read(&self) -> Option<u64> {
        Some(self.engine.stats().node_bytes_read)
    }

    fn close(self: Box<Self>) -> anyhow::Result<()> {
        eprintln!("strata stats at close: {:?}", self.engine.stats());
        self.engine.close()?;
        Ok(())
    }
}
