//! A buffer's section cut into key-ranged pieces, each compressed on its own (internal nodes of
//! kind 5; see `codec`).
//!
//! Why: a reader of a thin node reads one window, one basement's key range, but a buffer holds
//! messages for its child's whole range, a leaf of dozens of basements. Read as one compressed
//! section, a buffer of 48 KB was decompressed and checked whole for the few hundred bytes of
//! a window (0.6% of it on average, over iibench's queries beyond memory), and that was a sixth
//! of a query's CPU. Cut in pieces of about `PIECE_BYTES`, a window decompresses the one or two
//! pieces its range overlaps, and a thin node keeps the section compressed, so that the cache
//! holds twice as many of them.
//!
//! ```text
//! pieced buffer := piece_count:u32 (first_key:bytes entry_count:u32 piece_len:u32)*piece_count
//!                  range_count:u32 (start:bytes has_end:u8 [end:bytes] seq:u64)*
//!                  piece*          (piece_len bytes each, back to back to the section's end)
//! piece         := compressed(entries), entry_count entries laid out as in a buffer section
//! ```
//!
//! Piece `i` holds the buffered keys in `[first_key[i], first_key[i + 1])`, and its first entry's
//! key is `first_key[i]`: a reader picks pieces by the directory alone. Every piece read is
//! checked against those bounds and its child's range, as a whole section is.

use std::ops::{Bound, Range};

use crate::compression::{Compression, MAX_SECTION_BYTES, compress, decompress_into, raw_len};
use crate::error::{Error, Result};
use crate::node::buffer::{Buffer, RangeDelete, cut_points};
use crate::node::codec::{Reader, put_bytes, put_ranges, put_u32, read_ranges};

/// The bytes of entries a piece holds before it is cut (the last may hold fewer): small
/// enough that a window reads a few KB, large enough that LZ4 still finds the keys' shared
/// prefixes (a buffer of index keys grows about 5% against one piece per buffer).
pub const PIECE_BYTES: usize = 4096;

/// The smallest directory entry: an empty key's length, the entry count, the piece's length.
const MIN_PIECE_ENTRY_BYTES: usize = 12;

/// Writes `buffer` as a pieced section into `out`.
pub fn encode(buffer: &Buffer, compression: Compression, out: &mut Vec<u8>) {
    let (_, points) = buffer.encoded_points();
    let cuts = cut_points(&points, PIECE_BYTES);
    put_u32(out, cuts.len());
    // Pieces' lengths are known once compressed: their slots are filled after.
    let mut len_slots = Vec::with_capacity(cuts.len());
    for (count, _, first_key) in &cuts {
        put_bytes(out, first_key);
        put_u32(out, *count);
        len_slots.push(out.len());
        put_u32(out, 0);
    }
    put_ranges(out, buffer.ranges());
    let mut start = 0;
    for ((_, end, _), slot) in cuts.iter().zip(len_slots) {
        let before = out.len();
        compress(compression, points.get(start..*end).unwrap_or_default(), out);
        let len = u32::try_from(out.len() - before).unwrap_or(u32::MAX);
        if let Some(bytes) = out.get_mut(slot..slot + 4) {
            bytes.copy_from_slice(&len.to_le_bytes());
        }
        start = *end;
    }
}

/// Where one piece lies in its section and what it holds.
#[derive(Clone, Debug)]
struct Piece {
    first_key: Vec<u8>,
    entries: usize,
    at: Range<usize>,
}

/// A pieced section's directory: its pieces, its range deletes, and the child's upper bound
/// the last piece's keys must stay below.
#[derive(Clone, Debug)]
pub struct Directory {
    pieces: Vec<Piece>,
    ranges: Vec<RangeDelete>,
    upper: Option<Vec<u8>>,
}

impl Directory {
    /// Reads the directory of untrusted `section` (its checksum already checked) for a child
    /// owning `[lower, upper)`: pieces back to back to the section's end, first keys strictly
    /// ascending and within the child's range, none empty.
    pub fn read(section: &[u8], lower: Option<&[u8]>, upper: Option<&[u8]>) -> Result<Directory> {
        let mut r = Reader::new(section);
        let count = r.count(MIN_PIECE_ENTRY_BYTES)?;
        let mut listed = Vec::with_capacity(count);
        for _ in 0..count {
            let first_key = r.bytes()?.to_vec();
            let (entries, len) = (r.u32()? as usize, r.u32()? as usize);
            listed.push((first_key, entries, len));
        }
        let ranges = read_ranges(&mut r)?;
        let mut at = section.len() - r.remaining();
        let mut pieces: Vec<Piece> = Vec::with_capacity(count);
        for (first_key, entries, len) in listed {
            if entries == 0 || pieces.last().is_some_and(|previous| previous.first_key >= first_key) {
                return Err(corrupt("pieces empty or out of key order"));
            }
            let end = at
                .checked_add(len)
                .filter(|&end| end <= section.len())
                .ok_or_else(|| corrupt("a piece past the section"))?;
            pieces.push(Piece { first_key, entries, at: at..end });
            at = end;
        }
        if at != section.len() {
            return Err(corrupt("bytes after the last piece"));
        }
        let (first, last) =
            (pieces.first().map(|p| p.first_key.as_slice()), pieces.last().map(|p| p.first_key.as_slice()));
        if lower.zip(first).is_some_and(|(lower, first)| first < lower)
            || upper.zip(last).is_some_and(|(upper, last)| last >= upper)
        {
            return Err(corrupt("a piece outside its child's key range"));
        }
        Ok(Directory { pieces, ranges, upper: upper.map(<[u8]>::to_vec) })
    }

    /// The memory the directory holds, as charged to the cache.
    pub fn memory_bytes(&self) -> usize {
        let pieces: usize = self.pieces.iter().map(|piece| piece.first_key.len() + 64).sum();
        let ranges: usize = self.ranges.iter().map(RangeDelete::size_bytes).sum();
        pieces + ranges + self.upper.as_ref().map_or(0, Vec::len) + 64
    }

    /// The pieces that may hold keys within `[lo, hi]`.
    fn overlapping(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Range<usize> {
        let starting_at_or_below = |key: &[u8]| self.pieces.partition_point(|piece| piece.first_key.as_slice() <= key);
        let first = match lo {
            Bound::Unbounded => 0,
            Bound::Included(key) | Bound::Excluded(key) => starting_at_or_below(key).saturating_sub(1),
        };
        let end = match hi {
            Bound::Unbounded => self.pieces.len(),
            Bound::Included(key) => starting_at_or_below(key),
            Bound::Excluded(key) => self.pieces.partition_point(|piece| piece.first_key.as_slice() < key),
        };
        first..end.max(first)
    }

    /// The buffer's messages that may lie within `[lo, hi]` (whole pieces of them; every range
    /// delete), decoded from `section` and checked.
    pub fn decode(&self, section: &[u8], lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Result<Buffer> {
        let range = self.overlapping(lo, hi);
        let pieces = self.pieces.get(range.clone()).unwrap_or_default();
        let compressed = |piece: &Piece| section.get(piece.at.clone()).unwrap_or_default();
        // One allocation for all the pieces, never grown: a run grown piece by piece was
        // reallocated and zero-filled again at each, a sixth of the flusher's CPU.
        let mut cuts = Vec::with_capacity(pieces.len());
        let mut end = 0usize;
        for piece in pieces {
            end = end.saturating_add(raw_len(compressed(piece))?);
            cuts.push((piece.entries, end, piece.first_key.as_slice()));
        }
        if end > MAX_SECTION_BYTES {
            return Err(corrupt("pieces larger than the largest section"));
        }
        let mut bytes = crate::io::buffer_to_overwrite(end);
        let mut start = 0;
        for (piece, &(_, end, _)) in pieces.iter().zip(&cuts) {
            decompress_into(compressed(piece), bytes.get_mut(start..end).unwrap_or_default())?;
            start = end;
        }
        let buffer = Buffer::decode_pieces(bytes, &cuts).map_err(|what| corrupt(&what))?;
        let limit = self.pieces.get(range.end).map(|next| next.first_key.as_slice()).or(self.upper.as_deref());
        if let (Some(limit), Some((_, last))) = (limit, buffer.key_span())
            && last >= limit
        {
            return Err(corrupt("a piece's keys reach past the next piece or the child's range"));
        }
        Ok(buffer.with_ranges(self.ranges.clone()))
    }
}

/// A pieced section as a thin node keeps it: its bytes, checksum checked, still compressed, and
/// its directory. Readers decode the pieces their window needs.
pub struct PiecedBuffer {
    section: Vec<u8>,
    directory: Directory,
}

impl PiecedBuffer {
    pub fn open(section: Vec<u8>, lower: Option<&[u8]>, upper: Option<&[u8]>) -> Result<PiecedBuffer> {
        let directory = Directory::read(&section, lower, upper)?;
        Ok(PiecedBuffer { section, directory })
    }

    pub fn memory_bytes(&self) -> usize {
        self.section.capacity() + self.directory.memory_bytes()
    }

    /// The messages that may lie within `[lo, hi]`: every one of those, and perhaps others.
    pub fn messages_within(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Result<Buffer> {
        self.directory.decode(&self.section, lo, hi)
    }
}

fn corrupt(what: &str) -> Error {
    Error::Corruption(format!("node encoding: buffer pieces: {what}"))
}

#[cfg(test)]
mod tests {
    //! Goal: a window's pieces hold every message of the window, a whole decode gives the buffer
    //! back, and a directory that lies is corruption.
    use super::*;
    use crate::message::Event;
    use proptest::prelude::*;

    fn buffer_of(keys: &[u32], ranges: &[(u32, Option<u32>)]) -> Buffer {
        let mut buffer = Buffer::default();
        for (seq, key) in keys.iter().enumerate() {
            buffer.push(key_of(*key), seq as u64 + 1, Event::Put(vec![7; (*key % 50) as usize]), 0);
        }
        for (i, (start, end)) in ranges.iter().enumerate() {
            let range = RangeDelete { start: key_of(*start), end: end.map(key_of), seq: 1_000_000 + i as u64 };
            buffer.push_range(range);
        }
        buffer
    }

    fn key_of(n: u32) -> Vec<u8> {
        format!("index-key-{n:08}").into_bytes()
    }

    fn encoded(buffer: &Buffer) -> Vec<u8> {
        let mut out = Vec::new();
        encode(buffer, Compression::Lz4, &mut out);
        out
    }

    #[test]
    fn a_whole_decode_gives_the_buffer_back_in_several_pieces() {
        let buffer = buffer_of(&(0..2_000).map(|i| i * 3).collect::<Vec<_>>(), &[(10, Some(20)), (5_000, None)]);
        let section = encoded(&buffer);
        let directory = Directory::read(&section, None, None).expect("reads");
        assert!(directory.pieces.len() > 10, "{} pieces", directory.pieces.len());
        assert_eq!(directory.decode(&section, Bound::Unbounded, Bound::Unbounded), Ok(buffer));
        let empty = Buffer::default();
        assert_eq!(
            Directory::read(&encoded(&empty), None, None)
                .and_then(|d| d.decode(&[], Bound::Unbounded, Bound::Unbounded))
                .ok(),
            Some(empty)
        );
    }

    proptest! {
        /// Whatever the window, the pieces decoded for it hold exactly the whole buffer's
        /// messages in that window, and few more than the window's pieces.
        #[test]
        fn a_window_reads_its_messages_from_its_pieces(
            keys in proptest::collection::btree_set(0u32..5_000, 0..600),
            lo in 0u32..5_200, width in 0u32..600, inclusive in any::<(bool, bool)>(),
        ) {
            let keys: Vec<u32> = keys.into_iter().collect();
            let buffer = buffer_of(&keys, &[(lo, Some(lo + 1))]);
            let section = encoded(&buffer);
            let directory = Directory::read(&section, None, None).expect("reads");
            let (lo_key, hi_key) = (key_of(lo), key_of(lo + width));
            let lo = if inclusive.0 { Bound::Included(lo_key.as_slice()) } else { Bound::Excluded(lo_key.as_slice()) };
            let hi = if inclusive.1 { Bound::Included(hi_key.as_slice()) } else { Bound::Excluded(hi_key.as_slice()) };
            let part = directory.decode(&section, lo, hi).expect("decodes");
            let wanted: Vec<_> = buffer.points_in(lo, hi).collect();
            prop_assert_eq!(part.points_in(lo, hi).collect::<Vec<_>>(), wanted);
            prop_assert_eq!(part.ranges(), buffer.ranges());
            let read = part.points().count();
            let window = buffer.points_in(lo, hi).count();
            prop_assert!(read <= window + 2 * PIECE_BYTES / 20, "{read} read for {window} in the window");
        }

        #[test]
        fn garbage_directories_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            if let Ok(directory) = Directory::read(&bytes, None, Some(b"m")) {
                let _ = directory.decode(&bytes, Bound::Unbounded, Bound::Unbounded);
                let _ = directory.decode(&bytes, Bound::Included(b"c"), Bound::Excluded(b"d"));
            }
        }
    }

    #[test]
    fn a_lying_directory_is_corruption() {
        let buffer = buffer_of(&(0..600).collect::<Vec<_>>(), &[]);
        let section = encoded(&buffer);
        assert!(Directory::read(&section, Some(&key_of(1)), None).is_err(), "a first key below the child's range");
        assert!(
            Directory::read(&section, None, Some(&key_of(300))).is_err(),
            "a piece starting past the child's range"
        );
        // The last piece's keys reach past the child's range: found when it is decoded.
        let directory = Directory::read(&section, None, Some(&key_of(599))).expect("first keys are within");
        assert!(directory.decode(&section, Bound::Included(&key_of(598)), Bound::Unbounded).is_err());
        assert!(directory.decode(&section, Bound::Unbounded, Bound::Excluded(&key_of(5))).is_ok(), "other pieces read");
        // A first key that is not its piece's first entry's.
        let mut forged = section.clone();
        let first_key_at = 4 + 4;
        forged[first_key_at + key_of(0).len() - 1] ^= 1;
        let directory = Directory::read(&forged, None, None).expect("the directory alone holds");
        assert!(directory.decode(&forged, Bound::Unbounded, Bound::Excluded(&key_of(3))).is_err());
        for len in 0..section.len() {
            if let Ok(directory) = Directory::read(&section[..len], None, None) {
                assert!(directory.decode(&section[..len], Bound::Unbounded, Bound::Unbounded).is_err(), "len {len}");
            }
        }
    }
}
