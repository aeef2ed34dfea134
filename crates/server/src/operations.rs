//! The operations in progress: what `currentOp` (and `$currentOp`) lists and `killOp` stops.
//!
//! Every command is registered for the time it runs ([`Operations::begin`]), with its own
//! `docstore::operation::Operation`: the handle `killOp` sets and `maxTimeMS` dates, which the
//! store's reads check at every entry (so a long scan stops within one entry of a kill, with
//! `Interrupted`, 11601, or `MaxTimeMSExpired`, 50). A command that waits (an awaitData getMore,
//! a hello) is not in the list while it is parked: no thread runs it then.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bson::{Bson, Document, doc};
use docstore::operation::Operation;

use crate::command::Command;
use crate::state::Context;

/// One running command, as currentOp shows it.
pub struct Active {
    pub opid: u32,
    pub connection: i64,
    pub client: SocketAddr,
    pub app_name: Option<String>,
    /// The authenticated users (for `$ownOps`, `effectiveUsers`, the profiler's `allUsers`).
    pub users: Vec<crate::auth::users::UserName>,
    /// The command's body, shared with the running `Command` (not copied).
    pub command: Arc<Document>,
    pub database: String,
    pub started: Instant,
    pub started_at: bson::DateTime,
    pub operation: Arc<Operation>,
}

/// The registry of running commands.
#[derive(Default)]
pub struct Operations {
    next_opid: AtomicU32,
    active: Mutex<HashMap<u32, Arc<Active>>>,
}

/// Removes the command from the registry, and leaves its operation on this thread, when
/// dropped.
pub struct Running<'a> {
    operations: &'a Operations,
    pub active: Arc<Active>,
    _entered: docstore::operation::Entered,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.operations.lock().remove(&self.active.opid);
    }
}

impl Operations {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u32, Arc<Active>>> {
        self.active.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers `command` as running on this thread until the guard is dropped. Its reads stop
    /// once it is killed or past its `maxTimeMS` (not a getMore's: there it is the await time).
    pub fn begin<'a>(&'a self, context: &Context, command: &Command) -> Running<'a> {
        let opid = self.next_opid.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
        let started = Instant::now();
        let operation = Arc::new(Operation::new(time_limit(command).map(|limit| started + limit)));
        let active = Active {
            opid,
            connection: context.connection.id,
            client: context.connection.peer,
            app_name: context.app_name(),
            users: crate::auth::owner(context),
            command: Arc::clone(&command.body),
            database: command.database.clone(),
            started,
            started_at: bson::DateTime::now(),
            operation: Arc::clone(&operation),
        };
        let active = Arc::new(active);
        self.lock().insert(opid, Arc::clone(&active));
        let entered = docstore::operation::enter(operation);
        Running { operations: self, active, _entered: entered }
    }

    /// The running commands, oldest first.
    pub fn list(&self) -> Vec<Arc<Active>> {
        let mut list: Vec<Arc<Active>> = self.lock().values().cloned().collect();
        list.sort_by_key(|active| active.opid);
        list
    }

    /// Asks the command `opid` to stop; `false` if no such command runs.
    pub fn kill(&self, opid: u32) -> bool {
        match self.lock().get(&opid) {
            Some(active) => {
                active.operation.kill();
                true
            }
            None => false,
        }
    }
}

/// A command's `maxTimeMS`, if it has a positive one (0 means none, as in MongoDB).
fn time_limit(command: &Command) -> Option<Duration> {
    if matches!(command.name.as_str(), "getMore" | "hello" | "isMaster" | "ismaster") {
        return None;
    }
    let millis = command.get("maxTimeMS").and_then(crate::command::as_i64)?;
    (millis > 0).then(|| Duration::from_millis(millis as u64))
}

impl Active {
    /// The command's name: its body's first field.
    pub fn name(&self) -> &str {
        self.command.keys().next().map_or("", String::as_str)
    }

    /// MongoDB's name for what the command does (currentOp's and the profiler's `op`).
    pub fn op_type(&self) -> &'static str {
        op_type(self.name())
    }

    /// The namespace the command works on (`db.$cmd` when it names no collection).
    pub fn namespace(&self) -> String {
        namespace(&self.database, self.name(), &self.command)
    }

    /// The document currentOp lists for this command.
    pub fn document(&self, host: &str) -> Document {
        let running = self.started.elapsed();
        let mut op = doc! {
            "type": "op",
            "host": host,
            "desc": format!("conn{}", self.connection),
            "connectionId": self.connection,
            "client": self.client.to_string(),
        };
        if let Some(app_name) = &self.app_name {
            op.insert("appName", app_name.clone());
        }
        op.extend(doc! {
            "active": true,
            "currentOpTime": bson::DateTime::now().try_to_rfc3339_string().unwrap_or_default(),
            "opid": i64::from(self.opid),
            "killPending": self.operation.is_killed(),
            "secs_running": running.as_secs() as i64,
            "microsecs_running": running.as_micros() as i64,
            "op": self.op_type(),
            "ns": self.namespace(),
            "command": (*self.command).clone(),
            "keysExamined": self.operation.keys_examined() as i64,
            "docsExamined": self.operation.docs_examined() as i64,
            "numYields": 0,
            "locks": {},
            "waitingForLock": false,
        });
        if let Some(lsid) = self.command.get("lsid") {
            op.insert("lsid", lsid.clone());
        }
        if !self.users.is_empty() {
            let users: Vec<Bson> = self.users.iter().map(|user| Bson::String(user.to_string())).collect();
            op.insert("effectiveUsers", users);
        }
        op
    }
}

/// MongoDB's `op` for a command name: reads are "query", writes their own kind.
pub fn op_type(name: &str) -> &'static str {
    match name {
        "find" => "query",
        "insert" => "insert",
        "update" => "update",
        "delete" => "remove",
        "getMore" => "getmore",
        _ => "command",
    }
}

/// `db.collection` for commands that name one (a getMore names it in `collection`).
pub fn namespace(database: &str, name: &str, body: &Document) -> String {
    let collection = match name {
        "getMore" => body.get("collection"),
        _ => body.get(name),
    };
    match collection {
        Some(Bson::String(collection)) => format!("{database}.{collection}"),
        _ => format!("{database}.$cmd"),
    }
}
