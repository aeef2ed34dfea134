//! The database profiler: `profile` levels 0 (off), 1 (commands slower than `slowms`) and 2
//! (every command) per database, each profiled command written to that database's
//! `system.profile`, a 1 MiB capped collection made on first use (a user may make it first,
//! with another size, as in MongoDB).
//!
//! `slowms` and `sampleRate` are the server's (they also decide the slow-operation log, see
//! `slow`); `filter` is per database: a query over the profile entry that replaces the
//! slowms/sampleRate test. With every database at level 0 (the default) the cost per command
//! is one atomic load.
//!
//! An entry has MongoDB's fields for what Strata knows: `op`, `ns`, `command`, `keysExamined`,
//! `docsExamined` (from the command's `docstore::operation`), `nreturned` / `ninserted` /
//! `nMatched` / `nModified` / `ndeleted` (from the reply), `cursorid`, `responseLength`,
//! `millis`, `planSummary` (find, count, distinct), `ts`, `client`, `appName`, `allUsers`,
//! `user`, and `ok`/`errCode`/`errName`/`errMsg` when the command failed. Known difference:
//! the entries are ordinary inserts, so in replica-set mode they reach the oplog (MongoDB
//! does not replicate `system.profile`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{PoisonError, RwLock};
use std::time::Duration;

use bson::{Bson, Document, RawDocumentBuf, doc};
use docstore::EntryFilter;

use crate::command::Command;
use crate::operations::Active;
use crate::state::Context;

/// The capped size of a `system.profile` the profiler makes (MongoDB's default).
const PROFILE_COLLECTION_BYTES: i64 = 1024 * 1024;

/// Longest command document an entry keeps whole (MongoDB cuts at 50 KB too).
const MAX_COMMAND_BYTES: usize = 50 * 1024;

/// One database's profiling.
#[derive(Clone)]
struct Settings {
    level: i32,
    filter: Option<(Document, EntryFilter)>,
}

/// Profiling levels per database, and the server's slow-operation threshold.
pub struct Profiler {
    databases: RwLock<HashMap<String, Settings>>,
    /// Whether any database profiles (the fast path's one load).
    any: AtomicBool,
    slow_ms: AtomicU64,
    /// `sampleRate` × 2^32 (an integer so that it can be atomic).
    sample_rate: AtomicU64,
}

/// What `profile` reports and changes.
pub struct Change {
    pub level: Option<i32>,
    pub slow_ms: Option<u64>,
    pub sample_rate: Option<f64>,
    /// `Some(None)` removes the filter (`filter: "unset"`).
    pub filter: Option<Option<Document>>,
}

const RATE_ONE: f64 = 4_294_967_296.0;

impl Profiler {
    pub fn new(slow_ms: u64) -> Profiler {
        Profiler {
            databases: RwLock::new(HashMap::new()),
            any: AtomicBool::new(false),
            slow_ms: AtomicU64::new(slow_ms),
            sample_rate: AtomicU64::new(RATE_ONE as u64),
        }
    }

    pub fn slow_ms(&self) -> u64 {
        self.slow_ms.load(Ordering::Relaxed)
    }

    pub fn sample_rate(&self) -> f64 {
        self.sample_rate.load(Ordering::Relaxed) as f64 / RATE_ONE
    }

    /// The database's level and filter.
    pub fn settings(&self, db: &str) -> (i32, Option<Document>) {
        let databases = self.databases.read().unwrap_or_else(PoisonError::into_inner);
        databases.get(db).map_or((0, None), |s| (s.level, s.filter.as_ref().map(|(document, _)| document.clone())))
    }

    /// Applies a `profile` command; the filter was parsed by the caller.
    pub fn change(&self, db: &str, change: Change) -> docstore::Result<()> {
        if let Some(slow_ms) = change.slow_ms {
            self.slow_ms.store(slow_ms, Ordering::Relaxed);
        }
        if let Some(rate) = change.sample_rate {
            self.sample_rate.store((rate * RATE_ONE) as u64, Ordering::Relaxed);
        }
        let mut databases = self.databases.write().unwrap_or_else(PoisonError::into_inner);
        let settings = databases.entry(db.to_owned()).or_insert(Settings { level: 0, filter: None });
        if let Some(level) = change.level {
            settings.level = level;
        }
        if let Some(filter) = change.filter {
            settings.filter = match filter {
                Some(document) => Some((document.clone(), EntryFilter::parse(&document)?)),
                None => None,
            };
        }
        self.any.store(databases.values().any(|s| s.level > 0), Ordering::Relaxed);
        Ok(())
    }

    /// Whether a command that ran `elapsed` is profiled (before its entry is built, when no
    /// filter decides).
    fn wanted(&self, db: &str) -> Option<Settings> {
        if !self.any.load(Ordering::Relaxed) {
            return None;
        }
        let databases = self.databases.read().unwrap_or_else(PoisonError::into_inner);
        databases.get(db).filter(|settings| settings.level > 0).cloned()
    }

    fn slow_enough(&self, settings: &Settings, elapsed: Duration) -> bool {
        settings.level == 2
            || (elapsed >= Duration::from_millis(self.slow_ms()) && rand::random::<f64>() < self.sample_rate())
    }
}

/// A command that just ran, as the profiler sees it.
pub struct Ran<'a> {
    pub command: &'a Command,
    pub active: &'a Active,
    pub reply: &'a RawDocumentBuf,
    pub elapsed: Duration,
    pub ok: bool,
}

/// Writes the profile entry of a command that just ran, if its database profiles it.
pub fn note(context: &Context, ran: &Ran<'_>) {
    let (profiler, command) = (&context.shared.profiler, ran.command);
    let Some(settings) = profiler.wanted(&command.database) else { return };
    if settings.filter.is_none() && !profiler.slow_enough(&settings, ran.elapsed) {
        return;
    }
    let entry = entry(context, ran);
    if let Some((_, filter)) = &settings.filter
        && !filter.matches(&entry)
    {
        return;
    }
    if let Err(error) = write(context, &command.database, &entry) {
        tracing::warn!(target: "server::profiler", db = %command.database, %error, "profile entry not written");
    }
}

fn write(context: &Context, db: &str, entry: &Document) -> docstore::Result<()> {
    let store = &context.shared.store;
    store.collection((db, "system.profile")).ensure_system(doc! {"capped": true, "size": PROFILE_COLLECTION_BYTES})?;
    let raw = RawDocumentBuf::try_from(entry).map_err(|e| docstore::Error::BadValue(e.to_string()))?;
    let outcome = store.collection((db, "system.profile")).insert(vec![raw], true, docstore::Durability::Periodic);
    match outcome.errors.into_iter().next() {
        Some((_, error)) => Err(error),
        None => Ok(()),
    }
}

/// The profile entry of a command, in MongoDB's shape.
fn entry(context: &Context, ran: &Ran<'_>) -> Document {
    let Ran { command, active, reply, elapsed, ok } = *ran;
    let mut entry = doc! {
        "op": active.op_type(),
        "ns": active.namespace(),
        "command": command_shown(&command.body),
        "keysExamined": active.operation.keys_examined() as i64,
        "docsExamined": active.operation.docs_examined() as i64,
    };
    entry.extend(counts(command, reply));
    if let Some(summary) = crate::slow::plan_summary(context, command) {
        entry.insert("planSummary", summary);
    }
    entry.extend(doc! {
        "responseLength": reply.as_bytes().len() as i64,
        "millis": elapsed.as_millis() as i64,
        "ts": bson::DateTime::now(),
        "client": active.client.ip().to_string(),
    });
    if let Some(app_name) = &active.app_name {
        entry.insert("appName", app_name.clone());
    }
    let users: Vec<Bson> = active
        .users
        .iter()
        .map(|name| Bson::Document(doc! {"user": name.user.clone(), "db": name.db.clone()}))
        .collect();
    entry.insert("user", active.users.first().map(ToString::to_string).unwrap_or_default());
    entry.insert("allUsers", users);
    if !ok {
        entry.insert("ok", 0.0);
        entry.insert("errCode", reply.get_i32("code").unwrap_or_default());
        entry.insert("errName", reply.get_str("codeName").unwrap_or_default());
        entry.insert("errMsg", reply.get_str("errmsg").unwrap_or_default());
    }
    entry
}

/// The command as an entry keeps it: whole up to 50 KB, else its first fields and
/// `$truncated`, as MongoDB does.
fn command_shown(body: &Document) -> Document {
    let size = RawDocumentBuf::try_from(body).map_or(0, |raw| raw.as_bytes().len());
    if size <= MAX_COMMAND_BYTES {
        return body.clone();
    }
    let text = Bson::Document(body.clone()).into_relaxed_extjson().to_string();
    let cut = (0..=1024.min(text.len())).rev().find(|at| text.is_char_boundary(*at)).unwrap_or(0);
    doc! {"$truncated": format!("{} ...", &text[..cut])}
}

/// What the reply says the command returned or changed.
fn counts(command: &Command, reply: &RawDocumentBuf) -> Document {
    let mut counts = Document::new();
    let n = reply.get_i32("n").ok().map(i64::from);
    match command.name.as_str() {
        "insert" => counts.insert("ninserted", n.unwrap_or(0)),
        "delete" => counts.insert("ndeleted", n.unwrap_or(0)),
        "update" => {
            counts.insert("nMatched", n.unwrap_or(0));
            counts.insert("nModified", reply.get_i32("nModified").map(i64::from).unwrap_or(0))
        }
        _ => None,
    };
    if let Ok(cursor) = reply.get_document("cursor") {
        let batch = cursor.get_array("firstBatch").or_else(|_| cursor.get_array("nextBatch"));
        counts.insert("nreturned", batch.map(|batch| batch.into_iter().count() as i64).unwrap_or(0));
        if let Ok(id) = cursor.get_i64("id")
            && id != 0
        {
            counts.insert("cursorid", id);
        }
    } else if matches!(command.name.as_str(), "count" | "distinct" | "findAndModify") {
        counts.insert("nreturned", 1i64);
    }
    counts
}
