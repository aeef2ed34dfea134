//! Admission of large messages by memory. A message costs several times its size while it is
//! handled (the frame, its parsed documents, the engine's log record and buffered messages:
//! a 48 MB insert peaked at 229 MB of resident memory with nothing else loaded), so under a
//! memory limit (a cgroup, `ServerConfig::memory_limit_bytes`) a large message is admitted only
//! if that much is free; otherwise it is read and dropped without being buffered, and answered
//! with ExceededMemoryLimit (146) on a connection that stays open. Small messages are always
//! admitted: checking costs a read of /proc.

use bytes::Buf as _;
use bytes::BytesMut;
use wire::{Limits, MsgHeader, OpCode, Request};

use crate::error::CommandError;

/// Messages below this are admitted without a check.
pub const CHECK_FROM_BYTES: usize = 4 << 20;

/// What a message costs in memory while it is handled, as a multiple of its size.
pub const COST_PER_MESSAGE_BYTE: u64 = 5;

/// Bytes of a message needed to answer it without reading the rest: its header and, for
/// OP_MSG, its flags.
const PREFIX_BYTES: usize = 20;

/// A message refused for memory: the bytes of it still to skip, and its answer.
pub struct Refused {
    remaining: usize,
    request: Request,
    error: CommandError,
}

impl Refused {
    /// If the message at the start of `buffer` is large and does not fit in memory, refuses it.
    pub fn check(buffer: &BytesMut, limits: &Limits, memory_limit: Option<u64>) -> Option<Refused> {
        let limit = memory_limit?;
        let length = wire::message_length(buffer, limits).ok()??;
        if length < CHECK_FROM_BYTES || buffer.len() < PREFIX_BYTES {
            return None;
        }
        let in_use = docstore::resident_bytes()? as u64;
        let cost = length as u64 * COST_PER_MESSAGE_BYTE;
        if in_use.saturating_add(cost) <= limit {
            return None;
        }
        let header = MsgHeader::parse(buffer.get(..16)?).ok()?;
        let request = stand_in(header, buffer.get(16..PREFIX_BYTES)?)?;
        let mib = |bytes: u64| bytes >> 20;
        let error = CommandError::new(
            wire::ErrorCode::ExceededMemoryLimit,
            format!(
                "not enough memory for a message of {} MiB: the server uses {} MiB of its {} MiB limit, and a message needs about {COST_PER_MESSAGE_BYTE} times its size while it is handled; send smaller batches",
                mib(length as u64),
                mib(in_use),
                mib(limit)
            ),
        );
        Some(Refused { remaining: length, request, error })
    }

    /// Drops what `buffer` holds of the refused message; true once all of it is skipped.
    pub fn skip(&mut self, buffer: &mut BytesMut) -> bool {
        let skipped = self.remaining.min(buffer.len());
        buffer.advance(skipped);
        self.remaining -= skipped;
        self.remaining == 0
    }

    /// The request to answer (its header and reply flags) and the error to answer it with.
    pub fn into_answer(self) -> (Request, CommandError) {
        (self.request, self.error)
    }
}

/// An empty request with the client's header and reply-relevant flags, to answer a message that
/// was not (or could not be) parsed.
pub fn stand_in(header: MsgHeader, flags: &[u8]) -> Option<Request> {
    let message = match header.op_code {
        OpCode::Msg => {
            let flags = u32::from_le_bytes(flags.get(..4)?.try_into().ok()?);
            let kept = flags & (wire::MsgFlags::CHECKSUM_PRESENT | wire::MsgFlags::MORE_TO_COME);
            wire::Message::Msg(wire::OpMsg {
                flags: wire::MsgFlags(kept),
                body: bson::RawDocumentBuf::new(),
                sequences: Vec::new(),
            })
        }
        OpCode::Query => wire::Message::Query(wire::OpQuery {
            flags: wire::QueryFlags(0),
            full_collection_name: "admin.$cmd".to_owned(),
            number_to_skip: 0,
            number_to_return: -1,
            query: bson::RawDocumentBuf::new(),
            return_fields_selector: None,
        }),
        _ => return None,
    };
    Some(Request { header, message, compressor: None })
}
