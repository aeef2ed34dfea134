//! Admission of large messages by memory. A message costs several times its size while it is
//! handled (the frame, its parsed documents, the engine's log record and buffered messages:
//! a 48 MB insert peaked at 229 MB of resident memory with nothing else loaded), so under a
//! memory limit (a cgroup, `ServerConfig::memory_limit_bytes`) a large message is admitted only
//! if that much is free; otherwise it is read and dropped without being buffered, and answered
//! with ExceededMemoryLimit (146) on a connection that stays open. Small messages are always
//! admitted: checking costs a read of /proc.

use wire::{HEADER_LENGTH, Limits, MsgHeader, Request};

use crate::error::CommandError;
use crate::read_buffer::ReadBuffer;

/// Messages below this are admitted without a check.
pub const CHECK_FROM_BYTES: usize = 4 << 20;

/// What a message costs in memory while it is handled, as a multiple of its size.
pub const COST_PER_MESSAGE_BYTE: u64 = 5;

/// Bytes of a message needed to answer it without reading the rest: its header and, for
/// OP_MSG, its flags.
const PREFIX_BYTES: usize = 20;

/// Where the message at the start of a connection's buffer stands. It is checked once, when its
/// first bytes are in; `Unchecked` again once it is out of the buffer.
pub enum Admission {
    Unchecked,
    Admitted,
    /// Refused for memory: the bytes of it still to skip, and its answer.
    Refused {
        remaining: usize,
        request: Request,
        error: CommandError,
    },
}

impl Admission {
    /// Admits or refuses the message at the start of `buffer`: a small one, or one that fits in
    /// memory, is admitted; `Unchecked` while its first bytes are not all in.
    pub fn check(buffer: &[u8], limits: &Limits, memory_limit: Option<u64>) -> Admission {
        let Some(limit) = memory_limit else { return Admission::Admitted };
        let length = match wire::message_length(buffer, limits) {
            Ok(Some(length)) => length,
            Ok(None) => return Admission::Unchecked,
            // decode_frame reports it.
            Err(_) => return Admission::Admitted,
        };
        if length < CHECK_FROM_BYTES {
            return Admission::Admitted;
        }
        let (Some(header), Some(flags)) = (buffer.get(..HEADER_LENGTH), buffer.get(HEADER_LENGTH..PREFIX_BYTES)) else {
            return Admission::Unchecked;
        };
        let Some(in_use) = docstore::resident_bytes().map(|bytes| bytes as u64) else { return Admission::Admitted };
        if in_use.saturating_add(length as u64 * COST_PER_MESSAGE_BYTE) <= limit {
            return Admission::Admitted;
        }
        let Some(request) = MsgHeader::parse(header).ok().and_then(|header| crate::connection::stand_in(header, flags))
        else {
            return Admission::Admitted;
        };
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
        Admission::Refused { remaining: length, request, error }
    }

    /// While refused: drops what `buffer` holds of the message; once all of it is skipped,
    /// returns the request to answer and the error to answer it with (and is `Unchecked`).
    pub fn skip(&mut self, buffer: &mut ReadBuffer) -> Option<(Request, CommandError)> {
        let Admission::Refused { remaining, .. } = self else { return None };
        let skipped = (*remaining).min(buffer.len());
        buffer.consume(skipped);
        *remaining -= skipped;
        if *remaining > 0 {
            return None;
        }
        match std::mem::replace(self, Admission::Unchecked) {
            Admission::Refused { request, error, .. } => Some((request, error)),
            _ => None,
        }
    }
}
