//! `Limits`: the bounds every decoder enforces on untrusted bytes.
//!
//! Invariant: no decoder allocates more than `max_message_size_bytes` for one message, whatever a
//! length field claims; a length is checked against these bounds *before* anything is buffered
//! or decompressed.

/// MongoDB's maximum message size, reported as `maxMessageSizeBytes` in `hello`.
pub const MAX_MESSAGE_SIZE_BYTES: usize = 48_000_000;

/// MongoDB's maximum user document size, reported as `maxBsonObjectSize` in `hello`.
pub const MAX_DOCUMENT_SIZE_BYTES: usize = 16 * 1024 * 1024;

/// Room a command body gets above `MAX_DOCUMENT_SIZE_BYTES`, so that a command carrying one
/// maximum-size document in its body still fits (MongoDB's `BSONObjMaxInternalSize`).
pub const COMMAND_OVERHEAD_BYTES: usize = 16 * 1024;

/// Nesting limit for whole wire documents (MongoDB's `maxBSONDepth` default). A command envelope
/// adds levels above the user's document, so this is looser than the 100 levels a stored
/// document may have (`document::stored::MAX_DEPTH`, enforced by the docstore).
pub const MAX_WIRE_NESTING_DEPTH: usize = 200;

/// Bounds for one connection's decoders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest whole message (header included), compressed or after decompression.
    pub max_message_size_bytes: usize,
    /// Largest document in an OP_MSG document sequence or an OP_QUERY (BSONObjectTooLarge).
    pub max_document_size_bytes: usize,
    /// Largest OP_MSG body document.
    pub max_command_size_bytes: usize,
    /// Deepest nesting of documents and arrays in any document; the top level is depth 1.
    pub max_nesting_depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_message_size_bytes: MAX_MESSAGE_SIZE_BYTES,
            max_document_size_bytes: MAX_DOCUMENT_SIZE_BYTES,
            max_command_size_bytes: MAX_DOCUMENT_SIZE_BYTES + COMMAND_OVERHEAD_BYTES,
            max_nesting_depth: MAX_WIRE_NESTING_DEPTH,
        }
    }
}
