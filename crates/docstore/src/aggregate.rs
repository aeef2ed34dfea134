//! aggregate: pipelines over a collection, with `$lookup`, `$unionWith`, `$out` and `$merge`
//! reaching other collections through [`StoreSource`], the store's `CollectionSource`.
//!
//! A leading `$match` is run as a find (so indexes serve it) and the rest of the pipeline runs
//! in `query::pipeline` over the decoded documents. Results are collected (the pipeline context
//! is single-threaded) and returned as a cursor. `$out` writes a temporary collection with the
//! target's indexes and renames it over the target, so the old contents stay on error.

use std::sync::Arc;

use bson::{Bson, Document, RawDocumentBuf, doc};
use query::error::QueryError;
use query::pipeline::{CollectionSource, Context, Namespace, Pipeline};
use storage::Durability;

use crate::error::{Error, Result};
use crate::read::find::{Cursor, FindRequest};
use crate::store::Inner;
use crate::write::update::{UpdateModification, UpdateRequest};

/// aggregate's options.
#[derive(Debug, Clone, Default)]
pub struct AggregateOptions {
    pub allow_disk_use: bool,
    pub hint: Option<crate::read::planner::Hint>,
}

/// The store as pipelines see it.
pub struct StoreSource<'s> {
    pub inner: &'s Arc<Inner>,
}

fn to_query(error: Error) -> QueryError {
    QueryError::Coded { code: error.code(), code_name: error.code_name(), message: error.to_string() }
}

impl Inner {
    /// Runs a pipeline over `collection` (`None`: a database-level pipeline without input).
    pub fn aggregate(self: &Arc<Inner>, db: &str, collection: Option<&str>, pipeline: &[Document], options: &AggregateOptions) -> Result<Cursor> {
        let mut stages: Vec<Bson> = pipeline.iter().cloned().map(Bson::Document).collect();
        let mut find = FindRequest { hint: options.hint.clone(), allow_disk_use: options.allow_disk_use, ..FindRequest::default() };
        if let Some(Bson::Document(first)) = stages.first()
            && let Some(Bson::Document(filter)) = first.get("$match")
            && !filter.contains_key("$expr")
        {
            find.filter = filter.clone();
            stages.remove(0);
        }
        let parsed = Pipeline::parse(&stages)?;
        let input = match collection {
            Some(name) => self.read_documents(db, name, &find)?,
            None => Vec::new(),
        };
        let source = StoreSource { inner: self };
        let context = Context::new(db, &source);
        let output = parsed.run(input, &context)?;
        let raws = output
            .iter()
            .map(|d| RawDocumentBuf::try_from(d).map_err(|e| Error::bad_value(e.to_string())))
            .collect::<Result<Vec<_>>>()?;
        Ok(Cursor::from_documents(raws))
    }

    fn read_documents(self: &Arc<Inner>, db: &str, name: &str, find: &FindRequest) -> Result<Vec<Document>> {
        let (cursor, _) = self.find_with_counters(db, name, find, Arc::default())?;
        cursor
            .map(|item| item.and_then(|raw| Document::try_from(raw.as_ref()).map_err(|e| Error::corrupt(e.to_string()))))
            .collect()
    }

    fn replace_contents(self: &Arc<Inner>, namespace: &Namespace, documents: Vec<Document>) -> Result<()> {
        let (db, target) = (namespace.db.as_str(), namespace.collection.as_str());
        crate::catalog::validate_user_collection(db, target)?;
        let temp = format!("tmp.agg_out.{}", self.temp_counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        self.create_collection(db, &temp, Document::new())?;
        let result = (|| -> Result<()> {
            if let Ok(specs) = self.list_indexes(db, target) {
                let specs: Vec<Document> = specs.into_iter().filter(|s| s.get_str("name").ok() != Some("_id_")).collect();
                if !specs.is_empty() {
                    self.create_indexes(db, &temp, &specs)?;
                }
            }
            let raws = documents
                .iter()
                .map(|d| RawDocumentBuf::try_from(d).map_err(|e| Error::bad_value(e.to_string())))
                .collect::<Result<Vec<_>>>()?;
            let outcome = self.insert(db, &temp, raws, true, Durability::Periodic);
            if let Some((_, error)) = outcome.errors.into_iter().next() {
                return Err(error);
            }
            self.rename_collection((db, &temp), (db, target), true)
        })();
        if result.is_err() {
            let _ = self.drop_collection(db, &temp);
        }
        result
    }
}

impl CollectionSource for StoreSource<'_> {
    fn scan(&self, namespace: &Namespace) -> Result<Vec<Document>, QueryError> {
        self.inner.read_documents(&namespace.db, &namespace.collection, &FindRequest::default()).map_err(to_query)
    }

    fn replace_contents(&self, namespace: &Namespace, documents: Vec<Document>) -> Result<(), QueryError> {
        self.inner.replace_contents(namespace, documents).map_err(to_query)
    }

    fn find_equal(&self, namespace: &Namespace, key: &Document) -> Result<Vec<Document>, QueryError> {
        let filter: Document = key.iter().map(|(k, v)| (k.clone(), Bson::Document(doc! {"$eq": v.clone()}))).collect();
        let find = FindRequest { filter, ..FindRequest::default() };
        self.inner.read_documents(&namespace.db, &namespace.collection, &find).map_err(to_query)
    }

    fn insert(&self, namespace: &Namespace, document: Document) -> Result<(), QueryError> {
        let raw = RawDocumentBuf::try_from(&document).map_err(|e| QueryError::bad_value(e.to_string()))?;
        let outcome = self.inner.insert(&namespace.db, &namespace.collection, vec![raw], true, Durability::Periodic);
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
        };
        self.inner.update(&namespace.db, &namespace.collection, &request, Durability::Periodic).map(|_| ()).map_err(to_query)
    }
}
