//! Secondary indexes: what entries a document gives an index, and their byte layout.
//!
//! Every secondary index is one engine tree. Its entries (`order`/`types` are the two parts of
//! a `document::keycodec` key, `id` is the document's encoded `_id`, the key of its document
//! in the collection tree):
//!
//! ```text
//! standard:  key = order ++ id     value = order_len:u32le ++ payload
//! unique:    key = order           value = id_len:u32le ++ id ++ payload
//! payload    = types               (standard indexes: what a covered read needs)
//!            | document bytes      (clustering indexes: reads never touch the collection tree)
//! ```
//!
//! A standard entry is written blind (a put, no read); `id` after `order` keeps entries of equal
//! keys distinct and in `_id` order. A unique entry is keyed by `order` alone so that the
//! engine's `insert_if_absent` is the uniqueness check: one point read per key, inside the
//! commit. The value is not empty, unlike the design brief's sketch: a standard key cannot be
//! split into `order` and `id` without decoding (numbers need their type tags), so the value
//! says where `order` ends.
//!
//! Invariants: the entries of an index are exactly the keys of the documents it covers (those
//! matching its partial filter; for a sparse index, those with at least one indexed field), each
//! pointing at its document's `_id` ([`crate::validate`] checks this after every test step).

pub(crate) mod build;
pub(crate) mod geo;
pub(crate) mod spec;
pub(crate) mod text;
pub(crate) mod ttl;
pub(crate) mod usage;
pub(crate) mod wildcard;

use bson::{Bson, Document, RawDocument};
use document::keycodec::{Direction, EncodedKey, decode_key};
use document::path::{IndexSpec, Sparseness};
use query::filter::Filter;
use storage::{TreeId, Writes};

use crate::catalog::entry::IndexMeta;
use crate::error::{Error, Result};

/// How an index lays out its entries (see the module header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    Standard,
    Unique,
}

/// A secondary index, parsed from its catalog entry.
#[derive(Debug, Clone)]
pub struct Index {
    pub name: String,
    pub key_pattern: Document,
    pub spec: IndexSpec,
    pub layout: Layout,
    pub sparse: bool,
    pub clustering: bool,
    pub partial: Option<(Document, Filter)>,
    pub expire_after_seconds: Option<i64>,
    /// Maintained, but not for the planner (`hidden: true`).
    pub hidden: bool,
    /// A text index's settings: its keys are `(term, score)` (`text`), read only by `$text`.
    pub text: Option<text::TextSpec>,
    /// A non-simple collation: the keys hold its surrogates of strings, not the strings.
    pub collation: Option<query::collation::Collation>,
    /// A geospatial index's kind: its keys are cells (`geo`), read only by `$near`/`$geoNear`.
    pub geo: Option<geo::GeoKind>,
    /// A wildcard index's scope: its keys are `(path, value)` (`wildcard`).
    pub wildcard: Option<wildcard::Wildcard>,
    pub tree: TreeId,
    pub meta: IndexMeta,
}

/// One entry read back from an index tree.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub order: Vec<u8>,
    pub id: Vec<u8>,
    pub payload: Vec<u8>,
}

impl Index {
    pub fn open(meta: &IndexMeta, tree: TreeId) -> Result<Index> {
        let parsed = spec::ParsedSpec::from_normalized(&meta.spec)?;
        let sparseness = if parsed.sparse { Sparseness::Sparse } else { Sparseness::Dense };
        let spec = match (&parsed.text, &parsed.geo) {
            // `(prefix..., term, score, suffix...)`.
            (Some(text), _) => {
                let mut pattern: Document = text.prefix.iter().cloned().collect();
                pattern.insert("_fts", 1);
                pattern.insert("_ftsx", 1);
                pattern.extend(text.suffix.iter().cloned());
                IndexSpec::from_key_pattern(&pattern, Sparseness::Dense)?
            }
            // `(path, value)`, in the direction the pattern gives.
            (None, None) if parsed.wildcard.is_some() => {
                let direction = parsed.key.values().next().cloned().unwrap_or(Bson::Int32(1));
                IndexSpec::from_key_pattern(&bson::doc! {"$_path": 1, "$_value": direction}, Sparseness::Sparse)?
            }
            // The location field ascending (its keys are cells, `geo_keys`), the others as given.
            (None, Some(_)) => {
                let pattern: Document = parsed
                    .key
                    .iter()
                    .map(|(field, kind)| match kind {
                        Bson::String(_) => (field.clone(), Bson::Int32(1)),
                        direction => (field.clone(), direction.clone()),
                    })
                    .collect();
                IndexSpec::from_key_pattern(&pattern, Sparseness::Sparse)?
            }
            (None, None) => IndexSpec::from_key_pattern(&parsed.key, sparseness)?,
        };
        let partial = match &parsed.partial {
            Some(filter) => Some((filter.clone(), Filter::parse(filter)?)),
            None => None,
        };
        Ok(Index {
            name: parsed.name,
            key_pattern: parsed.key,
            spec,
            layout: if parsed.unique { Layout::Unique } else { Layout::Standard },
            sparse: parsed.sparse,
            clustering: parsed.clustering,
            partial,
            expire_after_seconds: parsed.expire_after_seconds,
            hidden: parsed.hidden,
            text: parsed.text,
            geo: parsed.geo.map(|(kind, _)| kind),
            wildcard: parsed.wildcard.map(|(scope, _)| scope),
            collation: parsed
                .collation
                .as_ref()
                .map(|spec| query::collation::Collation::parse(&Bson::Document(spec.clone())))
                .transpose()?,
            tree,
            meta: meta.clone(),
        })
    }

    pub fn directions(&self) -> Vec<Direction> {
        self.spec.directions()
    }

    pub fn is_unique(&self) -> bool {
        self.layout == Layout::Unique
    }

    /// The keys the document gives this index (none when the partial filter excludes it), and
    /// whether they make the index multikey.
    pub fn keys(&self, raw: &RawDocument) -> Result<(Vec<EncodedKey>, bool)> {
        if let Some((_, filter)) = &self.partial
            && !filter.matches_raw(raw)?
        {
            return Ok((Vec::new(), false));
        }
        if let Some(text) = &self.text {
            return text_keys(text, self.spec.fields(), raw);
        }
        // A geo index's other fields take the collation's surrogates in `geo_keys`.
        if let Some(kind) = &self.geo {
            return self.geo_keys(kind, raw);
        }
        if let Some(collation) = &self.collation {
            return self.collated_keys(collation, raw);
        }
        if let Some(scope) = &self.wildcard {
            return self.wildcard_keys(scope, raw);
        }
        let keys = self.spec.keys_raw(raw)?;
        let multikey = keys.multikey || keys.keys.len() > 1;
        Ok((keys.keys, multikey))
    }

    /// The keys of a collated index: the indexed fields' strings replaced by the collation's
    /// surrogates (ordered and equal as it orders and equates them) before the keys are made.
    fn collated_keys(
        &self,
        collation: &query::collation::Collation,
        raw: &RawDocument,
    ) -> Result<(Vec<EncodedKey>, bool)> {
        let heads = self.spec.fields().iter().map(|(path, _)| path.head());
        let fields = document::path::decode_fields(raw, heads)?;
        let surrogates: Document =
            fields.iter().map(|(name, value)| (name.clone(), collation.surrogate(value).into_owned())).collect();
        let keys = self.spec.keys(&surrogates)?;
        let multikey = keys.multikey || keys.keys.len() > 1;
        Ok((keys.keys, multikey))
    }

    /// Where the location field sits in a geospatial index's key (`None`: not a geo index).
    pub fn geo_position(&self) -> Option<usize> {
        self.geo.as_ref()?;
        self.key_pattern
            .values()
            .position(|kind| matches!(kind, Bson::String(kind) if kind == "2dsphere" || kind == "2d"))
    }

    /// A geospatial index's keys: the cell of each location at its path, with the values of
    /// the other fields around it (every combination, as a compound index holds arrays). No
    /// location, no key: the location field alone decides whether a document is indexed.
    fn geo_keys(&self, kind: &geo::GeoKind, raw: &RawDocument) -> Result<(Vec<EncodedKey>, bool)> {
        let Some(position) = self.geo_position() else { return Ok((Vec::new(), false)) };
        let fields = self.spec.fields();
        let fields_doc = document::path::decode_fields(raw, fields.iter().map(|(path, _)| path.head()))?;
        let mut columns: Vec<Vec<Bson>> = Vec::with_capacity(fields.len());
        // As in any compound index, at most one field other than the location holds an array.
        let mut array_field: Option<&str> = None;
        for (i, (path, _)) in fields.iter().enumerate() {
            let mut values: Vec<Bson> = if i == position {
                let mut cells = Vec::new();
                for value in path_values(&fields_doc, path.parts()) {
                    cells.extend(kind.locations(value)?.iter().map(|found| kind.cell(found)));
                }
                if cells.is_empty() {
                    return Ok((Vec::new(), false));
                }
                cells.into_iter().map(Bson::Int64).collect()
            } else {
                let values = document::path::index_values(&fields_doc, path.parts());
                if values.len() > 1
                    && let Some(first) = array_field.replace(path.as_str())
                {
                    return Err(document::Error::ParallelArrays {
                        first: first.to_owned(),
                        second: path.as_str().to_owned(),
                    }
                    .into());
                }
                match &self.collation {
                    Some(collation) => values.iter().map(|v| collation.surrogate(v).into_owned()).collect(),
                    None => values,
                }
            };
            if values.is_empty() {
                values.push(Bson::Null);
            }
            values.sort_by(document::compare_values);
            values.dedup_by(|a, b| document::compare_values(a, b).is_eq());
            columns.push(values);
        }
        let mut keys: Vec<EncodedKey> = Vec::new();
        let mut combination = vec![0usize; columns.len()];
        'combinations: loop {
            let mut encoder = document::keycodec::KeyEncoder::new();
            for ((column, chosen), (_, direction)) in columns.iter().zip(&combination).zip(fields) {
                encoder.push(&column[*chosen], *direction);
            }
            keys.push(encoder.finish());
            for (digit, column) in combination.iter_mut().zip(&columns).rev() {
                *digit += 1;
                if *digit < column.len() {
                    continue 'combinations;
                }
                *digit = 0;
            }
            break;
        }
        let multikey = keys.len() > 1;
        Ok((keys, multikey))
    }

    /// A wildcard index's keys: `(path, value)` for each leaf in its scope.
    fn wildcard_keys(&self, scope: &wildcard::Wildcard, raw: &RawDocument) -> Result<(Vec<EncodedKey>, bool)> {
        let document = Document::try_from(raw).map_err(|e| Error::corrupt(format!("stored document: {e}")))?;
        let direction = self.spec.fields().get(1).map_or(Direction::Ascending, |(_, direction)| *direction);
        let mut keys: Vec<EncodedKey> = scope
            .keys(&document)
            .into_iter()
            .map(|(path, value)| {
                let mut encoder = document::keycodec::KeyEncoder::new();
                encoder.push(&Bson::String(path), Direction::Ascending);
                encoder.push(&value, direction);
                encoder.finish()
            })
            .collect();
        keys.sort_by(|a, b| a.order.cmp(&b.order));
        keys.dedup_by(|a, b| a.order == b.order);
        let multikey = keys.len() > 1;
        Ok((keys, multikey))
    }

    /// Whether only its own operator reads this index (`$text`, `$near`): never the planner.
    pub fn is_special(&self) -> bool {
        self.text.is_some() || self.geo.is_some()
    }

    fn payload<'a>(&self, key: &'a EncodedKey, raw: &'a RawDocument) -> &'a [u8] {
        if self.clustering { raw.as_bytes() } else { &key.types }
    }

    /// Adds the entries of a document (`unique`: checked by the engine at commit).
    pub fn add(&self, txn: &mut dyn Writes, id: &[u8], raw: &RawDocument, keys: Vec<EncodedKey>) {
        for key in keys {
            let (entry_key, value) = self.entry_owned(key, id, raw);
            match self.layout {
                Layout::Standard => txn.put(self.tree, entry_key, value),
                Layout::Unique => txn.insert_if_absent(self.tree, entry_key, value),
            }
        }
    }

    /// Overwrites entries this document already owns (their payload changed).
    pub fn overwrite(&self, txn: &mut dyn Writes, id: &[u8], raw: &RawDocument, keys: &[&EncodedKey]) {
        for key in keys {
            let (entry_key, value) = self.entry(key, id, raw);
            txn.put(self.tree, entry_key, value);
        }
    }

    pub fn remove(&self, txn: &mut dyn Writes, id: &[u8], keys: &[&EncodedKey]) {
        for key in keys {
            txn.delete(self.tree, self.entry_key(&key.order, id));
        }
    }

    /// The logical bytes (key and value) of the entry a key makes (collStats' index sizes).
    pub fn entry_bytes(&self, key: &EncodedKey, id: &[u8], raw: &RawDocument) -> i64 {
        let payload = if self.clustering { raw.as_bytes().len() } else { key.types.len() };
        (key.order.len() + id.len() + 4 + payload) as i64
    }

    pub fn entry_key(&self, order: &[u8], id: &[u8]) -> Vec<u8> {
        match self.layout {
            Layout::Standard => [order, id].concat(),
            Layout::Unique => order.to_vec(),
        }
    }

    /// The (key, value) pair a key of a document is stored as.
    pub fn entry_pair(&self, key: &EncodedKey, id: &[u8], raw: &RawDocument) -> (Vec<u8>, Vec<u8>) {
        self.entry(key, id, raw)
    }

    fn entry(&self, key: &EncodedKey, id: &[u8], raw: &RawDocument) -> (Vec<u8>, Vec<u8>) {
        let entry_key = match self.layout {
            Layout::Standard => [key.order.as_slice(), id].concat(),
            Layout::Unique => key.order.clone(),
        };
        (entry_key, self.entry_value(key, id, raw))
    }

    /// `entry` for a key the caller is done with: the entry key is the key's own bytes (the
    /// `_id` appended in place), and unless the index is clustering the value is built in the
    /// key's `types` buffer (`KeyEncoder` leaves room for a standard entry's header).
    fn entry_owned(&self, key: EncodedKey, id: &[u8], raw: &RawDocument) -> (Vec<u8>, Vec<u8>) {
        let value = if self.clustering {
            self.entry_value(&key, id, raw)
        } else {
            let (length, id_part) = self.value_header(key.order.len(), id);
            let mut value = key.types;
            value.splice(0..0, length.into_iter().chain(id_part.iter().copied()));
            value
        };
        let mut entry_key = key.order;
        if matches!(self.layout, Layout::Standard) {
            entry_key.extend_from_slice(id);
        }
        (entry_key, value)
    }

    /// The value an entry is stored with: `value_header`, then the payload.
    fn entry_value(&self, key: &EncodedKey, id: &[u8], raw: &RawDocument) -> Vec<u8> {
        let (length, id_part) = self.value_header(key.order.len(), id);
        let payload = self.payload(key, raw);
        let mut value = Vec::with_capacity(length.len() + id_part.len() + payload.len());
        value.extend_from_slice(&length);
        value.extend_from_slice(id_part);
        value.extend_from_slice(payload);
        value
    }

    /// What an entry's value holds before its payload: the length of the part of its key before
    /// the `_id` (standard), or the `_id`'s length and the `_id` itself (unique).
    fn value_header<'a>(&self, order_len: usize, id: &'a [u8]) -> ([u8; 4], &'a [u8]) {
        match self.layout {
            Layout::Standard => (length(order_len).to_le_bytes(), &[]),
            Layout::Unique => (length(id.len()).to_le_bytes(), id),
        }
    }

    /// Splits a stored entry back into its parts (bytes from disk: errors, never panics).
    pub fn decode_entry(&self, key: Vec<u8>, value: Vec<u8>) -> Result<Entry> {
        let (length, rest) = split_length(&value)?;
        match self.layout {
            Layout::Standard => {
                if length > key.len() {
                    return Err(Error::corrupt(format!("index {}: entry key shorter than its order part", self.name)));
                }
                let mut order = key;
                let id = order.split_off(length);
                Ok(Entry { order, id, payload: rest.to_vec() })
            }
            Layout::Unique => {
                if length > rest.len() {
                    return Err(Error::corrupt(format!("index {}: entry value shorter than its id", self.name)));
                }
                let (id, payload) = rest.split_at(length);
                Ok(Entry { order: key, id: id.to_vec(), payload: payload.to_vec() })
            }
        }
    }

    /// The key's values, named by the key pattern's fields (a duplicate key's `keyValue`).
    pub fn key_document(&self, key: &EncodedKey) -> Document {
        let values = decode_key(&key.order, &key.types, &self.directions()).unwrap_or_default();
        let mut document = Document::new();
        for ((name, _), value) in self.key_pattern.iter().zip(values) {
            document.insert(name.clone(), value);
        }
        document
    }
}

/// A text index's keys: `(term, score)` per distinct term of the document, after the values
/// of its prefix fields and before those of its suffix fields (one value each: an array there
/// is refused, as MongoDB refuses it), each in its direction of the index's key (`fields`).
fn text_keys(
    text: &text::TextSpec,
    fields: &[(document::path::FieldPath, Direction)],
    raw: &RawDocument,
) -> Result<(Vec<EncodedKey>, bool)> {
    let document = Document::try_from(raw).map_err(|e| Error::corrupt(format!("stored document: {e}")))?;
    let scalar = |(field, _): &(String, Bson), direction: &Direction| -> Result<(Bson, Direction)> {
        let parts: Vec<String> = field.split('.').map(str::to_owned).collect();
        match path_values(&document, &parts).as_slice() {
            [] => Ok((Bson::Null, *direction)),
            [Bson::Array(_)] | [_, _, ..] => Err(Error::Query(query::error::fail(
                vocabulary::location::TEXT_INDEX_NON_TEXT_FIELD_IS_ARRAY,
                format!("A compound text index cannot hold an array in its non-text field '{field}'"),
            ))),
            [value] => Ok(((*value).clone(), *direction)),
        }
    };
    let suffix_fields = &fields[fields.len().saturating_sub(text.suffix.len())..];
    let before: Vec<(Bson, Direction)> =
        text.prefix.iter().zip(fields).map(|(f, (_, d))| scalar(f, d)).collect::<Result<_>>()?;
    let after: Vec<(Bson, Direction)> =
        text.suffix.iter().zip(suffix_fields).map(|(f, (_, d))| scalar(f, d)).collect::<Result<_>>()?;
    let keys: Vec<EncodedKey> = text
        .terms(&document)?
        .into_iter()
        .map(|(term, score)| {
            let mut encoder = document::keycodec::KeyEncoder::new();
            for (value, direction) in &before {
                encoder.push(value, *direction);
            }
            encoder.push(&Bson::String(term), Direction::Ascending);
            encoder.push(&Bson::Double(score), Direction::Ascending);
            for (value, direction) in &after {
                encoder.push(value, *direction);
            }
            encoder.finish()
        })
        .collect();
    let multikey = keys.len() > 1;
    Ok((keys, multikey))
}

fn length(n: usize) -> u32 {
    // Keys are bounded by the engine's 64 KiB limit, so this never saturates in practice.
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn split_length(value: &[u8]) -> Result<(usize, &[u8])> {
    match value.split_first_chunk::<4>() {
        Some((head, rest)) => Ok((u32::from_le_bytes(*head) as usize, rest)),
        None => Err(Error::corrupt("index entry value shorter than 4 bytes")),
    }
}

/// The values at a dotted path, through arrays of documents on the way; the last value is kept
/// whole (a legacy pair is an array; a text field may hold an array of strings).
pub(crate) fn path_values<'d>(document: &'d Document, parts: &[String]) -> Vec<&'d Bson> {
    let mut out = Vec::new();
    if let Some((head, rest)) = parts.split_first()
        && let Some(value) = document.get(head)
    {
        walk_path(value, rest, &mut out);
    }
    out
}

fn walk_path<'d>(value: &'d Bson, rest: &[String], out: &mut Vec<&'d Bson>) {
    let Some((head, tail)) = rest.split_first() else {
        out.push(value);
        return;
    };
    match value {
        Bson::Document(inner) => {
            if let Some(next) = inner.get(head) {
                walk_path(next, tail, out);
            }
        }
        Bson::Array(items) => items.iter().for_each(|item| walk_path(item, rest, out)),
        _ => {}
    }
}

/// The collection tree key of an `_id` value.
pub(crate) fn id_key(id: &Bson) -> Vec<u8> {
    document::keycodec::encode_value(id)
}
