//! The store's shared state: the engine, the options, the [`Catalog`]; opening.
//!
//! Open: open the catalog (its trees, its entries, garbage trees dropped: [`Catalog::open`]),
//! rebuild the collections written in an older key format ([`crate::catalog::key_format`]),
//! then finish the index builds a crash (or that rebuild) left unbuilt. Threads: the engine's
//! own, plus the TTL monitor ([`crate::index::ttl`]), which holds only a `Weak` reference so
//! that `close` can take the store back.

use std::sync::atomic::{AtomicU64, Ordering};

use storage::{Durability, Engine};

use crate::StoreOptions;
use crate::catalog::{self, Catalog};
use crate::error::Result;

pub struct Inner {
    pub engine: Engine,
    pub options: StoreOptions,
    pub catalog: Catalog,
    /// Numbers temporary trees (sort spills) and collections (`$out`) uniquely within this
    /// process.
    temp_counter: AtomicU64,
    /// The collections this open rebuilt from an older key format, for the server's log.
    pub upgraded: Vec<String>,
}

impl Inner {
    pub fn open(engine: Engine, options: StoreOptions) -> Result<Inner> {
        let catalog = Catalog::open(&engine, options.document_compression)?;
        let upgraded = match engine.options().salvage {
            true => Vec::new(),
            false => catalog.upgrade_key_formats(&engine)?,
        };
        for (db, name, index) in catalog.unfinished_index_builds() {
            crate::index::build::build(&engine, &catalog, &db, &name, &index)?;
        }
        Ok(Inner { engine, options, catalog, temp_counter: AtomicU64::new(0), upgraded })
    }

    /// Makes the document writes committed so far as durable as `durability` asks, once their
    /// collection locks are released (see `write::under_lock`): for `Immediate`, a log sync
    /// that concurrent writers share.
    pub fn make_durable(&self, durability: Durability) -> Result<()> {
        match durability {
            Durability::Immediate => Ok(self.engine.sync()?),
            Durability::Periodic | Durability::None => Ok(()),
        }
    }

    /// `outcome`, once the writes before it are as durable as asked (whether it succeeded or
    /// not: an earlier statement's writes may stand).
    pub fn made_durable<T>(&self, durability: Durability, outcome: Result<T>) -> Result<T> {
        self.make_durable(durability)?;
        outcome
    }

    /// A number for a temporary name, unique in this process.
    pub fn temp_number(&self) -> u64 {
        self.temp_counter.fetch_add(1, Ordering::Relaxed)
    }

    /// A temporary tree name, unique in this process (dropped when done, or at the next open).
    pub fn temp_tree_name(&self) -> String {
        format!("{}{}.{}", catalog::TEMP_TREE_PREFIX, std::process::id(), self.temp_number())
    }
}
