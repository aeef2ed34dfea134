//! Initial sync (MongoDB's name for it): a member that is new to a running set, or fell further
//! behind than the set's consensus logs reach (they are compacted as the oplog's cap trims it),
//! or must roll back past them, copies another member's data instead of replaying history.
//!
//! 1. Forget this member's data (`Store::reset_for_resync`).
//! 2. Read every collection of the source at **one snapshot** (readConcern `snapshot`, the
//!    first read's `atClusterTime` for all the others): a consistent copy at the source's oplog
//!    position P, while writes go on there. Collections and indexes are created first, then the
//!    documents go in a batch per engine transaction (`docstore::oplog::initial_sync`).
//! 3. Wait until the set has committed P, then apply the source's oplog after P up to its
//!    majority commit point; this member's oplog starts with the entry at P.
//!
//! The consensus thread then goes on from the log position the copy stands for: later
//! entries whose operations the copy holds are recognized and skipped, as after a restart.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bson::{Document, RawBsonRef, RawDocument, RawDocumentBuf, Timestamp, rawdoc};

use super::transport::MemberConnection;

/// The member copied from, and the flag that ends the copy early (the server shuts down).
struct Source<'a> {
    connection: MemberConnection,
    stopping: &'a AtomicBool,
}

impl Source<'_> {
    fn command(&mut self, command: RawDocumentBuf) -> Result<RawDocumentBuf, String> {
        if self.stopping.load(Ordering::Acquire) {
            return Err("the server is shutting down".into());
        }
        self.connection.command(command)
    }
}

/// How long the source has to answer one command.
const TIMEOUT: Duration = Duration::from_secs(60);
/// Documents asked for per batch (a batch is also at most 16 MiB): one engine transaction each.
const BATCH: i32 = 1000;
/// How long to wait for the set to commit the copy's snapshot.
const COMMIT_WAIT: Duration = Duration::from_secs(30);

/// Copies the data of the member at `source` into `store` (see the module header); returns the
/// oplog position the copy reached. Gives up between batches once `stopping` is set.
pub fn copy(
    store: &docstore::Store,
    source: &str,
    credentials: &super::member_auth::MemberCredentials,
    stopping: &AtomicBool,
) -> Result<Timestamp, String> {
    let started = Instant::now();
    let mut member = Source { connection: MemberConnection::open(source, TIMEOUT, credentials)?, stopping };
    store.reset_for_resync().map_err(|e| format!("emptying this member: {e}"))?;
    let probe = member.command(rawdoc! {
        "find": "system.replset", "limit": 1, "readConcern": {"level": "snapshot"}, "$db": "local",
        "$readPreference": {"mode": "primaryPreferred"},
    })?;
    let at = cursor_of(&probe)?.get_timestamp("atClusterTime").map_err(|e| format!("the snapshot's time: {e}"))?;
    let mut documents = 0u64;
    for db in database_names(&mut member)? {
        documents += copy_database(store, &mut member, &db, at)?;
    }
    let through = catch_up(store, &mut member, at)?;
    store.checkpoint().map_err(|e| e.to_string())?;
    tracing::info!(
        %source, documents, snapshot = ?at, ?through, seconds = started.elapsed().as_secs_f64(),
        "initial sync: copied the set's data"
    );
    Ok(through)
}

fn database_names(member: &mut Source<'_>) -> Result<Vec<String>, String> {
    let reply = member.command(rawdoc! {"listDatabases": 1, "nameOnly": true, "$db": "admin"})?;
    let listed = reply.get_array("databases").map_err(|e| format!("listDatabases: {e}"))?;
    let mut names = Vec::new();
    for database in listed {
        let Some(database) = database.map_err(|e| e.to_string())?.as_document() else { continue };
        let name = database.get_str("name").map_err(|e| format!("listDatabases: {e}"))?;
        if name != "local" {
            names.push(name.to_owned());
        }
    }
    Ok(names)
}

/// Copies database `db` at the snapshot `at`; returns how many documents.
fn copy_database(store: &docstore::Store, member: &mut Source<'_>, db: &str, at: Timestamp) -> Result<u64, String> {
    let mut listed = all(member, db, rawdoc! {"listCollections": 1, "$db": db})?;
    // Views name collections: collections first.
    listed.sort_by_key(|info| info.get_str("type").ok() == Some("view"));
    let mut documents = 0;
    for info in listed {
        let name = info.get_str("name").map_err(|e| format!("listCollections: {e}"))?.to_owned();
        let is_view = info.get_str("type").ok() == Some("view");
        let indexes = match is_view {
            true => Vec::new(),
            false => all(member, db, rawdoc! {"listIndexes": name.as_str(), "$db": db})?,
        };
        store.sync_collection(db, &info, &indexes).map_err(|e| format!("creating {db}.{name}: {e}"))?;
        if !is_view {
            documents += copy_documents(store, member, db, &name, at)?;
        }
    }
    Ok(documents)
}

fn copy_documents(
    store: &docstore::Store,
    member: &mut Source<'_>,
    db: &str,
    name: &str,
    at: Timestamp,
) -> Result<u64, String> {
    let mut reply = member.command(rawdoc! {
        "find": name, "batchSize": BATCH, "readConcern": {"level": "snapshot", "atClusterTime": at}, "$db": db,
        "$readPreference": {"mode": "primaryPreferred"},
    })?;
    let mut copied = 0;
    loop {
        let (batch, id) = batch_of(&reply)?;
        copied += batch.len() as u64;
        if !batch.is_empty() {
            store.sync_documents(db, name, &batch).map_err(|e| format!("copying {db}.{name}: {e}"))?;
        }
        if id == 0 {
            return Ok(copied);
        }
        reply = member.command(rawdoc! {"getMore": id, "collection": name, "batchSize": BATCH, "$db": db})?;
    }
}

/// Applies the source's oplog after the snapshot `at` (whose own entry starts this member's
/// oplog) up to the set's majority commit point, once that has reached `at`.
fn catch_up(store: &docstore::Store, member: &mut Source<'_>, at: Timestamp) -> Result<Timestamp, String> {
    let deadline = Instant::now() + COMMIT_WAIT;
    let committed = loop {
        let committed = committed_ts(member)?;
        if committed >= at {
            break committed;
        }
        if Instant::now() > deadline {
            return Err(format!("the set did not commit the copy's snapshot {at:?} within {COMMIT_WAIT:?}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let filter = match at.time {
        0 => rawdoc! {"ts": {"$lte": committed}},
        _ => rawdoc! {"ts": {"$gte": at, "$lte": committed}},
    };
    let mut reply = member.command(rawdoc! {
        "find": "oplog.rs", "filter": filter, "batchSize": BATCH, "$db": "local",
        "$readPreference": {"mode": "primaryPreferred"},
    })?;
    let mut reached = at;
    let mut first = at.time != 0;
    loop {
        let (batch, id) = batch_of(&reply)?;
        let mut entries: &[RawDocumentBuf] = &batch;
        if first && let Some(entry) = entries.first() {
            let ts = entry.get_timestamp("ts").map_err(|e| format!("an oplog entry's ts: {e}"))?;
            if ts != at {
                return Err(format!("the source's oplog no longer holds the snapshot's entry {at:?}"));
            }
            store.sync_oplog_start(entry).map_err(|e| e.to_string())?;
            first = false;
            entries = entries.get(1..).unwrap_or_default();
        }
        let entries: Vec<&RawDocument> = entries.iter().map(|entry| entry.as_ref()).collect();
        if let Some(last) = entries.last() {
            // As a secondary applies a consensus entry: runs of document writes, one engine
            // transaction each.
            let ts = last.get_timestamp("ts").map_err(|e| format!("an oplog entry's ts: {e}"))?;
            store
                .apply_replicated_batch(&entries)
                .map_err(|e| format!("applying the oplog entries up to {ts:?}: {e}"))?;
            reached = ts;
        }
        if id == 0 {
            break;
        }
        reply =
            member.command(rawdoc! {"getMore": id, "collection": "oplog.rs", "batchSize": BATCH, "$db": "local"})?;
    }
    if first {
        return Err(format!("the source's oplog no longer holds the snapshot's entry {at:?}"));
    }
    Ok(reached)
}

/// The source's view of the set's majority commit point.
fn committed_ts(member: &mut Source<'_>) -> Result<Timestamp, String> {
    let status = member.command(rawdoc! {"replSetGetStatus": 1, "$db": "admin"})?;
    let optimes = status.get_document("optimes").map_err(|e| format!("replSetGetStatus: {e}"))?;
    let committed = optimes.get_document("lastCommittedOpTime").map_err(|e| format!("replSetGetStatus: {e}"))?;
    committed.get_timestamp("ts").map_err(|e| format!("replSetGetStatus: {e}"))
}

fn cursor_of(reply: &RawDocument) -> Result<&RawDocument, String> {
    reply.get_document("cursor").map_err(|e| format!("a reply without its cursor: {e}"))
}

/// A cursor reply's batch (copied out) and the cursor's id (0: done).
fn batch_of(reply: &RawDocument) -> Result<(Vec<RawDocumentBuf>, i64), String> {
    let cursor = cursor_of(reply)?;
    let id = cursor.get_i64("id").map_err(|e| format!("a cursor without its id: {e}"))?;
    let batch = match cursor.get_array("firstBatch") {
        Ok(batch) => batch,
        Err(_) => cursor.get_array("nextBatch").map_err(|e| format!("a cursor without its batch: {e}"))?,
    };
    let mut documents = Vec::new();
    for value in batch {
        match value.map_err(|e| e.to_string())? {
            RawBsonRef::Document(document) => documents.push(document.to_owned()),
            other => return Err(format!("a batch holds a {:?}, not a document", other.element_type())),
        }
    }
    Ok((documents, id))
}

/// Every document of a command's cursor (listCollections, listIndexes), as documents.
fn all(member: &mut Source<'_>, db: &str, command: RawDocumentBuf) -> Result<Vec<Document>, String> {
    let mut reply = member.command(command)?;
    let mut documents = Vec::new();
    loop {
        let (batch, id) = batch_of(&reply)?;
        for raw in batch {
            documents.push(Document::try_from(raw.as_ref()).map_err(|e| e.to_string())?);
        }
        if id == 0 {
            return Ok(documents);
        }
        let ns = cursor_of(&reply)?.get_str("ns").map_err(|e| format!("a cursor without its ns: {e}"))?;
        let collection = ns.split_once('.').map_or(ns, |(_, name)| name).to_owned();
        reply = member.command(rawdoc! {"getMore": id, "collection": collection, "$db": db})?;
    }
}
