//! `EntryFilter`: a query filter over the small documents that describe the catalog
//! (listCollections' and listDatabases' entries) or the server (currentOp's operations, the
//! profiler's entries), so that a server can filter them with
//! MongoDB's semantics without reaching past the docstore into the query crate.

use bson::Document;

use crate::error::Result;

/// A parsed filter; `matches` runs it against one entry document.
#[derive(Debug, Clone)]
pub struct EntryFilter {
    filter: query::filter::Filter,
}

impl EntryFilter {
    /// Parses `filter` (errors carry MongoDB's code, as any query error).
    pub fn parse(filter: &Document) -> Result<EntryFilter> {
        Ok(EntryFilter { filter: query::filter::Filter::parse(filter)? })
    }

    /// Whether `entry` matches; an evaluation error (a `$expr` that fails on this entry) is no
    /// match, as MongoDB skips such catalog entries.
    pub fn matches(&self, entry: &Document) -> bool {
        self.filter.matches(entry).unwrap_or(false)
    }
}
