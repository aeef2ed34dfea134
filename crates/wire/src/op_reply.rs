//! Legacy OP_REPLY (opCode 1): build the answer to an OP_QUERY command; parse it back for tests
//! and for tools that play the client.
//!
//! ```text
//! MsgHeader  header          16 bytes, opCode 1, responseTo = the OP_QUERY's requestID
//! int32      responseFlags   bit 0 CursorNotFound, 1 QueryFailure, 2 ShardConfigStale,
//!                            3 AwaitCapable; bits 4-31 reserved
//! int64      cursorID        0: no cursor to getMore from
//! int32      startingFrom    position of the first document in the cursor
//! int32      numberReturned  count of documents that follow
//! document*  documents
//! ```

use bson::RawDocumentBuf;

use crate::error::WireError;
use crate::frame::Frame;
use crate::header::{OpCode, finish_message, start_message};
use crate::limits::Limits;
use crate::reader::Reader;
use crate::validate::DocumentLimit;

/// OP_REPLY responseFlags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReplyFlags(pub i32);

impl ReplyFlags {
    pub const CURSOR_NOT_FOUND: i32 = 1 << 0;
    pub const QUERY_FAILURE: i32 = 1 << 1;
    pub const SHARD_CONFIG_STALE: i32 = 1 << 2;
    pub const AWAIT_CAPABLE: i32 = 1 << 3;
}

/// One OP_REPLY message.
#[derive(Debug, Clone, PartialEq)]
pub struct OpReply {
    pub flags: ReplyFlags,
    pub cursor_id: i64,
    pub starting_from: i32,
    pub documents: Vec<RawDocumentBuf>,
}

impl OpReply {
    /// The reply to a command sent as OP_QUERY: one document, no cursor, AwaitCapable set as
    /// MongoDB sets it.
    pub fn command_reply(document: RawDocumentBuf) -> OpReply {
        OpReply {
            flags: ReplyFlags(ReplyFlags::AWAIT_CAPABLE),
            cursor_id: 0,
            starting_from: 0,
            documents: vec![document],
        }
    }

    /// Encode as a whole message answering request `response_to`.
    pub fn encode(&self, request_id: i32, response_to: i32) -> Result<Vec<u8>, WireError> {
        let number_returned = i32::try_from(self.documents.len()).map_err(|_| WireError::InvalidLength {
            what: "OP_REPLY numberReturned",
            length: self.documents.len() as i64,
        })?;
        let mut message = start_message(request_id, response_to, OpCode::Reply);
        message.extend_from_slice(&self.flags.0.to_le_bytes());
        message.extend_from_slice(&self.cursor_id.to_le_bytes());
        message.extend_from_slice(&self.starting_from.to_le_bytes());
        message.extend_from_slice(&number_returned.to_le_bytes());
        for document in &self.documents {
            message.extend_from_slice(document.as_bytes());
        }
        finish_message(message)
    }

    /// Parse an OP_REPLY frame; `numberReturned` must match the documents present.
    pub fn parse(frame: &Frame, limits: &Limits) -> Result<OpReply, WireError> {
        const WHAT: &str = "OP_REPLY";
        let limit =
            DocumentLimit { max_size_bytes: limits.max_command_size_bytes, max_depth: limits.max_nesting_depth };
        let mut reader = Reader::new(frame.payload());
        let flags = ReplyFlags(reader.i32(WHAT)?);
        let cursor_id = reader.i64(WHAT)?;
        let starting_from = reader.i32(WHAT)?;
        let number_returned = reader.i32(WHAT)?;
        let mut documents = Vec::new();
        while !reader.is_empty() {
            documents.push(reader.document(limit, "OP_REPLY document")?.to_owned());
        }
        if usize::try_from(number_returned).ok() != Some(documents.len()) {
            return Err(WireError::InvalidLength {
                what: "OP_REPLY numberReturned",
                length: i64::from(number_returned),
            });
        }
        Ok(OpReply { flags, cursor_id, starting_from, documents })
    }
}
