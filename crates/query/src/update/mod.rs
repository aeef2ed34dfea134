//! Updates: replacement documents and update operators, with MongoDB's semantics and errors.
//!
//! [`Update::parse`] validates the whole update first (unknown operators, bad arguments,
//! conflicting paths, array filters that are missing, duplicated or unused), so that applying
//! it only fails on what depends on the document (`$inc` on a string, a path through a scalar,
//! changing `_id`). [`Update::apply`] returns the new document and whether it changed.
//!
//! Order: the concrete paths of all operators are resolved against the document as it was,
//! then applied in path order (field names compared as strings, array indexes as numbers),
//! which is the order MongoDB 5+ creates new fields in.
//!
//! Upserts: [`upsert_seed`] builds the inserted document's start from the filter's equality
//! fields (top level and under `$and`); [`Update::apply_upsert`] applies the update to it with
//! `$setOnInsert` active. The caller adds an `_id` if the result has none.
//!
//! Pipeline-style updates (an array of stages) belong to [`crate::pipeline`], not here.

mod array_filters;
mod operator;
mod path;

use std::cmp::Ordering;

use bson::{Bson, Document};
use document::compare_values;

pub use array_filters::ArrayFilters;
pub use operator::{Change, Context, Operation};
pub use path::{Part, UpdatePath};

use crate::error::{QueryError, Result};
use crate::filter::{MatchExpr, Predicate};

/// A parsed update.
#[derive(Debug, Clone)]
pub enum Update {
    Replacement(Document),
    Operators(Operators),
}

/// Operator updates: each field's operation, in the order given.
#[derive(Debug, Clone)]
pub struct Operators {
    fields: Vec<FieldUpdate>,
    array_filters: ArrayFilters,
}

#[derive(Debug, Clone)]
struct FieldUpdate {
    path: UpdatePath,
    operation: Operation,
}

/// What applying an update needs beyond the document.
#[derive(Debug, Clone, Copy)]
pub struct ApplyOptions {
    /// The filter's match position, for `$` in paths.
    pub position: Option<usize>,
    /// The time `$currentDate` writes.
    pub now: bson::DateTime,
}

/// The result of applying an update.
#[derive(Debug, Clone, PartialEq)]
pub struct Updated {
    pub document: Document,
    pub modified: bool,
}

impl Update {
    /// Parses an update document (operators or a replacement) with its `arrayFilters`.
    pub fn parse(update: &Document, array_filters: &[Document]) -> Result<Update> {
        let is_operators = update.keys().next().is_some_and(|key| key.starts_with('$'));
        if !is_operators {
            if let Some(key) = update.keys().find(|key| key.starts_with('$')) {
                return Err(QueryError::DollarPrefixedFieldName(format!(
                    "The dollar ($) prefixed field '{key}' in '{key}' is not allowed in the context of an update's replacement document. Consider using an aggregation pipeline with $replaceWith."
                )));
            }
            if !array_filters.is_empty() {
                return Err(QueryError::failed_to_parse(
                    "arrayFilters may not be specified for replacement-style updates",
                ));
            }
            return Ok(Update::Replacement(update.clone()));
        }
        Ok(Update::Operators(Operators::parse(update, array_filters)?))
    }

    /// Applies the update to an existing document.
    pub fn apply(&self, document: &Document, options: &ApplyOptions) -> Result<Updated> {
        let updated = match self {
            Update::Replacement(replacement) => replace(document, replacement),
            Update::Operators(operators) => operators.apply(document, options, false)?,
        };
        check_id_unchanged(document, &updated)?;
        let modified = updated != *document;
        Ok(Updated { document: updated, modified })
    }

    /// The document an upsert inserts when `filter` matched nothing.
    pub fn apply_upsert(&self, filter: &Document, options: &ApplyOptions) -> Result<Document> {
        let seed = upsert_seed(filter)?;
        let inserted = match self {
            Update::Replacement(replacement) => replace(&seed, replacement),
            Update::Operators(operators) => operators.apply(&seed, options, true)?,
        };
        check_id_unchanged(&seed, &inserted)?;
        Ok(inserted)
    }
}

/// A replacement keeps the original `_id`, first.
fn replace(original: &Document, replacement: &Document) -> Document {
    let mut out = Document::new();
    match (replacement.get("_id"), original.get("_id")) {
        (Some(id), _) | (None, Some(id)) => {
            out.insert("_id", id.clone());
        }
        (None, None) => {}
    }
    for (key, value) in replacement {
        if key != "_id" {
            out.insert(key.clone(), value.clone());
        }
    }
    out
}

fn check_id_unchanged(before: &Document, after: &Document) -> Result<()> {
    let Some(old) = before.get("_id") else {
        return Ok(());
    };
    match after.get("_id") {
        Some(new) if compare_values(old, new) == Ordering::Equal && old.element_type() == new.element_type() => Ok(()),
        _ => Err(QueryError::ImmutableField(
            "Performing an update on the path '_id' would modify the immutable field '_id'".into(),
        )),
    }
}

impl Operators {
    fn parse(update: &Document, array_filter_documents: &[Document]) -> Result<Operators> {
        let array_filters = ArrayFilters::parse(array_filter_documents)?;
        let mut fields: Vec<FieldUpdate> = Vec::new();
        let mut claimed: Vec<UpdatePath> = Vec::new();
        for (name, argument) in update {
            let Bson::Document(arguments) = argument else {
                if !name.starts_with('$') {
                    return Err(QueryError::failed_to_parse(format!(
                        "Unknown modifier: {name}. Expected a valid update modifier or pipeline-style update specified as an array"
                    )));
                }
                return Err(QueryError::failed_to_parse(format!(
                    "Modifiers operate on fields but we found type {} instead. For example: {{$mod: {{<field>: ...}}}} not {{{name}: {argument}}}",
                    crate::filter::type_name(argument)
                )));
            };
            for (field, value) in arguments {
                let path = UpdatePath::parse(field)?;
                let operation = operator::parse(name, field, value)?;
                claim(&mut claimed, &path)?;
                if let Operation::Rename(destination) = &operation {
                    claim(&mut claimed, destination)?;
                }
                fields.push(FieldUpdate { path, operation });
            }
        }
        check_array_filters_used(&array_filters, &fields, update)?;
        Ok(Operators { fields, array_filters })
    }

    fn apply(&self, document: &Document, options: &ApplyOptions, inserting: bool) -> Result<Document> {
        let resolver = path::Resolver { position: options.position, array_filters: &self.array_filters };
        let mut planned: Vec<(Vec<String>, &FieldUpdate)> = Vec::new();
        for field in &self.fields {
            for concrete in resolver.resolve(document, &field.path)? {
                planned.push((concrete, field));
            }
        }
        planned.sort_by(|(a, _), (b, _)| compare_paths(a, b));
        let mut out = document.clone();
        let context = Context { id: document.get("_id"), inserting, now: options.now };
        for (concrete, field) in planned {
            let shown = concrete.join(".");
            if let Operation::Rename(destination) = &field.operation {
                rename(&mut out, &concrete, destination)?;
                continue;
            }
            let change = operator::compute(&field.operation, &shown, path::get(&out, &concrete), &context)?;
            match change {
                Change::Set(value) => path::set(&mut out, &concrete, value)?,
                Change::Unset => {
                    path::remove(&mut out, &concrete);
                }
                Change::Keep => {}
            }
        }
        Ok(out)
    }
}

/// Records a path, failing if it overlaps one already claimed.
fn claim(claimed: &mut Vec<UpdatePath>, path: &UpdatePath) -> Result<()> {
    if let Some(existing) = claimed.iter().find(|existing| path::conflicts(existing, path)) {
        let shorter = if existing.text.len() <= path.text.len() { existing } else { path };
        return Err(QueryError::ConflictingUpdateOperators(format!(
            "Updating the path '{}' would create a conflict at '{}'",
            path.text, shorter.text
        )));
    }
    claimed.push(path.clone());
    Ok(())
}

fn check_array_filters_used(filters: &ArrayFilters, fields: &[FieldUpdate], update: &Document) -> Result<()> {
    for identifier in filters.identifiers() {
        let used = fields.iter().any(|field| field.path.identifiers().any(|id| id == identifier));
        if !used {
            return Err(QueryError::failed_to_parse(format!(
                "The array filter for identifier '{identifier}' was not used in the update {update}"
            )));
        }
    }
    for field in fields {
        for identifier in field.path.identifiers() {
            if !filters.identifiers().any(|id| id == identifier) {
                return Err(QueryError::bad_value(format!(
                    "No array filter found for identifier '{identifier}' in path '{}'",
                    field.path.text
                )));
            }
        }
    }
    Ok(())
}

/// Field names as strings, except that two array indexes compare as numbers.
fn compare_paths(a: &[String], b: &[String]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        let order = match (document::path::array_index(x), document::path::array_index(y)) {
            (Some(i), Some(j)) => i.cmp(&j),
            _ => x.cmp(y),
        };
        if order != Ordering::Equal {
            return order;
        }
    }
    a.len().cmp(&b.len())
}

fn rename(document: &mut Document, source: &[String], destination: &UpdatePath) -> Result<()> {
    let Some(value) = path::get(document, source).cloned() else {
        return Ok(());
    };
    let target: Vec<String> = destination
        .parts
        .iter()
        .filter_map(|part| match part {
            Part::Field(name) => Some(name.clone()),
            _ => None,
        })
        .collect();
    path::remove(document, source);
    path::set(document, &target, value)
}

/// The equality fields of a filter, as the start of an upserted document.
pub fn upsert_seed(filter: &Document) -> Result<Document> {
    let parsed = crate::filter::Filter::parse(filter)?;
    let mut equalities: Vec<(document::path::FieldPath, Bson)> = Vec::new();
    collect_equalities(parsed.root(), &mut equalities);
    let mut seed = Document::new();
    let mut claimed: Vec<UpdatePath> = Vec::new();
    equalities.sort_by_key(|(path, _)| path.head() != "_id");
    for (field, value) in equalities {
        let as_update_path = UpdatePath::parse(field.as_str())?;
        if claimed.iter().any(|existing| path::conflicts(existing, &as_update_path)) {
            return Err(crate::error::fail(
                crate::error::ErrorCode::NotSingleValueField,
                format!("cannot infer query fields to set, path '{field}' is matched twice"),
            ));
        }
        claimed.push(as_update_path);
        path::set(&mut seed, field.parts(), value)?;
    }
    Ok(seed)
}

fn collect_equalities(expr: &MatchExpr, out: &mut Vec<(document::path::FieldPath, Bson)>) {
    match expr {
        MatchExpr::And(children) => {
            for child in children {
                collect_equalities(child, out);
            }
        }
        MatchExpr::Or(children) if children.len() == 1 => collect_equalities(&children[0], out),
        MatchExpr::Path { path, predicate } => collect_predicate(path, predicate, out),
        _ => {}
    }
}

fn collect_predicate(
    path: &document::path::FieldPath,
    predicate: &Predicate,
    out: &mut Vec<(document::path::FieldPath, Bson)>,
) {
    match predicate {
        Predicate::Eq(value) => out.push((path.clone(), value.clone())),
        Predicate::And(predicates) => {
            for inner in predicates {
                collect_predicate(path, inner, out);
            }
        }
        _ => {}
    }
}
