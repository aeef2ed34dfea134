//! `MsgHeader` and `OpCode`: the 16 bytes that start every MongoDB wire message.
//!
//! ```text
//! offset  size  field
//!      0     4  int32 messageLength   total bytes, header included, little-endian
//!      4     4  int32 requestID       chosen by the sender
//!      8     4  int32 responseTo      requestID this message answers (0 in requests)
//!     12     4  int32 opCode          see `OpCode`
//! ```

use crate::error::WireError;
use crate::reader::Reader;

/// Length of the message header in bytes.
pub const HEADER_LENGTH: usize = 16;

/// The opcodes MongoDB has defined. Only `Msg`, `Query` (for commands), `Compressed` and, in
/// replies, `Reply` are served; the others are recognised so that they get a precise error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OpCode {
    Reply,
    Update,
    Insert,
    Reserved,
    Query,
    GetMore,
    Delete,
    KillCursors,
    Compressed,
    Msg,
}

impl OpCode {
    pub fn from_i32(value: i32) -> Option<OpCode> {
        Some(match value {
            1 => OpCode::Reply,
            2001 => OpCode::Update,
            2002 => OpCode::Insert,
            2003 => OpCode::Reserved,
            2004 => OpCode::Query,
            2005 => OpCode::GetMore,
            2006 => OpCode::Delete,
            2007 => OpCode::KillCursors,
            2012 => OpCode::Compressed,
            2013 => OpCode::Msg,
            _ => return None,
        })
    }

    /// The name the protocol documentation uses, e.g. `OP_MSG`.
    pub fn name(self) -> &'static str {
        match self {
            OpCode::Reply => "OP_REPLY",
            OpCode::Update => "OP_UPDATE",
            OpCode::Insert => "OP_INSERT",
            OpCode::Reserved => "OP_RESERVED",
            OpCode::Query => "OP_QUERY",
            OpCode::GetMore => "OP_GET_MORE",
            OpCode::Delete => "OP_DELETE",
            OpCode::KillCursors => "OP_KILL_CURSORS",
            OpCode::Compressed => "OP_COMPRESSED",
            OpCode::Msg => "OP_MSG",
        }
    }

    pub fn as_i32(self) -> i32 {
        match self {
            OpCode::Reply => 1,
            OpCode::Update => 2001,
            OpCode::Insert => 2002,
            OpCode::Reserved => 2003,
            OpCode::Query => 2004,
            OpCode::GetMore => 2005,
            OpCode::Delete => 2006,
            OpCode::KillCursors => 2007,
            OpCode::Compressed => 2012,
            OpCode::Msg => 2013,
        }
    }
}

/// The standard message header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MsgHeader {
    /// Total message length in bytes, header included; always in `16..=i32::MAX`.
    pub message_length: i32,
    pub request_id: i32,
    pub response_to: i32,
    pub op_code: OpCode,
}

impl MsgHeader {
    /// Read a header from the first 16 bytes of `bytes`. The length is returned as read; the
    /// frame decoder checks it against the limits.
    pub fn parse(bytes: &[u8]) -> Result<MsgHeader, WireError> {
        let mut reader = Reader::new(bytes);
        let message_length = reader.i32("message header")?;
        let request_id = reader.i32("message header")?;
        let response_to = reader.i32("message header")?;
        let raw_op_code = reader.i32("message header")?;
        let op_code = OpCode::from_i32(raw_op_code).ok_or(WireError::UnknownOpCode(raw_op_code))?;
        Ok(MsgHeader { message_length, request_id, response_to, op_code })
    }

    /// The 16 header bytes.
    pub fn to_bytes(&self) -> [u8; HEADER_LENGTH] {
        let mut bytes = [0u8; HEADER_LENGTH];
        let fields = [self.message_length, self.request_id, self.response_to, self.op_code.as_i32()];
        for (chunk, field) in bytes.chunks_exact_mut(4).zip(fields) {
            chunk.copy_from_slice(&field.to_le_bytes());
        }
        bytes
    }
}

/// Start a message: a header with a zero length placeholder, patched by `finish_message`.
pub(crate) fn start_message(request_id: i32, response_to: i32, op_code: OpCode) -> Vec<u8> {
    let header = MsgHeader { message_length: 0, request_id, response_to, op_code };
    header.to_bytes().to_vec()
}

/// Write the final length into a message begun with `start_message`.
pub(crate) fn finish_message(mut message: Vec<u8>) -> Result<Vec<u8>, WireError> {
    let length = i32::try_from(message.len())
        .map_err(|_| WireError::MessageTooLarge { length: message.len() as i64, max: i32::MAX as usize })?;
    if let Some(prefix) = message.get_mut(..4) {
        prefix.copy_from_slice(&length.to_le_bytes());
    }
    Ok(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: a header encodes little-endian and parses back.
    #[test]
    fn header_round_trips() {
        let header = MsgHeader { message_length: 0x0102_0304, request_id: -7, response_to: 9, op_code: OpCode::Msg };
        let bytes = header.to_bytes();
        assert_eq!(&bytes[..4], &[4, 3, 2, 1]);
        assert_eq!(&bytes[12..], &2013i32.to_le_bytes());
        assert_eq!(MsgHeader::parse(&bytes), Ok(header));
    }

    /// Goal: every opcode maps both ways; others are unknown.
    #[test]
    fn op_codes_round_trip() {
        for value in [1, 2001, 2002, 2003, 2004, 2005, 2006, 2007, 2012, 2013] {
            assert_eq!(OpCode::from_i32(value).map(OpCode::as_i32), Some(value));
        }
        for value in [0, 2, 2000, 2008, 2011, 2014, -1] {
            assert_eq!(OpCode::from_i32(value), None);
        }
    }

    /// Goal: a short header is truncated, not a panic.
    #[test]
    fn short_header_is_truncated() {
        assert!(matches!(MsgHeader::parse(&[0; 15]), Err(WireError::Truncated { .. })));
    }
}
