//! Dotted field paths (`a.b.0.c`) and the values a document holds at one.
//!
//! MongoDB reads a path three ways, and each has a function here:
//!
//! - [`match_candidates`]: what a query filter compares against. Arrays are traversed
//!   implicitly: on `{a: [{b: 1}, {b: [2, 3]}]}` the path `a.b` yields `1`, `2`, `3` and the
//!   array `[2, 3]` itself. A sub-document lacking the rest of the path yields
//!   [`Candidate::Missing`] (so `{"a.b": null}` matches `{a: [{c: 1}]}`), a scalar inside a
//!   traversed array yields nothing, and a path that reaches nothing at all yields one `Missing`
//!   unless it stopped inside an array. A numeric component also indexes the array positionally.
//! - [`IndexSpec::keys`]: the index keys of a document (MongoDB's key generator): the last array
//!   on a path is expanded into one key per element, an empty one into `undefined`, a missing
//!   field into `null` (or no key at all for a sparse index when every field is missing);
//!   compound keys are the cross product of the fields' values, deduplicated; two fields that
//!   traverse different arrays are the "cannot index parallel arrays" error.
//!   A `hashed` field (at most one per index) holds MongoDB's hash of the value
//!   ([`crate::hash`]) instead of the value; it may not reach an array (error 16766), so it
//!   never makes an index multikey.
//! - [`get_dotted`]: the one value at a path, no traversal (numeric components index arrays).
//!
//! Invariant of [`FieldPath`]: at least one component and no empty component.

use std::cmp::Ordering;

use bson::{Bson, Document, RawDocument};

use crate::error::{Error, Result};
use crate::keycodec::{Direction, EncodedKey, KeyEncoder};
use crate::order::compare_values;
use crate::scan::{self, Scalar};

/// A parsed dotted path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FieldPath {
    text: String,
    parts: Vec<String>,
}

impl FieldPath {
    pub fn parse(text: &str) -> Result<FieldPath> {
        if text.is_empty() {
            return Err(Error::InvalidPath("FieldPath cannot be constructed with empty string".into()));
        }
        let parts: Vec<String> = text.split('.').map(str::to_string).collect();
        if parts.iter().any(String::is_empty) {
            return Err(Error::InvalidPath(format!("FieldPath field names may not be empty strings: '{text}'")));
        }
        Ok(FieldPath { text: text.to_string(), parts })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn parts(&self) -> &[String] {
        &self.parts
    }

    /// The first component: the top-level field the path starts from.
    pub fn head(&self) -> &str {
        self.parts.first().map_or("", String::as_str)
    }
}

impl std::fmt::Display for FieldPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// Whether a path component is an array index (`0`, `12`; not `-1`, `+1` or `01`).
pub fn array_index(component: &str) -> Option<usize> {
    let valid = !component.is_empty()
        && component.bytes().all(|b| b.is_ascii_digit())
        && (component == "0" || !component.starts_with('0'));
    if valid { component.parse().ok() } else { None }
}

/// One value a filter compares against; see the module header.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Candidate<'a> {
    /// The path does not exist here.
    Missing,
    /// The value at the end of the path (an array is also yielded whole, after its elements).
    Value(&'a Bson),
    /// An element of an array that ends the path.
    ArrayElement(&'a Bson),
}

impl<'a> Candidate<'a> {
    pub fn value(self) -> Option<&'a Bson> {
        match self {
            Candidate::Missing => None,
            Candidate::Value(value) | Candidate::ArrayElement(value) => Some(value),
        }
    }
}

/// The values a filter on `path` compares against, in MongoDB's iteration order.
pub fn match_candidates<'a>(document: &'a Document, path: &[String]) -> Vec<Candidate<'a>> {
    located_candidates(document, path).into_iter().map(|located| located.candidate).collect()
}

/// A candidate and, when the path went through an array, the index of the element of the
/// first such array it came from (what the positional `$` operator refers to).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Located<'a> {
    pub candidate: Candidate<'a>,
    pub position: Option<usize>,
}

/// [`match_candidates`] with the positions of the first array traversed.
pub fn located_candidates<'a>(document: &'a Document, path: &[String]) -> Vec<Located<'a>> {
    let mut out = Vec::new();
    candidates_in_document(document, path, None, &mut out);
    out
}

/// The candidates of a value taken as a whole field value (its elements, then itself).
pub fn match_candidates_of_value(value: &Bson) -> Vec<Located<'_>> {
    let mut out = Vec::new();
    candidates_in_value(value, &[], None, &mut out);
    out
}

fn push<'a>(out: &mut Vec<Located<'a>>, candidate: Candidate<'a>, position: Option<usize>) {
    out.push(Located { candidate, position });
}

fn candidates_in_document<'a>(
    document: &'a Document,
    path: &[String],
    position: Option<usize>,
    out: &mut Vec<Located<'a>>,
) {
    let Some((head, rest)) = path.split_first() else {
        return;
    };
    match document.get(head) {
        None => push(out, Candidate::Missing, position),
        Some(value) => candidates_in_value(value, rest, position, out),
    }
}

fn candidates_in_value<'a>(value: &'a Bson, rest: &[String], position: Option<usize>, out: &mut Vec<Located<'a>>) {
    match value {
        Bson::Array(array) if rest.is_empty() => {
            for (index, element) in array.iter().enumerate() {
                push(out, Candidate::ArrayElement(element), position.or(Some(index)));
            }
            push(out, Candidate::Value(value), position);
        }
        _ if rest.is_empty() => push(out, Candidate::Value(value), position),
        Bson::Document(document) => candidates_in_document(document, rest, position, out),
        Bson::Array(array) => candidates_in_array(array, rest, position, out),
        _ => push(out, Candidate::Missing, position),
    }
}

fn candidates_in_array<'a>(array: &'a [Bson], rest: &[String], position: Option<usize>, out: &mut Vec<Located<'a>>) {
    let Some((head, after)) = rest.split_first() else {
        return;
    };
    let wanted = array_index(head);
    for (index, element) in array.iter().enumerate() {
        let here = position.or(Some(index));
        if wanted == Some(index) {
            // Positional: the element itself, then a plain dotted lookup below it.
            match get_dotted_value(element, after) {
                Some(found) => push(out, Candidate::Value(found), here),
                None => push(out, Candidate::Missing, here),
            }
        }
        if let Bson::Document(document) = element {
            if wanted.is_some() && !document.contains_key(head) {
                // A numeric component meant the position, not a missing field of each element.
                continue;
            }
            candidates_in_document(document, rest, here, out);
        }
    }
}

/// The single value at `path`, without array traversal (numeric components index arrays).
pub fn get_dotted<'a>(document: &'a Document, path: &[String]) -> Option<&'a Bson> {
    let (head, rest) = path.split_first()?;
    get_dotted_value(document.get(head)?, rest)
}

fn get_dotted_value<'a>(value: &'a Bson, path: &[String]) -> Option<&'a Bson> {
    let mut current = value;
    for component in path {
        current = match current {
            Bson::Document(document) => document.get(component)?,
            Bson::Array(array) => array.get(array_index(component)?)?,
            _ => return None,
        };
    }
    Some(current)
}

/// Decodes only the top-level fields named in `heads` (matching may decode, but not the
/// unrelated fields, e.g. a 2 KB `bio` when the filter is on `name`).
pub fn decode_fields<'h>(raw: &RawDocument, heads: impl IntoIterator<Item = &'h str> + Clone) -> Result<Document> {
    let mut document = Document::new();
    // Elements, not (key, value) pairs: a value is parsed (a string's UTF-8 checked) only when
    // its field is wanted, so a 2 KB text field nobody reads is skipped, not validated again.
    for element in raw.iter_elements() {
        let element = element.map_err(|e| Error::InvalidBson(e.to_string()))?;
        let key = element.key().as_str();
        if heads.clone().into_iter().any(|head| head == key) {
            let value = element.value().map_err(|e| Error::InvalidBson(e.to_string()))?;
            let value = Bson::try_from(value).map_err(|e| Error::InvalidBson(e.to_string()))?;
            document.insert(key, value);
        }
    }
    Ok(document)
}

/// The values an index on `path` would hold for the document: the last array expanded, `[]`
/// as `undefined`, nothing found as an empty list (the caller decides: `null`, or skip).
/// Sorting uses these too: MongoDB sorts by the smallest (ascending) or largest key.
pub fn index_values(document: &Document, path: &[String]) -> Vec<Bson> {
    FieldValues::collect(document, path).values
}

/// Whether a sparse index skips documents missing every indexed field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sparseness {
    Dense,
    Sparse,
}

/// An index key pattern such as `{a: 1, "b.c": -1}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexSpec {
    fields: Vec<(FieldPath, Direction)>,
    sparseness: Sparseness,
    /// The position of the `"hashed"` field, if any (its direction is ascending).
    hashed: Option<usize>,
}

/// The keys one document yields for an index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexKeys {
    /// Distinct keys, in key order; empty when a sparse index skips the document.
    pub keys: Vec<EncodedKey>,
    /// Whether any indexed path went through an array (the index becomes multikey).
    pub multikey: bool,
}

impl IndexSpec {
    /// Parses a key pattern: positive numbers ascend, negative descend, `"hashed"` hashes.
    pub fn from_key_pattern(pattern: &Document, sparseness: Sparseness) -> Result<IndexSpec> {
        if pattern.is_empty() {
            return Err(Error::BadIndexSpec("index key pattern is empty".into()));
        }
        let mut fields = Vec::with_capacity(pattern.len());
        let mut hashed = None;
        for (position, (name, direction)) in pattern.iter().enumerate() {
            let direction = match direction {
                Bson::String(kind) if kind == "hashed" && hashed.is_none() => {
                    hashed = Some(position);
                    Direction::Ascending
                }
                Bson::Int32(i) if *i != 0 => sign_direction(i64::from(*i)),
                Bson::Int64(i) if *i != 0 => sign_direction(*i),
                Bson::Double(d) if *d != 0.0 && !d.is_nan() => sign_direction(if *d > 0.0 { 1 } else { -1 }),
                other => return Err(Error::BadIndexSpec(format!("unsupported value for field '{name}': {other}"))),
            };
            fields.push((FieldPath::parse(name)?, direction));
        }
        Ok(IndexSpec { fields, sparseness, hashed })
    }

    /// The position of the hashed field, if the index has one.
    pub fn hashed(&self) -> Option<usize> {
        self.hashed
    }

    pub fn fields(&self) -> &[(FieldPath, Direction)] {
        &self.fields
    }

    pub fn directions(&self) -> Vec<Direction> {
        self.fields.iter().map(|(_, direction)| *direction).collect()
    }

    /// The keys of a stored document, decoding only the fields the index reads.
    pub fn keys_raw(&self, raw: &RawDocument) -> Result<IndexKeys> {
        if self.hashed.is_none()
            && let Some(key) = self.top_level_key_raw(raw)?
        {
            return Ok(IndexKeys { keys: vec![key], multikey: false });
        }
        let document = decode_fields(raw, self.fields.iter().map(|(path, _)| path.head()))?;
        self.keys(&document)
    }

    /// The commonest case read straight from the stored bytes, without building a `Document`:
    /// every indexed field a top-level field the document has, of a type `scan::scalar` reads.
    /// `None` sends the document down the general path (dotted paths, missing fields, arrays,
    /// other types), which this must agree with: a repeated field name counts by its last
    /// occurrence, as `decode_fields` does.
    fn top_level_key_raw(&self, raw: &RawDocument) -> Result<Option<EncodedKey>> {
        const MOST_FIELDS: usize = 4;
        if self.fields.len() > MOST_FIELDS || self.fields.iter().any(|(path, _)| path.parts().len() != 1) {
            return Ok(None);
        }
        // Per field, its last occurrence: `Some(None)` for a value this path does not read.
        let mut values: [Option<Option<Scalar<'_>>>; MOST_FIELDS] = Default::default();
        let scanned = scan::for_each_element(raw.as_bytes(), |element| {
            for ((path, _), slot) in self.fields.iter().zip(values.iter_mut()) {
                if path.head().as_bytes() == element.name {
                    *slot = Some(scan::scalar(&element));
                }
            }
        });
        if scanned.is_none() {
            return Ok(None);
        }
        let mut encoder = KeyEncoder::new();
        for ((_, direction), value) in self.fields.iter().zip(values) {
            match value {
                Some(Some(value)) => encoder.push_scalar(value, *direction),
                _ => return Ok(None),
            }
        }
        Ok(Some(encoder.finish()))
    }

    /// The keys of a document (see the module header for MongoDB's rules).
    pub fn keys(&self, document: &Document) -> Result<IndexKeys> {
        if self.hashed.is_none()
            && let Some(key) = self.single_key(document)
        {
            return Ok(IndexKeys { keys: vec![key], multikey: false });
        }
        let tuples = self.key_values(document)?;
        let multikey = tuples.multikey;
        let keys = tuples
            .values
            .iter()
            .map(|tuple| {
                let mut encoder = KeyEncoder::new();
                for (value, (_, direction)) in tuple.iter().zip(&self.fields) {
                    encoder.push(value, *direction);
                }
                encoder.finish()
            })
            .collect();
        Ok(IndexKeys { keys, multikey })
    }

    /// The common case without arrays: one value per field, encoded without copies.
    fn single_key(&self, document: &Document) -> Option<EncodedKey> {
        let mut encoder = KeyEncoder::new();
        for (path, direction) in &self.fields {
            match get_dotted(document, path.parts()) {
                Some(Bson::Array(_)) => return None,
                Some(value) => encoder.push(value, *direction),
                None if self.sparseness == Sparseness::Dense && !path_has_array(document, path.parts()) => {
                    encoder.push(&Bson::Null, *direction);
                }
                None => return None,
            }
        }
        Some(encoder.finish())
    }

    /// The key tuples as values, sorted by the index's order and deduplicated.
    pub fn key_values(&self, document: &Document) -> Result<KeyValues> {
        let mut per_field = Vec::with_capacity(self.fields.len());
        for (path, _) in &self.fields {
            per_field.push(FieldValues::collect(document, path.parts()));
        }
        if let Some(position) = self.hashed
            && !per_field[position].array_paths.is_empty()
        {
            return Err(Error::HashedArray);
        }
        self.check_parallel_arrays(&per_field)?;
        let multikey = per_field.iter().any(|field| !field.array_paths.is_empty());
        if self.sparseness == Sparseness::Sparse && per_field.iter().all(|field| field.values.is_empty()) {
            return Ok(KeyValues { values: Vec::new(), multikey });
        }
        let mut tuples: Vec<Vec<Bson>> = vec![Vec::new()];
        for (position, field) in per_field.iter().enumerate() {
            let mut values = if field.values.is_empty() { vec![Bson::Null] } else { field.values.clone() };
            if self.hashed == Some(position) {
                // One value: a hashed path reaches no array (checked above).
                values = values.iter().map(|value| Bson::Int64(crate::hash::hash_value(value))).collect();
            }
            tuples = tuples
                .iter()
                .flat_map(|prefix| {
                    values.iter().map(move |value| {
                        let mut tuple = prefix.clone();
                        tuple.push(value.clone());
                        tuple
                    })
                })
                .collect();
        }
        let directions = self.directions();
        let order = |a: &Vec<Bson>, b: &Vec<Bson>| {
            a.iter().zip(b).zip(&directions).fold(Ordering::Equal, |acc, ((x, y), direction)| {
                acc.then_with(|| direction.apply(compare_values(x, y)))
            })
        };
        tuples.sort_by(order);
        tuples.dedup_by(|a, b| order(a, b) == Ordering::Equal);
        Ok(KeyValues { values: tuples, multikey })
    }

    fn check_parallel_arrays(&self, per_field: &[FieldValues]) -> Result<()> {
        for (i, first) in per_field.iter().enumerate() {
            for (j, second) in per_field.iter().enumerate().skip(i + 1) {
                let first_only = first.array_paths.iter().any(|p| !second.array_paths.contains(p));
                let second_only = second.array_paths.iter().any(|p| !first.array_paths.contains(p));
                if first_only && second_only {
                    return Err(Error::ParallelArrays {
                        first: self.fields[j].0.to_string(),
                        second: self.fields[i].0.to_string(),
                    });
                }
            }
        }
        Ok(())
    }
}

/// Whether any prefix of the path holds an array (then the general key generator decides).
fn path_has_array(document: &Document, path: &[String]) -> bool {
    (1..=path.len()).any(|length| matches!(get_dotted(document, &path[..length]), Some(Bson::Array(_))))
}

fn sign_direction(sign: i64) -> Direction {
    if sign > 0 { Direction::Ascending } else { Direction::Descending }
}

/// Key tuples of one document, for tests and covered-query checks.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyValues {
    pub values: Vec<Vec<Bson>>,
    pub multikey: bool,
}

/// The values one indexed path yields, and the array prefixes it went through.
struct FieldValues {
    values: Vec<Bson>,
    array_paths: Vec<String>,
}

impl FieldValues {
    fn collect(document: &Document, parts: &[String]) -> FieldValues {
        let mut field = FieldValues { values: Vec::new(), array_paths: Vec::new() };
        field.walk_document(document, parts, 0, parts);
        field.array_paths.sort();
        field.array_paths.dedup();
        field
    }

    /// MongoDB's `getFieldsDotted` with the last array expanded.
    fn walk_document(&mut self, document: &Document, rest: &[String], depth: usize, all: &[String]) {
        let Some((head, after)) = rest.split_first() else {
            return;
        };
        let Some(value) = document.get(head) else {
            return;
        };
        let depth = depth + 1;
        match value {
            Bson::Array(array) if after.is_empty() => {
                self.array_paths.push(all[..depth].join("."));
                if array.is_empty() {
                    self.values.push(Bson::Undefined);
                }
                self.values.extend(array.iter().cloned());
            }
            _ if after.is_empty() => self.values.push(value.clone()),
            Bson::Document(inner) => self.walk_document(inner, after, depth, all),
            Bson::Array(array) => {
                if let Some(index) = after.first().and_then(|next| array_index(next)) {
                    // A numeric component picks the element: not a multikey traversal.
                    if let Some(element) = array.get(index) {
                        self.walk_positional(element, after.get(1..).unwrap_or_default(), depth + 1, all);
                    }
                } else {
                    self.array_paths.push(all[..depth].join("."));
                    for element in array {
                        if let Bson::Document(inner) = element {
                            self.walk_document(inner, after, depth, all);
                        }
                    }
                }
            }
            _ => {}
        }
    }

    fn walk_positional(&mut self, element: &Bson, rest: &[String], depth: usize, all: &[String]) {
        match element {
            Bson::Array(array) if rest.is_empty() => {
                self.array_paths.push(all[..depth].join("."));
                if array.is_empty() {
                    self.values.push(Bson::Undefined);
                }
                self.values.extend(array.iter().cloned());
            }
            _ if rest.is_empty() => self.values.push(element.clone()),
            Bson::Document(inner) => self.walk_document(inner, rest, depth, all),
            _ => {}
        }
    }
}
