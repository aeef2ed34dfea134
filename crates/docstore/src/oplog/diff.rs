//! The `$v: 2` update diff MongoDB writes in an update's oplog entry, and its reading as a change
//! stream's `updateDescription`.
//!
//! ```text
//! { u: {field: new value}, i: {field: value}, d: {field: false},
//!   s<field>: <diff of a sub-document>,
//!   s<field>: {a: true, l: new length, u<index>: value, s<index>: <diff>} }   (an array)
//! ```
//!
//! `diff` returns `None` when the fields the two versions share are not in the same order (a
//! diff cannot say that); the entry is then the whole new document, as a replacement's is.

use bson::{Bson, Document};

/// The diff from `old` to `new`, or `None` if it cannot be written as one.
pub(crate) fn diff(old: &Document, new: &Document) -> Option<Document> {
    let shared_old: Vec<&String> = old.keys().filter(|k| new.contains_key(k.as_str())).collect();
    let shared_new: Vec<&String> = new.keys().filter(|k| old.contains_key(k.as_str())).collect();
    if shared_old != shared_new {
        return None;
    }
    let mut updated = Document::new();
    let mut inserted = Document::new();
    let mut deleted = Document::new();
    let mut sub = Document::new();
    for (key, old_value) in old {
        match new.get(key) {
            None => {
                deleted.insert(key.clone(), false);
            }
            Some(new_value) if new_value == old_value => {}
            Some(new_value) => match nested(old_value, new_value) {
                Some(nested) => {
                    sub.insert(format!("s{key}"), nested);
                }
                None => {
                    updated.insert(key.clone(), new_value.clone());
                }
            },
        }
    }
    for (key, value) in new {
        if !old.contains_key(key) {
            inserted.insert(key.clone(), value.clone());
        }
    }
    let mut diff = Document::new();
    for (name, part) in [("d", deleted), ("u", updated), ("i", inserted)] {
        if !part.is_empty() {
            diff.insert(name, part);
        }
    }
    diff.extend(sub);
    Some(diff)
}

/// A diff of two sub-documents or two arrays, when both versions are the same kind.
fn nested(old: &Bson, new: &Bson) -> Option<Document> {
    match (old, new) {
        (Bson::Document(old), Bson::Document(new)) => diff(old, new),
        (Bson::Array(old), Bson::Array(new)) => Some(array_diff(old, new)),
        _ => None,
    }
}

fn array_diff(old: &[Bson], new: &[Bson]) -> Document {
    let mut diff = bson::doc! {"a": true};
    if new.len() < old.len() {
        diff.insert("l", new.len() as i64);
    }
    for (index, value) in new.iter().enumerate() {
        match old.get(index) {
            Some(before) if before == value => {}
            Some(before) => match nested(before, value) {
                Some(nested) => {
                    diff.insert(format!("s{index}"), nested);
                }
                None => {
                    diff.insert(format!("u{index}"), value.clone());
                }
            },
            None => {
                diff.insert(format!("u{index}"), value.clone());
            }
        }
    }
    diff
}

/// What a change stream's `updateDescription` says of a diff: updated fields by dotted path,
/// removed fields, truncated arrays, and (`disambiguated`) the dotted paths a reader could not
/// split back alone — those with a field named like a number or holding a dot — as their
/// components (field names as strings, array indexes as integers).
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Description {
    pub updated_fields: Document,
    pub removed_fields: Vec<String>,
    pub truncated_arrays: Vec<(String, i64)>,
    pub disambiguated: Document,
}

/// One step of a path: a field, or an index in an array.
#[derive(Clone)]
enum Step {
    Field(String),
    Index(usize),
}

/// Reads a `$v: 2` diff into an update description.
pub(crate) fn describe(diff: &Document) -> Description {
    let mut description = Description::default();
    walk(diff, &[], &mut description);
    description
}

fn dotted(steps: &[Step]) -> String {
    let parts: Vec<String> = steps
        .iter()
        .map(|step| match step {
            Step::Field(name) => name.clone(),
            Step::Index(index) => index.to_string(),
        })
        .collect();
    parts.join(".")
}

/// Notes the path's components if its dotted form is ambiguous; returns the dotted form.
fn note(steps: &[Step], out: &mut Description) -> String {
    let path = dotted(steps);
    let ambiguous = steps.iter().any(|step| match step {
        Step::Field(name) => name.contains('.') || (!name.is_empty() && name.bytes().all(|b| b.is_ascii_digit())),
        Step::Index(_) => false,
    });
    if ambiguous {
        let components: Vec<Bson> = steps
            .iter()
            .map(|step| match step {
                Step::Field(name) => Bson::String(name.clone()),
                Step::Index(index) => Bson::Int32(*index as i32),
            })
            .collect();
        out.disambiguated.insert(path.clone(), components);
    }
    path
}

fn walk(diff: &Document, prefix: &[Step], out: &mut Description) {
    let is_array = diff.get_bool("a").unwrap_or(false);
    let at = |step: Step| {
        let mut steps = prefix.to_vec();
        steps.push(step);
        steps
    };
    let child = |name: &str| match (is_array, name.parse::<usize>()) {
        (true, Ok(index)) => Step::Index(index),
        _ => Step::Field(name.to_owned()),
    };
    for (key, value) in diff {
        match (key.as_str(), value) {
            ("a", _) => {}
            ("l", length) if is_array => {
                let length = length.as_i64().or_else(|| length.as_i32().map(i64::from)).unwrap_or(0);
                let path = note(prefix, out);
                out.truncated_arrays.push((path, length));
            }
            ("u" | "i", Bson::Document(fields)) if !is_array => {
                for (field, value) in fields {
                    let path = note(&at(Step::Field(field.clone())), out);
                    out.updated_fields.insert(path, value.clone());
                }
            }
            ("d", Bson::Document(fields)) if !is_array => {
                for field in fields.keys() {
                    let path = note(&at(Step::Field(field.clone())), out);
                    out.removed_fields.push(path);
                }
            }
            (name, Bson::Document(nested)) if name.starts_with('s') => walk(nested, &at(child(&name[1..])), out),
            (name, value) if is_array && name.starts_with('u') => {
                let path = note(&at(child(&name[1..])), out);
                out.updated_fields.insert(path, value.clone());
            }
            _ => {}
        }
    }
}

/// Applies a `$v: 2` diff to a document (to check diffs, and for readers of the oplog).
pub(crate) fn apply(document: &Document, diff: &Document) -> Document {
    let mut result = Document::new();
    let deleted = diff.get_document("d").ok();
    let updated = diff.get_document("u").ok();
    for (key, value) in document {
        if deleted.is_some_and(|d| d.contains_key(key)) {
            continue;
        }
        let value = match (updated.and_then(|u| u.get(key)), diff.get_document(format!("s{key}")).ok()) {
            (Some(new), _) => new.clone(),
            (None, Some(nested)) => apply_nested(value, nested),
            (None, None) => value.clone(),
        };
        result.insert(key.clone(), value);
    }
    if let Ok(inserted) = diff.get_document("i") {
        for (key, value) in inserted {
            result.insert(key.clone(), value.clone());
        }
    }
    result
}

fn apply_nested(value: &Bson, diff: &Document) -> Bson {
    match value {
        Bson::Document(document) if !diff.get_bool("a").unwrap_or(false) => Bson::Document(apply(document, diff)),
        Bson::Array(items) => {
            let mut items = items.clone();
            if let Some(length) = diff.get("l").and_then(|l| l.as_i64().or_else(|| l.as_i32().map(i64::from))) {
                items.truncate(length.max(0) as usize);
            }
            for (key, change) in diff {
                let Some(index) = key.get(1..).and_then(|i| i.parse::<usize>().ok()) else { continue };
                while items.len() <= index {
                    items.push(Bson::Null);
                }
                if key.starts_with('u') {
                    items[index] = change.clone();
                } else if let (true, Bson::Document(nested)) = (key.starts_with('s'), change) {
                    items[index] = apply_nested(&items[index], nested);
                }
            }
            Bson::Array(items)
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn round_trip(old: Document, new: Document) -> Document {
        let diff = diff(&old, &new).unwrap();
        assert_eq!(apply(&old, &diff), new, "diff {diff}");
        diff
    }

    /// Goal: a diff says exactly the change. Method: diff, apply it back, compare with MongoDB's
    /// shape for each kind of change.
    #[test]
    fn diffs_apply_back_and_have_mongodb_shape() {
        let d = round_trip(doc! {"_id": 1, "a": 1, "b": 2}, doc! {"_id": 1, "a": 5, "c": 3});
        assert_eq!(d, doc! {"d": {"b": false}, "u": {"a": 5}, "i": {"c": 3}});
        let d = round_trip(doc! {"_id": 1, "x": {"y": 1, "z": 2}}, doc! {"_id": 1, "x": {"y": 1, "z": 3}});
        assert_eq!(d, doc! {"sx": {"u": {"z": 3}}});
        let d = round_trip(doc! {"_id": 1, "arr": [1, 2, 3]}, doc! {"_id": 1, "arr": [1, 9]});
        assert_eq!(d, doc! {"sarr": {"a": true, "l": 2_i64, "u1": 9}});
        round_trip(doc! {"_id": 1, "arr": [{"a": 1}]}, doc! {"_id": 1, "arr": [{"a": 2}, 4]});
        round_trip(doc! {"_id": 1, "a": [1]}, doc! {"_id": 1, "a": {"b": 1}});
    }

    /// A change of field order cannot be a diff.
    #[test]
    fn reordering_is_not_a_diff() {
        assert!(diff(&doc! {"a": 1, "b": 2}, &doc! {"b": 2, "a": 1}).is_none());
    }

    /// updateDescription: dotted paths, removals, truncations.
    #[test]
    fn describes_like_change_streams() {
        let old = doc! {"_id": 1, "a": 1, "b": {"c": 1}, "arr": [1, 2, 3], "gone": true};
        let new = doc! {"_id": 1, "a": 2, "b": {"c": 2}, "arr": [1, 5], "added": "x"};
        let description = describe(&diff(&old, &new).unwrap());
        assert_eq!(description.updated_fields, doc! {"a": 2, "added": "x", "b.c": 2, "arr.1": 5});
        assert_eq!(description.removed_fields, vec!["gone".to_string()]);
        assert_eq!(description.truncated_arrays, vec![("arr".to_string(), 2)]);
        assert!(description.disambiguated.is_empty());
    }

    /// Paths with numeric field names are spelled out: fields as strings, indexes as integers.
    #[test]
    fn ambiguous_paths_are_disambiguated() {
        let old = doc! {"_id": 1, "a": {"1": 1}, "b": [{"1": 1}]};
        let new = doc! {"_id": 1, "a": {"1": 2}, "b": [{"1": 2}]};
        let description = describe(&diff(&old, &new).unwrap());
        assert_eq!(description.updated_fields, doc! {"a.1": 2, "b.0.1": 2});
        assert_eq!(description.disambiguated, doc! {"a.1": ["a", "1"], "b.0.1": ["b", 0, "1"]});
    }
}
