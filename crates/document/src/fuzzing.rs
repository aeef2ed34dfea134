//! Fuzz entry point for documents as the store receives and reads them: not part of the crate's
//! API. [`document`] is the body of the `document` cargo-fuzz target (`fuzz/`), and
//! `tests/fuzz_corpus.rs` replays the committed corpus through it on stable. It
//! takes any bytes, returns nothing, and panics only when a promise breaks.
//!
//! Bytes that frame a BSON document (`RawDocument::from_bytes`) go where an inserted document
//! goes: the stored-document rules (`stored::check`), then, if it keeps them, the index keys of
//! several key patterns (the raw fast path must give what the decoded document gives), and the
//! order of its values (reflexive, antisymmetric, and the same as `memcmp` of their index-key
//! bytes, both directions; a key decodes back to values equal to its own). Other bytes are read
//! as an index key off the disk (`decode_key`): an error or values, never a panic, and values
//! that encode and decode to themselves.
//!
//! Key input (when not BSON): `components_and_directions:u8 types_len:u8 types order`.

use std::cmp::Ordering;

use bson::{Bson, Document, RawDocument, doc};

use crate::keycodec::{Direction, decode_key, decode_key_prefix, encode_key};
use crate::path::{IndexSpec, Sparseness};
use crate::{compare_values, stored, values_equal};

/// Values compared pairwise: the first this many of a document's (top-level and nested).
const MOST_VALUES: usize = 12;

/// The `document` fuzz target.
pub fn document(data: &[u8]) {
    match RawDocument::from_bytes(data) {
        Ok(raw) => stored_document(raw),
        Err(_) => key_bytes(data),
    }
}

fn stored_document(raw: &RawDocument) {
    if stored::check(raw).is_err() {
        return;
    }
    let Ok(document) = Document::try_from(raw) else { return };
    for spec in key_patterns(&document) {
        for sparseness in [Sparseness::Dense, Sparseness::Sparse] {
            let Ok(spec) = IndexSpec::from_key_pattern(&spec, sparseness) else { continue };
            let decoded = spec.keys(&document);
            let from_bytes = spec.keys_raw(raw);
            match (&decoded, &from_bytes) {
                (Ok(decoded), Ok(from_bytes)) => {
                    assert_eq!(decoded, from_bytes, "keys_raw differs from keys for {spec:?}")
                }
                (Err(_), Err(_)) => {}
                _ => panic!("keys_raw and keys disagree for {spec:?}: {from_bytes:?} vs {decoded:?}"),
            }
        }
    }
    let mut values = Vec::new();
    gather_values(&document, &mut values);
    for a in &values {
        check_key_round_trip(a);
        for b in &values {
            check_order(a, b);
        }
    }
}

/// Key patterns over this document's own fields (single, compound, dotted) and a few fixed.
fn key_patterns(document: &Document) -> Vec<Document> {
    let mut patterns = vec![doc! { "_id": 1 }, doc! { "a": 1, "b": -1 }, doc! { "a.b": 1 }, doc! { "a.0": -1 }];
    let names: Vec<&String> = document.keys().take(4).collect();
    for (index, name) in names.iter().enumerate() {
        let direction = if index % 2 == 0 { 1 } else { -1 };
        patterns.push(doc! { name.as_str(): direction });
        if let Some(Bson::Document(inner)) = document.get(name.as_str())
            && let Some(field) = inner.keys().next()
        {
            patterns.push(doc! { format!("{name}.{field}"): 1 });
        }
        if let Some(Bson::Array(items)) = document.get(name.as_str())
            && let Some(Bson::Document(inner)) = items.first()
            && let Some(field) = inner.keys().next()
        {
            patterns.push(doc! { format!("{name}.{field}"): 1, format!("{name}.0"): -1 });
        }
    }
    if names.len() >= 2 {
        let mut compound = Document::new();
        for (index, name) in names.iter().enumerate() {
            compound.insert(name.as_str(), if index % 2 == 0 { -1 } else { 1 });
        }
        patterns.push(compound);
    }
    patterns
}

/// The document's values, breadth first, up to `MOST_VALUES`.
fn gather_values(document: &Document, out: &mut Vec<Bson>) {
    let mut queue: std::collections::VecDeque<&Bson> = document.values().collect();
    while let Some(value) = queue.pop_front() {
        if out.len() >= MOST_VALUES {
            return;
        }
        out.push(value.clone());
        match value {
            Bson::Document(inner) => queue.extend(inner.values()),
            Bson::Array(items) => queue.extend(items.iter()),
            _ => {}
        }
    }
}

/// `compare_values` is a total order that index-key bytes reproduce in both directions.
fn check_order(a: &Bson, b: &Bson) {
    let order = compare_values(a, b);
    assert_eq!(order, compare_values(b, a).reverse(), "compare_values is antisymmetric on {a:?} and {b:?}");
    assert_eq!(values_equal(a, b), order == Ordering::Equal);
    let ascending = |value: &Bson| encode_key(&[(value, Direction::Ascending)]).order;
    let descending = |value: &Bson| encode_key(&[(value, Direction::Descending)]).order;
    assert_eq!(ascending(a).cmp(&ascending(b)), order, "ascending key bytes order {a:?} and {b:?} as compare_values");
    assert_eq!(descending(a).cmp(&descending(b)), order.reverse(), "descending key bytes order {a:?} and {b:?}");
}

/// A key decodes to values equal to the ones encoded, of the same BSON types.
fn check_key_round_trip(value: &Bson) {
    assert_eq!(compare_values(value, value), Ordering::Equal, "compare_values is reflexive on {value:?}");
    let directions = [Direction::Ascending, Direction::Descending];
    let key = encode_key(&[(value, Direction::Ascending), (value, Direction::Descending)]);
    let decoded = decode_key(&key.order, &key.types, &directions)
        .unwrap_or_else(|error| panic!("the key of {value:?} does not decode: {error}"));
    for back in &decoded {
        assert!(values_equal(back, value), "{value:?} decodes as {back:?}");
        assert_eq!(back.element_type(), value.element_type(), "{value:?} decodes as {back:?}");
    }
}

/// Bytes read as an index key stored on disk.
fn key_bytes(data: &[u8]) {
    let [shape, types_len, rest @ ..] = data else { return };
    let count = usize::from(shape & 3) + 1;
    let directions: Vec<Direction> = (0..count)
        .map(|bit| if shape & (4 << bit) == 0 { Direction::Ascending } else { Direction::Descending })
        .collect();
    let (types, order) = rest.split_at(usize::from(*types_len).min(rest.len()));
    let _ = decode_key_prefix(order, types, &directions);
    let Ok(values) = decode_key(order, types, &directions) else { return };
    let components: Vec<(&Bson, Direction)> = values.iter().zip(directions.iter().copied()).collect();
    let again = encode_key(&components);
    let values_again = decode_key(&again.order, &again.types, &directions)
        .unwrap_or_else(|error| panic!("decoded values {values:?} re-encode to a key that does not decode: {error}"));
    for (value, back) in values.iter().zip(&values_again) {
        assert!(values_equal(value, back), "{value:?} decodes again as {back:?}");
    }
}
