//! Reading the redo log back at recovery.
//!
//! Segments are read in order from the checkpoint's segment. The readable log ends at the first
//! frame that is torn, garbled or blank: that tail is cut (the segment truncated there and
//! synced), never replayed. Only the last segment may end early: valid records in a later
//! segment after a bad frame mean damage in the middle of the log, reported as corruption rather
//! than silently dropping acknowledged commits.

use std::path::Path;

use crate::error::{Error, Result};
use crate::io::{FileSystem, OpenMode};
use crate::wal::record::{Record, read_frame};
use crate::wal::{parse_segment_name, segment_path};

/// What replay read: the last segment number seen, each segment's size as left (after any
/// cut), and the bytes of the records handed to `apply`.
pub struct ReplayEnd {
    pub last_segment: u64,
    pub segment_sizes: Vec<(u64, u64)>,
    pub bytes: u64,
}

pub fn segments(fs: &dyn FileSystem, dir: &Path) -> Result<Vec<u64>> {
    let mut numbers: Vec<u64> = fs.list(dir)?.iter().filter_map(|n| parse_segment_name(n)).collect();
    numbers.sort_unstable();
    Ok(numbers)
}

/// Calls `apply` for each record of segments `from_segment` onwards, in order.
pub fn replay(
    fs: &dyn FileSystem,
    dir: &Path,
    from_segment: u64,
    mut apply: impl FnMut(Record) -> Result<()>,
) -> Result<ReplayEnd> {
    let numbers: Vec<u64> = segments(fs, dir)?.into_iter().filter(|n| *n >= from_segment).collect();
    let mut cut_at: Option<(u64, u64)> = None;
    let mut bytes_read = 0u64;
    let mut segment_sizes = Vec::with_capacity(numbers.len());
    for &number in &numbers {
        let file = fs.open(&segment_path(dir, number), OpenMode::Existing)?;
        let len = usize::try_from(file.len()?).map_err(|_| Error::Corruption("log segment too large".into()))?;
        let mut bytes = vec![0; len];
        file.read_exact_at(&mut bytes, 0)?;
        let mut at = 0usize;
        while let Some((record, frame_len)) = read_frame(bytes.get(at..).unwrap_or_default())? {
            if let Some((bad_segment, _)) = cut_at {
                return Err(Error::Corruption(format!(
                    "log segment {bad_segment} ends early but segment {number} has records after it"
                )));
            }
            apply(record)?;
            at += frame_len;
            bytes_read += frame_len as u64;
        }
        if at < len && cut_at.is_none() {
            cut_at = Some((number, at as u64));
        }
        segment_sizes.push((number, if cut_at.is_some_and(|(cut, _)| cut == number) { at as u64 } else { len as u64 }));
    }
    if let Some((segment, offset)) = cut_at {
        let file = fs.open(&segment_path(dir, segment), OpenMode::Existing)?;
        file.set_len(offset)?;
        file.sync()?;
    }
    Ok(ReplayEnd { last_segment: numbers.last().copied().unwrap_or(from_segment), segment_sizes, bytes: bytes_read })
}
