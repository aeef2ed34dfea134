//! The document crate's one error enum.
//!
//! Errors name what went wrong in the document layer's own words; `code()` and `code_name()`
//! map each to the MongoDB error the server reports for it.

use thiserror::Error;
use vocabulary::ErrorCode;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum Error {
    /// A compound index key would need the cross product of two arrays.
    #[error("cannot index parallel arrays [{first}] [{second}]")]
    ParallelArrays { first: String, second: String },
    /// A hashed index field reached an array (MongoDB's assertion 16766).
    #[error("hashed indexes do not currently support array values")]
    HashedArray,
    /// An index specification is not a document of `path: 1 | -1` fields.
    #[error("bad index key pattern: {0}")]
    BadIndexSpec(String),
    /// A field path that MongoDB rejects (empty, empty component, ...).
    #[error("{0}")]
    InvalidPath(String),
    /// Index-key bytes that are not a valid encoding (from disk: corruption, not a panic).
    #[error("corrupt index key: {0}")]
    CorruptKey(String),
    /// A stored document's bytes are not valid BSON.
    #[error("invalid BSON: {0}")]
    InvalidBson(String),
}

/// MongoDB's assertion: a hashed index field holding an array.
const HASHED_ARRAY: i32 = vocabulary::location::HASHED_INDEX_KEY_IS_ARRAY;

impl Error {
    /// The MongoDB error this is (`vocabulary`'s table).
    pub fn error_code(&self) -> ErrorCode {
        match self {
            Error::ParallelArrays { .. } => ErrorCode::CannotIndexParallelArrays,
            // An assertion-site code (`code()`); its table entry is the nearest kind.
            Error::HashedArray => ErrorCode::CannotCreateIndex,
            Error::BadIndexSpec(_) => ErrorCode::CannotCreateIndex,
            Error::InvalidPath(_) => ErrorCode::BadValue,
            Error::CorruptKey(_) | Error::InvalidBson(_) => ErrorCode::InvalidBSON,
        }
    }

    /// MongoDB's numeric error code for this error.
    pub fn code(&self) -> i32 {
        match self {
            Error::HashedArray => HASHED_ARRAY,
            _ => self.error_code().code(),
        }
    }

    /// MongoDB's `codeName` for [`Error::code`].
    pub fn code_name(&self) -> &'static str {
        match self {
            Error::HashedArray => vocabulary::code_name(HASHED_ARRAY),
            _ => self.error_code().name(),
        }
    }
}
