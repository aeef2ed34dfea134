//! `arrayFilters`: the conditions named by `$[<identifier>]` in update paths.
//!
//! Each filter document's top-level fields all start with one identifier (`{"g.score":
//! {$gt: 5}}` or `{g: {$gt: 5}}`); an array element matches when the filter matches the
//! document `{<identifier>: element}`. Identifiers must be unique, each must be used by the
//! update, and each `$[<identifier>]` must have a filter (MongoDB's errors).

use bson::{Bson, Document};

use crate::error::{QueryError, Result};
use crate::filter::Filter;

/// Parsed array filters, by identifier.
#[derive(Debug, Clone, Default)]
pub struct ArrayFilters {
    filters: Vec<(String, Filter)>,
}

impl ArrayFilters {
    pub fn parse(documents: &[Document]) -> Result<ArrayFilters> {
        let mut filters: Vec<(String, Filter)> = Vec::with_capacity(documents.len());
        for document in documents {
            let identifier = identifier_of(document)?;
            if filters.iter().any(|(existing, _)| *existing == identifier) {
                return Err(QueryError::failed_to_parse(format!(
                    "Found multiple array filters with the same top-level field name {identifier}"
                )));
            }
            filters.push((identifier, Filter::parse(document)?));
        }
        Ok(ArrayFilters { filters })
    }

    pub fn identifiers(&self) -> impl Iterator<Item = &str> {
        self.filters.iter().map(|(identifier, _)| identifier.as_str())
    }

    /// Whether `element` passes the filter for `identifier` (named in update path `path`).
    pub fn matches(&self, identifier: &str, element: &Bson, path: &str) -> Result<bool> {
        let filter = self
            .filters
            .iter()
            .find(|(candidate, _)| candidate == identifier)
            .map(|(_, filter)| filter)
            .ok_or_else(|| {
                QueryError::bad_value(format!("No array filter found for identifier '{identifier}' in path '{path}'"))
            })?;
        let mut wrapper = Document::new();
        wrapper.insert(identifier, element.clone());
        filter.matches(&wrapper)
    }
}

fn identifier_of(document: &Document) -> Result<String> {
    let mut identifier: Option<&str> = None;
    for key in document.keys() {
        let head = key.split('.').next().unwrap_or_default();
        match identifier {
            None => identifier = Some(head),
            Some(seen) if seen != head => {
                return Err(QueryError::failed_to_parse(format!(
                    "Error parsing array filter :: caused by :: Expected a single top-level field name, found '{seen}' and '{head}'"
                )));
            }
            Some(_) => {}
        }
    }
    let identifier = identifier.ok_or_else(|| {
        QueryError::failed_to_parse("Cannot use an expression without a top-level field name in arrayFilters")
    })?;
    let valid = identifier.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && identifier.chars().all(|c| c.is_ascii_alphanumeric());
    if !valid {
        return Err(QueryError::bad_value(format!(
            "Error parsing array filter :: caused by :: The top-level field name must be an alphanumeric string beginning with a lowercase letter, found '{identifier}'"
        )));
    }
    Ok(identifier.to_string())
}
