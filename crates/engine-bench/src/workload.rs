//! The iibench pattern at the engine level, the same for every engine.
//!
//! Insert `i` (for `i` in `0..inserts`) writes four entries in one atomic transaction:
//!
//! ```text
//!   primary      key = id (8 bytes, big-endian)             value = ~1 KB payload
//!   secondary_k  key = random u64 (8 bytes BE) ++ id (8 B)  value = empty      (k = 1, 2, 3)
//! ```
//!
//! Inserts are grouped `batch` to a transaction (iibench inserts 1000 documents per call). The
//! payload is half random bytes and half zeros, so compressing engines gain about 2:1 on it, as
//! they would on real documents. The data depends on the seed alone, so every engine gets the
//! same rows. The loop runs on the calling thread; engines may run their own threads.

use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};

/// The number of secondary trees, as in iibench's three secondary indexes.
pub const SECONDARY_TREES: usize = 3;
/// Bytes in a secondary key: the random value, then the id.
pub const SECONDARY_KEY_BYTES: usize = 16;

/// One insert: the primary entry and its secondary keys.
pub struct Row {
    pub id: [u8; 8],
    pub value: Vec<u8>,
    pub secondary_keys: [[u8; SECONDARY_KEY_BYTES]; SECONDARY_TREES],
}

/// What each engine under test implements: commit a batch of rows atomically.
pub trait Backend {
    /// How commits reach the disk, in words for the report.
    fn durability(&self) -> String;
    /// Writes every row of the batch (4 entries per row) in one atomic transaction.
    fn insert_batch(&mut self, rows: &[Row]) -> anyhow::Result<()>;
    /// Closes cleanly: everything durable, background work stopped.
    fn close(self: Box<Self>) -> anyhow::Result<()>;
    /// The bytes the engine charges to its own cache budget now, where it reports them.
    fn cache_used_bytes(&self) -> Option<u64> {
        None
    }
    /// Reads the primary entry of `id` (after the inserts); whether it was found. `None`: this
    /// engine's reads are not measured.
    fn read(&self, _id: &[u8; 8]) -> Option<anyhow::Result<bool>> {
        None
    }
    /// Reads `count` consecutive entries of the first secondary tree from `start` on; how many
    /// there were.
    fn scan(&self, _start: &[u8], _count: usize) -> Option<anyhow::Result<usize>> {
        None
    }
    /// Node bytes the engine has read from its files so far, where it counts them.
    fn node_bytes_read(&self) -> Option<u64> {
        None
    }
}

/// What the read phase measured.
pub struct ReadRates {
    pub reads_per_second: f64,
    pub scans_per_second: f64,
    /// Node bytes read per point read (timed reads only), where the engine counts them.
    pub node_bytes_per_read: Option<f64>,
}

/// After the inserts: `reads` random point reads of the primary tree (after as many untimed
/// ones, to warm the cache as a steady reader would), then `scans` scans of `SCAN_LENGTH`
/// entries of a secondary tree from random places. `None` if the engine does not measure reads.
pub fn read_phase(
    backend: &dyn Backend,
    inserts: u64,
    reads: u64,
    scans: u64,
    seed: u64,
) -> Option<anyhow::Result<ReadRates>> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed_4ead);
    let read_random = |backend: &dyn Backend, rng: &mut StdRng| -> Option<anyhow::Result<()>> {
        let id = rng.gen_range(0..inserts.max(1)).to_be_bytes();
        Some(
            backend
                .read(&id)?
                .and_then(|found| if found { Ok(()) } else { Err(anyhow::anyhow!("id {id:?} not found")) }),
        )
    };
    for _ in 0..reads {
        if let Err(error) = read_random(backend, &mut rng)? {
            return Some(Err(error));
        }
    }
    let bytes_before = backend.node_bytes_read();
    let started = Instant::now();
    for _ in 0..reads {
        if let Err(error) = read_random(backend, &mut rng)? {
            return Some(Err(error));
        }
    }
    let read_seconds = started.elapsed().as_secs_f64();
    let node_bytes_per_read = backend
        .node_bytes_read()
        .zip(bytes_before)
        .map(|(after, before)| (after - before) as f64 / reads.max(1) as f64);
    let started = Instant::now();
    for _ in 0..scans {
        let start = rng.r#gen::<u64>().to_be_bytes();
        if let Err(error) = backend.scan(&start, SCAN_LENGTH)? {
            return Some(Err(error));
        }
    }
    let scan_seconds = started.elapsed().as_secs_f64();
    let per_second = |n: u64, seconds: f64| if seconds > 0.0 { n as f64 / seconds } else { 0.0 };
    Some(Ok(ReadRates {
        reads_per_second: per_second(reads, read_seconds),
        scans_per_second: per_second(scans, scan_seconds),
        node_bytes_per_read,
    }))
}

/// Entries per scan of the read phase.
pub const SCAN_LENGTH: usize = 1000;

/// The periodic durability that all three engines get: a sync at least every 100 ms, never one
/// per commit. Strata's `Durability::Periodic` does this inside the engine; redb and fjall ask
/// this clock after each commit.
pub struct SyncClock {
    last_sync: Instant,
}

pub const SYNC_INTERVAL: Duration = Duration::from_millis(100);

impl SyncClock {
    pub fn new() -> SyncClock {
        SyncClock { last_sync: Instant::now() }
    }

    /// True when the next commit should be synced; the caller syncs it.
    pub fn sync_due(&mut self) -> bool {
        if self.last_sync.elapsed() < SYNC_INTERVAL {
            return false;
        }
        self.last_sync = Instant::now();
        true
    }
}

#[derive(Clone, Debug)]
pub struct Workload {
    pub inserts: u64,
    pub batch: u64,
    pub value_bytes: usize,
    pub seed: u64,
    pub report_every: u64,
    /// Stop early (a partial run, reported as such) once this much time has passed.
    pub max_duration: Option<Duration>,
}

/// A point of the run: inserts committed and time since the first insert began.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub inserts: u64,
    pub elapsed: Duration,
}

/// Rates over stretches of the run, measured at batch boundaries.
#[derive(Clone, Copy, Debug)]
pub struct RunRates {
    pub inserts: u64,
    pub elapsed: Duration,
    pub overall: f64,
    pub first_tenth: f64,
    pub exit: f64,
}

struct RowGenerator {
    rng: StdRng,
    value_bytes: usize,
}

impl RowGenerator {
    fn row(&mut self, id: u64) -> Row {
        let id = id.to_be_bytes();
        let mut value = vec![0u8; self.value_bytes];
        let random_half = self.value_bytes / 2;
        if let Some(head) = value.get_mut(..random_half) {
            self.rng.fill_bytes(head);
        }
        let mut secondary_keys = [[0u8; SECONDARY_KEY_BYTES]; SECONDARY_TREES];
        for key in &mut secondary_keys {
            let (random, tail) = key.split_at_mut(8);
            random.copy_from_slice(&self.rng.r#gen::<u64>().to_be_bytes());
            tail.copy_from_slice(&id);
        }
        Row { id, value, secondary_keys }
    }
}

/// Runs the workload against `backend`, calling `on_report` every `report_every` inserts with
/// (the backend, the sample now, the sample at the previous report). Returns every batch
/// boundary.
pub fn run(
    backend: &mut dyn Backend,
    workload: &Workload,
    mut on_report: impl FnMut(&dyn Backend, Sample, Sample),
) -> anyhow::Result<Vec<Sample>> {
    assert!(workload.batch > 0 && workload.report_every > 0, "batch and report interval must be positive");
    let mut generator = RowGenerator { rng: StdRng::seed_from_u64(workload.seed), value_bytes: workload.value_bytes };
    let mut samples = vec![Sample { inserts: 0, elapsed: Duration::ZERO }];
    let mut last_report = Sample { inserts: 0, elapsed: Duration::ZERO };
    let mut rows = Vec::with_capacity(workload.batch as usize);
    let start = Instant::now();
    let mut done = 0u64;
    while done < workload.inserts {
        let end = (done + workload.batch).min(workload.inserts);
        rows.clear();
        rows.extend((done..end).map(|id| generator.row(id)));
        backend.insert_batch(&rows)?;
        done = end;
        let now = Sample { inserts: done, elapsed: start.elapsed() };
        samples.push(now);
        if done / workload.report_every > last_report.inserts / workload.report_every || done == workload.inserts {
            on_report(&*backend, now, last_report);
            last_report = now;
        }
        if workload.max_duration.is_some_and(|limit| now.elapsed >= limit) {
            break;
        }
    }
    Ok(samples)
}

/// Inserts per second between two samples.
pub fn rate(from: Sample, to: Sample) -> f64 {
    let seconds = to.elapsed.saturating_sub(from.elapsed).as_secs_f64();
    if seconds <= 0.0 {
        return 0.0;
    }
    to.inserts.saturating_sub(from.inserts) as f64 / seconds
}

/// The overall rate, the rate over the first 10% of the inserts done, and the exit velocity:
/// the rate over the last 10%. Each stretch ends or starts at the batch boundary nearest the
/// 10% mark on the side that makes it at least 10%.
pub fn rates(samples: &[Sample]) -> RunRates {
    let zero = Sample { inserts: 0, elapsed: Duration::ZERO };
    let first = samples.first().copied().unwrap_or(zero);
    let last = samples.last().copied().unwrap_or(zero);
    let tenth = last.inserts / 10;
    let first_tenth_end = samples.iter().copied().find(|s| s.inserts >= tenth.max(1)).unwrap_or(last);
    let exit_start = samples.iter().copied().rev().find(|s| s.inserts <= last.inserts - tenth).unwrap_or(first);
    RunRates {
        inserts: last.inserts,
        elapsed: last.elapsed,
        overall: rate(first, last),
        first_tenth: rate(first, first_tenth_end),
        exit: rate(exit_start, last),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(inserts: u64, millis: u64) -> Sample {
        Sample { inserts, elapsed: Duration::from_millis(millis) }
    }

    /// Goal: the first-10% and exit rates cover the right stretches. Method: a run whose speed
    /// halves after its first half, sampled every 10%.
    #[test]
    fn first_tenth_and_exit_rates() {
        let mut samples = vec![at(0, 0)];
        for step in 1..=10u64 {
            let millis = if step <= 5 { step * 100 } else { 500 + (step - 5) * 200 };
            samples.push(at(step * 1000, millis));
        }
        let rates = rates(&samples);
        assert_eq!(rates.inserts, 10_000);
        assert!((rates.first_tenth - 10_000.0).abs() < 1e-6);
        assert!((rates.exit - 5_000.0).abs() < 1e-6);
    }

    /// Goal: every engine gets the same rows. Method: two generators with one seed agree.
    #[test]
    fn rows_depend_on_the_seed_alone() {
        let mut a = RowGenerator { rng: StdRng::seed_from_u64(7), value_bytes: 1000 };
        let mut b = RowGenerator { rng: StdRng::seed_from_u64(7), value_bytes: 1000 };
        let (x, y) = (a.row(3), b.row(3));
        assert_eq!(x.value, y.value);
        assert_eq!(x.secondary_keys, y.secondary_keys);
        assert_eq!(x.secondary_keys[0][8..], 3u64.to_be_bytes());
    }
}
