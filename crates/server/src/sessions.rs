//! Logical sessions with state: the table of sessions this server has seen (`lsid`), their
//! last use and expiry, and the checkout that serializes a session's retryable writes.
//!
//! Every command carrying an `lsid` touches its session (creating it on first sight).
//! `endSessions` and `killSessions` end sessions, `killAllSessions` all of them,
//! `refreshSessions` keeps them alive, `$listLocalSessions` lists them. A session unused for
//! `logicalSessionTimeoutMinutes` expires: the table is swept at most once a minute, on use,
//! and the store forgets an expired or ended session's retryable-write records.
//!
//! A retryable write (a `txnNumber` on an insert, update, delete or findAndModify, in
//! replica-set mode) checks the session out for the whole command ([`checkout`]): the
//! session's highest `txnNumber` (in memory, or after a restart the store's records) decides
//! whether the number is new, current (a retry: statements already executed answer from their
//! records) or older (TransactionTooOld).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::spec::BinarySubtype;
use bson::{Bson, DateTime, Document, doc};
use parking_lot::{ArcMutexGuard, Mutex, RawMutex};
use wire::ErrorCode;

use crate::command::Command;
use crate::error::CommandError;
use crate::state::Context;

/// How often expired sessions are swept, at most.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// A session's id: the UUID in `lsid.id`.
pub type SessionId = [u8; 16];

/// One logical session.
pub struct Session {
    pub lsid: Document,
    pub id: SessionId,
    last_use: Mutex<(Instant, DateTime)>,
    /// Held by a retryable write for its whole command.
    state: Arc<Mutex<State>>,
}

/// What a session holds between commands.
#[derive(Default)]
pub struct State {
    /// The highest `txnNumber` seen (`None`: not yet known since this process started).
    pub txn_number: Option<i64>,
    /// Its multi-document transaction, if any (see `crate::transactions`).
    pub transaction: crate::transactions::Transaction,
}

impl Session {
    /// Checks the session out (waits while another command of it runs).
    pub fn lock_state(&self) -> ArcMutexGuard<RawMutex, State> {
        self.state.lock_arc()
    }

    pub fn try_lock_state(&self) -> Option<ArcMutexGuard<RawMutex, State>> {
        self.state.try_lock_arc()
    }
}

/// The server's sessions.
pub struct Sessions {
    table: Mutex<HashMap<SessionId, Arc<Session>>>,
    last_sweep: Mutex<Instant>,
    /// When transactions past their lifetime were last looked for.
    pub last_reap: Mutex<Instant>,
    timeout: Duration,
}

impl Sessions {
    pub fn new(timeout: Duration) -> Sessions {
        Sessions {
            table: Mutex::new(HashMap::new()),
            last_sweep: Mutex::new(Instant::now()),
            last_reap: Mutex::new(Instant::now()),
            timeout,
        }
    }

    /// The session of `lsid`, created on first sight; its last use is now.
    pub fn touch(&self, lsid: &Document) -> Result<Arc<Session>, CommandError> {
        let id = session_id(lsid)?;
        let mut table = self.table.lock();
        let session = table.entry(id).or_insert_with(|| {
            Arc::new(Session {
                lsid: lsid.clone(),
                id,
                last_use: Mutex::new((Instant::now(), DateTime::now())),
                state: Arc::default(),
            })
        });
        *session.last_use.lock() = (Instant::now(), DateTime::now());
        Ok(Arc::clone(session))
    }

    /// Ends the sessions named (unknown ones are ignored); returns their ids.
    pub fn end(&self, lsids: &[Document]) -> Vec<SessionId> {
        let mut table = self.table.lock();
        lsids.iter().filter_map(|lsid| session_id(lsid).ok()).filter(|id| table.remove(id).is_some()).collect()
    }

    /// Ends every session; returns their ids.
    pub fn end_all(&self) -> Vec<SessionId> {
        self.table.lock().drain().map(|(id, _)| id).collect()
    }

    /// Keeps the named sessions alive.
    pub fn refresh(&self, lsids: &[Document]) -> Result<(), CommandError> {
        for lsid in lsids {
            self.touch(lsid)?;
        }
        Ok(())
    }

    /// `$listLocalSessions`' documents.
    pub fn list(&self) -> Vec<Document> {
        let table = self.table.lock();
        table.values().map(|s| doc! {"_id": s.lsid.clone(), "lastUse": s.last_use.lock().1}).collect()
    }

    pub fn len(&self) -> usize {
        self.table.lock().len()
    }

    /// Sessions that may hold a transaction (those whose state is not checked out and has one,
    /// or is checked out now).
    pub fn with_transactions(&self) -> Vec<Arc<Session>> {
        self.table.lock().values().cloned().collect()
    }

    /// Removes sessions idle past the timeout (at most once a minute); returns their ids.
    pub fn sweep(&self) -> Vec<SessionId> {
        {
            let mut last = self.last_sweep.lock();
            if last.elapsed() < SWEEP_EVERY {
                return Vec::new();
            }
            *last = Instant::now();
        }
        let mut table = self.table.lock();
        let expired: Vec<SessionId> =
            table.iter().filter(|(_, s)| s.last_use.lock().0.elapsed() > self.timeout).map(|(id, _)| *id).collect();
        for id in &expired {
            table.remove(id);
        }
        expired
    }
}

/// `lsid.id`: a UUID (binary subtype 4).
pub fn session_id(lsid: &Document) -> Result<SessionId, CommandError> {
    match lsid.get("id") {
        Some(Bson::Binary(binary)) if binary.subtype == BinarySubtype::Uuid => binary
            .bytes
            .as_slice()
            .try_into()
            .map_err(|_| CommandError::new(ErrorCode::InvalidUUID, "lsid.id must be a 16-byte UUID")),
        _ => Err(CommandError::new(ErrorCode::InvalidUUID, "lsid.id must be a UUID")),
    }
}

/// Touches the command's session, if it names one, and sweeps expired ones; returns it.
pub fn note(context: &Context, command: &Command) -> Result<Option<Arc<Session>>, CommandError> {
    let sessions = &context.shared.sessions;
    for id in sessions.sweep() {
        forget(context, &id);
    }
    if context.shared.store.transactions_open() && crate::transactions::due(&sessions.last_reap) {
        crate::transactions::reap(context, context.shared.config.transaction_lifetime);
    }
    match command.get("lsid") {
        Some(Bson::Document(lsid)) => Ok(Some(sessions.touch(lsid)?)),
        Some(other) => Err(crate::command::mismatch("lsid", "object", other)),
        None => Ok(None),
    }
}

/// The store forgets an ended session's retryable-write records.
pub fn forget(context: &Context, id: &SessionId) {
    if let Err(error) = context.shared.store.forget_session(id) {
        tracing::warn!(%error, "forgetting an ended session's records failed");
    }
}

/// A session checked out by a retryable write for its whole command.
pub struct Checkout {
    pub session: Arc<Session>,
    pub txn_number: i64,
    /// Whether this command is the first of its `txnNumber` (its first write forgets the
    /// older records).
    pub newer: bool,
    _guard: ArcMutexGuard<RawMutex, State>,
}

/// For a write carrying `txnNumber`: checks the session out, or says why the write may not be
/// retryable. `None`: not a retryable write.
pub fn checkout(context: &Context, command: &Command) -> Result<Option<Checkout>, CommandError> {
    if crate::transactions::is_transactional(command) {
        return Ok(None);
    }
    let Some(txn_number) = command.optional_i64("txnNumber")? else { return Ok(None) };
    if context.shared.replication.is_none() {
        return Err(CommandError::new(
            ErrorCode::IllegalOperation,
            "Transaction numbers are only allowed on a replica set member or mongos",
        ));
    }
    let Some(Bson::Document(lsid)) = command.get("lsid") else {
        return Err(CommandError::new(ErrorCode::InvalidOptions, "Transaction number requires a session ID"));
    };
    if txn_number < 0 {
        return Err(CommandError::bad_value("txnNumber must be non-negative"));
    }
    let session = context.shared.sessions.touch(lsid)?;
    let mut guard = session.state.lock_arc();
    let highest = match guard.txn_number {
        Some(number) => Some(number),
        None => context.shared.store.last_txn_number(&session.id)?,
    };
    if let Some(highest) = highest.filter(|highest| txn_number < *highest) {
        return Err(CommandError::new(
            ErrorCode::TransactionTooOld,
            format!(
                "Retryable write with txnNumber {txn_number} is prohibited on session because a newer retryable \
                 write with txnNumber {highest} has already started on this session."
            ),
        ));
    }
    let newer = highest != Some(txn_number);
    guard.txn_number = Some(txn_number);
    Ok(Some(Checkout { session, txn_number, newer, _guard: guard }))
}

impl Checkout {
    /// The result statement `stmt_id` recorded, if it already ran (never, for a `txnNumber`
    /// this session had not used before this command: no lookup then).
    pub fn executed(&self, context: &Context, stmt_id: i32) -> Result<Option<Document>, CommandError> {
        if self.newer {
            return Ok(None);
        }
        Ok(context.shared.store.executed(&self.session.id, self.txn_number, stmt_id)?)
    }

    /// What the store records for statements `stmt_ids` (`first`: the first write of this
    /// command that runs, which forgets older records if the number is new).
    pub fn retry(&self, stmt_ids: Vec<i32>, first: bool) -> docstore::Retry {
        docstore::Retry::new(self.session.id, self.session.lsid.clone(), self.txn_number, stmt_ids, self.newer && first)
    }
}

/// Codes after which a driver may retry a write (`wire::categories::RETRYABLE_WRITE`): the reply
/// gets the `RetryableWriteError` label when the write carried a `txnNumber`.
pub fn is_retryable_code(code: i32) -> bool {
    wire::categories::RETRYABLE_WRITE.contains(code)
}
