//! The docstore's one error enum.
//!
//! Errors are in the docstore's own words; [`Error::code`] and [`Error::code_name`] give the
//! MongoDB error the server reports for each, named through `vocabulary`'s one table. Errors from the query and document crates keep their own codes.

use bson::Document;
use thiserror::Error;
use vocabulary::ErrorCode;

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
    #[error("{}", vocabulary::duplicate_key_message(namespace, index, key_value))]
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
    /// A field an index specification may not have (MongoDB 197).
    #[error("{0}")]
    InvalidIndexSpecificationOption(String),
    /// An index specification that cannot be built.
    #[error("{0}")]
    CannotCreateIndex(String),
    /// An `_id` that MongoDB refuses (an array, a regex, undefined).
    #[error("{0}")]
    InvalidIdField(String),
    /// A `$`-prefixed field name where MongoDB refuses one (inside `_id`; MongoDB 52).
    #[error("{0}")]
    DollarPrefixedFieldName(String),
    /// A document past the size limit.
    #[error("{0}")]
    DocumentTooLarge(String),
    /// A transaction whose changes do not fit in one oplog entry (MongoDB 257).
    #[error("{0}")]
    TransactionTooLarge(String),
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
    /// The disk is full (`storage::Error::NoSpace`): the write was refused, or failed while
    /// being made durable; reads go on, and writes resume once space is freed.
    #[error("{0}")]
    OutOfDiskSpace(String),
    /// The operation was killed (`killOp`, MongoDB 11601): it stopped at its next check.
    #[error("{0}")]
    Interrupted(String),
    /// The operation ran past its `maxTimeMS` (MongoDB 50).
    #[error("{0}")]
    MaxTimeExpired(String),
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
    /// An argument of the wrong BSON type.
    #[error("{0}")]
    TypeMismatch(String),
    /// An option the operation does not know (MongoDB's IDL error, 40415).
    #[error("{0}")]
    UnknownField(String),
    /// A change stream's resume token that cannot be used.
    #[error("{0}")]
    InvalidResumeToken(String),
    /// A change stream resumed from a point the oplog no longer holds.
    #[error("{0}")]
    ChangeStreamHistoryLost(String),
    /// A change stream that cannot go on (its pipeline changed the resume token).
    #[error("{0}")]
    ChangeStreamFatal(String),
    /// A document the operation requires is missing (a required change stream image).
    #[error("{0}")]
    NoMatchingDocument(String),
    /// A transaction's write met a document another transaction holds, or one a commit changed
    /// after the transaction began.
    #[error("{0}")]
    WriteConflict(String),
    /// A catalog change that an open transaction's writes prevent.
    #[error("{0}")]
    ConflictingOperation(String),
    /// A written document fails its collection's validator (MongoDB 121); `info` is the
    /// `errInfo` drivers show (the failing `_id` and the clauses it failed).
    #[error("{message}")]
    DocumentValidationFailure { message: String, info: Document },
    /// A query feature refused where it is used (a validator's `$text`, MongoDB 224).
    #[error("{0}")]
    QueryFeatureNotAllowed(String),
    /// An operation a multi-document transaction may not contain (MongoDB 263).
    #[error("{0}")]
    NotSupportedInTransaction(String),
    /// A write, an index or a rename aimed at a view (MongoDB 166).
    #[error("{0}")]
    CommandNotSupportedOnView(String),
    /// A view definition with an option or stage views cannot have (MongoDB 167).
    #[error("{0}")]
    OptionNotSupportedOnView(String),
    /// Views defined on views more than 20 deep (MongoDB 149).
    #[error("{0}")]
    ViewDepthLimitExceeded(String),
    /// A view that would read itself through its sources (MongoDB 150).
    #[error("{0}")]
    GraphContainsCycle(String),
    /// A tailable cursor whose position a capped collection (the oplog) trimmed away.
    #[error("{0}")]
    CappedPositionLost(String),
}

impl From<storage::Error> for Error {
    fn from(error: storage::Error) -> Error {
        match error {
            storage::Error::TooLarge(message) => Error::DocumentTooLarge(message),
            storage::Error::Corruption(message) => Error::Corruption(message),
            full @ storage::Error::NoSpace { .. } => Error::OutOfDiskSpace(full.to_string()),
            locked @ storage::Error::DirectoryLocked { .. } => Error::DirectoryLocked(locked.to_string()),
            other => Error::Storage(other),
        }
    }
}

impl Error {
    /// MongoDB's numeric error code.
    pub fn code(&self) -> i32 {
        match self {
            Error::Query(error) => error.code(),
            Error::Document(error) => error.code(),
            named => named.named_code().code(),
        }
    }

    /// A duplicate key's `keyPattern` and `keyValue` (a write's own, or one `$merge` met).
    pub fn duplicate_key(&self) -> Option<(&Document, &Document)> {
        match self {
            Error::DuplicateKey { key_pattern, key_value, .. }
            | Error::Query(query::error::QueryError::DuplicateKey { key_pattern, key_value, .. }) => {
                Some((key_pattern, key_value))
            }
            _ => None,
        }
    }

    /// MongoDB's `codeName` for [`Error::code`].
    pub fn code_name(&self) -> &'static str {
        match self {
            Error::Query(error) => error.code_name(),
            Error::Document(error) => error.code_name(),
            named => named.named_code().name(),
        }
    }

    /// The table's code of this error (the query and document layers' errors carry their own).
    fn named_code(&self) -> ErrorCode {
        match self {
            Error::InvalidNamespace(_) => ErrorCode::InvalidNamespace,
            Error::NamespaceExists(_) => ErrorCode::NamespaceExists,
            Error::NamespaceNotFound(_) => ErrorCode::NamespaceNotFound,
            Error::DuplicateKey { .. } => ErrorCode::DuplicateKey,
            Error::IndexNotFound(_) => ErrorCode::IndexNotFound,
            Error::IndexOptionsConflict(_) => ErrorCode::IndexOptionsConflict,
            Error::IndexKeySpecsConflict(_) => ErrorCode::IndexKeySpecsConflict,
            Error::CannotCreateIndex(_) => ErrorCode::CannotCreateIndex,
            Error::InvalidIndexSpecificationOption(_) => ErrorCode::InvalidIndexSpecificationOption,
            Error::InvalidIdField(_) => ErrorCode::InvalidIdField,
            Error::DollarPrefixedFieldName(_) => ErrorCode::DollarPrefixedFieldName,
            Error::DocumentTooLarge(_) => ErrorCode::BSONObjectTooLarge,
            Error::TransactionTooLarge(_) => ErrorCode::TransactionTooLarge,
            Error::NestingTooDeep(_) => ErrorCode::Overflow,
            Error::BadValue(_) => ErrorCode::BadValue,
            Error::InvalidOptions(_) => ErrorCode::InvalidOptions,
            Error::IllegalOperation(_) => ErrorCode::IllegalOperation,
            Error::SortMemoryExceeded { .. } => ErrorCode::QueryExceededMemoryLimitNoDiskUseAllowed,
            Error::DirectoryLocked(_) => ErrorCode::DBPathInUse,
            Error::TypeMismatch(_) => ErrorCode::TypeMismatch,
            Error::UnknownField(_) => ErrorCode::IDLUnknownField,
            Error::InvalidResumeToken(_) => ErrorCode::InvalidResumeToken,
            Error::ChangeStreamHistoryLost(_) => ErrorCode::ChangeStreamHistoryLost,
            Error::ChangeStreamFatal(_) => ErrorCode::ChangeStreamFatalError,
            Error::NoMatchingDocument(_) => ErrorCode::NoMatchingDocument,
            Error::Interrupted(_) => ErrorCode::Interrupted,
            Error::MaxTimeExpired(_) => ErrorCode::MaxTimeMSExpired,
            Error::WriteConflict(_) => ErrorCode::WriteConflict,
            Error::ConflictingOperation(_) => ErrorCode::ConflictingOperationInProgress,
            Error::CappedPositionLost(_) => ErrorCode::CappedPositionLost,
            Error::CommandNotSupportedOnView(_) => ErrorCode::CommandNotSupportedOnView,
            Error::NotSupportedInTransaction(_) => ErrorCode::OperationNotSupportedInTransaction,
            Error::DocumentValidationFailure { .. } => ErrorCode::DocumentValidationFailure,
            Error::QueryFeatureNotAllowed(_) => ErrorCode::QueryFeatureNotAllowed,
            Error::OptionNotSupportedOnView(_) => ErrorCode::OptionNotSupportedOnView,
            Error::ViewDepthLimitExceeded(_) => ErrorCode::ViewDepthLimitExceeded,
            Error::GraphContainsCycle(_) => ErrorCode::GraphContainsCycle,
            Error::OutOfDiskSpace(_) => ErrorCode::OutOfDiskSpace,
            Error::Corruption(_) => ErrorCode::DataCorruptionDetected,
            Error::Query(_) | Error::Document(_) | Error::Storage(_) | Error::Busy(_) => ErrorCode::InternalError,
        }
    }

    pub(crate) fn bad_value(message: impl Into<String>) -> Error {
        Error::BadValue(message.into())
    }

    pub(crate) fn corrupt(message: impl Into<String>) -> Error {
        Error::Corruption(message.into())
    }
}
