//! MongoDB's error categories as data: which codes a driver may retry, resume after, or treat as
//! "not primary" or "node is recovering", and the error labels a reply carries for them.
//!
//! Each category is the list its specification gives (the `reference`), not a guess from names:
//! - retryable writes and reads: `retryable-writes/retryable-writes.md` ("Retryable Error") and
//!   `retryable-reads/retryable-reads.md` (the same codes and ReadConcernMajorityNotAvailableYet);
//! - not primary and node recovering: `server-discovery-and-monitoring.md` ("not writable
//!   primary" and "node is recovering" errors); shutdown: the codes of the `ShutdownError`
//!   category of MongoDB's `error_codes.yml` that a client sees;
//! - resumable change streams: `change-streams.md` ("Resumable Error", the list drivers used
//!   before servers sent `ResumableChangeStreamError`); non-resumable: `error_codes.yml`'s
//!   `NonResumableChangeStreamError` category;
//! - transactions: the codes mongod's `isTransientTransactionError` names (the transactions
//!   specification leaves the choice to the server and reads only the labels).
//!
//! The label rules (`transaction_label`, `change_stream_label`) are the server's, as mongod
//! applies them; they live here beside the lists so that both read, and are tested, together.

use crate::ErrorCode;

/// An error label (`errorLabels` in a reply): what a driver may do after the error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Label {
    /// A retryable write may be retried once.
    RetryableWriteError,
    /// The whole transaction may be run again.
    TransientTransactionError,
    /// A `commitTransaction` whose outcome is unknown may be sent again.
    UnknownTransactionCommitResult,
    /// A change stream may resume after the error.
    ResumableChangeStreamError,
    /// A change stream must not resume.
    NonResumableChangeStreamError,
}

impl Label {
    /// The label as a reply spells it.
    pub fn name(self) -> &'static str {
        match self {
            Label::RetryableWriteError => "RetryableWriteError",
            Label::TransientTransactionError => "TransientTransactionError",
            Label::UnknownTransactionCommitResult => "UnknownTransactionCommitResult",
            Label::ResumableChangeStreamError => "ResumableChangeStreamError",
            Label::NonResumableChangeStreamError => "NonResumableChangeStreamError",
        }
    }
}

/// A set of codes a specification names together, and the label (if any) it gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Category {
    pub name: &'static str,
    pub codes: &'static [ErrorCode],
    pub label: Option<Label>,
    /// Where MongoDB defines the list.
    pub reference: &'static str,
}

impl Category {
    /// Whether `code` (a reply's number) is in the category.
    pub fn contains(&self, code: i32) -> bool {
        self.codes.iter().any(|member| member.code() == code)
    }
}

use ErrorCode as E;

/// Errors after which a driver retries a retryable write (the reply gets `RetryableWriteError`
/// when the write carried a `txnNumber`; also for a `writeConcernError` with such a code).
pub const RETRYABLE_WRITE: Category = Category {
    name: "retryable write",
    codes: &[
        E::HostUnreachable,
        E::HostNotFound,
        E::NetworkTimeout,
        E::ShutdownInProgress,
        E::PrimarySteppedDown,
        E::ExceededTimeLimit,
        E::SocketException,
        E::NotWritablePrimary,
        E::InterruptedAtShutdown,
        E::InterruptedDueToReplStateChange,
        E::NotPrimaryNoSecondaryOk,
        E::NotPrimaryOrSecondary,
    ],
    label: Some(Label::RetryableWriteError),
    reference: "specifications: retryable-writes, Terms: Retryable Error",
};

/// Errors after which a driver retries a read (no label: a driver decides by code).
pub const RETRYABLE_READ: Category = Category {
    name: "retryable read",
    codes: &[
        E::HostUnreachable,
        E::HostNotFound,
        E::NetworkTimeout,
        E::ShutdownInProgress,
        E::ReadConcernMajorityNotAvailableYet,
        E::PrimarySteppedDown,
        E::ExceededTimeLimit,
        E::SocketException,
        E::NotWritablePrimary,
        E::InterruptedAtShutdown,
        E::InterruptedDueToReplStateChange,
        E::NotPrimaryNoSecondaryOk,
        E::NotPrimaryOrSecondary,
    ],
    label: None,
    reference: "specifications: retryable-reads, Retryable Error",
};

/// "Not writable primary" errors: the server is not (or no longer) the primary; a driver marks
/// it Unknown and selects a server again.
pub const NOT_PRIMARY: Category = Category {
    name: "not primary",
    codes: &[E::NotWritablePrimary, E::LegacyNotPrimary, E::NotPrimaryNoSecondaryOk],
    label: None,
    reference: "specifications: server-discovery-and-monitoring, not writable primary and node is recovering",
};

/// "Node is recovering" errors: the server is shutting down, stepping down or not yet readable.
pub const NODE_RECOVERING: Category = Category {
    name: "node recovering",
    codes: &[
        E::ShutdownInProgress,
        E::PrimarySteppedDown,
        E::InterruptedAtShutdown,
        E::InterruptedDueToReplStateChange,
        E::NotPrimaryOrSecondary,
    ],
    label: None,
    reference: "specifications: server-discovery-and-monitoring, not writable primary and node is recovering",
};

/// The server is shutting down (a driver also clears its connection pool).
pub const SHUTDOWN: Category = Category {
    name: "shutdown",
    codes: &[E::ShutdownInProgress, E::InterruptedAtShutdown],
    label: None,
    reference: "specifications: server-discovery-and-monitoring; error_codes.yml ShutdownError",
};

/// Errors of a change stream's `getMore` after which it may resume: the retryable-write codes
/// and the sharding and cursor codes below.
pub const RESUMABLE_CHANGE_STREAM: Category = Category {
    name: "resumable change stream",
    codes: &[
        E::HostUnreachable,
        E::HostNotFound,
        E::CursorNotFound,
        E::StaleShardVersion,
        E::NetworkTimeout,
        E::ShutdownInProgress,
        E::FailedToSatisfyReadPreference,
        E::StaleEpoch,
        E::PrimarySteppedDown,
        E::RetryChangeStream,
        E::ExceededTimeLimit,
        E::SocketException,
        E::NotWritablePrimary,
        E::InterruptedAtShutdown,
        E::InterruptedDueToReplStateChange,
        E::StaleConfig,
        E::NotPrimaryNoSecondaryOk,
        E::NotPrimaryOrSecondary,
    ],
    label: Some(Label::ResumableChangeStreamError),
    reference: "specifications: change-streams, Resumable Error",
};

/// Errors after which a change stream must not resume, whatever the command.
pub const NON_RESUMABLE_CHANGE_STREAM: Category = Category {
    name: "non-resumable change stream",
    codes: &[E::ChangeStreamFatalError],
    label: Some(Label::NonResumableChangeStreamError),
    reference: "error_codes.yml NonResumableChangeStreamError (ChangeStreamFatalError)",
};

/// Errors of a transaction's statement (or its commit) after which the whole transaction may be
/// run again: it is gone or could not go on. Retryable-write codes are transient too, except on
/// `commitTransaction` (see [`transaction_label`]).
pub const TRANSIENT_TRANSACTION: Category = Category {
    name: "transient transaction",
    codes: &[
        E::LockTimeout,
        E::WriteConflict,
        E::SnapshotUnavailable,
        E::NoSuchTransaction,
        E::PreparedTransactionInProgress,
    ],
    label: Some(Label::TransientTransactionError),
    reference: "mongod error_labels.cpp isTransientTransactionError; specifications: transactions",
};

/// Errors of `commitTransaction` after which the commit may or may not have happened: the
/// retryable-write codes and these (a time limit, a write concern not met in time).
pub const UNKNOWN_COMMIT_RESULT: Category = Category {
    name: "unknown transaction commit result",
    codes: &[E::MaxTimeMSExpired, E::WriteConcernTimeout],
    label: Some(Label::UnknownTransactionCommitResult),
    reference: "specifications: transactions, UnknownTransactionCommitResult; mongod error_labels.cpp",
};

/// Every category, for tests and tools.
pub const ALL: &[Category] = &[
    RETRYABLE_WRITE,
    RETRYABLE_READ,
    NOT_PRIMARY,
    NODE_RECOVERING,
    SHUTDOWN,
    RESUMABLE_CHANGE_STREAM,
    NON_RESUMABLE_CHANGE_STREAM,
    TRANSIENT_TRANSACTION,
    UNKNOWN_COMMIT_RESULT,
];

/// Whether the command is `commitTransaction` (its errors are labelled differently).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransactionCommand {
    Commit,
    Other,
}

/// The label a transaction's error with `code` gets: a commit whose outcome is unknown is
/// `UnknownTransactionCommitResult`; a transaction that may be run again is
/// `TransientTransactionError`.
pub fn transaction_label(command: TransactionCommand, code: i32) -> Option<Label> {
    let retryable = RETRYABLE_WRITE.contains(code);
    match command {
        TransactionCommand::Commit if retryable || UNKNOWN_COMMIT_RESULT.contains(code) => {
            Some(Label::UnknownTransactionCommitResult)
        }
        _ if TRANSIENT_TRANSACTION.contains(code) => Some(Label::TransientTransactionError),
        TransactionCommand::Other if retryable => Some(Label::TransientTransactionError),
        _ => None,
    }
}

/// Whether the command is a change stream's `getMore` (only its errors are resumable).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeStreamCommand {
    GetMore,
    Other,
}

/// The label a change stream's error with `code` gets, if any.
pub fn change_stream_label(command: ChangeStreamCommand, code: i32) -> Option<Label> {
    if NON_RESUMABLE_CHANGE_STREAM.contains(code) {
        Some(Label::NonResumableChangeStreamError)
    } else if command == ChangeStreamCommand::GetMore && RESUMABLE_CHANGE_STREAM.contains(code) {
        Some(Label::ResumableChangeStreamError)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbers(category: &Category) -> Vec<i32> {
        let mut codes: Vec<i32> = category.codes.iter().map(|code| code.code()).collect();
        codes.sort_unstable();
        codes
    }

    /// Goal: each category holds exactly the numbers its specification lists (written out here
    /// as the specifications print them, so a change to the table shows as a diff of numbers).
    #[test]
    fn categories_hold_the_specifications_numbers() {
        let retryable = vec![6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436];
        assert_eq!(numbers(&RETRYABLE_WRITE), retryable);
        let mut read = retryable.clone();
        read.push(134);
        read.sort_unstable();
        assert_eq!(numbers(&RETRYABLE_READ), read);
        assert_eq!(numbers(&NOT_PRIMARY), vec![10058, 10107, 13435]);
        assert_eq!(numbers(&NODE_RECOVERING), vec![91, 189, 11600, 11602, 13436]);
        assert_eq!(numbers(&SHUTDOWN), vec![91, 11600]);
        let mut resumable = retryable.clone();
        resumable.extend([43, 63, 133, 150, 234, 13388]);
        resumable.sort_unstable();
        assert_eq!(numbers(&RESUMABLE_CHANGE_STREAM), resumable);
        assert_eq!(numbers(&NON_RESUMABLE_CHANGE_STREAM), vec![280]);
        assert_eq!(numbers(&TRANSIENT_TRANSACTION), vec![24, 112, 246, 251, 267]);
        assert_eq!(numbers(&UNKNOWN_COMMIT_RESULT), vec![50, 64]);
    }

    /// Goal: no category lists a code twice, and the SDAM categories agree with each other
    /// (every not-primary or node-recovering code but the legacy one is retryable).
    #[test]
    fn categories_are_consistent() {
        for category in ALL {
            let codes = numbers(category);
            let mut unique = codes.clone();
            unique.dedup();
            assert_eq!(codes, unique, "{} lists a code twice", category.name);
        }
        for code in NOT_PRIMARY.codes.iter().chain(NODE_RECOVERING.codes).chain(SHUTDOWN.codes) {
            if *code != ErrorCode::LegacyNotPrimary {
                assert!(RETRYABLE_WRITE.contains(code.code()), "{code:?}");
            }
        }
        for code in SHUTDOWN.codes {
            assert!(NODE_RECOVERING.contains(code.code()), "{code:?}");
        }
    }

    /// Goal: the transaction labels follow mongod: a commit's retryable error or time limit is
    /// an unknown result, a statement's is transient; a write conflict is always transient.
    #[test]
    fn transaction_labels() {
        use TransactionCommand::{Commit, Other};
        let unknown = Some(Label::UnknownTransactionCommitResult);
        let transient = Some(Label::TransientTransactionError);
        assert_eq!(transaction_label(Commit, 91), unknown);
        assert_eq!(transaction_label(Commit, 50), unknown);
        assert_eq!(transaction_label(Commit, 64), unknown);
        assert_eq!(transaction_label(Commit, 112), transient);
        assert_eq!(transaction_label(Commit, 251), transient);
        assert_eq!(transaction_label(Other, 91), transient);
        assert_eq!(transaction_label(Other, 24), transient);
        assert_eq!(transaction_label(Other, 50), None);
        assert_eq!(transaction_label(Other, 11000), None);
        assert_eq!(transaction_label(Commit, 2), None);
    }

    /// Goal: only a getMore's resumable error is resumable; a fatal one never is.
    #[test]
    fn change_stream_labels() {
        use ChangeStreamCommand::{GetMore, Other};
        assert_eq!(change_stream_label(GetMore, 43), Some(Label::ResumableChangeStreamError));
        assert_eq!(change_stream_label(GetMore, 13388), Some(Label::ResumableChangeStreamError));
        assert_eq!(change_stream_label(Other, 43), None);
        assert_eq!(change_stream_label(GetMore, 280), Some(Label::NonResumableChangeStreamError));
        assert_eq!(change_stream_label(Other, 280), Some(Label::NonResumableChangeStreamError));
        assert_eq!(change_stream_label(GetMore, 11601), None);
        assert_eq!(Label::ResumableChangeStreamError.name(), "ResumableChangeStreamError");
    }
}
