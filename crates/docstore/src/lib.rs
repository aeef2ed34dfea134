//! Strata's embedded database: databases, collections, indexes, a planner and an executor over
//! the `storage` engine. The server calls this API; so can any Rust program that wants Strata
//! in-process. It is the one door to the engine: nothing above it opens a data directory or
//! a tree except through it.
//!
//! # Using it
//!
//! ```no_run
//! use docstore::{Durability, FindRequest, Store, StoreOptions};
//! # fn main() -> docstore::Result<()> {
//! let store = Store::open(std::path::Path::new("data"), StoreOptions::default())?;
//! let people = store.collection(("test", "people"));
//! let outcome = people.insert(vec![bson::rawdoc! { "name": "ada" }], true, Durability::Periodic);
//! assert!(outcome.errors.is_empty());
//! let cursor = people.find(&FindRequest { filter: bson::doc! {"name": "ada"}, ..Default::default() })?;
//! for document in cursor { let _raw: bson::RawDocumentBuf = document?; }
//! store.close()?;
//! # Ok(()) }
//! ```
//!
//! # The public surface
//!
//! - [`Store`] (`Send + Sync`; share it in an `Arc`; every method takes `&self`): open and close
//!   ([`Store::open`], [`Store::open_in_memory`], [`Store::open_with`] on another file system,
//!   [`Store::close`]), [`Store::checkpoint`], [`Store::backup`]; databases (`list_collections`,
//!   `list_databases`, `database_names`, `drop_database`, `db_stats`, `aggregate_database`);
//!   the oplog (`enable_oplog`, `oplog` → [`Oplog`], `tail_oplog` → [`Tail`], `append_noop`,
//!   `oplog_after`, `apply_replicated` of another member's entries, `set_originates`), a
//!   replica-set member's consensus log (`raft_log` → [`RaftLog`]) and change streams (`watch` → [`ChangeStream`]); multi-document
//!   transactions (`begin_transaction` → [`DocumentTransaction`], `commit_transaction`,
//!   `snapshot_now` → [`ReadAt`]); retryable writes' records (`executed`, `last_txn_number`,
//!   `forget_session`); `engine_stats`.
//! - [`Collection`], the handle `store.collection(namespace)` of one collection by its
//!   [`Namespace`] (or a `(db, name)` pair): writes (`insert` → [`InsertOutcome`], errors by
//!   position; `update` → [`UpdateOutcome`]; `delete` → a count; `find_and_modify` →
//!   [`FindAndModifyOutcome`]), each with [`WriteOptions`] or a [`Durability`]; reads (`find`
//!   → [`Cursor`], which holds its snapshot across getMore; `count`, `estimated_document_count`
//!   (a counter, not a scan), `distinct`, `aggregate` → [`Cursor`], `explain`, `tail` of a
//!   capped collection); indexes (`create_indexes` → [`CreateIndexesOutcome`], `drop_indexes`
//!   by [`IndexSelector`], `list_indexes`); its catalog changes (`create`, `ensure_system`,
//!   `set_options`, `modify_index`, `drop`, `rename`, `convert_to_capped`, `compact`); figures
//!   (`stats`, `index_stats`, `validate` → [`ValidateReport`], `salvage_documents`).
//! - [`operation`]: the operation a thread runs (entered by the caller): reads stop at their
//!   next entry once it is killed or past its time limit, and count what they examined.
//! - [`repair`]: `strata repair`'s salvage of a damaged data directory into a new one.
//!
//! Errors are one [`Error`] enum; [`Error::code`] and [`Error::code_name`] are the MongoDB code
//! and codeName to reply with. A duplicate key is [`Error::DuplicateKey`] with `key_pattern` and
//! `key_value` (the `keyPattern`/`keyValue` of MongoDB's write error); its `Display` is
//! MongoDB's `E11000 duplicate key error collection: ...` message.
//!
//! # Inside
//!
//! - `context`: the store's one context — the engine and the state every operation shares
//!   (catalog, oplog, sessions' records, transactions' holds, capped listeners, index usage).
//!   Operations take it as `cx`.
//! - `catalog`: the durable catalog (`__catalog`, its copy, `__counts`) and its cache of
//!   collection descriptors (`catalog::descriptor`), views, the collection locks and their
//!   rules; catalog changes in `catalog::ddl`; entries and name rules in `catalog::entry`.
//! - `index`: entry layout (`index/mod.rs` header), specs and conflicts (`spec`), builds and
//!   drop/list (`build`), the TTL monitor (`ttl`), the keys of text, geospatial and wildcard
//!   indexes (`text`, `geo`, `wildcard`), access counters for `$indexStats` (`usage`).
//! - `write`: one engine transaction per document (or per group of whole documents) with its
//!   index entries and counters (`write/mod.rs`); `insert`, `update` (+ findAndModify), `delete`.
//! - `read`: `bounds` (filters to key ranges), `planner`, `scan` (access methods), `find`
//!   (cursor, sort with spilling, count, distinct), `explain`, `$text` (`text`) and
//!   `$near`/`$geoNear` (`geo`) queries, covered plans (`covered`).
//! - `aggregate` (pipelines streamed from a find cursor into a lazy cursor, and the
//!   `CollectionSource` for `$lookup`/`$unionWith`/`$out`/`$merge`), `spill` (temporary
//!   trees for sorts and aggregation stages past their memory limits), `stats`
//!   (collStats/dbStats from counters), `validate`.
//! - `oplog` (entries, diffs, tailing, applying another member's entries), `raft_log` (a
//!   member's consensus log), `change_stream`, `transaction` (multi-document
//!   transactions and their holds), `retry` (retryable writes' records), `capped`,
//!   `timeseries`, `validation` (document validators), `compression`.
//!
//! Invariants: a document and all its index entries change in one engine transaction; every
//! write to a collection holds its write lock and maintains every index, ready or building;
//! readers take no lock and read one snapshot; stored documents are the client's bytes (an
//! inserted document is never re-encoded; one without `_id` gets an ObjectId prepended); when
//! the store keeps an oplog, every change commits its oplog entries in its own transaction.

// Library code returns errors instead of panicking; tests may unwrap.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
// Items of private modules say `pub(crate)`, so that the source shows what is reachable from outside.
#![warn(unreachable_pub)]

mod aggregate;
mod capped;
mod catalog;
mod change_stream;
mod collection;
mod compression;
mod context;
mod entry_filter;
mod error;
mod index;
pub mod operation;
mod oplog;
mod options;
mod raft_log;
mod read;
pub mod repair;
mod retry;
mod salvage;
mod spill;
mod stats;
mod store;
mod timeseries;
mod transaction;
mod validate;
mod validation;
mod write;

pub use aggregate::AggregateOptions;
pub use catalog::descriptor::{CollectionInfo, DatabaseInfo};
pub use change_stream::{ChangeStream, Scope as ChangeStreamScope};
pub use collection::Collection;
pub use context::ChangeStreamLimit;
pub use entry_filter::EntryFilter;
pub use error::{Error, Result};
pub use index::build::CreateIndexesOutcome;
pub use index::spec::IndexSelector;
pub use index::spec::default_name as default_index_name;
pub use oplog::entry::TERM as OPLOG_TERM;
pub use oplog::{Oplog, tail::Tail};
/// A statement's `collation` (ICU's string order for a language), parsed by the caller.
pub use query::collation::Collation;
/// A statement's variables (`let`, `$$NOW`, `$$CLUSTER_TIME`), made by the caller once per command.
pub use query::expr::Variables;
/// A collection's name: its database and its name in it.
pub use query::pipeline::Namespace;
pub use raft_log::{RaftEntry, RaftLog};
pub use read::explain::Verbosity;
pub use read::find::{Cursor, FindRequest};
pub use read::planner::Hint;
pub use retry::Retry;
/// The process's resident memory, as the engine reads it for its own budget (the server's
/// admission of large messages uses the same figure).
pub use storage::allocator::resident_bytes;
/// What a server needs of the engine, through the docstore (its one door): the durability a
/// write asks for, and the engine's statistics.
pub use storage::{BackupReport, CompactReport, Durability, Stats as EngineStats};
pub use store::{Store, StoreOptions};
pub use transaction::{DocumentTransaction, ReadAt};
pub use validate::ValidateReport;
pub use write::WriteOptions;
pub use write::delete::DeleteRequest;
pub use write::insert::InsertOutcome;
pub use write::update::{FindAndModifyOutcome, FindAndModifyRequest, UpdateModification, UpdateOutcome, UpdateRequest};
