//! The integers and byte strings of the node encoding: little-endian u32 and u64, and `bytes`
//! (a u32 length then that many bytes). `Reader` checks every read against what is left, so a
//! truncated or oversized field is `Error::Corruption`, never a panic or a huge allocation.

use crate::error::{Error, Result};

pub(super) fn corrupt(what: String) -> Error {
    Error::Corruption(format!("node encoding: {what}"))
}

pub(crate) fn put_u32(out: &mut Vec<u8>, n: usize) {
    // Sizes are bounded far below 4 GiB by node and key limits; saturate rather than wrap.
    let n = u32::try_from(n).unwrap_or(u32::MAX);
    out.extend_from_slice(&n.to_le_bytes());
}

pub(crate) fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_u32(out, bytes.len());
    out.extend_from_slice(bytes);
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

    pub fn remaining(&self) -> usize {
        self.bytes.len()
    }

    pub fn finish(&self) -> Result<()> {
        if self.bytes.is_empty() { Ok(()) } else { Err(corrupt(format!("{} trailing bytes", self.bytes.len()))) }
    }
}
