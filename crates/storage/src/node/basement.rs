//! Basements, stored flat: a leaf's read unit as one byte vector of entries back to back (the
//! very bytes of its on-disk section before compression), with each entry's offset beside it.
//!
//! Why flat: a 4 MiB leaf of index entries holds tens of thousands of small keys. As a `Vec` of
//! entries each owning its key and versions, it cost three allocations per entry to decode, as
//! many frees to evict, and about 100 bytes of heap overhead per entry, so that the cache held a
//! third of the data its budget promised and a leaf flush spent its time in the allocator. Flat,
//! decoding a basement is one copy and one pass to find the offsets; a flush copies the entries
//! no message touches as byte ranges; the memory charged is the memory used.
//!
//! ```text
//! entry := key_len:u32 key version_count:u32 (seq:u64 tag:u8 [value_len:u32 value])*
//!          tag: 0 deletion, 1 value; versions in ascending sequence order
//! ```
//!
//! The bytes are trusted once built: `decode` checks every entry of bytes read from disk, and
//! entries are only ever written by `push_entry`. Accessors still never panic on bad bytes;
//! they read them as empty.

use std::borrow::Cow;
use std::ops::Bound;

use crate::error::{Error, Result};
use crate::message::{Event, Seq};
use crate::node::flat::{self, read_u32};

const TAG_DELETION: u8 = 0;
const TAG_VALUE: u8 = 1;
/// Heap bookkeeping of a basement beside its bytes (the two `Vec` headers and allocator slack).
const BASEMENT_OVERHEAD_BYTES: usize = 64;

/// A version of a value: its sequence number, and the value or `None` for a deletion.
pub type Version<'a> = (Seq, Option<Cow<'a, [u8]>>);

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Basement {
    data: Vec<u8>,
    /// Where each entry starts in `data`, ascending.
    offsets: Vec<u32>,
}

/// One entry of a basement, borrowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryRef<'a> {
    key: &'a [u8],
    /// The version_count and versions, as encoded.
    versions: &'a [u8],
    /// The whole entry, as encoded (copied as is by flushes that do not touch it).
    raw: &'a [u8],
}

impl Basement {
    pub fn with_capacity(bytes: usize, entries: usize) -> Basement {
        Basement { data: Vec::with_capacity(bytes), offsets: Vec::with_capacity(entries) }
    }

    /// Builds a basement from entries, in ascending key order or not: tests build bad ones
    /// on purpose, for `decode` to refuse.
    #[cfg(test)]
    pub fn from_entries<'a>(entries: impl IntoIterator<Item = (&'a [u8], Vec<Version<'a>>)>) -> Basement {
        let mut basement = Basement::default();
        for (key, versions) in entries {
            if versions.iter().any(|(_, v)| v.is_some()) {
                basement.offsets.push(basement.data.len() as u32);
                write_entry(&mut basement.data, key, &versions);
            }
        }
        basement
    }

    /// Reads a basement's entries from their encoding (`count` entries back to back), checking
    /// every length, tag and key order: bytes from disk are untrusted.
    pub fn decode(count: usize, bytes: &[u8]) -> Result<Basement> {
        let mut offsets = Vec::with_capacity(count);
        let mut at = 0usize;
        let mut previous: Option<&[u8]> = None;
        for _ in 0..count {
            let rest = bytes.get(at..).unwrap_or(&[]);
            let (entry, len) = parse_checked(rest)?;
            if previous.is_some_and(|p| p >= entry.key) {
                return Err(corrupt("basement keys out of order"));
            }
            previous = Some(entry.key);
            offsets.push(u32::try_from(at).map_err(|_| corrupt("basement too large"))?);
            at += len;
        }
        if at != bytes.len() {
            return Err(corrupt("trailing bytes after a basement's entries"));
        }
        Ok(Basement { data: bytes.to_vec(), offsets })
    }

    /// The entries' bytes, back to back (the payload `decode` reads).
    pub fn encoded(&self) -> &[u8] {
        &self.data
    }

    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// The memory this basement holds, as charged to the cache.
    pub fn size_bytes(&self) -> usize {
        self.data.len() + 4 * self.offsets.len() + BASEMENT_OVERHEAD_BYTES
    }

    /// The memory this basement's allocations hold, spare capacity included.
    pub fn memory_bytes(&self) -> usize {
        self.data.capacity() + 4 * self.offsets.capacity() + BASEMENT_OVERHEAD_BYTES
    }

    /// Gives back spare capacity over an eighth of the bytes held (after a merge whose size
    /// was estimated), so that what the cache is charged stays close to what is used.
    pub fn shrink_slack(&mut self) {
        if self.data.capacity() > self.data.len() + self.data.len() / 8 {
            self.data.shrink_to_fit();
        }
        if self.offsets.capacity() > self.offsets.len() + self.offsets.len() / 8 {
            self.offsets.shrink_to_fit();
        }
    }

    pub fn entry(&self, index: usize) -> Option<EntryRef<'_>> {
        let start = *self.offsets.get(index)? as usize;
        let end = self.offsets.get(index + 1).map_or(self.data.len(), |&e| e as usize);
        Some(EntryRef::parse(self.data.get(start..end)?))
    }

    pub fn entries(&self) -> impl DoubleEndedIterator<Item = EntryRef<'_>> + '_ {
        (0..self.len()).filter_map(|i| self.entry(i))
    }

    pub fn first_key(&self) -> Option<&[u8]> {
        self.entry(0).map(|e| e.key)
    }

    pub fn last_key(&self) -> Option<&[u8]> {
        self.len().checked_sub(1).and_then(|last| self.entry(last)).map(|e| e.key)
    }

    /// Appends `key`'s versions to `out` as events.
    pub fn collect_events(&self, key: &[u8], out: &mut Vec<(Seq, Event)>) {
        if let Some(entry) = self.find(key).ok().and_then(|i| self.entry(i)) {
            out.extend(entry.versions().map(|(seq, v)| (seq, v.map_or(Event::Delete, |v| Event::Put(v.to_vec())))));
        }
    }

    /// The entries with keys within the bounds, in key order.
    pub fn entries_in<'a>(
        &'a self,
        lo: Bound<&'a [u8]>,
        hi: Bound<&'a [u8]>,
    ) -> impl Iterator<Item = EntryRef<'a>> + 'a {
        let start = self.partition_point(|key| match lo {
            Bound::Included(lo) => key < lo,
            Bound::Excluded(lo) => key <= lo,
            Bound::Unbounded => false,
        });
        (start..self.len()).filter_map(move |i| self.entry(i)).take_while(move |e| flat::below(e.key(), hi))
    }

    /// The entry with `key`, or where it would go.
    pub fn find(&self, key: &[u8]) -> std::result::Result<usize, usize> {
        flat::search(self.len(), |i| self.key_at(i), key)
    }

    /// The index of the first entry whose key fails `pred` (entries before it all satisfy it).
    pub fn partition_point(&self, pred: impl Fn(&[u8]) -> bool) -> usize {
        flat::partition_point(self.len(), |i| self.key_at(i), pred)
    }

    fn key_at(&self, index: usize) -> &[u8] {
        self.entry(index).map_or(&[][..], |e| e.key)
    }

    /// Appends an entry (its key greater than every key here). An entry of deletions only is
    /// not written: nobody can read it.
    pub fn push_entry(&mut self, key: &[u8], versions: &[Version<'_>]) {
        if versions.iter().all(|(_, v)| v.is_none()) {
            return;
        }
        debug_assert!(self.last_key().is_none_or(|last| last < key), "a basement entry appended out of key order");
        debug_assert!(versions.windows(2).all(|w| w[0].0 < w[1].0), "an entry's versions out of sequence order");
        let start = self.data.len();
        self.offsets.push(start as u32);
        write_entry(&mut self.data, key, versions);
        debug_assert_eq!(self.data.len() - start, entry_len(key, versions));
    }

    /// Appends an entry already encoded (copied from another basement).
    pub fn push_raw(&mut self, entry: EntryRef<'_>) {
        debug_assert!(self.last_key().is_none_or(|last| last < entry.key), "a basement entry copied out of key order");
        self.offsets.push(self.data.len() as u32);
        self.data.extend_from_slice(entry.raw);
    }

    /// Replaces entry `index` with `bytes` (an entry from `encode_entry`; empty: remove it), or
    /// inserts them as a new entry at `index` when `insert` is set.
    pub fn splice(&mut self, index: usize, insert: bool, bytes: Vec<u8>) {
        let start = self.offsets.get(index).map_or(self.data.len(), |&s| s as usize);
        let end = if insert { start } else { self.offsets.get(index + 1).map_or(self.data.len(), |&e| e as usize) };
        let present = !bytes.is_empty();
        let delta = bytes.len() as i64 - (end - start) as i64;
        self.data.splice(start..end, bytes);
        let first_after = if insert { index } else { index + 1 };
        for offset in self.offsets.iter_mut().skip(first_after) {
            *offset = (i64::from(*offset) + delta) as u32;
        }
        match (insert, present) {
            (true, true) => self.offsets.insert(index, start as u32),
            (false, false) => {
                self.offsets.remove(index);
            }
            _ => {}
        }
        debug_assert!(
            !present || {
                let key = self.key_at(index);
                (index == 0 || self.key_at(index - 1) < key)
                    && (index + 1 >= self.len() || key < self.key_at(index + 1))
            },
            "a spliced basement entry out of key order"
        );
    }

    /// Cuts the entries into basements of about `target_bytes`, none over `max_bytes` unless
    /// it holds a single entry; each piece is one exact copy of its byte range.
    pub fn chunk(self, target_bytes: usize, max_bytes: usize) -> Vec<Basement> {
        let mut starts = vec![0usize];
        let mut size = BASEMENT_OVERHEAD_BYTES;
        for index in 0..self.len() {
            let entry_size = self.entry_len(index) + 4;
            if index > starts.last().copied().unwrap_or(0) && (size >= target_bytes || size + entry_size > max_bytes) {
                starts.push(index);
                size = BASEMENT_OVERHEAD_BYTES;
            }
            size += entry_size;
        }
        let ends = starts.iter().skip(1).copied().chain([self.len()]);
        let pieces: Vec<Basement> = starts.iter().zip(ends).map(|(&first, end)| self.range(first, end)).collect();
        debug_assert_eq!(pieces.iter().map(Basement::len).sum::<usize>(), self.len(), "a chunking lost entries");
        debug_assert!(
            pieces.iter().all(|piece| piece.len() <= 1 || piece.size_bytes() <= max_bytes),
            "a chunk of several entries over the basement size"
        );
        pieces
    }

    /// The encoded length of entry `index`.
    fn entry_len(&self, index: usize) -> usize {
        self.byte_offset(index + 1) - self.byte_offset(index)
    }

    /// Where entry `index` starts in `data` (its length for `index == len`).
    fn byte_offset(&self, index: usize) -> usize {
        self.offsets.get(index).map_or(self.data.len(), |&o| o as usize)
    }

    /// A copy of entries `first..end` as a basement of its own.
    fn range(&self, first: usize, end: usize) -> Basement {
        let (from, to) = (self.byte_offset(first), self.byte_offset(end));
        let base = from as u32;
        Basement {
            data: self.data.get(from..to).unwrap_or(&[]).to_vec(),
            offsets: self.offsets.get(first..end).unwrap_or(&[]).iter().map(|o| o - base).collect(),
        }
    }

    /// Appends the entries of `right` (whose keys are all greater).
    pub fn append(&mut self, right: Basement) {
        debug_assert!(
            self.last_key().zip(right.first_key()).is_none_or(|(last, first)| last < first),
            "a basement appended whose keys are not all greater"
        );
        let base = self.data.len() as u32;
        self.offsets.extend(right.offsets.iter().map(|o| o + base));
        self.data.extend_from_slice(&right.data);
    }
}

impl<'a> EntryRef<'a> {
    /// Splits an entry's bytes into key and versions (bad bytes read as an empty key).
    fn parse(raw: &'a [u8]) -> EntryRef<'a> {
        let key_len = read_u32(raw, 0).unwrap_or(0) as usize;
        let key = raw.get(4..4 + key_len).unwrap_or(&[]);
        let versions = raw.get(4 + key.len()..).unwrap_or(&[]);
        EntryRef { key, versions, raw }
    }

    pub fn key(&self) -> &'a [u8] {
        self.key
    }

    /// The versions, oldest first.
    pub fn versions(&self) -> Versions<'a> {
        let count = read_u32(self.versions, 0).unwrap_or(0) as usize;
        Versions { bytes: self.versions.get(4..).unwrap_or(&[]), remaining: count }
    }

    /// The newest version's value (`None`: deleted).
    #[cfg(test)]
    pub fn latest(&self) -> Option<&'a [u8]> {
        self.versions().last().and_then(|(_, v)| v)
    }

    /// The value a reader at `snapshot` sees.
    pub fn visible_at(&self, snapshot: Seq) -> Option<&'a [u8]> {
        self.versions().take_while(|(seq, _)| *seq <= snapshot).last().and_then(|(_, v)| v)
    }
}

/// The versions of an entry, oldest first.
pub struct Versions<'a> {
    bytes: &'a [u8],
    remaining: usize,
}

impl<'a> Iterator for Versions<'a> {
    type Item = (Seq, Option<&'a [u8]>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let (version, len) = parse_version(self.bytes)?;
        self.bytes = self.bytes.get(len..).unwrap_or(&[]);
        Some(version)
    }
}

/// An entry's encoding, for `Basement::splice`; empty when every version is a deletion (an
/// entry nobody can read is not kept).
pub fn encode_entry(key: &[u8], versions: &[Version<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    if versions.iter().any(|(_, v)| v.is_some()) {
        write_entry(&mut out, key, versions);
    }
    out
}

/// The bytes `write_entry` writes for this entry.
pub fn entry_len(key: &[u8], versions: &[Version<'_>]) -> usize {
    let versions_len: usize = versions.iter().map(|(_, value)| 9 + value.as_ref().map_or(0, |v| 4 + v.len())).sum();
    8 + key.len() + versions_len
}

fn write_entry(out: &mut Vec<u8>, key: &[u8], versions: &[Version<'_>]) {
    flat::write_entry_head(out, key, versions.len());
    for (seq, value) in versions {
        out.extend_from_slice(&seq.to_le_bytes());
        match value {
            None => out.push(TAG_DELETION),
            Some(value) => {
                out.push(TAG_VALUE);
                out.extend_from_slice(&(value.len() as u32).to_le_bytes());
                out.extend_from_slice(value);
            }
        }
    }
}

/// A version as stored: its sequence number and its value (`None`: a deletion).
type StoredVersion<'a> = (Seq, Option<&'a [u8]>);

/// One version at the start of `bytes`, and its encoded length.
fn parse_version(bytes: &[u8]) -> Option<(StoredVersion<'_>, usize)> {
    let seq = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?);
    match *bytes.get(8)? {
        TAG_DELETION => Some(((seq, None), 9)),
        TAG_VALUE => {
            let len = read_u32(bytes, 9)? as usize;
            let value = bytes.get(13..13 + len)?;
            Some(((seq, Some(value)), 13 + len))
        }
        _ => None,
    }
}

/// Parses the entry at the start of untrusted `bytes`, checking it whole; returns it and its
/// encoded length.
fn parse_checked(bytes: &[u8]) -> Result<(EntryRef<'_>, usize)> {
    let truncated = || corrupt("truncated basement entry");
    let key_len = read_u32(bytes, 0).ok_or_else(truncated)? as usize;
    let key_end = 4usize.checked_add(key_len).ok_or_else(truncated)?;
    let count = read_u32(bytes, key_end).ok_or_else(truncated)? as usize;
    let mut at = key_end + 4;
    let mut previous_seq: Option<Seq> = None;
    let mut live = false;
    for _ in 0..count {
        let rest = bytes.get(at..).ok_or_else(truncated)?;
        let ((seq, value), len) = parse_version(rest).ok_or_else(|| corrupt("bad version in a basement entry"))?;
        if previous_seq.is_some_and(|p| p >= seq) {
            return Err(corrupt("versions out of order in a basement entry"));
        }
        previous_seq = Some(seq);
        live |= value.is_some();
        at += len;
    }
    if !live {
        return Err(corrupt("a basement entry without a live version"));
    }
    let raw = bytes.get(..at).ok_or_else(truncated)?;
    Ok((EntryRef::parse(raw), at))
}

fn corrupt(what: &str) -> Error {
    Error::Corruption(what.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_len_is_the_encoded_length() {
        let cases: [(&[u8], Vec<Version<'_>>); 3] = [
            (b"", vec![(1, None)]),
            (b"key", vec![(1, Some(Cow::Borrowed(&b"value"[..])))]),
            (b"k2", vec![(9, Some(Cow::Owned(vec![0u8; 1000]))), (7, None), (3, Some(Cow::Borrowed(&b""[..])))]),
        ];
        for (key, versions) in cases {
            let mut out = Vec::new();
            write_entry(&mut out, key, &versions);
            assert_eq!(entry_len(key, &versions), out.len());
        }
    }

    /// Increasing keys fill each basement once, in an allocation made at its full size: the
    /// cache is charged about what the entries hold, not the doubling of a growing `Vec`.
    #[test]
    fn appends_leave_full_basements_without_spare_capacity() {
        let update: crate::message::UpdateFn = std::sync::Arc::new(|_, _, _| None);
        let basement_size = 64 << 10;
        let mut leaf = crate::node::leaf::Leaf::default();
        for id in 0u64..2000 {
            let event = crate::message::Event::Put(vec![id as u8; 1000]);
            leaf.apply_point(id.to_be_bytes().to_vec(), vec![(id + 1, event)], 0, &update, basement_size);
        }
        let basements = leaf.basements();
        assert!(basements.len() >= 30, "{} basements", basements.len());
        // The first basement of a new leaf grew from nothing; every later one was made full-size.
        for basement in basements.iter().skip(1) {
            assert!(basement.size_bytes() <= basement_size);
            assert!(
                basement.data.capacity() <= basement_size,
                "capacity {} len {} entries {}",
                basement.data.capacity(),
                basement.data.len(),
                basement.len()
            );
        }
        for basement in basements.iter().take(basements.len() - 1) {
            assert!(basement.size_bytes() > basement_size - 1100, "a full basement: {}", basement.size_bytes());
        }
        assert!(leaf.memory_bytes() < leaf.size_bytes() + leaf.size_bytes() / 16);
    }

    fn value(bytes: &[u8]) -> Option<Cow<'_, [u8]>> {
        Some(Cow::Borrowed(bytes))
    }

    fn sample() -> Basement {
        Basement::from_entries([
            (&b"a"[..], vec![(1, value(b"1")), (4, None), (5, value(b""))]),
            (&b"b"[..], vec![(2, value(&[7; 300]))]),
            (&b"c"[..], vec![(3, None)]),
        ])
    }

    #[test]
    fn entries_read_back_and_deletion_only_entries_are_dropped() {
        let basement = sample();
        assert_eq!(basement.len(), 2);
        let a = basement.entry(0).map(|e| e.versions().collect::<Vec<_>>());
        assert_eq!(a, Some(vec![(1, Some(&b"1"[..])), (4, None), (5, Some(&b""[..]))]));
        assert_eq!(basement.entry(1).and_then(|e| e.latest()).map(<[u8]>::len), Some(300));
        assert_eq!(basement.entry(0).and_then(|e| e.visible_at(4)), None);
        assert_eq!(basement.entry(0).and_then(|e| e.visible_at(3)), Some(&b"1"[..]));
        assert_eq!(basement.find(b"b"), Ok(1));
        assert_eq!(basement.find(b"ab"), Err(1));
    }

    #[test]
    fn decode_accepts_its_encoding_and_rejects_every_truncation() {
        let basement = sample();
        assert_eq!(Basement::decode(2, basement.encoded()).ok(), Some(basement.clone()));
        for len in 0..basement.encoded().len() {
            assert!(Basement::decode(2, &basement.encoded()[..len]).is_err(), "truncated at {len}");
        }
        let swapped =
            Basement::from_entries([(&b"b"[..], vec![(1, value(b"x"))]), (&b"a"[..], vec![(1, value(b"y"))])]);
        assert!(Basement::decode(2, swapped.encoded()).is_err(), "keys out of order");
    }

    #[test]
    fn splice_replaces_inserts_and_removes() {
        let mut basement = sample();
        basement.splice(1, true, encode_entry(b"aa", &[(9, value(b"new"))]));
        basement.splice(0, false, encode_entry(b"a", &[(9, None)]));
        basement.splice(1, false, encode_entry(b"b", &[(10, value(b"short"))]));
        let keys: Vec<_> = basement.entries().map(|e| (e.key().to_vec(), e.latest().map(<[u8]>::to_vec))).collect();
        assert_eq!(keys, vec![(b"aa".to_vec(), Some(b"new".to_vec())), (b"b".to_vec(), Some(b"short".to_vec()))]);
        assert_eq!(Basement::decode(2, basement.encoded()).ok(), Some(basement));
    }

    #[test]
    fn chunk_and_append_keep_every_entry() {
        let many =
            Basement::from_entries((0u32..100).map(|i| {
                (Box::leak(i.to_be_bytes().to_vec().into_boxed_slice()) as &[u8], vec![(1, value(&[1; 20]))])
            }));
        let chunks = many.clone().chunk(300, 600);
        assert!(chunks.len() > 5 && chunks.iter().all(|c| c.size_bytes() <= 600));
        let mut joined = Basement::default();
        for chunk in chunks {
            joined.append(chunk);
        }
        assert_eq!(joined, many);
    }
}
