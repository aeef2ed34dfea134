//! validate(): cross-checks a collection's trees and counters against its documents.
//!
//! From one snapshot: every document parses and sits under the key of its own `_id`; the
//! document counter and size counter equal the documents' count and bytes; every index holds
//! exactly the entries its documents give it (no missing, no stale, no extra entries, right
//! payloads), and an index with a multikey document is marked multikey. Tests call it after
//! every step.
//!
//! Memory stays bounded whatever the collection's size (validate used to hold every index's
//! entries in two maps, which exhausted a tight memory limit). One pass over the documents adds
//! a fingerprint of each entry they give to one of `BUCKETS` counters per index (the bucket
//! chosen by the entry's key), one pass over each index subtracts its entries' fingerprints,
//! and an index is consistent when every bucket ends at zero, as MongoDB's validate checks
//! index consistency. Only for an inconsistent index does a second pass gather the entries of
//! the buckets that differ (at most `DETAIL_LIMIT`), to count what is missing and extra.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

use bson::Bson;
use storage::Snapshot;

use crate::catalog::Descriptor;
use crate::context::Context;
use crate::error::Result;
use crate::index::{Index, id_key};
use crate::write::document_id;

/// Fingerprint buckets per index: 64 KiB of counters each.
const BUCKETS: usize = 4096;

/// At most this many entries of each side are gathered to name an inconsistent index's
/// differences (the counts are then lower bounds).
const DETAIL_LIMIT: usize = 100_000;

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
pub(crate) fn validate(cx: &Context, db: &str, name: &str) -> Result<ValidateReport> {
    let collection = cx.catalog.existing(db, name)?;
    let snapshot = cx.engine.snapshot();
    let mut report = ValidateReport::default();
    let mut tallies = vec![Tally::default(); collection.indexes.len()];
    let read = read_documents(&snapshot, &collection, &mut report.errors, |position, key, value| {
        if let Some(tally) = tallies.get_mut(position) {
            tally.add(key, value, 1);
        }
    })?;
    let (bytes, multikey) = (read.bytes, read.multikey);
    report.documents = read.documents;
    match cx.catalog.counters(&cx.engine, &collection) {
        Ok((count, size)) if count != report.documents as i64 || size != bytes => report
            .errors
            .push(format!("counters say {count} documents of {size} bytes; found {} of {bytes}", report.documents)),
        Ok(_) => {}
        Err(error) => report.errors.push(format!("the collection's counters are unreadable: {error}")),
    }
    for (position, (index, mut tally)) in collection.indexes.iter().zip(tallies).enumerate() {
        let entries = read_index(&snapshot, index, &mut report.errors, |key, value| tally.add(key, value, -1));
        report.index_entries.insert(index.name.clone(), entries);
        if index.meta.ready && !tally.is_balanced() {
            report.errors.extend(differences(&snapshot, &collection, position, &tally)?);
        }
        if multikey.get(position).copied().unwrap_or(false) && !index.meta.multikey {
            report.errors.push(format!("index {} has multikey documents but is not marked multikey", index.name));
        }
    }
    Ok(report)
}

/// Per bucket, the entries the documents give minus those the index holds: their number and
/// the wrapping sum of their fingerprints.
#[derive(Clone)]
struct Tally {
    counts: Vec<i64>,
    sums: Vec<u64>,
}

impl Default for Tally {
    fn default() -> Tally {
        Tally { counts: vec![0; BUCKETS], sums: vec![0; BUCKETS] }
    }
}

impl Tally {
    fn add(&mut self, key: &[u8], value: &[u8], sign: i64) {
        let (bucket, print) = (bucket(key), fingerprint(key, value));
        if let (Some(count), Some(sum)) = (self.counts.get_mut(bucket), self.sums.get_mut(bucket)) {
            *count += sign;
            *sum = if sign > 0 { sum.wrapping_add(print) } else { sum.wrapping_sub(print) };
        }
    }

    fn is_balanced(&self) -> bool {
        (0..BUCKETS).all(|bucket| !self.differs(bucket))
    }

    fn differs(&self, bucket: usize) -> bool {
        self.counts.get(bucket).is_some_and(|c| *c != 0) || self.sums.get(bucket).is_some_and(|s| *s != 0)
    }
}

/// The bucket of an entry: by its key alone, so that two entries of one key (a unique key that
/// two documents give) meet in the same bucket.
fn bucket(key: &[u8]) -> usize {
    let mut hasher = std::hash::DefaultHasher::new();
    key.hash(&mut hasher);
    (hasher.finish() % BUCKETS as u64) as usize
}

/// An entry's fingerprint; `Hash` for slices writes their lengths, so where the key ends and
/// the value starts is part of it.
fn fingerprint(key: &[u8], value: &[u8]) -> u64 {
    let mut hasher = std::hash::DefaultHasher::new();
    (key, value).hash(&mut hasher);
    hasher.finish()
}

/// What one pass over the documents counted.
struct DocumentsRead {
    documents: u64,
    bytes: i64,
    /// Per index: whether any document gave it several keys.
    multikey: Vec<bool>,
}

/// Reads every document once: checks each sits under its `_id`'s key and hands each index
/// entry it gives to `entry` (index position, key, value). Damage and bad documents go to
/// `errors`.
fn read_documents(
    snapshot: &Snapshot,
    collection: &Descriptor,
    errors: &mut Vec<String>,
    mut entry: impl FnMut(usize, &[u8], &[u8]),
) -> Result<DocumentsRead> {
    let mut read = DocumentsRead { documents: 0, bytes: 0, multikey: vec![false; collection.indexes.len()] };
    let mut documents = crate::salvage::Documents::new(snapshot, collection.tree);
    while let Some(found) = documents.next_document() {
        let (key, document) = match found {
            Ok(found) => found,
            Err(damage) => {
                errors.push(damage);
                continue;
            }
        };
        read.documents += 1;
        read.bytes += document.as_bytes().len() as i64;
        let id = document_id(&document)?.unwrap_or(Bson::Null);
        let id_bytes = id_key(&id);
        if id_bytes != key {
            errors.push(format!("document {id} is stored under another key"));
        }
        for (position, index) in collection.indexes.iter().enumerate() {
            let (keys, is_multikey) = match index.keys(&document) {
                Ok(keys) => keys,
                Err(error) => {
                    errors.push(format!("index {}: document {id} gives no keys: {error}", index.name));
                    continue;
                }
            };
            if let Some(flag) = read.multikey.get_mut(position) {
                *flag |= is_multikey;
            }
            for key in &keys {
                let (entry_key, entry_value) = index.entry_pair(key, &id_bytes, &document);
                entry(position, &entry_key, &entry_value);
            }
        }
    }
    Ok(read)
}

/// Reads every entry of an index once, handing each to `entry`; returns how many there were.
fn read_index(
    snapshot: &Snapshot,
    index: &Index,
    errors: &mut Vec<String>,
    mut entry: impl FnMut(&[u8], &[u8]),
) -> u64 {
    let mut entries = 0;
    for item in snapshot.salvage(index.tree) {
        match item {
            Ok(storage::Salvaged::Entry(key, value)) => {
                entries += 1;
                entry(&key, &value);
            }
            Ok(storage::Salvaged::Lost { error, .. }) => {
                errors.push(format!("index {}: entries unreadable: {error}", index.name))
            }
            Err(error) => errors.push(format!("index {}: unreadable: {error}", index.name)),
        }
    }
    entries
}

/// Names what differs in an inconsistent index: gathers, from both sides, the entries of the
/// buckets that do not balance (at most `DETAIL_LIMIT` each) and compares them.
fn differences(snapshot: &Snapshot, collection: &Descriptor, position: usize, tally: &Tally) -> Result<Vec<String>> {
    let Some(index) = collection.indexes.get(position) else { return Ok(Vec::new()) };
    let mut errors = Vec::new();
    let (mut wanted, mut found) = (BTreeMap::new(), BTreeMap::new());
    let mut shared_unique_key = false;
    let mut truncated = false;
    let mut ignored = Vec::new(); // reported by the first pass already
    read_documents(snapshot, collection, &mut ignored, |at, key, value| {
        if at != position || !tally.differs(bucket(key)) {
            return;
        }
        if wanted.len() >= DETAIL_LIMIT {
            truncated = true;
        } else if wanted.insert(key.to_vec(), value.to_vec()).is_some() {
            shared_unique_key = true;
        }
    })?;
    read_index(snapshot, index, &mut ignored, |key, value| {
        if !tally.differs(bucket(key)) {
            return;
        }
        if found.len() >= DETAIL_LIMIT {
            truncated = true;
        } else {
            found.insert(key.to_vec(), value.to_vec());
        }
    });
    if shared_unique_key {
        errors.push(format!("index {}: two documents share a unique key", index.name));
    }
    let missing = wanted.keys().filter(|key| !found.contains_key(*key)).count();
    let extra = found.keys().filter(|key| !wanted.contains_key(*key)).count();
    let differ = wanted.iter().filter(|(key, value)| found.get(*key).is_some_and(|found| found != *value)).count();
    let at_least = if truncated { "at least " } else { "" };
    errors.push(format!(
        "index {}: {at_least}{missing} entries missing, {extra} extra, {differ} with other payloads",
        index.name
    ));
    Ok(errors)
}

#[cfg(test)]
mod tests {
    use bson::{doc, rawdoc};
    use storage::Durability;

    use crate::{Store, StoreOptions};

    /// Damages an index behind the store's back (through the engine) and checks that validate
    /// names each difference: an entry removed, one added, one whose payload changed.
    #[test]
    fn each_kind_of_index_damage_is_counted() {
        let store = Store::open_in_memory(StoreOptions::default()).expect("store");
        let documents = (0..3000).map(|i| rawdoc! {"_id": i, "a": i % 17, "u": i}).collect();
        assert!(store.collection(("db", "c")).insert(documents, true, Durability::None).errors.is_empty());
        store.collection(("db", "c")).create_indexes(&[doc! {"key": {"a": 1}, "name": "a_1"}]).expect("index");
        assert!(store.collection(("db", "c")).validate().expect("validate").is_valid());

        let collection = store.cx.catalog.existing("db", "c").expect("collection");
        let index = collection.indexes.iter().find(|index| index.name == "a_1").expect("a_1");
        let snapshot = store.cx.engine.snapshot();
        let entries: Vec<(Vec<u8>, Vec<u8>)> = snapshot.iter(index.tree).take(2).map(|e| e.expect("entry")).collect();
        let [(first_key, _), (second_key, second_value)] = entries.as_slice() else { panic!("two entries") };
        let mut damage = store.cx.engine.begin();
        damage.delete(index.tree, first_key.clone());
        damage.put(index.tree, [second_key.as_slice(), b"x"].concat(), second_value.clone());
        damage.put(index.tree, second_key.clone(), [second_value.as_slice(), b"?"].concat());
        damage.commit(Durability::None).expect("commit");

        let report = store.collection(("db", "c")).validate().expect("validate");
        assert_eq!(report.errors, vec!["index a_1: 1 entries missing, 1 extra, 1 with other payloads".to_owned()]);
        assert_eq!(report.index_entries.get("a_1"), Some(&3000), "one entry removed, one added");
    }
}
