//! The two header slots at the start of the data file. A checkpoint writes the slot its
//! generation picks (generation % 2), so the previous checkpoint's header stays intact until the
//! new one is durable; recovery takes the valid header with the highest generation.
//!
//! ```text
//! slot (4096 bytes, at 0 or 4096):
//!   magic "STRATA\0\x01"(8) checksum:u32 (crc32c of the body) body  (rest of the slot zero)
//! body, format 4 (80 bytes; the same in formats 2 and 3, which name a file that may hold node
//! blocks of the first node kinds only (format 2: kinds 1 and 2; format 3: up to kind 4; see
//! `node::codec`), so that a binary that reads only those refuses a later format at open):
//!   format:u32 generation:u64 checkpoint_seq:u64 log_segment:u64 next_node_id:u64
//!   next_tree_id:u64 catalog_offset:u64 catalog_len:u32 catalog_copy_offset:u64
//!   node_size:u32 basement_size:u32 fanout:u32 reserved(4)
//! body, format 1 (64 bytes): the same without the tree shape (files of before 2026-11-23)
//! ```
//!
//! `catalog_copy_offset` names a second block holding the same catalog bytes (0: none, as in
//! the files written before 2026-11-26, where these bytes were reserved and zero): a catalog
//! block that fails its checksum is read from its copy instead of leaving the file unopenable.
//!
//! The tree shape is a property of the file, not of the process that opens it: nodes written
//! with one node size must be read, flushed and verified with it.

use crate::error::{Error, Result};
use crate::file::allocator::PAGE_BYTES;
use crate::node::codec::Reader;

const MAGIC: &[u8; 8] = b"STRATA\0\x01";
const FORMAT: u32 = 4;
const FORMAT_2: u32 = 2;
const FORMAT_3: u32 = 3;
const FORMAT_1_BODY_BYTES: usize = 64;
const BODY_BYTES: usize = 80;

/// The sizes the trees in a file were built with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub node_size_bytes: u32,
    pub basement_size_bytes: u32,
    pub fanout: u32,
}

/// What a checkpoint leaves for recovery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub generation: u64,
    /// Every commit with a sequence number up to this one is in the checkpoint.
    pub checkpoint_seq: u64,
    /// Replay of the redo log starts with this segment.
    pub log_segment: u64,
    pub next_node_id: u64,
    pub next_tree_id: u64,
    pub catalog_offset: u64,
    pub catalog_len: u32,
    /// Where the catalog's copy lies (same length); 0 when the file has none.
    pub catalog_copy_offset: u64,
    /// `None` in a format 1 header.
    pub shape: Option<Shape>,
}

impl Header {
    /// A header with every field set (the tests' sample and a fuzz seed).
    pub(crate) fn example() -> Header {
        let shape = Some(Shape { node_size_bytes: 1 << 20, basement_size_bytes: 64 << 10, fanout: 16 });
        Header {
            generation: 7,
            checkpoint_seq: 99,
            log_segment: 3,
            next_node_id: 40,
            next_tree_id: 5,
            catalog_offset: 8192,
            catalog_len: 300,
            catalog_copy_offset: 12288,
            shape,
        }
    }

    pub fn slot_offset(generation: u64) -> u64 {
        (generation % 2) * PAGE_BYTES
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut body = Vec::with_capacity(BODY_BYTES);
        body.extend_from_slice(&FORMAT.to_le_bytes());
        for n in [
            self.generation,
            self.checkpoint_seq,
            self.log_segment,
            self.next_node_id,
            self.next_tree_id,
            self.catalog_offset,
        ] {
            body.extend_from_slice(&n.to_le_bytes());
        }
        body.extend_from_slice(&self.catalog_len.to_le_bytes());
        body.extend_from_slice(&self.catalog_copy_offset.to_le_bytes());
        debug_assert_eq!(body.len(), FORMAT_1_BODY_BYTES);
        if let Some(shape) = self.shape {
            for n in [shape.node_size_bytes, shape.basement_size_bytes, shape.fanout] {
                body.extend_from_slice(&n.to_le_bytes());
            }
        }
        body.resize(BODY_BYTES, 0);
        let mut slot = Vec::with_capacity(PAGE_BYTES as usize);
        slot.extend_from_slice(MAGIC);
        slot.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
        slot.extend_from_slice(&body);
        slot.resize(PAGE_BYTES as usize, 0);
        slot
    }

    /// `Ok(None)` for a slot never written (all zero); an error for a damaged one.
    pub fn decode(slot: &[u8]) -> Result<Option<Header>> {
        if slot.iter().all(|b| *b == 0) {
            return Ok(None);
        }
        let corrupt = |what: &str| Error::Corruption(format!("header: {what}"));
        let mut r = Reader::new(slot);
        if r.take(8)? != MAGIC {
            return Err(corrupt("bad magic"));
        }
        let checksum = r.u32()?;
        let format = Reader::new(r.take(4)?).u32()?;
        let body_bytes = match format {
            1 => FORMAT_1_BODY_BYTES,
            FORMAT_2 | FORMAT_3 | FORMAT => BODY_BYTES,
            _ => return Err(corrupt("unknown format version")),
        };
        let body = slot.get(12..12 + body_bytes).ok_or_else(|| corrupt("truncated"))?;
        if crc32c::crc32c(body) != checksum {
            return Err(corrupt("checksum mismatch"));
        }
        let mut r = Reader::new(body.get(4..).unwrap_or_default());
        let mut header = Header {
            generation: r.u64()?,
            checkpoint_seq: r.u64()?,
            log_segment: r.u64()?,
            next_node_id: r.u64()?,
            next_tree_id: r.u64()?,
            catalog_offset: r.u64()?,
            catalog_len: r.u32()?,
            catalog_copy_offset: r.u64()?,
            shape: None,
        };
        if format != 1 {
            header.shape = Some(Shape { node_size_bytes: r.u32()?, basement_size_bytes: r.u32()?, fanout: r.u32()? });
        }
        Ok(Some(header))
    }
}

#[cfg(test)]
mod tests {
    //! Goal: headers round-trip and any damage is detected.
    use super::*;

    /// A format 1 header (no shape) still opens: its trees take the options' shape.
    #[test]
    fn a_format_1_header_decodes_without_a_shape() {
        let mut body = Vec::new();
        body.extend_from_slice(&1u32.to_le_bytes());
        for n in [7u64, 99, 3, 40, 5, 8192] {
            body.extend_from_slice(&n.to_le_bytes());
        }
        body.extend_from_slice(&300u32.to_le_bytes());
        body.resize(FORMAT_1_BODY_BYTES, 0);
        let mut slot = MAGIC.to_vec();
        slot.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
        slot.extend_from_slice(&body);
        slot.resize(PAGE_BYTES as usize, 0);
        assert_eq!(
            Header::decode(&slot),
            Ok(Some(Header { shape: None, catalog_copy_offset: 0, ..Header::example() }))
        );
    }

    /// Files of formats 2 and 3 (written before their node kinds grew) still open.
    #[test]
    fn earlier_formats_with_a_shape_still_decode() {
        for format in [FORMAT_2, FORMAT_3] {
            let mut slot = Header::example().encode();
            slot[12..16].copy_from_slice(&format.to_le_bytes());
            let crc = crc32c::crc32c(&slot[12..12 + BODY_BYTES]);
            slot[8..12].copy_from_slice(&crc.to_le_bytes());
            assert_eq!(Header::decode(&slot), Ok(Some(Header::example())), "format {format}");
        }
    }

    #[test]
    fn round_trip_and_zero_slot() {
        assert_eq!(Header::decode(&Header::example().encode()), Ok(Some(Header::example())));
        assert_eq!(Header::decode(&[0u8; 4096]), Ok(None));
    }

    #[test]
    fn any_flipped_bit_in_the_used_bytes_is_detected() {
        let slot = Header::example().encode();
        for byte in 0..(12 + BODY_BYTES) {
            let mut damaged = slot.clone();
            damaged[byte] ^= 0x10;
            assert!(Header::decode(&damaged).is_err(), "byte {byte}");
        }
    }
}
