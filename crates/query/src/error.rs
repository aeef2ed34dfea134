//! The query crate's one error enum.
//!
//! Each variant is a MongoDB error kind and carries the message MongoDB would send; `code()` and
//! `code_name()` give what the server puts in `{ok: 0, code, codeName, errmsg}`. Add a variant
//! for a new kind rather than reusing one with a different code: the code is the variant's.
//! `Coded` is for the rare one-off codes (projection's 31253/31254, ...) not worth a variant.

use thiserror::Error;
pub use vocabulary::ErrorCode;

pub type Result<T, E = QueryError> = std::result::Result<T, E>;

#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum QueryError {
    #[error("{0}")]
    BadValue(String),
    #[error("{0}")]
    FailedToParse(String),
    #[error("{0}")]
    TypeMismatch(String),
    #[error("{0}")]
    PathNotViable(String),
    #[error("{0}")]
    ConflictingUpdateOperators(String),
    #[error("{0}")]
    DollarPrefixedFieldName(String),
    #[error("{0}")]
    EmptyFieldName(String),
    #[error("{0}")]
    ImmutableField(String),
    #[error("{0}")]
    InvalidOptions(String),
    #[error("{0}")]
    Overflow(String),
    #[error("{0}")]
    CannotIndexParallelArrays(String),
    /// A blocking stage (`$group`, `$sort`, `$bucketAuto`) held more than its memory limit
    /// and `allowDiskUse` was off.
    #[error("{0}")]
    MemoryLimitExceeded(String),
    /// A document-layer error (field paths, index keys).
    #[error("{0}")]
    Document(#[from] document::Error),
    /// A write of `$merge`/`$out` met a unique key (the collection's DuplicateKey, with the
    /// fields drivers read from it).
    #[error("{message}")]
    DuplicateKey { message: String, key_pattern: bson::Document, key_value: bson::Document },
    /// A MongoDB error code without a variant of its own.
    #[error("{message}")]
    Coded { code: i32, code_name: &'static str, message: String },
}

impl QueryError {
    /// MongoDB's numeric error code.
    pub fn code(&self) -> i32 {
        match self {
            QueryError::Document(error) => error.code(),
            QueryError::Coded { code, .. } => *code,
            named => named.named_code().map_or(ErrorCode::InternalError.code(), ErrorCode::code),
        }
    }

    /// MongoDB's `codeName` for [`QueryError::code`].
    pub fn code_name(&self) -> &'static str {
        match self {
            QueryError::Document(error) => error.code_name(),
            QueryError::Coded { code_name, .. } => code_name,
            named => named.named_code().map_or(ErrorCode::InternalError.name(), ErrorCode::name),
        }
    }

    /// The table's code of a variant that names one (`None` for the two that carry theirs).
    fn named_code(&self) -> Option<ErrorCode> {
        Some(match self {
            QueryError::BadValue(_) => ErrorCode::BadValue,
            QueryError::FailedToParse(_) => ErrorCode::FailedToParse,
            QueryError::TypeMismatch(_) => ErrorCode::TypeMismatch,
            QueryError::Overflow(_) => ErrorCode::Overflow,
            QueryError::PathNotViable(_) => ErrorCode::PathNotViable,
            QueryError::ConflictingUpdateOperators(_) => ErrorCode::ConflictingUpdateOperators,
            QueryError::DollarPrefixedFieldName(_) => ErrorCode::DollarPrefixedFieldName,
            QueryError::EmptyFieldName(_) => ErrorCode::EmptyFieldName,
            QueryError::ImmutableField(_) => ErrorCode::ImmutableField,
            QueryError::InvalidOptions(_) => ErrorCode::InvalidOptions,
            QueryError::CannotIndexParallelArrays(_) => ErrorCode::CannotIndexParallelArrays,
            QueryError::MemoryLimitExceeded(_) => ErrorCode::QueryExceededMemoryLimitNoDiskUseAllowed,
            QueryError::DuplicateKey { .. } => ErrorCode::DuplicateKey,
            QueryError::Document(_) | QueryError::Coded { .. } => return None,
        })
    }

    pub fn bad_value(message: impl Into<String>) -> QueryError {
        QueryError::BadValue(message.into())
    }

    pub fn failed_to_parse(message: impl Into<String>) -> QueryError {
        QueryError::FailedToParse(message.into())
    }
}

/// The code a [`fail`] names: an entry of MongoDB's table, or an assertion-site code (the
/// `Location<code>` codes MongoDB raises at one place each, named in `vocabulary::location`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Code(i32);

impl From<ErrorCode> for Code {
    fn from(code: ErrorCode) -> Code {
        Code(code.code())
    }
}

impl From<i32> for Code {
    fn from(location: i32) -> Code {
        Code(location)
    }
}

/// `$where`'s refusal: Strata runs no server-side JavaScript (`$function`, `$accumulator` and
/// `mapReduce` say the same).
pub const NO_JAVASCRIPT_WHERE: &str = "$where is not supported: Strata runs no server-side JavaScript (use $expr)";

/// An error with a MongoDB code that has no variant of its own; its `codeName` comes from the
/// table (`Location<code>` for an assertion-site code).
pub fn fail(code: impl Into<Code>, message: impl Into<String>) -> QueryError {
    let Code(code) = code.into();
    QueryError::Coded { code, code_name: vocabulary::code_name(code), message: message.into() }
}

/// MongoDB's errors for a command or stage specification its IDL parser refuses, the field
/// named by its dotted path (`$densify.range.step`).
pub mod idl {
    use super::{ErrorCode, QueryError, fail};

    /// 40415.
    pub fn unknown_field(path: &str) -> QueryError {
        fail(ErrorCode::IDLUnknownField, format!("BSON field '{path}' is an unknown field."))
    }

    /// 40414.
    pub fn missing_field(path: &str) -> QueryError {
        fail(ErrorCode::IDLFailedToParse, format!("BSON field '{path}' is missing but a required field"))
    }

    /// TypeMismatch (14).
    pub fn wrong_type(path: &str, value: &bson::Bson, expected: &str) -> QueryError {
        let found = crate::expr::bson_type_name(value);
        fail(
            ErrorCode::TypeMismatch,
            format!("BSON field '{path}' is the wrong type '{found}', expected type '{expected}'"),
        )
    }
}
