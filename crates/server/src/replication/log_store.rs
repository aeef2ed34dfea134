//! The consensus library's storage (`raft::Storage`) over the member's durable consensus log
//! in the docstore (`docstore::RaftLog`): entries, the hard state (term, vote, commit) and the
//! membership (conf state), each written durably before the library is told it is.
//!
//! The last index and the terms around the compaction point are kept in memory as well (the
//! library asks for them on every message); entries are read from the engine.

use std::sync::Arc;

use protobuf::Message as _;
use raft::prelude::{ConfState, Entry, HardState, Snapshot, SnapshotMetadata};
use raft::{GetEntriesContext, RaftState, StorageError};

/// The names of the states kept beside the entries.
const HARD_STATE: &str = "hard";
const CONF_STATE: &str = "conf";
/// The term of the entry at the compaction point (the library asks for it).
const COMPACTED_TERM: &str = "compacted_term";
/// The membership and the set's configuration at the compaction point (the log's base, which
/// a snapshot carries and a joining member starts from).
const BASE_CONF: &str = "base_conf";
const BASE_DATA: &str = "base_data";
/// The snapshot an initial sync is copying the data for (empty: none). Kept until the copy is
/// installed, so that a member that stops halfway copies again when it starts.
const INITIAL_SYNC: &str = "initial_sync";

/// `raft::Storage` over the docstore's consensus log. Cheap to clone (the node and the
/// thread that persists share it).
#[derive(Clone)]
pub struct LogStore {
    log: Arc<docstore::RaftLog>,
    cache: Arc<parking_lot::RwLock<Cache>>,
}

#[derive(Default)]
struct Cache {
    hard: HardState,
    conf: ConfState,
    /// The index before the oldest entry kept, and its term.
    compacted: (u64, u64),
    last: u64,
    base_conf: ConfState,
    base_data: Vec<u8>,
    /// The newest applied point a snapshot may stand for (see [`LogStore::set_snapshot_point`]).
    snapshot_point: Option<SnapshotMetadata>,
    snapshot_data: Vec<u8>,
    /// The terms of the entries appended since the log was opened.
    terms: TermRuns,
}

/// The terms of a contiguous stretch of the log's newest entries, as runs (first index, term):
/// the library asks `term()` of recent entries many times a turn (each message to a peer, each
/// commit check), and terms change only at elections, so a few runs answer without reading
/// the entry back. They cover from the first run's index to the log's last entry; older
/// entries are read from the log.
#[derive(Default)]
struct TermRuns {
    runs: Vec<(u64, u64)>,
}

impl TermRuns {
    /// Entries were written from `first` on (replacing any from there), ending at `last`
    /// before this write (the log's last index then).
    fn appended(&mut self, entries: &[Entry], last: u64) {
        let Some(first) = entries.first().map(|e| e.index) else { return };
        if first > last + 1 {
            // Not contiguous with what the runs cover: start again from here.
            self.runs.clear();
        }
        while self.runs.last().is_some_and(|(start, _)| *start >= first) {
            self.runs.pop();
        }
        for entry in entries {
            if self.runs.last().map(|(_, term)| *term) != Some(entry.term) {
                self.runs.push((entry.index, entry.term));
            }
        }
    }

    /// The term of entry `index`, if the runs cover it (the caller checks `index` is at most
    /// the log's last).
    fn term(&self, index: u64) -> Option<u64> {
        let after = self.runs.partition_point(|(start, _)| *start <= index);
        after.checked_sub(1).and_then(|run| self.runs.get(run)).map(|(_, term)| *term)
    }

    fn clear(&mut self) {
        self.runs.clear();
    }
}

fn storage_error(error: impl std::fmt::Display) -> raft::Error {
    raft::Error::Store(StorageError::Other(error.to_string().into()))
}

impl LogStore {
    pub fn open(store: &docstore::Store) -> Result<LogStore, docstore::Error> {
        let log = store.raft_log()?;
        let mut cache = Cache::default();
        if let Some(bytes) = log.state(HARD_STATE)? {
            cache.hard = HardState::parse_from_bytes(&bytes).map_err(|e| corrupt(&e))?;
        }
        if let Some(bytes) = log.state(CONF_STATE)? {
            cache.conf = ConfState::parse_from_bytes(&bytes).map_err(|e| corrupt(&e))?;
        }
        let compacted_term = log.state(COMPACTED_TERM)?.and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
        cache.compacted = (log.compacted()?, compacted_term.unwrap_or(0));
        cache.last = log.last_index()?.unwrap_or(cache.compacted.0);
        if let Some(bytes) = log.state(BASE_CONF)? {
            cache.base_conf = ConfState::parse_from_bytes(&bytes).map_err(|e| corrupt(&e))?;
        }
        cache.base_data = log.state(BASE_DATA)?.unwrap_or_default();
        Ok(LogStore { log: Arc::new(log), cache: Arc::new(parking_lot::RwLock::new(cache)) })
    }

    /// Whether this member was ever given a membership (initiated, or joined a set).
    pub fn is_initialized(&self) -> bool {
        self.cache.read().conf != ConfState::default()
    }

    /// Starts the log at index 1 (term 1) from the set's base: the membership `conf` and the
    /// configuration the set was founded with. Every founding member does this with the same
    /// values, and so does a member added later (then the log's entries bring it up to date,
    /// the change that added it included), so their logs agree from there.
    pub fn bootstrap(&self, conf: ConfState, config: Vec<u8>) -> raft::Result<()> {
        let conf_bytes = conf.write_to_bytes().map_err(storage_error)?;
        let states = [
            (CONF_STATE, conf_bytes.clone()),
            (BASE_CONF, conf_bytes),
            (COMPACTED_TERM, 1u64.to_le_bytes().to_vec()),
            (BASE_DATA, config.clone()),
        ];
        self.log.reset_to(1, &states).map_err(storage_error)?;
        let mut cache = self.cache.write();
        cache.conf = conf.clone();
        cache.base_conf = conf;
        cache.compacted = (1, 1);
        cache.last = 1;
        cache.base_data = config;
        cache.terms.clear();
        Ok(())
    }

    /// The log's base, for a member that joins: the membership and configuration at index 1.
    pub fn base(&self) -> (ConfState, Vec<u8>) {
        let cache = self.cache.read();
        (cache.base_conf.clone(), cache.base_data.clone())
    }

    /// Persists entries from the library (overwriting from the first one's index) and, if it
    /// changed, the hard state: one durable write.
    pub fn append(&self, entries: &[Entry], hard: Option<&HardState>) -> raft::Result<()> {
        let converted: Vec<docstore::RaftEntry> = entries
            .iter()
            .map(|e| Ok(docstore::RaftEntry { index: e.index, term: e.term, bytes: e.write_to_bytes()? }))
            .collect::<Result<_, protobuf::ProtobufError>>()
            .map_err(storage_error)?;
        let mut states = Vec::new();
        if let Some(hard) = hard {
            states.push((HARD_STATE, hard.write_to_bytes().map_err(storage_error)?));
        }
        if converted.is_empty() && states.is_empty() {
            return Ok(());
        }
        // Entries, a term or a vote must be on disk before the library acts on them; a commit
        // index alone need not (raft's commit index is volatile state, learned again from the
        // leader), which saves a log sync per write on every member.
        let only_commit = converted.is_empty()
            && hard.is_some_and(|hard| {
                let cached = &self.cache.read().hard;
                hard.term == cached.term && hard.vote == cached.vote
            });
        let durability = if only_commit { docstore::Durability::Periodic } else { docstore::Durability::Immediate };
        self.log.append_with(&converted, &states, durability).map_err(storage_error)?;
        let mut cache = self.cache.write();
        let before = cache.last;
        cache.terms.appended(entries, before);
        if let Some(last) = entries.last() {
            cache.last = last.index;
        }
        if let Some(hard) = hard {
            cache.hard = hard.clone();
        }
        Ok(())
    }

    /// Persists the membership after a configuration change.
    pub fn set_conf(&self, conf: ConfState) -> raft::Result<()> {
        let states = [(CONF_STATE, conf.write_to_bytes().map_err(storage_error)?)];
        self.log.append(&[], &states).map_err(storage_error)?;
        self.cache.write().conf = conf;
        Ok(())
    }

    /// Installs a snapshot from the leader: the log then starts after it (a snapshot past the
    /// log's base stands for data an initial sync copied; see `initial_sync`).
    pub fn apply_snapshot(&self, snapshot: &Snapshot) -> raft::Result<()> {
        let meta = snapshot.get_metadata();
        let conf_bytes = meta.get_conf_state().write_to_bytes().map_err(storage_error)?;
        // Everything up to the snapshot is committed: the hard state's commit moves there too
        // (the library refuses a commit index behind the log's start).
        let mut hard = self.cache.read().hard.clone();
        hard.commit = hard.commit.max(meta.index);
        hard.term = hard.term.max(meta.term);
        let states = [
            (HARD_STATE, hard.write_to_bytes().map_err(storage_error)?),
            (CONF_STATE, conf_bytes.clone()),
            (BASE_CONF, conf_bytes),
            (COMPACTED_TERM, meta.term.to_le_bytes().to_vec()),
            (BASE_DATA, snapshot.data.to_vec()),
            (INITIAL_SYNC, Vec::new()),
        ];
        self.log.reset_to(meta.index, &states).map_err(storage_error)?;
        let mut cache = self.cache.write();
        cache.hard = hard;
        cache.conf = meta.get_conf_state().clone();
        cache.base_conf = meta.get_conf_state().clone();
        cache.compacted = (meta.index, meta.term);
        cache.last = meta.index;
        cache.base_data = snapshot.data.to_vec();
        cache.terms.clear();
        Ok(())
    }

    /// Records that an initial sync copies the data for `snapshot` (see [`INITIAL_SYNC`]).
    pub fn begin_initial_sync(&self, snapshot: &Snapshot) -> raft::Result<()> {
        let states = [(INITIAL_SYNC, snapshot.write_to_bytes().map_err(storage_error)?)];
        self.log.append(&[], &states).map_err(storage_error)
    }

    /// Forgets the record of an initial sync whose copy is in (one that installed no snapshot).
    pub fn end_initial_sync(&self) -> raft::Result<()> {
        self.log.append(&[], &[(INITIAL_SYNC, Vec::new())]).map_err(storage_error)
    }

    /// The snapshot an unfinished initial sync was copying the data for.
    pub fn initial_sync(&self) -> raft::Result<Option<Snapshot>> {
        match self.log.state(INITIAL_SYNC).map_err(storage_error)? {
            Some(bytes) if !bytes.is_empty() => Snapshot::parse_from_bytes(&bytes).map(Some).map_err(storage_error),
            _ => Ok(None),
        }
    }

    /// Forgets the entries up to `index` (applied here, and with operations the oplog's cap
    /// has trimmed): the log's base moves there, with the membership `conf` and the base
    /// document `base` (the set's configuration and the oplog position at `index`), which is
    /// the snapshot a member that needs older entries is sent.
    pub fn compact(&self, index: u64, term: u64, conf: &ConfState, base: Vec<u8>) -> raft::Result<()> {
        let states = [
            (BASE_CONF, conf.write_to_bytes().map_err(storage_error)?),
            (COMPACTED_TERM, term.to_le_bytes().to_vec()),
            (BASE_DATA, base.clone()),
        ];
        self.log.compact(index, &states).map_err(storage_error)?;
        let mut cache = self.cache.write();
        cache.compacted = (index, term);
        cache.base_conf = conf.clone();
        cache.base_data = base;
        Ok(())
    }

    /// Notes an applied point (`index`, its `term`, the membership `conf` and the base document
    /// `base` there) as the snapshot to send a member that needs entries the log no longer
    /// has: newer than the log's base, and after any membership change (a member added later
    /// than the base would refuse a snapshot whose membership lacks it).
    pub fn set_snapshot_point(&self, index: u64, term: u64, conf: &ConfState, base: Vec<u8>) {
        let mut meta = SnapshotMetadata { index, term, ..Default::default() };
        meta.set_conf_state(conf.clone());
        let mut cache = self.cache.write();
        cache.snapshot_point = Some(meta);
        cache.snapshot_data = base;
    }

    /// The index before the oldest entry kept.
    pub fn compacted(&self) -> u64 {
        self.cache.read().compacted.0
    }
}

fn corrupt(error: &impl std::fmt::Display) -> docstore::Error {
    docstore::Error::Corruption(format!("consensus state: {error}"))
}

impl raft::Storage for LogStore {
    fn initial_state(&self) -> raft::Result<RaftState> {
        let cache = self.cache.read();
        Ok(RaftState::new(cache.hard.clone(), cache.conf.clone()))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        let (compacted, last) = {
            let cache = self.cache.read();
            (cache.compacted.0, cache.last)
        };
        if low <= compacted {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        assert!(high <= last + 1, "the consensus library asked for entries past the last ({high} > {last} + 1)");
        let stored = self.log.entries(low, high, max_size.into().unwrap_or(u64::MAX)).map_err(storage_error)?;
        stored.iter().map(|e| Entry::parse_from_bytes(&e.bytes).map_err(storage_error)).collect()
    }

    fn term(&self, index: u64) -> raft::Result<u64> {
        let (compacted, last, recent) = {
            let cache = self.cache.read();
            (cache.compacted, cache.last, cache.terms.term(index))
        };
        if index == compacted.0 {
            return Ok(compacted.1);
        }
        if index < compacted.0 {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if index > last {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        if let Some(term) = recent {
            debug_assert_eq!(self.log.term(index).ok().flatten(), Some(term), "the term cache of entry {index}");
            return Ok(term);
        }
        self.log.term(index).map_err(storage_error)?.ok_or(raft::Error::Store(StorageError::Unavailable))
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.cache.read().compacted.0 + 1)
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.cache.read().last)
    }

    fn snapshot(&self, request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        let cache = self.cache.read();
        let (meta, data) = match &cache.snapshot_point {
            Some(point) if point.index >= cache.compacted.0 && point.index <= cache.last => {
                (point.clone(), cache.snapshot_data.clone())
            }
            _ => {
                let mut meta =
                    SnapshotMetadata { index: cache.compacted.0, term: cache.compacted.1, ..Default::default() };
                meta.set_conf_state(cache.base_conf.clone());
                (meta, cache.base_data.clone())
            }
        };
        let mut snapshot = Snapshot { data: data.into(), ..Default::default() };
        snapshot.set_metadata(meta);
        if snapshot.get_metadata().index < request_index {
            // The library asks for a snapshot at least this recent; the log's base is the only
            // one (it moves as the log is compacted).
            return Err(raft::Error::Store(StorageError::SnapshotTemporarilyUnavailable));
        }
        Ok(snapshot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(first: u64, terms: &[u64]) -> Vec<Entry> {
        terms
            .iter()
            .enumerate()
            .map(|(i, term)| Entry { index: first + i as u64, term: *term, ..Default::default() })
            .collect()
    }

    /// Goal: the term runs answer exactly what the log holds, through appends that extend it,
    /// overwrite its tail (a new leader's entries) or start past it. Method: a model (a map
    /// of index to term) beside the runs.
    #[test]
    fn term_runs_follow_the_log() {
        let mut runs = TermRuns::default();
        let mut model = std::collections::BTreeMap::new();
        let mut last = 0;
        let mut append = |runs: &mut TermRuns, first: u64, terms: &[u64]| {
            let written = entries(first, terms);
            runs.appended(&written, last);
            if first > last + 1 {
                model.clear();
            }
            model.retain(|index, _| *index < first);
            model.extend(written.iter().map(|e| (e.index, e.term)));
            last = written.last().map_or(last, |e| e.index);
            for index in 0..=last + 1 {
                let expected = if index <= last { model.get(&index).copied() } else { runs.term(index) };
                assert_eq!(
                    runs.term(index).filter(|_| index <= last),
                    expected.filter(|_| index <= last),
                    "entry {index}"
                );
            }
        };
        append(&mut runs, 2, &[1, 1, 1]);
        append(&mut runs, 5, &[1, 2, 2]);
        append(&mut runs, 4, &[3, 3]);
        append(&mut runs, 6, &[3, 4]);
        append(&mut runs, 20, &[5]);
        assert_eq!(runs.term(7), None, "before a restart of the runs: read from the log");
        assert_eq!(runs.term(20), Some(5));
        runs.clear();
        assert_eq!(runs.term(20), None);
    }
}
