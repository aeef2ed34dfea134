//! A basement's and a buffer's section payloads, as `mod.rs` draws them (a basement's entries
//! are its bytes in memory; a buffer's point messages are one run's bytes, then its range
//! deletes). Decoding treats the bytes as untrusted: every count, length and order is checked.

use super::reader::{Reader, corrupt, put_bytes, put_u32};
use crate::error::Result;
use crate::node::basement::Basement;
use crate::node::buffer::{Buffer, RangeDelete};

pub fn encode_basement(basement: &Basement) -> Vec<u8> {
    let mut out = Vec::with_capacity(basement.encoded().len() + 4);
    put_u32(&mut out, basement.len());
    out.extend_from_slice(basement.encoded());
    out
}

pub fn decode_basement(bytes: &[u8]) -> Result<Basement> {
    let mut r = Reader::new(bytes);
    let count = r.count(17)?;
    Basement::decode(count, bytes.get(4..).unwrap_or(&[]))
}

pub fn encode_buffer(buffer: &Buffer) -> Vec<u8> {
    let mut out = Vec::with_capacity(buffer.size_bytes() + 16);
    let (count, points) = buffer.encoded_points();
    put_u32(&mut out, count);
    out.extend_from_slice(&points);
    put_ranges(&mut out, buffer.ranges());
    out
}

/// A buffer's range deletes, as its section (whole or pieced) holds them.
pub(crate) fn put_ranges(out: &mut Vec<u8>, ranges: &[RangeDelete]) {
    put_u32(out, ranges.len());
    for range in ranges {
        put_bytes(out, &range.start);
        match &range.end {
            None => out.push(0),
            Some(end) => {
                out.push(1);
                put_bytes(out, end);
            }
        }
        out.extend_from_slice(&range.seq.to_le_bytes());
    }
}

pub(crate) fn read_ranges(r: &mut Reader<'_>) -> Result<Vec<RangeDelete>> {
    let range_count = r.count(13)?;
    let mut ranges = Vec::with_capacity(range_count);
    for _ in 0..range_count {
        let start = r.bytes()?.to_vec();
        let end = match r.u8()? {
            0 => None,
            1 => Some(r.bytes()?.to_vec()),
            tag => return Err(corrupt(format!("unknown range end tag {tag}"))),
        };
        ranges.push(RangeDelete { start, end, seq: r.u64()? });
    }
    Ok(ranges)
}

pub fn decode_buffer(mut bytes: Vec<u8>) -> Result<Buffer> {
    // The smallest entry: key length, empty key, message count, one delete (seq and op).
    let key_count = Reader::new(&bytes).count(17)?;
    bytes.drain(..4);
    let (points, rest) = Buffer::decode_points(key_count, bytes).map_err(corrupt)?;
    let mut r = Reader::new(&rest);
    let ranges = read_ranges(&mut r)?;
    r.finish()?;
    Ok(points.with_ranges(ranges))
}
