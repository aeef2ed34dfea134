//! Node encoding: the bytes a node is written as, and their decoding, which treats its input as
//! untrusted (any byte string decodes to a node or to `Error::Corruption`, never a panic). A
//! decoded node keeps the rules `tree::verify` checks of a node alone, whatever its checksums
//! say: an internal node has a height and strictly ascending pivots; a leaf's basements hold
//! ascending keys across them and none is empty beside others.
//!
//! All integers are little-endian. `bytes` is a u32 length then that many bytes. A node is a
//! *head* (what routes a key: pivots and children, or the basements' first keys) followed by its
//! *sections* (one per basement or per buffer), each compressed on its own (see `compression`)
//! and checksummed on its own, so that a reader holding the head can read, check and decode one
//! section without the rest of the block (partial fetch; see `store` and `thin`).
//!
//! ```text
//! node      := kind:u8 (3 leaf | 4 internal | 5 internal, pieced) head_len:u32 head_crc:u32
//!              head section*
//!              head_crc = crc32c(node_id:u64 | head)
//! leaf head := basement_count:u32 (section_len:u32 section_crc:u32)*basement_count
//!              first_key:bytes*(basement_count - 1)      (of basements 1.., ascending)
//! internal head := height:u32 child_count:u32 child_id:u64*child_count
//!              pivot:bytes*(child_count - 1) (section_len:u32 section_crc:u32)*child_count
//! section   := compressed(payload), section_len bytes back to back after the head;
//!              section_crc = crc32c(node_id:u64 | section)
//! basement  := entry_count:u32 (key:bytes version_count:u32 (seq:u64 tag:u8 [value:bytes])*)*
//!              tag: 0 deletion, 1 value; keys strictly ascending, versions strictly ascending,
//!              each entry with a live version (the entries are also the basement's bytes in
//!              memory: see `basement`)
//! buffer    := key_count:u32 (key:bytes message_count:u32 (seq:u64 op:u8 [operand:bytes])*)*
//!              range_count:u32 (start:bytes has_end:u8 [end:bytes] seq:u64)*
//!              op: 0 put, 1 delete, 2 update
//! ```
//!
//! Kind 5, the internal node written now, has the head of kind 4, and each of its buffer
//! sections is a *pieced buffer* (`pieces`): the buffer's entries cut into key-ranged pieces
//! compressed on their own, so that a reader decodes the few its window needs. Kind 4 nodes are
//! still read, whole and a section at a time.
//!
//! Kinds 1 (leaf) and 2 (internal), written before 2026-11-23, are still read: the same sections
//! without checksums, each length-prefixed, after `basement_count` or after the pivots. Their
//! nodes are read whole only (they have no layout) until they are written again.
//!
//! Here: the node and its head (layout, sections, both formats); `rules.rs`: what a decoded node
//! must keep; `payload.rs`: a basement's and a buffer's section payloads; `reader.rs`: the
//! bounds-checked reader and writers of the integers and byte strings above.

use crate::compression::{Compression, compress, decompress};
use crate::error::Result;
use crate::node::basement::Basement;
use crate::node::buffer::Buffer;
use crate::node::leaf::Leaf;
use crate::node::pieces::{self, PiecedBuffer};
use crate::node::{Internal, Node, NodeId};
use std::ops::Bound;

mod payload;
mod reader;
mod rules;

pub use payload::{decode_basement, decode_buffer, encode_basement, encode_buffer};
pub(crate) use payload::{put_ranges, read_ranges};
pub use reader::Reader;
use reader::corrupt;
pub(crate) use reader::{put_bytes, put_u32};
pub use rules::{check_basement_bounds, check_buffer_bounds};
use rules::{check_basements, child_bounds, read_routing};

const KIND_LEAF_V1: u8 = 1;
const KIND_INTERNAL_V1: u8 = 2;
const KIND_LEAF: u8 = 3;
const KIND_INTERNAL: u8 = 4;
/// An internal node whose buffers are cut into key-ranged pieces (`pieces`), written since
/// 2026-11-27.
const KIND_INTERNAL_PIECED: u8 = 5;
/// kind, head_len, head_crc.
pub const HEAD_PREFIX_BYTES: usize = 9;

/// Where one section lies in a node's encoding (`offset` from the encoding's start) and its
/// checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SectionRef {
    pub offset: u32,
    pub len: u32,
    pub crc: u32,
}

/// What a node's head says: enough to route a key to a section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Head {
    /// The first keys of basements 1.. (basement 0 also owns everything below the first).
    Leaf {
        first_keys: Vec<Vec<u8>>,
    },
    Internal {
        height: u32,
        pivots: Vec<Vec<u8>>,
        children: Vec<NodeId>,
    },
}

/// A node's head and where its sections are: all a thin node keeps (see `thin`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub head: Head,
    pub sections: Vec<SectionRef>,
    /// Whether its buffers are cut into pieces (kind 5), read a window at a time.
    pub pieced: bool,
}

impl Layout {
    /// The memory a layout holds, as charged to the cache.
    pub fn memory_bytes(&self) -> usize {
        let keys = match &self.head {
            Head::Leaf { first_keys } => first_keys.iter().map(|k| k.len() + 24).sum::<usize>(),
            Head::Internal { pivots, children, .. } => {
                pivots.iter().map(|k| k.len() + 24).sum::<usize>() + 8 * children.len()
            }
        };
        keys + self.sections.len() * std::mem::size_of::<SectionRef>() + 96
    }
}

pub fn encode_node(id: NodeId, node: &Node, compression: Compression) -> Vec<u8> {
    // The head's size is known before the sections are compressed (its section table has a
    // fixed size), so sections are compressed straight into place and the table filled after.
    let mut out = Vec::with_capacity(node.size_bytes() / 2 + 256);
    let sections = match node {
        Node::Leaf(leaf) => leaf.basements().len(),
        Node::Internal(internal) => internal.buffers.len(),
    };
    let table_len = 8 * sections;
    let kind = match node {
        Node::Leaf(_) => KIND_LEAF,
        Node::Internal(_) => KIND_INTERNAL_PIECED,
    };
    out.push(kind);
    out.extend_from_slice(&[0; 8]);
    let table_at = match node {
        Node::Leaf(leaf) => {
            put_u32(&mut out, sections);
            let table_at = out.len();
            out.resize(table_at + table_len, 0);
            for basement in leaf.basements().iter().skip(1) {
                put_bytes(&mut out, basement.first_key().unwrap_or_default());
            }
            table_at
        }
        Node::Internal(internal) => {
            put_u32(&mut out, internal.height as usize);
            put_u32(&mut out, internal.children.len());
            for child in &internal.children {
                out.extend_from_slice(&child.0.to_le_bytes());
            }
            for pivot in &internal.pivots {
                put_bytes(&mut out, pivot);
            }
            let table_at = out.len();
            out.resize(table_at + table_len, 0);
            table_at
        }
    };
    let head_end = out.len();
    let mut table = Vec::with_capacity(table_len);
    let mut section = |out: &mut Vec<u8>, write: &dyn Fn(&mut Vec<u8>)| {
        let start = out.len();
        write(out);
        let written = out.get(start..).unwrap_or_default();
        put_u32(&mut table, written.len());
        table.extend_from_slice(&section_crc(id, written).to_le_bytes());
    };
    match node {
        Node::Leaf(leaf) => leaf.basements().iter().for_each(|basement| {
            section(&mut out, &|out| compress(compression, &encode_basement(basement), out));
        }),
        Node::Internal(internal) => internal.buffers.iter().for_each(|buffer| {
            section(&mut out, &|out| pieces::encode(buffer, compression, out));
        }),
    }
    if let Some(slot) = out.get_mut(table_at..table_at + table_len) {
        slot.copy_from_slice(&table);
    }
    let head = out.get(HEAD_PREFIX_BYTES..head_end).unwrap_or_default();
    let (head_len, crc) = (head.len(), section_crc(id, head));
    let mut prefix = Vec::with_capacity(8);
    put_u32(&mut prefix, head_len);
    prefix.extend_from_slice(&crc.to_le_bytes());
    if let Some(slot) = out.get_mut(1..HEAD_PREFIX_BYTES) {
        slot.copy_from_slice(&prefix);
    }
    out
}

/// The checksum of a head or a section: the node id goes in, so that bytes of another node's
/// block never pass for this one's.
fn section_crc(id: NodeId, bytes: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&id.0.to_le_bytes()), bytes)
}

/// How many bytes from the start of an encoding hold its head, if `prefix` (at least
/// `HEAD_PREFIX_BYTES` of it) is of a node with a layout.
pub fn head_len(prefix: &[u8]) -> Option<usize> {
    let mut r = Reader::new(prefix);
    match r.u8().ok()? {
        KIND_LEAF | KIND_INTERNAL | KIND_INTERNAL_PIECED => Some(HEAD_PREFIX_BYTES + r.u32().ok()? as usize),
        _ => None,
    }
}

/// Reads a node's layout from the start of its encoding (the head is enough), checking the
/// head's checksum. `Ok(None)` for a node of the first format, which has no layout.
pub fn decode_layout(id: NodeId, bytes: &[u8]) -> Result<Option<Layout>> {
    let mut r = Reader::new(bytes);
    let kind = r.u8()?;
    if kind == KIND_LEAF_V1 || kind == KIND_INTERNAL_V1 {
        return Ok(None);
    }
    let head_len = r.u32()? as usize;
    let crc = r.u32()?;
    let head = r.take(head_len)?;
    if section_crc(id, head) != crc {
        return Err(corrupt(format!("head checksum mismatch for node {}", id.0)));
    }
    let mut r = Reader::new(head);
    let mut offset = HEAD_PREFIX_BYTES + head_len;
    let mut table = |r: &mut Reader<'_>, count: usize| -> Result<Vec<SectionRef>> {
        let mut sections = Vec::with_capacity(count);
        for _ in 0..count {
            let (len, crc) = (r.u32()?, r.u32()?);
            let at = u32::try_from(offset).map_err(|_| corrupt("node too large".into()))?;
            sections.push(SectionRef { offset: at, len, crc });
            offset += len as usize;
        }
        Ok(sections)
    };
    let layout = match kind {
        KIND_LEAF => {
            let count = r.count(8)?;
            if count == 0 {
                return Err(corrupt("leaf without basements".into()));
            }
            let sections = table(&mut r, count)?;
            let mut first_keys = Vec::with_capacity(count - 1);
            for _ in 1..count {
                let key = r.bytes()?.to_vec();
                if first_keys.last().is_some_and(|previous: &Vec<u8>| previous >= &key) {
                    return Err(corrupt("basement first keys out of order".into()));
                }
                first_keys.push(key);
            }
            Layout { head: Head::Leaf { first_keys }, sections, pieced: false }
        }
        KIND_INTERNAL | KIND_INTERNAL_PIECED => {
            let (height, children, pivots) = read_routing(&mut r)?;
            let sections = table(&mut r, children.len())?;
            Layout { head: Head::Internal { height, pivots, children }, sections, pieced: kind == KIND_INTERNAL_PIECED }
        }
        kind => return Err(corrupt(format!("unknown node kind {kind}"))),
    };
    r.finish()?;
    Ok(Some(layout))
}

/// Checks one section's bytes against its checksum and decompresses them.
fn open_section(id: NodeId, bytes: &[u8], section: &SectionRef) -> Result<Vec<u8>> {
    check_section(id, bytes, section)?;
    decompress(bytes)
}

fn check_section(id: NodeId, bytes: &[u8], section: &SectionRef) -> Result<()> {
    if bytes.len() != section.len as usize || section_crc(id, bytes) != section.crc {
        return Err(corrupt(format!("section checksum mismatch for node {}", id.0)));
    }
    Ok(())
}

pub fn decode_basement_section(id: NodeId, bytes: &[u8], section: &SectionRef) -> Result<Basement> {
    decode_basement(&open_section(id, bytes, section)?)
}

pub fn decode_buffer_section(id: NodeId, bytes: &[u8], section: &SectionRef) -> Result<Buffer> {
    decode_buffer(open_section(id, bytes, section)?)
}

/// One section read without the rest of its node (a thin node's partial fetch).
pub enum Section {
    Basement(Basement),
    Buffer(Buffer),
    /// A pieced buffer, kept compressed: its pieces are decoded a window at a time.
    Pieces(PiecedBuffer),
}

/// Decodes section `index` of a node whose layout is `layout`, and checks its keys against the
/// bounds the head gives it (its neighbours are not read). A pieced buffer's directory is
/// checked now and each piece when a reader decodes it.
pub fn decode_section_alone(id: NodeId, layout: &Layout, index: usize, bytes: Vec<u8>) -> Result<Section> {
    let section = layout.sections.get(index).ok_or_else(|| corrupt(format!("no section {index}")))?;
    match &layout.head {
        Head::Leaf { first_keys } => {
            let basement = decode_basement_section(id, &bytes, section)?;
            check_basement_bounds(first_keys, index, &basement)?;
            Ok(Section::Basement(basement))
        }
        Head::Internal { pivots, .. } if layout.pieced => {
            check_section(id, &bytes, section)?;
            let (lower, upper) = child_bounds(pivots, index);
            Ok(Section::Pieces(PiecedBuffer::open(bytes, lower, upper)?))
        }
        Head::Internal { pivots, .. } => {
            let buffer = decode_buffer_section(id, &bytes, section)?;
            check_buffer_bounds(pivots, index, &buffer)?;
            Ok(Section::Buffer(buffer))
        }
    }
}

/// Decodes a whole node; with a layout when it has one (not a node of the first format).
pub fn decode_node(id: NodeId, bytes: &[u8]) -> Result<(Node, Option<Layout>)> {
    let Some(layout) = decode_layout(id, bytes)? else { return Ok((decode_node_v1(bytes)?, None)) };
    let end = layout.sections.last().map_or(0, |s| s.offset as usize + s.len as usize);
    let end = end.max(head_len(bytes).unwrap_or(0));
    if end != bytes.len() {
        return Err(corrupt(format!("{} bytes after the node's sections", bytes.len().abs_diff(end))));
    }
    let section_bytes =
        |s: &SectionRef| bytes.get(s.offset as usize..s.offset as usize + s.len as usize).unwrap_or_default();
    let node = match &layout.head {
        Head::Leaf { first_keys } => {
            let mut basements = Vec::with_capacity(layout.sections.len());
            for (index, section) in layout.sections.iter().enumerate() {
                let basement = decode_basement_section(id, section_bytes(section), section)?;
                check_basement_bounds(first_keys, index, &basement)?;
                basements.push(basement);
            }
            check_basements(&basements)?;
            Node::Leaf(Leaf::from_basements(basements))
        }
        Head::Internal { height, pivots, children } => {
            let mut buffers = Vec::with_capacity(layout.sections.len());
            for (index, section) in layout.sections.iter().enumerate() {
                let bytes = section_bytes(section);
                let buffer = if layout.pieced {
                    check_section(id, bytes, section)?;
                    let (lower, upper) = child_bounds(pivots, index);
                    pieces::Directory::read(bytes, lower, upper)?.decode(bytes, Bound::Unbounded, Bound::Unbounded)?
                } else {
                    decode_buffer_section(id, bytes, section)?
                };
                check_buffer_bounds(pivots, index, &buffer)?;
                buffers.push(buffer);
            }
            Node::Internal(Internal { height: *height, pivots: pivots.clone(), children: children.clone(), buffers })
        }
    };
    Ok((node, Some(layout)))
}

/// The first format: sections length-prefixed, without checksums or a head.
fn decode_node_v1(bytes: &[u8]) -> Result<Node> {
    let mut r = Reader::new(bytes);
    let node = match r.u8()? {
        KIND_LEAF_V1 => {
            let count = r.count(4)?;
            let mut basements = Vec::with_capacity(count);
            for _ in 0..count {
                basements.push(decode_basement(&decompress(r.bytes()?)?)?);
            }
            check_basements(&basements)?;
            Node::Leaf(Leaf::from_basements(basements))
        }
        KIND_INTERNAL_V1 => Node::Internal(decode_internal_v1(&mut r)?),
        kind => return Err(corrupt(format!("unknown node kind {kind}"))),
    };
    r.finish()?;
    Ok(node)
}

fn decode_internal_v1(r: &mut Reader<'_>) -> Result<Internal> {
    let (height, children, pivots) = read_routing(r)?;
    let mut buffers = Vec::with_capacity(children.len());
    for index in 0..children.len() {
        let buffer = decode_buffer(decompress(r.bytes()?)?)?;
        check_buffer_bounds(&pivots, index, &buffer)?;
        buffers.push(buffer);
    }
    Ok(Internal { height, pivots, children, buffers })
}

#[cfg(test)]
mod tests {
    //! Goal: every node encodes and decodes to itself, and garbage never panics the decoder.
    use super::*;
    use crate::error::Error;
    use crate::message::Event;
    use crate::node::buffer::RangeDelete;
    use proptest::prelude::*;

    fn sample_internal() -> Node {
        let mut left = Buffer::default();
        left.push(b"a".to_vec(), 5, Event::Put(b"x".to_vec()), 0);
        left.push(b"a".to_vec(), 6, Event::Update(b"y".to_vec()), 0);
        left.push(b"b".to_vec(), 7, Event::Delete, 0);
        let mut right = Buffer::default();
        right.push_range(RangeDelete { start: b"m".to_vec(), end: None, seq: 9 });
        right.push_range(RangeDelete { start: b"n".to_vec(), end: Some(b"p".to_vec()), seq: 10 });
        Node::Internal(Internal {
            height: 3,
            pivots: vec![b"m".to_vec()],
            children: vec![NodeId(4), NodeId(8)],
            buffers: vec![left, right],
        })
    }

    fn sample_leaf() -> Node {
        let value = |bytes: &'static [u8]| Some(std::borrow::Cow::Borrowed(bytes));
        let first = Basement::from_entries([
            (&b"a"[..], vec![(1, value(b"1")), (4, None), (5, value(b""))]),
            (&b"b"[..], vec![(2, value(&[7; 300]))]),
        ]);
        let second = Basement::from_entries([(&b"c"[..], vec![(3, value(b"z"))])]);
        Node::Leaf(Leaf::from_basements(vec![first, second]))
    }

    const ID: NodeId = NodeId(7);

    #[test]
    fn nodes_round_trip() {
        for compression in [Compression::None, Compression::Lz4, Compression::Zstd(3)] {
            for node in [sample_internal(), sample_leaf(), Node::Leaf(Leaf::default())] {
                let bytes = encode_node(ID, &node, compression);
                let (decoded, layout) = decode_node(ID, &bytes).expect("decodes");
                assert_eq!(decoded, node);
                assert_eq!(decode_layout(ID, &bytes).expect("layout"), layout);
            }
        }
    }

    /// Each section reads alone from the head's table, checked by its own checksum.
    #[test]
    fn sections_decode_alone_from_the_layout() {
        let Node::Leaf(leaf) = sample_leaf() else { unreachable!() };
        let bytes = encode_node(ID, &Node::Leaf(leaf.clone()), Compression::Lz4);
        let head = head_len(&bytes[..HEAD_PREFIX_BYTES]).expect("has a head");
        let layout = decode_layout(ID, &bytes[..head]).expect("head alone decodes").expect("a layout");
        assert_eq!(layout.head, Head::Leaf { first_keys: vec![b"c".to_vec()] });
        for (section, basement) in layout.sections.iter().zip(leaf.basements()) {
            let at = section.offset as usize..(section.offset + section.len) as usize;
            assert_eq!(decode_basement_section(ID, &bytes[at.clone()], section).as_ref(), Ok(basement));
            assert!(decode_basement_section(NodeId(8), &bytes[at], section).is_err(), "another node's section");
        }
        assert!(decode_layout(NodeId(8), &bytes).is_err(), "another node's head");
        let Node::Internal(internal) = sample_internal() else { unreachable!() };
        let bytes = encode_node(ID, &Node::Internal(internal.clone()), Compression::Zstd(1));
        let layout = decode_layout(ID, &bytes).expect("layout").expect("a layout");
        assert!(layout.pieced, "internal nodes are written with pieced buffers");
        for (index, (section, buffer)) in layout.sections.iter().zip(&internal.buffers).enumerate() {
            let at = section.offset as usize..(section.offset + section.len) as usize;
            let Ok(Section::Pieces(pieces)) = decode_section_alone(ID, &layout, index, bytes[at.clone()].to_vec())
            else {
                panic!("buffer {index} reads alone as pieces");
            };
            assert_eq!(pieces.messages_within(Bound::Unbounded, Bound::Unbounded).as_ref(), Ok(buffer));
            assert!(decode_section_alone(NodeId(8), &layout, index, bytes[at].to_vec()).is_err(), "another node's");
        }
    }

    /// Internal nodes of the second format (kind 4: each buffer one compressed section) still
    /// read, whole and a section at a time.
    #[test]
    fn second_format_internal_nodes_still_decode() {
        let Node::Internal(internal) = sample_internal() else { unreachable!() };
        let mut bytes = encode_node(ID, &Node::Internal(internal.clone()), Compression::Lz4);
        let layout = decode_layout(ID, &bytes).expect("layout").expect("a layout");
        // The same head with kind 4, followed by the buffers as kind 4 wrote them.
        bytes.truncate(layout.sections[0].offset as usize);
        bytes[0] = KIND_INTERNAL;
        let head_end = bytes.len();
        let table_at = head_end - 8 * internal.buffers.len();
        for (index, buffer) in internal.buffers.iter().enumerate() {
            let start = bytes.len();
            compress(Compression::Lz4, &encode_buffer(buffer), &mut bytes);
            let (len, crc) = (bytes.len() - start, section_crc(ID, &bytes[start..]));
            bytes[table_at + 8 * index..table_at + 8 * index + 4].copy_from_slice(&(len as u32).to_le_bytes());
            bytes[table_at + 8 * index + 4..table_at + 8 * index + 8].copy_from_slice(&crc.to_le_bytes());
        }
        let head_crc = section_crc(ID, &bytes[HEAD_PREFIX_BYTES..head_end]);
        bytes[5..9].copy_from_slice(&head_crc.to_le_bytes());
        let (node, layout) = decode_node(ID, &bytes).expect("decodes");
        assert_eq!(node, Node::Internal(internal.clone()));
        let layout = layout.expect("a layout");
        assert!(!layout.pieced);
        for (index, (section, buffer)) in layout.sections.iter().zip(&internal.buffers).enumerate() {
            let at = section.offset as usize..(section.offset + section.len) as usize;
            let Ok(Section::Buffer(read)) = decode_section_alone(ID, &layout, index, bytes[at].to_vec()) else {
                panic!("buffer {index} reads alone whole");
            };
            assert_eq!(&read, buffer);
        }
    }

    /// A section read alone (a thin node's partial fetch) and each section of a whole node is
    /// checked against the key bounds its head gives: basements by the head's first keys,
    /// buffers by the pivots.
    #[test]
    fn a_section_read_alone_is_checked_against_its_heads_bounds() {
        let Node::Leaf(leaf) = sample_leaf() else { unreachable!() };
        let [first, second] = leaf.basements() else { unreachable!() };
        // The head says the second basement starts at "c": the first ends at "b", below it.
        let keys = vec![b"c".to_vec()];
        assert!(check_basement_bounds(&keys, 0, first).is_ok() && check_basement_bounds(&keys, 1, second).is_ok());
        // A head whose bound falls inside the first basement, or past the second's first key.
        assert!(check_basement_bounds(&[b"b".to_vec()], 0, first).is_err(), "keys past the next basement");
        assert!(check_basement_bounds(&[b"a".to_vec()], 1, second).is_err(), "first key is not the head's");
        let Node::Internal(internal) = sample_internal() else { unreachable!() };
        let [left, right] = internal.buffers.as_slice() else { unreachable!() };
        let pivots = vec![b"m".to_vec()];
        assert!(check_buffer_bounds(&pivots, 0, left).is_ok() && check_buffer_bounds(&pivots, 1, right).is_ok());
        assert!(check_buffer_bounds(&[b"b".to_vec()], 0, left).is_err(), "a message at the pivot");
        assert!(check_buffer_bounds(&[b"b".to_vec()], 1, left).is_err(), "messages below the child's range");
        // Through the decoder a thin node uses: the encoded leaf's sections under a forged head.
        let bytes = encode_node(ID, &Node::Leaf(leaf.clone()), Compression::Lz4);
        let layout = decode_layout(ID, &bytes).expect("layout").expect("a layout");
        let forged = Head::Leaf { first_keys: vec![b"b".to_vec()] };
        let section = &layout.sections[0];
        let at = section.offset as usize..(section.offset + section.len) as usize;
        assert!(decode_section_alone(ID, &layout, 0, bytes[at.clone()].to_vec()).is_ok());
        let forged = Layout { head: forged, ..layout };
        assert!(decode_section_alone(ID, &forged, 0, bytes[at].to_vec()).is_err());
    }

    /// Blocks of the first format (no head, no section checksums) still read, without a layout.
    #[test]
    fn first_format_nodes_still_decode() {
        let Node::Leaf(leaf) = sample_leaf() else { unreachable!() };
        let mut bytes = vec![KIND_LEAF_V1];
        put_u32(&mut bytes, leaf.basements().len());
        for basement in leaf.basements() {
            let mut compressed = Vec::new();
            compress(Compression::Lz4, &encode_basement(basement), &mut compressed);
            put_bytes(&mut bytes, &compressed);
        }
        assert_eq!(decode_node(ID, &bytes), Ok((Node::Leaf(leaf), None)));
    }

    /// Found by the `node` fuzz target (`fuzz/regressions/node/leaf-basements-out-of-order`): a
    /// leaf whose checksums hold but whose first basement holds a key above the second's first
    /// key decoded as a node, and readers routed that key to the second basement and missed it.
    #[test]
    fn a_leaf_whose_basements_overlap_is_corruption() {
        let value = |bytes: &'static [u8]| Some(std::borrow::Cow::Borrowed(bytes));
        let first = Basement::from_entries([(&b"a"[..], vec![(1, value(b"1"))]), (&b"z"[..], vec![(2, value(b"2"))])]);
        let second = Basement::from_entries([(&b"c"[..], vec![(3, value(b"3"))])]);
        let bytes =
            encode_node(ID, &Node::Leaf(Leaf::from_basements(vec![first.clone(), second.clone()])), Compression::Lz4);
        assert!(matches!(decode_node(ID, &bytes), Err(Error::Corruption(_))));
        let touching = Basement::from_entries([(&b"c"[..], vec![(4, value(b"4"))])]);
        let bytes = encode_node(ID, &Node::Leaf(Leaf::from_basements(vec![first, touching])), Compression::None);
        assert!(matches!(decode_node(ID, &bytes), Err(Error::Corruption(_))), "a key in two basements");
        let bytes =
            encode_node(ID, &Node::Leaf(Leaf::from_basements(vec![Basement::default(), second])), Compression::None);
        assert!(matches!(decode_node(ID, &bytes), Err(Error::Corruption(_))), "an empty first basement beside another");
    }

    /// Internal nodes of either format: a height of 0 or pivots out of order are corruption.
    #[test]
    fn internal_nodes_with_bad_routing_are_corruption() {
        let Node::Internal(good) = sample_internal() else { unreachable!() };
        let descending = Internal { pivots: vec![b"m".to_vec(), b"c".to_vec()], ..good.clone() };
        let descending = Internal {
            children: vec![NodeId(4), NodeId(8), NodeId(9)],
            buffers: vec![Buffer::default(), Buffer::default(), Buffer::default()],
            ..descending
        };
        let flat = Internal { height: 0, ..good.clone() };
        for bad in [descending, flat] {
            let bytes = encode_node(ID, &Node::Internal(bad.clone()), Compression::Lz4);
            assert!(matches!(decode_node(ID, &bytes), Err(Error::Corruption(_))), "{bad:?}");
            assert!(matches!(decode_layout(ID, &bytes), Err(Error::Corruption(_))), "the head alone: {bad:?}");
            let mut first_format = vec![KIND_INTERNAL_V1];
            put_u32(&mut first_format, bad.height as usize);
            put_u32(&mut first_format, bad.children.len());
            bad.children.iter().for_each(|child| first_format.extend_from_slice(&child.0.to_le_bytes()));
            bad.pivots.iter().for_each(|pivot| put_bytes(&mut first_format, pivot));
            for buffer in &bad.buffers {
                let mut compressed = Vec::new();
                compress(Compression::None, &encode_buffer(buffer), &mut compressed);
                put_bytes(&mut first_format, &compressed);
            }
            assert!(matches!(decode_node(ID, &first_format), Err(Error::Corruption(_))), "first format: {bad:?}");
        }
    }

    /// A first-format leaf (no checksums at all) keeps the same rules: here an empty basement
    /// after a full one.
    #[test]
    fn first_format_leaves_keep_the_leaf_rules() {
        let Node::Leaf(leaf) = sample_leaf() else { unreachable!() };
        let mut bytes = vec![KIND_LEAF_V1];
        let basements = [leaf.basements()[0].clone(), Basement::default()];
        put_u32(&mut bytes, basements.len());
        for basement in &basements {
            let mut compressed = Vec::new();
            compress(Compression::Lz4, &encode_basement(basement), &mut compressed);
            put_bytes(&mut bytes, &compressed);
        }
        assert!(matches!(decode_node(ID, &bytes), Err(Error::Corruption(_))));
    }

    #[test]
    fn a_buffer_of_one_smallest_message_round_trips() {
        let mut buffer = Buffer::default();
        buffer.push(Vec::new(), 1, Event::Delete, 0);
        assert_eq!(decode_buffer(encode_buffer(&buffer)), Ok(buffer));
    }

    #[test]
    fn every_truncation_and_flipped_byte_is_corruption() {
        for node in [sample_internal(), sample_leaf()] {
            let bytes = encode_node(ID, &node, Compression::Lz4);
            for len in 0..bytes.len() {
                assert!(matches!(decode_node(ID, &bytes[..len]), Err(Error::Corruption(_))), "len {len}");
            }
            for index in 0..bytes.len() {
                let mut flipped = bytes.clone();
                flipped[index] ^= 0x10;
                assert!(decode_node(ID, &flipped).is_err(), "byte {index} flipped");
            }
        }
    }

    proptest! {
        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode_node(ID, &bytes);
        }

        #[test]
        fn flipped_bytes_never_panic(index in 0usize..200, bit in 0u8..8) {
            let mut bytes = encode_node(ID, &sample_internal(), Compression::Lz4);
            let len = bytes.len();
            if let Some(b) = bytes.get_mut(index % len) {
                *b ^= 1 << bit;
            }
            let _ = decode_node(ID, &bytes);
        }
    }
}
