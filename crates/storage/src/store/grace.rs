//! Grace periods for freed blocks: a block readers may have been handed (a reader copies a
//! slot's address under the shard lock and reads after dropping it) goes back to the allocator
//! only once every reader that could have seen it has finished.
//!
//! Two-counter epochs: a reader *pins* the current epoch (counts itself in the counter of the
//! epoch's parity, then checks the epoch did not move meanwhile) for as long as it may read
//! a block whose address it copied. A block is *retired* with the epoch current when it was
//! unlinked from its slot. The epoch advances from `e` to `e + 1` only when no reader of `e - 1`
//! is left, so at epoch `e` no reader pinned at `e - 2` or before remains, and a block retired
//! at `e - 2` or before is nobody's: it is freed. Readers are short (a head or a section read),
//! so a retired block waits for a couple of later retirements or one `drain`.
//!
//! Readers never wait and never take a lock: two atomic additions per pin.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;

use crate::file::{BlockAddr, DataFile};

#[derive(Default)]
pub(crate) struct Grace {
    epoch: AtomicU64,
    pinned: [AtomicUsize; 2],
    /// In the order retired, so in epoch order (each entry's epoch is read under the lock):
    /// what may be freed is always a prefix.
    retired: Mutex<VecDeque<(u64, BlockAddr)>>,
    retired_bytes: AtomicU64,
}

/// A reader's pin: while it lives, no block the reader copied an address of is reused.
pub(crate) struct Pin<'a> {
    grace: &'a Grace,
    epoch: u64,
}

impl Drop for Pin<'_> {
    fn drop(&mut self) {
        self.grace.counter(self.epoch).fetch_sub(1, Ordering::Release);
    }
}

impl Grace {
    fn counter(&self, epoch: u64) -> &AtomicUsize {
        &self.pinned[(epoch & 1) as usize]
    }

    pub fn pin(&self) -> Pin<'_> {
        loop {
            let epoch = self.epoch.load(Ordering::Acquire);
            self.counter(epoch).fetch_add(1, Ordering::SeqCst);
            if self.epoch.load(Ordering::SeqCst) == epoch {
                return Pin { grace: self, epoch };
            }
            // The epoch moved between the two loads: counted under the wrong parity, retry.
            self.counter(epoch).fetch_sub(1, Ordering::Release);
        }
    }

    /// Retires a block unlinked from its slot just now, and frees whatever retired block no
    /// reader can hold any more.
    pub fn retire(&self, file: &Arc<DataFile>, addr: BlockAddr) {
        {
            let mut retired = self.retired.lock();
            retired.push_back((self.epoch.load(Ordering::SeqCst), addr));
        }
        self.retired_bytes.fetch_add(u64::from(addr.len), Ordering::Relaxed);
        self.collect(file);
    }

    /// Advances the epoch if the readers of the one before have all finished, then frees the
    /// blocks retired two epochs back or earlier. Returns whether any retired block is left.
    pub fn collect(&self, file: &Arc<DataFile>) -> bool {
        let epoch = self.epoch.load(Ordering::SeqCst);
        let epoch = if self.counter(epoch.wrapping_sub(1)).load(Ordering::SeqCst) == 0 {
            match self.epoch.compare_exchange(epoch, epoch + 1, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => epoch + 1,
                Err(now) => now,
            }
        } else {
            epoch
        };
        let mut retired = self.retired.lock();
        let mut freed = 0u64;
        while let Some(&(at, addr)) = retired.front()
            && at + 2 <= epoch
        {
            retired.pop_front();
            file.free(addr);
            freed += u64::from(addr.len);
        }
        self.retired_bytes.fetch_sub(freed, Ordering::Relaxed);
        !retired.is_empty()
    }

    /// Frees every block retired before the call, waiting for the readers that may hold one
    /// (each a single read): before compacting or truncating the file. Blocks retired during
    /// the call are left for later, so a steady stream of retirements cannot keep it waiting.
    pub fn drain(&self, file: &Arc<DataFile>) {
        let target = self.epoch.load(Ordering::SeqCst) + 2;
        self.collect(file);
        while self.epoch.load(Ordering::SeqCst) < target {
            std::thread::yield_now();
            self.collect(file);
        }
    }

    pub fn retired_bytes(&self) -> u64 {
        self.retired_bytes.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    //! Goal: a retired block is never freed while a reader pinned before its retirement lives,
    //! and is freed once none does.
    use super::*;
    use crate::io::sim::SimFs;

    fn file() -> Arc<DataFile> {
        Arc::new(DataFile::open(&SimFs::new(), std::path::Path::new("data")).expect("open"))
    }

    #[test]
    fn a_pinned_reader_holds_back_what_was_retired_after_it_pinned() {
        let grace = Grace::default();
        let file = file();
        let a = file.write_block(1, &[1; 100]).expect("write");
        let pin = grace.pin();
        grace.retire(&file, a);
        for _ in 0..10 {
            assert!(grace.collect(&file), "the reader may still read it");
        }
        assert_eq!(grace.retired_bytes(), u64::from(a.len));
        drop(pin);
        grace.drain(&file);
        assert_eq!(grace.retired_bytes(), 0);
        assert_eq!(file.write_block(2, &[2; 100]).expect("write").offset, a.offset, "its space is reused");
    }

    #[test]
    fn readers_pinned_later_do_not_hold_it() {
        let grace = Grace::default();
        let file = file();
        let a = file.write_block(1, &[1; 100]).expect("write");
        grace.retire(&file, a);
        grace.collect(&file);
        let _late = grace.pin();
        // The late reader pinned an epoch after the retirement; it cannot have seen the block.
        let mut rounds = 0;
        while grace.collect(&file) {
            rounds += 1;
            assert!(rounds < 4, "freed within a few collections despite the late reader");
        }
    }
}
