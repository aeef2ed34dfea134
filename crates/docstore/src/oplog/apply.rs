//! Applying another member's oplog entries ([`crate::Store::apply_replicated`]): how a
//! secondary repeats the primary's history.
//!
//! An entry is applied through the same write paths as the primary's own writes (a document
//! with its index entries and counters in one engine transaction; DDL through `catalog::ddl`
//! and `index::build`), and the entry itself is written into this member's oplog **as the
//! primary wrote it** — same `ts`, same `t`, same bytes — in the engine transaction of the
//! change it describes. The write paths build entries of their own as they always do; while an
//! entry is being applied, this thread's [`Replicating`] state makes the oplog write the given
//! entry in their place with the first commit that logs, and nothing with any later commit of
//! the same entry (a DDL that commits twice). So after any crash this member's oplog and data
//! agree, and its oplog is a prefix of the primary's: the server resumes applying after the
//! last `ts` it holds.
//!
//! Applying is idempotent where MongoDB's is: an insert of a present `_id` replaces it, an
//! update or delete of a missing document changes nothing (the entry is still written), and
//! creating an existing collection or dropping a missing one is not an error.
//!
//! A transaction's `applyOps` entry is applied as one engine transaction, with the session's
//! record that it committed (see `retry::commit_record`), as the primary committed it.
//!
//! A batch of entries ([`Store::apply_replicated_batch`], a consensus entry's) is applied in
//! runs: consecutive document writes as one engine transaction each, with all their entries,
//! so that a secondary commits once per run as the primary committed once per command.
//!
//! A store told not to build indexes ([`Store::set_builds_indexes`], a `buildIndexes: false`
//! member) writes the entries of index builds and index changes without applying them.

use std::cell::RefCell;

use bson::{Bson, Document, RawDocument, Timestamp};
use storage::Durability;

use crate::catalog::ddl;
use crate::error::{Error, Result};
use crate::index::id_key;
use crate::write::{DocumentWrite, document_id};
use crate::{DocumentTransaction, IndexSelector, Store};

/// The most document writes applied in one engine transaction: a bound on what the transaction
/// holds in memory.
const MAX_RUN: usize = 4096;

/// What the oplog writes for this thread's commits (see the module header).
enum Replicating {
    /// Not applying: commits write the entries they built.
    Off,
    /// Applying this entry: the next commit that logs writes it instead of its own entries.
    Pending(Vec<u8>),
    /// Written (or held back): commits write no entries.
    Quiet,
}

thread_local! {
    static REPLICATING: RefCell<Replicating> = const { RefCell::new(Replicating::Off) };
}

/// For the oplog's commit: `None` when this thread is not applying (write the entries built),
/// `Some(Some(bytes))` to write the replicated entry, `Some(None)` to write nothing.
pub(crate) fn take_replicated() -> Option<Option<Vec<u8>>> {
    REPLICATING.with(|state| {
        let mut state = state.borrow_mut();
        match std::mem::replace(&mut *state, Replicating::Quiet) {
            Replicating::Off => {
                *state = Replicating::Off;
                None
            }
            Replicating::Pending(bytes) => Some(Some(bytes)),
            Replicating::Quiet => Some(None),
        }
    })
}

/// Runs `apply` with `entry` pending; returns the entry if no commit wrote it.
fn applying<T>(entry: &RawDocument, apply: impl FnOnce() -> Result<T>) -> (Result<T>, Option<Vec<u8>>) {
    REPLICATING.with(|state| *state.borrow_mut() = Replicating::Pending(entry.as_bytes().to_vec()));
    let outcome = apply();
    let left = REPLICATING.with(|state| match std::mem::replace(&mut *state.borrow_mut(), Replicating::Off) {
        Replicating::Pending(bytes) => Some(bytes),
        _ => None,
    });
    (outcome, left)
}

/// Runs `step` writing no entries (a step of applying that the primary did not log on its own,
/// e.g. creating a collection an insert names), keeping a pending entry pending.
pub(super) fn quietly<T>(step: impl FnOnce() -> Result<T>) -> Result<T> {
    let saved = REPLICATING.with(|state| std::mem::replace(&mut *state.borrow_mut(), Replicating::Quiet));
    let outcome = step();
    REPLICATING.with(|state| *state.borrow_mut() = saved);
    outcome
}

/// The `ts` of an entry's bytes.
pub(crate) fn entry_ts(entry: &RawDocument) -> Result<Timestamp> {
    entry.get_timestamp("ts").map_err(|e| Error::bad_value(format!("oplog entry without a ts: {e}")))
}

impl Store {
    /// Applies one entry of the primary's oplog (see [`crate::oplog::apply`]): its change, and
    /// the entry itself into this store's oplog, which must be kept and hold only older
    /// entries.
    pub fn apply_replicated(&self, entry: &RawDocument) -> Result<()> {
        let oplog = self.oplog_before(entry)?;
        if entry.get_str("op").ok() == Some("n") {
            // A no-op, perhaps with a retryable write's record: one transaction with the entry.
            let mut txn = self.cx.engine.begin();
            let o = entry.get_document("o").ok().map(Document::try_from).transpose();
            let o = o.map_err(|e| Error::bad_value(format!("no-op o: {e}")))?.unwrap_or_default();
            if let Ok(retry) = o.get_document("retry") {
                crate::retry::put_replicated(&mut txn, self.cx.sessions_tree, retry)?;
            }
            oplog.commit_raw(txn, entry.as_bytes().to_vec(), Durability::Periodic)?;
            return Ok(());
        }
        let (outcome, left) = applying(entry, || self.apply_change(entry));
        outcome?;
        if let Some(bytes) = left {
            oplog.commit_raw(self.cx.engine.begin(), bytes, Durability::Periodic)?;
        }
        Ok(())
    }

    /// Applies consecutive entries of the primary's oplog (one command's, or one consensus
    /// entry's), as [`Store::apply_replicated`] would one by one. Runs of document writes
    /// (inserts, updates, deletes outside capped collections) are applied as one engine
    /// transaction each, with all their entries: a reader sees none or all of a run, and a crash
    /// keeps a prefix of the history. One commit per run, rather than per document, is what
    /// lets a secondary keep up with a primary inserting in batches.
    pub fn apply_replicated_batch(&self, entries: &[&RawDocument]) -> Result<()> {
        let mut run: Vec<&RawDocument> = Vec::new();
        for &entry in entries {
            let joins = self.joins_run(entry);
            if joins && run.len() < MAX_RUN {
                run.push(entry);
                continue;
            }
            self.apply_run(&run)?;
            run.clear();
            if joins {
                run.push(entry);
            } else {
                self.apply_replicated(entry)?;
            }
        }
        self.apply_run(&run)
    }

    /// Whether an entry may be applied in a run: a document write, not in a capped collection
    /// (whose writes a transaction may not hold).
    fn joins_run(&self, entry: &RawDocument) -> bool {
        let (Ok(op), Ok(ns)) = (entry.get_str("op"), entry.get_str("ns")) else { return false };
        let (db, name) = ns.split_once('.').unwrap_or((ns, ""));
        matches!(op, "i" | "u" | "d")
            && self.cx.catalog.collection(db, name).is_none_or(|collection| collection.capped.is_none())
    }

    fn apply_run(&self, run: &[&RawDocument]) -> Result<()> {
        let [first, ..] = run else { return Ok(()) };
        if run.len() == 1 {
            return self.apply_replicated(first);
        }
        let oplog = self.oplog_before(first)?;
        let mut txn = self.begin_transaction();
        txn.replicating = true;
        for entry in run {
            // Each step writes no entry of its own: the run's commit writes them all.
            quietly(|| self.apply_operation(entry, Some(&mut txn)))?;
        }
        let entries = run.iter().map(|entry| entry.as_bytes().to_vec()).collect();
        txn.commit_replicated(&self.cx.engine, &oplog, entries, Durability::Periodic)?;
        if let Err(error) = oplog.trim_if_full(&self.cx.engine) {
            // Nothing changed (the next commit tries again); the engine counts I/O failures.
            tracing::warn!(%error, "trimming the oplog failed");
        }
        Ok(())
    }

    /// The oplog, which must be kept and hold only entries older than `entry`.
    fn oplog_before(&self, entry: &RawDocument) -> Result<std::sync::Arc<crate::oplog::Oplog>> {
        let Some(oplog) = self.oplog() else {
            return Err(Error::IllegalOperation("applying an oplog entry needs the oplog kept".into()));
        };
        let ts = entry_ts(entry)?;
        if ts <= oplog.last() {
            return Err(Error::IllegalOperation(format!(
                "oplog entry at {ts:?} is not after this member's last ({:?})",
                oplog.last()
            )));
        }
        Ok(oplog)
    }

    fn apply_change(&self, entry: &RawDocument) -> Result<()> {
        self.apply_operation(entry, None)
    }

    /// One operation: on its own (`txn: None`, its own engine transaction), or as part of a
    /// transaction being applied.
    fn apply_operation(&self, entry: &RawDocument, txn: Option<&mut DocumentTransaction>) -> Result<()> {
        let get_str = |key: &str| entry.get_str(key).map_err(|e| Error::bad_value(format!("oplog entry {key}: {e}")));
        let get_doc = |key: &str| -> Result<Document> {
            let raw = entry.get_document(key).map_err(|e| Error::bad_value(format!("oplog entry {key}: {e}")))?;
            Document::try_from(raw).map_err(|e| Error::bad_value(format!("oplog entry {key}: {e}")))
        };
        let op = get_str("op")?;
        let ns = get_str("ns")?;
        let (db, name) = ns.split_once('.').unwrap_or((ns, ""));
        match op {
            "i" => {
                let document = entry.get_document("o").map_err(|e| Error::bad_value(format!("insert o: {e}")))?;
                self.apply_put((db, name), document, None, txn)
            }
            "u" => {
                let id = get_doc("o2")?.get("_id").cloned().unwrap_or(Bson::Null);
                let change = entry.get_document("o").map_err(|e| Error::bad_value(e.to_string()))?;
                self.apply_put((db, name), change, Some(id), txn)
            }
            "d" => self.apply_delete((db, name), get_doc("o")?.get("_id").cloned().unwrap_or(Bson::Null), txn),
            "c" => {
                let uuid =
                    entry.get_binary("ui").ok().and_then(|b| bson::Uuid::from_bytes(b.bytes.try_into().ok()?).into());
                let command = get_doc("o")?;
                match command.get("applyOps") {
                    // A transaction's commit, which names its session: the session's record that
                    // it committed is kept here too.
                    Some(Bson::Array(operations)) if txn.is_none() => {
                        let lsid = get_doc("lsid").ok();
                        let number = entry.get_i64("txnNumber").ok();
                        self.apply_transaction(operations, lsid.as_ref().zip(number))
                    }
                    _ => self.apply_command(db, command, uuid),
                }
            }
            "n" => Ok(()),
            other => Err(Error::bad_value(format!("unknown oplog operation '{other}'"))),
        }
    }

    /// An insert (`update_of: None`: `change` is the document) or an update of the document
    /// `update_of` (`change`: a `$v: 2` diff or the whole new version).
    fn apply_put(
        &self,
        (db, name): (&str, &str),
        change: &RawDocument,
        update_of: Option<Bson>,
        txn: Option<&mut DocumentTransaction>,
    ) -> Result<()> {
        let cx = &self.cx;
        let mut locked = match cx.catalog.lock(db, name) {
            Some(locked) => locked,
            None if update_of.is_some() => return Ok(()),
            None => quietly(|| ddl::lock_or_create_replicated(cx, db, name))?,
        };
        let id = match &update_of {
            Some(id) => id.clone(),
            None => document_id(change)?.unwrap_or(Bson::Null),
        };
        let key = id_key(&id);
        let current = latest_document(cx, &locked.collection, &key, txn.as_deref())?;
        let new = match (&update_of, &current) {
            (None, _) => change.to_owned(),
            (Some(_), None) => return Ok(()),
            (Some(_), Some(old)) => updated(old, change)?,
        };
        let mut write = DocumentWrite::within(cx, &locked.collection, txn);
        match &current {
            Some(old) => write.replace(&key, old, &new)?,
            None => write.insert(&key, &new)?,
        }
        locked.collection = write.commit(Durability::Periodic, &[&new])?;
        Ok(())
    }

    fn apply_delete(&self, (db, name): (&str, &str), id: Bson, txn: Option<&mut DocumentTransaction>) -> Result<()> {
        let cx = &self.cx;
        let Some(mut locked) = cx.catalog.lock(db, name) else { return Ok(()) };
        let key = id_key(&id);
        let Some(current) = latest_document(cx, &locked.collection, &key, txn.as_deref())? else { return Ok(()) };
        let mut write = DocumentWrite::within(cx, &locked.collection, txn);
        write.remove(&key, &current)?;
        locked.collection = write.commit(Durability::Periodic, &[&current])?;
        Ok(())
    }

    pub(super) fn apply_command(&self, db: &str, mut command: Document, uuid: Option<bson::Uuid>) -> Result<()> {
        let Some((verb, target)) = command.iter().next().map(|(k, v)| (k.clone(), v.clone())) else {
            return Err(Error::bad_value("empty oplog command"));
        };
        command.remove(&verb);
        let name = target.as_str().unwrap_or_default().to_owned();
        let collection = self.collection((db, name.as_str()));
        let tolerate = |outcome: Result<()>, benign: fn(&Error) -> bool| match outcome {
            Err(error) if benign(&error) => Ok(()),
            other => other,
        };
        match verb.as_str() {
            "create" if command.contains_key("viewOn") => {
                let created = collection.create_with_uuid(command, uuid);
                tolerate(created, |e| matches!(e, Error::NamespaceExists(_)))
            }
            "create" => ddl::create_replicated(&self.cx, db, &name, command, uuid.unwrap_or_default()),
            "drop" => collection.drop().map(drop),
            "dropDatabase" => self.drop_database(db),
            "renameCollection" => {
                let to = command.get_str("to").map_err(|e| Error::bad_value(format!("renameCollection to: {e}")))?;
                let (to_db, to_name) = to.split_once('.').unwrap_or((to, ""));
                let (from_db, from_name) = name.split_once('.').unwrap_or((db, &name));
                let drop_target = command.get_bool("dropTarget").unwrap_or(false);
                self.collection((from_db, from_name)).rename((to_db, to_name), drop_target)
            }
            "createIndexes" if !self.builds_indexes() => Ok(()),
            "createIndexes" => collection.create_indexes(&[command]).map(drop),
            "dropIndexes" => {
                let index = command.get_str("index").unwrap_or_default().to_owned();
                let dropped = collection.drop_indexes(&IndexSelector::Name(index));
                tolerate(dropped.map(drop), |e| matches!(e, Error::IndexNotFound(_)))
            }
            "collMod" if command.contains_key("index") && !self.builds_indexes() => Ok(()),
            "collMod" => match command.remove("index") {
                Some(Bson::Document(mut index)) => {
                    let selector = match index.remove("name") {
                        Some(Bson::String(name)) => IndexSelector::Name(name),
                        _ => IndexSelector::KeyPattern(index.get_document("keyPattern").cloned().unwrap_or_default()),
                    };
                    index.remove("keyPattern");
                    collection.modify_index(&selector, &index).map(drop)
                }
                _ => collection.set_options(command),
            },
            "applyOps" => match target {
                Bson::Array(operations) => self.apply_transaction(&operations, None),
                _ => Err(Error::bad_value("applyOps needs an array of operations")),
            },
            other => Err(Error::IllegalOperation(format!("cannot apply the oplog command '{other}'"))),
        }
    }
}

impl Store {
    /// A transaction's operations (an `applyOps` entry) in one engine transaction, as the
    /// primary committed them: a reader never sees part of it, and a crash keeps all or none.
    /// The entry itself is written by that commit (or after it, if nothing changed).
    fn apply_transaction(&self, operations: &[Bson], session: Option<(&Document, i64)>) -> Result<()> {
        let mut txn = self.begin_transaction();
        for operation in operations {
            let Some(operation) = operation.as_document() else { continue };
            let raw = bson::RawDocumentBuf::try_from(operation).map_err(|e| Error::bad_value(e.to_string()))?;
            // Each step writes no entry of its own: the transaction's commit writes this one.
            quietly(|| self.apply_operation(&raw, Some(&mut txn)))?;
        }
        self.commit_transaction(txn, Durability::Periodic, session)
    }
}

/// The newest version of a document: as committed, or as `txn` (a transaction being applied)
/// left it.
fn latest_document(
    cx: &crate::context::Context,
    collection: &crate::catalog::Descriptor,
    key: &[u8],
    txn: Option<&DocumentTransaction>,
) -> Result<Option<bson::RawDocumentBuf>> {
    let Some(txn) = txn else { return cx.latest_document(collection, key) };
    match txn.read_at().0.get(collection.tree, key)? {
        Some(bytes) => Ok(Some(crate::read::scan::raw(bytes)?)),
        None => Ok(None),
    }
}

/// The new version of `old` after an update entry's `o`: a `$v: 2` diff applied, or the
/// replacement itself.
fn updated(old: &RawDocument, change: &RawDocument) -> Result<bson::RawDocumentBuf> {
    let change = Document::try_from(change).map_err(|e| Error::bad_value(format!("update o: {e}")))?;
    let new = match change.get_document("diff") {
        Ok(diff) if change.contains_key("$v") => {
            let old = Document::try_from(old).map_err(|e| Error::corrupt(format!("document: {e}")))?;
            super::diff::apply(&old, diff)
        }
        _ => change,
    };
    bson::RawDocumentBuf::try_from(&new).map_err(|e| Error::bad_value(format!("updated document: {e}")))
}
