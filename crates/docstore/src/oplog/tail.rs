//! A tailable cursor over the oplog (`find` on `local.oplog.rs` with `tailable`, usually with
//! `awaitData`) or a capped collection: the matching entries in `ts` (insertion) order, then,
//! batch after batch, those committed since. Each batch reads at a fresh snapshot after the last entry it read; if the capped
//! oplog trimmed past that entry, the cursor is lost (CappedPositionLost), as MongoDB's is.

use std::sync::{Arc, Weak};

use bson::{RawDocumentBuf, Timestamp};
use query::filter::Filter;

use crate::context::Context;
use crate::error::{Error, Result};

/// Entries read per step.
const READ_ENTRIES: usize = 1000;

pub struct Tail {
    inner: Weak<Context>,
    filter: Filter,
    position: Position,
}

/// What a tail reads and where it is.
enum Position {
    /// The oplog; the last entry read (`None`: start at the oldest).
    Oplog(Option<Timestamp>),
    /// A capped collection; the last document read, by insertion number.
    Capped { db: String, name: String, last: Option<u64> },
}

impl Context {
    pub(crate) fn tail_oplog(self: &Arc<Context>, filter: &bson::Document) -> Result<Tail> {
        if self.oplog().is_none() {
            return Err(Error::bad_value("tailable cursor requested on non capped collection"));
        }
        Ok(Tail { inner: Arc::downgrade(self), filter: Filter::parse(filter)?, position: Position::Oplog(None) })
    }

    /// A tailable cursor on a capped collection (`crate::capped`): its documents in insertion
    /// order, then those inserted since, batch after batch.
    pub(crate) fn tail_capped(self: &Arc<Context>, db: &str, name: &str, filter: &bson::Document) -> Result<Tail> {
        let capped = self.catalog.collection(db, name).is_some_and(|collection| collection.natural.is_some());
        if !capped {
            return Err(Error::bad_value(format!(
                "error processing query: ns={db}.{name}: tailable cursor requested on non capped collection"
            )));
        }
        let position = Position::Capped { db: db.into(), name: name.into(), last: None };
        Ok(Tail { inner: Arc::downgrade(self), filter: Filter::parse(filter)?, position })
    }
}

impl Tail {
    /// Up to `max` matching entries after the last one read (fewer if there are no more now).
    pub fn next_batch(&mut self, max: usize) -> Result<Vec<RawDocumentBuf>> {
        let inner = self.inner.upgrade().ok_or_else(|| Error::IllegalOperation("the store was closed".into()))?;
        match &mut self.position {
            Position::Oplog(last) => oplog_batch(&inner, &self.filter, last, max),
            Position::Capped { db, name, last } => capped_batch(&inner, &self.filter, (db, name), last, max),
        }
    }
}

fn oplog_batch(
    inner: &Context,
    filter: &Filter,
    last_read: &mut Option<Timestamp>,
    max: usize,
) -> Result<Vec<RawDocumentBuf>> {
    let Some(oplog) = inner.oplog() else { return Ok(Vec::new()) };
    let snapshot = inner.engine.snapshot();
    if let (Some(last), Some(first)) = (*last_read, oplog.first(&snapshot)?)
        && super::as_u64(first) > super::as_u64(last)
    {
        return Err(position_lost(super::as_u64(last)));
    }
    let mut batch = Vec::new();
    loop {
        let entries = match *last_read {
            Some(last) => oplog.read_after(&snapshot, last, READ_ENTRIES)?,
            None => oplog.read_from(&snapshot, Timestamp { time: 0, increment: 0 }, READ_ENTRIES)?,
        };
        let read = entries.len();
        for (ts, bytes) in entries {
            let raw = crate::read::scan::raw(bytes)?;
            *last_read = Some(ts);
            if filter.matches_raw(&raw)? {
                batch.push(raw);
                if batch.len() >= max {
                    return Ok(batch);
                }
            }
        }
        if read < READ_ENTRIES {
            return Ok(batch);
        }
    }
}

fn capped_batch(
    inner: &Context,
    filter: &Filter,
    (db, name): (&str, &str),
    last_read: &mut Option<u64>,
    max: usize,
) -> Result<Vec<RawDocumentBuf>> {
    let collection = inner.catalog.collection(db, name).ok_or_else(|| {
        Error::NamespaceNotFound(format!("collection {db}.{name} was dropped under a tailable cursor"))
    })?;
    let Some(natural) = collection.natural.as_ref() else { return Ok(Vec::new()) };
    let snapshot = inner.engine.snapshot();
    if let Some(last) = *last_read
        && !natural.holds(&snapshot, last)?
    {
        return Err(position_lost(last));
    }
    let mut batch = Vec::new();
    for entry in natural.ids(&snapshot, *last_read, false) {
        let (seq, id) = entry?;
        let Some(bytes) = snapshot.get(collection.tree, &id)? else { continue };
        *last_read = Some(seq);
        let raw = crate::read::scan::raw(bytes)?;
        if filter.matches_raw(&raw)? {
            batch.push(raw);
            if batch.len() >= max {
                break;
            }
        }
    }
    Ok(batch)
}

/// The record a tail last read was deleted (trimmed): the cursor cannot go on, as in MongoDB.
fn position_lost(last: u64) -> Error {
    Error::CappedPositionLost(format!(
        "CollectionScan died due to position in capped collection being deleted. Last seen record id: {last}"
    ))
}
