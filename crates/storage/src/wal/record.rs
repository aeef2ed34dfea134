//! Redo log records and their framing.
//!
//! ```text
//! frame  := len:u32 checksum:u32 payload          checksum = crc32c(len | payload)
//! payload:= 1 first_seq:u64 count:u32 write*      a commit
//!         | 2 seq:u64 tree:u64 name:bytes        a tree created
//!         | 3 seq:u64 tree:u64                   a tree dropped
//! write  := tree:u64 op:u8 key:bytes [value:bytes]      op: 0 put, 1 delete, 2 update
//!         | tree:u64 3 start:bytes has_end:u8 [end:bytes]  (range delete)
//! ```
//!
//! A frame whose length runs past the end of the segment, whose checksum does not match, or
//! whose length is zero (never-written space) ends the readable log.

use crate::error::{Error, Result};
use crate::node::codec::Reader;

pub const FRAME_HEADER_BYTES: usize = 8;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogWrite {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    Update(Vec<u8>, Vec<u8>),
    DeleteRange(Vec<u8>, Option<Vec<u8>>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    Commit { first_seq: u64, writes: Vec<(u64, LogWrite)> },
    CreateTree { seq: u64, tree: u64, name: String },
    DropTree { seq: u64, tree: u64 },
}

impl Record {
    /// The first sequence number the record uses.
    pub fn first_seq(&self) -> u64 {
        match self {
            Record::Commit { first_seq, .. } => *first_seq,
            Record::CreateTree { seq, .. } | Record::DropTree { seq, .. } => *seq,
        }
    }

    /// The last sequence number the record uses.
    pub fn last_seq(&self) -> u64 {
        match self {
            Record::Commit { first_seq, writes } => first_seq + (writes.len() as u64).saturating_sub(1),
            Record::CreateTree { seq, .. } | Record::DropTree { seq, .. } => *seq,
        }
    }
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// Appends one framed commit record, encoded straight from borrowed writes.
pub fn frame_commit<'a>(
    out: &mut Vec<u8>,
    first_seq: u64,
    writes: impl ExactSizeIterator<Item = (u64, LogWriteRef<'a>)>,
) {
    frame(out, |payload| {
        payload.push(1);
        payload.extend_from_slice(&first_seq.to_le_bytes());
        payload.extend_from_slice(&(writes.len() as u32).to_le_bytes());
        for (tree, write) in writes {
            payload.extend_from_slice(&tree.to_le_bytes());
            match write {
                LogWriteRef::Put(k, v) => {
                    payload.push(0);
                    put_bytes(payload, k);
                    put_bytes(payload, v);
                }
                LogWriteRef::Delete(k) => {
                    payload.push(1);
                    put_bytes(payload, k);
                }
                LogWriteRef::Update(k, v) => {
                    payload.push(2);
                    put_bytes(payload, k);
                    put_bytes(payload, v);
                }
                LogWriteRef::DeleteRange(start, end) => {
                    payload.push(3);
                    put_bytes(payload, start);
                    match end {
                        None => payload.push(0),
                        Some(end) => {
                            payload.push(1);
                            put_bytes(payload, end);
                        }
                    }
                }
            }
        }
    });
}

impl LogWrite {
    pub fn as_ref(&self) -> LogWriteRef<'_> {
        match self {
            LogWrite::Put(k, v) => LogWriteRef::Put(k, v),
            LogWrite::Delete(k) => LogWriteRef::Delete(k),
            LogWrite::Update(k, v) => LogWriteRef::Update(k, v),
            LogWrite::DeleteRange(s, e) => LogWriteRef::DeleteRange(s, e.as_deref()),
        }
    }
}

/// A write as the transaction holds it, for encoding without copying.
#[derive(Clone, Copy, Debug)]
pub enum LogWriteRef<'a> {
    Put(&'a [u8], &'a [u8]),
    Delete(&'a [u8]),
    Update(&'a [u8], &'a [u8]),
    DeleteRange(&'a [u8], Option<&'a [u8]>),
}

pub fn frame_create_tree(out: &mut Vec<u8>, seq: u64, tree: u64, name: &str) {
    frame(out, |payload| {
        payload.push(2);
        payload.extend_from_slice(&seq.to_le_bytes());
        payload.extend_from_slice(&tree.to_le_bytes());
        put_bytes(payload, name.as_bytes());
    });
}

pub fn frame_drop_tree(out: &mut Vec<u8>, seq: u64, tree: u64) {
    frame(out, |payload| {
        payload.push(3);
        payload.extend_from_slice(&seq.to_le_bytes());
        payload.extend_from_slice(&tree.to_le_bytes());
    });
}

fn frame(out: &mut Vec<u8>, write_payload: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.extend_from_slice(&[0; FRAME_HEADER_BYTES]);
    write_payload(out);
    let len = (out.len() - start - FRAME_HEADER_BYTES) as u32;
    let checksum = frame_checksum(len, out.get(start + FRAME_HEADER_BYTES..).unwrap_or_default());
    out.splice(start..start + FRAME_HEADER_BYTES, len.to_le_bytes().into_iter().chain(checksum.to_le_bytes()));
}

/// crc32c of the length then the payload, without copying them together (a commit's payload can
/// be megabytes).
fn frame_checksum(len: u32, payload: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&len.to_le_bytes()), payload)
}

/// Reads the frame at the start of `bytes`: `Ok(Some((record, frame_len)))`, or `Ok(None)` where
/// the readable log ends (torn, garbled or blank). A frame that checks out but does not parse is
/// corruption.
pub fn read_frame(bytes: &[u8]) -> Result<Option<(Record, usize)>> {
    let Some(head) = bytes.get(..FRAME_HEADER_BYTES) else { return Ok(None) };
    let len = u32::from_le_bytes(head.get(..4).and_then(|b| b.try_into().ok()).unwrap_or_default()) as usize;
    let checksum = u32::from_le_bytes(head.get(4..8).and_then(|b| b.try_into().ok()).unwrap_or_default());
    let Some(payload) = bytes.get(FRAME_HEADER_BYTES..FRAME_HEADER_BYTES + len) else { return Ok(None) };
    if len == 0 {
        return Ok(None);
    }
    if frame_checksum(len as u32, payload) != checksum {
        return Ok(None);
    }
    Ok(Some((decode_payload(payload)?, FRAME_HEADER_BYTES + len)))
}

fn decode_payload(payload: &[u8]) -> Result<Record> {
    let mut r = Reader::new(payload);
    let record = match r.u8()? {
        1 => {
            let first_seq = r.u64()?;
            let count = r.count(13)?;
            // A commit's writes take the sequence numbers first_seq.. in turn: a record whose
            // numbers would pass u64::MAX is corruption, not a record to replay (`last_seq`).
            if first_seq.checked_add((count as u64).saturating_sub(1)).is_none() {
                return Err(Error::Corruption(format!("log: a commit of {count} writes from sequence {first_seq}")));
            }
            let mut writes = Vec::with_capacity(count);
            for _ in 0..count {
                let tree = r.u64()?;
                let write = match r.u8()? {
                    0 => LogWrite::Put(r.bytes()?.to_vec(), r.bytes()?.to_vec()),
                    1 => LogWrite::Delete(r.bytes()?.to_vec()),
                    2 => LogWrite::Update(r.bytes()?.to_vec(), r.bytes()?.to_vec()),
                    3 => {
                        let start = r.bytes()?.to_vec();
                        let end = match r.u8()? {
                            0 => None,
                            _ => Some(r.bytes()?.to_vec()),
                        };
                        LogWrite::DeleteRange(start, end)
                    }
                    op => return Err(Error::Corruption(format!("log: unknown write op {op}"))),
                };
                writes.push((tree, write));
            }
            Record::Commit { first_seq, writes }
        }
        2 => {
            Record::CreateTree { seq: r.u64()?, tree: r.u64()?, name: String::from_utf8_lossy(r.bytes()?).into_owned() }
        }
        3 => Record::DropTree { seq: r.u64()?, tree: r.u64()? },
        kind => return Err(Error::Corruption(format!("log: unknown record kind {kind}"))),
    };
    r.finish()?;
    Ok(record)
}

#[cfg(test)]
mod tests {
    //! Goal: records round-trip; torn or garbled frames end the log instead of being replayed.
    use super::*;

    fn sample(out: &mut Vec<u8>) {
        let writes = [
            (1, LogWriteRef::Put(b"k", b"v")),
            (2, LogWriteRef::Delete(b"d")),
            (1, LogWriteRef::Update(b"u", b"\x01")),
            (3, LogWriteRef::DeleteRange(b"a", Some(b"z"))),
            (3, LogWriteRef::DeleteRange(b"q", None)),
        ];
        frame_commit(out, 10, writes.into_iter());
        frame_create_tree(out, 15, 4, "db.c");
        frame_drop_tree(out, 16, 4);
    }

    #[test]
    fn records_round_trip() {
        let mut bytes = Vec::new();
        sample(&mut bytes);
        let mut records = Vec::new();
        let mut at = 0;
        while let Some((record, len)) = read_frame(&bytes[at..]).expect("read") {
            records.push(record);
            at += len;
        }
        assert_eq!(at, bytes.len());
        assert_eq!(records.len(), 3);
        assert_eq!(records[0].last_seq(), 14);
        assert_eq!(records[2], Record::DropTree { seq: 16, tree: 4 });
    }

    /// Found while writing the `node` fuzz target's log mode, reproduced by it
    /// (`fuzz/regressions/node/log-commit-past-the-last-sequence`): a checksummed commit record
    /// whose sequence numbers run past u64::MAX made `last_seq`, which recovery calls first,
    /// overflow (a panic in debug builds; in release the record wrapped to an old number and was
    /// skipped as already applied).
    #[test]
    fn a_commit_past_the_last_sequence_number_is_corruption() {
        let writes = [(3, LogWriteRef::Delete(b"")), (3, LogWriteRef::Delete(b""))];
        let mut bytes = Vec::new();
        frame_commit(&mut bytes, u64::MAX, writes.into_iter());
        assert!(matches!(read_frame(&bytes), Err(Error::Corruption(_))));
        let mut last = Vec::new();
        frame_commit(&mut last, u64::MAX - 1, writes.into_iter());
        let (record, _) = read_frame(&last).expect("reads").expect("a frame");
        assert_eq!(record.last_seq(), u64::MAX);
    }

    #[test]
    fn torn_and_garbled_tails_end_the_log() {
        let mut bytes = Vec::new();
        sample(&mut bytes);
        let first_len = read_frame(&bytes).expect("read").expect("frame").1;
        for cut in 1..first_len {
            assert_eq!(read_frame(&bytes[..cut]).expect("no error"), None, "cut at {cut}");
        }
        for byte in 0..first_len {
            let mut garbled = bytes.clone();
            garbled[byte] ^= 0x40;
            assert!(!matches!(read_frame(&garbled), Ok(Some(_))), "byte {byte}");
        }
    }
}
