//! find, count, distinct: a plan's scan, then filter, sort, skip/limit and projection, pulled
//! one document at a time through a [`Cursor`].
//!
//! A cursor owns its snapshot (inside the scan), so the server can keep it across getMore
//! calls: it sees the collection as of the find. Documents come back as the stored bytes
//! unless a projection builds new ones. A blocking sort holds documents in memory up to
//! `StoreOptions::sort_memory_limit_bytes` (MongoDB's 100 MB by default); past it, without
//! `allow_disk_use`, it fails with `SortMemoryExceeded` (292); with it, everything spills to a
//! spill tree ([`crate::spill`]) keyed by (sort key ++ arrival number), which the engine keeps
//! sorted, and which is dropped when the cursor is.

use std::sync::Arc;

use bson::{Bson, Document, RawDocumentBuf};
use query::collation::Collation;
use query::expr::Variables;
use query::filter::Filter;
use query::projection::Projection;
use query::sort::SortSpec;

use crate::catalog::Descriptor;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::read::covered::Covered;
use crate::read::planner::{Access, Hint, Plan, plan};
use crate::read::scan::{ExecutionCounters, Scan, raw};
use crate::spill::{SortedSpill, SpillTree};

/// A find (also the read half of update, delete and findAndModify).
#[derive(Debug, Clone, Default)]
pub struct FindRequest {
    pub filter: Document,
    pub projection: Option<Document>,
    pub sort: Option<Document>,
    pub skip: u64,
    /// `None` or 0: no limit.
    pub limit: Option<u64>,
    pub hint: Option<Hint>,
    pub allow_disk_use: bool,
    /// Read a transaction's view instead of the latest committed state.
    pub read_at: Option<crate::transaction::ReadAt>,
    /// The statement's variables (`let`, `$$NOW`) for `$expr` and projection expressions.
    pub variables: Arc<Variables>,
    /// `returnKey`: each result is the index key it was found by (`{}` from a collection
    /// scan), in place of the document and its projection.
    pub return_key: bool,
    /// The statement's `collation` (`{locale: "simple"}`: the binary order); `None`: the
    /// collection's default.
    pub collation: Option<Collation>,
    /// `min` (inclusive) and `max` (exclusive): bounds on the hinted index's keys, in its
    /// order, given as `{field: value, ...}` with its fields in its order.
    pub min: Option<Document>,
    pub max: Option<Document>,
    /// `showRecordId` (without `returnKey`): each result gains `$recordId`, its key in the
    /// collection's tree (the encoded `_id`, as a clustered collection's record id is in MongoDB).
    pub show_record_id: bool,
}

impl FindRequest {
    /// `skip` and `limit` as counts to skip and take (no limit: all).
    pub fn window(&self) -> (usize, usize) {
        let skip = usize::try_from(self.skip).unwrap_or(usize::MAX);
        let limit = self.limit.filter(|l| *l > 0).map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
        (skip, limit)
    }
}

/// Query results, pulled lazily; holds its snapshot. `Send`, so a server can park it between
/// getMore calls.
pub struct Cursor {
    inner: Box<dyn Iterator<Item = Result<RawDocumentBuf>> + Send>,
    peeked: Option<Result<RawDocumentBuf>>,
}

impl Cursor {
    pub fn new(inner: Box<dyn Iterator<Item = Result<RawDocumentBuf>> + Send>) -> Cursor {
        Cursor { inner, peeked: None }
    }

    pub fn from_documents(documents: Vec<RawDocumentBuf>) -> Cursor {
        Cursor::new(Box::new(documents.into_iter().map(Ok)))
    }

    /// Up to `max_documents` results, stopping early once `max_bytes` is reached (the document
    /// that crosses it is included, as MongoDB's batches do). An error after some results is
    /// returned by the next call.
    pub fn next_batch(&mut self, max_documents: usize, max_bytes: usize) -> Result<Vec<RawDocumentBuf>> {
        let mut batch = Vec::new();
        let mut bytes = 0;
        while batch.len() < max_documents && bytes < max_bytes {
            match self.next() {
                None => break,
                Some(Ok(document)) => {
                    bytes += document.as_bytes().len();
                    batch.push(document);
                }
                Some(Err(error)) if batch.is_empty() => return Err(error),
                Some(Err(error)) => {
                    self.peeked = Some(Err(error));
                    break;
                }
            }
        }
        Ok(batch)
    }

    /// Pulls the first result ahead, so that what a lazy cursor does before it (an
    /// aggregation's blocking stages, `$out`'s writes) happens now, and an error before any
    /// result is the caller's.
    pub fn started(mut self) -> Result<Cursor> {
        match self.next() {
            Some(Err(error)) => Err(error),
            first => {
                self.peeked = first;
                Ok(self)
            }
        }
    }

    /// Whether no result is left (pulls one ahead to know).
    pub fn is_exhausted(&mut self) -> bool {
        if self.peeked.is_none() {
            self.peeked = self.inner.next();
        }
        self.peeked.is_none()
    }
}

impl Iterator for Cursor {
    type Item = Result<RawDocumentBuf>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.peeked.take() {
            Some(item) => Some(item),
            None => self.inner.next(),
        }
    }
}

/// A parsed find, ready to plan and run.
pub(crate) struct Prepared {
    pub filter: Filter,
    pub sort: Option<SortSpec>,
    pub projection: Option<Projection>,
    pub plan: Plan,
    /// The statement's variables under the find's collation (its projection's `$eq`, `$in`,
    /// ... compare strings under it, as its `$expr` does).
    pub variables: Arc<Variables>,
}

impl Context {
    /// What a read reads: the transaction's view it is given, else the latest commit.
    pub(crate) fn snapshot_for(&self, read_at: Option<&crate::transaction::ReadAt>) -> storage::Snapshot {
        match read_at {
            Some(view) => view.0.clone(),
            None => self.engine.snapshot(),
        }
    }

    pub(crate) fn prepare_find(
        &self,
        collection: &crate::catalog::Descriptor,
        request: &FindRequest,
    ) -> Result<Prepared> {
        let collation = collection.collation_for(request.collation.as_ref());
        let variables = match &collation {
            Some(collation) if !collation.is_simple() => {
                Arc::new((*request.variables).clone().with_collation(Some(collation.clone())))
            }
            _ => Arc::clone(&request.variables),
        };
        let filter =
            Filter::parse(&request.filter)?.with_variables(Arc::clone(&variables)).with_collation(collation.clone());
        // `sort: {$natural: ±1}` is a collection scan in (reverse) natural order, not a sort.
        let natural = request.sort.as_ref().filter(|sort| sort.len() == 1).and_then(|sort| sort.get("$natural"));
        let natural_hint =
            natural.map(|direction| Hint::from_bson(&Bson::Document(bson::doc! {"$natural": direction.clone()})));
        let hint = match natural_hint.transpose()? {
            Some(natural) => Some(natural),
            None => request.hint.clone(),
        };
        let sort = match natural {
            Some(_) => None,
            None => request.sort.as_ref().map(SortSpec::parse).transpose()?.filter(|s| !s.is_empty()),
        };
        let sort = sort.map(|sort| sort.with_collation(collation.clone()));
        let projection = request.projection.as_ref().filter(|p| !p.is_empty()).map(Projection::parse).transpose()?;
        // The planner reads the filter's collation: only an index of the same collation takes
        // bounds from strings or gives the sort order.
        let plan = plan(collection, &filter, &request.filter, sort.as_ref(), hint.as_ref())?;
        Ok(Prepared { filter, sort, projection, plan, variables })
    }

    /// Counts the plan's use of each index it scans (`$indexStats`).
    fn note_index_use(&self, collection: &Descriptor, plan: &Plan) {
        let scans = match &plan.access {
            Access::IndexScan(scan) => std::slice::from_ref(scan),
            Access::Or(scans) => scans.as_slice(),
            Access::CollectionScan { .. } => &[],
        };
        for scan in scans {
            let tree = match &scan.index {
                Some(name) => collection.index(name).map(|index| index.meta.tree.as_str()),
                None => Some(collection.meta.tree.as_str()),
            };
            if let Some(tree) = tree {
                self.index_usage.note(tree);
            }
        }
    }

    /// Runs a find; the counters fill as the cursor is pulled (explain reads them).
    pub(crate) fn find_with_counters(
        self: &Arc<Context>,
        db: &str,
        name: &str,
        request: &FindRequest,
        counters: Arc<ExecutionCounters>,
    ) -> Result<(Cursor, Option<Plan>)> {
        let Some(collection) = self.catalog.collection(db, name) else {
            if let Some((source, pipeline)) = self.catalog.resolve_view(db, name)? {
                return Ok((self.find_in_view(db, &source, pipeline, request)?, None));
            }
            // A missing collection is empty, but its arguments must still be valid; it has no
            // text index for a `$text`.
            if crate::read::text::extract(&request.filter)?.is_some() {
                return Err(Error::IndexNotFound("text index required for $text query".into()));
            }
            Filter::parse(&request.filter)?;
            return Ok((Cursor::from_documents(Vec::new()), None));
        };
        if let Some((query, rest)) = crate::read::text::extract(&request.filter)? {
            return Ok((self.find_text(&collection, request, query, &rest, &counters)?, None));
        }
        let mut prepared = self.prepare_find(&collection, request)?;
        if let Some((path, near)) = crate::read::geo::near_of(&prepared.filter) {
            let snapshot = self.snapshot_for(request.read_at.as_ref());
            // Without another sort, only the first skip + limit of them are wanted.
            let (skip, limit) = request.window();
            let wanted = (prepared.sort.is_none() && limit != usize::MAX).then(|| skip.saturating_add(limit));
            let found = self.find_near(&collection, &snapshot, &prepared.filter, &path, &near, wanted)?;
            return Ok((nearest_first(found, request, &prepared)?, None));
        }
        if request.return_key || request.show_record_id {
            // They replace the projection, and need whole documents (never a covered read).
            prepared.projection = None;
        }
        let snapshot = self.snapshot_for(request.read_at.as_ref());
        let covered = Covered::for_find(
            self,
            &snapshot,
            &collection,
            &prepared.plan,
            &prepared.filter,
            prepared.sort.as_ref(),
            prepared.projection.as_ref(),
        )?;
        prepared.plan.covered = covered.is_some();
        let scan = Scan::new(snapshot, &collection, &prepared.plan.access, covered, Arc::clone(&counters))?;
        self.note_index_use(&collection, &prepared.plan);
        let bounds = KeyBounds::new(request, &prepared.plan)?;
        let filter = prepared.filter.clone();
        let matched = scan.filter_map(move |item| match item {
            Ok(document) if !bounds.as_ref().is_none_or(|bounds| bounds.admits(&document)) => None,
            Ok(document) => match filter.matches_raw(&document) {
                Ok(true) => Some(Ok(document)),
                Ok(false) => None,
                Err(error) => Some(Err(error.into())),
            },
            Err(error) => Some(Err(error)),
        });
        let mut stream: Box<dyn Iterator<Item = Result<RawDocumentBuf>> + Send> = Box::new(matched);
        if let (Some(sort), false) = (&prepared.sort, prepared.plan.sorted) {
            stream = Box::new(self.sorted(stream, sort, request.allow_disk_use)?.into_iter());
        }
        let (skip, limit) = request.window();
        stream = Box::new(stream.skip(skip).take(limit));
        if request.return_key || request.show_record_id {
            let key_pattern = match (&prepared.plan.access, request.return_key) {
                (Access::IndexScan(scan), true) => Some(scan.key_pattern.clone()),
                (_, true) => Some(Document::new()),
                (_, false) => None,
            };
            // As in mongod, returnKey wins: its results carry no `$recordId`.
            let show_record_id = request.show_record_id && !request.return_key;
            stream = Box::new(stream.map(move |item| {
                item.and_then(|document| key_and_record_id(&document, key_pattern.as_ref(), show_record_id))
            }));
        } else if let Some(projection) = prepared.projection.clone() {
            let filter = prepared.filter.clone();
            let variables = Arc::clone(&prepared.variables);
            stream = Box::new(
                stream.map(move |item| item.and_then(|document| project(&projection, &filter, &variables, &document))),
            );
        }
        let counted = Arc::clone(&counters);
        stream = Box::new(stream.inspect(move |item| {
            if item.is_ok() {
                ExecutionCounters::add(&counted.returned);
            }
        }));
        Ok((Cursor::new(stream), Some(prepared.plan)))
    }

    /// A find on a view: the view's pipeline over its source, then the find as stages.
    fn find_in_view(
        self: &Arc<Context>,
        db: &str,
        source: &str,
        mut pipeline: Vec<Document>,
        request: &FindRequest,
    ) -> Result<Cursor> {
        if request.return_key || request.show_record_id || request.min.is_some() || request.max.is_some() {
            return Err(Error::InvalidOptions(
                "returnKey, showRecordId, min and max are not supported on a view".into(),
            ));
        }
        if !request.filter.is_empty() {
            pipeline.push(bson::doc! {"$match": request.filter.clone()});
        }
        if let Some(sort) = &request.sort {
            pipeline.push(bson::doc! {"$sort": sort.clone()});
        }
        if request.skip > 0 {
            pipeline.push(bson::doc! {"$skip": i64::try_from(request.skip).unwrap_or(i64::MAX)});
        }
        if let Some(limit) = request.limit.filter(|limit| *limit > 0) {
            pipeline.push(bson::doc! {"$limit": i64::try_from(limit).unwrap_or(i64::MAX)});
        }
        if let Some(projection) = request.projection.as_ref().filter(|p| !p.is_empty()) {
            pipeline.push(bson::doc! {"$project": projection.clone()});
        }
        let options = crate::AggregateOptions {
            allow_disk_use: request.allow_disk_use,
            hint: request.hint.clone(),
            read_at: request.read_at.clone(),
            variables: (*request.variables).clone(),
            collation: request.collation.clone(),
        };
        self.aggregate(db, Some(source), &pipeline, &options)
    }

    /// A blocking sort: in memory up to the limit, then (if allowed) through a temporary tree.
    fn sorted(
        self: &Arc<Context>,
        input: Box<dyn Iterator<Item = Result<RawDocumentBuf>> + Send>,
        sort: &SortSpec,
        allow_disk_use: bool,
    ) -> Result<SortedResults> {
        let limit_bytes = self.options.sort_memory_limit_bytes;
        let mut keyed: Vec<(Vec<u8>, RawDocumentBuf)> = Vec::new();
        let mut used = 0usize;
        let mut input = input;
        for item in input.by_ref() {
            let document = item?;
            let key = sort_key(sort, &document, keyed.len() as u64)?;
            used += key.len() + document.as_bytes().len() + 64;
            keyed.push((key, document));
            if used > limit_bytes {
                if !allow_disk_use {
                    return Err(Error::SortMemoryExceeded { limit_bytes });
                }
                return self.spill(keyed, input, sort);
            }
        }
        keyed.sort_by(|(a, _), (b, _)| a.cmp(b));
        Ok(SortedResults::Memory(keyed.into_iter().map(|(_, d)| d).collect::<Vec<_>>().into_iter()))
    }

    fn spill(
        self: &Arc<Context>,
        held: Vec<(Vec<u8>, RawDocumentBuf)>,
        rest: Box<dyn Iterator<Item = Result<RawDocumentBuf>> + Send>,
        sort: &SortSpec,
    ) -> Result<SortedResults> {
        let mut tree = SpillTree::create(self)?;
        let mut sequence = held.len() as u64;
        for (key, document) in held {
            tree.put(key, document.into_bytes())?;
        }
        for item in rest {
            let document = item?;
            tree.put(sort_key(sort, &document, sequence)?, document.into_bytes())?;
            sequence += 1;
        }
        Ok(SortedResults::Disk(Box::new(tree.into_sorted()?)))
    }

    pub(crate) fn count(self: &Arc<Context>, db: &str, name: &str, request: &FindRequest) -> Result<u64> {
        let mut request = request.clone();
        request.projection = None;
        request.sort = None;
        let (cursor, _) = self.find_with_counters(db, name, &request, Arc::default())?;
        let mut n = 0;
        for item in cursor {
            item?;
            n += 1;
        }
        Ok(n)
    }

    /// The distinct values at `key` among the request's matches (its filter, view and
    /// collation), each once in MongoDB's order (under the collation, one of each equal group).
    pub(crate) fn distinct(
        self: &Arc<Context>,
        db: &str,
        name: &str,
        key: &str,
        request: &FindRequest,
    ) -> Result<Vec<Bson>> {
        let path = document::path::FieldPath::parse(key).map_err(|e| Error::bad_value(e.to_string()))?;
        let collation = match self.catalog.collection(db, name) {
            Some(collection) => collection.collation_for(request.collation.as_ref()),
            None => request.collation.clone().filter(|collation| !collation.is_simple()),
        };
        let (cursor, _) = self.find_with_counters(db, name, request, Arc::default())?;
        let mut values: Vec<Bson> = Vec::new();
        for item in cursor {
            let document = item?;
            let decoded = document::path::decode_fields(&document, [path.head()])?;
            for value in document::path::index_values(&decoded, path.parts()) {
                if value != Bson::Undefined {
                    values.push(value);
                }
            }
        }
        let order = |a: &Bson, b: &Bson| query::collation::compare_values(a, b, collation.as_ref());
        values.sort_by(order);
        values.dedup_by(|a, b| order(a, b) == std::cmp::Ordering::Equal);
        Ok(values)
    }
}

/// find's `min`/`max`: the hinted index's key of a document must be at least `min` and below
/// `max`, compared as the index orders keys (its directions included).
struct KeyBounds {
    order: SortSpec,
    min: Option<Vec<u8>>,
    max: Option<Vec<u8>>,
}

impl KeyBounds {
    fn new(request: &FindRequest, plan: &Plan) -> Result<Option<KeyBounds>> {
        if request.min.is_none() && request.max.is_none() {
            return Ok(None);
        }
        let Access::IndexScan(scan) = &plan.access else {
            return Err(Error::Query(query::error::fail(
                vocabulary::location::MIN_MAX_REQUIRES_HINT,
                "When using min()/max() a hint of which index to use must be provided",
            )));
        };
        let order = SortSpec::parse(&scan.key_pattern)?;
        let encode = |bound: &Option<Document>| -> Result<Option<Vec<u8>>> {
            let Some(bound) = bound else { return Ok(None) };
            if !bound.keys().eq(scan.key_pattern.keys()) {
                return Err(Error::Query(query::error::fail(
                    vocabulary::location::MIN_MAX_INCONSISTENT_WITH_INDEX,
                    format!("The index chosen is not consistent with min/max: {} and {bound}", scan.key_pattern),
                )));
            }
            Ok(Some(order.encode_values(&bound.values().cloned().collect::<Vec<_>>())))
        };
        let (min, max) = (encode(&request.min)?, encode(&request.max)?);
        Ok(Some(KeyBounds { order, min, max }))
    }

    fn admits(&self, document: &RawDocumentBuf) -> bool {
        let Ok(key) = self.order.key_bytes_raw(document) else { return false };
        self.min.as_ref().is_none_or(|min| key >= *min) && self.max.as_ref().is_none_or(|max| key < *max)
    }
}

/// The sort key's bytes (memcmp order is the sort order), then an arrival number so equal
/// keys keep their scan order and never collide in a spill tree.
fn sort_key(sort: &SortSpec, document: &RawDocumentBuf, sequence: u64) -> Result<Vec<u8>> {
    let mut key = sort.key_bytes_raw(document)?;
    key.extend_from_slice(&sequence.to_be_bytes());
    Ok(key)
}

fn project(
    projection: &Projection,
    filter: &Filter,
    variables: &Variables,
    document: &RawDocumentBuf,
) -> Result<RawDocumentBuf> {
    let decoded = Document::try_from(document.as_ref()).map_err(|e| Error::corrupt(format!("stored document: {e}")))?;
    let position = if projection.needs_position() { filter.matches_with_position(&decoded)?.flatten() } else { None };
    let projected = projection.apply_with(&decoded, position, variables)?;
    RawDocumentBuf::try_from(&projected).map_err(|e| Error::bad_value(format!("projected document: {e}")))
}

/// A result of `returnKey` and/or `showRecordId`: the index key (each field's value, the first
/// of its values where the field holds an array) or the document, then `$recordId`.
fn key_and_record_id(
    document: &RawDocumentBuf,
    key_pattern: Option<&Document>,
    show_record_id: bool,
) -> Result<RawDocumentBuf> {
    let decoded = Document::try_from(document.as_ref()).map_err(|e| Error::corrupt(format!("stored document: {e}")))?;
    let mut result = match key_pattern {
        Some(pattern) => {
            let mut key = Document::new();
            for field in pattern.keys() {
                let parts: Vec<String> = field.split('.').map(str::to_owned).collect();
                let value = document::path::index_values(&decoded, &parts).into_iter().next();
                key.insert(field.clone(), value.unwrap_or(Bson::Null));
            }
            key
        }
        None => decoded.clone(),
    };
    if show_record_id {
        let id = decoded.get("_id").cloned().unwrap_or(Bson::Null);
        let bytes = crate::index::id_key(&id);
        result.insert("$recordId", bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes });
    }
    RawDocumentBuf::try_from(&result).map_err(|e| Error::bad_value(format!("result document: {e}")))
}

/// Sorted results, from memory or from a spill tree.
enum SortedResults {
    Memory(std::vec::IntoIter<RawDocumentBuf>),
    Disk(Box<SortedSpill>),
}

impl IntoIterator for SortedResults {
    type Item = Result<RawDocumentBuf>;
    type IntoIter = Box<dyn Iterator<Item = Result<RawDocumentBuf>> + Send>;

    fn into_iter(self) -> Self::IntoIter {
        match self {
            SortedResults::Memory(documents) => Box::new(documents.map(Ok)),
            SortedResults::Disk(records) => Box::new(records.map(|item| item.and_then(|(_, value)| raw(value)))),
        }
    }
}

/// A near query's documents, nearest first (unless the find sorts), skipped, limited and
/// projected as any find's.
fn nearest_first(found: Vec<(RawDocumentBuf, f64)>, request: &FindRequest, prepared: &Prepared) -> Result<Cursor> {
    let mut documents: Vec<Document> = found
        .into_iter()
        .map(|(raw, _)| Document::try_from(raw.as_ref()).map_err(|e| Error::corrupt(e.to_string())))
        .collect::<Result<_>>()?;
    if let Some(sort) = &prepared.sort {
        sort.sort(&mut documents);
    }
    let (skip, limit) = request.window();
    let mut out = Vec::new();
    for document in documents.into_iter().skip(skip).take(limit) {
        let shown = match &prepared.projection {
            Some(projection) => projection.apply_with(&document, None, &prepared.variables)?,
            None => document,
        };
        out.push(RawDocumentBuf::try_from(&shown).map_err(|e| Error::corrupt(e.to_string()))?);
    }
    Ok(Cursor::from_documents(out))
}
