//! Goal: every committed input of the `node` fuzz corpus still runs through
//! its body in `storage::fuzzing` without a panic, on stable. Method, and what makes it
//! fail: `fuzz/replay.rs`, which every crate with a fuzz target includes.
//!
//! `cargo test --release -p storage --test fuzz_corpus -- --ignored write_seeds` rewrites the
//! generated seeds (`seed-*`) into the corpora.

use std::path::Path;
use std::sync::Arc;

#[path = "../../../fuzz/replay.rs"]
mod replay;

use replay::Seeds;

#[test]
fn node() {
    replay::replay("node", storage::fuzzing::node);
}

/// Each target listed for this crate in `fuzz/replay.rs` is replayed above, and every target of
/// `fuzz/Cargo.toml` is listed there.
#[test]
fn every_fuzz_target_is_replayed() {
    replay::check_targets(env!("CARGO_PKG_NAME"), &["node"]);
}

/// Writes the generated seeds into `fuzz/corpus/<target>/seed-<name>` (existing files are kept).
#[test]
#[ignore = "writes files: run by hand after changing the seeds"]
fn write_seeds() {
    replay::write_seeds("node", nodes());
}

/// Nodes of every shape from `storage::fuzzing::seed_nodes`, and blocks a real engine wrote:
/// leaves and internal nodes of two trees of a small node size, after a checkpoint.
fn nodes() -> Seeds {
    let mut seeds = storage::fuzzing::seed_nodes();
    let fs = Arc::new(storage::io::SimFs::new());
    let dir = Path::new("/db");
    let options = storage::Options {
        node_size_bytes: 4096,
        basement_size_bytes: 512,
        fanout: 4,
        flush_mode: storage::FlushMode::Inline,
        ..storage::Options::default()
    };
    let engine = storage::Engine::open_with(fs.clone(), dir, options).expect("the engine opens");
    let documents = engine.create_tree("documents").expect("a tree");
    let counters = engine.create_tree("counters").expect("a tree");
    for batch in 0..20u32 {
        let mut transaction = engine.begin();
        for i in 0..20u32 {
            let n = batch * 20 + i;
            transaction.put(
                documents,
                format!("key-{:06}", n.wrapping_mul(2_654_435_761) % 100_000),
                vec![b'v'; (n % 40) as usize],
            );
            transaction.update(counters, format!("c{}", n % 7), 1_i64.to_le_bytes().to_vec());
        }
        if batch % 5 == 4 {
            transaction.delete_range(documents, b"key-01".to_vec(), Some(b"key-02".to_vec()));
            transaction.delete(counters, b"c3".to_vec());
        }
        transaction.commit(storage::Durability::Periodic).expect("commits");
    }
    engine.checkpoint().expect("checkpoints");
    engine.close().expect("closes");
    let file = storage::io::FileSystem::open(fs.as_ref(), &dir.join("data.strata"), storage::io::OpenMode::Existing)
        .expect("the data file opens");
    let len = file.len().expect("a length");
    let mut data = vec![0; usize::try_from(len).expect("small")];
    file.read_exact_at(&mut data, 0).expect("reads");
    seeds.push(("engine-header-slot".into(), [&[7][..], &data[..4096]].concat()));
    let mut blocks = 0;
    for offset in (8192..data.len()).step_by(4096) {
        let block = &data[offset..];
        if !block.starts_with(b"SBLK") {
            continue;
        }
        let payload_len = u32::from_le_bytes(block[16..20].try_into().expect("four bytes")) as usize;
        let block = &block[..20 + payload_len];
        let node_id = &block[8..16];
        let mode: &[u8] = if u64::from_le_bytes(node_id.try_into().expect("eight bytes")) == 0 { &[8] } else { &[2] };
        let input = if mode == [8] { [mode, &block[20..]].concat() } else { [mode, block].concat() };
        seeds.push((format!("engine-block-{blocks:02}"), input));
        if mode == [2] && blocks < 6 {
            seeds.push((format!("engine-node-{blocks:02}"), [&[0][..], node_id, &block[20..]].concat()));
        }
        blocks += 1;
    }
    assert!(blocks >= 4, "the engine wrote {blocks} blocks");
    seeds
}
