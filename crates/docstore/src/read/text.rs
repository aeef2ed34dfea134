//! `$text` queries: the collection's text index finds the documents with any of the search's
//! terms, each scored by the sum of its terms' scores (`index::text`); the rest of the filter,
//! the negated terms and the phrases are then checked on each document; `{$meta: "textScore"}`
//! in the projection or the sort reads the score.
//!
//! `$text` is read at the top level of the filter (or in its top-level `$and`); elsewhere the
//! filter parser refuses it. Results are materialized (a search's matches, not a collection),
//! in `_id` order unless sorted. An aggregation whose first `$match` has `$text` gets each
//! score in a hidden field (`query::meta`) for its `$meta` expressions and sorts.
//! `$caseSensitive`/`$diacriticSensitive`: the index (which folds case and diacritics) finds the
//! candidates by the folded terms, and each document's text, analyzed as the query asks, must
//! then hold one of the terms as the query spells them (and none of its negated ones); phrases
//! compare the same way. explain shows MongoDB's TEXT_MATCH plan (`text_plan`) with the run's
//! counts.

use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Arc;

use bson::{Bson, Document, RawDocumentBuf, doc};
use document::keycodec::{Direction, decode_key};
use query::filter::Filter;
use query::projection::Projection;
use query::sort::SortSpec;

use crate::catalog::Descriptor;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::index::Index;
use crate::index::text::{TextQuery, phrase_under};
use crate::operation;
use crate::read::bounds::{extend_prefix, key_range};
use crate::read::find::{Cursor, FindRequest};
use crate::read::scan::{ExecutionCounters, raw};

/// Splits a filter into its `$text` query and the rest; `None` without `$text`.
pub(crate) fn extract(filter: &Document) -> Result<Option<(TextQuery, Document)>> {
    if let Some(spec) = filter.get("$text") {
        let mut rest = filter.clone();
        rest.remove("$text");
        return Ok(Some((TextQuery::parse(spec)?, rest)));
    }
    let Some(Bson::Array(clauses)) = filter.get("$and") else { return Ok(None) };
    let Some(position) = clauses.iter().position(|c| matches!(c, Bson::Document(c) if c.contains_key("$text"))) else {
        return Ok(None);
    };
    let mut clauses = clauses.clone();
    let Bson::Document(clause) = clauses.remove(position) else { return Ok(None) };
    let Some((query, clause_rest)) = extract(&clause)? else { return Ok(None) };
    if !clause_rest.is_empty() {
        clauses.push(Bson::Document(clause_rest));
    }
    let mut rest = filter.clone();
    if clauses.is_empty() {
        rest.remove("$and");
    } else {
        rest.insert("$and", clauses);
    }
    Ok(Some((query, rest)))
}

/// The filter without its `$text` (checked): what a write re-checks on a document it is about
/// to change (the text part chose the document through the index).
pub(crate) fn without_text(filter: &Document) -> Result<std::borrow::Cow<'_, Document>> {
    match extract(filter)? {
        Some((_, rest)) => Ok(std::borrow::Cow::Owned(rest)),
        None => Ok(std::borrow::Cow::Borrowed(filter)),
    }
}

impl Context {
    /// Runs a find whose filter has `$text` (see the module header).
    pub(crate) fn find_text(
        self: &Arc<Context>,
        collection: &Descriptor,
        request: &FindRequest,
        query: TextQuery,
        rest: &Document,
        counters: &ExecutionCounters,
    ) -> Result<Cursor> {
        let (index, spec) =
            text_index(collection).ok_or_else(|| Error::IndexNotFound("text index required for $text query".into()))?;
        let query = query.analyzed(query.language.unwrap_or(spec.default_language));
        let snapshot = self.snapshot_for(request.read_at.as_ref());
        self.index_usage.note(&index.meta.tree);
        let prefix = equality_prefix(spec, index, rest)?;
        let scores = term_scores(&snapshot, index, &prefix, &query.terms, counters)?;
        let filter = Filter::parse(rest)?.with_variables(Arc::clone(&request.variables));
        let mut found: Vec<(RawDocumentBuf, f64)> = Vec::new();
        for (id, score) in scores {
            operation::check()?;
            let Some(bytes) = snapshot.get(collection.tree, &id)? else { continue };
            operation::doc_examined();
            ExecutionCounters::add(&counters.docs_examined);
            let document = raw(bytes)?;
            if filter.matches_raw(&document)? && text_holds(spec, &query, &document)? {
                found.push((document, score));
            }
        }
        if let Some(sort) = &request.sort {
            sort_found(sort, &mut found)?;
        }
        let (skip, limit) = request.window();
        let shown = found.into_iter().skip(skip).take(limit);
        let documents = match &request.projection {
            Some(projection) => project(projection, shown)?,
            None => shown.map(|(document, _)| document).collect(),
        };
        counters.returned.fetch_add(documents.len() as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(Cursor::from_documents(documents))
    }

    /// explain's winning plan for a find with `$text`, in MongoDB's shape: TEXT_MATCH over a
    /// FETCH of one index scan per term (a TEXT_OR, which sums scores, when the score is asked
    /// for; else an OR); `None` without `$text` or a text index.
    pub(crate) fn text_plan(&self, db: &str, name: &str, request: &FindRequest) -> Result<Option<Document>> {
        let Some((query, _)) = extract(&request.filter)? else { return Ok(None) };
        let Some(collection) = self.catalog.collection(db, name) else { return Ok(None) };
        let Some((index, spec)) = text_index(&collection) else { return Ok(None) };
        let query = query.analyzed(query.language.unwrap_or(spec.default_language));
        // One scan per term; MongoDB shows a text scan's bounds as `{}` (the term is in
        // parsedTextQuery).
        let scan = |_term: &String| {
            Bson::Document(doc! {
                "stage": "IXSCAN",
                "keyPattern": index.key_pattern.clone(),
                "indexName": index.name.clone(),
                "isMultiKey": true,
                "direction": "backward",
                "indexBounds": {},
            })
        };
        let scored = wants_score(request.projection.as_ref()) || wants_score(request.sort.as_ref());
        let union = doc! {
            "stage": if scored { "TEXT_OR" } else { "OR" },
            "inputStages": query.terms.iter().map(scan).collect::<Vec<_>>(),
        };
        Ok(Some(doc! {
            "stage": "TEXT_MATCH",
            "indexPrefix": index_prefix(spec, &request.filter),
            "indexName": index.name.clone(),
            "parsedTextQuery": {
                "terms": query.terms.clone(),
                "negatedTerms": query.negated.clone(),
                "phrases": query.phrases.clone(),
                "negatedPhrases": query.negated_phrases.clone(),
            },
            "textIndexVersion": 3,
            "inputStage": {"stage": "FETCH", "inputStage": union},
        }))
    }
}

/// The collection's text index (ready), with its settings.
fn text_index(collection: &Descriptor) -> Option<(&Index, &crate::index::text::TextSpec)> {
    collection
        .indexes
        .iter()
        .filter(|index| index.meta.ready)
        .find_map(|index| index.text.as_ref().map(|spec| (index, spec)))
}

/// The encoded values a compound text index's prefix fields must equal, read from the rest of
/// the filter (`{field: value}` or `{field: {$eq: value}}` at its top level); MongoDB's error
/// when one is missing.
fn equality_prefix(spec: &crate::index::text::TextSpec, index: &Index, rest: &Document) -> Result<Vec<u8>> {
    let mut prefix = Vec::new();
    for ((field, _), direction) in spec.prefix.iter().zip(index.directions()) {
        let value = match rest.get(field) {
            Some(Bson::Document(operators)) if operators.keys().any(|k| k.starts_with('$')) => {
                operators.get("$eq").filter(|_| operators.len() == 1)
            }
            Some(Bson::Array(_) | Bson::RegularExpression(_)) => None,
            other => other,
        };
        let Some(value) = value else {
            return Err(Error::bad_value(
                "error processing query: planner returned error :: caused by :: failed to use text index to satisfy $text query (if text index is compound, are equality predicates given for all prefix fields?)",
            ));
        };
        prefix = extend_prefix(&prefix, value, direction);
    }
    Ok(prefix)
}

/// explain's `indexPrefix`: the prefix fields' equalities as the filter gives them.
fn index_prefix(spec: &crate::index::text::TextSpec, filter: &Document) -> Document {
    spec.prefix.iter().filter_map(|(field, _)| filter.get(field).map(|value| (field.clone(), value.clone()))).collect()
}

/// Whether a projection or sort reads `{$meta: "textScore"}`.
fn wants_score(spec: Option<&Document>) -> bool {
    spec.is_some_and(|spec| spec.values().any(query::meta::is_text_score))
}

/// Each document with any of the terms, by its encoded `_id`, with the sum of the terms'
/// scores; in `_id` order.
fn term_scores(
    snapshot: &storage::Snapshot,
    index: &Index,
    prefix: &[u8],
    terms: &[String],
    counters: &ExecutionCounters,
) -> Result<Vec<(Vec<u8>, f64)>> {
    let mut scores: HashMap<Vec<u8>, f64> = HashMap::new();
    let score_at = index.text.as_ref().map_or(0, |spec| spec.prefix.len()) + 1;
    for term in terms {
        let prefix = extend_prefix(prefix, &Bson::String(term.clone()), Direction::Ascending);
        let range = key_range(&prefix, None, Direction::Ascending);
        for item in snapshot.range::<(Bound<&[u8]>, Bound<&[u8]>)>(index.tree, range.bounds()) {
            operation::check()?;
            operation::key_examined();
            ExecutionCounters::add(&counters.keys_examined);
            let (key, value) = item?;
            let entry = index.decode_entry(key, value)?;
            let values = decode_key(&entry.order, &entry.payload, &index.directions())
                .map_err(|e| Error::corrupt(format!("index {}: {e}", index.name)))?;
            let score = match values.get(score_at) {
                Some(Bson::Double(score)) => *score,
                _ => 0.0,
            };
            *scores.entry(entry.id).or_default() += score;
        }
    }
    let mut scores: Vec<(Vec<u8>, f64)> = scores.into_iter().collect();
    scores.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(scores)
}

/// What the index could not check: with `$caseSensitive` or `$diacriticSensitive`, one of the
/// terms as the query spells it; no negated term; every phrase; no negated phrase.
fn text_holds(spec: &crate::index::text::TextSpec, query: &TextQuery, raw: &RawDocumentBuf) -> Result<bool> {
    let sensitive = query.sensitivity.any();
    if !sensitive && query.negated.is_empty() && query.phrases.is_empty() && query.negated_phrases.is_empty() {
        return Ok(true);
    }
    let document = Document::try_from(raw.as_ref()).map_err(|e| Error::corrupt(format!("stored document: {e}")))?;
    let strings = spec.strings(&document);
    let (wanted, negated) = match sensitive {
        true => (&query.sensitive_terms, &query.sensitive_negated),
        false => (&query.terms, &query.negated),
    };
    if sensitive || !negated.is_empty() {
        let language = spec.language_of(&document)?;
        let terms: std::collections::HashSet<String> =
            strings.iter().flat_map(|(text, _)| language.terms_with(text, query.sensitivity)).collect();
        // Without a sensitivity the index already chose a document with one of the terms.
        if sensitive && !wanted.iter().any(|term| terms.contains(term)) {
            return Ok(false);
        }
        if negated.iter().any(|term| terms.contains(term)) {
            return Ok(false);
        }
    }
    let texts: Vec<String> = strings.iter().map(|(text, _)| phrase_under(text, query.sensitivity)).collect();
    let contains = |phrase: &String| texts.iter().any(|text| text.contains(phrase.as_str()));
    Ok(query.phrases.iter().all(contains) && !query.negated_phrases.iter().any(contains))
}

/// Sorts by the sort's keys in order: `{$meta: "textScore"}` by score, highest first; the
/// others as a find sorts them.
fn sort_found(sort: &Document, found: &mut [(RawDocumentBuf, f64)]) -> Result<()> {
    let mut keys: Vec<Option<SortSpec>> = Vec::with_capacity(sort.len());
    for (field, direction) in sort {
        keys.push(match direction {
            meta if query::meta::is_text_score(meta) => None,
            _ => Some(SortSpec::parse(&bson::doc! {field.clone(): direction.clone()})?),
        });
    }
    let mut sort_keys: Vec<Vec<Vec<Bson>>> = Vec::with_capacity(found.len());
    for (document, _) in found.iter() {
        let mut per_key = Vec::with_capacity(keys.len());
        for key in keys.iter().flatten() {
            per_key.push(key.key_raw(document)?);
        }
        sort_keys.push(per_key);
    }
    let mut order: Vec<usize> = (0..found.len()).collect();
    order.sort_by(|&a, &b| {
        let mut field = 0;
        for key in &keys {
            let ordering = match key {
                None => found[b].1.total_cmp(&found[a].1),
                Some(spec) => {
                    let ordering = spec.compare_keys(&sort_keys[a][field], &sort_keys[b][field]);
                    field += 1;
                    ordering
                }
            };
            if ordering.is_ne() {
                return ordering;
            }
        }
        std::cmp::Ordering::Equal
    });
    let sorted: Vec<(RawDocumentBuf, f64)> = order.iter().map(|&i| found[i].clone()).collect();
    found.clone_from_slice(&sorted);
    Ok(())
}

/// The projection without its `{$meta: "textScore"}` fields, then those fields set to the
/// score.
fn project(spec: &Document, found: impl Iterator<Item = (RawDocumentBuf, f64)>) -> Result<Vec<RawDocumentBuf>> {
    let meta: Vec<&String> =
        spec.iter().filter(|(_, value)| query::meta::is_text_score(value)).map(|(name, _)| name).collect();
    let rest: Document = spec
        .iter()
        .filter(|(_, value)| !query::meta::is_text_score(value))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let projection = if rest.is_empty() { None } else { Some(Projection::parse(&rest)?) };
    let mut out = Vec::new();
    for (raw_document, score) in found {
        let document = Document::try_from(raw_document.as_ref()).map_err(|e| Error::corrupt(e.to_string()))?;
        let mut shown = match &projection {
            Some(projection) => projection.apply(&document, None)?,
            None => document,
        };
        for name in &meta {
            shown.insert((*name).clone(), score);
        }
        out.push(RawDocumentBuf::try_from(&shown).map_err(|e| Error::corrupt(e.to_string()))?);
    }
    Ok(out)
}
