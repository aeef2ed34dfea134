//! The data file: one file for all trees, holding the two header slots, node blocks written
//! copy-on-write, and each checkpoint's catalog (trees and the block translation table).
//!
//! ```text
//! data file := header slot 0 (4 KiB) | header slot 1 (4 KiB) | blocks, page-aligned, anywhere
//! block     := magic "SBLK"(4) checksum:u32 node_id:u64 payload_len:u32 payload
//!              checksum = crc32c(node_id | payload_len | payload)
//! ```
//!
//! A block carries the id of the node it belongs to (0 for a catalog), so a block read for the
//! wrong node, a torn write or a stray overwrite is caught by the checksum or the id, and reported
//! as corruption, never served as data.

pub mod allocator;
pub mod catalog;
pub mod header;

use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::io::{File, FileSystem, OpenMode};
use allocator::{Allocator, PAGE_BYTES};
use header::Header;

const BLOCK_MAGIC: &[u8; 4] = b"SBLK";
const BLOCK_HEADER_BYTES: usize = 20;

/// Where a block lives: its offset and its exact length (the space it holds is rounded up to
/// whole pages).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockAddr {
    pub offset: u64,
    pub len: u32,
}

/// The fields of a block's header (after its magic).
struct BlockHeader {
    checksum: u32,
    node_id: u64,
    payload_len: u32,
}

impl BlockHeader {
    /// The header at the start of `block`; `None` without the magic.
    fn parse(block: &[u8]) -> Option<BlockHeader> {
        let field = |range: std::ops::Range<usize>| block.get(range);
        if field(0..4)? != BLOCK_MAGIC {
            return None;
        }
        Some(BlockHeader {
            checksum: u32::from_le_bytes(field(4..8)?.try_into().ok()?),
            node_id: u64::from_le_bytes(field(8..16)?.try_into().ok()?),
            payload_len: u32::from_le_bytes(field(16..20)?.try_into().ok()?),
        })
    }
}

fn corrupt_block(addr: BlockAddr, node_id: u64, what: &str) -> Error {
    Error::Corruption(format!("block at {} for node {node_id}: {what}", addr.offset))
}

/// A block's header for `payload`: magic, checksum (of the rest of the header and the
/// payload), node id, payload length.
fn block_header(node_id: u64, payload: &[u8]) -> Vec<u8> {
    let payload_len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    let mut header = Vec::with_capacity(BLOCK_HEADER_BYTES);
    header.extend_from_slice(BLOCK_MAGIC);
    header.extend_from_slice(&[0; 4]);
    header.extend_from_slice(&node_id.to_le_bytes());
    header.extend_from_slice(&payload_len.to_le_bytes());
    let checksum = crc32c::crc32c_append(crc32c::crc32c(header.get(8..).unwrap_or_default()), payload);
    header.splice(4..8, checksum.to_le_bytes());
    header
}

/// Where byte `offset` of a block's payload lies in the file.
fn payload_at(addr: BlockAddr, offset: usize) -> u64 {
    addr.offset + (BLOCK_HEADER_BYTES + offset) as u64
}

/// The payload length a block's address implies.
fn payload_len(addr: BlockAddr, node_id: u64) -> Result<usize> {
    (addr.len as usize)
        .checked_sub(BLOCK_HEADER_BYTES)
        .ok_or_else(|| corrupt_block(addr, node_id, "shorter than a block header"))
}

pub struct DataFile {
    file: Arc<dyn File>,
    allocator: Mutex<Allocator>,
}

impl DataFile {
    pub fn open(fs: &dyn FileSystem, path: &Path) -> Result<DataFile> {
        let file = fs.open(path, OpenMode::Create)?;
        Ok(DataFile { file, allocator: Mutex::new(Allocator::new()) })
    }

    /// Replaces the allocator once the blocks in use are known (after reading a checkpoint).
    pub fn set_allocator(&self, allocator: Allocator) {
        *self.allocator.lock() = allocator;
    }

    pub fn write_block(&self, node_id: u64, payload: &[u8]) -> Result<BlockAddr> {
        let addr = self.reserve_block(payload.len())?;
        self.write_reserved(addr, node_id, payload).inspect_err(|_| self.free(addr))?;
        Ok(addr)
    }

    /// Takes the space of a block with a payload of `payload_len` bytes (the lowest hole that
    /// fits), to be written by `write_reserved` or given back by `free`. A checkpoint reserves
    /// its catalog's blocks before it writes its nodes: blocks no compaction can move must take
    /// the lowest holes, not be the ones left at the end of the file.
    pub fn reserve_block(&self, payload_len: usize) -> Result<BlockAddr> {
        let len = BLOCK_HEADER_BYTES + payload_len;
        let len32 = u32::try_from(len).map_err(|_| Error::TooLarge(format!("block of {len} bytes")))?;
        Ok(BlockAddr { offset: self.allocator.lock().allocate(len as u64), len: len32 })
    }

    /// Writes a block into space `reserve_block` took for exactly this payload's length.
    pub fn write_reserved(&self, addr: BlockAddr, node_id: u64, payload: &[u8]) -> Result<()> {
        assert_eq!(
            addr.len as usize,
            BLOCK_HEADER_BYTES + payload.len(),
            "a block written into space reserved for another length"
        );
        // The header and the payload are written as two pieces rather than copied into one
        // buffer: a node's payload is megabytes, and that copy was memory outside the budget.
        // A block is named by nothing until a sync covers it, and its checksum covers both.
        let header = block_header(node_id, payload);
        self.file.write_all_at(&header, addr.offset)?;
        self.file.write_all_at(payload, addr.offset + BLOCK_HEADER_BYTES as u64)?;
        // Clean pages early: under a memory cap, dirty ones piling up made readers' reads wait
        // for reclaim (iibench beyond memory: query p99 about 5.0 ms against 6.0).
        self.file.start_writeback(addr.offset, u64::from(addr.len));
        Ok(())
    }

    /// Copies a block, checked, to the lowest hole before it; the copy's address, or `None`
    /// when no hole before it is large enough. The original is left as it is (still the one a
    /// checkpoint names, until the next checkpoint names the copy).
    pub fn copy_block_lower(&self, addr: BlockAddr, node_id: u64) -> Result<Option<BlockAddr>> {
        let Some(offset) = self.allocator.lock().allocate_before(u64::from(addr.len), addr.offset) else {
            return Ok(None);
        };
        let copy = BlockAddr { offset, len: addr.len };
        let copied = self.read_block(addr, node_id).and_then(|payload| self.write_reserved(copy, node_id, &payload));
        match copied {
            Ok(()) => Ok(Some(copy)),
            Err(error) => {
                self.allocator.lock().free(offset, u64::from(addr.len));
                Err(error)
            }
        }
    }

    /// Reads a block and returns its payload, checking its checksum and its node id.
    pub fn read_block(&self, addr: BlockAddr, node_id: u64) -> Result<Vec<u8>> {
        let corrupt = |what: &str| corrupt_block(addr, node_id, what);
        let payload_len = payload_len(addr, node_id)?;
        let mut block = crate::io::buffer_to_overwrite(addr.len as usize);
        self.file.read_exact_at(&mut block, addr.offset).map_err(|error| past_the_end(error, &corrupt))?;
        let header = BlockHeader::parse(&block).ok_or_else(|| corrupt("bad magic"))?;
        if crc32c::crc32c(block.get(8..).unwrap_or_default()) != header.checksum {
            return Err(corrupt("checksum mismatch"));
        }
        if header.node_id != node_id || header.payload_len as usize != payload_len {
            return Err(corrupt(&format!("belongs to node {}", header.node_id)));
        }
        // In place, not a second allocation of a node's size beside the first.
        block.drain(..BLOCK_HEADER_BYTES);
        Ok(block)
    }

    /// Advises the page cache that this block will not be read again soon.
    pub fn advise_done_with(&self, addr: BlockAddr) {
        self.file.advise_done_with(addr.offset, u64::from(addr.len));
    }

    /// Reads `len` bytes at `offset` of a block's payload without reading the rest: one section
    /// of a node's encoding, or the rest of a long head. The caller checks them (heads and
    /// sections carry their own checksums); here only the range is checked against the block.
    pub fn read_payload_range(&self, addr: BlockAddr, node_id: u64, offset: usize, len: usize) -> Result<Vec<u8>> {
        let payload_len = payload_len(addr, node_id)?;
        if offset.checked_add(len).is_none_or(|end| end > payload_len) {
            let what = format!("range {offset}+{len} outside a payload of {payload_len}");
            return Err(corrupt_block(addr, node_id, &what));
        }
        let mut bytes = crate::io::buffer_to_overwrite(len);
        self.file
            .read_exact_at(&mut bytes, payload_at(addr, offset))
            .map_err(|error| past_the_end(error, &|what| corrupt_block(addr, node_id, what)))?;
        Ok(bytes)
    }

    /// Starts reading `len` bytes at `offset` of a block's payload, without waiting for them: a
    /// `read_payload_range` of the same bytes soon after finds them read or on their way.
    pub fn start_reading_payload_range(&self, addr: BlockAddr, offset: usize, len: usize) {
        self.file.advise_will_need(payload_at(addr, offset), len as u64);
    }

    /// Reads the first `len` bytes of a block's payload (fewer if the payload is shorter),
    /// checking the block's magic, node id and length; its checksum needs the whole block.
    pub fn read_payload_prefix(&self, addr: BlockAddr, node_id: u64, len: usize) -> Result<Vec<u8>> {
        let payload_len = payload_len(addr, node_id)?;
        let mut block = crate::io::buffer_to_overwrite(BLOCK_HEADER_BYTES + len.min(payload_len));
        self.file
            .read_exact_at(&mut block, addr.offset)
            .map_err(|error| past_the_end(error, &|what| corrupt_block(addr, node_id, what)))?;
        match BlockHeader::parse(&block) {
            Some(header) if header.node_id == node_id && header.payload_len as usize == payload_len => {
                block.drain(..BLOCK_HEADER_BYTES);
                Ok(block)
            }
            _ => Err(corrupt_block(addr, node_id, "not this node's block")),
        }
    }

    /// Returns a block's space for reuse. The caller guarantees no durable checkpoint names it.
    /// Copies the file, as long as it is now, to `target` and syncs it; returns the bytes
    /// copied. Blocks written meanwhile may be copied torn or not at all: only what a
    /// checkpoint made durable before the call (and that no one may overwrite until the next
    /// checkpoint) is a promise.
    pub fn copy_to(&self, target: &dyn File) -> Result<u64> {
        const CHUNK_BYTES: usize = 4 << 20;
        let end = self.file.len()?;
        let mut buffer = vec![0u8; CHUNK_BYTES];
        let mut offset = 0u64;
        while offset < end {
            let len = usize::try_from(end - offset).unwrap_or(CHUNK_BYTES).min(CHUNK_BYTES);
            let chunk = buffer.get_mut(..len).unwrap_or_default();
            self.file.read_exact_at(chunk, offset)?;
            target.write_all_at(chunk, offset)?;
            offset += len as u64;
        }
        target.sync()?;
        Ok(end)
    }

    pub fn free(&self, addr: BlockAddr) {
        self.allocator.lock().free(addr.offset, u64::from(addr.len));
    }

    pub fn sync(&self) -> Result<()> {
        self.file.sync().map_err(|e| Error::from(e).stopping("data file sync failed"))
    }

    /// Writes the header slot of its generation and syncs it: the checkpoint's commit point.
    pub fn write_header(&self, header: &Header) -> Result<()> {
        self.file.write_all_at(&header.encode(), Header::slot_offset(header.generation))?;
        self.sync()
    }

    /// Writes the same header into the other slot and syncs it, once `write_header` has made it
    /// durable: the previous checkpoint's header, which it overwrites, names blocks that may now
    /// be reused, so after this a damaged slot leaves the other naming the same checkpoint. A
    /// crash or a torn write here leaves the first slot valid.
    pub fn write_header_copy(&self, header: &Header) -> Result<()> {
        self.file.write_all_at(&header.encode(), Header::slot_offset(header.generation + 1))?;
        self.sync()
    }

    /// The valid header with the highest generation; `None` for a new file. Both slots damaged
    /// (and not blank) is corruption.
    pub fn read_header(&self) -> Result<Option<Header>> {
        let file_len = self.file.len()?;
        let mut best: Option<Header> = None;
        let mut damaged = Vec::new();
        for slot in 0..2u64 {
            let offset = slot * PAGE_BYTES;
            let mut bytes = vec![0u8; PAGE_BYTES as usize];
            if offset < file_len {
                let available = (file_len - offset).min(PAGE_BYTES) as usize;
                if let Some(prefix) = bytes.get_mut(..available) {
                    self.file.read_exact_at(prefix, offset)?;
                }
            }
            match Header::decode(&bytes) {
                Ok(Some(header)) if best.as_ref().is_none_or(|b| header.generation > b.generation) => {
                    best = Some(header)
                }
                Ok(_) => {}
                Err(error) => damaged.push(error),
            }
        }
        match (best, damaged.len()) {
            (None, 2) => Err(Error::Corruption("both header slots are damaged".into())),
            (best, _) => Ok(best),
        }
    }

    pub fn allocated_end(&self) -> u64 {
        self.allocator.lock().end()
    }

    /// Free space between the headers and the allocated end (holes to reuse).
    pub fn free_bytes(&self) -> u64 {
        self.allocator.lock().free_bytes()
    }

    /// The file's length on disk.
    pub fn len(&self) -> Result<u64> {
        Ok(self.file.len()?)
    }

    /// Gives the space past the last allocated block back to the operating system. Holding the
    /// allocator's lock, nothing is allocated meanwhile; every block in use (written, named by a
    /// checkpoint, or waiting for one) lies below the end. Not synced: a crash that undoes it
    /// leaves free space past the end, which recovery does not read.
    pub fn trim_tail(&self) -> Result<u64> {
        let allocator = self.allocator.lock();
        let end = allocator.end();
        let len = self.file.len()?;
        if len > end {
            self.file.set_len(end)?;
        }
        Ok(len.saturating_sub(end))
    }
}

/// A block read that runs past the end of the file names a block that is not there: damage
/// (a damaged header or catalog, or a cut file), not an I/O failure.
fn past_the_end(error: std::io::Error, corrupt: &dyn Fn(&str) -> Error) -> Error {
    match error.kind() {
        std::io::ErrorKind::UnexpectedEof => corrupt("past the end of the file"),
        _ => error.into(),
    }
}
