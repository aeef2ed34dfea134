//! A tailable cursor over the oplog (`find` on `local.oplog.rs` with `tailable`, usually with
//! `awaitData`): the matching entries in `ts` order, then, batch after batch, those committed
//! since. Each batch reads at a fresh snapshot after the last entry it read; if the capped
//! oplog trimmed past that entry, the cursor is lost (CappedPositionLost), as MongoDB's is.

use std::sync::{Arc, Weak};

use bson::{RawDocumentBuf, Timestamp};
use query::filter::Filter;

use crate::error::{Error, Result};
use crate::store::Inner;

/// Entries read per step.
const READ_ENTRIES: usize = 1000;

pub struct Tail {
    inner: Weak<Inner>,
    filter: Filter,
    /// The last entry read (`None`: start at the oldest).
    last: Option<Timestamp>,
}

impl Inner {
    pub fn tail_oplog(self: &Arc<Inner>, filter: &bson::Document) -> Result<Tail> {
        if self.catalog.oplog().is_none() {
            return Err(Error::bad_value("tailable cursor requested on non capped collection"));
        }
        Ok(Tail { inner: Arc::downgrade(self), filter: Filter::parse(filter)?, last: None })
    }
}

impl Tail {
    /// Up to `max` matching entries after the last one read (fewer if there are no more now).
    pub fn next_batch(&mut self, max: usize) -> Result<Vec<RawDocumentBuf>> {
        let inner = self.inner.upgrade().ok_or_else(|| Error::IllegalOperation("the store was closed".into()))?;
        let Some(oplog) = inner.catalog.oplog() else { return Ok(Vec::new()) };
        let snapshot = inner.engine.snapshot();
        if let (Some(last), Some(first)) = (self.last, oplog.first(&snapshot)?)
            && super::as_u64(first) > super::as_u64(last)
        {
            return Err(Error::CappedPositionLost(format!(
                "CollectionScan died due to position in capped collection being deleted. Last seen record id: {}",
                super::as_u64(last)
            )));
        }
        let mut batch = Vec::new();
        loop {
            let entries = match self.last {
                Some(last) => oplog.read_after(&snapshot, last, READ_ENTRIES)?,
                None => oplog.read_from(&snapshot, Timestamp { time: 0, increment: 0 }, READ_ENTRIES)?,
            };
            let read = entries.len();
            for (ts, bytes) in entries {
                let raw = crate::read::scan::raw(bytes)?;
                self.last = Some(ts);
                if self.filter.matches_raw(&raw)? {
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
}
