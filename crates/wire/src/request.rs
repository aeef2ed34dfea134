//! `Request`: one client message, decompressed and parsed, ready for command dispatch; and
//! `encode_reply`, which frames the answer the way the request asks for.
//!
//! Invariant: a `Request` is either an OP_MSG or an OP_QUERY whose bytes all validated; the
//! header is that of the message as the client built it (the one inside OP_COMPRESSED, if any),
//! so `header.request_id` is what the reply's `responseTo` must carry.

use bson::RawDocumentBuf;

use crate::compression::{self, Compressor};
use crate::error::WireError;
use crate::frame::Frame;
use crate::header::{MsgHeader, OpCode};
use crate::limits::Limits;
use crate::op_msg::{MsgFlags, OpMsg, reply_flags};
use crate::op_query::OpQuery;
use crate::op_reply::OpReply;

/// The message kinds a client may send.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    Msg(OpMsg),
    Query(OpQuery),
}

/// One parsed client request.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub header: MsgHeader,
    pub message: Message,
    /// The compressor the client wrapped this request with, if it was OP_COMPRESSED.
    pub compressor: Option<Compressor>,
}

impl Request {
    /// Unwrap OP_COMPRESSED if needed and parse the message inside.
    pub fn parse(frame: &Frame, limits: &Limits) -> Result<Request, WireError> {
        if frame.header.op_code == OpCode::Compressed {
            let (inner, compressor) = compression::decompress(frame, limits)?;
            return parse_uncompressed(&inner, limits, Some(compressor));
        }
        parse_uncompressed(frame, limits, None)
    }

    /// True if the client will not read a reply (OP_MSG `moreToCome`, as with `w: 0`).
    pub fn expects_reply(&self) -> bool {
        match &self.message {
            Message::Msg(message) => !message.flags.more_to_come(),
            Message::Query(_) => true,
        }
    }
}

fn parse_uncompressed(frame: &Frame, limits: &Limits, compressor: Option<Compressor>) -> Result<Request, WireError> {
    let message = match frame.header.op_code {
        OpCode::Msg => Message::Msg(OpMsg::parse(frame, limits)?),
        OpCode::Query => Message::Query(OpQuery::parse(frame, limits)?),
        other => return Err(WireError::UnsupportedOpCode(other)),
    };
    Ok(Request { header: frame.header, message, compressor })
}

/// Whether more replies follow this one without a request (OP_MSG exhaust streams).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyStream {
    /// The last (or only) reply: the client sends the next request.
    Last,
    /// Set `moreToCome`: the server will send another reply to the same request. Honoured only
    /// if the request is an OP_MSG with `exhaustAllowed`; otherwise the reply is `Last`.
    MoreToCome,
}

/// Encode `body` as the reply to `request`: OP_REPLY for OP_QUERY, OP_MSG (with a checksum if
/// the request had one) for OP_MSG, then compressed with the request's compressor unless
/// `command_name` is exempt from compression.
pub fn encode_reply(
    request: &Request,
    request_id: i32,
    command_name: &str,
    body: RawDocumentBuf,
    stream: ReplyStream,
) -> Result<Vec<u8>, WireError> {
    let response_to = request.header.request_id;
    let message = match &request.message {
        Message::Query(_) => OpReply::command_reply(body).encode(request_id, response_to)?,
        Message::Msg(msg) => {
            let mut flags = reply_flags(msg.flags);
            if stream == ReplyStream::MoreToCome && msg.flags.exhaust_allowed() {
                flags.0 |= MsgFlags::MORE_TO_COME;
            }
            OpMsg { flags, body, sequences: Vec::new() }.encode(request_id, response_to)?
        }
    };
    match request.compressor {
        Some(compressor) if !compression::is_compression_exempt(command_name) => {
            compression::compress(&message, compressor)
        }
        _ => Ok(message),
    }
}
