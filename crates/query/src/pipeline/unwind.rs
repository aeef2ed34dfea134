//! `$unwind`: one output document per element of an array field.
//!
//! The path is followed through embedded documents only (not through arrays). A non-array,
//! non-null value is unwound as if it were a one-element array. Null, missing and empty arrays
//! produce nothing unless `preserveNullAndEmptyArrays`, in which case the document passes
//! (an empty array's field is removed, as MongoDB does); `includeArrayIndex` is then null.

use bson::{Bson, Document};
use vocabulary::location;

use crate::error::QueryError;
use crate::expr::{bson_type_name, fail};

#[derive(Debug, Clone)]
pub struct UnwindSpec {
    path: Vec<String>,
    index_field: Option<Vec<String>>,
    preserve: bool,
}

fn field_path(text: &str, code: i32) -> Result<Vec<String>, QueryError> {
    let Some(path) = text.strip_prefix('$') else {
        return Err(fail(code, format!("path option to $unwind stage should be prefixed with a '$': {text}")));
    };
    crate::expr::parse_field_path(path)
}

impl UnwindSpec {
    pub fn parse(spec: &Bson) -> Result<UnwindSpec, QueryError> {
        match spec {
            Bson::String(s) => Ok(UnwindSpec {
                path: field_path(s, location::UNWIND_PATH_INVALID)?,
                index_field: None,
                preserve: false,
            }),
            Bson::Document(d) => UnwindSpec::parse_object(d),
            other => Err(fail(
                location::UNWIND_SPECIFICATION_NOT_STRING_OR_OBJECT,
                format!(
                    "expected either a string or an object as specification for $unwind stage, got {}",
                    bson_type_name(other)
                ),
            )),
        }
    }

    fn parse_object(spec: &Document) -> Result<UnwindSpec, QueryError> {
        let (mut path, mut index_field, mut preserve) = (None, None, false);
        for (key, value) in spec {
            match (key.as_str(), value) {
                ("path", Bson::String(s)) => path = Some(field_path(s, location::UNWIND_PATH_INVALID)?),
                ("path", other) => {
                    return Err(fail(
                        location::UNWIND_PATH_NOT_STRING,
                        format!("expected a string as the path for $unwind stage, got {}", bson_type_name(other)),
                    ));
                }
                ("includeArrayIndex", Bson::String(s)) if !s.is_empty() => {
                    if s.starts_with('$') {
                        return Err(fail(
                            location::UNWIND_INCLUDE_ARRAY_INDEX_HAS_DOLLAR,
                            format!("includeArrayIndex option to $unwind stage should not be prefixed with a '$': {s}"),
                        ));
                    }
                    index_field = Some(crate::expr::parse_field_path(s)?);
                }
                ("includeArrayIndex", other) => {
                    return Err(fail(
                        location::UNWIND_INCLUDE_ARRAY_INDEX_NOT_STRING,
                        format!(
                            "expected a non-empty string for the includeArrayIndex option to $unwind stage, got {}",
                            bson_type_name(other)
                        ),
                    ));
                }
                ("preserveNullAndEmptyArrays", Bson::Boolean(b)) => preserve = *b,
                ("preserveNullAndEmptyArrays", other) => {
                    return Err(fail(
                        location::UNWIND_PRESERVE_NOT_BOOLEAN,
                        format!(
                            "expected a boolean for the preserveNullAndEmptyArrays option to $unwind stage, got {}",
                            bson_type_name(other)
                        ),
                    ));
                }
                (other, _) => {
                    return Err(fail(
                        location::UNWIND_UNRECOGNIZED_OPTION,
                        format!("unrecognized option to $unwind stage: {other}"),
                    ));
                }
            }
        }
        let path = path.ok_or_else(|| fail(location::UNWIND_WITHOUT_PATH, "no path specified to $unwind stage"))?;
        Ok(UnwindSpec { path, index_field, preserve })
    }

    /// The documents one input document unwinds into.
    pub fn apply(&self, document: Document) -> Vec<Document> {
        let value = get_plain(&document, &self.path).cloned();
        match value {
            Some(Bson::Array(items)) if !items.is_empty() => items
                .into_iter()
                .enumerate()
                .map(|(i, item)| {
                    let mut out = document.clone();
                    set_path(&mut out, &self.path, item);
                    self.set_index(&mut out, Bson::Int64(i as i64));
                    out
                })
                .collect(),
            Some(Bson::Array(_)) if self.preserve => {
                let mut out = document;
                remove_path(&mut out, &self.path);
                self.set_index(&mut out, Bson::Null);
                vec![out]
            }
            None | Some(Bson::Null) | Some(Bson::Undefined) if self.preserve => {
                let mut out = document;
                self.set_index(&mut out, Bson::Null);
                vec![out]
            }
            None | Some(Bson::Null) | Some(Bson::Undefined) | Some(Bson::Array(_)) => Vec::new(),
            Some(_) => {
                let mut out = document;
                self.set_index(&mut out, Bson::Null);
                vec![out]
            }
        }
    }

    fn set_index(&self, document: &mut Document, index: Bson) {
        if let Some(field) = &self.index_field {
            set_path(document, field, index);
        }
    }
}

/// A dotted lookup through embedded documents only.
pub fn get_plain<'a>(document: &'a Document, path: &[String]) -> Option<&'a Bson> {
    let (first, rest) = path.split_first()?;
    let value = document.get(first)?;
    if rest.is_empty() {
        return Some(value);
    }
    match value {
        Bson::Document(d) => get_plain(d, rest),
        _ => None,
    }
}

/// Sets a dotted path, creating (or replacing non-document values with) embedded documents.
pub fn set_path(document: &mut Document, path: &[String], value: Bson) {
    let Some((first, rest)) = path.split_first() else { return };
    if rest.is_empty() {
        document.insert(first.clone(), value);
        return;
    }
    if !matches!(document.get(first), Some(Bson::Document(_))) {
        document.insert(first.clone(), Document::new());
    }
    if let Some(Bson::Document(inner)) = document.get_mut(first) {
        set_path(inner, rest, value);
    }
}

fn remove_path(document: &mut Document, path: &[String]) {
    let Some((first, rest)) = path.split_first() else { return };
    if rest.is_empty() {
        document.remove(first);
    } else if let Some(Bson::Document(inner)) = document.get_mut(first) {
        remove_path(inner, rest);
    }
}
