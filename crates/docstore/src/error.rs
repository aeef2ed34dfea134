//! The docstore's one error enum.
//!
//! Errors are in the docstore's own words; [`Error::code`] and [`Error::code_name`] give the
//! MongoDB error the server reports for each (the numbers only: docstore does not depend on
//! `wire`). Errors from the query and document crates keep their own codes.

use bson::Document;
use thiserror::Error;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum Error {
    /// A database or collection name MongoDB would refuse.
    #[error("{0}")]
    InvalidNamespace(String),
    /// `create_collection` or `rename_collection` onto a name that is taken.
    #[error("{0}")]
    NamespaceExists(String),
    /// The collection (or database) does not exist.
    #[error("{0}")]
    NamespaceNotFound(String),
    /// A unique index (or `_id`) already holds the key. Nothing of the document was written.
    #[error("E11000 duplicate key error collection: {namespace} index: {index} dup key: {key_value}")]
    DuplicateKey { namespace: String, index: String, key_pattern: Document, key_value: Document },
    /// dropIndexes or hint named an index that does not exist.
    #[error("{0}")]
    IndexNotFound(String),
    /// An index with this key pattern exists with other options (MongoDB 85).
    #[error("{0}")]
    IndexOptionsConflict(String),
    /// An index with this name exists with another key pattern (MongoDB 86).
    #[error("{0}")]
    IndexKeySpecsConflict(String),
    /// An index specification that cannot be built.
    #[error("{0}")]
    CannotCreateIndex(String),
    /// An `_id` that MongoDB refuses (an array, a regex, undefined).
    #[error("{0}")]
    InvalidIdField(String),
    /// A document past the size limit.
    #[error("{0}")]
    DocumentTooLarge(String),
    /// A document nested deeper than a stored document may be (MongoDB's Overflow, 15).
    #[error("{0}")]
    NestingTooDeep(String),
    /// An argument that is malformed or out of range.
    #[error("{0}")]
    BadValue(String),
    /// An option combination that is not allowed.
    #[error("{0}")]
    InvalidOptions(String),
    /// An operation not allowed in this state (e.g. writing to a system collection).
    #[error("{0}")]
    IllegalOperation(String),
    /// A blocking sort needed more memory than allowed and `allowDiskUse` was off.
    #[error("Sort exceeded memory limit of {limit_bytes} bytes, but did not opt in to external sorting.")]
    SortMemoryExceeded { limit_bytes: usize },
    /// A filter, projection, sort, update or pipeline error (with its own MongoDB code).
    #[error("{0}")]
    Query(#[from] query::error::QueryError),
    /// A field path or index key error from the document layer.
    #[error("{0}")]
    Document(#[from] document::Error),
    /// Stored bytes that are not what the docstore wrote (from disk: corruption, not a panic).
    #[error("corrupt data: {0}")]
    Corruption(String),
    /// The storage engine failed (I/O, stopped after an I/O failure, ...).
    #[error("storage: {0}")]
    Storage(storage::Error),
    /// The data directory is open in another store, in this process or another
    /// (`storage::Error::DirectoryLocked`); nothing in it was read or written.
    #[error("{0}")]
    DirectoryLocked(String),
    /// `close` while other handles still use the store.
    #[error("{0}")]
    Busy(String),
}

impl From<storage::Error> for Error {
    fn from(error: storage::Error) -> Error {
        match error {
            storage::Error::TooLarge(message) => Error::DocumentTooLarge(message),
            storage::Error::Corruption(message) => Error::Corruption(message),
            locked @ storage::Error::DirectoryLocked { .. } => Error::DirectoryLocked(locked.to_string()),
            other => Error::Storage(other),
        }
    }
}

impl Error {
    /// MongoDB's numeric error code.
    pub fn code(&self) -> i32 {
        match self {
            Error::InvalidNamespace(_) => 73,
            Error::NamespaceExists(_) => 48,
            Error::NamespaceNotFound(_) => 26,
            Error::DuplicateKey { .. } => 11000,
            Error::IndexNotFound(_) => 27,
            Error::IndexOptionsConflict(_) => 85,
            Error::IndexKeySpecsConflict(_) => 86,
            Error::CannotCreateIndex(_) => 67,
            Error::InvalidIdField(_) => 53,
            Error::DocumentTooLarge(_) => 10334,
            Error::NestingTooDeep(_) => 15,
            Error::BadValue(_) => 2,
            Error::InvalidOptions(_) => 72,
            Error::IllegalOperation(_) => 20,
            Error::SortMemoryExceeded { .. } => 292,
            Error::Query(error) => error.code(),
            Error::Document(error) => error.code(),
            Error::DirectoryLocked(_) => 98,
            Error::Corruption(_) | Error::Storage(_) | Error::Busy(_) => 1,
        }
    }

    /// MongoDB's `codeName` for [`Error::code`].
    pub fn code_name(&self) -> &'static str {
        match self {
            Error::InvalidNamespace(_) => "InvalidNamespace",
            Error::NamespaceExists(_) => "NamespaceExists",
            Error::NamespaceNotFound(_) => "NamespaceNotFound",
            Error::DuplicateKey { .. } => "DuplicateKey",
            Error::IndexNotFound(_) => "IndexNotFound",
            Error::IndexOptionsConflict(_) => "IndexOptionsConflict",
            Error::IndexKeySpecsConflict(_) => "IndexKeySpecsConflict",
            Error::CannotCreateIndex(_) => "CannotCreateIndex",
            Error::InvalidIdField(_) => "InvalidIdField",
            Error::DocumentTooLarge(_) => "BSONObjectTooLarge",
            Error::NestingTooDeep(_) => "Overflow",
            Error::BadValue(_) => "BadValue",
            Error::InvalidOptions(_) => "InvalidOptions",
            Error::IllegalOperation(_) => "IllegalOperation",
            Error::SortMemoryExceeded { .. } => "QueryExceededMemoryLimitNoDiskUseAllowed",
            Error::Query(error) => error.code_name(),
            Error::Document(error) => error.code_name(),
            Error::DirectoryLocked(_) => "DBPathInUse",
            Error::Corruption(_) | Error::Storage(_) | Error::Busy(_) => "InternalError",
        }
    }

    pub(crate) fn bad_value(message: impl Into<String>) -> Error {
        Error::BadValue(message.into())
    }

    pub(crate) fn corrupt(message: impl Into<String>) -> Error {
        Error::Corruption(message.into())
    }
}
