//! Strata's storage engine: an ordered key/value store whose writes are messages buffered in
//! the internal nodes of a Bε-tree and flushed down in bulk.
//!
//! Entry points: [`Engine`] (named trees, transactions, snapshots, `verify`, `stats`),
//! [`Transaction`] (atomic multi-tree writes), [`Snapshot`] (consistent reads and scans),
//! [`PendingWrites`] (a long transaction's writes, read through a snapshot before they commit).
//! The engine knows bytes only: keys compare with `memcmp`, values are opaque.
//!
//! Layers inside: `message` (what a write is and how a key's history resolves), `node` (nodes,
//! buffers, leaves and their encoding), `store` (nodes by id), `tree` (one Bε-tree: writes,
//! flushes, reads, verify), `engine` / `transaction` / `snapshot` / `pending` (the public
//! surface), `overlay` (reads through pending writes).

// Library code returns errors instead of panicking; tests may unwrap.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod allocator;
mod backup;
mod checkpoint;
mod compact;
mod compression;
mod engine;
mod error;
mod file;
/// Fuzz entry points (`fuzz/`, and the corpus replay test): not part of the engine's API.
#[doc(hidden)]
pub mod fuzzing;
pub mod io;
pub mod message;
mod node;
mod options;
mod overlay;
mod pending;
mod recovery;
mod salvage;
mod snapshot;
mod stats;
mod store;
mod thin;
mod transaction;
mod tree;
mod wal;
mod writes;

pub use backup::BackupReport;
pub use compact::CompactReport;
pub use compression::Compression;
pub use engine::Engine;
pub use error::{Error, Result};
pub use message::{Seq, UpdateFn, counter_update};
pub use options::{Durability, FlushMode, Options};
pub use pending::PendingWrites;
pub use recovery::{DATA_FILE, LOCK_FILE, LOG_DIR, RecoveryReport};
pub use salvage::{Salvage, Salvaged};
pub use snapshot::{RangeIter, Snapshot};
pub use stats::{CacheMix, Stats};
pub use transaction::{MAX_KEY_BYTES, MAX_VALUE_BYTES, Transaction};
pub use tree::TreeId;
pub use writes::Writes;
