//! Updates and findAndModify: MongoDB's matched / modified / upserted accounting.
//!
//! Under the collection's write lock the matching documents are read from a fresh snapshot
//! (through the planner) and each is rewritten in its own engine transaction with only the index
//! entries that changed ([`DocumentWrite::replace`]). Reading a snapshot taken before the first
//! change means a multi-update never meets a document it already moved (no "Halloween" rewrite).
//! `matched` counts documents the filter matched, `modified` those whose bytes changed; a
//! no-op update writes nothing. An upsert that matches nothing inserts the filter's equality
//! fields with the update applied (`$setOnInsert` included) and reports the new `_id`.

use std::sync::Arc;

use bson::{Bson, Document, RawDocumentBuf};
use query::expr::Variables;
use query::filter::Filter;
use query::update::{ApplyOptions, Update};
use storage::Durability;

use crate::catalog::Locked;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::index::id_key;
use crate::read::find::FindRequest;
use crate::read::planner::Hint;
use crate::retry::Retry;
use crate::write::insert::with_generated_id;
use crate::write::{Recording, Writer, document_id};

/// An update document (operators or a replacement) or an update pipeline.
#[derive(Debug, Clone, PartialEq)]
pub enum UpdateModification {
    Document(Document),
    Pipeline(Vec<Document>),
}

/// One update statement.
#[derive(Debug, Clone)]
pub struct UpdateRequest {
    pub filter: Document,
    pub update: UpdateModification,
    pub multi: bool,
    pub upsert: bool,
    pub array_filters: Vec<Document>,
    pub hint: Option<Hint>,
    /// The statement's variables (`let`, `$$NOW`): `$expr` and pipeline updates see them.
    pub variables: Arc<Variables>,
    /// The statement's collation (`None`: the collection's default).
    pub collation: Option<query::collation::Collation>,
}

/// What an update statement did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UpdateOutcome {
    pub matched: u64,
    pub modified: u64,
    pub upserted_id: Option<Bson>,
}

/// A findAndModify command.
#[derive(Debug, Clone, Default)]
pub struct FindAndModifyRequest {
    pub query: Document,
    pub sort: Option<Document>,
    pub remove: bool,
    pub update: Option<UpdateModification>,
    /// Return the document after the change (default: before).
    pub return_new: bool,
    pub fields: Option<Document>,
    pub upsert: bool,
    pub array_filters: Vec<Document>,
    pub hint: Option<Hint>,
    /// The statement's variables (`let`, `$$NOW`): `$expr` and pipeline updates see them.
    pub variables: Arc<Variables>,
    /// The statement's collation (`None`: the collection's default).
    pub collation: Option<query::collation::Collation>,
}

/// What findAndModify returns: the document and `lastErrorObject`'s fields.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FindAndModifyOutcome {
    pub value: Option<Document>,
    pub n: u64,
    pub updated_existing: bool,
    pub upserted_id: Option<Bson>,
}

impl FindAndModifyOutcome {
    /// The outcome as a retryable write records it.
    pub fn to_document(&self) -> Document {
        let mut document = bson::doc! {"n": self.n as i64, "updatedExisting": self.updated_existing};
        if let Some(value) = &self.value {
            document.insert("value", value.clone());
        }
        if let Some(id) = &self.upserted_id {
            document.insert("upserted", id.clone());
        }
        document
    }

    /// The outcome a retryable write recorded.
    pub fn from_document(document: &Document) -> FindAndModifyOutcome {
        FindAndModifyOutcome {
            value: document.get_document("value").ok().cloned(),
            n: document.get("n").and_then(Bson::as_i64).unwrap_or(0) as u64,
            updated_existing: document.get_bool("updatedExisting").unwrap_or(false),
            upserted_id: document.get("upserted").cloned(),
        }
    }
}

/// A parsed modification, with the statement's variables (`$currentDate` and `$$NOW` agree).
struct Modification {
    kind: ModificationKind,
    variables: Arc<Variables>,
}

enum ModificationKind {
    Update(Update),
    Pipeline(query::pipeline::UpdatePipeline),
}

impl Modification {
    fn parse(
        modification: &UpdateModification,
        array_filters: &[Document],
        variables: &Arc<Variables>,
    ) -> Result<Modification> {
        let kind = ModificationKind::parse(modification, array_filters)?;
        Ok(Modification { kind, variables: Arc::clone(variables) })
    }

    /// The same modification comparing strings under the statement's collation (a pipeline
    /// update's `$eq`, `$max`, `$setUnion`...).
    fn under(self, collation: Option<query::collation::Collation>) -> Modification {
        let variables = Arc::new((*self.variables).clone().with_collation(collation));
        Modification { variables, ..self }
    }

    fn is_replacement(&self) -> bool {
        matches!(self.kind, ModificationKind::Update(Update::Replacement(_)))
    }

    /// The new version of a document: `None` when unchanged.
    fn apply(&self, old: &Document, position: Option<usize>) -> Result<Option<Document>> {
        match &self.kind {
            ModificationKind::Update(update) => {
                let updated = update.apply(old, &ApplyOptions { position, now: self.variables.now() })?;
                Ok(updated.modified.then_some(updated.document))
            }
            ModificationKind::Pipeline(pipeline) => {
                let new = keep_id(old, pipeline.apply(old, &self.variables)?)?;
                Ok((new != *old).then_some(new))
            }
        }
    }

    fn upsert_document(&self, filter: &Document) -> Result<Document> {
        match &self.kind {
            ModificationKind::Update(update) => {
                Ok(update.apply_upsert(filter, &ApplyOptions { position: None, now: self.variables.now() })?)
            }
            ModificationKind::Pipeline(pipeline) => {
                let seed = query::update::upsert_seed(filter)?;
                Ok(pipeline.apply(&seed, &self.variables)?)
            }
        }
    }
}

/// A pipeline update's result keeps the old `_id`: one the pipeline dropped comes back first
/// (as in MongoDB: `$replaceRoot` to a subdocument keeps the document's identity), one it
/// changed is refused.
fn keep_id(old: &Document, mut new: Document) -> Result<Document> {
    match (old.get("_id"), new.get("_id")) {
        (Some(id), None) => {
            let mut with_id = bson::doc! {"_id": id.clone()};
            with_id.extend(std::mem::take(&mut new));
            Ok(with_id)
        }
        (old_id, new_id) if old_id != new_id => Err(Error::Query(query::error::QueryError::ImmutableField(
            "Performing an update on the path '_id' would modify the immutable field '_id'".into(),
        ))),
        _ => Ok(new),
    }
}

impl ModificationKind {
    fn parse(modification: &UpdateModification, array_filters: &[Document]) -> Result<ModificationKind> {
        match modification {
            UpdateModification::Document(update) => Ok(ModificationKind::Update(Update::parse(update, array_filters)?)),
            UpdateModification::Pipeline(stages) => {
                if !array_filters.is_empty() {
                    return Err(Error::Query(query::error::QueryError::failed_to_parse(
                        "arrayFilters may not be specified for pipeline-style updates",
                    )));
                }
                let stages: Vec<Bson> = stages.iter().cloned().map(Bson::Document).collect();
                Ok(ModificationKind::Pipeline(query::pipeline::UpdatePipeline::parse(&stages)?))
            }
        }
    }
}

impl Context {
    pub(crate) fn update(
        self: &Arc<Context>,
        db: &str,
        name: &str,
        request: &UpdateRequest,
        writer: &mut Writer<'_>,
    ) -> Result<UpdateOutcome> {
        // Only a single-document update is retryable (drivers never retry a multi-update).
        self.catalog.refuse_view(db, name)?;
        let retry = writer.retry.filter(|_| !request.multi && !writer.in_transaction());
        let modification = Modification::parse(&request.update, &request.array_filters, &request.variables)?;
        if request.multi && modification.is_replacement() {
            return Err(Error::Query(query::error::QueryError::failed_to_parse(
                "multi update is not supported for replacement-style update",
            )));
        }
        let filter = Filter::parse(&*crate::read::text::without_text(&request.filter)?)?
            .with_variables(Arc::clone(&request.variables));
        let mut locked = match (self.catalog.lock(db, name), request.upsert) {
            (Some(locked), _) => locked,
            (None, false) => return Ok(UpdateOutcome::default()),
            (None, true) => crate::catalog::ddl::lock_or_create(self, db, name)?,
        };
        let collation = locked.collection.collation_for(request.collation.as_ref());
        let modification = modification.under(collation.clone());
        let filter = filter.with_collation(collation);
        let find = FindRequest {
            filter: request.filter.clone(),
            limit: (!request.multi).then_some(1),
            hint: request.hint.clone(),
            read_at: writer.read_at(),
            variables: Arc::clone(&request.variables),
            collation: request.collation.clone(),
            ..FindRequest::default()
        };
        let mut outcome = UpdateOutcome::default();
        let modified = |_: &Document| Ok(bson::doc! {"n": 1, "nModified": 1});
        for old in self.matching(db, name, &find, writer)? {
            let Some(old) = self.current(&mut locked, &filter, old, writer)? else { continue };
            outcome.matched += 1;
            let recording = retry.map(|r| (r, r.stmt_id(0), &modified as &dyn Fn(&Document) -> Result<Document>));
            if self.update_one(&mut locked, &filter, &modification, &old, writer, recording)?.is_some() {
                outcome.modified += 1;
            }
        }
        if outcome.matched == 0 && request.upsert {
            let upserted = |inserted: &Document| {
                Ok(bson::doc! {"n": 1, "nModified": 0, "upserted": inserted.get("_id").cloned().unwrap_or(Bson::Null)})
            };
            let recording = retry.map(|r| (r, r.stmt_id(0), &upserted as &dyn Fn(&Document) -> Result<Document>));
            let (id, _) = self.upsert(&mut locked, &request.filter, &modification, writer, recording)?;
            outcome.upserted_id = Some(id);
        } else if outcome.modified == 0
            && let Some(retry) = retry
        {
            let result = bson::doc! {"n": outcome.matched as i64, "nModified": 0};
            self.record_alone(retry, retry.stmt_id(0), &result, writer.durability)?;
        }
        Ok(outcome)
    }

    /// The documents a statement changes, read before the first change (so a multi-update
    /// never meets a document it moved). In a transaction they are read whole first: a write
    /// made while a reader of the transaction's view is open would copy its pending writes.
    pub(crate) fn matching(
        self: &Arc<Context>,
        db: &str,
        name: &str,
        find: &FindRequest,
        writer: &Writer<'_>,
    ) -> Result<Box<dyn Iterator<Item = Result<RawDocumentBuf>> + Send>> {
        let (cursor, _) = self.find_with_counters(db, name, find, Arc::default())?;
        if writer.in_transaction() {
            let all: Vec<Result<RawDocumentBuf>> = cursor.collect();
            return Ok(Box::new(all.into_iter()));
        }
        Ok(Box::new(cursor))
    }

    /// The version of a matched document to change: as read, or — when an open transaction
    /// held it and this write waited — its new version, if it still matches.
    pub(crate) fn current(
        &self,
        locked: &mut Locked,
        filter: &Filter,
        found: Result<RawDocumentBuf>,
        writer: &Writer<'_>,
    ) -> Result<Option<RawDocumentBuf>> {
        let found = found?;
        if writer.in_transaction() {
            return Ok(Some(found));
        }
        let id = id_key(&document_id(&found)?.unwrap_or(Bson::Null));
        if self.await_unheld(locked, &id)? {
            return self.still_matching(&locked.collection, &id, filter);
        }
        Ok(Some(found))
    }

    /// Applies the modification to one stored document; returns the new version if it changed.
    fn update_one(
        &self,
        locked: &mut Locked,
        filter: &Filter,
        modification: &Modification,
        old: &RawDocumentBuf,
        writer: &mut Writer<'_>,
        recording: Option<Recording<'_>>,
    ) -> Result<Option<Document>> {
        let decoded = Document::try_from(old.as_ref()).map_err(|e| Error::corrupt(format!("stored document: {e}")))?;
        let position = filter.matches_with_position(&decoded)?.flatten();
        let Some(new) = modification.apply(&decoded, position)? else {
            return Ok(None);
        };
        let new_raw = encode(&new)?;
        let id = document_id(old)?.unwrap_or(Bson::Null);
        let durability = writer.durability;
        let mut write = writer.write(self, &locked.collection);
        if modification.is_replacement() {
            write.log_as_replacement();
        }
        write.replace(&id_key(&id), old, &new_raw)?;
        if let Some((retry, stmt_id, result)) = recording {
            write.record(retry, stmt_id, result(&new)?)?;
        }
        locked.collection = write.commit(durability, &[&new_raw])?;
        Ok(Some(new))
    }

    fn upsert(
        &self,
        locked: &mut Locked,
        filter: &Document,
        modification: &Modification,
        writer: &mut Writer<'_>,
        recording: Option<Recording<'_>>,
    ) -> Result<(Bson, Document)> {
        let document = modification.upsert_document(filter)?;
        let mut raw = encode(&document)?;
        if document_id(&raw)?.is_none() {
            raw = with_generated_id(&raw)?;
        }
        let inserted = Document::try_from(raw.as_ref()).map_err(|e| Error::bad_value(e.to_string()))?;
        let id = self.insert_one_recorded(locked, raw, writer, recording)?;
        Ok((id, inserted))
    }

    /// Commits a retryable statement's record alone (the statement changed nothing).
    pub(crate) fn record_alone(
        &self,
        retry: &Retry,
        stmt_id: i32,
        result: &Document,
        durability: Durability,
    ) -> Result<()> {
        let mut txn = self.engine.begin();
        retry.record(&mut txn, self.sessions_tree, stmt_id, result)?;
        let entries = match self.logs("admin") {
            true => vec![crate::retry::record_entry(&retry.lsid, retry.txn_number, stmt_id, result)?],
            false => Vec::new(),
        };
        self.commit_logged(txn, "admin", entries, durability)?;
        Ok(())
    }

    pub(crate) fn find_and_modify(
        self: &Arc<Context>,
        db: &str,
        name: &str,
        request: &FindAndModifyRequest,
        writer: &mut Writer<'_>,
    ) -> Result<FindAndModifyOutcome> {
        self.catalog.refuse_view(db, name)?;
        let retry = writer.retry.filter(|_| !writer.in_transaction());
        let modification = match (&request.update, request.remove) {
            (Some(_), true) => return Err(Error::bad_value("Cannot specify both an update and remove=true")),
            (None, false) => return Err(Error::bad_value("Either an update or remove=true must be specified")),
            (Some(update), false) => Some(Modification::parse(update, &request.array_filters, &request.variables)?),
            (None, true) => None,
        };
        if request.remove && (request.upsert || request.return_new) {
            return Err(Error::bad_value(
                "Cannot specify both upsert=true and remove=true, or new=true and remove=true",
            ));
        }
        let projection =
            request.fields.as_ref().filter(|f| !f.is_empty()).map(query::projection::Projection::parse).transpose()?;
        let filter = Filter::parse(&*crate::read::text::without_text(&request.query)?)?
            .with_variables(Arc::clone(&request.variables));
        let mut locked = match (self.catalog.lock(db, name), request.upsert) {
            (Some(locked), _) => locked,
            (None, false) => return Ok(FindAndModifyOutcome::default()),
            (None, true) => crate::catalog::ddl::lock_or_create(self, db, name)?,
        };
        let collation = locked.collection.collation_for(request.collation.as_ref());
        let modification = modification.map(|m| m.under(collation.clone()));
        let filter = filter.with_collation(collation);
        let find = FindRequest {
            filter: request.query.clone(),
            sort: request.sort.clone(),
            limit: Some(1),
            hint: request.hint.clone(),
            read_at: writer.read_at(),
            variables: Arc::clone(&request.variables),
            collation: request.collation.clone(),
            ..FindRequest::default()
        };
        let found = self.matching(db, name, &find, writer)?.next();
        let found = match found {
            Some(found) => self.current(&mut locked, &filter, found, writer)?,
            None => None,
        };
        let project = |document: Document| -> Result<Document> {
            match &projection {
                Some(p) => {
                    let position = filter.matches_with_position(&document)?.flatten();
                    Ok(p.apply_with(&document, position, &request.variables)?)
                }
                None => Ok(document),
            }
        };
        let stmt_id = retry.map_or(0, |r| r.stmt_id(0));
        let Some(old) = found else {
            let Some(modification) = modification.filter(|_| request.upsert) else {
                let outcome = FindAndModifyOutcome::default();
                if let Some(retry) = retry {
                    self.record_alone(retry, stmt_id, &outcome.to_document(), writer.durability)?;
                }
                return Ok(outcome);
            };
            let outcome = |inserted: &Document| -> Result<FindAndModifyOutcome> {
                let value = if request.return_new { Some(project(inserted.clone())?) } else { None };
                let id = inserted.get("_id").cloned().unwrap_or(Bson::Null);
                Ok(FindAndModifyOutcome { value, n: 1, updated_existing: false, upserted_id: Some(id) })
            };
            let result = |inserted: &Document| Ok(outcome(inserted)?.to_document());
            let recording = retry.map(|r| (r, stmt_id, &result as &dyn Fn(&Document) -> Result<Document>));
            let (_, inserted) = self.upsert(&mut locked, &request.query, &modification, writer, recording)?;
            return outcome(&inserted);
        };
        let old_document = Document::try_from(old.as_ref()).map_err(|e| Error::corrupt(e.to_string()))?;
        let Some(modification) = modification else {
            let outcome = FindAndModifyOutcome {
                value: Some(project(old_document)?),
                n: 1,
                updated_existing: false,
                upserted_id: None,
            };
            let durability = writer.durability;
            let mut write = writer.write(self, &locked.collection);
            let id = document_id(&old)?.unwrap_or(Bson::Null);
            write.remove(&id_key(&id), &old)?;
            if let Some(retry) = retry {
                write.record(retry, stmt_id, outcome.to_document())?;
            }
            locked.collection = write.commit(durability, &[&old])?;
            return Ok(outcome);
        };
        let outcome = |new: Option<&Document>| -> Result<FindAndModifyOutcome> {
            let value = match (request.return_new, new) {
                (true, Some(new)) => new.clone(),
                _ => old_document.clone(),
            };
            Ok(FindAndModifyOutcome { value: Some(project(value)?), n: 1, updated_existing: true, upserted_id: None })
        };
        let result = |new: &Document| Ok(outcome(Some(new))?.to_document());
        let recording = retry.map(|r| (r, stmt_id, &result as &dyn Fn(&Document) -> Result<Document>));
        let new = self.update_one(&mut locked, &filter, &modification, &old, writer, recording)?;
        let outcome = outcome(new.as_ref())?;
        if new.is_none()
            && let Some(retry) = retry
        {
            self.record_alone(retry, stmt_id, &outcome.to_document(), writer.durability)?;
        }
        Ok(outcome)
    }
}

fn encode(document: &Document) -> Result<RawDocumentBuf> {
    RawDocumentBuf::try_from(document).map_err(|e| Error::bad_value(format!("cannot encode document: {e}")))
}
