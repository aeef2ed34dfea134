//! `CommandError`: a command that failed, in MongoDB's reply shape `{ok: 0, errmsg, code,
//! codeName}`. Codes come from `wire::ErrorCode`, or verbatim from a lower layer that already
//! speaks MongoDB's numbers (the query crate's errors carry their code and name).

use bson::{Document, doc};
use wire::ErrorCode;

#[derive(Debug, Clone, PartialEq)]
pub struct CommandError {
    pub code: i32,
    pub code_name: String,
    pub message: String,
    /// Fields MongoDB adds to some errors (e.g. `keyPattern`/`keyValue` for 11000).
    pub extra: Box<Document>,
}

impl CommandError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> CommandError {
        CommandError::coded(code.code(), code.name(), message)
    }

    /// An error whose number and name come from another layer's table.
    pub fn coded(code: i32, code_name: &str, message: impl Into<String>) -> CommandError {
        CommandError { code, code_name: code_name.to_owned(), message: message.into(), extra: Box::default() }
    }

    /// An error with one of MongoDB's assertion-site codes (`Location<code>`).
    pub fn location(code: i32, message: impl Into<String>) -> CommandError {
        CommandError::coded(code, wire::code_name(code), message)
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
            "code": self.code,
            "codeName": self.code_name.clone(),
        };
        for (key, value) in self.extra.iter() {
            reply.insert(key.clone(), value.clone());
        }
        reply
    }
}

impl std::fmt::Display for CommandError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.code_name, self.code, self.message)
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
