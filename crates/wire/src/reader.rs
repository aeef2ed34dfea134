//! `Reader`: a bounds-checked cursor over untrusted little-endian bytes.
//!
//! Invariant: every read either returns a value taken wholly from inside the slice and advances
//! past it, or returns `WireError::Truncated` and leaves the position unchanged. No read can
//! panic, whatever the bytes say. Lengths read from the input are the caller's to check.

use bson::RawDocument;

use crate::error::WireError;
use crate::validate::{DocumentLimit, validate_document};

/// A cursor over a borrowed byte slice.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The unread bytes, consuming them.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.bytes)
    }

    /// The next `count` bytes.
    pub(crate) fn take(&mut self, count: usize, what: &'static str) -> Result<&'a [u8], WireError> {
        if count > self.bytes.len() {
            return Err(WireError::Truncated { what });
        }
        let (head, tail) = self.bytes.split_at(count);
        self.bytes = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], WireError> {
        let head = self.take(N, what)?;
        <[u8; N]>::try_from(head).map_err(|_| WireError::Truncated { what })
    }

    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, WireError> {
        Ok(u8::from_le_bytes(self.array::<1>(what)?))
    }

    pub(crate) fn i32(&mut self, what: &'static str) -> Result<i32, WireError> {
        Ok(i32::from_le_bytes(self.array::<4>(what)?))
    }

    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, WireError> {
        Ok(u32::from_le_bytes(self.array::<4>(what)?))
    }

    pub(crate) fn i64(&mut self, what: &'static str) -> Result<i64, WireError> {
        Ok(i64::from_le_bytes(self.array::<8>(what)?))
    }

    /// A NUL-terminated UTF-8 string; the NUL is consumed and not returned.
    pub(crate) fn cstring(&mut self, what: &'static str) -> Result<&'a str, WireError> {
        let nul = self.bytes.iter().position(|&byte| byte == 0).ok_or(WireError::InvalidCString { what })?;
        let text = self.take(nul, what)?;
        self.take(1, what)?;
        std::str::from_utf8(text).map_err(|_| WireError::InvalidCString { what })
    }

    /// One BSON document, its declared length checked against `limit` before it is sliced, and
    /// then validated in full.
    pub(crate) fn document(&mut self, limit: DocumentLimit, what: &'static str) -> Result<&'a RawDocument, WireError> {
        // BSON document:  int32 totalLength | element* | 0x00
        let declared = self
            .bytes
            .get(..4)
            .and_then(|prefix| <[u8; 4]>::try_from(prefix).ok())
            .map(i32::from_le_bytes)
            .ok_or(WireError::Truncated { what })?;
        let length = usize::try_from(declared)
            .ok()
            .filter(|&length| length >= 5)
            .ok_or(WireError::InvalidLength { what, length: i64::from(declared) })?;
        if length > limit.max_size_bytes {
            return Err(WireError::DocumentTooLarge { size: length, max: limit.max_size_bytes });
        }
        let bytes = self.take(length, what)?;
        validate_document(bytes, limit, what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: a failed read reports truncation and leaves the position unchanged.
    #[test]
    fn failed_read_does_not_advance() {
        let mut reader = Reader::new(&[1, 2, 3]);
        assert!(matches!(reader.i32("x"), Err(WireError::Truncated { what: "x" })));
        assert_eq!(reader.remaining(), 3);
        assert_eq!(reader.u8("x"), Ok(1));
        assert_eq!(reader.rest(), &[2, 3]);
        assert!(reader.is_empty());
    }

    /// Goal: cstrings need a NUL and UTF-8.
    #[test]
    fn cstrings() {
        let mut reader = Reader::new(b"ab\0c");
        assert_eq!(reader.cstring("x"), Ok("ab"));
        assert!(matches!(reader.cstring("x"), Err(WireError::InvalidCString { .. })));
        let mut reader = Reader::new(b"\xff\0");
        assert!(matches!(reader.cstring("x"), Err(WireError::InvalidCString { .. })));
    }
}
