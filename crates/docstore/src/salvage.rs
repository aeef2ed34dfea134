//! Reading a damaged collection: every document that can be read, and what cannot, named by the
//! `_id`s around it. `validate` reports damage through it; `strata repair` copies what it
//! yields into a new data directory (`Store::salvage_documents`).
//!
//! The engine's salvage (`storage::Snapshot::salvage`) yields entries and the key ranges of the
//! blocks that fail their checksums; here an entry must also parse as a document.

use bson::{Bson, RawDocumentBuf};
use storage::{Salvage, Salvaged, Snapshot, TreeId};

use crate::read::scan::raw;
use crate::write::document_id;

/// A collection's documents tree, read past damage.
pub(crate) struct Documents {
    entries: Salvage,
    /// The `_id` of the last document read, to say where damage lies.
    last_id: Option<Bson>,
}

impl Documents {
    pub(crate) fn new(snapshot: &Snapshot, tree: TreeId) -> Documents {
        Documents { entries: snapshot.salvage(tree), last_id: None }
    }

    /// The next document and its key, or a description of damage met instead; `None` at the end.
    pub(crate) fn next_document(&mut self) -> Option<Result<(Vec<u8>, RawDocumentBuf), String>> {
        let where_ = |last: &Option<Bson>| match last {
            Some(id) => format!("after _id {id}"),
            None => "at the start of the collection".to_string(),
        };
        let damage = match self.entries.next()? {
            Ok(Salvaged::Entry(key, value)) => match raw(value) {
                Ok(document) => {
                    self.last_id = document_id(&document).ok().flatten();
                    return Some(Ok((key, document)));
                }
                Err(error) => format!("a document {} does not parse: {error}", where_(&self.last_id)),
            },
            Ok(Salvaged::Lost { error, .. }) => {
                format!("documents {} are unreadable: {error}", where_(&self.last_id))
            }
            Err(error) => format!("the documents {} are unreadable: {error}", where_(&self.last_id)),
        };
        Some(Err(damage))
    }
}
