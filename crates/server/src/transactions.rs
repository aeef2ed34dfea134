//! Multi-document transactions at the server: the session's transaction state and the rules
//! of MongoDB's protocol around `startTransaction`, `autocommit: false`, `commitTransaction`
//! and `abortTransaction` (the storage side is `docstore::transaction`).
//!
//! A command with `autocommit: false` belongs to the transaction `txnNumber` of its session.
//! `dispatch` calls [`enter`] before the handler: it checks the session out for the command
//! (one command per session at a time), starts the transaction on `startTransaction`, or finds
//! the one in progress (else NoSuchTransaction), and leaves it in the connection's `Context`,
//! where handlers find it ([`Active`] through [`with`]): reads take its view, writes go into it.
//! After the handler, [`leave`] aborts the transaction if the command failed (as mongod does)
//! and labels the error: `TransientTransactionError` (WriteConflict, NoSuchTransaction — retry
//! the whole transaction), `UnknownTransactionCommitResult` (a commit whose outcome is unknown —
//! retry the commit). A retried `commitTransaction` of a committed transaction succeeds again,
//! also on another member or after a restart: the commit leaves a record in the store with the
//! session's retry records, which secondaries keep too (`docstore::Store::transaction_committed`).
//! A transaction older than `transactionLifetimeLimitSeconds` (60) is aborted ([`reap`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::{Bson, RawDocumentBuf};
use docstore::DocumentTransaction;
use parking_lot::{ArcMutexGuard, RawMutex};
use wire::ErrorCode;
use wire::categories::TransactionCommand;

use crate::command::Command;
use crate::error::CommandError;
use crate::sessions::{Session, State};
use crate::state::{Context, Shared};

/// A session's transaction, as far as the server knows it.
#[derive(Default)]
pub enum Transaction {
    #[default]
    None,
    Active {
        number: i64,
        txn: Box<DocumentTransaction>,
    },
    Committed {
        number: i64,
    },
    Aborted {
        number: i64,
    },
}

/// The session checked out by a transactional command, for the command's duration.
pub struct Active {
    pub session: Arc<Session>,
    pub state: ArcMutexGuard<RawMutex, State>,
    pub number: i64,
}

impl Active {
    /// The transaction in progress (`None` for a commit of an already committed one).
    pub fn txn(&mut self) -> Option<&mut DocumentTransaction> {
        match &mut self.state.transaction {
            Transaction::Active { txn, .. } => Some(txn),
            _ => None,
        }
    }
}

/// Commands a transaction may run (mongod 7.0's list, less what Strata lacks).
const ALLOWED: &[&str] = &[
    "find",
    "getMore",
    "killCursors",
    "insert",
    "update",
    "delete",
    "findAndModify",
    "findandmodify",
    "aggregate",
    "distinct",
    "create",
    "createIndexes",
    "commitTransaction",
    "abortTransaction",
];

/// Whether `command` runs inside a transaction (`autocommit: false`).
pub fn is_transactional(command: &Command) -> bool {
    matches!(command.get("autocommit"), Some(Bson::Boolean(false)))
}

/// Before the handler: starts or finds the command's transaction and parks it in `context`.
pub fn enter(context: &Context, command: &Command) -> Result<(), CommandError> {
    if !is_transactional(command) {
        if command.body.contains_key("startTransaction") {
            return Err(CommandError::new(ErrorCode::InvalidOptions, "startTransaction requires autocommit: false"));
        }
        if matches!(command.name.as_str(), "commitTransaction" | "abortTransaction") {
            return Err(CommandError::new(
                ErrorCode::InvalidOptions,
                "commitTransaction and abortTransaction need autocommit: false",
            ));
        }
        return Ok(());
    }
    if context.shared.replication.is_none() {
        return Err(CommandError::new(
            ErrorCode::IllegalOperation,
            "Transaction numbers are only allowed on a replica set member or mongos",
        ));
    }
    let Some(number) = command.optional_i64("txnNumber")? else {
        return Err(CommandError::new(ErrorCode::InvalidOptions, "a transaction needs a txnNumber"));
    };
    let Some(Bson::Document(lsid)) = command.get("lsid") else {
        return Err(CommandError::new(ErrorCode::InvalidOptions, "Transaction number requires a session ID"));
    };
    if !ALLOWED.contains(&command.name.as_str()) {
        return Err(CommandError::new(
            ErrorCode::OperationNotSupportedInTransaction,
            format!("Cannot run '{}' in a multi-document transaction.", command.name),
        ));
    }
    let session = context.shared.sessions.touch(lsid)?;
    let mut state = session.lock_state();
    let starting = command.optional_bool("startTransaction")?.unwrap_or(false);
    if let Some(highest) = state.txn_number.filter(|highest| number < *highest) {
        return Err(CommandError::new(
            ErrorCode::TransactionTooOld,
            format!("txnNumber {number} is less than last txnNumber {highest} seen in this session"),
        ));
    }
    if starting {
        if state.txn_number == Some(number) {
            return Err(CommandError::new(
                ErrorCode::ConflictingOperationInProgress,
                format!("Given transaction number {number} does not match any in-progress transactions."),
            ));
        }
        let txn = match command.optional_document("readConcern")?.filter(|c| c.contains_key("atClusterTime")) {
            Some(concern) => {
                context.shared.store.begin_transaction_at(&crate::read_concern::snapshot(context, concern)?.0)
            }
            None => context.shared.store.begin_transaction(),
        };
        state.txn_number = Some(number);
        state.transaction = Transaction::Active { number, txn: Box::new(txn) };
    } else if let Err(error) = check_continues(&state.transaction, number, &command.name) {
        // A commit retried on a member that did not run the transaction (the new primary after
        // a failover, or this one restarted) is answered from the record its commit left.
        let retried_commit =
            command.name == "commitTransaction" && !matches!(state.transaction, Transaction::Active { .. });
        if !(retried_commit && context.shared.store.transaction_committed(&session.id, number)?) {
            return Err(error);
        }
        state.txn_number = Some(state.txn_number.map_or(number, |highest| highest.max(number)));
        state.transaction = Transaction::Committed { number };
    }
    *context.transaction.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
        Some(Active { session: Arc::clone(&session), state, number });
    Ok(())
}

/// A command that continues transaction `number`: it must be the one in progress (or, for a
/// retried commit, the committed one).
fn check_continues(transaction: &Transaction, number: i64, command: &str) -> Result<(), CommandError> {
    match transaction {
        Transaction::Active { number: current, .. } if *current == number => Ok(()),
        Transaction::Committed { number: current } if *current == number && command == "commitTransaction" => Ok(()),
        Transaction::Committed { number: current } if *current == number => Err(CommandError::new(
            ErrorCode::TransactionCommitted,
            format!("Transaction with {{ txnNumber: {number} }} has been committed."),
        )),
        _ => Err(no_such_transaction(number)),
    }
}

fn no_such_transaction(number: i64) -> CommandError {
    CommandError::new(
        ErrorCode::NoSuchTransaction,
        format!("Transaction with {{ txnNumber: {number} }} has been aborted or is not in progress."),
    )
}

/// Runs `f` with the command's transaction, if it has one.
pub fn with<T>(context: &Context, f: impl FnOnce(Option<&mut Active>) -> T) -> T {
    let mut slot = context.transaction.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    f(slot.as_mut())
}

/// The transaction's read view for the command's reads.
pub fn read_at(context: &Context) -> Option<docstore::ReadAt> {
    with(context, |active| active.and_then(|active| active.txn().map(|txn| txn.read_at())))
}

/// `commitTransaction`.
pub fn commit(context: &Context, command: &Command) -> Result<(), CommandError> {
    with(context, |active| {
        let Some(active) = active else {
            return Err(CommandError::bad_value("commitTransaction outside a transaction"));
        };
        let number = active.number;
        let lsid = active.session.lsid.clone();
        match std::mem::take(&mut active.state.transaction) {
            Transaction::Active { txn, .. } => {
                let outcome =
                    context.shared.store.commit_transaction(*txn, command.durability(), Some((&lsid, number)));
                active.state.transaction = match outcome {
                    Ok(()) => Transaction::Committed { number },
                    Err(_) => Transaction::Aborted { number },
                };
                Ok(outcome?)
            }
            committed @ Transaction::Committed { .. } => {
                active.state.transaction = committed;
                Ok(())
            }
            other => {
                active.state.transaction = other;
                Err(no_such_transaction(number))
            }
        }
    })
}

/// `abortTransaction`.
pub fn abort(context: &Context) -> Result<(), CommandError> {
    with(context, |active| {
        let Some(active) = active else {
            return Err(CommandError::bad_value("abortTransaction outside a transaction"));
        };
        let number = active.number;
        match std::mem::take(&mut active.state.transaction) {
            Transaction::Active { .. } => {
                active.state.transaction = Transaction::Aborted { number };
                Ok(())
            }
            other => {
                active.state.transaction = other;
                Err(no_such_transaction(number))
            }
        }
    })
}

/// After the handler: a failed command aborts its transaction; the session is checked in.
pub fn leave(context: &Context, reply: &RawDocumentBuf) {
    let active = context.transaction.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
    let failed = reply.get_f64("ok").ok() == Some(0.0) || reply.get("writeErrors").ok().flatten().is_some();
    if let Some(mut active) = active
        && failed
        && let Transaction::Active { number, .. } = active.state.transaction
    {
        active.state.transaction = Transaction::Aborted { number };
    }
}

/// A transactional command's reply in MongoDB's terms: a write conflict is the command's error
/// (not one statement's), and errors get `TransientTransactionError` (retry the transaction) or
/// `UnknownTransactionCommitResult` (retry the commit).
pub fn label(command: &Command, reply: &mut RawDocumentBuf) {
    let write_error_code = reply
        .get_array("writeErrors")
        .ok()
        .and_then(|errors| errors.into_iter().next())
        .and_then(|first| first.ok()?.as_document()?.get_i32("code").ok());
    if write_error_code == Some(ErrorCode::WriteConflict.code()) {
        let error = CommandError::new(ErrorCode::WriteConflict, crate::store_error::WRITE_CONFLICT_MESSAGE);
        *reply = crate::dispatch::error_document(&error);
    }
    let code = reply.get_i32("code").ok().or(write_error_code);
    let transaction_command = match command.name.as_str() {
        "commitTransaction" => TransactionCommand::Commit,
        _ => TransactionCommand::Other,
    };
    let label = code.and_then(|code| wire::categories::transaction_label(transaction_command, code));
    if let Some(label) = label
        && reply.get("errorLabels").ok().flatten().is_none()
    {
        let mut labels = bson::RawArrayBuf::new();
        labels.push(label.name());
        reply.append(bson::raw::cstr!("errorLabels"), labels);
    }
}

/// Aborts transactions older than `limit` (their sessions not checked out by a command).
pub fn reap(context: &Context, limit: Duration) {
    abort_where(&context.shared, "past transactionLifetimeLimitSeconds", |txn| txn.started.elapsed() > limit);
}

/// Aborts the open transactions `doomed` picks, of sessions no command has checked out.
fn abort_where(shared: &Shared, why: &str, doomed: impl Fn(&DocumentTransaction) -> bool) {
    for session in shared.sessions.with_transactions() {
        let Some(mut state) = session.try_lock_state() else { continue };
        if let Transaction::Active { number, txn } = &state.transaction
            && doomed(txn)
        {
            let number = *number;
            tracing::info!(txn_number = number, why, "aborting a transaction");
            state.transaction = Transaction::Aborted { number };
        }
    }
}

/// How often a member that is not primary looks for transactions to abort.
const OFF_PRIMARY_CHECK: Duration = Duration::from_millis(100);

/// On a replica-set member: aborts every open transaction once the member is not (or no
/// longer) the writable primary, as mongod does when it steps down. Their commits could only
/// fail, and a rollback of this member's data waits until they have ended. Returns when
/// `stopping` turns true.
pub async fn abort_off_primary(shared: Arc<Shared>, mut stopping: tokio::sync::watch::Receiver<bool>) {
    let Some(set) = shared.replication.as_ref() else { return };
    let mut topology = shared.wakeups(crate::state::WakeOn::Topology).subscribe();
    loop {
        tokio::select! {
            _ = topology.changed() => {}
            () = tokio::time::sleep(OFF_PRIMARY_CHECK) => {}
            _ = stopping.wait_for(|stop| *stop) => return,
        }
        if shared.store.transactions_open() && set.is_initiated() && !set.is_writable() {
            abort_where(&shared, "this member is not primary", |_| true);
        }
    }
}

/// How often [`reap`] runs at most.
pub const REAP_EVERY: Duration = Duration::from_secs(1);

/// Whether it is time to reap (once per [`REAP_EVERY`]).
pub fn due(last: &parking_lot::Mutex<Instant>) -> bool {
    let mut last = last.lock();
    if last.elapsed() < REAP_EVERY {
        return false;
    }
    *last = Instant::now();
    true
}
