//! Capped collections: `create` with `capped: true`, `size` (bytes of documents) and `max`
//! (documents): reads in insertion order, and the oldest documents removed first once an
//! insert passes either limit.
//!
//! A collection's documents live in `_id` order; a capped collection also has a *natural* tree
//! (`n.<n>`, named in its catalog entry) that keeps its insertion order:
//!
//! ```text
//! "q" ++ seq (u64 big-endian)  ->  encoded _id      the order, oldest first
//! "d" ++ encoded _id           ->  seq               which order entry is the document's
//! ```
//!
//! written in the same engine transaction as the document (insert) or removed with it (delete).
//! A collection scan of a capped collection reads the `q` entries and fetches each document; an
//! entry whose `d` entry names another `seq` is stale and skipped. Sequence numbers come from
//! [`Natural::next`], found again at every descriptor open as one past the newest `q` key
//! (inserts hold the collection's write lock, so the counter never races).
//!
//! Trimming runs after each insert into a capped collection, in its own transaction (as
//! MongoDB's does): a crash between the two leaves the collection over its limits until the
//! next insert. Writes to capped collections are refused inside multi-document transactions,
//! as in MongoDB.

use std::sync::atomic::{AtomicU64, Ordering};

use bson::{Bson, Document};
use storage::{Engine, Snapshot, TreeId, Writes};

use crate::error::{Error, Result};

/// The largest `size` MongoDB accepts (1 PiB).
const MAX_SIZE_BYTES: i64 = 1 << 50;

/// A capped collection's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capped {
    pub size: u64,
    /// `max`: at most this many documents (`None`: no count limit).
    pub max: Option<u64>,
}

impl Capped {
    /// The limits `create`'s options give (`None`: not capped); MongoDB's errors otherwise.
    pub fn from_options(options: &Document) -> Result<Option<Capped>> {
        match options.get("capped") {
            None | Some(Bson::Boolean(false)) => return Ok(None),
            Some(Bson::Boolean(true)) => {}
            Some(_) => return Err(Error::TypeMismatch("'capped' must be a bool".into())),
        }
        let size = match options.get("size").map(number) {
            None => return Err(Error::InvalidOptions("the 'size' field is required when 'capped' is true".into())),
            Some(Some(size)) if size > 0 && size <= MAX_SIZE_BYTES => size as u64,
            Some(Some(size)) if size > MAX_SIZE_BYTES => {
                return Err(Error::InvalidOptions("size cannot exceed 1 PB".into()));
            }
            Some(_) => return Err(Error::InvalidOptions("size must be a positive number".into())),
        };
        let max = match options.get("max").map(number) {
            None => None,
            Some(Some(max)) if max > 0 => Some(max as u64),
            // MongoDB ignores a zero or negative max (no count limit).
            Some(Some(_)) => None,
            Some(None) => return Err(Error::TypeMismatch("'max' must be a number".into())),
        };
        Ok(Some(Capped { size, max }))
    }

    /// Whether a collection of `count` documents and `bytes` bytes is past a limit.
    pub fn exceeded(&self, count: i64, bytes: i64) -> bool {
        bytes.max(0) as u64 > self.size || self.max.is_some_and(|max| count.max(0) as u64 > max)
    }
}

fn number(value: &Bson) -> Option<i64> {
    match value {
        Bson::Int32(n) => Some(i64::from(*n)),
        Bson::Int64(n) => Some(*n),
        Bson::Double(d) if d.is_finite() => Some(*d as i64),
        _ => None,
    }
}

/// A capped collection's natural-order tree and its next sequence number.
#[derive(Debug)]
pub struct Natural {
    pub tree: TreeId,
    next: AtomicU64,
}

impl Natural {
    /// Opens the tree; the next sequence number is one past its newest order entry.
    pub fn open(engine: &Engine, tree: TreeId) -> Result<Natural> {
        let snapshot = engine.snapshot();
        let newest = snapshot.range(tree, order_range()).next_back().transpose()?;
        let next = match newest {
            Some((key, _)) => sequence(&key[1..])? + 1,
            None => 1,
        };
        Ok(Natural { tree, next: AtomicU64::new(next) })
    }

    /// Records an inserted document at the end of the order.
    pub fn append(&self, writes: &mut dyn Writes, id: &[u8]) {
        let seq = self.next.fetch_add(1, Ordering::Relaxed);
        writes.put(self.tree, order_key(seq), id.to_vec());
        writes.put(self.tree, id_key(id), seq.to_be_bytes().to_vec());
    }

    /// Forgets a removed document's place (read from `snapshot`, the state it is removed from).
    pub fn forget(&self, writes: &mut dyn Writes, snapshot: &Snapshot, id: &[u8]) -> Result<()> {
        if let Some(seq) = snapshot.get(self.tree, &id_key(id))? {
            writes.delete(self.tree, order_key(sequence(&seq)?));
            writes.delete(self.tree, id_key(id));
        }
        Ok(())
    }

    /// Writes this order into the empty tree `target`, each `_id` keyed by `new_key` of the
    /// document in `documents`: a key format upgrade (`catalog::key_format`).
    pub(crate) fn copy_rekeyed(
        &self,
        engine: &Engine,
        documents: TreeId,
        target: TreeId,
        new_key: impl Fn(&[u8]) -> Result<Vec<u8>>,
    ) -> Result<()> {
        let snapshot = engine.snapshot();
        let mut txn = engine.begin();
        let mut pending = 0;
        for entry in self.ids(&snapshot, None, false) {
            let (seq, old_id) = entry?;
            let Some(document) = snapshot.get(documents, &old_id)? else { continue };
            let id = new_key(&document)?;
            txn.put(target, order_key(seq), id.clone());
            txn.put(target, id_key(&id), seq.to_be_bytes().to_vec());
            pending += 1;
            if pending % 1_000 == 0 {
                std::mem::replace(&mut txn, engine.begin()).commit(storage::Durability::None)?;
            }
        }
        txn.commit(storage::Durability::None)?;
        Ok(())
    }

    /// Whether the document numbered `seq` is still there (a tail's last read).
    pub fn holds(&self, snapshot: &Snapshot, seq: u64) -> Result<bool> {
        Ok(snapshot.get(self.tree, &order_key(seq))?.is_some())
    }

    /// The documents' ids in insertion order (oldest first, or newest first when `backward`),
    /// from `after` (exclusive) on: `(seq, id)`, stale entries skipped.
    pub fn ids(
        &self,
        snapshot: &Snapshot,
        after: Option<u64>,
        backward: bool,
    ) -> impl Iterator<Item = Result<(u64, Vec<u8>)>> + Send + 'static {
        let tree = self.tree;
        let lower = order_key(after.map_or(0, |seq| seq.saturating_add(1)));
        let range =
            snapshot.range(tree, (std::ops::Bound::Included(lower.as_slice()), std::ops::Bound::Excluded(&b"r"[..])));
        let entries: Box<dyn Iterator<Item = _> + Send> =
            if backward { Box::new(range.rev()) } else { Box::new(range) };
        let snapshot = snapshot.clone();
        entries.filter_map(move |entry| {
            let current = |key: &[u8], id: &[u8]| -> Result<Option<u64>> {
                let seq = sequence(&key[1..])?;
                let owner = snapshot.get(tree, &id_key(id))?;
                Ok(owner.filter(|owner| owner.as_slice() == seq.to_be_bytes()).map(|_| seq))
            };
            match entry {
                Ok((key, id)) => match current(&key, &id) {
                    Ok(Some(seq)) => Some(Ok((seq, id))),
                    Ok(None) => None,
                    Err(error) => Some(Err(error)),
                },
                Err(error) => Some(Err(error.into())),
            }
        })
    }
}

fn order_range() -> (std::ops::Bound<&'static [u8]>, std::ops::Bound<&'static [u8]>) {
    (std::ops::Bound::Included(&b"q"[..]), std::ops::Bound::Excluded(&b"r"[..]))
}

fn order_key(seq: u64) -> Vec<u8> {
    let mut key = Vec::with_capacity(9);
    key.push(b'q');
    key.extend_from_slice(&seq.to_be_bytes());
    key
}

fn id_key(id: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(id.len() + 1);
    key.push(b'd');
    key.extend_from_slice(id);
    key
}

fn sequence(bytes: &[u8]) -> Result<u64> {
    let bytes: [u8; 8] =
        bytes.try_into().map_err(|_| Error::corrupt("a capped collection's order entry is not 8 bytes"))?;
    Ok(u64::from_be_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn options_are_checked_as_mongodb_does() {
        assert_eq!(Capped::from_options(&doc! {}).unwrap(), None);
        assert_eq!(Capped::from_options(&doc! {"capped": false, "size": 5}).unwrap(), None);
        let capped = Capped::from_options(&doc! {"capped": true, "size": 4096, "max": 10}).unwrap().unwrap();
        assert_eq!(capped, Capped { size: 4096, max: Some(10) });
        assert!(capped.exceeded(11, 10) && capped.exceeded(1, 4097) && !capped.exceeded(10, 4096));
        assert_eq!(Capped::from_options(&doc! {"capped": true, "size": 1, "max": 0}).unwrap().unwrap().max, None);
        for (bad, code) in [
            (doc! {"capped": true}, 72),
            (doc! {"capped": true, "size": -1}, 72),
            (doc! {"capped": true, "size": 1i64 << 51}, 72),
            (doc! {"capped": 1, "size": 10}, 14),
            (doc! {"capped": true, "size": 10, "max": "x"}, 14),
        ] {
            assert_eq!(Capped::from_options(&bad).map(|_| ()).map_err(|e| e.code()), Err(code), "{bad}");
        }
    }
}
