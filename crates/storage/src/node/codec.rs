//! Node encoding: the bytes a node is written as, and their decoding, which treats its input as
//! untrusted (any byte string decodes to a node or to `Error::Corruption`, never a panic).
//!
//! All integers are little-endian. `bytes` is a u32 length then that many bytes. Each basement
//! and each buffer is a separate length-prefixed *section*, compressed on its own (see
//! `compression`), so that one can be read and decoded without the others.
//!
//! ```text
//! node      := kind:u8 (1 leaf | 2 internal) body
//! leaf      := basement_count:u32 section*            (one basement per section)
//! internal  := height:u32 child_count:u32 child_id:u64*child_count
//!              pivot:bytes*(child_count - 1) section*child_count   (one buffer per section)
//! section   := len:u32 compressed(payload)
//! basement  := entry_count:u32 (key:bytes version_count:u32 (seq:u64 tag:u8 [value:bytes])*)*
//!              tag: 0 deletion, 1 value; keys strictly ascending, versions strictly ascending,
//!              each entry with a live version (the entries are also the basement's bytes in
//!              memory: see `basement`)
//! buffer    := key_count:u32 (key:bytes message_count:u32 (seq:u64 op:u8 [operand:bytes])*)*
//!              range_count:u32 (start:bytes has_end:u8 [end:bytes] seq:u64)*
//!              op: 0 put, 1 delete, 2 update
//! ```

use crate::compression::{compress, decompress, Compression};
use crate::error::{Error, Result};
use crate::node::buffer::{Buffer, RangeDelete};
use crate::node::basement::Basement;
use crate::node::leaf::Leaf;
use crate::node::{Internal, Node, NodeId};

const KIND_LEAF: u8 = 1;
const KIND_INTERNAL: u8 = 2;

pub fn encode_node(node: &Node, compression: Compression) -> Vec<u8> {
    let mut out = Vec::with_capacity(node.size_bytes() + 64);
    match node {
        Node::Leaf(leaf) => {
            out.push(KIND_LEAF);
            put_u32(&mut out, leaf.basements().len());
            for basement in leaf.basements() {
                put_section(&mut out, &encode_basement(basement), compression);
            }
        }
        Node::Internal(internal) => {
            out.push(KIND_INTERNAL);
            put_u32(&mut out, internal.height as usize);
            put_u32(&mut out, internal.children.len());
            for child in &internal.children {
                out.extend_from_slice(&child.0.to_le_bytes());
            }
            for pivot in &internal.pivots {
                put_bytes(&mut out, pivot);
            }
            for buffer in &internal.buffers {
                put_section(&mut out, &encode_buffer(buffer), compression);
            }
        }
    }
    out
}

pub fn decode_node(bytes: &[u8]) -> Result<Node> {
    let mut r = Reader::new(bytes);
    let node = match r.u8()? {
        KIND_LEAF => {
            let count = r.count(4)?;
            let mut basements = Vec::with_capacity(count);
            for _ in 0..count {
                basements.push(decode_basement(&decompress(r.bytes()?)?)?);
            }
            Node::Leaf(Leaf::from_basements(basements))
        }
        KIND_INTERNAL => Node::Internal(decode_internal(&mut r)?),
        kind => return Err(corrupt(format!("unknown node kind {kind}"))),
    };
    r.finish()?;
    Ok(node)
}

fn decode_internal(r: &mut Reader<'_>) -> Result<Internal> {
    let height = r.u32()?;
    let child_count = r.count(8)?;
    if child_count == 0 {
        return Err(corrupt("internal node without children".into()));
    }
    let mut children = Vec::with_capacity(child_count);
    for _ in 0..child_count {
        children.push(NodeId(r.u64()?));
    }
    let mut pivots = Vec::with_capacity(child_count - 1);
    for _ in 1..child_count {
        pivots.push(r.bytes()?.to_vec());
    }
    let mut buffers = Vec::with_capacity(child_count);
    for _ in 0..child_count {
        buffers.push(decode_buffer(&decompress(r.bytes()?)?)?);
    }
    Ok(Internal { height, pivots, children, buffers })
}

pub fn encode_basement(basement: &Basement) -> Vec<u8> {
    let mut out = Vec::with_capacity(basement.encoded().len() + 4);
    put_u32(&mut out, basement.len());
    out.extend_from_slice(basement.encoded());
    out
}

pub fn decode_basement(bytes: &[u8]) -> Result<Basement> {
    let mut r = Reader::new(bytes);
    let count = r.count(17)?;
    Basement::decode(count, bytes.get(4..).unwrap_or(&[]))
}

pub fn encode_buffer(buffer: &Buffer) -> Vec<u8> {
    let mut out = Vec::with_capacity(buffer.size_bytes() + 16);
    let (count, points) = buffer.encoded_points();
    put_u32(&mut out, count);
    out.extend_from_slice(&points);
    put_u32(&mut out, buffer.ranges().len());
    for range in buffer.ranges() {
        put_bytes(&mut out, &range.start);
        match &range.end {
            None => out.push(0),
            Some(end) => {
                out.push(1);
                put_bytes(&mut out, end);
            }
        }
        out.extend_from_slice(&range.seq.to_le_bytes());
    }
    out
}

pub fn decode_buffer(bytes: &[u8]) -> Result<Buffer> {
    // The smallest entry: key length, empty key, message count, one delete (seq and op).
    let key_count = Reader::new(bytes).count(17)?;
    let rest = bytes.get(4..).unwrap_or(&[]);
    let (points, used) = Buffer::decode_points(key_count, rest).map_err(corrupt)?;
    let mut r = Reader::new(rest.get(used..).unwrap_or(&[]));
    let range_count = r.count(13)?;
    let mut ranges = Vec::with_capacity(range_count);
    for _ in 0..range_count {
        let start = r.bytes()?.to_vec();
        let end = match r.u8()? {
            0 => None,
            1 => Some(r.bytes()?.to_vec()),
            tag => return Err(corrupt(format!("unknown range end tag {tag}"))),
        };
        ranges.push(RangeDelete { start, end, seq: r.u64()? });
    }
    r.finish()?;
    Ok(points.with_ranges(ranges))
}

fn corrupt(what: String) -> Error {
    Error::Corruption(format!("node encoding: {what}"))
}

fn put_u32(out: &mut Vec<u8>, n: usize) {
    // Sizes are bounded far below 4 GiB by node and key limits; saturate rather than wrap.
    let n = u32::try_from(n).unwrap_or(u32::MAX);
    out.extend_from_slice(&n.to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_u32(out, bytes.len());
    out.extend_from_slice(bytes);
}

fn put_section(out: &mut Vec<u8>, section: &[u8], compression: Compression) {
    let mut compressed = Vec::with_capacity(section.len() / 2 + 8);
    compress(compression, section, &mut compressed);
    put_bytes(out, &compressed);
}

/// A cursor over untrusted bytes: every read checks what is left.
pub struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes }
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.bytes.len() {
            return Err(corrupt(format!("needs {n} bytes, {} left", self.bytes.len())));
        }
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }

    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?.first().copied().unwrap_or_default())
    }

    pub fn u32(&mut self) -> Result<u32> {
        let array: [u8; 4] = self.take(4)?.try_into().map_err(|_| corrupt("u32".into()))?;
        Ok(u32::from_le_bytes(array))
    }

    pub fn u64(&mut self) -> Result<u64> {
        let array: [u8; 8] = self.take(8)?.try_into().map_err(|_| corrupt("u64".into()))?;
        Ok(u64::from_le_bytes(array))
    }

    pub fn bytes(&mut self) -> Result<&'a [u8]> {
        let len = self.u32()? as usize;
        self.take(len)
    }

    /// A count of items each at least `min_item_bytes` long: a count the remaining bytes cannot
    /// hold is corruption, caught before anything is allocated for it.
    pub fn count(&mut self, min_item_bytes: usize) -> Result<usize> {
        let count = self.u32()? as usize;
        if count.saturating_mul(min_item_bytes) > self.bytes.len() {
            return Err(corrupt(format!("count {count} exceeds the {} bytes left", self.bytes.len())));
        }
        Ok(count)
    }

    pub fn finish(&self) -> Result<()> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(corrupt(format!("{} trailing bytes", self.bytes.len())))
        }
    }
}

#[cfg(test)]
mod tests {
    //! Goal: every node encodes and decodes to itself, and garbage never panics the decoder.
    use super::*;
    use crate::message::Event;
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

    #[test]
    fn nodes_round_trip() {
        for compression in [Compression::None, Compression::Lz4, Compression::Zstd(3)] {
            for node in [sample_internal(), sample_leaf(), Node::Leaf(Leaf::default())] {
                let bytes = encode_node(&node, compression);
                assert_eq!(decode_node(&bytes), Ok(node));
            }
        }
    }

    #[test]
    fn a_buffer_of_one_smallest_message_round_trips() {
        let mut buffer = Buffer::default();
        buffer.push(Vec::new(), 1, Event::Delete, 0);
        assert_eq!(decode_buffer(&encode_buffer(&buffer)), Ok(buffer));
    }

    #[test]
    fn every_truncation_is_corruption() {
        for node in [sample_internal(), sample_leaf()] {
            let bytes = encode_node(&node, Compression::Lz4);
            for len in 0..bytes.len() {
                assert!(matches!(decode_node(&bytes[..len]), Err(Error::Corruption(_))), "len {len}");
            }
        }
    }

    proptest! {
        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode_node(&bytes);
        }

        #[test]
        fn flipped_bytes_never_panic(index in 0usize..200, bit in 0u8..8) {
            let mut bytes = encode_node(&sample_internal(), Compression::Lz4);
            let len = bytes.len();
            if let Some(b) = bytes.get_mut(index % len) {
                *b ^= 1 << bit;
            }
            let _ = decode_node(&bytes);
        }
    }
}
