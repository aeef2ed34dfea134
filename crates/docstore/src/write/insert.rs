//! Inserts: `_id` generation, validation, and bulk inserts with per-document errors.
//!
//! A document without `_id` gets a new ObjectId prepended to the client's bytes (the rest is
//! copied, never re-encoded). Documents are committed in groups of up to [`GROUP_DOCUMENTS`]
//! (or [`GROUP_BYTES`]) per engine transaction: each document is still all-or-nothing, and a
//! group saves the per-commit cost. If a group fails on a duplicate key, it is retried one
//! document per transaction so that exactly the duplicates fail, reported by their position in
//! the request. `ordered` stops at the first error; unordered goes on.

use bson::{Bson, RawDocument, RawDocumentBuf, oid::ObjectId};

use crate::catalog::Locked;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::index::id_key;
use crate::write::{Recording, Writer, check_id, document_id};

/// Documents per engine transaction in a bulk insert.
pub(crate) const GROUP_DOCUMENTS: usize = 1000;
/// Bytes of documents per engine transaction in a bulk insert.
pub(crate) const GROUP_BYTES: usize = 16 << 20;

/// The result of an insert: how many documents went in, and each failure by its index in the
/// request.
#[derive(Debug, Default)]
pub struct InsertOutcome {
    pub inserted: usize,
    pub errors: Vec<(usize, Error)>,
    /// The inserted documents could not be made as durable as asked (the log's sync failed:
    /// the engine has stopped).
    pub durability_error: Option<Error>,
}

/// A document ready to insert.
struct Prepared {
    position: usize,
    id: Vec<u8>,
    raw: RawDocumentBuf,
}

impl Context {
    pub(crate) fn insert(
        &self,
        db: &str,
        name: &str,
        documents: Vec<RawDocumentBuf>,
        ordered: bool,
        writer: &mut Writer<'_>,
    ) -> InsertOutcome {
        let mut outcome = InsertOutcome::default();
        let mut locked = match crate::catalog::ddl::lock_or_create(self, db, name) {
            Ok(locked) => locked,
            Err(error) => {
                if !documents.is_empty() {
                    outcome.errors.push((0, error));
                }
                return outcome;
            }
        };
        // In a transaction every document goes alone: the first error ends the statement (and
        // the transaction).
        let (group_documents, ordered) = if writer.in_transaction() { (1, true) } else { (GROUP_DOCUMENTS, ordered) };
        let mut group: Vec<Prepared> = Vec::new();
        let mut group_bytes = 0;
        for (position, document) in documents.into_iter().enumerate() {
            match prepare(position, document) {
                Ok(prepared) => {
                    group_bytes += prepared.raw.as_bytes().len();
                    group.push(prepared);
                    if group.len() >= group_documents || group_bytes >= GROUP_BYTES {
                        group_bytes = 0;
                        let taken = std::mem::take(&mut group);
                        if !self.insert_group(&mut locked, taken, ordered, writer, &mut outcome) {
                            return outcome;
                        }
                    }
                }
                Err(error) => {
                    group_bytes = 0;
                    let taken = std::mem::take(&mut group);
                    if !self.insert_group(&mut locked, taken, ordered, writer, &mut outcome) {
                        return outcome;
                    }
                    outcome.errors.push((position, error));
                    if ordered {
                        return outcome;
                    }
                }
            }
        }
        self.insert_group(&mut locked, group, ordered, writer, &mut outcome);
        outcome
    }

    /// Inserts a group; returns whether to go on (false: ordered and something failed).
    fn insert_group(
        &self,
        locked: &mut Locked,
        group: Vec<Prepared>,
        ordered: bool,
        writer: &mut Writer<'_>,
        outcome: &mut InsertOutcome,
    ) -> bool {
        if group.is_empty() {
            return true;
        }
        let error = match self.commit_documents(locked, &group, writer) {
            Ok(()) => {
                outcome.inserted += group.len();
                return true;
            }
            Err(error) => error,
        };
        if let [prepared] = group.as_slice() {
            outcome.errors.push((prepared.position, error));
            return !ordered;
        }
        // Pin the failure (a duplicate, parallel arrays, ...) on exactly the documents that
        // cause it: one transaction per document.
        for prepared in group {
            match self.commit_documents(locked, std::slice::from_ref(&prepared), writer) {
                Ok(()) => outcome.inserted += 1,
                Err(error) => {
                    outcome.errors.push((prepared.position, error));
                    if ordered {
                        return false;
                    }
                }
            }
        }
        true
    }

    fn commit_documents(&self, locked: &mut Locked, documents: &[Prepared], writer: &mut Writer<'_>) -> Result<()> {
        if !writer.in_transaction() {
            for prepared in documents {
                self.await_unheld(locked, &prepared.id)?;
            }
        }
        let (durability, retry) = (writer.durability, writer.retry.filter(|_| !writer.in_transaction()));
        let mut write = writer.write(self, &locked.collection);
        for prepared in documents {
            write.insert(&prepared.id, &prepared.raw)?;
        }
        if let Some(retry) = retry {
            // One record per run of consecutive statement ids, not one per document.
            let ids: Vec<i32> = documents.iter().map(|p| retry.stmt_id(p.position)).collect();
            for (first, last) in runs(&ids) {
                write.record_run(retry, first, last, bson::doc! {"n": 1})?;
            }
        }
        let raws: Vec<&RawDocument> = documents.iter().map(|p| p.raw.as_ref()).collect();
        locked.collection = write.commit(durability, &raws)?;
        self.after_capped_insert(locked);
        Ok(())
    }

    /// A capped collection past its limits loses its oldest documents; the documents inserted
    /// are committed whatever happens here (a failed trim is retried by the next insert).
    fn after_capped_insert(&self, locked: &mut Locked) {
        if locked.collection.capped.is_none() {
            return;
        }
        if let Err(error) = self.trim_capped(locked) {
            tracing::warn!(%error, collection = %locked.collection.namespace(), "trimming a capped collection failed");
        }
        self.capped_inserted();
    }

    /// Inserts one decoded document under a lock already held (an upsert), into its writer's transaction, recording a
    /// retryable statement with it.
    pub(crate) fn insert_one_recorded(
        &self,
        locked: &mut Locked,
        document: RawDocumentBuf,
        writer: &mut Writer<'_>,
        recording: Option<Recording<'_>>,
    ) -> Result<Bson> {
        let prepared = prepare(0, document)?;
        let id = document_id(&prepared.raw)?.unwrap_or(Bson::Null);
        if !writer.in_transaction() {
            self.await_unheld(locked, &prepared.id)?;
        }
        let durability = writer.durability;
        let mut write = writer.write(self, &locked.collection);
        write.insert(&prepared.id, &prepared.raw)?;
        if let Some((retry, stmt_id, result)) = recording {
            let inserted =
                bson::Document::try_from(prepared.raw.as_ref()).map_err(|e| Error::bad_value(e.to_string()))?;
            write.record(retry, stmt_id, result(&inserted)?)?;
        }
        locked.collection = write.commit(durability, &[prepared.raw.as_ref()])?;
        self.after_capped_insert(locked);
        Ok(id)
    }
}

/// Consecutive runs (`first..=last`) of statement ids, in order.
fn runs(ids: &[i32]) -> Vec<(i32, i32)> {
    let mut runs: Vec<(i32, i32)> = Vec::new();
    for &id in ids {
        match runs.last_mut() {
            Some((_, last)) if id == *last + 1 => *last = id,
            _ => runs.push((id, id)),
        }
    }
    runs
}

fn prepare(position: usize, document: RawDocumentBuf) -> Result<Prepared> {
    for element in document.iter() {
        element.map_err(|e| Error::bad_value(format!("invalid BSON document: {e}")))?;
    }
    let raw = match document_id(&document)? {
        Some(id) => {
            check_id(&id)?;
            document
        }
        None => with_generated_id(&document)?,
    };
    let id = document_id(&raw)?.unwrap_or(Bson::Null);
    Ok(Prepared { position, id: id_key(&id), raw })
}

/// The document with `_id: ObjectId()` as its first field, the rest of its bytes unchanged.
///
/// ```text
/// length:i32le | 0x07 "_id" 0x00 oid:12 | original elements and trailing 0x00
/// ```
pub(crate) fn with_generated_id(document: &RawDocument) -> Result<RawDocumentBuf> {
    let original = document.as_bytes();
    let elements = original.get(4..).ok_or_else(|| Error::bad_value("document shorter than its header"))?;
    let id_element_bytes = 1 + 4 + 12;
    let length = i32::try_from(original.len() + id_element_bytes)
        .map_err(|_| Error::DocumentTooLarge("document too large".into()))?;
    let mut bytes = Vec::with_capacity(original.len() + id_element_bytes);
    bytes.extend_from_slice(&length.to_le_bytes());
    bytes.push(0x07);
    bytes.extend_from_slice(b"_id\0");
    bytes.extend_from_slice(&ObjectId::new().bytes());
    bytes.extend_from_slice(elements);
    RawDocumentBuf::from_bytes(bytes).map_err(|e| Error::bad_value(format!("invalid BSON document: {e}")))
}
