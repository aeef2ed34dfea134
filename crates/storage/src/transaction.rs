//! Write transactions: a list of writes to any trees, committed atomically and in commit order.
//!
//! A transaction buffers its writes in memory and applies them all at `commit`, under the
//! engine's commit lock. `insert_if_absent` is checked at commit against the latest committed
//! state and the transaction's own earlier writes; if the key is present the whole transaction
//! is dropped and `Error::KeyExists` names the key. Writes never read (but for those checks):
//! a put, a delete, a range delete and a blind update are just messages.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::engine::Shared;
use crate::error::{Error, Result};
use crate::message::{SEQ_MAX, Seq};
use crate::options::{Durability, FlushMode};
use crate::stats::Counters;
use crate::tree::{FlushNeed, Tree, TreeId};
use crate::wal::record::{LogWrite, frame_commit};

/// The largest key the engine accepts.
pub const MAX_KEY_BYTES: usize = 64 << 10;
/// The largest value the engine accepts.
pub const MAX_VALUE_BYTES: usize = 64 << 20;

#[derive(Clone, Debug)]
pub(crate) enum Write {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    InsertIfAbsent(Vec<u8>, Vec<u8>),
    Update(Vec<u8>, Vec<u8>),
    DeleteRange(Vec<u8>, Option<Vec<u8>>),
}

pub struct Transaction<'e> {
    shared: &'e Arc<Shared>,
    writes: Vec<(TreeId, Write)>,
}

impl<'e> Transaction<'e> {
    pub(crate) fn new(shared: &'e Arc<Shared>) -> Transaction<'e> {
        Transaction { shared, writes: Vec::new() }
    }

    /// A transaction of writes recorded elsewhere (`PendingWrites`), in their order.
    pub(crate) fn with_writes(shared: &'e Arc<Shared>, writes: Vec<(TreeId, Write)>) -> Transaction<'e> {
        Transaction { shared, writes }
    }

    pub fn put(&mut self, tree: TreeId, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> &mut Self {
        self.writes.push((tree, Write::Put(key.into(), value.into())));
        self
    }

    pub fn delete(&mut self, tree: TreeId, key: impl Into<Vec<u8>>) -> &mut Self {
        self.writes.push((tree, Write::Delete(key.into())));
        self
    }

    /// Puts the value only if the key is absent; otherwise the commit fails with `KeyExists`.
    pub fn insert_if_absent(&mut self, tree: TreeId, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> &mut Self {
        self.writes.push((tree, Write::InsertIfAbsent(key.into(), value.into())));
        self
    }

    /// A blind update, resolved by the engine's update function when read.
    pub fn update(&mut self, tree: TreeId, key: impl Into<Vec<u8>>, operand: impl Into<Vec<u8>>) -> &mut Self {
        self.writes.push((tree, Write::Update(key.into(), operand.into())));
        self
    }

    /// Deletes every key in `[start, end)` (`end: None`: to the end of the tree) without
    /// visiting them now.
    pub fn delete_range(&mut self, tree: TreeId, start: impl Into<Vec<u8>>, end: Option<Vec<u8>>) -> &mut Self {
        self.writes.push((tree, Write::DeleteRange(start.into(), end)));
        self
    }

    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }

    /// Applies every write atomically; returns the commit's sequence number (a snapshot at or
    /// after it sees the commit). With `Durability::Immediate` it returns only once the commit's
    /// log record is synced.
    pub fn commit(self, durability: Durability) -> Result<Seq> {
        self.check_sizes()?;
        let shared = self.shared;
        if self.writes.is_empty() {
            return Ok(shared.visible.load(Ordering::Acquire));
        }
        // Node writes failing (a full disk): changes would pile up in memory unwritten.
        if let Some(error) = shared.store.write_failure() {
            return Err(error);
        }
        let (last, position, needs) = {
            let _commit = shared.commit_lock.lock();
            let trees = self.trees()?;
            if self.writes.iter().any(|(_, w)| matches!(w, Write::InsertIfAbsent(..))) {
                self.check_absent(&trees)?;
            }
            let first = shared.next_seq.load(Ordering::Acquire);
            let last = first + self.writes.len() as u64 - 1;
            let writes: Vec<(TreeId, LogWrite)> = self.writes.into_iter().map(|(id, w)| (id, w.into_log())).collect();
            let position =
                match shared.log() {
                    Some(log) => Some(log.append(|buffer| {
                        frame_commit(buffer, first, writes.iter().map(|(id, w)| (id.0, w.as_ref())))
                    })?),
                    None => None,
                };
            let result = shared.apply_writes(first, writes);
            shared.publish(last);
            Counters::add(&shared.counters.commits, 1);
            match result {
                Ok(needs) => (last, position, needs),
                Err(error) => {
                    // The log has the commit but the trees have part of it: stop, so that only
                    // a reopen (which replays it whole) serves this state.
                    if let Some(log) = shared.log() {
                        log.stop("applying a commit failed", &error);
                    }
                    return Err(error);
                }
            }
        };
        if let (Some(log), Some(position)) = (shared.log(), position) {
            match durability {
                Durability::Immediate => log.sync_to(position)?,
                Durability::Periodic => log.want_periodic(position),
                Durability::None => {}
            }
        }
        flush_as_needed(shared, needs);
        // Backpressure here, holding no lock: not inside the trees' writes (see `eviction`).
        shared.store.throttle();
        Ok(last)
    }

    fn check_sizes(&self) -> Result<()> {
        for (_, write) in &self.writes {
            let (key, value) = match write {
                Write::Put(k, v) | Write::InsertIfAbsent(k, v) | Write::Update(k, v) => (k, Some(v)),
                Write::Delete(k) | Write::DeleteRange(k, _) => (k, None),
            };
            if key.len() > MAX_KEY_BYTES {
                return Err(Error::TooLarge(format!("key of {} bytes (max {MAX_KEY_BYTES})", key.len())));
            }
            if let Some(value) = value.filter(|v| v.len() > MAX_VALUE_BYTES) {
                return Err(Error::TooLarge(format!("value of {} bytes (max {MAX_VALUE_BYTES})", value.len())));
            }
        }
        Ok(())
    }

    fn trees(&self) -> Result<HashMap<TreeId, Arc<Tree>>> {
        let mut trees = HashMap::new();
        for (id, _) in &self.writes {
            if !trees.contains_key(id) {
                trees.insert(*id, self.shared.tree(*id)?);
            }
        }
        Ok(trees)
    }

    /// Replays the writes over the latest state, in order, to check each insert-if-absent. Only
    /// the trees with an insert-if-absent matter (a check reads its own tree only), and values
    /// are borrowed from the writes, not copied: this runs under the commit lock.
    fn check_absent(&self, trees: &HashMap<TreeId, Arc<Tree>>) -> Result<()> {
        let ctx = self.shared.ctx();
        let update = &self.shared.options.update;
        let checked: HashSet<TreeId> =
            self.writes.iter().filter(|(_, w)| matches!(w, Write::InsertIfAbsent(..))).map(|(id, _)| *id).collect();
        let mut overlay: Overlay<'_> = HashMap::new();
        let mut ranges: Vec<RangeWrite<'_>> = Vec::new();
        let current =
            |overlay: &Overlay<'_>, ranges: &[RangeWrite<'_>], id: TreeId, key: &[u8]| -> Result<Option<Vec<u8>>> {
                if let Some(value) = overlay.get(&(id, key)) {
                    return Ok(value.as_deref().map(<[u8]>::to_vec));
                }
                if ranges.iter().any(|(t, s, e)| *t == id && key >= *s && e.is_none_or(|e| key < e)) {
                    return Ok(None);
                }
                match trees.get(&id) {
                    Some(tree) => tree.get(&ctx, key, SEQ_MAX),
                    None => Ok(None),
                }
            };
        for (id, write) in self.writes.iter().filter(|(id, _)| checked.contains(id)) {
            let id = *id;
            match write {
                Write::Put(k, v) => {
                    overlay.insert((id, k), Some(Cow::Borrowed(v)));
                }
                Write::Delete(k) => {
                    overlay.insert((id, k), None);
                }
                Write::Update(k, operand) => {
                    let old = current(&overlay, &ranges, id, k)?;
                    overlay.insert((id, k), update(k, old.as_deref(), operand).map(Cow::Owned));
                }
                Write::DeleteRange(start, end) => {
                    let end = end.as_deref();
                    overlay.retain(|(t, k), _| !(*t == id && *k >= start.as_slice() && end.is_none_or(|e| *k < e)));
                    ranges.push((id, start, end));
                }
                Write::InsertIfAbsent(k, v) => {
                    let exists = match overlay.get(&(id, k.as_slice())) {
                        Some(value) => value.is_some(),
                        None => current(&overlay, &ranges, id, k)?.is_some(),
                    };
                    if exists {
                        let tree = trees.get(&id).map(|t| t.name.clone()).unwrap_or_default();
                        return Err(Error::KeyExists { tree, key: k.clone() });
                    }
                    overlay.insert((id, k), Some(Cow::Borrowed(v)));
                }
            }
        }
        Ok(())
    }
}

/// What an insert-if-absent check sees of a transaction's own earlier writes: a key's value
/// (`None`: deleted), and the range deletes (tree, start, end).
type Overlay<'a> = HashMap<(TreeId, &'a [u8]), Option<Cow<'a, [u8]>>>;
type RangeWrite<'a> = (TreeId, &'a [u8], Option<&'a [u8]>);

/// Hands full roots to the flusher, or flushes one far over its size here (backpressure).
fn flush_as_needed(shared: &Shared, needs: Vec<(Arc<Tree>, FlushNeed)>) {
    for (tree, need) in needs {
        match need {
            FlushNeed::Urgent if shared.options.flush_mode == FlushMode::Background => {
                if let Err(error) = tree.flush_if_needed(&shared.ctx()) {
                    // The commit itself is applied (and logged); what failed is the engine.
                    shared.flush_failed(&error);
                }
            }
            FlushNeed::Urgent | FlushNeed::Wanted => shared.request_flush(tree.id),
            FlushNeed::None => {}
        }
    }
}

impl Write {
    /// What the log and the trees see: an insert-if-absent has passed its check and is a put.
    fn into_log(self) -> LogWrite {
        match self {
            Write::Put(k, v) | Write::InsertIfAbsent(k, v) => LogWrite::Put(k, v),
            Write::Delete(k) => LogWrite::Delete(k),
            Write::Update(k, v) => LogWrite::Update(k, v),
            Write::DeleteRange(s, e) => LogWrite::DeleteRange(s, e),
        }
    }
}
