//! Goal: a read whose window needs two or more sections that are not in memory (buffers on the
//! way down, the leaf's basement) starts reading all of them before it waits for any, so that
//! they go to the disk together; the advice names exactly the bytes then read; and a window
//! with one section to read, or none, gives no advice (a scan's later windows keep the
//! kernel's readahead).
//!
//! Method: an engine on `SimFs`, seen through a file system that logs every read and every
//! will-need advice on the data file. A tree of several levels is filled with small nodes,
//! closed and reopened, so that no section is in memory; then point ranges at keys spread over
//! the tree are read, each logged on its own, then point gets elsewhere, and a full scan after
//! them.

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;
use storage::io::{File, FileSystem, Lock, OpenMode, SimFs};
use storage::{Durability, Engine, FlushMode, Options};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Call {
    Read { offset: u64, len: u64 },
    WillNeed { offset: u64, len: u64 },
}

/// `SimFs`, with the reads and advice on the data file logged.
struct Logging {
    inner: SimFs,
    log: Arc<Mutex<Vec<Call>>>,
}

struct LoggedFile {
    inner: Arc<dyn File>,
    log: Arc<Mutex<Vec<Call>>>,
}

impl FileSystem for Logging {
    fn open(&self, path: &Path, mode: OpenMode) -> std::io::Result<Arc<dyn File>> {
        let file = self.inner.open(path, mode)?;
        if path.file_name().is_some_and(|name| name == "data.strata") {
            return Ok(Arc::new(LoggedFile { inner: file, log: Arc::clone(&self.log) }));
        }
        Ok(file)
    }
    fn remove(&self, path: &Path) -> std::io::Result<()> {
        self.inner.remove(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        self.inner.rename(from, to)
    }
    fn list(&self, dir: &Path) -> std::io::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> std::io::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        self.inner.sync_dir(dir)
    }
    fn exists(&self, path: &Path) -> std::io::Result<bool> {
        self.inner.exists(path)
    }
    fn try_lock(&self, path: &Path, owner: &str) -> std::io::Result<Lock> {
        self.inner.try_lock(path, owner)
    }
}

impl File for LoggedFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        self.log.lock().push(Call::Read { offset, len: buf.len() as u64 });
        self.inner.read_at(buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        self.inner.write_all_at(buf, offset)
    }
    fn sync(&self) -> std::io::Result<()> {
        self.inner.sync()
    }
    fn len(&self) -> std::io::Result<u64> {
        self.inner.len()
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.inner.set_len(len)
    }
    fn advise_will_need(&self, offset: u64, len: u64) {
        self.log.lock().push(Call::WillNeed { offset, len });
    }
}

fn options() -> Options {
    Options {
        node_size_bytes: 4096,
        basement_size_bytes: 512,
        fanout: 4,
        flush_mode: FlushMode::Inline,
        cache_size_bytes: 4 << 20,
        ..Options::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key-{:08}", i.wrapping_mul(2_654_435_761) % 1_000_000).into_bytes()
}

/// What one read logged: the advice given, and whether each advised range was then read whole,
/// after every advice was given and before the read returned.
fn check_advice(calls: &[Call], what: &str) -> usize {
    let advised: Vec<(usize, u64, u64)> = calls
        .iter()
        .enumerate()
        .filter_map(|(at, call)| match *call {
            Call::WillNeed { offset, len } => Some((at, offset, len)),
            Call::Read { .. } => None,
        })
        .collect();
    if advised.is_empty() {
        return 0;
    }
    assert!(advised.len() >= 2, "{what}: one section advised alone: {calls:?}");
    let first = advised.first().map_or(0, |a| a.0);
    let last = advised.last().map_or(0, |a| a.0);
    assert_eq!(last - first + 1, advised.len(), "{what}: the advice was not given all at once: {calls:?}");
    for (_, offset, len) in &advised {
        let read = calls.get(last..).unwrap_or_default().contains(&Call::Read { offset: *offset, len: *len });
        assert!(read, "{what}: advised {offset}+{len} was not read after: {calls:?}");
    }
    advised.len()
}

#[test]
fn a_window_starts_its_unread_sections_together() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let fs = Arc::new(Logging { inner: SimFs::new(), log: Arc::clone(&log) });
    let dir = Path::new("/db");
    let engine = Engine::open_with(fs.clone(), dir, options()).expect("create");
    let tree = engine.create_tree("t").expect("tree");
    for batch in 0..20 {
        let mut txn = engine.begin();
        for i in batch * 1000..(batch + 1) * 1000 {
            txn.put(tree, key(i), vec![7; 40]);
        }
        txn.commit(Durability::Immediate).expect("commit");
    }
    engine.verify().expect("verify");
    engine.close().expect("close");

    let engine = Engine::open_with(fs.clone(), dir, options()).expect("reopen");
    let snapshot = engine.snapshot();
    let (mut advised_reads, mut advice_given) = (0, 0);
    for probe in (0..20_000).step_by(997) {
        log.lock().clear();
        let from = key(probe);
        let first = snapshot
            .range(tree, (Bound::Included(from.as_slice()), Bound::Unbounded))
            .next()
            .expect("an entry")
            .expect("read");
        assert!(first.0 >= from, "probe {probe}: a key below the range");
        let calls = std::mem::take(&mut *log.lock());
        let advised = check_advice(&calls, &format!("probe {probe}"));
        advised_reads += usize::from(advised > 0);
        advice_given += advised;

        log.lock().clear();
        let again = snapshot
            .range(tree, (Bound::Included(from.as_slice()), Bound::Unbounded))
            .next()
            .expect("an entry")
            .expect("read again");
        assert_eq!(again, first);
        let calls = std::mem::take(&mut *log.lock());
        assert!(
            !calls.iter().any(|call| matches!(call, Call::WillNeed { .. })),
            "probe {probe}: advice for sections in memory"
        );
    }
    assert!(advised_reads >= 5, "only {advised_reads} cold ranges started their sections together");

    let mut advised_gets = 0;
    for probe in (500..20_000).step_by(1009) {
        log.lock().clear();
        assert_eq!(snapshot.get(tree, &key(probe)).expect("get"), Some(vec![7; 40]), "key {probe}");
        let calls = std::mem::take(&mut *log.lock());
        let advised = check_advice(&calls, &format!("get {probe}"));
        advised_gets += usize::from(advised > 0);
        advice_given += advised;
    }
    assert!(advised_gets >= 5, "only {advised_gets} cold gets started their sections together");

    log.lock().clear();
    let keys: Vec<Vec<u8>> = snapshot.iter(tree).map(|entry| entry.expect("scan").0).collect();
    assert_eq!(keys.len(), 20_000);
    assert!(keys.windows(2).all(|pair| pair[0] < pair[1]), "the scan is in key order");
    let calls = std::mem::take(&mut *log.lock());
    let reads = calls.iter().filter(|call| matches!(call, Call::Read { .. })).count();
    let advice = calls.iter().filter(|call| matches!(call, Call::WillNeed { .. })).count();
    assert!(
        advice * 2 < reads,
        "a scan's later windows read one section each, unadvised: {advice} advice, {reads} reads"
    );
    drop(snapshot);
    let stats = engine.stats();
    assert_eq!(stats.sections_started_early as usize, advice_given + advice, "the counter counts each advice");
    assert!(stats.section_loads >= stats.sections_started_early, "every section started was then read");
    engine.verify().expect("verify after the reads");
}
