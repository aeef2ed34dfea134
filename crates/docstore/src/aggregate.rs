//! aggregate: pipelines over a collection, with `$lookup`, `$unionWith`, `$out` and `$merge`
//! reaching other collections through [`StoreSource`], the store's `CollectionSource`.
//!
//! A leading `$match` is run as a find (so indexes serve it); the find cursor's documents are
//! decoded one at a time into the rest of the pipeline, which `query::pipeline` runs as a
//! stream: nothing holds the whole collection. The returned cursor owns that stream (and the
//! find's snapshot) and computes results as they are pulled (getMore by getMore), except the
//! first, which is pulled before `aggregate` returns: the blocking stages run then, so their
//! errors, and `$out`/`$merge`'s writes, belong to the aggregate call. Blocking stages count
//! what they hold against `StoreOptions::group_memory_limit_bytes` (`$group`, `$bucketAuto`)
//! and `sort_memory_limit_bytes` (`$sort`): past it they fail with 292, or with
//! `allowDiskUse` spill to spill trees ([`crate::spill`]). `$out` writes a temporary
//! collection with the target's indexes and renames it over the target, so the old contents
//! stay on error. [`StoreSource`] holds the store weakly: a parked cursor does not keep a
//! closed store open.

use std::sync::{Arc, Weak};

use bson::{Bson, Document, RawDocumentBuf, doc};
use query::error::QueryError;
use query::pipeline::{
    CollectionSource, Context as PipelineContext, DocumentStream, MemoryLimits, Namespace, Pipeline, SpillRun,
    SpillStore,
};
use storage::Durability;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::read::find::{Cursor, FindRequest};
use crate::spill::{SpillTree, to_query};
use crate::write::Writer;
use crate::write::update::{UpdateModification, UpdateRequest};

/// aggregate's options.
#[derive(Debug, Clone, Default)]
pub struct AggregateOptions {
    pub allow_disk_use: bool,
    pub hint: Option<crate::read::planner::Hint>,
    /// Read a transaction's view (the input collection only: `$lookup` and `$unionWith` read
    /// the latest committed state).
    pub read_at: Option<crate::transaction::ReadAt>,
    /// The command's variables (`let`, `$$NOW`, `$$CLUSTER_TIME`).
    pub variables: query::expr::Variables,
    /// The command's collation (`None`: the collection's default) for `$match` and `$sort`.
    pub collation: Option<query::collation::Collation>,
}

/// The store as pipelines see it: other collections, and spill trees.
pub(crate) struct StoreSource {
    inner: Weak<Context>,
}

impl StoreSource {
    fn inner(&self) -> Result<Arc<Context>, QueryError> {
        self.inner.upgrade().ok_or_else(|| to_query(Error::IllegalOperation("the store was closed".into())))
    }
}

impl Context {
    /// Runs a pipeline over `collection` (`None`: a database-level pipeline without input).
    pub(crate) fn aggregate(
        self: &Arc<Context>,
        db: &str,
        collection: Option<&str>,
        pipeline: &[Document],
        options: &AggregateOptions,
    ) -> Result<Cursor> {
        let (collection, pipeline) = match collection.map(|name| self.catalog.resolve_view(db, name)).transpose()? {
            Some(Some((source, mut stages))) => {
                stages.extend_from_slice(pipeline);
                (Some(source), std::borrow::Cow::Owned(stages))
            }
            _ => (collection.map(str::to_owned), std::borrow::Cow::Borrowed(pipeline)),
        };
        let collection = collection.as_deref();
        if pipeline.iter().skip(1).any(|stage| stage.contains_key("$geoNear")) {
            return Err(Error::Query(query::error::fail(
                vocabulary::location::GEO_NEAR_NOT_FIRST_STAGE,
                "$geoNear is only valid as the first stage in a pipeline",
            )));
        }
        let geo_near = pipeline.first().and_then(|stage| stage.get("$geoNear"));
        let (input, stages): (DocumentStream<'static>, Vec<Bson>) = match (geo_near, collection) {
            (Some(spec), Some(name)) => {
                let wanted = leading_window(&pipeline[1..]);
                let input = self.geo_near(db, name, spec, options, wanted)?;
                (Box::new(input.into_iter().map(Ok)), pipeline.iter().skip(1).cloned().map(Bson::Document).collect())
            }
            (Some(_), None) => return Err(Error::bad_value("$geoNear needs a collection")),
            (None, _) => {
                let (find, stages) = push_down_match(&pipeline, options);
                let input: DocumentStream<'static> = match collection {
                    Some(name) => decoded(self.find_with_counters(db, name, &find, Arc::default())?.0),
                    None => Box::new(std::iter::empty()),
                };
                (input, stages)
            }
        };
        let parsed = Pipeline::parse(&stages)?;
        let source = Arc::new(StoreSource { inner: Arc::downgrade(self) });
        let limits = MemoryLimits {
            sort_bytes: self.options.sort_memory_limit_bytes,
            group_bytes: self.options.group_memory_limit_bytes,
        };
        let collation = match collection.and_then(|name| self.catalog.collection(db, name)) {
            Some(found) => found.collation_for(options.collation.as_ref()),
            None => options.collation.clone().filter(|collation| !collation.is_simple()),
        };
        let mut context = PipelineContext::shared(db, source.clone())
            .with_limits(limits)
            .with_vars(options.variables.clone())
            .with_collation(collation);
        if options.allow_disk_use {
            context = context.with_spill(source);
        }
        let output = parsed.stream(input, &context).map(|item| {
            item.map_err(Error::from).and_then(|mut document| {
                document.remove(query::meta::TEXT_SCORE_FIELD);
                encode(&document)
            })
        });
        Cursor::new(Box::new(output)).started()
    }

    /// `$geoNear` (the first stage): the collection's documents near the point (only as many as
    /// a following `$skip`/`$limit` takes, `wanted`), nearest
    /// first, each with its distance (× `distanceMultiplier`) and, with `includeLocs`, its
    /// location (`read::geo`).
    fn geo_near(
        self: &Arc<Context>,
        db: &str,
        name: &str,
        spec: &Bson,
        options: &AggregateOptions,
        wanted: Option<usize>,
    ) -> Result<Vec<Document>> {
        let stage = crate::read::geo::GeoNear::parse(spec)?;
        let Some(collection) = self.catalog.collection(db, name) else { return Ok(Vec::new()) };
        let key = match &stage.key {
            Some(key) => key.clone(),
            None => crate::read::geo::only_geo_field(&collection)?,
        };
        let filter =
            query::filter::Filter::parse(&stage.filter_on(&key))?.with_variables(Arc::new(options.variables.clone()));
        let Some((path, near)) = crate::read::geo::near_of(&filter) else { return Ok(Vec::new()) };
        let snapshot = self.snapshot_for(options.read_at.as_ref());
        let found = self.find_near(&collection, &snapshot, &filter, &path, &near, wanted)?;
        let mut documents = Vec::with_capacity(found.len());
        for (raw, distance) in found {
            let mut document = decode(&raw)?;
            if let Some(field) = &stage.include_locs {
                let location = crate::index::path_values(&document, path.parts()).first().map(|v| (*v).clone());
                query::pipeline::set_path(&mut document, &dotted(field), location.unwrap_or(Bson::Null));
            }
            let distance = Bson::Double(distance * stage.multiplier);
            query::pipeline::set_path(&mut document, &dotted(&stage.distance_field), distance);
            documents.push(document);
        }
        Ok(documents)
    }

    fn read_documents(self: &Arc<Context>, db: &str, name: &str, find: &FindRequest) -> Result<Vec<Document>> {
        let (cursor, _) = self.find_with_counters(db, name, find, Arc::default())?;
        cursor.map(|item| item.and_then(|raw| decode(&raw))).collect()
    }

    fn replace_contents(self: &Arc<Context>, namespace: &Namespace, documents: Vec<Document>) -> Result<()> {
        let (db, target) = (namespace.db.as_str(), namespace.collection.as_str());
        crate::catalog::validate_user_collection(db, target)?;
        let temp = format!("tmp.agg_out.{}", self.temp_number());
        crate::catalog::ddl::create_collection(self, db, &temp, Document::new())?;
        let result = (|| -> Result<()> {
            if let Ok(specs) = crate::index::build::list_indexes(self, db, target) {
                let specs: Vec<Document> =
                    specs.into_iter().filter(|s| s.get_str("name").ok() != Some("_id_")).collect();
                if !specs.is_empty() {
                    crate::index::build::create_indexes(self, db, &temp, &specs)?;
                }
            }
            let raws = documents.iter().map(encode).collect::<Result<Vec<_>>>()?;
            let outcome = self.insert(db, &temp, raws, true, &mut Writer::plain(Durability::Periodic));
            if let Some((_, error)) = outcome.errors.into_iter().next() {
                return Err(error);
            }
            crate::catalog::ddl::rename_collection(self, (db, &temp), (db, target), true)
        })();
        if result.is_err() {
            let _ = crate::catalog::ddl::drop_collection(self, db, &temp);
        }
        result
    }
}

/// The find that serves a leading `$match` (without `$expr`, which needs the pipeline's
/// variables), and the stages left to the pipeline.
fn push_down_match(pipeline: &[Document], options: &AggregateOptions) -> (FindRequest, Vec<Bson>) {
    let mut stages: Vec<Bson> = pipeline.iter().cloned().map(Bson::Document).collect();
    let mut find = FindRequest {
        hint: options.hint.clone(),
        allow_disk_use: options.allow_disk_use,
        read_at: options.read_at.clone(),
        collation: options.collation.clone(),
        ..FindRequest::default()
    };
    if let Some(Bson::Document(first)) = stages.first()
        && let Some(Bson::Document(filter)) = first.get("$match")
        && !filter.contains_key("$expr")
    {
        find.filter = filter.clone();
        // A text search's score rides along for `{$meta: "textScore"}` (`query::meta`).
        if crate::read::text::extract(filter).is_ok_and(|text| text.is_some()) {
            find.projection = Some(doc! {query::meta::TEXT_SCORE_FIELD: {"$meta": "textScore"}});
        }
        stages.remove(0);
    }
    (find, stages)
}

/// How many documents the stages after `$geoNear` take, when they start with `$skip`s and a
/// `$limit` (`None`: they may read them all).
fn leading_window(stages: &[Document]) -> Option<usize> {
    let whole = |value: &Bson| query::number::Num::from_bson(value).and_then(|n| n.to_exact_i64());
    let mut skipped = 0usize;
    for stage in stages {
        if let Some(n) = stage.get("$skip").and_then(whole) {
            skipped = skipped.saturating_add(usize::try_from(n).ok()?);
        } else if let Some(n) = stage.get("$limit").and_then(whole) {
            return Some(skipped.saturating_add(usize::try_from(n).ok()?));
        } else {
            return None;
        }
    }
    None
}

fn dotted(path: &str) -> Vec<String> {
    path.split('.').map(str::to_owned).collect()
}

/// A find cursor's documents, decoded one at a time as the pipeline pulls them.
fn decoded(cursor: Cursor) -> DocumentStream<'static> {
    Box::new(cursor.map(|item| item.and_then(|raw| decode(&raw)).map_err(to_query)))
}

fn decode(raw: &RawDocumentBuf) -> Result<Document> {
    Document::try_from(raw.as_ref()).map_err(|e| Error::corrupt(e.to_string()))
}

fn encode(document: &Document) -> Result<RawDocumentBuf> {
    RawDocumentBuf::try_from(document).map_err(|e| Error::bad_value(e.to_string()))
}

impl SpillStore for StoreSource {
    fn create_run(&self) -> Result<Box<dyn SpillRun>, QueryError> {
        Ok(Box::new(SpillTree::create(&self.inner()?).map_err(to_query)?))
    }
}

impl CollectionSource for StoreSource {
    fn scan(&self, namespace: &Namespace) -> Result<Vec<Document>, QueryError> {
        self.inner()?.read_documents(&namespace.db, &namespace.collection, &FindRequest::default()).map_err(to_query)
    }

    fn replace_contents(&self, namespace: &Namespace, documents: Vec<Document>) -> Result<(), QueryError> {
        self.inner()?.replace_contents(namespace, documents).map_err(to_query)
    }

    fn find_equal(&self, namespace: &Namespace, key: &Document) -> Result<Vec<Document>, QueryError> {
        let filter: Document = key.iter().map(|(k, v)| (k.clone(), Bson::Document(doc! {"$eq": v.clone()}))).collect();
        let find = FindRequest { filter, ..FindRequest::default() };
        self.inner()?.read_documents(&namespace.db, &namespace.collection, &find).map_err(to_query)
    }

    fn insert(&self, namespace: &Namespace, document: Document) -> Result<(), QueryError> {
        let raw = RawDocumentBuf::try_from(&document).map_err(|e| QueryError::bad_value(e.to_string()))?;
        let outcome = self.inner()?.insert(
            &namespace.db,
            &namespace.collection,
            vec![raw],
            true,
            &mut Writer::plain(Durability::Periodic),
        );
        match outcome.errors.into_iter().next() {
            Some((_, error)) => Err(to_query(error)),
            None => Ok(()),
        }
    }

    fn replace(&self, namespace: &Namespace, id: &Bson, document: Document) -> Result<(), QueryError> {
        let request = UpdateRequest {
            filter: doc! {"_id": id.clone()},
            update: UpdateModification::Document(document),
            multi: false,
            upsert: false,
            array_filters: Vec::new(),
            hint: None,
            variables: Default::default(),
            collation: None,
        };
        self.inner()?
            .update(&namespace.db, &namespace.collection, &request, &mut Writer::plain(Durability::Periodic))
            .map(|_| ())
            .map_err(to_query)
    }
}
