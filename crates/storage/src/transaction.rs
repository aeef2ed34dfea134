//! Write transactions: a list of writes to any trees, committed atomically and in commit order.
//!
//! A transaction buffers its writes in memory and applies them all at `commit`, under the
//! engine's commit lock. `insert_if_absent` is checked at commit against the latest committed
//! state and the transaction's own earlier writes; if the key is present the whole transaction
//! is dropped and `Error::KeyExists` names the key. Writes never read (but for those checks):
//! a put, a delete, a range delete and a blind update are just messages.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::engine::Shared;
use crate::error::{Error, Result};
use crate::message::{Event, Seq, SEQ_MAX};
use crate::node::buffer::RangeDelete;
use crate::options::{Durability, FlushMode};
use crate::tree::{FlushNeed, Tree, TreeId, TreeMessage};

/// The largest key the engine accepts.
pub const MAX_KEY_BYTES: usize = 64 << 10;
/// The largest value the engine accepts.
pub const MAX_VALUE_BYTES: usize = 64 << 20;

#[derive(Clone, Debug)]
enum Write {
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
    /// after it sees the commit).
    pub fn commit(self, _durability: Durability) -> Result<Seq> {
        let shared = self.shared;
        self.check_sizes()?;
        let flush_needs = {
            let _commit = shared.commit_lock.lock();
            let trees = self.trees()?;
            if self.writes.iter().any(|(_, w)| matches!(w, Write::InsertIfAbsent(..))) {
                self.check_absent(&trees)?;
            }
            let count = self.writes.len() as u64;
            let first = shared.next_seq.fetch_add(count, Ordering::AcqRel);
            let last = first + count.saturating_sub(1);
            let result = apply(shared, &trees, self.writes, first);
            // Publish even after an error so that sequence numbers stay in step; an error here
            // means the engine found itself inconsistent, and verify() will say where.
            shared.visible.store(last.max(shared.visible.load(Ordering::Acquire)), Ordering::Release);
            shared.counters.commit();
            let needs = result?;
            needs.into_iter().map(|(id, need)| (trees.get(&id).cloned(), id, need)).collect::<Vec<_>>()
        };
        for (tree, id, need) in flush_needs {
            match need {
                FlushNeed::Urgent if shared.options.flush_mode == FlushMode::Background => {
                    if let Some(tree) = tree {
                        tree.flush_if_needed(&shared.ctx())?;
                    }
                }
                FlushNeed::Urgent | FlushNeed::Wanted => shared.request_flush(id),
                FlushNeed::None => {}
            }
        }
        Ok(shared.visible.load(Ordering::Acquire))
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

    /// Replays the writes over the latest state, in order, to check each insert-if-absent.
    fn check_absent(&self, trees: &HashMap<TreeId, Arc<Tree>>) -> Result<()> {
        let ctx = self.shared.ctx();
        let update = &self.shared.options.update;
        let mut overlay: HashMap<(TreeId, &[u8]), Option<Vec<u8>>> = HashMap::new();
        let mut ranges: Vec<(TreeId, &[u8], Option<&[u8]>)> = Vec::new();
        let current = |overlay: &HashMap<(TreeId, &[u8]), Option<Vec<u8>>>,
                       ranges: &[(TreeId, &[u8], Option<&[u8]>)],
                       id: TreeId,
                       key: &[u8]|
         -> Result<Option<Vec<u8>>> {
            if let Some(value) = overlay.get(&(id, key)) {
                return Ok(value.clone());
            }
            if ranges.iter().any(|(t, s, e)| *t == id && key >= *s && e.is_none_or(|e| key < e)) {
                return Ok(None);
            }
            match trees.get(&id) {
                Some(tree) => tree.get(&ctx, key, SEQ_MAX),
                None => Ok(None),
            }
        };
        for (id, write) in &self.writes {
            let id = *id;
            match write {
                Write::Put(k, v) => {
                    overlay.insert((id, k), Some(v.clone()));
                }
                Write::Delete(k) => {
                    overlay.insert((id, k), None);
                }
                Write::Update(k, operand) => {
                    let old = current(&overlay, &ranges, id, k)?;
                    overlay.insert((id, k), update(k, old.as_deref(), operand));
                }
                Write::DeleteRange(start, end) => {
                    let end = end.as_deref();
                    overlay.retain(|(t, k), _| !(*t == id && *k >= start.as_slice() && end.is_none_or(|e| *k < e)));
                    ranges.push((id, start, end));
                }
                Write::InsertIfAbsent(k, v) => {
                    if current(&overlay, &ranges, id, k)?.is_some() {
                        let tree = trees.get(&id).map(|t| t.name.clone()).unwrap_or_default();
                        return Err(Error::KeyExists { tree, key: k.clone() });
                    }
                    overlay.insert((id, k), Some(v.clone()));
                }
            }
        }
        Ok(())
    }
}

/// Puts each write into its tree as a message with its own sequence number.
fn apply(
    shared: &Shared,
    trees: &HashMap<TreeId, Arc<Tree>>,
    writes: Vec<(TreeId, Write)>,
    first: Seq,
) -> Result<Vec<(TreeId, FlushNeed)>> {
    let mut by_tree: Vec<(TreeId, Vec<TreeMessage>)> = Vec::new();
    for (offset, (id, write)) in writes.into_iter().enumerate() {
        let seq = first + offset as u64;
        let message = match write {
            Write::Put(key, value) | Write::InsertIfAbsent(key, value) => {
                TreeMessage::Point { key, seq, event: Event::Put(value) }
            }
            Write::Delete(key) => TreeMessage::Point { key, seq, event: Event::Delete },
            Write::Update(key, operand) => TreeMessage::Point { key, seq, event: Event::Update(operand) },
            Write::DeleteRange(start, end) => TreeMessage::Range(RangeDelete { start, end, seq }),
        };
        match by_tree.iter_mut().find(|(t, _)| *t == id) {
            Some((_, messages)) => messages.push(message),
            None => by_tree.push((id, vec![message])),
        }
    }
    let ctx = shared.ctx();
    let mut needs = Vec::with_capacity(by_tree.len());
    for (id, messages) in by_tree {
        let tree = trees.get(&id).ok_or_else(|| Error::TreeNotFound(format!("#{}", id.0)))?;
        needs.push((id, tree.write(&ctx, messages)?));
    }
    Ok(needs)
}
