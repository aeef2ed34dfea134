//! The storage engine's one error type.

use thiserror::Error;

/// What can go wrong inside the engine, in the engine's own words.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A transaction or read named a tree that does not exist (or was dropped meanwhile).
    #[error("tree not found: {0}")]
    TreeNotFound(String),
    /// `create_tree` with a name that is taken.
    #[error("tree already exists: {0}")]
    TreeExists(String),
    /// An `insert_if_absent` found the key present; the whole transaction was not applied.
    #[error("key already exists in tree {tree}")]
    KeyExists { tree: String, key: Vec<u8> },
    /// Bytes that should describe a node, a block or a log record do not.
    #[error("corruption: {0}")]
    Corruption(String),
    /// A key or value past the engine's bounds.
    #[error("too large: {0}")]
    TooLarge(String),
    /// An invalid option or argument.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The disk said no: the operation did not happen (or, for a sync, may not be durable).
    #[error("i/o error: {0}")]
    Io(String),
    /// The disk is full (`ENOSPC`, or a quota: `EDQUOT`): the write did not happen, and nothing
    /// was lost. Writes are refused until space is freed; then they resume by themselves.
    #[error("the disk is full: {0}; writes resume once space is freed")]
    NoSpace(String),
    /// An earlier write or sync failed; nothing after it is acknowledged. Reopen the engine,
    /// which recovers to the last durable state.
    #[error("the engine stopped after an i/o failure and must be reopened: {0}")]
    Stopped(String),
    /// Another engine (in this process or another) has the directory open: two writers of one
    /// log and data file would lose each other's commits. Nothing was read or written.
    #[error(
        "the data directory {dir} is in use by another Strata process ({holder}); stop it first, or use another directory"
    )]
    DirectoryLocked { dir: String, holder: String },
    /// The engine found one of its own invariants broken (reported by `verify`).
    #[error("invariant violated: {0}")]
    Invariant(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Linux's `ENOSPC` and `EDQUOT`: no space, or no quota, for the write.
const NO_SPACE_ERRNOS: [i32; 2] = [28, 122];

impl From<std::io::Error> for Error {
    fn from(error: std::io::Error) -> Error {
        let no_space = error.kind() == std::io::ErrorKind::StorageFull
            || error.kind() == std::io::ErrorKind::QuotaExceeded
            || error.raw_os_error().is_some_and(|code| NO_SPACE_ERRNOS.contains(&code));
        if no_space { Error::NoSpace(error.to_string()) } else { Error::Io(error.to_string()) }
    }
}
