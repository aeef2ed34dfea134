//! Change streams: `$changeStream` over a collection, a database or the whole deployment, read
//! from the oplog ([`crate::oplog`]).
//!
//! A [`ChangeStream`] keeps a [`token::Position`] in the oplog. Each `next_batch` reads the
//! entries after it (at a fresh snapshot: new entries keep arriving), turns those in scope into
//! events ([`event`]), adds each event's resume token as `_id` and its `fullDocument` when
//! asked (`updateLookup`: the document as it is now), runs them through the stages that follow
//! `$changeStream` (`$match`, `$project`, `$addFields`/`$set`, `$unset`, `$replaceRoot`/
//! `$replaceWith`, `$redact`), and moves the position on. With no event to return, the
//! position still moves to the newest entry read, so `postBatchResumeToken` lets a client
//! resume past entries that did not concern it. An event that invalidates the stream (its
//! collection dropped or renamed, its database dropped) is followed by an `invalidate` event;
//! then the stream is exhausted.
//!
//! On a replica set's primary a stream reads only up to the majority commit point
//! ([`crate::Store::set_change_stream_limit`]), as mongod's streams read at majority: an event
//! once returned is never one a rollback undoes, and its resume token is valid on every member
//! that becomes primary.
//!
//! Resuming (`resumeAfter`, `startAfter` — which may follow an invalidate —,
//! `startAtOperationTime`) from a point the capped oplog no longer holds fails with
//! ChangeStreamHistoryLost.

pub(crate) mod event;
pub(crate) mod token;

use std::collections::VecDeque;
use std::sync::{Arc, Weak};

use bson::{Bson, Document, RawDocumentBuf, Timestamp, doc};
use query::pipeline::{Context as PipelineContext, InMemorySource, Pipeline};

use crate::context::Context;
use crate::error::{Error, Result};
use crate::read::find::FindRequest;
use token::Position;

/// Entries read from the oplog per step.
const READ_ENTRIES: usize = 1000;

/// The stages that may follow `$changeStream`.
const ALLOWED_STAGES: &[&str] =
    &["$match", "$project", "$addFields", "$set", "$unset", "$replaceRoot", "$replaceWith", "$redact"];

/// What a stream watches.
#[derive(Debug, Clone, PartialEq)]
pub enum Scope {
    Collection(String, String),
    Database(String),
    /// Every database but `admin`, `local` and `config`.
    Cluster,
}

impl Scope {
    pub fn covers(&self, db: &str, collection: &str) -> bool {
        if collection.starts_with("system.") {
            return false;
        }
        match self {
            Scope::Collection(d, c) => d == db && c == collection,
            Scope::Database(d) => d == db,
            Scope::Cluster => !matches!(db, "admin" | "local" | "config"),
        }
    }

    pub fn covers_database(&self, db: &str) -> bool {
        match self {
            Scope::Collection(..) => false,
            Scope::Database(d) => d == db,
            Scope::Cluster => !matches!(db, "admin" | "local" | "config"),
        }
    }
}

/// `fullDocument` and `fullDocumentBeforeChange`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Images {
    Default,
    Off,
    UpdateLookup,
    WhenAvailable,
    Required,
}

/// The `$changeStream` stage's options.
#[derive(Debug, Clone)]
pub(crate) struct ChangeStreamOptions {
    pub full_document: Images,
    pub full_document_before_change: Images,
    pub show_expanded_events: bool,
    pub resume_after: Option<Document>,
    pub start_after: Option<Document>,
    pub start_at_operation_time: Option<Timestamp>,
}

impl ChangeStreamOptions {
    pub(crate) fn parse(spec: &Document) -> Result<ChangeStreamOptions> {
        let images = |key: &str, allowed: &[(&str, Images)]| -> Result<Images> {
            match spec.get(key) {
                None => Ok(allowed[0].1),
                Some(Bson::String(text)) => allowed
                    .iter()
                    .find(|(name, _)| name == text)
                    .map(|(_, images)| *images)
                    .ok_or_else(|| Error::bad_value(format!("'{text}' is not a valid value for {key}"))),
                Some(other) => Err(Error::TypeMismatch(format!("{key} must be a string, not {other}"))),
            }
        };
        let full_document = images(
            "fullDocument",
            &[
                ("default", Images::Default),
                ("updateLookup", Images::UpdateLookup),
                ("whenAvailable", Images::WhenAvailable),
                ("required", Images::Required),
            ],
        )?;
        let before = images(
            "fullDocumentBeforeChange",
            &[("off", Images::Off), ("whenAvailable", Images::WhenAvailable), ("required", Images::Required)],
        )?;
        let resume_after = spec.get_document("resumeAfter").ok().cloned();
        let start_after = spec.get_document("startAfter").ok().cloned();
        let start_at_operation_time = spec.get_timestamp("startAtOperationTime").ok();
        let starts = [resume_after.is_some(), start_after.is_some(), start_at_operation_time.is_some()];
        if starts.iter().filter(|given| **given).count() > 1 {
            return Err(Error::bad_value(
                "Only one type of resume option is allowed, but multiple were found: resumeAfter, startAfter, startAtOperationTime",
            ));
        }
        for key in spec.keys() {
            if !matches!(
                key.as_str(),
                "fullDocument"
                    | "fullDocumentBeforeChange"
                    | "resumeAfter"
                    | "startAfter"
                    | "startAtOperationTime"
                    | "allChangesForCluster"
                    | "showExpandedEvents"
            ) {
                return Err(Error::UnknownField(format!("BSON field '$changeStream.{key}' is an unknown field.")));
            }
        }
        Ok(ChangeStreamOptions {
            full_document,
            full_document_before_change: before,
            show_expanded_events: spec.get_bool("showExpandedEvents").unwrap_or(false),
            resume_after,
            start_after,
            start_at_operation_time,
        })
    }
}

/// An open change stream (see the module header).
pub struct ChangeStream {
    inner: Weak<Context>,
    scope: Scope,
    options: ChangeStreamOptions,
    pipeline: Pipeline,
    position: Position,
    /// Events through the pipeline, waiting for a batch.
    ready: VecDeque<(Position, RawDocumentBuf)>,
    /// The token of the last event handed out, or the high-water mark.
    resume_token: Document,
    /// An invalidate is queued or was returned: nothing follows it.
    ended: bool,
}

impl Context {
    /// Opens a change stream; `stages` is the whole pipeline, `$changeStream` first.
    pub(crate) fn watch(self: &Arc<Context>, scope: Scope, stages: &[Document]) -> Result<ChangeStream> {
        let Some(oplog) = self.oplog() else {
            return Err(Error::IllegalOperation("The $changeStream stage is only supported on replica sets".into()));
        };
        let spec = match stages.first().and_then(|first| first.get("$changeStream")) {
            Some(Bson::Document(spec)) => spec.clone(),
            Some(other) => return Err(Error::TypeMismatch(format!("$changeStream must be an object, not {other}"))),
            None => return Err(Error::bad_value("a change stream's pipeline starts with $changeStream")),
        };
        let options = ChangeStreamOptions::parse(&spec)?;
        let rest: Vec<Bson> = stages[1..].iter().cloned().map(Bson::Document).collect();
        for stage in &stages[1..] {
            let name = stage.keys().next().map(String::as_str).unwrap_or("");
            if !ALLOWED_STAGES.contains(&name) {
                // mongod's code for a stage a change stream may not have (Location40324).
                return Err(Error::Query(query::error::QueryError::Coded {
                    code: vocabulary::location::UNRECOGNIZED_PIPELINE_STAGE,
                    code_name: vocabulary::code_name(vocabulary::location::UNRECOGNIZED_PIPELINE_STAGE),
                    message: format!("Unrecognized pipeline stage name: '{name}' (not permitted after $changeStream)"),
                }));
            }
        }
        let pipeline = Pipeline::parse(&rest)?;
        let position = match (&options.resume_after, &options.start_after, options.start_at_operation_time) {
            (Some(token), _, _) | (_, Some(token), _) => {
                let (position, from_invalidate) = token::decode(token)?;
                if from_invalidate && options.resume_after.is_some() {
                    return Err(Error::InvalidResumeToken(
                        "cannot resume a stream after an invalidate with resumeAfter; use startAfter".into(),
                    ));
                }
                position
            }
            (None, None, Some(ts)) => Position::before(ts),
            (None, None, None) => Position::after(oplog.last()),
        };
        let snapshot = self.engine.snapshot();
        if let Some(first) = oplog.first(&snapshot)?
            && position.ts < crate::oplog::as_u64(first).saturating_sub(1)
        {
            return Err(Error::ChangeStreamHistoryLost(
                "Resume of change stream was not possible, as the resume point may no longer be in the oplog.".into(),
            ));
        }
        Ok(ChangeStream {
            inner: Arc::downgrade(self),
            scope,
            options,
            pipeline,
            position,
            ready: VecDeque::new(),
            resume_token: token::encode(position, false),
            ended: false,
        })
    }
}

impl ChangeStream {
    fn inner(&self) -> Result<Arc<Context>> {
        self.inner.upgrade().ok_or_else(|| Error::IllegalOperation("the store was closed".into()))
    }

    /// Up to `max` events (fewer if the oplog has no more now).
    pub fn next_batch(&mut self, max: usize) -> Result<Vec<RawDocumentBuf>> {
        while self.ready.len() < max && !self.ended && self.read_more()? {}
        let mut batch = Vec::new();
        while batch.len() < max {
            let Some((position, event)) = self.ready.pop_front() else { break };
            self.resume_token = match event.get_document("_id") {
                Ok(id) => Document::try_from(id).map_err(|e| Error::corrupt(e.to_string()))?,
                Err(_) => token::encode(position, false),
            };
            batch.push(event);
        }
        if self.ready.is_empty() && !self.ended {
            // Nothing waiting: the stream has seen everything up to its position.
            self.resume_token = token::encode(self.position, false);
        }
        Ok(batch)
    }

    /// `postBatchResumeToken`: where a client resumes after the last batch.
    pub fn resume_token(&self) -> &Document {
        &self.resume_token
    }

    /// Whether the stream ended (invalidated) and every event was handed out.
    pub fn is_exhausted(&self) -> bool {
        self.ended && self.ready.is_empty()
    }

    /// Reads one step of entries after the position; false when there were none.
    fn read_more(&mut self) -> Result<bool> {
        let inner = self.inner()?;
        let Some(oplog) = inner.oplog() else { return Ok(false) };
        let limit = inner.change_stream_limit();
        let snapshot = inner.engine.snapshot();
        let from = crate::oplog::from_u64(self.position.ts);
        let entries = oplog.read_from(&snapshot, from, READ_ENTRIES)?;
        let mut progressed = false;
        // Past the limit (a primary's majority commit point) an entry may yet be rolled back.
        for (ts, bytes) in entries.into_iter().take_while(|(ts, _)| limit.is_none_or(|limit| *ts <= limit)) {
            let ts_value = crate::oplog::as_u64(ts);
            let entry = Document::from_reader(bytes.as_slice()).map_err(|e| Error::corrupt(format!("oplog: {e}")))?;
            for change in event::changes(&entry, &self.scope, self.options.show_expanded_events) {
                if !self.position.precedes(ts_value, change.index) {
                    continue;
                }
                let position = Position { ts: ts_value, index: change.index };
                self.deliver(&inner, &entry, ts, position, change)?;
                if self.ended {
                    return Ok(true);
                }
            }
            if self.position.precedes(ts_value, u32::MAX) {
                self.position = Position { ts: ts_value, index: u32::MAX };
                progressed = true;
            }
        }
        Ok(progressed)
    }

    /// Completes an event, runs it through the pipeline, and queues what comes out.
    fn deliver(
        &mut self,
        inner: &Arc<Context>,
        entry: &Document,
        ts: Timestamp,
        position: Position,
        change: event::Change,
    ) -> Result<()> {
        let token = token::encode(position, false);
        let mut event = doc! {"_id": token.clone()};
        let operation = change.event.get_str("operationType").unwrap_or("").to_owned();
        event.insert("operationType", operation.clone());
        event.insert("clusterTime", ts);
        if let Some(wall) = entry.get("wall") {
            event.insert("wallTime", wall.clone());
        }
        for (key, value) in change.event.iter().skip(1) {
            event.insert(key.clone(), value.clone());
        }
        self.add_images(inner, &operation, &change, position, &mut event)?;
        let source = InMemorySource::new();
        let context = PipelineContext::new(String::new(), &source);
        for output in self.pipeline.run(vec![event], &context)? {
            if output.get_document("_id").ok() != Some(&token) {
                return Err(Error::ChangeStreamFatal(
                    "Encountered an event whose _id field, which contains the resume token, was modified by the pipeline. \
                     Modifying the _id field of an event makes it impossible to resume the stream from that point."
                        .into(),
                ));
            }
            let raw = RawDocumentBuf::try_from(&output).map_err(|e| Error::bad_value(e.to_string()))?;
            self.ready.push_back((position, raw));
        }
        self.position = position;
        if change.invalidates {
            let invalidate = doc! {
                "_id": token::encode(position, true),
                "operationType": "invalidate",
                "clusterTime": ts,
                "wallTime": entry.get("wall").cloned().unwrap_or(Bson::Null),
            };
            let raw = RawDocumentBuf::try_from(&invalidate).map_err(|e| Error::bad_value(e.to_string()))?;
            self.ready.push_back((position, raw));
            self.ended = true;
        }
        Ok(())
    }

    /// `fullDocument` for updates (`updateLookup`: the document as it is now; `whenAvailable` /
    /// `required`: the post-image, the pre-image with the update's diff applied) and
    /// `fullDocumentBeforeChange` (the pre-image), from the pre-images a collection with
    /// `changeStreamPreAndPostImages` keeps beside the oplog.
    fn add_images(
        &self,
        inner: &Arc<Context>,
        operation: &str,
        change: &event::Change,
        position: Position,
        event: &mut Document,
    ) -> Result<()> {
        let changes_document = matches!(operation, "update" | "replace" | "delete");
        let wants_before = !matches!(self.options.full_document_before_change, Images::Off | Images::Default);
        let wants_post = matches!(self.options.full_document, Images::WhenAvailable | Images::Required);
        let before = match changes_document && (wants_before || (operation == "update" && wants_post)) {
            true => self.pre_image(inner, position)?,
            false => None,
        };
        if operation == "update" {
            match (self.options.full_document, &change.lookup) {
                (Images::UpdateLookup, Some((db, collection, id))) => {
                    let request =
                        FindRequest { filter: doc! {"_id": id.clone()}, limit: Some(1), ..Default::default() };
                    let current =
                        inner.find_with_counters(db, collection, &request, Arc::default())?.0.next().transpose()?;
                    let current = match current {
                        Some(raw) => {
                            Bson::Document(Document::try_from(raw.as_ref()).map_err(|e| Error::corrupt(e.to_string()))?)
                        }
                        None => Bson::Null,
                    };
                    event.insert("fullDocument", current);
                }
                (Images::WhenAvailable | Images::Required, _) => {
                    let post = match (&before, &change.diff) {
                        (Some(before), Some(diff)) => Some(crate::oplog::diff::apply(before, diff)),
                        _ => None,
                    };
                    match (post, self.options.full_document) {
                        (Some(post), _) => {
                            event.insert("fullDocument", post);
                        }
                        (None, Images::Required) => return Err(missing_image("post")),
                        (None, _) => {
                            event.insert("fullDocument", Bson::Null);
                        }
                    }
                }
                _ => {}
            }
        }
        if changes_document && wants_before {
            match (before, self.options.full_document_before_change) {
                (Some(before), _) => {
                    event.insert("fullDocumentBeforeChange", before);
                }
                (None, Images::Required) => return Err(missing_image("pre")),
                (None, _) => {
                    event.insert("fullDocumentBeforeChange", Bson::Null);
                }
            }
        }
        Ok(())
    }

    /// The document before the change at `position`, if its collection kept it.
    fn pre_image(&self, inner: &Arc<Context>, position: Position) -> Result<Option<Document>> {
        let Some(oplog) = inner.oplog() else { return Ok(None) };
        let snapshot = inner.engine.snapshot();
        match oplog.pre_image(&snapshot, position.timestamp(), position.index)? {
            Some(bytes) => {
                Ok(Some(Document::from_reader(bytes.as_slice()).map_err(|e| Error::corrupt(e.to_string()))?))
            }
            None => Ok(None),
        }
    }
}

fn missing_image(which: &str) -> Error {
    Error::NoMatchingDocument(format!(
        "Change stream was configured to require a {which}-image for all update, delete and replace events, but the \
         {which}-image was not found (is changeStreamPreAndPostImages enabled on the collection?)"
    ))
}
