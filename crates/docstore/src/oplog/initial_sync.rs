//! Initial sync's writes: a member that joins a running set, or fell further behind than the
//! set's consensus log reaches, copies another member's data as of one snapshot, then applies
//! that member's oplog after it (`server::replication::initial_sync` drives this).
//!
//! The copy is not a change of the set's history, so nothing here writes an oplog entry: the
//! collections, their indexes and their documents are created through the ordinary write paths
//! (indexes before documents, so every document's keys go in with it, as buffered messages of
//! the write-optimized trees, a batch per engine transaction). The oplog then starts with the
//! source's entry at the snapshot ([`Store::sync_oplog_start`]), whose change the copy holds,
//! and grows by [`Store::apply_replicated`].

use bson::{Bson, Document, RawDocument, RawDocumentBuf};
use storage::Durability;

use super::apply::quietly;
use crate::Store;
use crate::error::{Error, Result};
use crate::index::id_key;
use crate::write::{DocumentWrite, document_id};

impl Store {
    /// Creates the collection or view `info` describes (an entry of another member's
    /// `listCollections`: name, type, options, `info.uuid`) in `db`, with the same UUID and
    /// the secondary indexes `indexes` (entries of its `listIndexes`).
    pub fn sync_collection(&self, db: &str, info: &Document, indexes: &[Document]) -> Result<()> {
        let name = info.get_str("name").map_err(|e| Error::bad_value(format!("listCollections name: {e}")))?;
        let uuid = match info.get_document("info").ok().and_then(|i| i.get("uuid")) {
            Some(Bson::Binary(binary)) => binary.bytes.as_slice().try_into().ok().map(bson::Uuid::from_bytes),
            _ => None,
        };
        let mut create = bson::doc! {"create": name};
        create.extend(info.get_document("options").cloned().unwrap_or_default());
        quietly(|| self.apply_command(db, create, uuid))?;
        let secondary = indexes.iter().filter(|index| index.get_str("name").ok() != Some("_id_"));
        for index in secondary.filter(|_| self.builds_indexes()) {
            let mut command = bson::doc! {"createIndexes": name};
            command.extend(index.clone());
            quietly(|| self.apply_command(db, command, None))?;
        }
        Ok(())
    }

    /// Inserts `documents`, copied from another member, into `db.name` (created by
    /// [`Store::sync_collection`]): one engine transaction, no validation, no oplog entry.
    pub fn sync_documents(&self, db: &str, name: &str, documents: &[RawDocumentBuf]) -> Result<()> {
        let cx = &self.cx;
        quietly(|| {
            let mut locked = cx
                .catalog
                .lock(db, name)
                .ok_or_else(|| Error::NamespaceNotFound(format!("{db}.{name} was not created before its documents")))?;
            let mut write = DocumentWrite::new(cx, &locked.collection);
            for document in documents {
                write.insert(&id_key(&document_id(document)?.unwrap_or(Bson::Null)), document)?;
            }
            let written: Vec<&RawDocument> = documents.iter().map(AsRef::as_ref).collect();
            locked.collection = write.commit(Durability::Periodic, &written)?;
            Ok(())
        })
    }

    /// Starts this store's (empty) oplog with `entry`, the source's entry at the snapshot the
    /// copy was read at: its change is in the copy already, so it is written, not applied.
    pub fn sync_oplog_start(&self, entry: &RawDocument) -> Result<()> {
        let Some(oplog) = self.oplog() else {
            return Err(Error::IllegalOperation("initial sync needs the oplog kept".into()));
        };
        if oplog.last() != (bson::Timestamp { time: 0, increment: 0 }) {
            return Err(Error::IllegalOperation("initial sync starts the oplog of an emptied store only".into()));
        }
        let txn = self.cx.engine.begin();
        oplog.commit_raw(txn, entry.as_bytes().to_vec(), Durability::Periodic)
    }
}
