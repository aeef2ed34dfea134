//! The storage engine's one error type.
//!
//! An I/O failure keeps the `std::io::Error` the operating system returned (its `kind()` and
//! raw errno: `ENOSPC`, `EIO`, ...) and says what the engine was doing (`context`); the message
//! is built only when the error is displayed. Callers act on the kind through `io_error`,
//! `io_kind` and `is_no_space`, never by reading the message. Bytes that fail their checksums or
//! their rules are `Corruption`, never an I/O error. `Error` is `Clone` (the log hands the same
//! failure to every commit it refuses), so the `io::Error` is shared behind an `Arc`.

use std::borrow::Cow;
use std::fmt;
use std::io;
use std::sync::Arc;

/// What can go wrong inside the engine, in the engine's own words.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Error {
    /// A transaction or read named a tree that does not exist (or was dropped meanwhile).
    TreeNotFound(String),
    /// `create_tree` with a name that is taken.
    TreeExists(String),
    /// An `insert_if_absent` found the key present; the whole transaction was not applied.
    KeyExists { tree: String, key: Vec<u8> },
    /// Bytes that should describe a node, a block or a log record do not.
    Corruption(String),
    /// A key or value past the engine's bounds.
    TooLarge(String),
    /// An invalid option or argument.
    InvalidArgument(String),
    /// The disk said no: the operation did not happen (or, for a sync, may not be durable).
    /// `context` says what was being done (empty when only the `io::Error` is known).
    Io { context: Cow<'static, str>, source: Arc<io::Error> },
    /// The disk is full (`ENOSPC`, or a quota: `EDQUOT`): the write did not happen, and nothing
    /// was lost. Writes are refused until space is freed; then they resume by themselves.
    NoSpace { context: Cow<'static, str>, source: Arc<io::Error> },
    /// An earlier write, sync or flush failed (`cause`); nothing after it is acknowledged.
    /// Reopen the engine, which recovers to the last durable state.
    Stopped { context: Cow<'static, str>, cause: Arc<Error> },
    /// Another engine (in this process or another) has the directory open: two writers of one
    /// log and data file would lose each other's commits. Nothing was read or written.
    DirectoryLocked { dir: String, holder: String },
    /// The engine found one of its own invariants broken (reported by `verify`).
    Invariant(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Linux's `ENOSPC` and `EDQUOT`: no space, or no quota, for the write.
const NO_SPACE_ERRNOS: [i32; 2] = [28, 122];

impl Error {
    /// An I/O failure while doing `context`: `NoSpace` for a full disk or quota, else `Io`.
    pub fn io(context: impl Into<Cow<'static, str>>, error: io::Error) -> Error {
        let no_space = error.kind() == io::ErrorKind::StorageFull
            || error.kind() == io::ErrorKind::QuotaExceeded
            || error.raw_os_error().is_some_and(|code| NO_SPACE_ERRNOS.contains(&code));
        let (context, source) = (context.into(), Arc::new(error));
        if no_space { Error::NoSpace { context, source } } else { Error::Io { context, source } }
    }

    /// This failure as the reason the engine stopped while doing `context` (a `Stopped` error
    /// stays as it is: the first reason is the one reported).
    pub(crate) fn stopping(self, context: &'static str) -> Error {
        match self {
            stopped @ Error::Stopped { .. } => stopped,
            cause => Error::Stopped { context: Cow::Borrowed(context), cause: Arc::new(cause) },
        }
    }

    /// The operating system's error behind this one, if an I/O failure caused it (directly, or
    /// as the reason the engine stopped): its `kind()` and `raw_os_error()` are as returned.
    pub fn io_error(&self) -> Option<&io::Error> {
        match self {
            Error::Io { source, .. } | Error::NoSpace { source, .. } => Some(source),
            Error::Stopped { cause, .. } => cause.io_error(),
            _ => None,
        }
    }

    /// The kind of the I/O failure behind this error, if any.
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        self.io_error().map(io::Error::kind)
    }

    /// Whether a full disk (or quota) refused a write: the engine runs on, and writes resume
    /// once space is freed. An engine stopped by such a failure is `Stopped`, not this.
    pub fn is_no_space(&self) -> bool {
        matches!(self, Error::NoSpace { .. })
    }

    /// Whether stored bytes failed their checksums or rules.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption(_))
    }
}

impl From<io::Error> for Error {
    fn from(error: io::Error) -> Error {
        Error::io("", error)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::TreeNotFound(name) => write!(f, "tree not found: {name}"),
            Error::TreeExists(name) => write!(f, "tree already exists: {name}"),
            Error::KeyExists { tree, .. } => write!(f, "key already exists in tree {tree}"),
            Error::Corruption(what) => write!(f, "corruption: {what}"),
            Error::TooLarge(what) => write!(f, "too large: {what}"),
            Error::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            Error::Io { context, source } if context.is_empty() => write!(f, "i/o error: {source}"),
            Error::Io { context, source } => write!(f, "i/o error: {context}: {source}"),
            Error::NoSpace { context, source } if context.is_empty() => {
                write!(f, "the disk is full: {source}; writes resume once space is freed")
            }
            Error::NoSpace { context, source } => {
                write!(f, "the disk is full: {source} ({context}); writes resume once space is freed")
            }
            Error::Stopped { context, cause } => {
                write!(f, "the engine stopped and must be reopened: {context}: {cause}")
            }
            Error::DirectoryLocked { dir, holder } => write!(
                f,
                "the data directory {dir} is in use by another Strata process ({holder}); stop it first, or use another directory"
            ),
            Error::Invariant(what) => write!(f, "invariant violated: {what}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } | Error::NoSpace { source, .. } => Some(source.as_ref()),
            Error::Stopped { cause, .. } => Some(cause.as_ref()),
            _ => None,
        }
    }
}

/// Two errors are equal when they say the same; I/O failures compare by context, kind and errno
/// (`io::Error` itself has no equality).
impl PartialEq for Error {
    fn eq(&self, other: &Error) -> bool {
        let same_io = |a: &io::Error, b: &io::Error| a.kind() == b.kind() && a.raw_os_error() == b.raw_os_error();
        match (self, other) {
            (Error::Io { context: c1, source: s1 }, Error::Io { context: c2, source: s2 })
            | (Error::NoSpace { context: c1, source: s1 }, Error::NoSpace { context: c2, source: s2 }) => {
                c1 == c2 && same_io(s1, s2)
            }
            (Error::Stopped { context: c1, cause: a }, Error::Stopped { context: c2, cause: b }) => c1 == c2 && a == b,
            (Error::TreeNotFound(a), Error::TreeNotFound(b))
            | (Error::TreeExists(a), Error::TreeExists(b))
            | (Error::Corruption(a), Error::Corruption(b))
            | (Error::TooLarge(a), Error::TooLarge(b))
            | (Error::InvalidArgument(a), Error::InvalidArgument(b))
            | (Error::Invariant(a), Error::Invariant(b)) => a == b,
            (Error::KeyExists { tree: t1, key: k1 }, Error::KeyExists { tree: t2, key: k2 }) => t1 == t2 && k1 == k2,
            (Error::DirectoryLocked { dir: d1, holder: h1 }, Error::DirectoryLocked { dir: d2, holder: h2 }) => {
                d1 == d2 && h1 == h2
            }
            _ => false,
        }
    }
}

impl Eq for Error {}
