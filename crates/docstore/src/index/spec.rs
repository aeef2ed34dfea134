//! Index specifications: parsing what createIndexes receives, normalizing it to what
//! listIndexes returns, and MongoDB's rules for the same index created twice.
//!
//! Supported options: `key` (ascending/descending fields, and at most one `"hashed"` field:
//! `document::hash`), `name` (default `a_1_b_-1`, `a_hashed`),
//! `unique`, `sparse`, `partialFilterExpression`, `expireAfterSeconds` (TTL, single field),
//! `clustering` (the entries hold whole documents; TokuMX's name for it), `storageEngine` (the
//! index's compression, see `crate::compression`). Accepted and ignored:
//! `v`, `background`, `ns`. A text index (`"text"` fields, with `weights`, `default_language`,
//! `language_override`, ascending or descending fields before and after) is normalized to
//! MongoDB's `{<before>, _fts: "text", _ftsx: 1, <after>}` (see
//! `index::text`). A `2dsphere` or `2d` field (one per index, a `2d` one first) makes a
//! geospatial index (`index::geo`). A non-simple `collation` (inherited from the collection's default unless
//! given) makes the index hold strings in that collation's order. Anything else, and the
//! special index types not built yet (`geoHaystack`, compound wildcard), is `CannotCreateIndex`.
//! A `$**` field (alone) makes a wildcard index (`index::wildcard`), with its
//! `wildcardProjection`.
//!
//! Same index twice: the same key pattern, name and options is a no-op; the same name with
//! another key pattern is `IndexKeySpecsConflict` (86); the same key pattern under another name
//! or with other options is `IndexOptionsConflict` (85).

use bson::{Bson, Document, doc};

use crate::error::{Error, Result};

/// Which indexes dropIndexes removes.
#[derive(Debug, Clone, PartialEq)]
pub enum IndexSelector {
    /// `"*"`: every index but `_id`.
    All,
    Name(String),
    Names(Vec<String>),
    KeyPattern(Document),
}

impl IndexSelector {
    /// Reads dropIndexes' `index` argument.
    pub fn from_bson(value: &Bson) -> Result<IndexSelector> {
        match value {
            Bson::String(name) if name == "*" => Ok(IndexSelector::All),
            Bson::String(name) => Ok(IndexSelector::Name(name.clone())),
            Bson::Document(pattern) => Ok(IndexSelector::KeyPattern(pattern.clone())),
            Bson::Array(names) => names
                .iter()
                .map(|n| n.as_str().map(str::to_string).ok_or_else(|| Error::bad_value("index names must be strings")))
                .collect::<Result<Vec<_>>>()
                .map(IndexSelector::Names),
            _ => Err(Error::bad_value("dropIndexes 'index' must be a string, an object or an array of strings")),
        }
    }
}

/// A validated index specification.
#[derive(Debug, Clone, PartialEq)]

pub(crate) struct ParsedSpec {
    pub key: Document,
    pub name: String,
    pub unique: bool,
    pub sparse: bool,
    pub clustering: bool,
    pub partial: Option<Document>,
    pub expire_after_seconds: Option<i64>,
    /// `storageEngine`, as given (its compression: `crate::compression`).
    pub storage_engine: Option<Document>,
    /// `hidden`: maintained by writes, never chosen by the planner (MongoDB 4.4+).
    pub hidden: bool,
    /// A text index's settings (its `key` is then `{<prefix>, _fts: "text", _ftsx: 1, <suffix>}`).
    pub text: Option<crate::index::text::TextSpec>,
    /// A non-simple `collation`, filled in as MongoDB reports it: the index holds strings as
    /// the collation orders them (`Index::keys`).
    pub collation: Option<Document>,
    /// A geospatial index's kind (`2dsphere`, `2d` with its bounds) and the options it was
    /// given (shown again by listIndexes).
    pub geo: Option<(crate::index::geo::GeoKind, Document)>,
    /// A wildcard index's scope, and its `wildcardProjection` as given.
    pub wildcard: Option<(crate::index::wildcard::Wildcard, Option<Document>)>,
}

impl ParsedSpec {
    /// Parses a createIndexes spec.
    pub(crate) fn parse(spec: &Document) -> Result<ParsedSpec> {
        let cannot = |message: String| Error::CannotCreateIndex(message);
        let key = match spec.get("key") {
            Some(Bson::Document(key)) => key.clone(),
            _ => return Err(cannot("The 'key' field is a required property of an index specification".into())),
        };
        check_key_pattern(&key)?;
        let text = match is_text_key(&key) {
            true => Some(crate::index::text::TextSpec::from_spec(&key, spec)?),
            false => None,
        };
        let geo = geo_kind(&key, spec)?;
        let projection = spec.get_document("wildcardProjection").ok().cloned();
        let wildcard = crate::index::wildcard::Wildcard::from_spec(&key, spec)?.map(|scope| (scope, projection));
        let name = match spec.get("name") {
            Some(Bson::String(name)) if !name.is_empty() => name.clone(),
            Some(Bson::String(_)) => return Err(cannot("The index name cannot be empty".into())),
            Some(_) => return Err(Error::bad_value("The 'name' field of an index specification must be a string")),
            None => default_name(&key),
        };
        let mut parsed = ParsedSpec {
            key,
            name,
            unique: false,
            sparse: false,
            clustering: false,
            partial: None,
            expire_after_seconds: None,
            storage_engine: None,
            hidden: false,
            text,
            collation: None,
            geo,
            wildcard,
        };
        if let Some(text) = &parsed.text {
            parsed.key = text.normalized_key();
        }
        for (option, value) in spec {
            parsed.apply_option(option, value)?;
        }
        parsed.check()?;
        Ok(parsed)
    }

    fn apply_option(&mut self, option: &str, value: &Bson) -> Result<()> {
        match option {
            "key" | "name" | "v" | "background" | "ns" => {}
            // Read by `TextSpec::from_spec`.
            "weights" | "default_language" | "language_override" | "textIndexVersion" if self.text.is_some() => {}
            // Read by `GeoKind::from_spec`.
            "2dsphereIndexVersion" | "min" | "max" | "bits" if self.geo.is_some() => {}
            "wildcardProjection" if self.wildcard.is_some() => {}
            "unique" => self.unique = query::truthy(value),
            "sparse" => self.sparse = query::truthy(value),
            "clustering" => self.clustering = query::truthy(value),
            "hidden" => match value {
                Bson::Boolean(hidden) => self.hidden = *hidden,
                _ => return Err(Error::TypeMismatch("The 'hidden' field of an index must be a bool".into())),
            },
            "storageEngine" => {
                crate::compression::from_storage_engine(value)?;
                if let Bson::Document(engines) = value {
                    self.storage_engine = Some(engines.clone());
                }
            }
            "collation" => {
                let collation = query::collation::Collation::parse_optional(Some(value))?;
                self.collation = collation.map(|collation| collation.spec().clone());
            }
            "partialFilterExpression" => match value {
                Bson::Document(filter) => {
                    query::filter::Filter::parse(filter)?;
                    self.partial = Some(filter.clone());
                }
                _ => return Err(Error::bad_value("partialFilterExpression must be an object")),
            },
            "expireAfterSeconds" => {
                let seconds = match value {
                    Bson::Int32(n) => i64::from(*n),
                    Bson::Int64(n) => *n,
                    Bson::Double(d) if d.is_finite() => *d as i64,
                    _ => return Err(Error::CannotCreateIndex("expireAfterSeconds must be a number".into())),
                };
                if seconds < 0 {
                    return Err(Error::CannotCreateIndex("expireAfterSeconds must be non-negative".into()));
                }
                self.expire_after_seconds = Some(seconds);
            }
            // MongoDB 7's answer to a field it does not know, legacy ones (`dropDups`,
            // `safe`) included.
            other => {
                return Err(Error::InvalidIndexSpecificationOption(format!(
                    "The field '{other}' is not valid for an index specification"
                )));
            }
        }
        Ok(())
    }

    fn check(&self) -> Result<()> {
        if self.sparse && self.partial.is_some() {
            return Err(Error::CannotCreateIndex(
                "cannot mix \"partialFilterExpression\" and \"sparse\" options".into(),
            ));
        }
        if self.expire_after_seconds.is_some() && self.key.len() != 1 {
            return Err(Error::CannotCreateIndex(
                "TTL indexes are single-field indexes, compound indexes do not support TTL".into(),
            ));
        }
        if self.wildcard.is_some() && (self.unique || self.sparse || self.expire_after_seconds.is_some()) {
            return Err(Error::CannotCreateIndex("a wildcard index cannot be unique, sparse or a TTL index".into()));
        }
        if self.text.is_some() && (self.unique || self.expire_after_seconds.is_some()) {
            return Err(Error::CannotCreateIndex("a text index cannot be unique or a TTL index".into()));
        }
        if self.unique && self.is_hashed() {
            return Err(Error::Query(query::error::fail(
                vocabulary::location::HASHED_INDEX_CANNOT_BE_UNIQUE,
                "Currently hashed indexes cannot guarantee uniqueness. Use a regular index.",
            )));
        }
        if self.is_id_index() && self.hidden {
            return Err(Error::bad_value("can't hide _id index"));
        }
        if self.is_id_index() && (self.sparse || self.partial.is_some() || self.clustering) {
            return Err(Error::CannotCreateIndex("the _id index cannot be sparse, partial or clustering".into()));
        }
        Ok(())
    }

    /// Reads a spec the catalog stored (already validated once).
    pub(crate) fn from_normalized(spec: &Document) -> Result<ParsedSpec> {
        ParsedSpec::parse(spec)
    }

    /// The spec as listIndexes returns it.
    pub(crate) fn normalized(&self) -> Document {
        let mut spec = doc! { "v": 2, "key": self.key.clone(), "name": self.name.clone() };
        if self.unique {
            spec.insert("unique", true);
        }
        if self.sparse {
            spec.insert("sparse", true);
        }
        if self.clustering {
            spec.insert("clustering", true);
        }
        if let Some(filter) = &self.partial {
            spec.insert("partialFilterExpression", filter.clone());
        }
        if let Some(seconds) = self.expire_after_seconds {
            spec.insert("expireAfterSeconds", seconds);
        }
        if let Some(engines) = &self.storage_engine {
            spec.insert("storageEngine", engines.clone());
        }
        if self.hidden {
            spec.insert("hidden", true);
        }
        if let Some(text) = &self.text {
            spec.extend(text.normalized_fields());
        }
        if let Some(collation) = &self.collation {
            spec.insert("collation", collation.clone());
        }
        if let Some((kind, given)) = &self.geo {
            spec.extend(kind.normalized_fields(given));
        }
        if let Some((_, Some(projection))) = &self.wildcard {
            spec.insert("wildcardProjection", projection.clone());
        }
        spec
    }

    /// Whether one of the key's fields is `"hashed"`.
    pub(crate) fn is_hashed(&self) -> bool {
        self.key.values().any(is_hashed_kind)
    }

    /// `{_id: 1}`: the collection's implicit index.
    pub(crate) fn is_id_index(&self) -> bool {
        self.key.len() == 1
            && self
                .key
                .get("_id")
                .is_some_and(|d| matches!(d, Bson::Int32(1) | Bson::Int64(1)) || *d == Bson::Double(1.0))
    }

    /// What createIndexes does with this spec next to an existing one: `Ok(true)` when it is
    /// the same index (a no-op), `Ok(false)` when they are unrelated, an error on a conflict.
    pub(crate) fn compare_with(&self, existing: &ParsedSpec) -> Result<bool> {
        let same_key = same_key_pattern(&self.key, &existing.key);
        let same_options = self.options_without_name() == existing.options_without_name();
        if self.name == existing.name {
            if !same_key {
                return Err(Error::IndexKeySpecsConflict(format!(
                    "An existing index has the same name as the requested index. When index names are not specified, they are auto generated and can cause conflicts. Please refer to our documentation. Requested index: {}, existing index: {}",
                    self.normalized(),
                    existing.normalized()
                )));
            }
            if !same_options {
                return Err(Error::IndexOptionsConflict(format!(
                    "An equivalent index already exists with the same name but different options. Requested index: {}, existing index: {}",
                    self.normalized(),
                    existing.normalized()
                )));
            }
            return Ok(true);
        }
        if same_key && self.partial == existing.partial && self.collation == existing.collation {
            return Err(Error::IndexOptionsConflict(format!(
                "Index already exists with a different name: {}",
                existing.name
            )));
        }
        Ok(false)
    }

    fn options_without_name(&self) -> Options<'_> {
        (
            self.unique,
            self.sparse,
            self.clustering,
            &self.partial,
            self.expire_after_seconds,
            &self.text,
            &self.collation,
        )
    }
}

/// The options two specs of one key pattern must share to be the same index.
type Options<'s> = (
    bool,
    bool,
    bool,
    &'s Option<Document>,
    Option<i64>,
    &'s Option<crate::index::text::TextSpec>,
    &'s Option<Document>,
);

fn check_key_pattern(key: &Document) -> Result<()> {
    if key.is_empty() {
        return Err(Error::CannotCreateIndex("Index keys cannot be empty.".into()));
    }
    let hashed = key.values().filter(|kind| is_hashed_kind(kind)).count();
    if hashed > 1 {
        return Err(Error::Query(query::error::fail(
            vocabulary::location::AT_MOST_ONE_HASHED_INDEX_FIELD,
            format!("A maximum of one index field is allowed to be hashed but found {hashed} for 'key' {key}"),
        )));
    }
    for (field, direction) in key {
        match direction {
            Bson::String(kind) if matches!(kind.as_str(), "hashed" | "text" | "2dsphere" | "2d") => {}
            Bson::Int32(n) if *n != 0 => {}
            Bson::Int64(n) if *n != 0 => {}
            Bson::Double(d) if *d != 0.0 && d.is_finite() => {}
            Bson::String(kind) => {
                return Err(Error::CannotCreateIndex(format!(
                    "Index type '{kind}' on field '{field}' is not supported"
                )));
            }
            other => {
                return Err(Error::CannotCreateIndex(format!(
                    "Values in the index key pattern can only be 1 or -1, found {other} for field '{field}'"
                )));
            }
        }
        document::path::FieldPath::parse(field)
            .map_err(|e| Error::CannotCreateIndex(format!("Index key field '{field}' is invalid: {e}")))?;
    }
    Ok(())
}

/// A geospatial index's kind, if its key names one: one geo field, alone or with ascending or
/// descending fields around it (a `2d` field first, as MongoDB requires).
fn geo_kind(key: &Document, spec: &Document) -> Result<Option<(crate::index::geo::GeoKind, Document)>> {
    let geo_fields: Vec<(usize, &str)> = key
        .values()
        .enumerate()
        .filter_map(|(position, kind)| match kind {
            Bson::String(kind) if kind == "2dsphere" || kind == "2d" => Some((position, kind.as_str())),
            _ => None,
        })
        .collect();
    if !geo_fields.is_empty() && key.values().filter(|kind| matches!(kind, Bson::String(_))).count() > 1 {
        return Err(Error::CannotCreateIndex("Can't use more than one index plugin for a single index.".into()));
    }
    let kind = match geo_fields.as_slice() {
        [] => return Ok(None),
        [(0, kind)] => *kind,
        [(_, "2d")] => return Err(Error::CannotCreateIndex("2d has to be first in index".into())),
        [(_, kind)] => *kind,
        _ => {
            return Err(Error::CannotCreateIndex(
                "an index may hold one geospatial field: index each location field in its own index".into(),
            ));
        }
    };
    let given: Document = spec
        .iter()
        .filter(|(name, _)| matches!(name.as_str(), "min" | "max" | "bits"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Ok(Some((crate::index::geo::GeoKind::from_spec(kind, spec)?, given)))
}

/// A text index's key: `"text"` fields (as given), or `_fts` (as stored).
fn is_text_key(key: &Document) -> bool {
    key.contains_key("_fts") || key.values().any(|kind| matches!(kind, Bson::String(kind) if kind == "text"))
}

fn is_hashed_kind(kind: &Bson) -> bool {
    matches!(kind, Bson::String(kind) if kind == "hashed")
}

/// Directions by sign: `{a: 1}` and `{a: 1.0}` are the same pattern (`"hashed"` is its own).
pub(crate) fn same_key_pattern(a: &Document, b: &Document) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|((fa, da), (fb, db))| fa == fb && sign(da) == sign(db))
}

fn sign(value: &Bson) -> i32 {
    match value {
        kind if is_hashed_kind(kind) => 2,
        Bson::Int32(n) => n.signum(),
        Bson::Int64(n) => n.signum() as i32,
        Bson::Double(d) if *d > 0.0 => 1,
        Bson::Double(d) if *d < 0.0 => -1,
        _ => 0,
    }
}

/// MongoDB's default name: `field_direction` joined by `_`.
pub fn default_name(key: &Document) -> String {
    let parts: Vec<String> = key
        .iter()
        .map(|(field, direction)| {
            let direction = match direction {
                Bson::Int32(n) => n.to_string(),
                Bson::Int64(n) => n.to_string(),
                Bson::Double(d) if d.fract() == 0.0 => format!("{}", *d as i64),
                Bson::Double(d) => d.to_string(),
                Bson::String(s) => s.clone(),
                other => other.to_string(),
            };
            format!("{field}_{direction}")
        })
        .collect();
    parts.join("_")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parsing: defaults, normalization and refusals.
    #[test]
    fn parses_and_normalizes() {
        let spec = ParsedSpec::parse(&doc! {"key": {"a": 1, "b": -1}, "unique": true, "background": true}).unwrap();
        assert_eq!(spec.name, "a_1_b_-1");
        assert_eq!(spec.normalized(), doc! {"v": 2, "key": {"a": 1, "b": -1}, "name": "a_1_b_-1", "unique": true});
        assert!(ParsedSpec::parse(&doc! {"key": {"a": "geoHaystack"}}).is_err());
        assert!(ParsedSpec::parse(&doc! {"key": {"a": "2dsphere", "b": 1}}).is_ok());
        assert!(ParsedSpec::parse(&doc! {"key": {"b": 1, "a": "2d"}}).is_err());
        assert!(ParsedSpec::parse(&doc! {"key": {"a": "2dsphere", "b": "2dsphere"}}).is_err());
        assert!(ParsedSpec::parse(&doc! {"key": {"a": "2dsphere", "b": "hashed"}}).is_err());
        let compound = ParsedSpec::parse(&doc! {"key": {"c": -1, "a": "text", "b": 1}}).unwrap();
        assert_eq!(compound.name, "c_-1_a_text_b_1");
        assert_eq!(compound.key, doc! {"c": -1, "_fts": "text", "_ftsx": 1, "b": 1});
        assert!(ParsedSpec::parse(&doc! {"key": {"a": "text", "b": 1, "d": "text"}}).is_err());
        assert!(ParsedSpec::parse(&doc! {"key": {"a": "text", "b": "hashed"}}).is_err());
        let text = ParsedSpec::parse(&doc! {"key": {"a": "text"}, "default_language": "fr"}).unwrap();
        assert_eq!(text.name, "a_text");
        let normalized = text.normalized();
        assert_eq!(normalized.get_document("key").unwrap(), &doc! {"_fts": "text", "_ftsx": 1});
        assert_eq!(normalized.get_str("default_language").unwrap(), "french");
        assert_eq!(ParsedSpec::from_normalized(&normalized).unwrap(), text);
        assert!(ParsedSpec::parse(&doc! {"key": {}}).is_err());
        assert!(ParsedSpec::parse(&doc! {"key": {"a": 1}, "bogus": 1}).is_err());
        assert!(
            ParsedSpec::parse(&doc! {"key": {"a": 1}, "sparse": true, "partialFilterExpression": {"a": 1}}).is_err()
        );
    }

    /// Conflicts: MongoDB's 85/86 rules.
    #[test]
    fn conflicts_follow_mongodb() {
        let a = ParsedSpec::parse(&doc! {"key": {"a": 1}}).unwrap();
        assert!(a.compare_with(&a).unwrap());
        let renamed = ParsedSpec::parse(&doc! {"key": {"a": 1}, "name": "other"}).unwrap();
        assert_eq!(renamed.compare_with(&a).unwrap_err().code(), 85);
        let unique = ParsedSpec::parse(&doc! {"key": {"a": 1}, "unique": true}).unwrap();
        assert_eq!(unique.compare_with(&a).unwrap_err().code(), 85);
        let other_key = ParsedSpec::parse(&doc! {"key": {"b": 1}, "name": "a_1"}).unwrap();
        assert_eq!(other_key.compare_with(&a).unwrap_err().code(), 86);
        let b = ParsedSpec::parse(&doc! {"key": {"b": 1}}).unwrap();
        assert!(!b.compare_with(&a).unwrap());
    }
}
