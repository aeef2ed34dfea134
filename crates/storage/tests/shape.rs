//! Goal: a data file keeps the tree shape (node size, basement size, fanout) it was created with.
//! Reopening with other shape options (a smaller cache choosing smaller nodes, a changed
//! default) must neither split nor mis-verify the existing nodes.
//!
//! Method: fill a tree with one shape, close (which checkpoints), reopen with another shape in
//! the options; the engine reports the file's shape, `verify()` passes, every key reads back,
//! and further writes keep working; a second reopen still has the first shape.

use std::path::Path;
use std::sync::Arc;

use storage::io::SimFs;
use storage::{Durability, Engine, FlushMode, Options};

fn created_shape() -> Options {
    Options {
        node_size_bytes: 4096,
        basement_size_bytes: 512,
        fanout: 6,
        flush_mode: FlushMode::Inline,
        cache_size_bytes: 1 << 20,
        ..Options::default()
    }
}

fn other_shape() -> Options {
    Options { node_size_bytes: 1024, basement_size_bytes: 256, fanout: 4, ..created_shape() }
}

fn key(i: u32) -> Vec<u8> {
    format!("key-{:08}", i.wrapping_mul(2_654_435_761) % 1_000_000).into_bytes()
}

#[test]
fn reopening_with_other_shape_options_keeps_the_files_shape() {
    let fs = Arc::new(SimFs::new());
    let dir = Path::new("/db");
    let engine = Engine::open_with(fs.clone(), dir, created_shape()).expect("create");
    let tree = engine.create_tree("t").expect("tree");
    let mut txn = engine.begin();
    for i in 0..3000 {
        txn.put(tree, key(i), vec![7; 40]);
    }
    txn.commit(Durability::Immediate).expect("commit");
    engine.verify().expect("verify before close");
    engine.close().expect("close");

    let engine = Engine::open_with(fs.clone(), dir, other_shape()).expect("reopen with other options");
    let options = engine.options();
    assert_eq!((options.node_size_bytes, options.basement_size_bytes, options.fanout), (4096, 512, 6));
    engine.verify().expect("verify after reopen");
    let snapshot = engine.snapshot();
    for i in 0..3000 {
        assert_eq!(snapshot.get(tree, &key(i)).expect("get"), Some(vec![7; 40]), "key {i}");
    }
    drop(snapshot);
    let mut txn = engine.begin();
    for i in 3000..4000 {
        txn.put(tree, key(i), vec![8; 40]);
    }
    txn.commit(Durability::Immediate).expect("more writes");
    engine.verify().expect("verify after more writes");
    engine.close().expect("close again");

    let engine = Engine::open_with(fs, dir, other_shape()).expect("second reopen");
    assert_eq!(engine.options().node_size_bytes, 4096);
    engine.verify().expect("verify after the second reopen");
    assert_eq!(engine.snapshot().iter(tree).count(), 4000);
}

#[test]
fn the_node_size_follows_the_cache_size() {
    let node_size = |cache: usize| Options::for_cache_size(cache).node_size_bytes;
    assert_eq!(node_size(128 << 20), 4 << 20);
    assert_eq!(node_size(1 << 30), 4 << 20);
    assert_eq!(node_size(64 << 20), 2 << 20);
    assert_eq!(node_size(48 << 20), 1 << 20);
    assert_eq!(node_size(32 << 20), 1 << 20);
    assert_eq!(node_size(8 << 20), 256 << 10);
    assert_eq!(node_size(1 << 20), 256 << 10);
    assert_eq!(Options::for_cache_size(32 << 20).cache_size_bytes, 32 << 20);
}
