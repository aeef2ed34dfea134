//! Update paths: parsing (with `$`, `$[]`, `$[<id>]`), resolving them to concrete paths in
//! one document, and reading, writing and removing the value at a concrete path.
//!
//! A concrete path is a list of field names; a numeric name indexes an array when the
//! container is an array. Writing creates missing sub-documents (never arrays), pads arrays
//! with `null` up to the index, and refuses to go through a scalar (`PathNotViable`).

use bson::{Bson, Document};
use document::path::array_index;

use super::array_filters::ArrayFilters;
use crate::error::{QueryError, Result};

/// One component of an update path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Field(String),
    /// `$`: the element the query matched.
    Positional,
    /// `$[]`: every element.
    All,
    /// `$[id]`: the elements the array filter `id` matches.
    Filtered(String),
}

/// A parsed update path such as `grades.$[g].score`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdatePath {
    pub text: String,
    pub parts: Vec<Part>,
}

impl UpdatePath {
    pub fn parse(text: &str) -> Result<UpdatePath> {
        if text.is_empty() {
            return Err(QueryError::EmptyFieldName("An empty update path is not valid.".into()));
        }
        let mut parts = Vec::new();
        for component in text.split('.') {
            let part = match component {
                "" => {
                    return Err(QueryError::EmptyFieldName(format!(
                        "The update path '{text}' contains an empty field name, which is not allowed."
                    )));
                }
                "$" => Part::Positional,
                "$[]" => Part::All,
                _ if component.starts_with("$[") && component.ends_with(']') => {
                    let id = component.trim_start_matches("$[").trim_end_matches(']');
                    Part::Filtered(id.to_string())
                }
                _ if component.starts_with('$') && parts.is_empty() => {
                    return Err(QueryError::DollarPrefixedFieldName(format!(
                        "The dollar ($) prefixed field '{component}' in '{text}' is not allowed in the context of an update's replacement document. Consider using an aggregation pipeline with $replaceWith."
                    )));
                }
                _ => Part::Field(component.to_string()),
            };
            parts.push(part);
        }
        Ok(UpdatePath { text: text.to_string(), parts })
    }

    /// Components as text, for conflict checks (`a.$[]` conflicts with `a.$[].b`).
    pub fn components(&self) -> Vec<&str> {
        self.text.split('.').collect()
    }

    pub fn is_dynamic(&self) -> bool {
        self.parts.iter().any(|part| !matches!(part, Part::Field(_)))
    }

    /// Array filter identifiers the path uses.
    pub fn identifiers(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|part| match part {
            Part::Filtered(id) => Some(id.as_str()),
            _ => None,
        })
    }
}

/// Whether two paths conflict: one is a prefix of the other (or they are equal).
pub fn conflicts(a: &UpdatePath, b: &UpdatePath) -> bool {
    let (x, y) = (a.components(), b.components());
    x.iter().zip(&y).all(|(p, q)| p == q)
}

/// What resolving positional parts needs.
pub struct Resolver<'a> {
    pub position: Option<usize>,
    pub array_filters: &'a ArrayFilters,
}

impl Resolver<'_> {
    /// The concrete paths an update path names in `document`.
    pub fn resolve(&self, document: &Document, path: &UpdatePath) -> Result<Vec<Vec<String>>> {
        let mut out = Vec::new();
        let Some((Part::Field(head), rest)) = path.parts.split_first() else {
            return Err(QueryError::bad_value(format!("Invalid update path '{}'", path.text)));
        };
        self.resolve_from(document.get(head), rest, vec![head.clone()], path, &mut out)?;
        Ok(out)
    }

    fn resolve_from(
        &self,
        current: Option<&Bson>,
        parts: &[Part],
        prefix: Vec<String>,
        path: &UpdatePath,
        out: &mut Vec<Vec<String>>,
    ) -> Result<()> {
        let Some((part, rest)) = parts.split_first() else {
            out.push(prefix);
            return Ok(());
        };
        let indexes: Vec<usize> = match part {
            Part::Field(name) => {
                let next = current.and_then(|value| child(value, name));
                let mut prefix = prefix;
                prefix.push(name.clone());
                return self.resolve_from(next, rest, prefix, path, out);
            }
            Part::Positional => {
                let index = self.position.ok_or_else(|| {
                    QueryError::bad_value("The positional operator did not find the match needed from the query.")
                })?;
                vec![index]
            }
            Part::All | Part::Filtered(_) => {
                let Some(Bson::Array(items)) = current else {
                    let shown = prefix.join(".");
                    return Err(match current {
                        None => QueryError::bad_value(format!(
                            "The path '{shown}' must exist in the document in order to apply array updates."
                        )),
                        Some(value) => QueryError::bad_value(format!(
                            "Cannot apply array updates to non-array element {shown}: {value}"
                        )),
                    });
                };
                match part {
                    Part::Filtered(id) => {
                        let mut matching = Vec::new();
                        for (index, item) in items.iter().enumerate() {
                            if self.array_filters.matches(id, item, &path.text)? {
                                matching.push(index);
                            }
                        }
                        matching
                    }
                    _ => (0..items.len()).collect(),
                }
            }
        };
        for index in indexes {
            let next = current.and_then(|value| child(value, &index.to_string()));
            let mut branch = prefix.clone();
            branch.push(index.to_string());
            self.resolve_from(next, rest, branch, path, out)?;
        }
        Ok(())
    }
}

fn child<'a>(value: &'a Bson, name: &str) -> Option<&'a Bson> {
    match value {
        Bson::Document(document) => document.get(name),
        Bson::Array(items) => items.get(array_index(name)?),
        _ => None,
    }
}

/// The value at a concrete path.
pub fn get<'a>(document: &'a Document, path: &[String]) -> Option<&'a Bson> {
    let (head, rest) = path.split_first()?;
    let mut current = document.get(head)?;
    for name in rest {
        current = child(current, name)?;
    }
    Some(current)
}

/// Writes `value` at a concrete path, creating what is missing.
pub fn set(document: &mut Document, path: &[String], value: Bson) -> Result<()> {
    let Some((head, rest)) = path.split_first() else {
        return Ok(());
    };
    if rest.is_empty() {
        document.insert(head.clone(), value);
        return Ok(());
    }
    if !document.contains_key(head) {
        document.insert(head.clone(), Bson::Document(Document::new()));
    }
    match document.get_mut(head) {
        Some(container) => set_in(container, head, rest, value),
        None => Ok(()),
    }
}

fn set_in(container: &mut Bson, container_name: &str, path: &[String], value: Bson) -> Result<()> {
    let Some((head, rest)) = path.split_first() else {
        return Ok(());
    };
    match container {
        Bson::Document(document) => set(document, path, value),
        Bson::Array(items) => {
            let Some(index) = array_index(head) else {
                return Err(not_viable(head, container_name, &Bson::Array(items.clone())));
            };
            if index >= items.len() {
                items.resize(index + 1, Bson::Null);
                if !rest.is_empty() {
                    items[index] = Bson::Document(Document::new());
                }
            }
            if rest.is_empty() {
                items[index] = value;
                Ok(())
            } else {
                set_in(&mut items[index], head, rest, value)
            }
        }
        scalar => Err(not_viable(head, container_name, scalar)),
    }
}

fn not_viable(field: &str, container_name: &str, container: &Bson) -> QueryError {
    QueryError::PathNotViable(format!("Cannot create field '{field}' in element {{{container_name}: {container}}}"))
}

/// Removes the value at a concrete path: a field is deleted, an array element becomes null.
/// Returns whether something was there.
pub fn remove(document: &mut Document, path: &[String]) -> bool {
    let Some((last, parent_path)) = path.split_last() else {
        return false;
    };
    if parent_path.is_empty() {
        return document.remove(last).is_some();
    }
    match get_mut(document, parent_path) {
        Some(Bson::Document(parent)) => parent.remove(last).is_some(),
        Some(Bson::Array(items)) => match array_index(last).and_then(|index| items.get_mut(index)) {
            Some(slot) => {
                *slot = Bson::Null;
                true
            }
            None => false,
        },
        _ => false,
    }
}

/// A mutable reference to the value at a concrete path.
pub fn get_mut<'a>(document: &'a mut Document, path: &[String]) -> Option<&'a mut Bson> {
    let (head, rest) = path.split_first()?;
    let mut current = document.get_mut(head)?;
    for name in rest {
        current = match current {
            Bson::Document(inner) => inner.get_mut(name)?,
            Bson::Array(items) => items.get_mut(array_index(name)?)?,
            _ => return None,
        };
    }
    Some(current)
}
