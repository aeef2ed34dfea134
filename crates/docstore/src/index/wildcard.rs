//! Wildcard indexes (`{"$**": 1}`, `{"a.$**": 1}`, with `wildcardProjection`): one index over
//! every field, for collections whose documents do not share their fields.
//!
//! Keys are `(path, value)` for each leaf of the document: a sub-document is walked into (an
//! empty one is a leaf), an array's elements are leaves of the array's own path (documents
//! inside it walked into; positions are not part of paths), an empty array is `undefined`, as
//! a standard index keys it. `_id` is left out unless `wildcardProjection` includes it.
//!
//! The planner (`read::planner`) gives a wildcard index one candidate per queried path it
//! covers, bounded to that path's keys: scalar predicates only (an equality to a document or
//! an array has no leaf to find), never `null` (missing fields have no key), never a sort.

use bson::{Bson, Document};

use crate::error::{Error, Result};

/// A wildcard index's scope.
#[derive(Debug, Clone, PartialEq)]
pub struct Wildcard {
    /// `a.$**`: only paths under `a` (`None`: every path).
    prefix: Option<String>,
    /// `wildcardProjection`: the paths included (`true`) or excluded (`false`).
    projection: Option<(bool, Vec<String>)>,
}

impl Wildcard {
    /// The scope of a key pattern with a `$**` field, if it has one.
    pub fn from_spec(key: &Document, spec: &Document) -> Result<Option<Wildcard>> {
        let Some(field) = key.keys().find(|field| *field == "$**" || field.ends_with(".$**")) else {
            return Ok(None);
        };
        let cannot = |message: &str| Error::CannotCreateIndex(message.to_owned());
        if key.len() > 1 {
            return Err(cannot("compound wildcard indexes are not supported yet: index '$**' alone"));
        }
        let prefix = field.strip_suffix(".$**").map(str::to_owned);
        let projection = match spec.get("wildcardProjection") {
            None => None,
            Some(_) if prefix.is_some() => {
                return Err(cannot("the field 'wildcardProjection' is only allowed in an index on '$**'"));
            }
            Some(Bson::Document(projection)) if !projection.is_empty() => Some(read_projection(projection)?),
            Some(_) => return Err(cannot("wildcardProjection must be a non-empty object")),
        };
        Ok(Some(Wildcard { prefix, projection }))
    }

    /// Whether the index holds keys for `path`.
    pub fn covers(&self, path: &str) -> bool {
        if path.split('.').any(|part| part.parse::<usize>().is_ok()) {
            return false; // a position in the query's path: positions are not in the keys
        }
        if let Some(prefix) = &self.prefix {
            return path == prefix || path.starts_with(&format!("{prefix}."));
        }
        match &self.projection {
            Some((true, included)) => included.iter().any(|p| path == p || path.starts_with(&format!("{p}."))),
            Some((false, excluded)) => {
                !excluded.iter().any(|p| path == p || path.starts_with(&format!("{p}."))) && !is_id(path)
            }
            None => !is_id(path),
        }
    }

    /// Each `(path, value)` key of a document (see the module header).
    pub fn keys(&self, document: &Document) -> Vec<(String, Bson)> {
        let mut keys = Vec::new();
        walk_document(document, "", &mut |path, value| {
            if self.covers(path) {
                keys.push((path.to_owned(), value));
            }
        });
        keys
    }
}

fn is_id(path: &str) -> bool {
    path == "_id" || path.starts_with("_id.")
}

fn read_projection(projection: &Document) -> Result<(bool, Vec<String>)> {
    let mut include = None;
    let mut paths = Vec::new();
    for (path, flag) in projection {
        let on = query::truthy(flag);
        // `_id` may be excluded from an inclusion (or included in an exclusion), as in MongoDB.
        if path != "_id" {
            if include.is_some_and(|mode| mode != on) {
                return Err(Error::CannotCreateIndex("wildcardProjection cannot mix inclusion and exclusion".into()));
            }
            include = Some(on);
        }
        if on == include.unwrap_or(on) {
            paths.push(path.clone());
        }
    }
    Ok((include.unwrap_or(true), paths))
}

fn walk_document(document: &Document, prefix: &str, each: &mut impl FnMut(&str, Bson)) {
    for (name, value) in document {
        let path = if prefix.is_empty() { name.clone() } else { format!("{prefix}.{name}") };
        walk_value(value, &path, each, true);
    }
}

fn walk_value(value: &Bson, path: &str, each: &mut impl FnMut(&str, Bson), top: bool) {
    match value {
        Bson::Document(inner) if !inner.is_empty() => walk_document(inner, path, each),
        Bson::Array(items) if top && items.is_empty() => each(path, Bson::Undefined),
        Bson::Array(items) if top => items.iter().for_each(|item| walk_value(item, path, each, false)),
        other => each(path, other.clone()),
    }
}

#[cfg(test)]
mod tests {
    use bson::doc;

    use super::*;

    fn scope(key: Document, spec: Document) -> Wildcard {
        Wildcard::from_spec(&key, &spec).unwrap_or_else(|e| panic!("{e}")).unwrap_or_else(|| panic!("not wildcard"))
    }

    /// Leaves: sub-documents walked, arrays expanded, `_id` left out; prefixes and projections.
    #[test]
    fn keys_are_the_leaves_in_scope() {
        let all = scope(doc! {"$**": 1}, doc! {});
        let keys = all.keys(&doc! {"_id": 1, "a": {"b": 1, "c": [2, {"d": 3}]}, "e": [], "f": {}});
        let paths: Vec<(&str, &Bson)> = keys.iter().map(|(p, v)| (p.as_str(), v)).collect();
        assert_eq!(
            paths,
            vec![
                ("a.b", &Bson::Int32(1)),
                ("a.c", &Bson::Int32(2)),
                ("a.c.d", &Bson::Int32(3)),
                ("e", &Bson::Undefined),
                ("f", &Bson::Document(doc! {})),
            ]
        );
        let under_a = scope(doc! {"a.$**": 1}, doc! {});
        assert!(under_a.covers("a.b") && under_a.covers("a") && !under_a.covers("ab"));
        let only_b = scope(doc! {"$**": 1}, doc! {"wildcardProjection": {"b": 1}});
        assert!(only_b.covers("b.c") && !only_b.covers("a") && !all.covers("a.0"));
        let not_b = scope(doc! {"$**": 1}, doc! {"wildcardProjection": {"b": 0}});
        assert!(!not_b.covers("b") && not_b.covers("a") && !not_b.covers("_id"));
        assert!(Wildcard::from_spec(&doc! {"$**": 1, "a": 1}, &doc! {}).is_err());
    }
}
