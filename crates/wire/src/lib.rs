//! Strata's MongoDB wire protocol, as pure code: no I/O, no async, no knowledge of storage.
//!
//! The server's connection loop feeds received bytes to `decode_frame`, turns each frame into a
//! `Request` with `Request::parse`, runs the command, and frames the answer with
//! `encode_reply`. Every decoder treats its input as hostile: malformed bytes are a
//! `WireError`, never a panic, and no length field is trusted beyond `Limits`.
//!
//! Modules: `header` (MsgHeader, OpCode), `frame` (cutting messages from a byte stream),
//! `op_msg`, `op_query`, `op_reply`, `compression` (OP_COMPRESSED and negotiation), `validate`
//! (BSON validation), `codes` and `replies` (MongoDB error codes and reply documents), `error`.

// Network bytes are input: library code may not panic on them. Tests may.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic))]

pub mod compression;
pub mod error;
pub mod frame;
/// Fuzz entry point (`fuzz/`, and the corpus replay test): not part of the crate's API.
#[doc(hidden)]
pub mod fuzzing;
pub mod header;
pub mod limits;
pub mod op_msg;
pub mod op_query;
pub mod op_reply;
mod reader;
pub mod replies;
pub mod request;
pub mod validate;

pub use compression::{Compressor, SUPPORTED_COMPRESSORS, negotiate};
pub use error::WireError;
pub use frame::{Frame, decode_frame, message_length};
pub use header::{HEADER_LENGTH, MsgHeader, OpCode};
pub use limits::Limits;
pub use op_msg::{DocumentSequence, MsgFlags, OpMsg};
pub use op_query::{OpQuery, QueryFlags};
pub use op_reply::{OpReply, ReplyFlags};
pub use replies::{error_reply, ok_reply};
pub use request::{Message, ReplyStream, Request, encode_reply};
/// MongoDB's error codes and their categories live in `vocabulary`; the wire re-exports them for
/// its replies.
pub use vocabulary::{Code, ErrorCode, Label, categories, code_name, known_code_name, location, type_name};
