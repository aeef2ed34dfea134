//! The collection interface pipelines read and write through (`$lookup`, `$unionWith`, `$out`,
//! `$merge`), and an in-memory implementation for tests.
//!
//! `query` does no I/O: the collection layer implements [`CollectionSource`] over its store.
//! Reads are whole-collection scans (the stage filters); writes are the primitives `$out` and
//! `$merge` need, and the policy of `$merge` (whenMatched/whenNotMatched) stays in
//! [`super::output`], so every implementation behaves the same.

use std::collections::BTreeMap;
use std::sync::Mutex;

use bson::{Bson, Document};

use crate::error::QueryError;
use crate::expr::fail;

/// A namespace: database and collection names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Namespace {
    pub db: String,
    pub collection: String,
}

impl Namespace {
    pub fn new(db: impl Into<String>, collection: impl Into<String>) -> Namespace {
        Namespace { db: db.into(), collection: collection.into() }
    }
}

/// `(db, collection)`, as callers hold the two names.
impl<D: AsRef<str>, C: AsRef<str>> From<(D, C)> for Namespace {
    fn from((db, collection): (D, C)) -> Namespace {
        Namespace::new(db.as_ref(), collection.as_ref())
    }
}

/// `db.collection`, as MongoDB writes a namespace.
impl std::fmt::Display for Namespace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.db, self.collection)
    }
}

/// What a pipeline needs from the collection layer.
pub trait CollectionSource {
    /// Every document of a collection; a collection that does not exist is empty.
    fn scan(&self, namespace: &Namespace) -> Result<Vec<Document>, QueryError>;

    /// `$out`: atomically replaces the collection's contents (creating it if needed), keeping
    /// its indexes; on error the old contents stay.
    fn replace_contents(&self, namespace: &Namespace, documents: Vec<Document>) -> Result<(), QueryError>;

    /// `$merge`: the documents whose fields equal `key` (the `on` fields; at most one is
    /// expected, a unique index backs them in MongoDB).
    fn find_equal(&self, namespace: &Namespace, key: &Document) -> Result<Vec<Document>, QueryError>;

    /// `$merge`: inserts a document (the implementation assigns `_id` if it is missing).
    fn insert(&self, namespace: &Namespace, document: Document) -> Result<(), QueryError>;

    /// `$merge`: replaces the document whose `_id` is `id`.
    fn replace(&self, namespace: &Namespace, id: &Bson, document: Document) -> Result<(), QueryError>;
}

/// A borrowed source is a source (`Context::new` shares it for the length of a run).
impl<T: CollectionSource + ?Sized> CollectionSource for &T {
    fn scan(&self, namespace: &Namespace) -> Result<Vec<Document>, QueryError> {
        (**self).scan(namespace)
    }

    fn replace_contents(&self, namespace: &Namespace, documents: Vec<Document>) -> Result<(), QueryError> {
        (**self).replace_contents(namespace, documents)
    }

    fn find_equal(&self, namespace: &Namespace, key: &Document) -> Result<Vec<Document>, QueryError> {
        (**self).find_equal(namespace, key)
    }

    fn insert(&self, namespace: &Namespace, document: Document) -> Result<(), QueryError> {
        (**self).insert(namespace, document)
    }

    fn replace(&self, namespace: &Namespace, id: &Bson, document: Document) -> Result<(), QueryError> {
        (**self).replace(namespace, id, document)
    }
}

/// Collections in memory, for tests and for pipelines over literal documents.
#[derive(Debug, Default)]
pub struct InMemorySource {
    collections: Mutex<BTreeMap<Namespace, Vec<Document>>>,
}

impl InMemorySource {
    pub fn new() -> InMemorySource {
        InMemorySource::default()
    }

    pub fn with_collection(self, namespace: Namespace, documents: Vec<Document>) -> InMemorySource {
        self.lock().insert(namespace, documents);
        self
    }

    /// The collection's current documents (empty if it does not exist).
    pub fn contents(&self, namespace: &Namespace) -> Vec<Document> {
        self.lock().get(namespace).cloned().unwrap_or_default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<Namespace, Vec<Document>>> {
        match self.collections.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

fn same_id(document: &Document, id: &Bson) -> bool {
    document.get("_id").is_some_and(|existing| document::values_equal(existing, id))
}

impl CollectionSource for InMemorySource {
    fn scan(&self, namespace: &Namespace) -> Result<Vec<Document>, QueryError> {
        Ok(self.contents(namespace))
    }

    fn replace_contents(&self, namespace: &Namespace, documents: Vec<Document>) -> Result<(), QueryError> {
        let mut documents = documents;
        for document in &mut documents {
            if !document.contains_key("_id") {
                document.insert("_id", bson::oid::ObjectId::new());
            }
        }
        for (i, a) in documents.iter().enumerate() {
            let id = a.get("_id").cloned().unwrap_or(Bson::Null);
            if documents.iter().skip(i + 1).any(|b| same_id(b, &id)) {
                return Err(duplicate_id(namespace, id));
            }
        }
        self.lock().insert(namespace.clone(), documents);
        Ok(())
    }

    fn find_equal(&self, namespace: &Namespace, key: &Document) -> Result<Vec<Document>, QueryError> {
        let matches = |document: &Document| {
            key.iter().all(|(field, wanted)| {
                let path: Vec<String> = field.split('.').map(str::to_string).collect();
                document::path::get_dotted(document, &path).is_some_and(|v| document::values_equal(v, wanted))
            })
        };
        Ok(self.contents(namespace).into_iter().filter(|d| matches(d)).collect())
    }

    fn insert(&self, namespace: &Namespace, document: Document) -> Result<(), QueryError> {
        let mut document = document;
        if !document.contains_key("_id") {
            document.insert("_id", bson::oid::ObjectId::new());
        }
        let mut collections = self.lock();
        let collection = collections.entry(namespace.clone()).or_default();
        let id = document.get("_id").cloned().unwrap_or(Bson::Null);
        if collection.iter().any(|d| same_id(d, &id)) {
            return Err(duplicate_id(namespace, id));
        }
        collection.push(document);
        Ok(())
    }

    fn replace(&self, namespace: &Namespace, id: &Bson, document: Document) -> Result<(), QueryError> {
        let mut collections = self.lock();
        let collection = collections.entry(namespace.clone()).or_default();
        match collection.iter_mut().find(|d| same_id(d, id)) {
            Some(slot) => {
                *slot = document;
                Ok(())
            }
            None => Err(fail(crate::error::ErrorCode::BadValue, format!("no document with _id {id} to replace"))),
        }
    }
}

/// MongoDB's duplicate key error for an `_id` already in `namespace`.
fn duplicate_id(namespace: &Namespace, id: Bson) -> QueryError {
    let message = vocabulary::duplicate_key_message(
        &format!("{}.{}", namespace.db, namespace.collection),
        "_id_",
        &bson::doc! { "_id": id },
    );
    fail(crate::error::ErrorCode::DuplicateKey, message)
}
