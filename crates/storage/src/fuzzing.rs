//! Fuzz entry points for the bytes the engine reads back from its files: not part of the
//! engine's API. [`node`] is the body of the `node` cargo-fuzz target (`fuzz/`), and
//! `tests/fuzz_corpus.rs` replays the committed corpus through it on stable. It
//! takes any bytes, returns nothing, and panics only when a promise breaks: a decoder panics, or a
//! node that decoded does not encode and decode back to itself, or its head alone does not give
//! the layout the whole node gave.
//!
//! Input: a mode byte, then what the mode reads.
//!
//! ```text
//! mode % 11 = 0  node_id:u64 node    a node's encoding, decoded as a whole-node read does
//!             1  node_id:u64 node    the same with its head and section checksums recomputed
//!                                    first, so that mutations reach the structure behind them
//!             2  block               a data-file block (SBLK header, payload) read through the
//!                                    data file as the cache reads it: whole, then as a thin node
//!                                    (head, then each section alone)
//!             3  block               the same with the block's and the node's checksums
//!                                    recomputed first
//!             4  basement            a basement section's payload (decompressed)
//!             5  buffer              a buffer section's payload (decompressed); the same bytes
//!                                    are also read as a pieced buffer section (node kind 5),
//!                                    whole and one key's window at a time
//!             6  section             a compressed section
//!             7  slot                a data-file header slot
//!             8  catalog             a checkpoint's catalog
//!             9  segment             a log segment: frames back to back
//!            10  segment             the same with every frame's checksum recomputed first
//! ```
//!
//! [`seed_nodes`] gives seed inputs of every mode: small nodes of every shape in both formats and
//! every compression (whole, as blocks, as sections), a header slot, a catalog and a log segment.

use std::ops::Bound;
use std::path::Path;

use crate::compression::{Compression, compress, decompress};
use crate::file::catalog::Catalog;
use crate::file::header::Header;
use crate::file::{BlockAddr, DataFile};
use crate::io::{FileSystem, OpenMode, SimFs};
use crate::message::{Event, SEQ_MAX, Seq, counter_update, resolve};
use crate::node::basement::Basement;
use crate::node::buffer::{Buffer, RangeDelete};
use crate::node::codec::{self, HEAD_PREFIX_BYTES, Head, Layout};
use crate::node::leaf::Leaf;
use crate::node::pieces::{self, PiecedBuffer};
use crate::node::{Internal, Node, NodeId};
use crate::wal::record::read_frame;

const BLOCK_HEADER_BYTES: usize = 20;
/// Where the fuzzed block is written in its data file (after the two header slots).
const BLOCK_OFFSET: u64 = 8192;

/// The `node` fuzz target: see the module header for the input's layout.
pub fn node(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else { return };
    match mode % 11 {
        0 => with_node_id(rest, whole_node),
        1 => with_node_id(rest, |id, bytes| {
            let mut bytes = bytes.to_vec();
            reseal_node(id, &mut bytes);
            whole_node(id, &bytes);
        }),
        2 => block(rest),
        3 => {
            let mut bytes = rest.to_vec();
            reseal_block(&mut bytes);
            block(&bytes);
        }
        4 => {
            if let Ok(basement) = codec::decode_basement(rest) {
                read_basement(&basement);
                let again = codec::decode_basement(&codec::encode_basement(&basement));
                assert_eq!(again.as_ref(), Ok(&basement), "a decoded basement round-trips");
            }
        }
        5 => {
            if let Ok(buffer) = codec::decode_buffer(rest.to_vec()) {
                read_buffer(&buffer);
                let again = codec::decode_buffer(codec::encode_buffer(&buffer));
                assert_eq!(again.as_ref(), Ok(&buffer), "a decoded buffer round-trips");
            }
            if let Ok(pieces) = PiecedBuffer::open(rest.to_vec(), None, None) {
                read_pieces(&pieces);
            }
        }
        6 => {
            let _ = decompress(rest);
        }
        7 => {
            let _ = Header::decode(rest);
        }
        8 => {
            if let Ok(catalog) = Catalog::decode(rest) {
                assert_eq!(Catalog::decode(&catalog.encode()), Ok(catalog), "a decoded catalog round-trips");
            }
        }
        9 => log_segment(rest),
        _ => {
            let mut bytes = rest.to_vec();
            reseal_log(&mut bytes);
            log_segment(&bytes);
        }
    }
}

fn with_node_id(bytes: &[u8], then: impl FnOnce(NodeId, &[u8])) {
    let Some((id, node)) = bytes.split_first_chunk::<8>() else { return };
    then(NodeId(u64::from_le_bytes(*id)), node);
}

/// A whole-node read (`NodeStore::load`), then what readers do with the node.
fn whole_node(id: NodeId, bytes: &[u8]) {
    let Ok((node, layout)) = codec::decode_node(id, bytes) else { return };
    check_shape(&node);
    match &node {
        Node::Leaf(leaf) => {
            for basement in leaf.basements() {
                read_basement(basement);
                for entry in basement.entries() {
                    let _ = leaf.basement_index(entry.key());
                }
            }
        }
        Node::Internal(internal) => internal.buffers.iter().for_each(read_buffer),
    }
    if let Some(layout) = &layout {
        let head = bytes.get(..HEAD_PREFIX_BYTES).and_then(codec::head_len).unwrap_or(0);
        let alone = codec::decode_layout(id, bytes.get(..head).unwrap_or_default());
        assert_eq!(alone.as_ref(), Ok(&Some(layout.clone())), "the head alone gives the node's layout");
    }
    for compression in [Compression::None, Compression::Lz4] {
        let encoded = codec::encode_node(id, &node, compression);
        let (again, _) = codec::decode_node(id, &encoded)
            .unwrap_or_else(|error| panic!("a decoded node re-encodes to bytes that decode: {error}"));
        assert_eq!(again, node, "a decoded node round-trips ({compression:?})");
    }
}

/// What every node keeps (`node`'s and `leaf`'s headers), so a decoder must refuse bytes that
/// break it: an internal node has a height, strictly ascending pivots and a buffer per child; a
/// leaf's basements hold ascending keys, and none is empty but a lone one.
fn check_shape(node: &Node) {
    match node {
        Node::Internal(internal) => {
            assert!(internal.height >= 1, "a decoded internal node has a height");
            assert!(internal.pivots.windows(2).all(|w| w[0] < w[1]), "a decoded node's pivots ascend");
            assert_eq!(internal.pivots.len() + 1, internal.children.len(), "a pivot between each two children");
            assert_eq!(internal.buffers.len(), internal.children.len(), "a buffer per child");
        }
        Node::Leaf(leaf) => {
            let basements = leaf.basements();
            assert!(
                basements.len() == 1 || basements.iter().all(|b| !b.is_empty()),
                "a decoded leaf has no empty basement beside others"
            );
            for pair in basements.windows(2) {
                if let (Some(last), Some(first)) = (pair[0].last_key(), pair[1].first_key()) {
                    assert!(last < first, "a decoded leaf's basements are in key order");
                }
            }
        }
    }
}

/// A block read through a data file as `NodeStore::load` and `load_head`/`part` read it.
fn block(bytes: &[u8]) {
    let Ok(len) = u32::try_from(bytes.len()) else { return };
    let id = bytes.get(8..16).and_then(|b| b.try_into().ok()).map_or(0, u64::from_le_bytes);
    let fs = SimFs::new();
    let path = Path::new("/data");
    let written = fs.open(path, OpenMode::Create).and_then(|file| file.write_all_at(bytes, BLOCK_OFFSET));
    let Ok(file) = written.map_err(crate::Error::from).and_then(|()| DataFile::open(&fs, path)) else { return };
    let addr = BlockAddr { offset: BLOCK_OFFSET, len };
    if let Ok(payload) = file.read_block(addr, id) {
        whole_node(NodeId(id), &payload);
    }
    let _ = thin_node(&file, addr, NodeId(id));
}

/// `NodeStore::load_head` then `NodeStore::part` for every section.
fn thin_node(file: &DataFile, addr: BlockAddr, id: NodeId) -> crate::Result<()> {
    let mut head = file.read_payload_prefix(addr, id.0, 4096)?;
    let Some(head_len) = head.get(..HEAD_PREFIX_BYTES).and_then(codec::head_len) else { return Ok(()) };
    if head_len > head.len() {
        let rest = file.read_payload_range(addr, id.0, head.len(), head_len - head.len())?;
        head.extend_from_slice(&rest);
    }
    let Some(layout) = codec::decode_layout(id, head.get(..head_len).unwrap_or_default())? else { return Ok(()) };
    route(&layout);
    for (index, section) in layout.sections.iter().enumerate() {
        let bytes = file.read_payload_range(addr, id.0, section.offset as usize, section.len as usize)?;
        match codec::decode_section_alone(id, &layout, index, bytes)? {
            codec::Section::Basement(basement) => read_basement(&basement),
            codec::Section::Buffer(buffer) => read_buffer(&buffer),
            codec::Section::Pieces(pieces) => read_pieces(&pieces),
        }
    }
    Ok(())
}

/// Routes each of the head's own keys, as a reader of a thin node does.
fn route(layout: &Layout) {
    match &layout.head {
        Head::Leaf { first_keys } => {
            for key in first_keys {
                let index = first_keys.partition_point(|first| first <= key);
                assert!(index <= first_keys.len());
            }
        }
        Head::Internal { pivots, children, .. } => {
            assert_eq!(pivots.len() + 1, children.len(), "an internal head has a pivot between each two children");
            for key in pivots {
                assert!(crate::node::child_index(pivots, key) < children.len());
                assert!(crate::node::child_index_below(pivots, key) < children.len());
            }
        }
    }
}

/// What a reader does with a basement: every entry's versions, each at a few snapshots, and a
/// lookup of each key.
fn read_basement(basement: &Basement) {
    for (index, entry) in basement.entries().enumerate() {
        let seqs: Vec<Seq> = entry.versions().map(|(seq, _)| seq).collect();
        for snapshot in seqs.iter().copied().chain([0, SEQ_MAX]) {
            let _ = entry.visible_at(snapshot);
        }
        assert_eq!(basement.find(entry.key()), Ok(index), "a decoded basement finds its own keys");
        let mut events = Vec::new();
        basement.collect_events(entry.key(), &mut events);
    }
    let _ = (basement.first_key(), basement.last_key(), basement.memory_bytes());
}

/// What readers do with a pieced buffer: the whole of it, then each key's window alone, which
/// holds the same messages for that key.
fn read_pieces(pieces: &PiecedBuffer) {
    let Ok(whole) = pieces.messages_within(Bound::Unbounded, Bound::Unbounded) else {
        let _ = pieces.messages_within(Bound::Included(b"k"), Bound::Excluded(b"l"));
        return;
    };
    read_buffer(&whole);
    let mut again = Vec::new();
    pieces::encode(&whole, Compression::Lz4, &mut again);
    let again =
        PiecedBuffer::open(again, None, None).and_then(|p| p.messages_within(Bound::Unbounded, Bound::Unbounded));
    assert_eq!(again.as_ref(), Ok(&whole), "a decoded pieced buffer round-trips");
    for (key, events) in whole.points() {
        let window = pieces.messages_within(Bound::Included(&key), Bound::Included(&key));
        let read = window.map(|window| window.points_in(Bound::Included(&key), Bound::Included(&key)).collect());
        assert_eq!(read, Ok(vec![(key, events)]), "a key's window holds its messages");
    }
}

/// What a reader does with a buffer: each key's events, resolved through the default update.
fn read_buffer(buffer: &Buffer) {
    let update = counter_update();
    for (key, mut events) in buffer.points() {
        let mut collected = Vec::new();
        buffer.collect_events(&key, &mut collected);
        assert!(collected.len() >= events.len(), "collect_events holds the key's point messages");
        let _ = resolve(&key, &mut events, SEQ_MAX, &update);
        let _ = resolve(&key, &mut collected, 1, &update);
    }
    for range in buffer.ranges() {
        let mut events = Vec::new();
        buffer.collect_events(&range.start, &mut events);
        if range.contains(&range.start) {
            assert!(events.iter().any(|(seq, _)| *seq == range.seq), "a range delete covers its start");
        }
    }
    let _ = buffer.recompute_size();
}

/// A log segment as replay reads it: frames until the first that does not check out.
fn log_segment(bytes: &[u8]) {
    let mut rest = bytes;
    while let Ok(Some((record, len))) = read_frame(rest) {
        assert!(len > 0 && len <= rest.len(), "a frame lies within the segment");
        assert!(record.last_seq() >= record.first_seq(), "a record's sequence numbers ascend: {record:?}");
        rest = rest.get(len..).unwrap_or_default();
    }
}

/// Rewrites a node encoding's section checksums, then its head checksum, for `id`, where the
/// head says they are (as far as it can be read).
fn reseal_node(id: NodeId, node: &mut [u8]) {
    let Some(head_len) = node.get(..HEAD_PREFIX_BYTES).and_then(codec::head_len) else { return };
    let head_end = head_len.min(node.len());
    let kind = node.first().copied().unwrap_or_default();
    if let Some((table_at, count)) = section_table(kind, node.get(HEAD_PREFIX_BYTES..head_end).unwrap_or_default()) {
        let mut section_at = head_len;
        for index in 0..count {
            let entry = HEAD_PREFIX_BYTES + table_at + 8 * index;
            let Some(len) = read_u32(node, entry) else { break };
            let end = section_at.saturating_add(len as usize);
            let Some(section) = node.get(section_at..end) else { break };
            let crc = checksum(id, section);
            if let Some(slot) = node.get_mut(entry + 4..entry + 8) {
                slot.copy_from_slice(&crc.to_le_bytes());
            }
            section_at = end;
        }
    }
    let crc = checksum(id, node.get(HEAD_PREFIX_BYTES..head_end).unwrap_or_default());
    if let Some(slot) = node.get_mut(5..HEAD_PREFIX_BYTES) {
        slot.copy_from_slice(&crc.to_le_bytes());
    }
}

/// Where a head's section table starts (from the head's start) and how many entries it has:
/// after a leaf's basement count, after an internal node's pivots (see `codec`'s layout).
fn section_table(kind: u8, head: &[u8]) -> Option<(usize, usize)> {
    const KIND_LEAF: u8 = 3;
    const KIND_INTERNAL: u8 = 4;
    match kind {
        KIND_LEAF => Some((4, (read_u32(head, 0)? as usize).min(head.len() / 8))),
        KIND_INTERNAL => {
            let count = (read_u32(head, 4)? as usize).min(head.len() / 8);
            let mut at = 8 + 8 * count;
            for _ in 1..count {
                at = at.checked_add(4 + read_u32(head, at)? as usize)?;
            }
            Some((at, count))
        }
        _ => None,
    }
}

fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

/// Rewrites the checksum of each frame of a log segment whose length fits (`wal::record`).
fn reseal_log(segment: &mut [u8]) {
    let mut at = 0usize;
    while let Some(len) = read_u32(segment, at).filter(|len| *len > 0) {
        let payload_at = at + 8;
        let Some(end) = payload_at.checked_add(len as usize).filter(|end| *end <= segment.len()) else { break };
        let payload = segment.get(payload_at..end).unwrap_or_default();
        let crc = crc32c::crc32c_append(crc32c::crc32c(&len.to_le_bytes()), payload);
        if let Some(slot) = segment.get_mut(at + 4..payload_at) {
            slot.copy_from_slice(&crc.to_le_bytes());
        }
        at = end;
    }
}

/// A block's payload length and checksum rewritten to match its bytes.
fn reseal_block(block: &mut Vec<u8>) {
    if block.len() < BLOCK_HEADER_BYTES {
        return;
    }
    block.splice(0..4, *b"SBLK");
    let id = block.get(8..16).and_then(|b| b.try_into().ok()).map_or(0, u64::from_le_bytes);
    let payload_len = u32::try_from(block.len() - BLOCK_HEADER_BYTES).unwrap_or(u32::MAX);
    block.splice(16..20, payload_len.to_le_bytes());
    if let Some(payload) = block.get_mut(BLOCK_HEADER_BYTES..) {
        reseal_node(NodeId(id), payload);
    }
    let crc = crc32c::crc32c(block.get(8..).unwrap_or_default());
    block.splice(4..8, crc.to_le_bytes());
}

/// A head's or a section's checksum, as `codec` computes it.
fn checksum(id: NodeId, bytes: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&id.0.to_le_bytes()), bytes)
}

/// Seed inputs for [`node`], named: nodes of every shape (leaves of one and several basements,
/// an empty leaf, internal nodes with puts, deletes, updates and range deletes) in both formats
/// and every compression, as whole nodes, blocks and sections, plus a header slot, a catalog
/// and a log segment.
pub fn seed_nodes() -> Vec<(String, Vec<u8>)> {
    let id = NodeId(42);
    let mut seeds = Vec::new();
    let mut add = |name: String, mode: u8, body: &[u8]| {
        let mut input = vec![mode];
        input.extend_from_slice(body);
        seeds.push((name, input));
    };
    let nodes = [("leaf", sample_leaf()), ("empty-leaf", Node::Leaf(Leaf::default())), ("internal", sample_internal())];
    for (shape, node) in &nodes {
        for (method, compression) in
            [("none", Compression::None), ("lz4", Compression::Lz4), ("zstd", Compression::Zstd(1))]
        {
            let mut with_id = id.0.to_le_bytes().to_vec();
            with_id.extend_from_slice(&codec::encode_node(id, node, compression));
            add(format!("node-{shape}-{method}"), 0, &with_id);
            add(format!("resealed-{shape}-{method}"), 1, &with_id);
            if let Some(block) = block_of(id, with_id.get(8..).unwrap_or_default()) {
                add(format!("block-{shape}-{method}"), 2, &block);
                add(format!("resealed-block-{shape}-{method}"), 3, &block);
            }
        }
        let mut first_format = id.0.to_le_bytes().to_vec();
        first_format.extend_from_slice(&encode_first_format(node));
        add(format!("node-{shape}-first-format"), 0, &first_format);
    }
    if let (Node::Leaf(leaf), Node::Internal(internal)) = (&nodes[0].1, &nodes[2].1) {
        for (index, basement) in leaf.basements().iter().enumerate() {
            add(format!("basement-{index}"), 4, &codec::encode_basement(basement));
        }
        for (index, buffer) in internal.buffers.iter().enumerate() {
            let raw = codec::encode_buffer(buffer);
            add(format!("buffer-{index}"), 5, &raw);
            let mut pieced = Vec::new();
            pieces::encode(buffer, Compression::Lz4, &mut pieced);
            add(format!("buffer-pieced-{index}"), 5, &pieced);
            for (method, compression) in
                [("none", Compression::None), ("lz4", Compression::Lz4), ("zstd", Compression::Zstd(3))]
            {
                let mut section = Vec::new();
                compress(compression, &raw.repeat(4), &mut section);
                add(format!("section-{index}-{method}"), 6, &section);
            }
        }
    }
    add("header-slot".into(), 7, &Header::example().encode());
    add("catalog".into(), 8, &sample_catalog().encode());
    add("log-segment".into(), 9, &sample_log());
    add("resealed-log-segment".into(), 10, &sample_log());
    seeds
}

fn sample_leaf() -> Node {
    let value = |bytes: &[u8]| Some(std::borrow::Cow::Owned(bytes.to_vec()));
    let mut first = Basement::default();
    first.push_entry(b"a", &[(1, value(b"1")), (4, None), (5, value(b""))]);
    first.push_entry(b"b", &[(2, value(&[7; 40]))]);
    let mut second = Basement::default();
    second.push_entry(b"c", &[(3, value(&1i64.to_le_bytes()))]);
    second.push_entry(b"d\x00", &[(6, value(b"z"))]);
    Node::Leaf(Leaf::from_basements(vec![first, second]))
}

fn sample_internal() -> Node {
    const HEAD_BYTES: usize = 64 << 10;
    let mut left = Buffer::default();
    left.push_all(
        b"a",
        [(5, Event::Put(b"x".to_vec())), (6, Event::Update(2i64.to_le_bytes().to_vec()))],
        0,
        HEAD_BYTES,
    );
    left.push_all(b"b", [(7, Event::Delete)], 0, HEAD_BYTES);
    left.push_all(b"c", [(8, Event::Update(b"not a counter".to_vec()))], 0, HEAD_BYTES);
    // Enough messages that the buffer is written in several pieces.
    for i in 0..150u64 {
        left.push_all(format!("d{i:04}").as_bytes(), [(100 + i, Event::Put(vec![b'v'; 40]))], 0, HEAD_BYTES);
    }
    let mut right = Buffer::default();
    right.push_all(b"m", [(9, Event::Put(Vec::new()))], 0, HEAD_BYTES);
    right.push_range(RangeDelete { start: b"m".to_vec(), end: None, seq: 10 });
    right.push_range(RangeDelete { start: b"n".to_vec(), end: Some(b"p".to_vec()), seq: 11 });
    Node::Internal(Internal {
        height: 1,
        pivots: vec![b"m".to_vec()],
        children: vec![NodeId(4), NodeId(8)],
        buffers: vec![left, right],
    })
}

/// A node in the first format (kinds 1 and 2: sections length-prefixed, no head, no checksums).
fn encode_first_format(node: &Node) -> Vec<u8> {
    let put_bytes = |out: &mut Vec<u8>, bytes: &[u8]| {
        out.extend_from_slice(&u32::try_from(bytes.len()).unwrap_or(u32::MAX).to_le_bytes());
        out.extend_from_slice(bytes);
    };
    let section = |raw: &[u8]| {
        let mut compressed = Vec::new();
        compress(Compression::Lz4, raw, &mut compressed);
        compressed
    };
    let mut out = Vec::new();
    match node {
        Node::Leaf(leaf) => {
            out.push(1);
            out.extend_from_slice(&u32::try_from(leaf.basements().len()).unwrap_or(0).to_le_bytes());
            for basement in leaf.basements() {
                put_bytes(&mut out, &section(&codec::encode_basement(basement)));
            }
        }
        Node::Internal(internal) => {
            out.push(2);
            out.extend_from_slice(&internal.height.to_le_bytes());
            out.extend_from_slice(&u32::try_from(internal.children.len()).unwrap_or(0).to_le_bytes());
            for child in &internal.children {
                out.extend_from_slice(&child.0.to_le_bytes());
            }
            for pivot in &internal.pivots {
                put_bytes(&mut out, pivot);
            }
            for buffer in &internal.buffers {
                put_bytes(&mut out, &section(&codec::encode_buffer(buffer)));
            }
        }
    }
    out
}

/// The block the data file writes for `payload`.
fn block_of(id: NodeId, payload: &[u8]) -> Option<Vec<u8>> {
    let fs = SimFs::new();
    let path = Path::new("/data");
    let file = DataFile::open(&fs, path).ok()?;
    let addr = file.write_block(id.0, payload).ok()?;
    let mut block = vec![0; addr.len as usize];
    fs.open(path, OpenMode::Existing).ok()?.read_exact_at(&mut block, addr.offset).ok()?;
    Some(block)
}

fn sample_catalog() -> Catalog {
    use crate::file::catalog::CatalogTree;
    Catalog {
        trees: vec![CatalogTree { id: 3, name: "db.coll".into(), root: 17 }],
        blocks: vec![(17, BlockAddr { offset: 8192, len: 100 }), (18, BlockAddr { offset: 12288, len: 9000 })],
    }
}

fn sample_log() -> Vec<u8> {
    use crate::wal::record::{LogWriteRef, frame_commit, frame_create_tree, frame_drop_tree};
    let mut out = Vec::new();
    frame_create_tree(&mut out, 1, 3, "db.coll");
    let writes = [
        (3, LogWriteRef::Put(b"k", b"v")),
        (3, LogWriteRef::Delete(b"gone")),
        (3, LogWriteRef::Update(b"n", &[1, 0, 0, 0, 0, 0, 0, 0])),
        (3, LogWriteRef::DeleteRange(b"a", Some(b"b"))),
        (3, LogWriteRef::DeleteRange(b"x", None)),
    ];
    frame_commit(&mut out, 2, writes.into_iter());
    frame_drop_tree(&mut out, 7, 3);
    out
}
