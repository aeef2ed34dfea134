//! Retryable writes: the record of each statement a session executed, kept with the write.
//!
//! A driver retries a write it is unsure of with the same session id (`lsid`), transaction
//! number (`txnNumber`) and statement id (`stmtId`). The first execution commits, **in the same
//! engine transaction as its documents**, a row in the `__sessions` tree:
//!
//! ```text
//! key   lsid id (16 bytes, the session's UUID) | txnNumber (8 bytes big-endian) | stmtId (4 bytes big-endian)
//! value BSON: the statement's result, e.g. {n: 1}, {n, nModified, upserted?}, findAndModify's
//!       {value, lastErrorObject}
//! ```
//!
//! so a retry finds the row if and only if the write happened (before a crash or not), and gets
//! the first result instead of writing twice. A run of consecutive statements with one result
//! (an insert group's documents, each `{n: 1}`) is one row under its first statement, its value
//! naming the last (`lastStmtId`): a lookup finds the row at or before the statement. A statement that changed nothing (an update that
//! matched nothing) commits its row alone. The first statement of a newer `txnNumber` deletes
//! the session's older rows in its transaction; the highest `txnNumber` recorded is how a retry
//! of an older one is recognised after a restart (TransactionTooOld).

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};

use bson::{Document, RawDocumentBuf};
use storage::{Snapshot, Transaction, TreeId};

use crate::error::{Error, Result};

pub(crate) const SESSIONS_TREE: &str = "__sessions";

/// A retryable write's session statement(s).
#[derive(Debug)]
pub struct Retry {
    /// The session's `lsid.id` (a UUID).
    pub lsid: [u8; 16],
    /// The whole `lsid` document, for the oplog entries.
    pub lsid_document: Document,
    pub txn_number: i64,
    /// The statement ids: one per document of an insert (by position in the request), one for
    /// an update, a delete or a findAndModify.
    pub stmt_ids: Vec<i32>,
    /// Whether this `txnNumber` is new for the session: the first commit then forgets the
    /// older rows.
    pub forget_older: AtomicBool,
}

impl Retry {
    pub fn new(lsid: [u8; 16], lsid_document: Document, txn_number: i64, stmt_ids: Vec<i32>, newer: bool) -> Retry {
        Retry { lsid, lsid_document, txn_number, stmt_ids, forget_older: AtomicBool::new(newer) }
    }

    /// The statement id of position `index`.
    pub fn stmt_id(&self, index: usize) -> i32 {
        self.stmt_ids.get(index).copied().unwrap_or(index as i32)
    }

    /// Puts the record of statement `stmt_id` into `txn` (and, the first time, the deletion of
    /// the session's older records).
    pub fn record(&self, txn: &mut Transaction<'_>, tree: TreeId, stmt_id: i32, result: &Document) -> Result<()> {
        if self.forget_older.swap(false, Ordering::AcqRel) {
            txn.delete_range(tree, key(&self.lsid, 0, 0).to_vec(), Some(key(&self.lsid, self.txn_number, 0).to_vec()));
        }
        let value = RawDocumentBuf::try_from(result).map_err(|e| Error::bad_value(e.to_string()))?;
        txn.put(tree, key(&self.lsid, self.txn_number, stmt_id).to_vec(), value.into_bytes());
        Ok(())
    }
}

/// A record as a replica set's secondaries get it: an oplog no-op (`op: "n"`) in the commit of
/// the write it records, `o: {msg: "retryable write", retry: {lsid, txnNumber, stmtId, value}}`
/// (`lsid` the 16 bytes of the session's id, `value` the row's BSON), so a retry that reaches a
/// new primary after a failover finds the record there too.
pub(crate) fn record_entry(
    lsid: &[u8; 16],
    txn_number: i64,
    stmt_id: i32,
    value: &Document,
) -> Result<crate::oplog::Entry> {
    let lsid = bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: lsid.to_vec() };
    let retry = bson::doc! {"lsid": lsid, "txnNumber": txn_number, "stmtId": stmt_id, "value": value.clone()};
    crate::oplog::Entry::noop_with("retryable write", bson::doc! {"retry": retry})
}

/// Writes a record a primary replicated ([`record_entry`]'s `retry`), forgetting the session's
/// older `txnNumber`s as the primary did.
pub(crate) fn put_replicated(txn: &mut Transaction<'_>, tree: TreeId, retry: &Document) -> Result<()> {
    let lsid: [u8; 16] = retry
        .get_binary_generic("lsid")
        .ok()
        .and_then(|bytes| bytes.as_slice().try_into().ok())
        .ok_or_else(|| Error::bad_value("a replicated retry record without its lsid"))?;
    let txn_number = retry.get_i64("txnNumber").map_err(|e| Error::bad_value(e.to_string()))?;
    let stmt_id = retry.get_i32("stmtId").map_err(|e| Error::bad_value(e.to_string()))?;
    let value = retry.get_document("value").map_err(|e| Error::bad_value(e.to_string()))?;
    txn.delete_range(tree, key(&lsid, 0, 0).to_vec(), Some(key(&lsid, txn_number, 0).to_vec()));
    let value = RawDocumentBuf::try_from(value).map_err(|e| Error::bad_value(e.to_string()))?;
    txn.put(tree, key(&lsid, txn_number, stmt_id).to_vec(), value.into_bytes());
    Ok(())
}

/// In a row recording a run of statements, the last one's id.
const LAST_STMT_FIELD: &str = "lastStmtId";

/// The row of a run of statements `first..=last` sharing `result`.
pub(crate) fn run_value(first: i32, last: i32, result: &Document) -> Document {
    let mut value = result.clone();
    if last > first {
        value.insert(LAST_STMT_FIELD, last);
    }
    value
}

/// A statement's row key.
pub(crate) fn key(lsid: &[u8; 16], txn_number: i64, stmt_id: i32) -> [u8; 28] {
    let mut key = [0u8; 28];
    key[..16].copy_from_slice(lsid);
    key[16..24].copy_from_slice(&(txn_number as u64).to_be_bytes());
    key[24..].copy_from_slice(&(stmt_id as u32).to_be_bytes());
    key
}

/// The result recorded for a statement, if it was executed: its own row, or a run's row that
/// starts before it and reaches it.
pub(crate) fn executed(
    snapshot: &Snapshot,
    tree: TreeId,
    lsid: &[u8; 16],
    txn_number: i64,
    stmt_id: i32,
) -> Result<Option<Document>> {
    let (low, high) = (key(lsid, txn_number, 0), key(lsid, txn_number, stmt_id));
    let row = snapshot
        .range::<(Bound<&[u8]>, Bound<&[u8]>)>(tree, (Bound::Included(&low[..]), Bound::Included(&high[..])))
        .next_back()
        .transpose()?;
    let Some((row_key, bytes)) = row else { return Ok(None) };
    let mut result =
        Document::from_reader(bytes.as_slice()).map_err(|e| Error::corrupt(format!("session record: {e}")))?;
    let last = result.remove(LAST_STMT_FIELD).and_then(|last| last.as_i32());
    let covers = row_key == high || last.is_some_and(|last| last >= stmt_id);
    Ok(covers.then_some(result))
}

/// The highest `txnNumber` the session has records of.
pub(crate) fn last_txn_number(snapshot: &Snapshot, tree: TreeId, lsid: &[u8; 16]) -> Result<Option<i64>> {
    let start = key(lsid, 0, 0);
    let end = key(lsid, -1, -1);
    let last = snapshot
        .range::<(Bound<&[u8]>, Bound<&[u8]>)>(tree, (Bound::Included(&start[..]), Bound::Included(&end[..])))
        .next_back()
        .transpose()?;
    Ok(last.and_then(|(key, _)| key.get(16..24).and_then(|b| b.try_into().ok())).map(|b| u64::from_be_bytes(b) as i64))
}

/// The statement id of a multi-document transaction's commit record: its row says the
/// transaction with that `txnNumber` committed, so that a `commitTransaction` retried after a
/// failover or a restart is answered "committed" rather than "no such transaction" (which
/// would make the driver run the transaction again). Outside the ids drivers give statements.
const COMMITTED_STMT: i32 = -2;

/// The commit record of transaction `txn_number` of the session whose `lsid` is given, as
/// (key, value) for the commit's own writes; `None` if the lsid has no 16-byte id.
pub(crate) fn commit_record(lsid: &Document, txn_number: i64) -> Option<([u8; 28], Vec<u8>)> {
    let id: [u8; 16] = match lsid.get("id") {
        Some(bson::Bson::Binary(binary)) => binary.bytes.as_slice().try_into().ok()?,
        _ => return None,
    };
    let value = RawDocumentBuf::try_from(&bson::doc! {"committed": true}).ok()?;
    Some((key(&id, txn_number, COMMITTED_STMT), value.into_bytes()))
}

/// Whether the session's transaction `txn_number` committed (its [`commit_record`] is there).
pub(crate) fn transaction_committed(
    snapshot: &Snapshot,
    tree: TreeId,
    lsid: &[u8; 16],
    txn_number: i64,
) -> Result<bool> {
    Ok(snapshot.get(tree, &key(lsid, txn_number, COMMITTED_STMT))?.is_some())
}

/// Deletes every record of a session (it ended or expired).
pub(crate) fn forget(txn: &mut Transaction<'_>, tree: TreeId, lsid: &[u8; 16]) {
    txn.delete_range(tree, key(lsid, 0, 0).to_vec(), Some(key(lsid, -1, -1).to_vec()));
}
