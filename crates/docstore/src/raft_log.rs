//! The consensus log of a replica-set member: the entries the consensus library (the server's
//! `replication::consensus`, raft-rs) asks to keep, and its small durable state (the vote, the
//! term, the membership), in two engine trees of their own.
//!
//! The docstore knows nothing of the library's types: an entry is an index, the term it was
//! proposed in and opaque bytes; the state is named byte strings. Every change is one engine
//! transaction made durable before it returns (the library may answer a vote or acknowledge an
//! entry only once it is on disk), so a member killed at any point restarts with a log that
//! is a prefix of what it acknowledged and the vote it gave.
//!
//! `__raft_log` is keyed by the index (eight bytes big-endian, so the tree is in log order); a
//! value is the term (eight bytes little-endian) followed by the entry's bytes. `__raft_state`
//! holds the named states and `first`, the index before the oldest entry kept (entries up to it
//! were compacted away).

use std::ops::Bound;

use std::sync::Arc;

use storage::{Durability, TreeId};

use crate::context::Context;
use crate::error::{Error, Result};

const LOG_TREE: &str = "__raft_log";
const STATE_TREE: &str = "__raft_state";
/// The state key of the index before the oldest entry kept.
const COMPACTED: &[u8] = b"compacted";

/// A member's durable consensus log (see the module header).
pub struct RaftLog {
    cx: Arc<Context>,
    log: TreeId,
    state: TreeId,
}

/// One entry: its index, term and bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaftEntry {
    pub index: u64,
    pub term: u64,
    pub bytes: Vec<u8>,
}

impl RaftLog {
    pub(crate) fn open(cx: &Arc<Context>) -> Result<RaftLog> {
        Ok(RaftLog {
            log: crate::catalog::ensure_tree(&cx.engine, LOG_TREE)?,
            state: crate::catalog::ensure_tree(&cx.engine, STATE_TREE)?,
            cx: Arc::clone(cx),
        })
    }

    /// Appends `entries` (consecutive indexes), first deleting every entry at or after the
    /// first one's index (a new leader overwrites what this member had past the point where
    /// their logs agree), and sets the named `states`: one durable transaction.
    pub fn append(&self, entries: &[RaftEntry], states: &[(&str, Vec<u8>)]) -> Result<()> {
        self.append_with(entries, states, Durability::Immediate)
    }

    /// [`RaftLog::append`] as durable as `durability` asks (a new commit index alone may be
    /// written lazily: a member that loses it learns it again from the leader).
    pub fn append_with(&self, entries: &[RaftEntry], states: &[(&str, Vec<u8>)], durability: Durability) -> Result<()> {
        let mut txn = self.cx.engine.begin();
        if let Some(first) = entries.first() {
            assert!(
                entries.windows(2).all(|pair| pair[1].index == pair[0].index + 1),
                "consensus entries are appended at consecutive indexes"
            );
            // Only a new leader's entries replace some: the usual append (after the last
            // entry) deletes nothing, and a range delete would make the engine rewrite the
            // log's last leaf whole.
            if self.cx.engine.snapshot().get(self.log, &key(first.index))?.is_some() {
                txn.delete_range(self.log, key(first.index).to_vec(), None);
            }
            for entry in entries {
                let mut value = Vec::with_capacity(8 + entry.bytes.len());
                value.extend_from_slice(&entry.term.to_le_bytes());
                value.extend_from_slice(&entry.bytes);
                txn.put(self.log, key(entry.index).to_vec(), value);
            }
        }
        for (name, bytes) in states {
            txn.put(self.state, name.as_bytes().to_vec(), bytes.clone());
        }
        txn.commit(durability)?;
        Ok(())
    }

    /// The named state, if it was ever set.
    pub fn state(&self, name: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.cx.engine.snapshot().get(self.state, name.as_bytes())?)
    }

    /// Entries with indexes in `low..high`, in order, stopping once their bytes pass
    /// `max_bytes` (always at least one).
    pub fn entries(&self, low: u64, high: u64, max_bytes: u64) -> Result<Vec<RaftEntry>> {
        let snapshot = self.cx.engine.snapshot();
        let (low, high) = (key(low), key(high));
        let range = (Bound::Included(low.as_slice()), Bound::Excluded(high.as_slice()));
        let mut entries = Vec::new();
        let mut bytes = 0u64;
        for item in snapshot.range::<(Bound<&[u8]>, Bound<&[u8]>)>(self.log, range) {
            let (key, value) = item?;
            let entry = decode(&key, value)?;
            bytes += entry.bytes.len() as u64;
            if !entries.is_empty() && bytes > max_bytes {
                break;
            }
            entries.push(entry);
        }
        Ok(entries)
    }

    /// The term of the entry at `index`, if the log holds it.
    pub fn term(&self, index: u64) -> Result<Option<u64>> {
        let value = self.cx.engine.snapshot().get(self.log, &key(index))?;
        Ok(value.map(|v| decode(&key(index), v)).transpose()?.map(|entry| entry.term))
    }

    /// The newest entry's index, if the log holds any.
    pub fn last_index(&self) -> Result<Option<u64>> {
        let last = self.cx.engine.snapshot().iter(self.log).next_back().transpose()?;
        last.map(|(key, _)| index_of(&key)).transpose()
    }

    /// The index before the oldest entry kept (0 until a compaction or a snapshot).
    pub fn compacted(&self) -> Result<u64> {
        let value = self.state(std::str::from_utf8(COMPACTED).unwrap_or_default())?;
        Ok(value.and_then(|v| v.try_into().ok()).map(u64::from_le_bytes).unwrap_or(0))
    }

    /// Forgets the entries up to `index` (they are applied and every member has them, or a
    /// snapshot replaced them) and records it as the compaction point, with `states`.
    pub fn compact(&self, index: u64, states: &[(&str, Vec<u8>)]) -> Result<()> {
        let mut txn = self.cx.engine.begin();
        txn.delete_range(self.log, Vec::new(), Some(key(index + 1).to_vec()));
        txn.put(self.state, COMPACTED.to_vec(), index.to_le_bytes().to_vec());
        for (name, bytes) in states {
            txn.put(self.state, name.as_bytes().to_vec(), bytes.clone());
        }
        txn.commit(Durability::Immediate)?;
        Ok(())
    }

    /// Forgets every entry (a snapshot at `index` replaces the whole log).
    pub fn reset_to(&self, index: u64, states: &[(&str, Vec<u8>)]) -> Result<()> {
        let mut txn = self.cx.engine.begin();
        txn.delete_range(self.log, Vec::new(), None);
        txn.put(self.state, COMPACTED.to_vec(), index.to_le_bytes().to_vec());
        for (name, bytes) in states {
            txn.put(self.state, name.as_bytes().to_vec(), bytes.clone());
        }
        txn.commit(Durability::Immediate)?;
        Ok(())
    }
}

fn key(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

fn index_of(key: &[u8]) -> Result<u64> {
    let bytes: [u8; 8] = key.try_into().map_err(|_| Error::corrupt("consensus log key is not 8 bytes"))?;
    Ok(u64::from_be_bytes(bytes))
}

fn decode(key: &[u8], mut value: Vec<u8>) -> Result<RaftEntry> {
    if value.len() < 8 {
        return Err(Error::corrupt("consensus log entry shorter than its term"));
    }
    let term = u64::from_le_bytes(value[..8].try_into().unwrap_or_default());
    value.drain(..8);
    Ok(RaftEntry { index: index_of(key)?, term, bytes: value })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: u64, term: u64) -> RaftEntry {
        RaftEntry { index, term, bytes: format!("e{index}t{term}").into_bytes() }
    }

    /// Goal: the log behaves as the consensus library's storage must — appends overwrite from
    /// their first index, reads return ranges in order, compaction forgets a prefix, states
    /// persist. Method: a short script against a plain vector as the model.
    #[test]
    fn append_overwrite_compact_against_a_model() {
        let store = crate::Store::open_in_memory(crate::StoreOptions::default()).unwrap();
        let log = store.raft_log().unwrap();
        let mut model: Vec<RaftEntry> = Vec::new();
        let mut append = |log: &RaftLog, entries: Vec<RaftEntry>| {
            model.retain(|e| e.index < entries[0].index);
            model.extend(entries.iter().cloned());
            log.append(&entries, &[("hard", vec![entries[0].term as u8])]).unwrap();
            assert_eq!(log.entries(0, u64::MAX, u64::MAX).unwrap(), model);
        };
        append(&log, (1..=5).map(|i| entry(i, 1)).collect());
        append(&log, (4..=6).map(|i| entry(i, 2)).collect());
        append(&log, vec![entry(7, 2), entry(8, 3)]);
        assert_eq!(log.last_index().unwrap(), Some(8));
        assert_eq!(log.term(5).unwrap(), Some(2));
        assert_eq!(log.term(3).unwrap(), Some(1));
        assert_eq!(log.state("hard").unwrap(), Some(vec![2]));
        assert_eq!(log.entries(3, 6, u64::MAX).unwrap().iter().map(|e| e.index).collect::<Vec<_>>(), vec![3, 4, 5]);
        assert_eq!(log.entries(3, 6, 1).unwrap().len(), 1, "at least one entry, then the byte limit");
        log.compact(4, &[]).unwrap();
        assert_eq!(log.compacted().unwrap(), 4);
        assert_eq!(log.entries(0, u64::MAX, u64::MAX).unwrap().first().map(|e| e.index), Some(5));
        log.reset_to(20, &[]).unwrap();
        assert_eq!(log.last_index().unwrap(), None);
        assert_eq!(log.compacted().unwrap(), 20);
    }
}
