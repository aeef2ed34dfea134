//! Incremental frame decoding: cut one whole message out of the bytes received so far.
//!
//! The server's connection loop appends what it reads to a buffer and calls `decode_frame`;
//! `Ok(None)` means "read more", `Ok(Some((frame, consumed)))` hands over one message and the
//! number of bytes to drop from the buffer. Nothing here does I/O or blocks.
//!
//! Invariants: the declared length is checked against `Limits::max_message_size_bytes` and the
//! 16-byte minimum as soon as its 4 bytes arrive, before the body is buffered; bytes are copied
//! only once the whole message is present; the length field is never used to index beyond the
//! bytes received. An error means the stream can no longer be split into messages: the caller
//! closes the connection.

use crate::error::WireError;
use crate::header::{HEADER_LENGTH, MsgHeader};
use crate::limits::Limits;

/// One complete message as received: its header and all its bytes (header included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub header: MsgHeader,
    bytes: Vec<u8>,
}

impl Frame {
    /// Build a frame from one whole message; `bytes.len()` must equal the header's length.
    pub fn from_message(bytes: Vec<u8>, limits: &Limits) -> Result<Frame, WireError> {
        match decode_frame(&bytes, limits)? {
            Some((frame, consumed)) if consumed == bytes.len() => Ok(frame),
            Some((_, consumed)) => {
                Err(WireError::TrailingBytes { what: "message", count: bytes.len().saturating_sub(consumed) })
            }
            None => Err(WireError::Truncated { what: "message" }),
        }
    }

    /// The whole message, header included.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The bytes after the header.
    pub fn payload(&self) -> &[u8] {
        self.bytes.get(HEADER_LENGTH..).unwrap_or_default()
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

/// The declared length of the message at the start of `buf`, checked against the limits, or
/// `None` if fewer than 4 bytes have arrived. Lets a reader size its buffer before reading.
pub fn message_length(buf: &[u8], limits: &Limits) -> Result<Option<usize>, WireError> {
    let Some(prefix) = buf.get(..4).and_then(|prefix| <[u8; 4]>::try_from(prefix).ok()) else {
        return Ok(None);
    };
    let declared = i32::from_le_bytes(prefix);
    let length = i64::from(declared);
    if length < HEADER_LENGTH as i64 {
        return Err(WireError::MessageTooShort { length });
    }
    let length = usize::try_from(declared).map_err(|_| WireError::MessageTooShort { length })?;
    if length > limits.max_message_size_bytes {
        return Err(WireError::MessageTooLarge { length: length as i64, max: limits.max_message_size_bytes });
    }
    Ok(Some(length))
}

/// Cut the first whole message out of `buf`.
///
/// Returns `Ok(None)` while the message is incomplete, `Ok(Some((frame, consumed)))` once it is
/// whole (the caller drops `consumed` bytes), and an error for a length outside the limits or
/// an unknown opcode, each detected as soon as the bytes that show it have arrived.
pub fn decode_frame(buf: &[u8], limits: &Limits) -> Result<Option<(Frame, usize)>, WireError> {
    let Some(length) = message_length(buf, limits)? else {
        return Ok(None);
    };
    let Some(header_bytes) = buf.get(..HEADER_LENGTH) else {
        return Ok(None);
    };
    let header = MsgHeader::parse(header_bytes)?;
    let Some(message) = buf.get(..length) else {
        return Ok(None);
    };
    Ok(Some((Frame { header, bytes: message.to_vec() }, length)))
}
