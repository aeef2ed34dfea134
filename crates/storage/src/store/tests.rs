//! Tests of the node store as a whole: reads, eviction steps and checkpoints together.
//!
//! Goal: no block a reader may have been handed is freed while the node still lives there.
use super::*;
use crate::io::sim::SimFs;
use crate::node::leaf::Leaf;
use crate::thin::Part;

fn store_on_sim_disk() -> NodeStore {
    store_on_sim_disk_with_budget(1 << 20)
}

fn store_on_sim_disk_with_budget(budget: usize) -> NodeStore {
    let fs = SimFs::new();
    let file = DataFile::open(&fs, std::path::Path::new("data")).expect("open data file");
    NodeStore::new(Some(Disk { file: Arc::new(file), compression: Compression::None }), budget, true)
}

/// A checkpoint captured a dirty node; an eviction wrote the same version and dropped it from
/// memory (so readers now read the eviction's block); then the checkpoint's own write is
/// marked. The eviction's block must stay the node's and be the one the checkpoint names.
#[test]
fn a_checkpoint_keeps_the_block_an_eviction_wrote_meanwhile() {
    let store = store_on_sim_disk();
    let id = store.allocate(Node::Leaf(Leaf::default())).expect("allocate");
    let capture = store.capture().expect("capture");
    let (captured_id, node, version, _) = capture.dirty.into_iter().next().expect("one dirty node");
    assert_eq!(captured_id, id);
    store.evict(id, true).expect("evict");
    let evicted = store.shard(id).lock().get(&id).and_then(|slot| slot.addr).expect("evicted to a block");
    let written = store.write_node(id, &node, Compression::None).expect("checkpoint write");
    let written_at = written.addr;
    assert_ne!(written_at, evicted);
    assert_eq!(store.mark_written(id, version, written), evicted, "the catalog names the block readers use");
    assert_eq!(store.shard(id).lock().get(&id).and_then(|slot| slot.addr), Some(evicted));
    // The checkpoint's copy went back to the allocator; the evicted block did not.
    let again = store.write_node(id, &node, Compression::None).expect("a new write");
    assert_eq!(again.addr.offset, written_at.offset, "the checkpoint's unnamed copy is reused first");
    assert!(store.get(id).is_ok(), "the node reads back from the block readers were handed");
}

/// A node changed while a checkpoint wrote it stays dirty, but its slot names the block
/// the checkpoint wrote from then on, and the block it named before is retired: regression,
/// a node that changed during every checkpoint kept its first block (at the end of a file
/// being compacted) forever.
#[test]
fn a_node_changed_during_a_checkpoint_names_the_checkpoints_block() {
    let store = store_on_sim_disk();
    let id = store.allocate(Node::Leaf(Leaf::default())).expect("allocate");
    store.evict(id, true).expect("written and thin");
    let first = store.shard(id).lock().get(&id).and_then(|slot| slot.addr).expect("a block");
    let node = store.take(id).expect("take");
    store.put(id, node).expect("dirty again");
    let capture = store.capture().expect("capture");
    let (_, node, version, _) = capture.dirty.into_iter().next().expect("one dirty node");
    let changed = store.take(id).expect("take");
    store.put(id, changed).expect("changed after the capture");
    let written = store.write_node(id, &node, Compression::None).expect("checkpoint write");
    let at = written.addr;
    assert_eq!(store.mark_written(id, version, written), at);
    let shard = store.shard(id).lock();
    let slot = shard.get(&id).expect("slot");
    assert_eq!((slot.addr, slot.dirty, slot.checkpointed), (Some(at), true, true));
    drop(shard);
    assert_ne!(at, first);
    store.drain_retired();
    assert_eq!(store.retired_bytes(), 0, "the first block was no checkpoint's: freed once no reader can hold it");
}

/// Eviction goes a step at a time, and a node dropped from memory keeps nothing of itself in
/// its slot: regression, layouts were kept for every node on disk, outside the budget, and
/// a 256 MiB process running iibench was OOM-killed at 6M inserts.
#[test]
fn eviction_thins_then_drops_and_keeps_no_layout() {
    let store = store_on_sim_disk();
    let id = store.allocate(Node::Leaf(Leaf::default())).expect("allocate");
    let state = |store: &NodeStore| {
        let shard = store.shard(id).lock();
        let slot = shard.get(&id).expect("slot");
        let resident = match &slot.node {
            None => "none",
            Some(View::Whole(_)) => "whole",
            Some(View::Thin(thin)) if thin.has_parts() => "thin with parts",
            Some(View::Thin(_)) => "thin",
        };
        (resident, slot.layout.is_some(), slot.size)
    };
    store.evict(id, true).expect("evict a dirty node: written, then thin");
    let (resident, has_layout, size) = state(&store);
    assert_eq!((resident, has_layout), ("thin", true));
    assert_eq!(store.used_bytes(), size, "the thin node alone is charged");
    let View::Thin(thin) = store.view(id).expect("view") else { panic!("a reader sees the thin node") };
    assert!(store.part(&thin, 0).expect("read a section").is_some());
    assert_eq!(state(&store).0, "thin with parts");
    store.evict(id, true).expect("evict the section");
    assert_eq!(state(&store).0, "thin");
    store.evict(id, true).expect("evict the thin node");
    assert_eq!(state(&store), ("none", false, 0));
    assert_eq!(store.used_bytes(), 0);
    assert!(matches!(store.view(id).expect("view again"), View::Thin(_)), "its head is read back alone");
    assert!(matches!(&**store.get(id).expect("a writer's whole read"), Node::Leaf(_)));
}

/// Heads go last: writers fill the cache with leaves many times over, and the head of an
/// internal node (the least recently used node of all) is still in memory, as are leaves'
/// heads while they fit in their share; whole leaves are written out and thinned. Regression
/// (issue 17): in plain LRU order an index's heads were pushed out by the leaves the flusher
/// reads whole, and each query read them again.
#[test]
fn eviction_keeps_heads_and_internal_heads_longest() {
    use crate::node::basement::Basement;
    use crate::node::buffer::Buffer;
    let budget = 256 << 10;
    let store = store_on_sim_disk_with_budget(budget);
    let internal = Internal {
        height: 1,
        pivots: vec![b"m".to_vec()],
        children: vec![NodeId(1_000), NodeId(1_001)],
        buffers: vec![Buffer::default(), Buffer::default()],
    };
    let internal = store.allocate(Node::Internal(internal)).expect("allocate");
    store.evict(internal, true).expect("written and thin");
    let leaf = |i: usize| {
        let value = vec![i as u8; 8 << 10];
        let key = format!("{i:08}").into_bytes();
        Leaf::from_basements(vec![Basement::from_entries([(
            &key[..],
            vec![(1, Some(std::borrow::Cow::Owned(value)))],
        )])])
    };
    let leaves: Vec<NodeId> = (0..200).map(|i| store.allocate(Node::Leaf(leaf(i))).expect("allocate a leaf")).collect();
    let resident = |id: NodeId| store.shard(id).lock().get(&id).and_then(|slot| slot.node.clone());
    assert!(matches!(resident(internal), Some(View::Thin(_))), "the internal node's head is still in memory");
    assert!(matches!(resident(leaves[0]), Some(View::Thin(_))), "the oldest leaf's head is still in memory");
    assert!(store.counters.write_backs.load(Ordering::Relaxed) > 100, "whole leaves were written out");
    assert!(store.used_bytes() <= budget / 100 * 115, "the cache kept to its budget: {}", store.used_bytes());
}

/// A head longer than the first page a reader reads is completed with a second read of the
/// rest (long keys in a leaf of many basements), and its sections still read alone.
#[test]
fn a_head_longer_than_a_page_reads_back() {
    use crate::node::basement::Basement;
    let store = store_on_sim_disk();
    let key = |i: usize| format!("{i:0>200}").into_bytes();
    let basements: Vec<Basement> = (0..64)
        .map(|i| Basement::from_entries([(&key(i)[..], vec![(1, Some(std::borrow::Cow::Borrowed(&b"v"[..])))])]))
        .collect();
    let leaf = Leaf::from_basements(basements.clone());
    let id = store.allocate(Node::Leaf(leaf)).expect("allocate");
    store.evict(id, true).expect("written and thin");
    store.evict(id, true).expect("dropped");
    let View::Thin(thin) = store.view(id).expect("view") else { panic!("the head is read alone") };
    assert_eq!(thin.layout.sections.len(), 64);
    for (index, basement) in basements.iter().enumerate() {
        match store.part(&thin, index).expect("a section") {
            Some(Part::Basement(read)) => assert_eq!(&*read, basement),
            _ => panic!("basement {index} reads back"),
        }
    }
}

/// A writer changes a node a checkpoint still holds: both versions are in memory, and both
/// are charged until the checkpoint lets its version go.
#[test]
fn a_version_held_by_a_checkpoint_stays_charged_until_dropped() {
    let store = store_on_sim_disk();
    let id = store.allocate(Node::Leaf(Leaf::default())).expect("allocate");
    let held = store.get(id).expect("get");
    let charged = store.used_bytes();
    assert!(charged > 0);
    let mut copy = store.take(id).expect("take");
    assert_eq!(store.used_bytes(), 2 * charged, "the held version and the writer's copy are both charged");
    if let Node::Leaf(leaf) = &mut copy {
        let update: crate::message::UpdateFn = Arc::new(|_, _, _| None);
        leaf.apply_point(b"k".to_vec(), vec![(1, crate::message::Event::Put(vec![7; 4000]))], 0, &update, 64 << 10);
    }
    store.put(id, copy).expect("put");
    let both = store.used_bytes();
    assert!(both > charged + 4000, "both versions charged: {both}");
    drop(held);
    let alone = store.used_bytes();
    assert_eq!(alone, both - charged, "dropping the held version releases exactly its charge");
    assert_eq!(store.counters.copies.load(Ordering::Relaxed), 1);
    // Without another holder a take moves the node out: no copy, and it stays charged.
    let node = store.take(id).expect("take alone");
    assert_eq!(store.used_bytes(), alone, "a node out with a writer is charged");
    store.put(id, node).expect("put");
    assert_eq!(store.used_bytes(), alone);
    assert_eq!(store.counters.copies.load(Ordering::Relaxed), 1);
}
