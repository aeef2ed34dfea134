//! The query crate's one error enum.
//!
//! Each variant is a MongoDB error kind and carries the message MongoDB would send; `code()` and
//! `code_name()` give what the server puts in `{ok: 0, code, codeName, errmsg}`. Add a variant
//! for a new kind rather than reusing one with a different code: the code is the variant's.
//! `Coded` is for the rare one-off codes (projection's 31253/31254, ...) not worth a variant.

use thiserror::Error;

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
    /// A MongoDB error code without a variant of its own.
    #[error("{message}")]
    Coded { code: i32, code_name: &'static str, message: String },
}

impl QueryError {
    /// MongoDB's numeric error code.
    pub fn code(&self) -> i32 {
        match self {
            QueryError::BadValue(_) => 2,
            QueryError::FailedToParse(_) => 9,
            QueryError::TypeMismatch(_) => 14,
            QueryError::Overflow(_) => 15,
            QueryError::PathNotViable(_) => 28,
            QueryError::ConflictingUpdateOperators(_) => 40,
            QueryError::DollarPrefixedFieldName(_) => 52,
            QueryError::EmptyFieldName(_) => 56,
            QueryError::ImmutableField(_) => 66,
            QueryError::InvalidOptions(_) => 72,
            QueryError::CannotIndexParallelArrays(_) => 171,
            QueryError::MemoryLimitExceeded(_) => 292,
            QueryError::Document(error) => error.code(),
            QueryError::Coded { code, .. } => *code,
        }
    }

    /// MongoDB's `codeName` for [`QueryError::code`].
    pub fn code_name(&self) -> &'static str {
        match self {
            QueryError::BadValue(_) => "BadValue",
            QueryError::FailedToParse(_) => "FailedToParse",
            QueryError::TypeMismatch(_) => "TypeMismatch",
            QueryError::Overflow(_) => "Overflow",
            QueryError::PathNotViable(_) => "PathNotViable",
            QueryError::ConflictingUpdateOperators(_) => "ConflictingUpdateOperators",
            QueryError::DollarPrefixedFieldName(_) => "DollarPrefixedFieldName",
            QueryError::EmptyFieldName(_) => "EmptyFieldName",
            QueryError::ImmutableField(_) => "ImmutableField",
            QueryError::InvalidOptions(_) => "InvalidOptions",
            QueryError::CannotIndexParallelArrays(_) => "CannotIndexParallelArrays",
            QueryError::MemoryLimitExceeded(_) => "QueryExceededMemoryLimitNoDiskUseAllowed",
            QueryError::Document(error) => error.code_name(),
            QueryError::Coded { code_name, .. } => code_name,
        }
    }

    pub fn bad_value(message: impl Into<String>) -> QueryError {
        QueryError::BadValue(message.into())
    }

    pub fn failed_to_parse(message: impl Into<String>) -> QueryError {
        QueryError::FailedToParse(message.into())
    }
}
