//! The TTL monitor: a background thread that deletes documents whose indexed date is older
//! than their index's `expireAfterSeconds` (or a time-series collection's, by its time field),
//! every `StoreOptions::ttl_interval` (60 s by
//! default, as MongoDB).
//!
//! The thread holds a `Weak` reference to the store, upgraded for each pass only, so dropping
//! or closing the store is never blocked by it; `stop` wakes and joins it. A pass deletes with
//! the ordinary delete path (`{field: {$lt: now - expireAfterSeconds}}`), so an array of dates
//! expires on its earliest date and non-date values never expire, as in MongoDB.

use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use bson::doc;
use storage::Durability;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::write::delete::DeleteRequest;

/// The running monitor.
pub(crate) struct TtlMonitor {
    stop: Sender<()>,
    thread: Option<JoinHandle<()>>,
}

impl TtlMonitor {
    pub(crate) fn start(inner: &Arc<Context>, interval: Duration) -> Result<TtlMonitor> {
        let (stop, receiver) = channel();
        let weak = Arc::downgrade(inner);
        let thread = std::thread::Builder::new()
            .name("strata-ttl".into())
            .spawn(move || run(weak, receiver, interval))
            .map_err(|e| Error::Busy(format!("cannot start the TTL monitor: {e}")))?;
        Ok(TtlMonitor { stop, thread: Some(thread) })
    }

    pub(crate) fn stop(&mut self) {
        let _ = self.stop.send(());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for TtlMonitor {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(inner: Weak<Context>, stop: Receiver<()>, interval: Duration) {
    loop {
        match stop.recv_timeout(interval) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
        }
        let Some(inner) = inner.upgrade() else {
            return;
        };
        if !inner.originates.load(std::sync::atomic::Ordering::Acquire) {
            // A secondary: the primary's TTL deletes reach it through the oplog.
            continue;
        }
        // A failed pass (e.g. a collection dropped meanwhile) is retried at the next one.
        let _ = expire_once(&inner);
    }
}

/// One TTL pass over every collection; returns how many documents expired.
pub(crate) fn expire_once(inner: &Arc<Context>) -> Result<u64> {
    let now = bson::DateTime::now().timestamp_millis();
    let expiring: Vec<(String, String, String, i64)> = inner
        .catalog
        .collections()
        .iter()
        .flat_map(|c| {
            // A time-series collection expires by its time field.
            let measurements = c.timeseries.as_ref().and_then(|ts| {
                Some((c.meta.db.clone(), c.meta.name.clone(), ts.time_field.clone(), ts.expire_after_seconds?))
            });
            c.indexes
                .iter()
                .filter(|i| i.meta.ready)
                .filter_map(|i| {
                    let seconds = i.expire_after_seconds?;
                    let (field, _) = i.key_pattern.iter().next()?;
                    Some((c.meta.db.clone(), c.meta.name.clone(), field.clone(), seconds))
                })
                .chain(measurements)
                .collect::<Vec<_>>()
        })
        .collect();
    let mut expired = 0;
    for (db, name, field, seconds) in expiring {
        let cutoff = bson::DateTime::from_millis(now.saturating_sub(seconds.saturating_mul(1000)));
        let request = DeleteRequest { filter: doc! { field: { "$lt": cutoff } }, ..DeleteRequest::default() };
        expired += inner.delete(&db, &name, &request, &mut crate::write::Writer::plain(Durability::Periodic))?;
    }
    Ok(expired)
}
