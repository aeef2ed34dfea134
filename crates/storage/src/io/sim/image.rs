//! One simulated file's bytes: the live image every read sees, the durable image a power loss
//! falls back to, and the changes made since the last sync that lead from one to the other.
//!
//! Invariants:
//! - `live` is `durable` with `pending` applied in order, unless a sync failed: a failed sync
//!   forgets its pending changes (as Linux marks the pages clean after a writeback error), so
//!   from then on `live` holds bytes that will never be durable.
//! - A file's size is part of its bytes: a write past the end grows the file only if the
//!   write (or the part of it a crash keeps) lands; a `set_len` lands whole or not at all.
//! - Sizes stay below `MAX_FILE_BYTES`, so offsets fit in `usize` and memory stays bounded.

use std::io;

use super::rng::Rng;

/// Largest simulated file; a write or `set_len` past it fails with `EFBIG`.
pub(super) const MAX_FILE_BYTES: usize = 1 << 32;
/// A torn write keeps whole sectors of this size half of the time.
pub(super) const SECTOR_BYTES: usize = 512;
const EFBIG: i32 = 27;

/// An unsynced change to a file's bytes.
#[derive(Clone, Debug)]
enum Pending {
    Write { offset: usize, bytes: Vec<u8> },
    SetLen(usize),
}

/// How a crash treats the unsynced changes it finds: some crashes keep everything (the OS had
/// written it all back), some nothing, most a random mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Outcomes {
    KeepAll,
    LoseAll,
    Mixed,
}

impl Outcomes {
    pub(super) fn pick(rng: &mut Rng) -> Outcomes {
        match rng.below(8) {
            0 => Outcomes::KeepAll,
            1 => Outcomes::LoseAll,
            _ => Outcomes::Mixed,
        }
    }

    /// Whether one all-or-nothing change survives.
    pub(super) fn keep(self, rng: &mut Rng) -> bool {
        match self {
            Outcomes::KeepAll => true,
            Outcomes::LoseAll => false,
            Outcomes::Mixed => rng.one_in(2),
        }
    }
}

#[derive(Clone, Debug, Default)]
pub(super) struct Image {
    live: Vec<u8>,
    durable: Vec<u8>,
    pending: Vec<Pending>,
}

impl Image {
    /// A file whose live and durable bytes are `bytes`.
    pub(super) fn durable(bytes: Vec<u8>) -> Image {
        Image { live: bytes.clone(), durable: bytes, pending: Vec::new() }
    }

    pub(super) fn len(&self) -> u64 {
        self.live.len() as u64
    }

    /// Copies live bytes from `offset` into `buf`; returns how many (fewer only at the end).
    pub(super) fn read(&self, buf: &mut [u8], offset: u64) -> usize {
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let source = self.live.get(start..).unwrap_or_default();
        buf.iter_mut().zip(source).for_each(|(target, byte)| *target = *byte);
        buf.len().min(source.len())
    }

    pub(super) fn write(&mut self, bytes: &[u8], offset: u64) -> io::Result<()> {
        let offset = checked_size(offset, bytes.len())? - bytes.len();
        if !bytes.is_empty() {
            self.change(Pending::Write { offset, bytes: bytes.to_vec() });
        }
        Ok(())
    }

    pub(super) fn set_len(&mut self, len: u64) -> io::Result<()> {
        let len = checked_size(len, 0)?;
        self.change(Pending::SetLen(len));
        Ok(())
    }

    fn change(&mut self, change: Pending) {
        apply(&mut self.live, &change);
        self.pending.push(change);
    }

    /// A successful sync: everything written so far is durable.
    pub(super) fn sync(&mut self) {
        for change in std::mem::take(&mut self.pending) {
            apply(&mut self.durable, &change);
        }
    }

    /// A failed sync: the writes it covered are lost for good, though reads still see them.
    pub(super) fn lose_pending(&mut self) {
        self.pending.clear();
    }

    /// The bytes a power loss leaves: the durable image plus a seeded choice per unsynced
    /// change, in order: each write dropped, applied, torn (a prefix) or garbled.
    pub(super) fn crashed(&self, outcomes: Outcomes, rng: &mut Rng) -> Vec<u8> {
        let mut image = self.durable.clone();
        for change in &self.pending {
            match (change, outcomes) {
                (Pending::SetLen(_), _) | (_, Outcomes::KeepAll | Outcomes::LoseAll) => {
                    if outcomes.keep(rng) {
                        apply(&mut image, change);
                    }
                }
                (Pending::Write { offset, bytes }, Outcomes::Mixed) => {
                    crash_write(&mut image, *offset, bytes, rng);
                }
            }
        }
        image
    }
}

/// `offset + len` as a `usize`, or `EFBIG` past `MAX_FILE_BYTES`.
fn checked_size(offset: u64, len: usize) -> io::Result<usize> {
    usize::try_from(offset)
        .ok()
        .and_then(|offset| offset.checked_add(len))
        .filter(|end| *end <= MAX_FILE_BYTES)
        .ok_or_else(|| io::Error::from_raw_os_error(EFBIG))
}

fn apply(image: &mut Vec<u8>, change: &Pending) {
    match change {
        Pending::Write { offset, bytes } => write_into(image, *offset, bytes),
        Pending::SetLen(len) => image.resize(*len, 0),
    }
}

fn write_into(image: &mut Vec<u8>, offset: usize, bytes: &[u8]) {
    let end = offset + bytes.len();
    if image.len() < end {
        image.resize(end, 0);
    }
    match image.get_mut(offset..end) {
        Some(target) => target.copy_from_slice(bytes),
        None => unreachable!("image resized to cover the write"),
    }
}

/// One unsynced write under a mixed crash: dropped, applied, torn or garbled, equally likely.
fn crash_write(image: &mut Vec<u8>, offset: usize, bytes: &[u8], rng: &mut Rng) {
    match rng.below(4) {
        0 => {}
        1 => write_into(image, offset, bytes),
        2 => {
            let kept = torn_len(offset, bytes.len(), rng);
            write_into(image, offset, bytes.get(..kept).unwrap_or_default());
        }
        _ => {
            let mut garbled = bytes.to_vec();
            let start = rng.below(garbled.len());
            let end = start + 1 + rng.below(garbled.len() - start);
            rng.fill(garbled.get_mut(start..end).unwrap_or_default());
            write_into(image, offset, &garbled);
        }
    }
}

/// How much of a write of `len` bytes at `offset` a tear keeps: up to a sector boundary half
/// of the time (when one falls inside the write), else any byte count; never all of it.
fn torn_len(offset: usize, len: usize, rng: &mut Rng) -> usize {
    let end = offset + len;
    let first_boundary = (offset / SECTOR_BYTES + 1) * SECTOR_BYTES;
    if first_boundary < end && rng.one_in(2) {
        let boundaries = (end - 1 - first_boundary) / SECTOR_BYTES + 1;
        first_boundary + rng.below(boundaries) * SECTOR_BYTES - offset
    } else {
        rng.below(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: a tear never keeps the whole write, and cuts at sector boundaries when it can.
    /// Method: many seeded tears of a write straddling several sectors.
    #[test]
    fn torn_len_is_a_proper_prefix() {
        let mut rng = Rng::new(7);
        let mut on_boundary = 0;
        for _ in 0..1000 {
            let kept = torn_len(100, 2000, &mut rng);
            assert!(kept < 2000);
            on_boundary += usize::from((100 + kept).is_multiple_of(SECTOR_BYTES));
        }
        assert!(on_boundary > 300, "{on_boundary} tears on a sector boundary");
    }

    /// Goal: sync makes the live image durable, including a shrink.
    /// Method: write, shrink, sync, then crash with every outcome kind.
    #[test]
    fn sync_makes_live_durable() {
        let mut image = Image::default();
        image.write(b"abcdef", 0).unwrap();
        image.set_len(3).unwrap();
        image.sync();
        for seed in 0..64 {
            let mut rng = Rng::new(seed);
            assert_eq!(image.crashed(Outcomes::pick(&mut rng), &mut rng), b"abc");
        }
    }

    /// Goal: offsets past the simulated limit fail with EFBIG instead of allocating.
    /// Method: write at `u64::MAX` and at the limit.
    #[test]
    fn huge_offsets_are_efbig() {
        let mut image = Image::default();
        let error = image.write(b"x", u64::MAX).unwrap_err();
        assert_eq!(error.raw_os_error(), Some(EFBIG));
        assert!(image.write(b"x", MAX_FILE_BYTES as u64).is_err());
        assert!(image.set_len(MAX_FILE_BYTES as u64 + 1).is_err());
    }
}
