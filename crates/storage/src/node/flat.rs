//! Helpers shared by the flat layouts (`basement`, and the runs of `buffer`): entries encoded back
//! to back, found by binary search over their offsets, read without trusting a length to be in
//! bounds (bad bytes read as absent, never a panic).

use std::cmp::Ordering;
use std::ops::Bound;

/// The little-endian u32 at `at`, if the bytes reach that far.
pub fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

/// Binary search over `len` entries in key order: `Ok(index)` of `key`, or `Err(index)` where
/// it would go.
pub fn search<'a>(len: usize, key_at: impl Fn(usize) -> &'a [u8], key: &[u8]) -> Result<usize, usize> {
    let (mut lo, mut hi) = (0, len);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match key_at(mid).cmp(key) {
            Ordering::Less => lo = mid + 1,
            Ordering::Greater => hi = mid,
            Ordering::Equal => return Ok(mid),
        }
    }
    Err(lo)
}

/// The first of `len` entries in key order whose key fails `pred` (all before it satisfy it).
pub fn partition_point<'a>(len: usize, key_at: impl Fn(usize) -> &'a [u8], pred: impl Fn(&[u8]) -> bool) -> usize {
    let (mut lo, mut hi) = (0, len);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(key_at(mid)) { lo = mid + 1 } else { hi = mid }
    }
    lo
}

/// Writes the head both layouts' entries start with: `key_len:u32 key count:u32` (the count of
/// versions in a basement entry, of messages in a run entry).
pub fn write_entry_head(out: &mut Vec<u8>, key: &[u8], count: usize) {
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&(count as u32).to_le_bytes());
}

/// Whether `key` lies within the upper bound `hi`.
pub fn below(key: &[u8], hi: Bound<&[u8]>) -> bool {
    match hi {
        Bound::Included(hi) => key <= hi,
        Bound::Excluded(hi) => key < hi,
        Bound::Unbounded => true,
    }
}
