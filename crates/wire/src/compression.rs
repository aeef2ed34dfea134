//! OP_COMPRESSED (opCode 2012): unwrap compressed requests, compress replies, negotiate.
//!
//! ```text
//! MsgHeader  header             16 bytes, opCode 2012; requestID/responseTo as the original
//! int32      originalOpcode     opCode of the wrapped message (never 2012)
//! int32      uncompressedSize   length of the wrapped message *without* its header
//! uint8      compressorId       0 noop, 1 snappy, 2 zlib, 3 zstd
//! bytes      compressedMessage  the wrapped message's bytes after its header, compressed
//! ```
//!
//! Invariants: `uncompressedSize + 16` is checked against `max_message_size_bytes` before any
//! decompression; a decompressor never produces more than `uncompressedSize + 1` bytes (one
//! extra to detect a lie), and the result must be exactly `uncompressedSize` bytes. The
//! unwrapped message is rebuilt with the original header fields, so an OP_MSG checksum inside
//! it verifies as the sender computed it.
//!
//! Negotiation (as mongod): the client lists compressor names in `hello.compression`; the
//! server answers with those it also enables, in the client's order. A reply is compressed with
//! the compressor of the request it answers, except replies to the commands of
//! `is_compression_exempt`, which are never compressed.

use std::io::Read;

use crate::error::WireError;
use crate::frame::Frame;
use crate::header::{HEADER_LENGTH, MsgHeader, OpCode, finish_message, start_message};
use crate::limits::Limits;
use crate::reader::Reader;

/// zlib level MongoDB uses by default (`zlibCompressionLevel`).
const ZLIB_LEVEL: u32 = 6;
/// zstd level; 0 asks the library for its default.
const ZSTD_LEVEL: i32 = 0;
/// Largest zstd window a frame may ask the decoder to allocate: 2^25 = 32 MiB, below the
/// message limit. Compressors below level 20 use much smaller windows.
const ZSTD_WINDOW_LOG_MAX: u32 = 25;

/// A compressor of the MongoDB wire protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compressor {
    Noop,
    Snappy,
    Zlib,
    Zstd,
}

/// The compressors this server enables, in its order of preference.
pub const SUPPORTED_COMPRESSORS: [Compressor; 3] = [Compressor::Snappy, Compressor::Zstd, Compressor::Zlib];

impl Compressor {
    pub fn from_id(id: u8) -> Option<Compressor> {
        Some(match id {
            0 => Compressor::Noop,
            1 => Compressor::Snappy,
            2 => Compressor::Zlib,
            3 => Compressor::Zstd,
            _ => return None,
        })
    }

    pub fn id(self) -> u8 {
        match self {
            Compressor::Noop => 0,
            Compressor::Snappy => 1,
            Compressor::Zlib => 2,
            Compressor::Zstd => 3,
        }
    }

    /// The name used in `hello.compression` and connection strings.
    pub fn name(self) -> &'static str {
        match self {
            Compressor::Noop => "noop",
            Compressor::Snappy => "snappy",
            Compressor::Zlib => "zlib",
            Compressor::Zstd => "zstd",
        }
    }

    pub fn from_name(name: &str) -> Option<Compressor> {
        [Compressor::Noop, Compressor::Snappy, Compressor::Zlib, Compressor::Zstd]
            .into_iter()
            .find(|compressor| compressor.name() == name)
    }
}

/// The compressors to answer `hello.compression` with: those the client offered that the
/// server enables, in the client's order, without repeats. Empty means "do not compress", and
/// the server then leaves `compression` out of its reply.
pub fn negotiate<'a>(client_offer: impl IntoIterator<Item = &'a str>, enabled: &[Compressor]) -> Vec<Compressor> {
    let mut chosen: Vec<Compressor> = Vec::new();
    for compressor in client_offer.into_iter().filter_map(Compressor::from_name) {
        if enabled.contains(&compressor) && !chosen.contains(&compressor) {
            chosen.push(compressor);
        }
    }
    chosen
}

/// Commands whose messages must never be compressed (the compression spec's list: the
/// handshake and authentication, which may carry credentials).
pub fn is_compression_exempt(command_name: &str) -> bool {
    const EXEMPT: [&str; 11] = [
        "hello",
        "ismaster",
        "saslstart",
        "saslcontinue",
        "getnonce",
        "authenticate",
        "createuser",
        "updateuser",
        "copydbsaslstart",
        "copydbgetnonce",
        "copydb",
    ];
    EXEMPT.iter().any(|exempt| exempt.eq_ignore_ascii_case(command_name))
}

/// Unwrap an OP_COMPRESSED frame into the frame it carries, and the compressor it used.
pub fn decompress(frame: &Frame, limits: &Limits) -> Result<(Frame, Compressor), WireError> {
    const WHAT: &str = "OP_COMPRESSED header";
    let mut reader = Reader::new(frame.payload());
    let raw_op_code = reader.i32(WHAT)?;
    let declared = reader.i32(WHAT)?;
    let compressor_id = reader.u8(WHAT)?;
    let compressed = reader.rest();

    let op_code = OpCode::from_i32(raw_op_code).ok_or(WireError::UnknownOpCode(raw_op_code))?;
    if op_code == OpCode::Compressed {
        return Err(WireError::NestedCompression);
    }
    let compressor = Compressor::from_id(compressor_id).ok_or(WireError::UnknownCompressor(compressor_id))?;
    let size = usize::try_from(declared).map_err(|_| WireError::InvalidLength {
        what: "OP_COMPRESSED uncompressedSize",
        length: i64::from(declared),
    })?;
    let total = size.saturating_add(HEADER_LENGTH);
    if total > limits.max_message_size_bytes {
        return Err(WireError::MessageTooLarge { length: total as i64, max: limits.max_message_size_bytes });
    }

    let header = MsgHeader { op_code, ..frame.header };
    let mut message = start_message(header.request_id, header.response_to, op_code);
    decompress_into(compressor, compressed, size, &mut message)?;
    let actual = message.len().saturating_sub(HEADER_LENGTH);
    if actual != size {
        return Err(WireError::DecompressedSizeMismatch { compressor, declared: size, actual });
    }
    let message = finish_message(message)?;
    Ok((Frame::from_message(message, limits)?, compressor))
}

/// Append the decompressed `input` to `output`, stopping after `size + 1` bytes.
fn decompress_into(compressor: Compressor, input: &[u8], size: usize, output: &mut Vec<u8>) -> Result<(), WireError> {
    let failed = |reason: String| WireError::Decompression { compressor, reason };
    let bound = u64::try_from(size).unwrap_or(u64::MAX).saturating_add(1);
    match compressor {
        // Already in memory and bounded by the frame; the size check after catches a lie.
        Compressor::Noop => output.extend_from_slice(input),
        Compressor::Snappy => {
            let claimed = snap::raw::decompress_len(input).map_err(|error| failed(error.to_string()))?;
            if claimed != size {
                return Err(WireError::DecompressedSizeMismatch { compressor, declared: size, actual: claimed });
            }
            let start = output.len();
            output.resize(start.saturating_add(size), 0);
            let target = output.get_mut(start..).unwrap_or_default();
            let written =
                snap::raw::Decoder::new().decompress(input, target).map_err(|error| failed(error.to_string()))?;
            output.truncate(start.saturating_add(written));
        }
        Compressor::Zlib => {
            flate2::read::ZlibDecoder::new(input)
                .take(bound)
                .read_to_end(output)
                .map_err(|error| failed(error.to_string()))?;
        }
        Compressor::Zstd => {
            let mut decoder =
                zstd::stream::read::Decoder::with_buffer(input).map_err(|error| failed(error.to_string()))?;
            decoder.window_log_max(ZSTD_WINDOW_LOG_MAX).map_err(|error| failed(error.to_string()))?;
            decoder.take(bound).read_to_end(output).map_err(|error| failed(error.to_string()))?;
        }
    }
    Ok(())
}

/// Wrap a whole encoded message (header included) in OP_COMPRESSED with `compressor`.
pub fn compress(message: &[u8], compressor: Compressor) -> Result<Vec<u8>, WireError> {
    let header_bytes = message.get(..HEADER_LENGTH).ok_or(WireError::Truncated { what: "message header" })?;
    let header = MsgHeader::parse(header_bytes)?;
    let payload = message.get(HEADER_LENGTH..).unwrap_or_default();
    let uncompressed_size = i32::try_from(payload.len())
        .map_err(|_| WireError::MessageTooLarge { length: payload.len() as i64, max: i32::MAX as usize })?;
    let failed = |reason: String| WireError::Compression { compressor, reason };
    let compressed = match compressor {
        Compressor::Noop => payload.to_vec(),
        Compressor::Snappy => {
            snap::raw::Encoder::new().compress_vec(payload).map_err(|error| failed(error.to_string()))?
        }
        Compressor::Zlib => {
            let mut encoder = flate2::read::ZlibEncoder::new(payload, flate2::Compression::new(ZLIB_LEVEL));
            let mut compressed = Vec::new();
            encoder.read_to_end(&mut compressed).map_err(|error| failed(error.to_string()))?;
            compressed
        }
        Compressor::Zstd => zstd::bulk::compress(payload, ZSTD_LEVEL).map_err(|error| failed(error.to_string()))?,
    };
    // header | originalOpcode | uncompressedSize | compressorId | compressedMessage
    let mut wrapped = start_message(header.request_id, header.response_to, OpCode::Compressed);
    wrapped.extend_from_slice(&header.op_code.as_i32().to_le_bytes());
    wrapped.extend_from_slice(&uncompressed_size.to_le_bytes());
    wrapped.push(compressor.id());
    wrapped.extend_from_slice(&compressed);
    finish_message(wrapped)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: negotiation keeps the client's order, drops unknown and disabled names and repeats.
    #[test]
    fn negotiate_keeps_client_order() {
        let chosen = negotiate(["zlib", "lz4", "snappy", "zlib", "zstd"], &SUPPORTED_COMPRESSORS);
        assert_eq!(chosen, [Compressor::Zlib, Compressor::Snappy, Compressor::Zstd]);
        assert_eq!(negotiate(["zstd", "snappy"], &[Compressor::Snappy]), [Compressor::Snappy]);
        assert!(negotiate(["noop", "lz4"], &SUPPORTED_COMPRESSORS).is_empty());
        assert!(negotiate([], &SUPPORTED_COMPRESSORS).is_empty());
    }

    /// Goal: ids and names map both ways.
    #[test]
    fn ids_and_names_round_trip() {
        for id in 0..=3u8 {
            let compressor = Compressor::from_id(id).expect("known id");
            assert_eq!(compressor.id(), id);
            assert_eq!(Compressor::from_name(compressor.name()), Some(compressor));
        }
        assert_eq!(Compressor::from_id(4), None);
        assert_eq!(Compressor::from_name("lz4"), None);
    }

    /// Goal: handshake and authentication commands are exempt, whatever their case.
    #[test]
    fn exempt_commands() {
        for name in ["hello", "isMaster", "ismaster", "saslStart", "saslContinue", "authenticate"] {
            assert!(is_compression_exempt(name), "{name}");
        }
        for name in ["find", "insert", "ping", "helloWorld"] {
            assert!(!is_compression_exempt(name), "{name}");
        }
    }
}
