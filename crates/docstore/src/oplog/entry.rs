//! Oplog entries in MongoDB's shape (`local.oplog.rs`), built before their timestamp is known.
//!
//! Every entry starts with its `ts` element, so that the [`super::Oplog`] stamps it in place
//! (eight bytes at a fixed offset) under its ordering lock instead of re-encoding the entry:
//!
//! ```text
//! length:i32 | 0x11 "ts\0" ts:u64le | t: term | v: 2 | op | ns | o | o2? | wall | ui? | lsid? txnNumber? stmtId?
//! ```
//!
//! `op` is `i` (insert: `o` the document, `o2` its `_id`), `u` (update: `o` a `$v: 2` diff or
//! the whole replacement, `o2` the `_id`), `d` (delete: `o` the `_id`), `c` (a command on
//! `db.$cmd`: create, drop, renameCollection, createIndexes, dropIndexes, dropDatabase,
//! applyOps) or `n` (a no-op; one in the commit of each retryable write carries its record, see
//! `retry::record_entry`).

use bson::raw::cstr;
use bson::{Binary, Bson, DateTime, Document, RawDocument, RawDocumentBuf, Timestamp, Uuid, doc};

use crate::error::{Error, Result};

/// Where the `ts` value sits in every entry: after the length, the type byte and `"ts\0"`.
const TS_OFFSET: usize = 4 + 1 + 3;

/// Where the `t` value sits: after `ts` (eight bytes), its type byte and `"t\0"`.
const TERM_OFFSET: usize = TS_OFFSET + 8 + 1 + 2;

/// The term of entries written before any election (a set of one that never had a second
/// member); a member that becomes primary stamps its consensus term instead.
pub const TERM: i64 = 1;

/// An entry waiting for its timestamp.
#[derive(Debug, Clone)]
pub struct Entry {
    bytes: RawDocumentBuf,
    /// Pre-images of the documents it changes (collections with `changeStreamPreAndPostImages`),
    /// by operation index (0, or the place in an `applyOps`), kept beside the oplog.
    images: Vec<(u32, Vec<u8>)>,
}

impl Entry {
    fn start(op: &str, ns: &str) -> RawDocumentBuf {
        let mut bytes = RawDocumentBuf::new();
        bytes.append(cstr!("ts"), Timestamp { time: 0, increment: 0 });
        bytes.append(cstr!("t"), TERM);
        bytes.append(cstr!("v"), 2_i64);
        bytes.append(cstr!("op"), op);
        bytes.append(cstr!("ns"), ns);
        bytes
    }

    fn finish(mut bytes: RawDocumentBuf) -> Entry {
        bytes.append(cstr!("wall"), DateTime::now());
        Entry { bytes, images: Vec::new() }
    }

    /// Keeps the changed document's version before the change (its pre-image).
    pub fn with_pre_image(mut self, before: &RawDocument) -> Entry {
        self.images.push((0, before.as_bytes().to_vec()));
        self
    }

    /// Keeps pre-images of an `applyOps` entry's operations.
    pub fn with_images(mut self, images: Vec<(u32, Vec<u8>)>) -> Entry {
        self.images.extend(images);
        self
    }

    /// Takes the entry's pre-images out.
    pub fn take_images(&mut self) -> Vec<(u32, Vec<u8>)> {
        std::mem::take(&mut self.images)
    }

    pub fn insert(ns: &str, document: &RawDocument, id: &Bson) -> Result<Entry> {
        let mut bytes = Entry::start("i", ns);
        bytes.append(cstr!("o"), document);
        bytes.append(cstr!("o2"), raw(&doc! {"_id": id.clone()})?);
        Ok(Entry::finish(bytes))
    }

    /// `change`: a `$v: 2` diff ([`super::diff`]) or the whole new document.
    pub fn update(ns: &str, id: &Bson, change: &Document) -> Result<Entry> {
        let mut bytes = Entry::start("u", ns);
        bytes.append(cstr!("o"), raw(change)?);
        bytes.append(cstr!("o2"), raw(&doc! {"_id": id.clone()})?);
        Ok(Entry::finish(bytes))
    }

    pub fn delete(ns: &str, id: &Bson) -> Result<Entry> {
        let mut bytes = Entry::start("d", ns);
        bytes.append(cstr!("o"), raw(&doc! {"_id": id.clone()})?);
        Ok(Entry::finish(bytes))
    }

    /// A command on `db.$cmd`, e.g. `{create: "c"}` or `{dropDatabase: 1}`.
    pub fn command(db: &str, command: &Document) -> Result<Entry> {
        let mut bytes = Entry::start("c", &format!("{db}.$cmd"));
        bytes.append(cstr!("o"), raw(command)?);
        Ok(Entry::finish(bytes))
    }

    /// A no-op entry (`msg` says why).
    pub fn noop(msg: &str) -> Result<Entry> {
        Entry::noop_with(msg, Document::new())
    }

    /// A no-op entry carrying `fields` beside its `msg` (a retryable write's record).
    pub fn noop_with(msg: &str, fields: Document) -> Result<Entry> {
        let mut o = doc! {"msg": msg};
        o.extend(fields);
        let mut bytes = Entry::start("n", "");
        bytes.append(cstr!("o"), raw(&o)?);
        Ok(Entry::finish(bytes))
    }

    /// Names the collection the entry changes by its UUID (`ui`), as mongod's entries do:
    /// change streams show it as `collectionUUID`. `None` (a view, a database): no `ui`.
    pub fn with_collection_uuid(mut self, uuid: Option<Uuid>) -> Entry {
        if let Some(uuid) = uuid {
            self.bytes.append(cstr!("ui"), Binary::from_uuid(uuid));
        }
        self
    }

    /// Adds the session fields of a retryable write or a transaction.
    pub fn with_session(mut self, lsid: &Document, txn_number: i64, stmt_id: Option<i32>) -> Result<Entry> {
        self.bytes.append(cstr!("lsid"), raw(lsid)?);
        self.bytes.append(cstr!("txnNumber"), txn_number);
        if let Some(stmt_id) = stmt_id {
            self.bytes.append(cstr!("stmtId"), stmt_id);
        }
        Ok(self)
    }

    /// Stamps the entry with its timestamp and term; returns its bytes.
    pub fn stamp(self, ts: Timestamp, term: i64) -> Vec<u8> {
        let mut bytes = self.bytes.into_bytes();
        let value = (u64::from(ts.time) << 32) | u64::from(ts.increment);
        bytes[TS_OFFSET..TS_OFFSET + 8].copy_from_slice(&value.to_le_bytes());
        bytes[TERM_OFFSET..TERM_OFFSET + 8].copy_from_slice(&term.to_le_bytes());
        bytes
    }

    /// The entry as an operation of a transaction's `applyOps` (without `ts`, `t`, `v`, `wall`).
    pub fn into_operation(self) -> Document {
        let mut operation = Document::new();
        for (key, value) in self.bytes.iter().flatten() {
            if matches!(key.as_str(), "ts" | "t" | "v" | "wall") {
                continue;
            }
            if let Ok(value) = Bson::try_from(value) {
                operation.insert(key.as_str(), value);
            }
        }
        operation
    }

    pub fn len(&self) -> usize {
        self.bytes.as_bytes().len()
    }

    pub fn is_empty(&self) -> bool {
        false
    }
}

fn raw(document: &Document) -> Result<RawDocumentBuf> {
    RawDocumentBuf::try_from(document).map_err(|e| Error::bad_value(format!("cannot encode oplog entry: {e}")))
}

/// The oplog tree's key for `ts`: eight bytes big-endian, time then increment, so the tree is in
/// timestamp order.
pub(crate) fn key(ts: Timestamp) -> [u8; 8] {
    ((u64::from(ts.time) << 32) | u64::from(ts.increment)).to_be_bytes()
}

/// The pre-images tree's key for operation `index` of the entry at `ts`.
pub(crate) fn image_key(ts: Timestamp, index: u32) -> [u8; 12] {
    let mut bytes = [0u8; 12];
    bytes[..8].copy_from_slice(&key(ts));
    bytes[8..].copy_from_slice(&index.to_be_bytes());
    bytes
}

/// The timestamp of an oplog tree key.
pub(crate) fn key_timestamp(key: &[u8]) -> Option<Timestamp> {
    let value = u64::from_be_bytes(key.try_into().ok()?);
    Some(Timestamp { time: (value >> 32) as u32, increment: value as u32 })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: stamping writes the timestamp where BSON readers find `ts`. Method: stamp an
    /// entry and decode it.
    #[test]
    fn stamp_sets_ts_in_place() {
        let document = bson::rawdoc! {"_id": 1, "x": "y"};
        let entry = Entry::insert("d.c", &document, &Bson::Int32(1)).unwrap();
        let ts = Timestamp { time: 1_700_000_000, increment: 7 };
        let bytes = entry.stamp(ts, 7);
        let decoded = Document::from_reader(bytes.as_slice()).unwrap();
        assert_eq!(decoded.get_timestamp("ts").unwrap(), ts);
        assert_eq!(decoded.get_i64("t").unwrap(), 7);
        assert_eq!(decoded.get_str("op").unwrap(), "i");
        assert_eq!(decoded.get_document("o").unwrap(), &doc! {"_id": 1, "x": "y"});
        assert_eq!(key_timestamp(&key(ts)), Some(ts));
    }

    /// Keys sort as timestamps do.
    #[test]
    fn keys_sort_by_timestamp() {
        let a = key(Timestamp { time: 5, increment: u32::MAX });
        let b = key(Timestamp { time: 6, increment: 0 });
        assert!(a < b);
    }
}
