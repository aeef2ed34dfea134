//! `WireError`: what can be wrong with the bytes a peer sent.
//!
//! This is the crate's one error enum, in the wire protocol's own words. It is distinct from the
//! MongoDB command error codes in `codes.rs`: a `WireError` says the *message* is unusable, a
//! command error says a well-formed *command* failed. `WireError::code` maps each variant onto
//! the command error code MongoDB would report for it, so that the server can answer a complete
//! but malformed request with an error reply before it closes the connection.

use crate::compression::Compressor;
use crate::header::OpCode;
use vocabulary::ErrorCode;

/// Everything that can be wrong with a message's bytes. Never a panic: each malformed input
/// that the decoders can meet maps to one of these.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The header declares a length above the configured maximum message size.
    #[error("message length {length} exceeds the maximum message size of {max} bytes")]
    MessageTooLarge { length: i64, max: usize },

    /// The header declares a length smaller than the header itself.
    #[error("message length {length} is shorter than the 16-byte message header")]
    MessageTooShort { length: i64 },

    /// The header's opCode is not a MongoDB opcode at all.
    #[error("unknown opCode {0}")]
    UnknownOpCode(i32),

    /// A recognised legacy opcode (OP_INSERT, OP_GET_MORE, ...) that this server does not serve.
    #[error("unsupported opCode {}; use OP_MSG", .0.name())]
    UnsupportedOpCode(OpCode),

    /// A field runs past the end of its enclosing message, section or document.
    #[error("truncated {what}")]
    Truncated { what: &'static str },

    /// Bytes remain after the last field of a structure that should have ended.
    #[error("{count} unexpected trailing bytes after {what}")]
    TrailingBytes { what: &'static str, count: usize },

    /// A length field that is negative or smaller than the structure it measures.
    #[error("invalid length {length} for {what}")]
    InvalidLength { what: &'static str, length: i64 },

    /// A C string with no terminating NUL, or not UTF-8.
    #[error("invalid cstring in {what}")]
    InvalidCString { what: &'static str },

    /// A BSON document that does not parse (bad lengths, element types, UTF-8, ...).
    #[error("invalid BSON in {what}: {reason}")]
    InvalidBson { what: &'static str, reason: String },

    /// A BSON document larger than the configured limit for its position.
    #[error("BSON document size {size} exceeds the maximum of {max} bytes")]
    DocumentTooLarge { size: usize, max: usize },

    /// A BSON document nested deeper than the configured limit.
    #[error("BSON document exceeds the maximum nesting depth of {max}")]
    NestingTooDeep { max: usize },

    /// OP_MSG flagBits has a required bit (0-15) set that this server does not understand.
    #[error("OP_MSG has unknown required flag bits {bits:#010x}")]
    UnknownRequiredFlags { bits: u32 },

    /// OP_QUERY has a reserved flag bit (0, or 8-31) set.
    #[error("OP_QUERY has reserved flag bits {bits:#010x} set")]
    ReservedQueryFlags { bits: i32 },

    /// OP_MSG has a section kind other than 0 (body) or 1 (document sequence).
    #[error("OP_MSG has unknown section kind {0}")]
    UnknownSectionKind(u8),

    /// OP_MSG has no kind-0 body section.
    #[error("OP_MSG has no body section")]
    MissingBody,

    /// OP_MSG has more than one kind-0 body section.
    #[error("OP_MSG has more than one body section")]
    DuplicateBody,

    /// Two document sequences, or a sequence and a body field, share a name.
    #[error("duplicate field {0:?} in OP_MSG body and document sequences")]
    DuplicateField(String),

    /// The OP_MSG checksum does not match the CRC-32C of the message.
    #[error("OP_MSG checksum mismatch: message says {declared:#010x}, bytes give {computed:#010x}")]
    ChecksumMismatch { declared: u32, computed: u32 },

    /// OP_COMPRESSED names a compressor id this server does not know.
    #[error("unknown compressor id {0}")]
    UnknownCompressor(u8),

    /// OP_COMPRESSED wraps another OP_COMPRESSED.
    #[error("OP_COMPRESSED may not wrap another OP_COMPRESSED")]
    NestedCompression,

    /// OP_COMPRESSED's uncompressedSize does not match what the payload decompresses to.
    #[error("{compressor:?} payload decompressed to {actual} bytes, header declared {declared}")]
    DecompressedSizeMismatch { compressor: Compressor, declared: usize, actual: usize },

    /// The compressed payload is corrupt.
    #[error("{compressor:?} decompression failed: {reason}")]
    Decompression { compressor: Compressor, reason: String },

    /// Compressing a reply failed (should not happen with in-memory buffers).
    #[error("{compressor:?} compression failed: {reason}")]
    Compression { compressor: Compressor, reason: String },
}

impl WireError {
    /// The MongoDB command error code closest to this wire error, for an error reply.
    pub fn code(&self) -> ErrorCode {
        match self {
            WireError::DocumentTooLarge { .. } => ErrorCode::BSONObjectTooLarge,
            WireError::NestingTooDeep { .. } => ErrorCode::Overflow,
            WireError::InvalidBson { .. } | WireError::InvalidCString { .. } => ErrorCode::InvalidBSON,
            WireError::UnknownRequiredFlags { .. } => ErrorCode::IllegalOpMsgFlag,
            WireError::ChecksumMismatch { .. } => ErrorCode::ChecksumMismatch,
            WireError::DuplicateField(_) => ErrorCode::IDLDuplicateField,
            WireError::InvalidLength { .. } => ErrorCode::InvalidLength,
            _ => ErrorCode::ProtocolError,
        }
    }
}

/// Shorthand for a `bson` error met while reading `what`.
pub(crate) fn invalid_bson(what: &'static str, error: impl std::fmt::Display) -> WireError {
    WireError::InvalidBson { what, reason: error.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: the wire errors a client can provoke map onto MongoDB's codes for them.
    #[test]
    fn codes_for_error_replies() {
        let too_large = WireError::DocumentTooLarge { size: 20_000_000, max: 16_777_216 };
        assert_eq!(too_large.code(), ErrorCode::BSONObjectTooLarge);
        assert_eq!(WireError::UnknownRequiredFlags { bits: 4 }.code(), ErrorCode::IllegalOpMsgFlag);
        let mismatch = WireError::ChecksumMismatch { declared: 1, computed: 2 };
        assert_eq!(mismatch.code(), ErrorCode::ChecksumMismatch);
        assert_eq!(WireError::NestingTooDeep { max: 200 }.code(), ErrorCode::Overflow);
        assert_eq!(WireError::MissingBody.code(), ErrorCode::ProtocolError);
        assert_eq!(
            WireError::UnsupportedOpCode(OpCode::Insert).to_string(),
            "unsupported opCode OP_INSERT; use OP_MSG"
        );
    }
}
