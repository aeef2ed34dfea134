//! Server-side cursors: a store cursor (which holds its snapshot) parked between `getMore`s
//! under a random non-zero id, with the batching rules of MongoDB's replies.
//!
//! Invariants: a batch never makes a reply body exceed `MAX_BATCH_BYTES` unless it holds a
//! single document (a document is at most 16 MiB, so a reply stays within the message limit);
//! a cursor that is running a `getMore` is out of the table, so a second `getMore` on it gets
//! `CursorNotFound`-like `CursorInUse` instead of racing; a cursor idle for `IDLE_TIMEOUT` is
//! dropped (its snapshot released) when the next cursor is parked.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bson::{Bson, RawArrayBuf, RawDocumentBuf};

use crate::auth::users::UserName;
use crate::error::CommandError;
use crate::store_error;

/// MongoDB's batch byte budget: 16 MiB of documents per reply.
pub const MAX_BATCH_BYTES: usize = 16 * 1024 * 1024;
/// The first batch of find and aggregate holds 101 documents unless the client says otherwise.
pub const DEFAULT_FIRST_BATCH: usize = 101;
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// What a cursor reads: a store cursor (find, aggregate), or a change stream, which reads the
/// oplog afresh at each batch and never ends unless invalidated.
pub enum Source {
    Store(docstore::Cursor),
    Changes(docstore::ChangeStream),
    /// A tailable cursor on the oplog; `await_data`: an empty getMore waits for entries.
    Tail {
        tail: docstore::Tail,
        await_data: bool,
    },
}

/// A store cursor plus the one document that did not fit in the last batch.
pub struct ServerCursor {
    cursor: Source,
    pending: Option<Result<RawDocumentBuf, docstore::Error>>,
    /// "db.collection", as the replies name it.
    pub namespace: String,
    /// The user(s) of the connection that opened it: only they may read or close it.
    pub owner: Vec<UserName>,
    /// A snapshot read's cluster time, reported with the first batch.
    pub at_cluster_time: Option<bson::Timestamp>,
    /// `noCursorTimeout`: kept however long it is idle (until read to its end or killed).
    pub no_timeout: bool,
    /// What is left of the opening command's `maxTimeMS`: the getMores share it, as in
    /// MongoDB (time spent working counts, time between getMores does not; tailable cursors
    /// excepted: there a getMore's `maxTimeMS` is its await time).
    pub time_left: Option<std::time::Duration>,
}

impl ServerCursor {
    pub fn new(cursor: docstore::Cursor, namespace: String, owner: Vec<UserName>) -> ServerCursor {
        ServerCursor {
            cursor: Source::Store(cursor),
            pending: None,
            namespace,
            owner,
            at_cluster_time: None,
            no_timeout: false,
            time_left: None,
        }
    }

    pub fn change_stream(stream: docstore::ChangeStream, namespace: String, owner: Vec<UserName>) -> ServerCursor {
        ServerCursor {
            cursor: Source::Changes(stream),
            pending: None,
            namespace,
            owner,
            at_cluster_time: None,
            no_timeout: false,
            time_left: None,
        }
    }

    /// The change stream's resume token after the last batch (`None`: not a change stream).
    pub fn post_batch_resume_token(&self) -> Option<&bson::Document> {
        match &self.cursor {
            Source::Changes(stream) => Some(stream.resume_token()),
            Source::Store(_) | Source::Tail { .. } => None,
        }
    }

    pub fn tail(tail: docstore::Tail, await_data: bool, namespace: String, owner: Vec<UserName>) -> ServerCursor {
        ServerCursor {
            cursor: Source::Tail { tail, await_data },
            pending: None,
            namespace,
            owner,
            at_cluster_time: None,
            no_timeout: false,
            time_left: None,
        }
    }

    /// Whether an empty `getMore` waits for new data (a change stream, an awaitData cursor).
    pub fn awaits_data(&self) -> bool {
        matches!(self.cursor, Source::Changes(_) | Source::Tail { await_data: true, .. })
    }

    fn pull(&mut self) -> Option<Result<RawDocumentBuf, docstore::Error>> {
        match &mut self.cursor {
            Source::Store(cursor) => self.pending.take().or_else(|| cursor.next()),
            Source::Changes(_) | Source::Tail { .. } => self.pending.take(),
        }
    }

    /// Up to `max_documents` documents within the byte budget; an error after some documents is
    /// kept for the next batch.
    pub fn next_batch(&mut self, max_documents: usize) -> Result<RawArrayBuf, CommandError> {
        let read = match &mut self.cursor {
            Source::Changes(stream) => Some(stream.next_batch(max_documents.min(10_000))),
            Source::Tail { tail, .. } => Some(tail.next_batch(max_documents.min(10_000))),
            Source::Store(_) => None,
        };
        if let Some(read) = read {
            let mut batch = RawArrayBuf::new();
            for document in read.map_err(store_error::to_command_error)? {
                batch.push(document);
            }
            return Ok(batch);
        }
        let mut batch = RawArrayBuf::new();
        let (mut count, mut bytes) = (0usize, 0usize);
        while count < max_documents {
            match self.pull() {
                None => break,
                Some(Ok(document)) => {
                    let size = document.as_bytes().len();
                    if count > 0 && bytes + size > MAX_BATCH_BYTES {
                        self.pending = Some(Ok(document));
                        break;
                    }
                    bytes += size;
                    count += 1;
                    batch.push(document);
                }
                Some(Err(error)) if count == 0 => return Err(store_error::to_command_error(error)),
                Some(Err(error)) => {
                    self.pending = Some(Err(error));
                    break;
                }
            }
        }
        Ok(batch)
    }

    pub fn is_exhausted(&mut self) -> bool {
        match &mut self.cursor {
            Source::Store(cursor) => self.pending.is_none() && cursor.is_exhausted(),
            Source::Changes(stream) => stream.is_exhausted(),
            Source::Tail { .. } => false,
        }
    }
}

struct Parked {
    cursor: ServerCursor,
    last_used: Instant,
}

#[derive(Default)]
pub struct Cursors {
    open: Mutex<HashMap<i64, Parked>>,
}

impl Cursors {
    /// Park `cursor` and return its id; drops cursors idle past the timeout.
    pub fn park(&self, cursor: ServerCursor) -> i64 {
        let mut open = self.open.lock().unwrap_or_else(|poison| poison.into_inner());
        open.retain(|_, parked| parked.cursor.no_timeout || parked.last_used.elapsed() < IDLE_TIMEOUT);
        let mut id = new_id();
        while open.contains_key(&id) {
            id = new_id();
        }
        open.insert(id, Parked { cursor, last_used: Instant::now() });
        id
    }

    /// Put back a cursor taken with `take` under its id.
    pub fn put_back(&self, id: i64, cursor: ServerCursor) {
        let mut open = self.open.lock().unwrap_or_else(|poison| poison.into_inner());
        open.insert(id, Parked { cursor, last_used: Instant::now() });
    }

    pub fn take(&self, id: i64) -> Option<ServerCursor> {
        let mut open = self.open.lock().unwrap_or_else(|poison| poison.into_inner());
        open.remove(&id).map(|parked| parked.cursor)
    }

    /// Drops cursor `id` if `may_kill` allows; `None` if there is no such cursor.
    pub fn kill(&self, id: i64, may_kill: impl Fn(&ServerCursor) -> bool) -> Option<bool> {
        let mut open = self.open.lock().unwrap_or_else(|poison| poison.into_inner());
        let allowed = may_kill(&open.get(&id)?.cursor);
        if allowed {
            open.remove(&id);
        }
        Some(allowed)
    }

    pub fn len(&self) -> usize {
        self.open.lock().unwrap_or_else(|poison| poison.into_inner()).len()
    }

    pub fn clear(&self) {
        self.open.lock().unwrap_or_else(|poison| poison.into_inner()).clear();
    }
}

/// A positive, non-zero cursor id that is hard to guess (from the std hasher's random keys).
fn new_id() -> i64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(Instant::now().elapsed().as_nanos());
    let id = (hasher.finish() >> 1) as i64;
    if id == 0 { 1 } else { id }
}

/// `{cursor: {<batch_field>: [...], id, ns}, ok: 1}` as raw bytes, documents untouched.
pub fn cursor_reply(
    batch_field: &str,
    batch: RawArrayBuf,
    id: i64,
    namespace: &str,
) -> Result<RawDocumentBuf, CommandError> {
    cursor_reply_with(batch_field, batch, id, namespace, None)
}

/// [`cursor_reply`] with a change stream's `postBatchResumeToken`.
pub fn cursor_reply_with(
    batch_field: &str,
    batch: RawArrayBuf,
    id: i64,
    namespace: &str,
    resume_token: Option<&bson::Document>,
) -> Result<RawDocumentBuf, CommandError> {
    let field = <&bson::raw::CStr>::try_from(batch_field).map_err(|e| CommandError::internal(e.to_string()))?;
    let mut cursor = RawDocumentBuf::new();
    cursor.append(field, batch);
    cursor.append(bson::raw::cstr!("id"), id);
    cursor.append(bson::raw::cstr!("ns"), namespace);
    if let Some(token) = resume_token {
        cursor.append(bson::raw::cstr!("postBatchResumeToken"), RawDocumentBuf::try_from(token)?);
    }
    let mut reply = RawDocumentBuf::new();
    reply.append(bson::raw::cstr!("cursor"), cursor);
    reply.append(bson::raw::cstr!("ok"), 1.0);
    Ok(reply)
}

/// Answer the first batch of a new cursor: park it if documents remain.
pub fn first_batch(
    cursors: &Cursors,
    mut cursor: ServerCursor,
    batch_size: usize,
    single_batch: bool,
) -> Result<RawDocumentBuf, CommandError> {
    let batch = cursor.next_batch(batch_size)?;
    if matches!(cursor.cursor, Source::Store(_)) {
        cursor.time_left = docstore::operation::deadline().map(|at| at.saturating_duration_since(Instant::now()));
    }
    let namespace = cursor.namespace.clone();
    let token = cursor.post_batch_resume_token().cloned();
    let at_cluster_time = cursor.at_cluster_time;
    let id = if single_batch || cursor.is_exhausted() { 0 } else { cursors.park(cursor) };
    let mut reply = cursor_reply_with("firstBatch", batch, id, &namespace, token.as_ref())?;
    if let Some(ts) = at_cluster_time {
        // `cursor` is the reply's first field; rebuild it with atClusterTime added.
        let mut document = bson::Document::try_from(reply.as_ref())?;
        if let Ok(cursor) = document.get_document_mut("cursor") {
            cursor.insert("atClusterTime", ts);
        }
        reply = RawDocumentBuf::try_from(&document)?;
    }
    Ok(reply)
}

/// `batchSize` as a count: absent → `default`; negative → BadValue.
pub fn batch_size(value: Option<i64>, default: usize) -> Result<usize, CommandError> {
    match value {
        None => Ok(default),
        Some(size) if size < 0 => Err(CommandError::bad_value("batchSize must be non-negative")),
        Some(0) if default == usize::MAX => Ok(usize::MAX),
        Some(size) => Ok(usize::try_from(size).unwrap_or(usize::MAX)),
    }
}

/// Documents as a cursor reply's `firstBatch` from an in-memory list (listIndexes...).
pub fn documents_cursor(documents: Vec<bson::Document>, namespace: &str) -> Result<RawDocumentBuf, CommandError> {
    let mut batch = RawArrayBuf::new();
    for document in documents {
        batch.push(RawDocumentBuf::try_from(&document)?);
    }
    cursor_reply("firstBatch", batch, 0, namespace)
}

/// A cursor id argument: int64 (or a smaller integer).
pub fn cursor_id(value: Option<&Bson>) -> Result<i64, CommandError> {
    match value {
        Some(Bson::Int64(id)) => Ok(*id),
        Some(Bson::Int32(id)) => Ok(i64::from(*id)),
        Some(other) => Err(crate::command::mismatch("getMore", "long", other)),
        None => Err(CommandError::bad_value("missing cursor id")),
    }
}
