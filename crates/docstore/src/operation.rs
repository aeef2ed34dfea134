//! The operation running on this thread: whether it must stop (`killOp`, `maxTimeMS`) and how
//! much it has read (keys and documents examined, for the profiler, currentOp and slow logs).
//!
//! MongoDB passes an `OperationContext` to every function; here the caller that runs an
//! operation (the server, for one command) enters it for the current thread with [`enter`],
//! and the reads that can run long ask [`check`] once per entry they read. A thread-local keeps
//! the handle out of every signature between a command and a scan; a cursor's later batches
//! (getMore) run under the getMore's own operation, as in MongoDB.
//!
//! Cost when nothing is killed: one thread-local read and one atomic load per entry; the clock
//! is read every [`CLOCK_EVERY`] entries, and only when the operation has a time limit.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use crate::error::{Error, Result};

/// How many entries pass between two reads of the clock.
const CLOCK_EVERY: u32 = 128;

/// One operation's stop signal and counters, shared with whoever may kill or inspect it.
#[derive(Debug, Default)]
pub struct Operation {
    killed: AtomicBool,
    /// Whether `deadline` is set (read per entry; the deadline itself every `CLOCK_EVERY`).
    limited: AtomicBool,
    deadline: Mutex<Option<Instant>>,
    keys_examined: AtomicU64,
    docs_examined: AtomicU64,
}

impl Operation {
    /// An operation that must stop by `deadline` (`maxTimeMS`), if it has one.
    pub fn new(deadline: Option<Instant>) -> Operation {
        let operation = Operation::default();
        if let Some(deadline) = deadline {
            operation.limit(deadline);
        }
        operation
    }

    /// Sets the time by which the operation must stop (a cursor's remaining `maxTimeMS`).
    pub fn limit(&self, deadline: Instant) {
        *self.deadline.lock().unwrap_or_else(PoisonError::into_inner) = Some(deadline);
        self.limited.store(true, Ordering::Relaxed);
    }

    pub fn deadline(&self) -> Option<Instant> {
        *self.deadline.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Asks the operation to stop at its next check (`killOp`).
    pub fn kill(&self) {
        self.killed.store(true, Ordering::Relaxed);
    }

    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::Relaxed)
    }

    pub fn keys_examined(&self) -> u64 {
        self.keys_examined.load(Ordering::Relaxed)
    }

    pub fn docs_examined(&self) -> u64 {
        self.docs_examined.load(Ordering::Relaxed)
    }

    fn stop_reason(&self, read_clock: bool) -> Result<()> {
        if self.killed.load(Ordering::Relaxed) {
            return Err(Error::Interrupted("operation was interrupted".into()));
        }
        if read_clock && self.deadline().is_some_and(|deadline| Instant::now() >= deadline) {
            return Err(Error::MaxTimeExpired("operation exceeded time limit".into()));
        }
        Ok(())
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<Operation>>> = const { RefCell::new(None) };
    static SINCE_CLOCK: Cell<u32> = const { Cell::new(0) };
}

/// Leaves the operation (restoring the one entered before it) when dropped.
#[must_use = "the operation is left when the guard is dropped"]
pub struct Entered {
    previous: Option<Arc<Operation>>,
}

impl Drop for Entered {
    fn drop(&mut self) {
        let previous = self.previous.take();
        CURRENT.with(|current| *current.borrow_mut() = previous);
    }
}

/// Runs the current thread's reads under `operation` until the guard is dropped.
pub fn enter(operation: Arc<Operation>) -> Entered {
    let previous = CURRENT.with(|current| current.borrow_mut().replace(operation));
    Entered { previous }
}

/// Whether the current operation must stop: `Interrupted` (11601) once killed,
/// `MaxTimeMSExpired` (50) past its deadline. Reads call it once per entry.
pub fn check() -> Result<()> {
    CURRENT.with(|current| match current.borrow().as_ref() {
        Some(operation) => {
            let read_clock = operation.limited.load(Ordering::Relaxed) && {
                let since = SINCE_CLOCK.with(|since| {
                    let next = since.get().wrapping_add(1);
                    since.set(next);
                    next
                });
                since.is_multiple_of(CLOCK_EVERY)
            };
            operation.stop_reason(read_clock)
        }
        None => Ok(()),
    })
}

/// The current operation's deadline, if it has one.
pub fn deadline() -> Option<Instant> {
    CURRENT.with(|current| current.borrow().as_ref().and_then(|operation| operation.deadline()))
}

/// Gives the current operation a deadline (a getMore runs under its cursor's remaining time).
pub fn limit(deadline: Instant) {
    CURRENT.with(|current| {
        if let Some(operation) = current.borrow().as_ref() {
            operation.limit(deadline);
        }
    });
}

/// Checks the deadline now, whatever the entry count (before a command's work begins).
pub fn check_now() -> Result<()> {
    CURRENT.with(|current| current.borrow().as_ref().map_or(Ok(()), |operation| operation.stop_reason(true)))
}

/// Counts an index key read by the current operation.
pub fn key_examined() {
    count(|operation| &operation.keys_examined);
}

/// Counts a document read by the current operation.
pub fn doc_examined() {
    count(|operation| &operation.docs_examined);
}

fn count(counter: impl Fn(&Operation) -> &AtomicU64) {
    CURRENT.with(|current| {
        if let Some(operation) = current.borrow().as_ref() {
            counter(operation).fetch_add(1, Ordering::Relaxed);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A killed operation stops at its next check; leaving it restores the one before.
    #[test]
    fn kill_and_deadline_stop_the_entered_operation() {
        assert!(check().is_ok());
        let outer = Arc::new(Operation::new(None));
        let _outer = enter(outer.clone());
        {
            let inner = Arc::new(Operation::new(Some(Instant::now())));
            let _inner = enter(inner);
            assert_eq!(check_now().err().map(|e| e.code()), Some(50));
        }
        key_examined();
        doc_examined();
        doc_examined();
        assert_eq!((outer.keys_examined(), outer.docs_examined()), (1, 2));
        assert!(check().is_ok());
        outer.kill();
        assert_eq!(check().err().map(|e| e.code()), Some(11601));
    }
}
