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
/// Damage (a block that fails its checksum, a document that does not parse) is reported in
/// the errors, with the `_id`s around it, and the check goes on past it.
pub fn validate(engine: &Engine, catalog: &Catalog, db: &str, name: &str) -> Result<ValidateReport> {
    let collection = catalog.existing(db, name)?;
    let snapshot = engine.snapshot();
    let mut report = ValidateReport::default();
    let mut bytes = 0i64;
    let mut expected: Vec<BTreeMap<Vec<u8>, Vec<u8>>> = vec![BTreeMap::new(); collection.indexes.len()];
    let mut multikey = vec![false; collection.indexes.len()];
    let mut documents = crate::salvage::Documents::new(&snapshot, collection.tree);
    while let Some(found) = documents.next_document() {
        let (key, document) = match found {
            Ok(found) => found,
            Err(damage) => {
                report.errors.push(damage);
                continue;
            }
        };
        report.documents += 1;
        bytes += document.as_bytes().len() as i64;
        let id = document_id(&document)?.unwrap_or(Bson::Null);
        if id_key(&id) != key {
            report.errors.push(format!("document {id} is stored under another key"));
        }
        for (position, index) in collection.indexes.iter().enumerate() {
            let (keys, is_multikey) = match index.keys(&document) {
                Ok(keys) => keys,
                Err(error) => {
                    report.errors.push(format!("index {}: document {id} gives no keys: {error}", index.name));
                    continue;
                }
            };
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
    match catalog.counters(engine, &collection) {
        Ok((count, size)) if count != report.documents as i64 || size != bytes => report
            .errors
            .push(format!("counters say {count} documents of {size} bytes; found {} of {bytes}", report.documents)),
        Ok(_) => {}
        Err(error) => report.errors.push(format!("the collection's counters are unreadable: {error}")),
    }
    for ((index, wanted), is_multikey) in collection.indexes.iter().zip(expected).zip(multikey) {
        let mut found = BTreeMap::new();
        for item in snapshot.salvage(index.tree) {
            match item {
                Ok(storage::Salvaged::Entry(key, value)) => {
                    found.insert(key, value);
                }
                Ok(storage::Salvaged::Lost { error, .. }) => {
                    report.errors.push(format!("index {}: entries unreadable: {error}", index.name))
                }
                Err(error) => report.errors.push(format!("index {}: unreadable: {error}", index.name)),
            }
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
