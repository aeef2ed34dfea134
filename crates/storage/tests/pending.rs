//! Goal: a snapshot read through a transaction's pending writes answers exactly like the
//! snapshot's committed state with those writes applied over it — point reads, and scans
//! forward, backward and from both ends at once — while other writers commit after it (their
//! commits stay invisible) and while the transaction goes on writing (an overlaid snapshot or
//! iterator keeps the writes it was given); and committing the pending writes makes the
//! overlaid view the committed state, or, when an insert-if-absent meets a key, nothing at all.
//!
//! Method: proptest generates interleavings of commits by others, transactions that begin
//! (a snapshot and empty pending writes), write (puts, deletes, inserts-if-absent, counter
//! updates), read, hold iterators across later steps, commit or abort; a `BTreeMap` per tree
//! models the committed state and, per transaction, the view it should read. The trees start
//! with every other key, and tiny nodes make every scan cross many windows and every few
//! commits flush, split or merge. After every step
//! `verify()` checks the engine's invariants and the committed state is compared in full. A
//! failure prints the minimal failing sequence; proptest records its seed in
//! `pending.proptest-regressions` and replays it first. Deterministic tests follow for the
//! commit, a refused commit, frozen iterators, errors, and real threads.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

use proptest::prelude::*;
use storage::{Durability, Engine, Error, Options, PendingWrites, RangeIter, Snapshot, TreeId};

const TREES: usize = 2;
const KEYS: u16 = 160;
/// At most this many transactions and held iterators at once.
const LIVE: usize = 4;

type Tree = BTreeMap<Vec<u8>, Vec<u8>>;
type Model = Vec<Tree>;
type Entry = (Vec<u8>, Vec<u8>);

#[derive(Clone, Debug)]
enum Write {
    Put(usize, u16, Vec<u8>),
    Delete(usize, u16),
    InsertIfAbsent(usize, u16, Vec<u8>),
    Add(usize, u16, i64),
    /// Committed by others only: pending writes have no range delete.
    DeleteRange(usize, u16, Option<u16>),
}

/// A bound: `None` unbounded, else a key and whether it is included.
type KeyBound = Option<(u16, bool)>;

#[derive(Clone, Debug)]
enum Op {
    /// Another writer commits.
    Commit(Vec<Write>),
    Begin,
    /// Transaction `s` records a pending write.
    Pending(usize, Write),
    Get(usize, usize, u16),
    /// A scan through transaction `s`: each bit of the walk picks `next` (0) or `next_back` (1).
    Scan(usize, usize, KeyBound, KeyBound, u64),
    /// An iterator through transaction `s` kept for later steps.
    OpenCursor(usize, usize, KeyBound, KeyBound),
    /// Walks a held iterator a few steps.
    AdvanceCursor(usize, u64, u8),
    CommitPending(usize),
    Abort(usize),
    FlushAll,
}

fn key(k: u16) -> Vec<u8> {
    // A shared prefix makes keys long enough to fill tiny nodes quickly.
    let mut key = b"key-".to_vec();
    key.extend_from_slice(&k.to_be_bytes());
    key
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    // Now and then a value larger than a basement, so that commits reshape the tree.
    prop_oneof![
        10 => proptest::collection::vec(any::<u8>(), 0..16),
        3 => any::<i64>().prop_map(|n| n.to_le_bytes().to_vec()),
        1 => proptest::collection::vec(any::<u8>(), 200..700),
    ]
}

fn pending_write() -> impl Strategy<Value = Write> {
    let (tree, k) = (0..TREES, 0..KEYS);
    prop_oneof![
        5 => (tree.clone(), k.clone(), value()).prop_map(|(t, k, v)| Write::Put(t, k, v)),
        3 => (tree.clone(), k.clone()).prop_map(|(t, k)| Write::Delete(t, k)),
        2 => (tree.clone(), k.clone(), value()).prop_map(|(t, k, v)| Write::InsertIfAbsent(t, k, v)),
        4 => (tree, k, -5i64..5).prop_map(|(t, k, d)| Write::Add(t, k, d)),
    ]
}

fn committed_write() -> impl Strategy<Value = Write> {
    // Range deletes mostly short (and now and then to the end): the trees should stay full
    // enough that scans cross many windows.
    let end = |s: u16| proptest::option::weighted(0.9, (1u16..16).prop_map(move |len| s + len));
    let range_delete =
        (0..TREES, 0..KEYS).prop_flat_map(move |(t, s)| end(s).prop_map(move |e| Write::DeleteRange(t, s, e)));
    prop_oneof![12 => pending_write(), 1 => range_delete]
}

fn bound() -> impl Strategy<Value = KeyBound> {
    proptest::option::of((0..KEYS, any::<bool>()))
}

fn walk() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0u64), Just(u64::MAX), any::<u64>()]
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => proptest::collection::vec(committed_write(), 1..12).prop_map(Op::Commit),
        2 => Just(Op::Begin),
        16 => (any::<usize>(), pending_write()).prop_map(|(s, w)| Op::Pending(s, w)),
        5 => (any::<usize>(), 0..TREES, 0..KEYS).prop_map(|(s, t, k)| Op::Get(s, t, k)),
        4 => (any::<usize>(), 0..TREES, bound(), bound(), walk()).prop_map(|(s, t, lo, hi, w)| Op::Scan(s, t, lo, hi, w)),
        1 => (any::<usize>(), 0..TREES, bound(), bound()).prop_map(|(s, t, lo, hi)| Op::OpenCursor(s, t, lo, hi)),
        3 => (any::<usize>(), walk(), 1u8..12).prop_map(|(c, w, n)| Op::AdvanceCursor(c, w, n)),
        1 => any::<usize>().prop_map(Op::CommitPending),
        1 => any::<usize>().prop_map(Op::Abort),
        1 => Just(Op::FlushAll),
    ]
}

/// A transaction in flight: its snapshot, its pending writes, and what it should read.
struct Txn {
    snapshot: Snapshot,
    pending: Arc<PendingWrites>,
    writes: Vec<Write>,
    /// The committed state when it began.
    base: Model,
    /// `base` with its writes applied: what reads through it see.
    view: Model,
}

/// An iterator held across steps, and the entries it has still to return.
struct Cursor {
    iter: RangeIter,
    expected: VecDeque<Entry>,
}

struct Harness {
    engine: Engine,
    ids: [TreeId; TREES],
    model: Model,
    txns: Vec<Txn>,
    cursors: Vec<Cursor>,
}

fn counter_add(old: Option<&Vec<u8>>, delta: i64) -> Vec<u8> {
    match old.map(|v| <[u8; 8]>::try_from(v.as_slice())) {
        None => delta.to_le_bytes().to_vec(),
        Some(Ok(bytes)) => i64::from_le_bytes(bytes).wrapping_add(delta).to_le_bytes().to_vec(),
        Some(Err(_)) => old.cloned().unwrap_or_default(),
    }
}

/// Which tree a write goes to.
fn tree_of(write: &Write) -> usize {
    match write {
        Write::Put(t, ..) | Write::Delete(t, ..) | Write::InsertIfAbsent(t, ..) | Write::Add(t, ..) => *t,
        Write::DeleteRange(t, ..) => *t,
    }
}

/// Applies one write to the model; `Err` if an insert-if-absent meets a key and `checked`.
fn apply(tree: &mut Tree, write: &Write, checked: bool) -> Result<(), ()> {
    match write {
        Write::Put(_, k, v) => {
            tree.insert(key(*k), v.clone());
        }
        Write::Delete(_, k) => {
            tree.remove(&key(*k));
        }
        Write::InsertIfAbsent(_, k, v) => {
            if checked && tree.contains_key(&key(*k)) {
                return Err(());
            }
            tree.insert(key(*k), v.clone());
        }
        Write::Add(_, k, d) => {
            let value = counter_add(tree.get(&key(*k)), *d);
            tree.insert(key(*k), value);
        }
        Write::DeleteRange(_, s, e) => {
            let (start, end) = (key(*s), e.map(key));
            tree.retain(|k, _| !(*k >= start && end.as_ref().is_none_or(|e| k < e)));
        }
    }
    Ok(())
}

/// A transaction's writes applied to a copy of the model, as a commit checks them.
fn model_commit(model: &Model, writes: &[Write]) -> Result<Model, ()> {
    let mut next = model.clone();
    for write in writes {
        apply(&mut next[tree_of(write)], write, true)?;
    }
    Ok(next)
}

fn to_bound(b: KeyBound) -> Bound<Vec<u8>> {
    match b {
        None => Bound::Unbounded,
        Some((k, true)) => Bound::Included(key(k)),
        Some((k, false)) => Bound::Excluded(key(k)),
    }
}

fn model_range(tree: &Tree, lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> VecDeque<Entry> {
    tree.iter()
        .filter(|(k, _)| {
            let above = match lo {
                Bound::Included(l) => *k >= l,
                Bound::Excluded(l) => *k > l,
                Bound::Unbounded => true,
            };
            let below = match hi {
                Bound::Included(h) => *k <= h,
                Bound::Excluded(h) => *k < h,
                Bound::Unbounded => true,
            };
            above && below
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn range_of(snapshot: &Snapshot, id: TreeId, lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> RangeIter {
    snapshot.range(id, (lo.as_ref().map(Vec::as_slice), hi.as_ref().map(Vec::as_slice)))
}

/// Takes up to `steps` entries from both the iterator and the expected entries, each from the
/// end the walk's bit picks, and checks they agree (including where they end).
fn walk_and_check(iter: &mut RangeIter, expected: &mut VecDeque<Entry>, walk: u64, steps: usize, what: &str) {
    for step in 0..steps {
        let back = walk >> (step % 64) & 1 == 1;
        let got = if back { iter.next_back() } else { iter.next() };
        let got = got.map(|item| item.unwrap_or_else(|e| panic!("{what}: {e}")));
        let want = if back { expected.pop_back() } else { expected.pop_front() };
        assert_eq!(got, want, "{what}: step {step}, from the {}", if back { "back" } else { "front" });
        if got.is_none() {
            return;
        }
    }
}

impl Harness {
    /// An engine whose trees start with every even key, each a counter, so that scans cross
    /// many windows from the first step.
    fn new(options: Options) -> Harness {
        let engine = Engine::open_in_memory(options).expect("open");
        let ids = [0, 1].map(|t| engine.create_tree(&format!("tree-{t}")).expect("create tree"));
        let mut harness =
            Harness { engine, ids, model: vec![Tree::new(); TREES], txns: Vec::new(), cursors: Vec::new() };
        let fill: Vec<Write> = (0..TREES)
            .flat_map(|t| (0..KEYS).step_by(2).map(move |k| Write::Put(t, k, counter(i64::from(k)))))
            .collect();
        harness.step(&Op::Commit(fill));
        harness
    }

    fn step(&mut self, op: &Op) {
        match op {
            Op::Commit(writes) => self.commit(writes),
            Op::Begin => self.begin(),
            Op::Pending(s, write) => self.write(*s, write),
            Op::Get(s, t, k) => self.get(*s, *t, *k),
            Op::Scan(s, t, lo, hi, walk) => self.scan(*s, *t, *lo, *hi, *walk),
            Op::OpenCursor(s, t, lo, hi) => self.open_cursor(*s, *t, *lo, *hi),
            Op::AdvanceCursor(c, walk, steps) => {
                if !self.cursors.is_empty() {
                    let index = c % self.cursors.len();
                    let cursor = &mut self.cursors[index];
                    walk_and_check(&mut cursor.iter, &mut cursor.expected, *walk, usize::from(*steps), "cursor");
                }
            }
            Op::CommitPending(s) => self.commit_pending(*s),
            Op::Abort(s) => {
                if !self.txns.is_empty() {
                    let index = s % self.txns.len();
                    self.txns.remove(index);
                }
            }
            Op::FlushAll => self.engine.flush_all().expect("flush"),
        }
        self.engine.verify().unwrap_or_else(|e| panic!("verify after {op:?}: {e}"));
        self.check_committed();
    }

    fn commit(&mut self, writes: &[Write]) {
        let mut txn = self.engine.begin();
        for write in writes {
            let id = self.ids[tree_of(write)];
            match write {
                Write::Put(_, k, v) => txn.put(id, key(*k), v.clone()),
                Write::Delete(_, k) => txn.delete(id, key(*k)),
                Write::InsertIfAbsent(_, k, v) => txn.insert_if_absent(id, key(*k), v.clone()),
                Write::Add(_, k, d) => txn.update(id, key(*k), d.to_le_bytes().to_vec()),
                Write::DeleteRange(_, s, e) => txn.delete_range(id, key(*s), e.map(key)),
            };
        }
        let result = txn.commit(Durability::None);
        self.expect_commit(result, writes);
    }

    /// Checks a commit's result against the model, and moves the model on if it committed.
    fn expect_commit(&mut self, result: Result<u64, Error>, writes: &[Write]) {
        match model_commit(&self.model, writes) {
            Ok(next) => {
                result.expect("commit");
                self.model = next;
            }
            Err(()) => assert!(matches!(result, Err(Error::KeyExists { .. })), "expected KeyExists, got {result:?}"),
        }
    }

    fn begin(&mut self) {
        if self.txns.len() == LIVE {
            self.txns.remove(0);
        }
        self.txns.push(Txn {
            snapshot: self.engine.snapshot(),
            pending: Arc::new(self.engine.pending()),
            writes: Vec::new(),
            base: self.model.clone(),
            view: self.model.clone(),
        });
    }

    fn txn(&mut self, s: usize) -> Option<&mut Txn> {
        let live = self.txns.len();
        if live == 0 { None } else { self.txns.get_mut(s % live) }
    }

    fn write(&mut self, s: usize, write: &Write) {
        let ids = self.ids;
        let Some(txn) = self.txn(s) else { return };
        let id = ids[tree_of(write)];
        // Copies the writes if an overlaid snapshot or iterator still holds them.
        let pending = Arc::make_mut(&mut txn.pending);
        match write {
            Write::Put(_, k, v) => pending.put(id, key(*k), v.clone()),
            Write::Delete(_, k) => pending.delete(id, key(*k)),
            Write::InsertIfAbsent(_, k, v) => pending.insert_if_absent(id, key(*k), v.clone()),
            Write::Add(_, k, d) => pending.update(id, key(*k), d.to_le_bytes().to_vec()),
            Write::DeleteRange(..) => unreachable!("pending writes have no range delete"),
        };
        apply(&mut txn.view[tree_of(write)], write, false).expect("an unchecked write applies");
        txn.writes.push(write.clone());
        assert_eq!(txn.pending.len(), txn.writes.len());
    }

    fn get(&mut self, s: usize, t: usize, k: u16) {
        let id = self.ids[t];
        let Some(txn) = self.txn(s) else { return };
        let overlaid = txn.snapshot.with_pending(Arc::clone(&txn.pending));
        assert_eq!(overlaid.get(id, &key(k)).expect("get"), txn.view[t].get(&key(k)).cloned(), "get {k}");
        // The snapshot itself still reads its committed state only.
        assert_eq!(txn.snapshot.get(id, &key(k)).expect("get"), txn.base[t].get(&key(k)).cloned(), "plain get {k}");
    }

    fn scan(&mut self, s: usize, t: usize, lo: KeyBound, hi: KeyBound, walk: u64) {
        let id = self.ids[t];
        let Some(txn) = self.txn(s) else { return };
        let (lo, hi) = (to_bound(lo), to_bound(hi));
        let mut iter = range_of(&txn.snapshot.with_pending(Arc::clone(&txn.pending)), id, &lo, &hi);
        let mut expected = model_range(&txn.view[t], &lo, &hi);
        walk_and_check(&mut iter, &mut expected, walk, usize::MAX, "scan");
    }

    fn open_cursor(&mut self, s: usize, t: usize, lo: KeyBound, hi: KeyBound) {
        let id = self.ids[t];
        let Some(txn) = self.txn(s) else { return };
        let (lo, hi) = (to_bound(lo), to_bound(hi));
        let iter = range_of(&txn.snapshot.with_pending(Arc::clone(&txn.pending)), id, &lo, &hi);
        let expected = model_range(&txn.view[t], &lo, &hi);
        if self.cursors.len() == LIVE {
            self.cursors.remove(0);
        }
        self.cursors.push(Cursor { iter, expected });
    }

    fn commit_pending(&mut self, s: usize) {
        if self.txns.is_empty() {
            return;
        }
        let txn = self.txns.remove(s % self.txns.len());
        let unchanged = txn.base == self.model;
        let result = self.engine.commit_pending(Arc::unwrap_or_clone(txn.pending), Durability::None);
        let committed = result.is_ok();
        self.expect_commit(result, &txn.writes);
        if committed && unchanged {
            // Nobody committed since it began: what it read is now the committed state.
            assert_eq!(self.model, txn.view, "the committed state is the transaction's view");
        }
    }

    fn check_committed(&self) {
        let snapshot = self.engine.snapshot();
        for (t, id) in self.ids.iter().enumerate() {
            let got: Vec<Entry> = snapshot.iter(*id).collect::<Result<_, _>>().expect("scan");
            let want: Vec<Entry> = self.model[t].iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            assert_eq!(got, want, "tree {t} contents");
        }
    }
}

/// The number of proptest cases: `PROPTEST_CASES` when set (a long soak), else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(64), ..ProptestConfig::default() })]

    #[test]
    fn reads_through_pending_writes_match_the_model(ops in proptest::collection::vec(op_strategy(), 1..300)) {
        let mut harness = Harness::new(Options::tiny());
        for op in &ops {
            harness.step(op);
        }
    }

    #[test]
    fn reads_through_pending_writes_match_the_model_with_wider_nodes(
        ops in proptest::collection::vec(op_strategy(), 1..300)
    ) {
        let options = Options { node_size_bytes: 2048, basement_size_bytes: 256, fanout: 6, ..Options::tiny() };
        let mut harness = Harness::new(options);
        for op in &ops {
            harness.step(op);
        }
    }
}

fn counter(n: i64) -> Vec<u8> {
    n.to_le_bytes().to_vec()
}

fn entries(iter: impl Iterator<Item = Result<Entry, Error>>) -> Vec<Entry> {
    iter.collect::<Result<_, _>>().expect("scan")
}

/// An engine with one tree holding keys 0, 2, 4, … below `count * 2`, each the counter `k`.
fn engine_with_evens(count: u16) -> (Engine, TreeId) {
    let engine = Engine::open_in_memory(Options::tiny()).expect("open");
    let tree = engine.create_tree("t").expect("create tree");
    let mut txn = engine.begin();
    for k in 0..count {
        txn.put(tree, key(k * 2), counter(i64::from(k * 2)));
    }
    txn.commit(Durability::None).expect("commit");
    (engine, tree)
}

/// Goal: `commit_pending` makes exactly the overlaid view the committed state, and the
/// snapshots from before keep theirs. Method: over 200 committed keys, pending puts of new keys,
/// deletes, counter updates over committed values (chained, and folded over a pending put), an
/// insert-if-absent of a new key; scan the overlay both ways, commit, scan the new state.
#[test]
fn commit_pending_makes_the_overlaid_view_visible() {
    let (engine, tree) = engine_with_evens(200);
    let mut pending = engine.pending();
    pending.put(tree, key(1), "new").delete(tree, key(2)).update(tree, key(4), counter(10));
    pending.update(tree, key(4), counter(5)).put(tree, key(7), counter(1)).update(tree, key(7), counter(1));
    pending.insert_if_absent(tree, key(399), "last").update(tree, key(500), counter(3)).delete(tree, key(501));
    let snapshot = engine.snapshot();
    let overlaid = snapshot.with_pending(Arc::new(pending.clone()));
    let view = entries(overlaid.iter(tree));
    let mut backward = entries(overlaid.iter(tree).rev());
    backward.reverse();
    assert_eq!(view, backward);
    assert_eq!(overlaid.get(tree, &key(4)).expect("get"), Some(counter(19)));
    assert_eq!(overlaid.get(tree, &key(7)).expect("get"), Some(counter(2)));
    assert_eq!(overlaid.get(tree, &key(500)).expect("get"), Some(counter(3)));
    assert_eq!(overlaid.get(tree, &key(2)).expect("get"), None);
    assert_eq!(view.len(), 200 + 1 - 1 + 1 + 1 + 1);
    engine.commit_pending(pending, Durability::None).expect("commit");
    assert_eq!(entries(engine.snapshot().iter(tree)), view);
    assert_eq!(entries(overlaid.iter(tree)), view, "the overlay reads as before");
    assert_eq!(entries(snapshot.iter(tree)).len(), 200, "the snapshot reads as before");
    engine.verify().expect("verify");
}

/// Goal: an insert-if-absent that meets a key at commit drops every pending write, whether the
/// key was committed by another writer after the snapshot or put by an earlier pending write.
/// Method: both cases, each checking the error's key and that the committed state is unchanged.
#[test]
fn key_exists_at_commit_drops_everything() {
    let (engine, tree) = engine_with_evens(50);
    let before = entries(engine.snapshot().iter(tree));
    let mut pending = engine.pending();
    pending.put(tree, key(1), "a").update(tree, key(2), counter(1)).insert_if_absent(tree, key(3), "mine");
    let overlaid = engine.snapshot().with_pending(Arc::new(pending.clone()));
    let mut other = engine.begin();
    other.put(tree, key(3), "theirs");
    other.commit(Durability::None).expect("commit");
    assert_eq!(overlaid.get(tree, &key(3)).expect("get"), Some(b"mine".to_vec()), "the other commit is invisible");
    let result = engine.commit_pending(pending, Durability::None);
    assert!(matches!(&result, Err(Error::KeyExists { key: k, .. }) if *k == key(3)), "{result:?}");
    let mut after = entries(engine.snapshot().iter(tree));
    after.retain(|(k, _)| *k != key(3));
    assert_eq!(after, before, "nothing of the pending writes committed");

    let mut pending = engine.pending();
    pending.put(tree, key(11), "a").insert_if_absent(tree, key(11), "b");
    let result = engine.commit_pending(pending, Durability::None);
    assert!(matches!(&result, Err(Error::KeyExists { key: k, .. }) if *k == key(11)), "{result:?}");
    assert_eq!(engine.snapshot().get(tree, &key(11)).expect("get"), None);
    engine.verify().expect("verify");
}

/// Goal: an overlaid iterator reads the pending writes it was given and the snapshot's commits,
/// whatever is written or committed while it runs. Method: open an iterator over 300 keys, take
/// a few entries from each end, then write to the transaction (through `Arc::make_mut`, which
/// copies the writes the iterator holds) and commit other writes, then finish the iterator
/// from both ends in turn and compare with the view at its opening.
#[test]
fn an_overlaid_iterator_is_frozen() {
    let (engine, tree) = engine_with_evens(300);
    let mut pending = Arc::new(engine.pending());
    Arc::make_mut(&mut pending).put(tree, key(3), "p").delete(tree, key(10)).update(tree, key(598), counter(2));
    let overlaid = engine.snapshot().with_pending(Arc::clone(&pending));
    let expected = entries(overlaid.iter(tree));
    let mut iter = overlaid.iter(tree);
    let mut got: (Vec<Entry>, Vec<Entry>) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        got.0.push(iter.next().expect("an entry").expect("scan"));
        got.1.push(iter.next_back().expect("an entry").expect("scan"));
    }
    Arc::make_mut(&mut pending).delete(tree, key(4)).put(tree, key(5), "later").update(tree, key(596), counter(9));
    let mut other = engine.begin();
    other.delete_range(tree, key(0), None).put(tree, key(20), "theirs");
    other.commit(Durability::None).expect("commit");
    engine.flush_all().expect("flush");
    let mut from_front = true;
    loop {
        let item = if from_front { iter.next() } else { iter.next_back() };
        let Some(item) = item else { break };
        if from_front {
            got.0.push(item.expect("scan"))
        } else {
            got.1.push(item.expect("scan"))
        }
        from_front = !from_front;
    }
    got.1.reverse();
    got.0.extend(got.1);
    assert_eq!(got.0, expected);
    assert_eq!(pending.len(), 6);
    assert_eq!(overlaid.pending().map(|p| p.len()), Some(3));
    engine.verify().expect("verify");
}

/// Goal: reads through pending writes report a missing tree as plain reads do, and a commit of
/// pending writes checks sizes as a transaction does. Method: pending writes to a tree that is
/// then dropped; a key over the limit.
#[test]
fn missing_trees_and_sizes_are_reported() {
    let (engine, tree) = engine_with_evens(10);
    let mut pending = engine.pending();
    pending.put(tree, key(1), "v");
    let overlaid = engine.snapshot().with_pending(Arc::new(pending.clone()));
    engine.drop_tree("t").expect("drop");
    assert!(matches!(overlaid.get(tree, &key(1)), Err(Error::TreeNotFound(_))));
    assert!(matches!(overlaid.iter(tree).next(), Some(Err(Error::TreeNotFound(_)))));
    assert!(matches!(engine.commit_pending(pending, Durability::None), Err(Error::TreeNotFound(_))));

    let tree = engine.create_tree("u").expect("create tree");
    let mut pending = engine.pending();
    pending.put(tree, key(1), "v").put(tree, vec![7; storage::MAX_KEY_BYTES + 1], "v");
    assert!(matches!(engine.commit_pending(pending, Durability::None), Err(Error::TooLarge(_))));
    assert_eq!(engine.snapshot().get(tree, &key(1)).expect("get"), None);
    assert!(engine.commit_pending(engine.pending(), Durability::None).is_ok(), "nothing to commit");
    engine.verify().expect("verify");
}

/// Goal: with the background flusher reshaping the tree under it, a transaction reads its
/// own writes over a stable snapshot. Method: a thread moves amounts between 300 counters (the
/// total stays constant; 5,000 commits at most) while this one records its own moves as pending
/// updates and checks, after each, that a forward and a backward scan through them keep the
/// total and see every key it added.
#[test]
fn reads_through_pending_writes_while_others_commit() {
    let options = Options {
        node_size_bytes: 4096,
        basement_size_bytes: 512,
        fanout: 6,
        flush_mode: storage::FlushMode::Background,
        ..Options::default()
    };
    let engine = Arc::new(Engine::open_in_memory(options).expect("open"));
    let tree = engine.create_tree("accounts").expect("create tree");
    let mut txn = engine.begin();
    for k in 0..300 {
        txn.put(tree, key(k), counter(100));
    }
    txn.commit(Durability::None).expect("commit");
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (engine, stop) = (Arc::clone(&engine), Arc::clone(&stop));
        std::thread::spawn(move || {
            // Bounded: the held snapshot keeps every update after it, and reads resolve them.
            for k in 0..5000u16 {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                let mut txn = engine.begin();
                txn.update(tree, key(k % 300), counter(-3)).update(tree, key((k * 7 + 1) % 300), counter(3));
                txn.commit(Durability::None).expect("commit");
            }
        })
    };
    let total = |snapshot: &Snapshot, reverse: bool| -> i64 {
        let iter = snapshot.iter(tree);
        let items = if reverse { entries(iter.rev()) } else { entries(iter) };
        items.iter().map(|(_, v)| i64::from_le_bytes(v.as_slice().try_into().expect("a counter"))).sum()
    };
    let snapshot = engine.snapshot();
    let mut pending = Arc::new(engine.pending());
    for round in 0..200u16 {
        let (from, to) = (key(round * 13 % 300), key(round * 17 % 300 + 300));
        Arc::make_mut(&mut pending).update(tree, from, counter(-1)).update(tree, to, counter(1));
        let overlaid = snapshot.with_pending(Arc::clone(&pending));
        assert_eq!(total(&overlaid, false), 300 * 100);
        assert_eq!(total(&overlaid, true), 300 * 100);
        assert_eq!(entries(overlaid.iter(tree)).len(), 300 + usize::from(round) + 1);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().expect("writer");
    engine.verify().expect("verify");
}
