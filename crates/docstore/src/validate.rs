//! validate(): cross-checks a collection's trees and counters against its documents.
//!
//! From one snapshot: every document parses and sits under the key of its own `_id`; the
//! document counter and size counter equal the documents' count and bytes; every index holds
//! exactly the entries its documents give it (no missing, no stale, no extra entries, right
//! payloads), and an index with a multikey document is marked multikey. Tests call it after
//! every step.

use std::collections::BTreeMap;

use bson::Bson;
use storage::Engine;

use crate::catalog::Catalog;
use crate::error::Result;
use crate::index::id_key;
use crate::read::scan::raw;
use crate::write::document_id;

/// What validate found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ValidateReport {
    pub documents: u64,
    pub index_entries: BTreeMap<String, u64>,
    /// Each problem found; empty when the collection is valid.
    pub errors: Vec<String>,
}

impl ValidateReport {
    pub fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }
}

/// Cross-checks a collection's documents, index entries and counters (see the module header).
pub fn validate(engine: &Engine, catalog: &Catalog, db: &str, name: &str) -> Result<ValidateReport> {
    let collection = catalog.existing(db, name)?;
    let snapshot = engine.snapshot();
    let mut report = ValidateReport::default();
    let mut bytes = 0i64;
    let mut expected: Vec<BTreeMap<Vec<u8>, Vec<u8>>> = vec![BTreeMap::new(); collection.indexes.len()];
    let mut multikey = vec![false; collection.indexes.len()];
    for entry in snapshot.iter(collection.tree) {
        let (key, value) = entry?;
        let document = raw(value)?;
        report.documents += 1;
        bytes += document.as_bytes().len() as i64;
        let id = document_id(&document)?.unwrap_or(Bson::Null);
        if id_key(&id) != key {
            report.errors.push(format!("document {id} is stored under another key"));
        }
        for (position, index) in collection.indexes.iter().enumerate() {
            let (keys, is_multikey) = index.keys(&document)?;
            multikey[position] |= is_multikey;
            for key in &keys {
                let (entry_key, entry_value) = index.entry_pair(key, &id_key(&id), &document);
                if let Some(slot) = expected.get_mut(position)
                    && slot.insert(entry_key, entry_value).is_some()
                {
                    report.errors.push(format!("index {}: two documents share a unique key", index.name));
                }
            }
        }
    }
    let (count, size) = catalog.counters(engine, &collection)?;
    if count != report.documents as i64 || size != bytes {
        report
            .errors
            .push(format!("counters say {count} documents of {size} bytes; found {} of {bytes}", report.documents));
    }
    for ((index, wanted), is_multikey) in collection.indexes.iter().zip(expected).zip(multikey) {
        let mut found = BTreeMap::new();
        for entry in snapshot.iter(index.tree) {
            let (key, value) = entry?;
            found.insert(key, value);
        }
        report.index_entries.insert(index.name.clone(), found.len() as u64);
        if index.meta.ready && found != wanted {
            let missing = wanted.keys().filter(|k| !found.contains_key(*k)).count();
            let extra = found.keys().filter(|k| !wanted.contains_key(*k)).count();
            report
                .errors
                .push(format!("index {}: {missing} entries missing, {extra} extra, or payloads differ", index.name));
        }
        if is_multikey && !index.meta.multikey {
            report.errors.push(format!("index {} has multikey documents but is not marked multikey", index.name));
        }
    }
    Ok(report)
}
