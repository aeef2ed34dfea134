//! Space in the data file: extents of whole pages, first fit, coalesced on free.
//!
//! Invariants: free extents never overlap each other or a used block, are page-aligned, and lie
//! below `end` (the first byte no block has used). The allocator does not decide *when* a block
//! may be freed: blocks still named by a durable checkpoint are kept by the cache until a newer
//! checkpoint is durable (see `cache.rs`).

use std::collections::BTreeMap;

/// The unit of allocation and of alignment.
pub const PAGE_BYTES: u64 = 4096;

/// The two header slots occupy the first two pages.
pub const FIRST_BLOCK_OFFSET: u64 = 2 * PAGE_BYTES;

pub fn round_up(len: u64) -> u64 {
    len.div_ceil(PAGE_BYTES) * PAGE_BYTES
}

#[derive(Debug)]
pub struct Allocator {
    free: BTreeMap<u64, u64>,
    end: u64,
}

impl Allocator {
    pub fn new() -> Allocator {
        Allocator { free: BTreeMap::new(), end: FIRST_BLOCK_OFFSET }
    }

    /// An allocator for a file whose used extents are `used` (offset, length): everything else
    /// between the headers and the last used byte is free.
    pub fn from_used(mut used: Vec<(u64, u64)>) -> Allocator {
        used.sort_unstable();
        let mut allocator = Allocator::new();
        let mut cursor = FIRST_BLOCK_OFFSET;
        for (offset, len) in used {
            if offset > cursor {
                allocator.free.insert(cursor, offset - cursor);
            }
            cursor = cursor.max(offset + round_up(len));
        }
        allocator.end = cursor;
        allocator
    }

    /// Returns the offset of `round_up(len)` free bytes.
    pub fn allocate(&mut self, len: u64) -> u64 {
        let len = round_up(len.max(1));
        let found = self.free.iter().find(|(_, free_len)| **free_len >= len).map(|(o, l)| (*o, *l));
        match found {
            Some((offset, free_len)) => {
                self.free.remove(&offset);
                if free_len > len {
                    self.free.insert(offset + len, free_len - len);
                }
                offset
            }
            None => {
                let offset = self.end;
                self.end += len;
                offset
            }
        }
    }

    /// Takes `round_up(len)` free bytes that lie wholly before `before`, lowest first; `None`
    /// if no hole there is large enough (compaction moves blocks only towards the start).
    pub fn allocate_before(&mut self, len: u64, before: u64) -> Option<u64> {
        let len = round_up(len.max(1));
        let (offset, free_len) = self
            .free
            .range(..before)
            .find(|(offset, free_len)| **free_len >= len && **offset + len <= before)
            .map(|(o, l)| (*o, *l))?;
        self.free.remove(&offset);
        if free_len > len {
            self.free.insert(offset + len, free_len - len);
        }
        Some(offset)
    }

    pub fn free(&mut self, offset: u64, len: u64) {
        let mut offset = offset;
        let mut len = round_up(len.max(1));
        if let Some((&prev, &prev_len)) = self.free.range(..offset).next_back()
            && prev + prev_len == offset
        {
            self.free.remove(&prev);
            offset = prev;
            len += prev_len;
        }
        if let Some(&next_len) = self.free.get(&(offset + len)) {
            self.free.remove(&(offset + len));
            len += next_len;
        }
        if offset + len == self.end {
            self.end = offset;
        } else {
            self.free.insert(offset, len);
        }
    }

    pub fn end(&self) -> u64 {
        self.end
    }

    /// Free bytes below `end`: holes left by freed blocks.
    pub fn free_bytes(&self) -> u64 {
        self.free.values().sum()
    }
}

#[cfg(test)]
mod tests {
    //! Goal: allocations never overlap and freed space is reused and coalesced.
    use super::*;

    #[test]
    fn freed_space_is_reused_and_coalesced() {
        let mut a = Allocator::new();
        let x = a.allocate(100);
        let y = a.allocate(5000);
        let z = a.allocate(4096);
        assert_eq!((x, y, z), (8192, 12288, 20480));
        a.free(x, 100);
        a.free(y, 5000);
        assert_eq!(a.free_bytes(), 3 * PAGE_BYTES);
        assert_eq!(a.allocate(3 * PAGE_BYTES), x);
        a.free(z, 4096);
        assert_eq!(a.end(), 20480);
    }

    #[test]
    fn allocate_before_takes_only_holes_below() {
        let mut a = Allocator::new();
        let x = a.allocate(4096);
        let y = a.allocate(4096);
        let z = a.allocate(2 * 4096);
        a.free(x, 4096);
        assert_eq!(a.allocate_before(4096, y), Some(x));
        assert_eq!(a.allocate_before(4096, y), None, "no hole left below y");
        a.free(y, 4096);
        assert_eq!(a.allocate_before(2 * 4096, z), None, "one page free below z, two wanted");
        assert_eq!(a.allocate_before(4096, z), Some(y));
        assert_eq!(a.end(), z + 2 * 4096);
    }

    #[test]
    fn from_used_frees_the_gaps() {
        let a = Allocator::from_used(vec![(20480, 4096), (8192, 10)]);
        assert_eq!(a.free_bytes(), 2 * PAGE_BYTES);
        assert_eq!(a.end(), 24576);
    }
}
