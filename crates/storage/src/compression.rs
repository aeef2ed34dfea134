//! Section compression: each basement and each piece of a buffer is compressed on its own, with
//! a method byte in front, so a block records how to read itself whatever the engine's current
//! setting.
//!
//! ```text
//! compressed section := method:u8 (0 none | 1 lz4 | 2 zstd) raw_len:u32 payload
//! ```

use crate::error::{Error, Result};

/// The largest section the engine ever writes: a whole node of the largest size plus slack.
/// Decompression refuses to produce more, whatever a corrupt length claims.
pub const MAX_SECTION_BYTES: usize = 256 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Compression {
    None,
    #[default]
    Lz4,
    /// zstd at the given level (1 = fast; 3 = its default).
    Zstd(i32),
}

impl Compression {
    /// zstd's own default level.
    pub const ZSTD_DEFAULT_LEVEL: i32 = 3;

    /// Reads `none`, `lz4`, `zstd` or `zstd:LEVEL` (1-22; negative levels are zstd's fast ones,
    /// down to -7).
    pub fn parse(text: &str) -> Option<Compression> {
        match text.trim().to_ascii_lowercase().as_str() {
            "none" => Some(Compression::None),
            "lz4" => Some(Compression::Lz4),
            "zstd" => Some(Compression::Zstd(Compression::ZSTD_DEFAULT_LEVEL)),
            other => {
                let level: i32 = other.strip_prefix("zstd:")?.parse().ok()?;
                (-7..=22).contains(&level).then_some(Compression::Zstd(level))
            }
        }
    }
}

impl std::fmt::Display for Compression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Compression::None => f.write_str("none"),
            Compression::Lz4 => f.write_str("lz4"),
            Compression::Zstd(level) => write!(f, "zstd:{level}"),
        }
    }
}

const METHOD_NONE: u8 = 0;
const METHOD_LZ4: u8 = 1;
const METHOD_ZSTD: u8 = 2;

pub fn compress(method: Compression, raw: &[u8], out: &mut Vec<u8>) {
    let raw_len = u32::try_from(raw.len()).unwrap_or(u32::MAX);
    let start = out.len();
    out.push(METHOD_NONE);
    out.extend_from_slice(&raw_len.to_le_bytes());
    let body = out.len();
    let tag = match method {
        Compression::None => None,
        Compression::Lz4 => lz4_into(raw, out).then_some(METHOD_LZ4),
        Compression::Zstd(level) => zstd_into(raw, level, out).then_some(METHOD_ZSTD),
    };
    match tag {
        Some(tag) => {
            if let Some(byte) = out.get_mut(start) {
                *byte = tag;
            }
        }
        // Keep the raw bytes when compression does not pay.
        None => {
            out.truncate(body);
            out.extend_from_slice(raw);
        }
    }
}

thread_local! {
    /// The LZ4 hash table, kept by each thread that compresses: `lz4_flex::block::compress`
    /// allocated a zeroed 16 KiB table and an output buffer per section: two large allocations
    /// per basement the evictor writes.
    static LZ4_TABLE: std::cell::RefCell<lz4_flex::block::CompressTable> =
        std::cell::RefCell::new(lz4_flex::block::CompressTable::large());

    /// zstd's contexts, kept the same way (with the level the compressor was made for):
    /// `zstd::bulk::compress_to_buffer` and `decompress` create and free a context per call,
    /// which for a 16 KiB basement cost more than the compression itself.
    static ZSTD_COMPRESSOR: std::cell::RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
        const { std::cell::RefCell::new(None) };
    static ZSTD_DECOMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// Decompresses a zstd payload into `space`; the length it wrote.
fn zstd_decompress_into(payload: &[u8], space: &mut [u8]) -> std::io::Result<usize> {
    ZSTD_DECOMPRESSOR.with(|cell| {
        let mut cell = cell.borrow_mut();
        if cell.is_none() {
            *cell = Some(zstd::bulk::Decompressor::new()?);
        }
        match cell.as_mut() {
            Some(decompressor) => decompressor.decompress_to_buffer(payload, space),
            None => zstd::bulk::decompress_to_buffer(payload, space),
        }
    })
}

/// Appends `raw` LZ4-compressed straight into `out`; false if it did not come out smaller
/// (what was appended is then the caller's to cut).
fn lz4_into(raw: &[u8], out: &mut Vec<u8>) -> bool {
    let body = out.len();
    out.resize(body + lz4_flex::block::get_maximum_output_size(raw.len()), 0);
    let written = out.get_mut(body..).and_then(|space| {
        LZ4_TABLE.with(|table| lz4_flex::block::compress_into_with_table(raw, space, &mut table.borrow_mut()).ok())
    });
    match written {
        Some(len) if len < raw.len() => {
            out.truncate(body + len);
            true
        }
        _ => false,
    }
}

/// Appends `raw` zstd-compressed at `level` straight into `out`; false if it did not come out
/// smaller (it is given no more room than `raw`'s length, so a larger result fails there).
/// What was appended is then the caller's to cut.
fn zstd_into(raw: &[u8], level: i32, out: &mut Vec<u8>) -> bool {
    let body = out.len();
    out.resize(body + raw.len(), 0);
    let written = out.get_mut(body..).and_then(|space| {
        ZSTD_COMPRESSOR.with(|cell| {
            let mut cell = cell.borrow_mut();
            if cell.as_ref().is_none_or(|(kept, _)| *kept != level) {
                *cell = zstd::bulk::Compressor::new(level).ok().map(|compressor| (level, compressor));
            }
            let (_, compressor) = cell.as_mut()?;
            compressor.compress_to_buffer(raw, space).ok()
        })
    });
    match written {
        Some(len) if len < raw.len() => {
            out.truncate(body + len);
            true
        }
        _ => false,
    }
}

pub fn decompress(section: &[u8]) -> Result<Vec<u8>> {
    let mut raw = crate::io::buffer_to_overwrite(raw_len(section)?);
    decompress_into(section, &mut raw)?;
    Ok(raw)
}

/// The length `section` decompresses to, as it records it (checked against the largest section).
pub fn raw_len(section: &[u8]) -> Result<usize> {
    parse(section).map(|(_, raw_len, _)| raw_len)
}

/// Decompresses `section` into `space`, which must be exactly its raw length (a buffer's pieces,
/// read into one run allocated once for all of them).
pub fn decompress_into(section: &[u8], space: &mut [u8]) -> Result<()> {
    let (method, raw_len, payload) = parse(section)?;
    if space.len() != raw_len {
        return Err(corrupt("length differs from the recorded one"));
    }
    let written = match method {
        METHOD_NONE => {
            let raw = Some(payload).filter(|payload| payload.len() == raw_len);
            space.copy_from_slice(raw.ok_or_else(|| corrupt("length differs from the recorded one"))?);
            raw_len
        }
        METHOD_LZ4 => lz4_flex::block::decompress_into(payload, space).map_err(|e| corrupt(&e.to_string()))?,
        METHOD_ZSTD => zstd_decompress_into(payload, space).map_err(|e| corrupt(&e.to_string()))?,
        other => return Err(corrupt(&format!("unknown method {other}"))),
    };
    if written != raw_len {
        return Err(corrupt("length differs from the recorded one"));
    }
    Ok(())
}

/// A compressed section's method, raw length (checked against the largest section) and payload.
fn parse(section: &[u8]) -> Result<(u8, usize, &[u8])> {
    let (&method, rest) = section.split_first().ok_or_else(|| corrupt("empty"))?;
    let (len_bytes, payload) = rest.split_at_checked(4).ok_or_else(|| corrupt("truncated length"))?;
    let raw_len = u32::from_le_bytes(len_bytes.try_into().map_err(|_| corrupt("length"))?) as usize;
    if raw_len > MAX_SECTION_BYTES {
        return Err(corrupt("claims more than the largest section"));
    }
    Ok((method, raw_len, payload))
}

fn corrupt(what: &str) -> Error {
    Error::Corruption(format!("compressed section: {what}"))
}

#[cfg(test)]
mod tests {
    //! Goal: every method round-trips, and corrupt sections are errors, never panics.
    use super::*;

    #[test]
    fn every_method_round_trips() {
        let raw: Vec<u8> = (0..10_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        for method in [Compression::None, Compression::Lz4, Compression::Zstd(1), Compression::Zstd(3)] {
            let mut out = Vec::new();
            compress(method, &raw, &mut out);
            assert_eq!(decompress(&out).expect("round trip"), raw, "{method:?}");
            assert_eq!(raw_len(&out), Ok(raw.len()));
            let mut space = vec![0; raw.len()];
            decompress_into(&out, &mut space).expect("into place");
            assert_eq!(space, raw, "{method:?}");
            assert!(decompress_into(&out, &mut space[1..]).is_err(), "{method:?}: space of another length");
            if method != Compression::None {
                assert!(out.len() < raw.len() / 2, "{method:?} compresses repetitive data");
            }
        }
    }

    #[test]
    fn incompressible_bytes_are_kept_raw_after_what_out_held() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let raw: Vec<u8> = (0..10_000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        for method in [Compression::None, Compression::Lz4, Compression::Zstd(3)] {
            let mut out = b"before".to_vec();
            compress(method, &raw, &mut out);
            assert_eq!(out.get(..6), Some(&b"before"[..]), "{method:?}");
            assert_eq!(out.get(6), Some(&METHOD_NONE), "{method:?} keeps random bytes raw");
            assert_eq!(decompress(&out[6..]).expect("round trip"), raw, "{method:?}");
        }
    }

    #[test]
    fn names_parse_and_print_back() {
        for text in ["none", "lz4", "zstd:3", "zstd:19", "zstd:-5"] {
            assert_eq!(Compression::parse(text).map(|c| c.to_string()).as_deref(), Some(text));
        }
        assert_eq!(Compression::parse("ZSTD"), Some(Compression::Zstd(3)));
        for bad in ["", "snappy", "zstd:", "zstd:23", "zstd:x", "lz4:1"] {
            assert_eq!(Compression::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn corrupt_sections_are_errors() {
        let mut out = Vec::new();
        compress(Compression::Lz4, &[7u8; 4096], &mut out);
        for len in 0..out.len() {
            let _ = decompress(&out[..len]);
        }
        let mut lying = out.clone();
        lying[1..5].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decompress(&lying).is_err());
        assert!(decompress_into(&lying, &mut []).is_err());
        let mut flipped = out;
        let last = flipped.len() - 1;
        flipped[last] ^= 0xff;
        let _ = decompress(&flipped);
    }
}
