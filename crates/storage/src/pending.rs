//! Pending writes: a long transaction's writes, kept until it commits, and readable meanwhile.
//!
//! A multi-document transaction must read its own uncommitted writes. `PendingWrites` records
//! them twice over: in the order made (what `Engine::commit_pending` commits, as one atomic
//! transaction), and per key as their net *effect* (what a snapshot overlaid with them reads,
//! `Snapshot::with_pending`). An effect is a base — the key holds a value, or is absent — or a
//! chain of blind updates to apply over the snapshot's committed value when read.
//!
//! Invariants: an update after a base folds into a new base at once (with the engine's update
//! function), so a chain only ever sits over the committed value; the effect of a key is what
//! applying its writes in order over the committed value gives. Values and operands are shared
//! (`Arc<[u8]>`) between the two records, so a value is held once, and a clone (taken when an
//! overlaid snapshot still holds the writes: `Arc::make_mut`) copies pointers and keys only.
//!
//! Not here: range deletes (a document transaction deletes documents and index entries one key
//! at a time; a range delete would turn every read of the overlay into a range check). Nor any
//! check: sizes and insert-if-absent conditions are checked at commit, as `Transaction` does.
//!
//! Threads: none of its own; `Send + Sync`, read concurrently once frozen in an `Arc`.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::Arc;

use crate::message::UpdateFn;
use crate::transaction::Write;
use crate::tree::TreeId;

/// A value or operand, shared by the ordered record and the per-key effect.
type Bytes = Arc<[u8]>;

/// What a reader sees of the pending writes to one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Effect {
    /// The key holds this value (a put, an insert-if-absent, or updates folded into either).
    Put(Bytes),
    /// The key is absent.
    Delete,
    /// Blind updates, oldest first, to apply over the committed value when read.
    Updates(Vec<Bytes>),
}

#[derive(Clone, Debug)]
enum Pending {
    Put(Vec<u8>, Bytes),
    Delete(Vec<u8>),
    InsertIfAbsent(Vec<u8>, Bytes),
    Update(Vec<u8>, Bytes),
}

/// What one recorded write costs beyond its bytes, roughly: its entry in the ordered record
/// and its share of a map node.
const OVERHEAD_BYTES: usize = 64;

/// A transaction's writes not yet committed, in the order made, and indexed per key for
/// reading. Owned and cheap to share: freeze it in an `Arc` for `Snapshot::with_pending`, and
/// write through `Arc::make_mut` (which clones only while an overlaid snapshot holds it).
#[derive(Clone)]
pub struct PendingWrites {
    update: UpdateFn,
    writes: Vec<(TreeId, Pending)>,
    effects: HashMap<TreeId, BTreeMap<Vec<u8>, Effect>>,
    bytes: usize,
}

impl PendingWrites {
    /// No writes yet; `update` folds and resolves blind updates, and must be the engine's
    /// (`Engine::pending` passes it).
    pub fn new(update: UpdateFn) -> PendingWrites {
        PendingWrites { update, writes: Vec::new(), effects: HashMap::new(), bytes: 0 }
    }

    pub fn put(&mut self, tree: TreeId, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> &mut Self {
        let (key, value): (Vec<u8>, Bytes) = (key.into(), value.into().into());
        self.set(tree, &key, Effect::Put(Arc::clone(&value)));
        self.record(tree, Pending::Put(key, value))
    }

    pub fn delete(&mut self, tree: TreeId, key: impl Into<Vec<u8>>) -> &mut Self {
        let key = key.into();
        self.set(tree, &key, Effect::Delete);
        self.record(tree, Pending::Delete(key))
    }

    /// Puts the value if the key is absent when the writes commit; otherwise the commit fails
    /// with `KeyExists` and applies nothing. Reads before then see a put: the condition is the
    /// committed state's to decide, and only at commit.
    pub fn insert_if_absent(&mut self, tree: TreeId, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> &mut Self {
        let (key, value): (Vec<u8>, Bytes) = (key.into(), value.into().into());
        self.set(tree, &key, Effect::Put(Arc::clone(&value)));
        self.record(tree, Pending::InsertIfAbsent(key, value))
    }

    /// A blind update, resolved with the update function: at once over an earlier pending put
    /// or delete of the key, else over the committed value when read.
    pub fn update(&mut self, tree: TreeId, key: impl Into<Vec<u8>>, operand: impl Into<Vec<u8>>) -> &mut Self {
        let (key, operand): (Vec<u8>, Bytes) = (key.into(), operand.into().into());
        match self.effects.entry(tree).or_default().get_mut(key.as_slice()) {
            Some(Effect::Updates(chain)) => chain.push(Arc::clone(&operand)),
            Some(slot) => {
                let base = if let Effect::Put(value) = slot { Some(&**value) } else { None };
                *slot = fold(&self.update, &key, base, &operand);
            }
            None => self.set(tree, &key, Effect::Updates(vec![Arc::clone(&operand)])),
        }
        self.record(tree, Pending::Update(key, operand))
    }

    /// How many writes are recorded.
    pub fn len(&self) -> usize {
        self.writes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }

    /// Roughly the heap bytes held: keys twice (record and index), values once, plus a fixed
    /// overhead per write; not a value folded from updates (at most one per key).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The net effect of the pending writes to one key, if any.
    pub(crate) fn effect(&self, tree: TreeId, key: &[u8]) -> Option<&Effect> {
        self.effects.get(&tree)?.get(key)
    }

    /// The keys with an effect within `[lower, upper]`, in key order (from either end).
    pub(crate) fn effects_in<'a>(
        &'a self,
        tree: TreeId,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
    ) -> impl DoubleEndedIterator<Item = (&'a Vec<u8>, &'a Effect)> {
        // `BTreeMap::range` panics on an inverted range; such a range holds nothing.
        let empty = crate::snapshot::is_empty_range(lower, upper);
        self.effects.get(&tree).filter(|_| !empty).into_iter().flat_map(move |map| map.range::<[u8], _>((lower, upper)))
    }

    /// The value a reader sees: the effect applied over the committed value (`None`: absent),
    /// which matters only to a chain of updates.
    pub(crate) fn resolve(&self, key: &[u8], effect: &Effect, committed: Option<Vec<u8>>) -> Option<Vec<u8>> {
        match effect {
            Effect::Put(value) => Some(value.to_vec()),
            Effect::Delete => None,
            Effect::Updates(chain) => {
                chain.iter().fold(committed, |value, operand| (self.update)(key, value.as_deref(), operand))
            }
        }
    }

    /// The writes in the order made, as a transaction commits them.
    pub(crate) fn into_writes(self) -> Vec<(TreeId, Write)> {
        self.writes.into_iter().map(|(tree, pending)| (tree, pending.into_write())).collect()
    }

    fn set(&mut self, tree: TreeId, key: &[u8], effect: Effect) {
        let effects = self.effects.entry(tree).or_default();
        match effects.get_mut(key) {
            Some(slot) => *slot = effect,
            None => {
                self.bytes += key.len();
                effects.insert(key.to_vec(), effect);
            }
        }
    }

    fn record(&mut self, tree: TreeId, pending: Pending) -> &mut Self {
        self.bytes += OVERHEAD_BYTES + pending.size_bytes();
        self.writes.push((tree, pending));
        self
    }
}

/// An update over a base (a pending put's value, or `None` for a delete): a new base.
fn fold(update: &UpdateFn, key: &[u8], base: Option<&[u8]>, operand: &[u8]) -> Effect {
    match update(key, base, operand) {
        Some(value) => Effect::Put(value.into()),
        None => Effect::Delete,
    }
}

impl std::fmt::Debug for PendingWrites {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingWrites").field("len", &self.len()).field("bytes", &self.bytes).finish_non_exhaustive()
    }
}

impl Pending {
    fn size_bytes(&self) -> usize {
        match self {
            Pending::Put(key, value) | Pending::InsertIfAbsent(key, value) | Pending::Update(key, value) => {
                key.len() + value.len()
            }
            Pending::Delete(key) => key.len(),
        }
    }

    fn into_write(self) -> Write {
        match self {
            Pending::Put(key, value) => Write::Put(key, value.to_vec()),
            Pending::Delete(key) => Write::Delete(key),
            Pending::InsertIfAbsent(key, value) => Write::InsertIfAbsent(key, value.to_vec()),
            Pending::Update(key, operand) => Write::Update(key, operand.to_vec()),
        }
    }
}

#[cfg(test)]
mod tests {
    //! Goal: a key's effect is what applying its pending writes in order over the committed
    //! value gives, whatever that value is. Method: small write sequences with the counter
    //! update, each resolved over an absent, a counter and a malformed committed value, and
    //! compared with applying the same writes one by one.
    use super::*;
    use crate::message::counter_update;

    const T: TreeId = TreeId(1);

    fn counter(n: i64) -> Vec<u8> {
        n.to_le_bytes().to_vec()
    }

    fn read(pending: &PendingWrites, key: &[u8], committed: Option<Vec<u8>>) -> Option<Vec<u8>> {
        match pending.effect(T, key) {
            Some(effect) => pending.resolve(key, effect, committed),
            None => committed,
        }
    }

    #[test]
    fn an_update_after_a_base_folds_at_once() {
        let mut pending = PendingWrites::new(counter_update());
        pending.put(T, "k", counter(10)).update(T, "k", counter(5));
        assert_eq!(pending.effect(T, b"k"), Some(&Effect::Put(counter(15).into())));
        pending.delete(T, "k").update(T, "k", counter(2));
        assert_eq!(pending.effect(T, b"k"), Some(&Effect::Put(counter(2).into())));
    }

    #[test]
    fn updates_over_nothing_pending_chain_over_the_committed_value() {
        let mut pending = PendingWrites::new(counter_update());
        pending.update(T, "k", counter(1)).update(T, "k", counter(2));
        assert!(matches!(pending.effect(T, b"k"), Some(Effect::Updates(chain)) if chain.len() == 2));
        assert_eq!(read(&pending, b"k", None), Some(counter(3)));
        assert_eq!(read(&pending, b"k", Some(counter(10))), Some(counter(13)));
        assert_eq!(read(&pending, b"k", Some(b"abc".to_vec())), Some(b"abc".to_vec()));
        assert_eq!(read(&pending, b"other", Some(counter(7))), Some(counter(7)));
    }

    #[test]
    fn each_write_sequence_reads_as_its_writes_applied_in_order() {
        let update = counter_update();
        let writes: [&dyn Fn(&mut PendingWrites); 5] = [
            &|p: &mut PendingWrites| {
                p.put(T, "k", counter(4));
            },
            &|p: &mut PendingWrites| {
                p.delete(T, "k");
            },
            &|p: &mut PendingWrites| {
                p.insert_if_absent(T, "k", counter(9));
            },
            &|p: &mut PendingWrites| {
                p.update(T, "k", counter(3));
            },
            &|p: &mut PendingWrites| {
                p.update(T, "k", counter(-1));
            },
        ];
        let apply = |index: usize, value: Option<Vec<u8>>| match index {
            0 => Some(counter(4)),
            1 => None,
            2 => Some(counter(9)),
            3 => update(b"k", value.as_deref(), &counter(3)),
            _ => update(b"k", value.as_deref(), &counter(-1)),
        };
        // Every sequence of three writes, over three committed values.
        for sequence in 0..125 {
            let order = [sequence % 5, sequence / 5 % 5, sequence / 25];
            let mut pending = PendingWrites::new(counter_update());
            for index in order {
                writes[index](&mut pending);
            }
            for committed in [None, Some(counter(100)), Some(b"xy".to_vec())] {
                let expected = order.iter().fold(committed.clone(), |value, index| apply(*index, value));
                assert_eq!(read(&pending, b"k", committed), expected, "writes {order:?}");
            }
        }
    }

    #[test]
    fn writes_are_kept_in_order_and_counted() {
        let mut pending = PendingWrites::new(counter_update());
        assert!(pending.is_empty() && pending.bytes() == 0);
        pending.put(TreeId(2), "b", "v1").delete(T, "a").update(T, "a", counter(1)).insert_if_absent(T, "c", "v2");
        assert_eq!(pending.len(), 4);
        assert!(pending.bytes() >= 4 * OVERHEAD_BYTES + 1 + 2 + 1 + 1 + 8 + 1 + 2);
        let kinds: Vec<String> = pending.into_writes().iter().map(|(t, w)| format!("{}:{w:?}", t.0)).collect();
        assert_eq!(kinds.len(), 4);
        assert!(kinds[0].starts_with("2:Put") && kinds[1].starts_with("1:Delete"));
        assert!(kinds[2].starts_with("1:Update") && kinds[3].starts_with("1:InsertIfAbsent"));
    }

    #[test]
    fn a_clone_written_to_leaves_the_original_alone() {
        let mut pending = PendingWrites::new(counter_update());
        pending.put(T, "a", "1");
        let frozen = Arc::new(pending);
        let mut writer = Arc::clone(&frozen);
        Arc::make_mut(&mut writer).put(T, "a", "2").put(T, "b", "3");
        assert_eq!(read(&frozen, b"a", None), Some(b"1".to_vec()));
        assert_eq!(read(&frozen, b"b", None), None);
        assert_eq!((frozen.len(), writer.len()), (1, 3));
    }

    #[test]
    fn effects_in_a_range_come_in_key_order_from_both_ends() {
        let mut pending = PendingWrites::new(counter_update());
        for key in ["d", "a", "c", "b"] {
            pending.put(T, key, "v");
        }
        let keys = |lower, upper, rev: bool| -> Vec<Vec<u8>> {
            let found = pending.effects_in(T, lower, upper).map(|(k, _)| k.clone());
            if rev { found.rev().collect() } else { found.collect() }
        };
        let (b, c): (&[u8], &[u8]) = (b"b", b"c");
        assert_eq!(
            keys(Bound::Included(b), Bound::Unbounded, false),
            vec![b"b".to_vec(), b"c".to_vec(), b"d".to_vec()]
        );
        assert_eq!(keys(Bound::Unbounded, Bound::Excluded(c), true), vec![b"b".to_vec(), b"a".to_vec()]);
        assert!(keys(Bound::Excluded(b), Bound::Excluded(b), false).is_empty());
        assert!(keys(Bound::Included(c), Bound::Included(b), false).is_empty());
        assert!(pending.effects_in(TreeId(9), Bound::Unbounded, Bound::Unbounded).next().is_none());
    }
}
