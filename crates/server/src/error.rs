//! `CommandError`: a command that failed, in MongoDB's reply shape `{ok: 0, errmsg, code,
//! codeName}`. The code is a `wire::Code`: from `wire::ErrorCode`, an assertion-site code, or
//! verbatim from a lower layer that already speaks MongoDB's numbers (the query crate's errors
//! carry their code); its `codeName` is derived from the number, never carried beside it.

use bson::{Document, doc};
use wire::{Code, ErrorCode};

#[derive(Debug, Clone, PartialEq)]
pub struct CommandError {
    pub code: Code,
    pub message: String,
    /// Fields MongoDB adds to some errors (e.g. `keyPattern`/`keyValue` for 11000).
    pub extra: Box<Document>,
}

impl CommandError {
    pub fn new(code: impl Into<Code>, message: impl Into<String>) -> CommandError {
        CommandError { code: code.into(), message: message.into(), extra: Box::default() }
    }

    /// An error with one of MongoDB's assertion-site codes (`wire::location`), or a number
    /// another layer (or a client's fail point) gives.
    pub fn location(code: i32, message: impl Into<String>) -> CommandError {
        CommandError::new(Code::new(code), message)
    }

    pub fn bad_value(message: impl Into<String>) -> CommandError {
        CommandError::new(ErrorCode::BadValue, message)
    }

    pub fn type_mismatch(message: impl Into<String>) -> CommandError {
        CommandError::new(ErrorCode::TypeMismatch, message)
    }

    pub fn internal(message: impl Into<String>) -> CommandError {
        CommandError::new(ErrorCode::InternalError, message)
    }

    /// `{ok: 0.0, errmsg, code, codeName, ...extra}`.
    pub fn to_document(&self) -> Document {
        let mut reply = doc! {
            "ok": 0.0,
            "errmsg": self.message.clone(),
            "code": self.code.number(),
            "codeName": self.code.name(),
        };
        for (key, value) in self.extra.iter() {
            reply.insert(key.clone(), value.clone());
        }
        reply
    }
}

impl std::fmt::Display for CommandError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for CommandError {}

impl From<bson::error::Error> for CommandError {
    fn from(error: bson::error::Error) -> CommandError {
        CommandError::new(ErrorCode::InvalidBSON, error.to_string())
    }
}

impl From<wire::WireError> for CommandError {
    fn from(error: wire::WireError) -> CommandError {
        CommandError::new(error.code(), error.to_string())
    }
}
