//! Reading the redo log back at recovery.
//!
//! Segments are read in order from the checkpoint's segment. The readable log ends at the first
//! frame that is torn, garbled or blank: that tail is cut (the segment truncated there and
//! synced), never replayed. Only the last segment may end early: valid records in a later
//! segment after a bad frame mean damage in the middle of the log, reported as corruption rather
//! than silently dropping acknowledged commits.
//!
//! A salvage (`Options::salvage`) reads what it can instead: replay stops at the first damage
//! (a bad frame followed by records, or a record that does not apply) and says where; nothing
//! is cut, since the salvaged copy is scratch.

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
    /// In a salvage, where replay stopped at damage (what follows is lost).
    pub stopped_at_damage: Option<String>,
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
    salvage: bool,
    mut apply: impl FnMut(Record) -> Result<()>,
) -> Result<ReplayEnd> {
    let numbers: Vec<u64> = segments(fs, dir)?.into_iter().filter(|n| *n >= from_segment).collect();
    let mut cut_at: Option<(u64, u64)> = None;
    let mut bytes_read = 0u64;
    let mut segment_sizes = Vec::with_capacity(numbers.len());
    let last_segment = numbers.last().copied().unwrap_or(from_segment);
    let stop = |segment_sizes, bytes, error: Error| -> Result<ReplayEnd> {
        match salvage {
            true => Ok(ReplayEnd { last_segment, segment_sizes, bytes, stopped_at_damage: Some(error.to_string()) }),
            false => Err(error),
        }
    };
    for &number in &numbers {
        let file = fs.open(&segment_path(dir, number), OpenMode::Existing)?;
        let len = usize::try_from(file.len()?).map_err(|_| Error::Corruption("log segment too large".into()))?;
        let mut bytes = vec![0; len];
        file.read_exact_at(&mut bytes, 0)?;
        let mut at = 0usize;
        loop {
            let (record, frame_len) = match read_frame(bytes.get(at..).unwrap_or_default()) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(error) => return stop(segment_sizes, bytes_read, error),
            };
            if let Some((bad_segment, _)) = cut_at {
                let error = Error::Corruption(format!(
                    "log segment {bad_segment} ends early but segment {number} has records after it"
                ));
                return stop(segment_sizes, bytes_read, error);
            }
            if let Err(error) = apply(record) {
                return stop(segment_sizes, bytes_read, error);
            }
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
    Ok(ReplayEnd { last_segment, segment_sizes, bytes: bytes_read, stopped_at_damage: None })
}
