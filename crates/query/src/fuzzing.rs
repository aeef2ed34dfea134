//! Fuzz entry points for the query language: not part of the crate's API. [`filter`] and
//! [`update`] are the bodies of the `filter` and `update` cargo-fuzz targets (`fuzz/`), and
//! `tests/fuzz_corpus.rs` replays the committed corpora through them on stable.
//! Each takes any bytes, returns nothing, and panics only when a promise breaks.
//!
//! Input of both: BSON documents back to back (what cannot be read as one ends the list); each
//! must keep the stored-document rules (`document::stored`), as the wire and the store see to
//! for a real command.
//!
//! - `filter`: the first document is a filter; it is matched against the others and a few fixed
//!   documents of every type. Where it parses, matching a document and its stored bytes
//!   (`matches_raw`) agree, as do `matches_with_position` and the `$match` stage, and
//!   `{$nor: [filter]}` matches exactly the documents it does not. The same document is also
//!   parsed as a projection and a sort, applied to the same documents (a sort key read from the
//!   bytes equals the decoded document's).
//! - `update`: the first document is an update (operators, a replacement, or a pipeline when its
//!   first field is `"0"`, as an array is encoded); the second, if any, the document to update
//!   (otherwise the fixed ones); the rest its `arrayFilters`. Where it parses it is applied with
//!   each positional match, as an upsert with the target as filter, and again to its own result;
//!   what it returns is a document that encodes to BSON.

use bson::{Binary, Bson, DateTime, Decimal128, Document, JavaScriptCodeWithScope, RawDocument, RawDocumentBuf, Regex};
use bson::{Timestamp, doc, oid::ObjectId, raw::cstr, spec::BinarySubtype};

use crate::expr::Variables;
use crate::filter::Filter;
use crate::pipeline::{MatchStage, apply_pipeline_update};
use crate::projection::Projection;
use crate::sort::SortSpec;
use crate::update::{ApplyOptions, Update};

/// At most this many documents are read from one input.
const MOST_DOCUMENTS: usize = 8;

/// The `filter` fuzz target.
pub fn filter(data: &[u8]) {
    let mut documents = read_documents(data);
    if documents.is_empty() {
        return;
    }
    let spec = documents.remove(0);
    documents.extend(fixed_documents());
    if let Ok(filter) = Filter::parse(&spec) {
        let negated = Filter::parse(&doc! { "$nor": [spec.clone()] }).ok();
        let stage = MatchStage::parse(&spec).ok();
        for document in &documents {
            check_match(&filter, negated.as_ref(), stage.as_ref(), document);
        }
        let _ = (filter.paths_read(), filter.fields_read());
    }
    if let Ok(projection) = Projection::parse(&spec) {
        for (position, document) in documents.iter().enumerate() {
            let _ = projection.apply(document, Some(position));
        }
    }
    if let Ok(sort) = SortSpec::parse(&spec) {
        for document in &documents {
            let Ok(raw) = RawDocumentBuf::try_from(document) else { continue };
            if let Ok(key) = sort.key_raw(&raw) {
                let decoded = sort.key(document);
                assert_eq!(sort.compare_keys(&key, &decoded), std::cmp::Ordering::Equal, "a sort key from bytes");
            }
            if let Ok(bytes) = sort.key_bytes_raw(&raw) {
                assert_eq!(bytes, sort.key_bytes(document), "sort key bytes from the stored bytes");
            }
        }
        sort.sort(&mut documents);
    }
}

fn check_match(filter: &Filter, negated: Option<&Filter>, stage: Option<&MatchStage>, document: &Document) {
    let matched = filter.matches(document);
    if let Ok(raw) = RawDocumentBuf::try_from(document) {
        let from_bytes = filter.matches_raw(&raw);
        match (&matched, &from_bytes) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "matches and matches_raw differ on {document}"),
            (Err(_), Err(_)) => {}
            _ => panic!("matches and matches_raw disagree on {document}: {matched:?} vs {from_bytes:?}"),
        }
    }
    let Ok(matched) = matched else { return };
    if let Ok(position) = filter.matches_with_position(document) {
        assert_eq!(position.is_some(), matched, "matches_with_position agrees with matches on {document}");
    }
    if let Some(Ok(stage_matched)) = stage.map(|stage| stage.matches(document, &Variables::new())) {
        assert_eq!(stage_matched, matched, "$match agrees with the filter on {document}");
    }
    if let Some(Ok(not_matched)) = negated.map(|negated| negated.matches(document)) {
        assert_ne!(not_matched, matched, "$nor of the filter matches exactly what it does not, on {document}");
    }
}

/// The `update` fuzz target.
pub fn update(data: &[u8]) {
    let mut documents = read_documents(data);
    if documents.is_empty() {
        return;
    }
    let spec = documents.remove(0);
    let targets = if documents.is_empty() { fixed_documents() } else { vec![documents.remove(0)] };
    let array_filters = documents;
    if spec.keys().next().is_some_and(|key| key == "0") {
        let stages: Vec<Bson> = spec.values().cloned().collect();
        for target in &targets {
            if let Ok(updated) = apply_pipeline_update(target, &stages) {
                check_encodes(&updated);
            }
        }
        return;
    }
    let Ok(update) = Update::parse(&spec, &array_filters) else { return };
    let now = DateTime::from_millis(1_700_000_000_000);
    for target in &targets {
        for position in [None, Some(0), Some(1)] {
            let options = ApplyOptions { position, now };
            if let Ok(updated) = update.apply(target, &options) {
                assert_eq!(updated.modified, updated.document != *target);
                check_encodes(&updated.document);
                if let Ok(again) = update.apply(&updated.document, &options) {
                    check_encodes(&again.document);
                }
            }
            if let Ok(inserted) = update.apply_upsert(target, &options) {
                check_encodes(&inserted);
            }
        }
    }
}

/// What an update returns is a document the store can take (its size and depth are the
/// store's checks, made after).
fn check_encodes(document: &Document) {
    let raw = RawDocumentBuf::try_from(document).unwrap_or_else(|error| panic!("{document} does not encode: {error}"));
    let _ = document::stored::check(&raw);
}

/// The documents at the start of `data`, back to back, each within the stored-document rules.
fn read_documents(data: &[u8]) -> Vec<Document> {
    let mut documents = Vec::new();
    let mut rest = data;
    while documents.len() < MOST_DOCUMENTS {
        let Some(len) = rest.get(..4).and_then(|b| b.try_into().ok()).map(i32::from_le_bytes) else { break };
        let Some(bytes) = usize::try_from(len).ok().and_then(|len| rest.get(..len)) else { break };
        let Ok(raw) = RawDocument::from_bytes(bytes) else { break };
        if document::stored::check(raw).is_err() {
            break;
        }
        let Ok(document) = Document::try_from(raw) else { break };
        documents.push(document);
        rest = rest.get(bytes.len()..).unwrap_or_default();
    }
    documents
}

/// Documents with every BSON type, nested documents and arrays, arrays of documents, and the
/// empty document.
fn fixed_documents() -> Vec<Document> {
    vec![
        doc! {
            "_id": 1, "a": 1, "b": "x", "c": [1, 2, 3], "d": { "e": 5, "f": [{ "g": 1 }, { "g": 2, "h": [7] }] },
            "n": Bson::Null,
        },
        doc! {
            "_id": 2,
            "a": [{ "b": 1 }, { "b": [2, 3] }, 4],
            "s": "Hello, world",
            "dt": DateTime::from_millis(1_600_000_000_000),
            "ts": Timestamp { time: 5, increment: 6 },
            "re": Regex { pattern: cstr!("^h.*o$").into(), options: cstr!("i").into() },
            "bin": Binary { subtype: BinarySubtype::Generic, bytes: vec![1, 2, 3] },
            "uuid": Binary { subtype: BinarySubtype::Uuid, bytes: vec![0; 16] },
            "oid": ObjectId::from_bytes([7; 12]),
            "dec": Decimal128::from_bytes([1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x40, 0x30]),
            "big": i64::MAX,
            "small": i32::MIN,
            "dbl": 1.5,
            "nan": f64::NAN,
            "inf": f64::NEG_INFINITY,
            "t": true,
        },
        Document::new(),
        doc! {
            "_id": "text",
            "a": { "b": { "c": [[1, 2], [3]] } },
            "arr": [],
            "min": Bson::MinKey,
            "max": Bson::MaxKey,
            "u": Bson::Undefined,
            "code": Bson::JavaScriptCode("return 1".into()),
            "scope": JavaScriptCodeWithScope { code: "x".into(), scope: doc! { "x": 1 } },
            "sym": Bson::Symbol("sym".into()),
            "0": "zero",
            "": "empty name",
        },
    ]
}
