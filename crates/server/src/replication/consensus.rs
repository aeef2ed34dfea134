//! The consensus thread: raft-rs (TiKV's port of etcd's Raft, pinned in Cargo.toml) decides
//! who is primary and in what order the set's changes are committed; this thread maps that
//! onto MongoDB's replication.
//!
//! - **Terms and elections** are the library's: pre-vote, check-quorum (a leader that has not
//!   heard from a majority for an election timeout steps down), election timeouts of
//!   `settings.electionTimeoutMillis` (10 s unless configured) plus up to half again at random,
//!   on 50 ms ticks, heartbeats every 100 ms, priorities (`priority` 0 never campaigns), non-voting members as
//!   learners, leadership transfer for `replSetStepDown`. The leader of a term is the primary
//!   once it has applied every entry committed before its term (MongoDB's drain), and its
//!   oplog entries carry the term as `t`; `electionId` encodes it.
//! - **The log carries the oplog.** The primary commits each write locally as a standalone does
//!   (the change and its oplog entry in one engine transaction), then this thread proposes the
//!   new oplog entries, in `ts` order, as one consensus entry (`{ops: [...]}`). An entry the
//!   library reports committed is on a majority of the voting members: the majority commit
//!   point is its last `ts`. Other members apply committed entries' operations through the
//!   docstore (`Store::apply_replicated`), which writes each into their own oplog unchanged;
//!   their oplog is therefore always a prefix of the primary's.
//! - **Rollback.** A primary that loses its majority may hold entries the set never committed
//!   (committed locally, acknowledged to `w: 1` writers, never on a majority). When such a
//!   member meets the new primary's history it rolls back (`Node::roll_back`): the entries go
//!   to `rollback/` in its data directory, and it forgets its data and applies the set's
//!   history again from the consensus log. No write acknowledged with `w: "majority"` is
//!   among them (docs/RELIABILITY.md).
//! - **Membership** changes are the library's configuration changes (joint consensus), each
//!   carrying the new replica-set configuration document.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use bson::{Bson, Document, RawDocumentBuf, Timestamp, rawdoc};
use protobuf::Message as _;
use raft::prelude::{
    ConfChangeSingle, ConfChangeType, ConfChangeV2, ConfState, Entry, EntryType, Message, MessageType, Snapshot,
};
use raft::{RawNode, SnapshotStatus, StateRole};
use tracing::{error, info, warn};

use super::config::SetConfig;
use super::log_store::LogStore;
use super::member_auth::MemberCredentials;
use super::progress::{MemberProgress, Progress, State};
use super::transport::Transport;

/// One tick of the library's clock.
pub const TICK: Duration = Duration::from_millis(50);
/// A leader's heartbeats, in ticks.
const HEARTBEAT_TICKS: usize = 2;
/// Oplog entries proposed in one consensus entry at most, and their bytes (an entry's one
/// operation may be larger). One entry is proposed per turn of the loop, so that persisting
/// and sending a turn's work never holds back heartbeats for long (a member that hears none
/// for an election timeout campaigns).
const OPS_PER_ENTRY: usize = 1000;
const ENTRY_BYTES: usize = 4 << 20;
/// Applied entries between two points the log may later be compacted to.
const COMPACTION_POINT_EVERY: u64 = 64;
/// Initial sync's rounds over the members before the turn fails (and the node restarts).
const SYNC_ROUNDS: usize = 5;
/// How long a rollback waits for the transactions left open from this member's time as primary.
const ROLLBACK_TRANSACTIONS_WAIT: Duration = Duration::from_secs(5);

/// What the rest of the server asks of the consensus thread.
pub enum Input {
    /// Messages from other members.
    Messages(Vec<Message>),
    /// The oplog grew (the primary proposes what is new).
    Appended,
    /// Start an election now (the member that initiated the set).
    Campaign,
    /// Hand the primary role to the most up-to-date electable member.
    StepDown,
    /// Do not campaign until this instant.
    Freeze(Option<Instant>),
    /// Change the membership to `config` (`rs.add`, `rs.remove`, `rs.reconfig`).
    Reconfigure { config: SetConfig, reply: Sender<Result<(), String>> },
    /// A peer could not be reached.
    Unreachable(u64),
    /// A secondary's report: member `member` has applied the entry at `applied` (a ts).
    Position { member: u64, applied: u64 },
    /// Confirm this member is still the primary (a heartbeat round a majority answers) and
    /// has applied everything committed until now (raft's read index), for a linearizable read.
    ReadIndex(Sender<Result<(), String>>),
    /// The server shuts down: the thread ends (and lets go of the store).
    Stop,
}

/// How applying an entry's operations went.
enum Applied {
    All,
    /// This member holds entries the set did not commit (why, in words).
    Diverged(String),
}

/// Writes rolled-back oplog entries to `dir/rollback/SET-SECONDS.bson`; returns the file.
fn save_rolled_back(
    dir: &std::path::Path,
    set: &str,
    entries: &[(Timestamp, RawDocumentBuf)],
) -> std::io::Result<std::path::PathBuf> {
    use std::io::Write as _;
    let folder = dir.join("rollback");
    std::fs::create_dir_all(&folder)?;
    let seconds = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let path = folder.join(format!("{set}-{seconds}.bson"));
    let mut file = std::fs::File::create(&path)?;
    for (_, entry) in entries {
        file.write_all(entry.as_bytes())?;
    }
    file.sync_all()?;
    Ok(path)
}

/// The handle the server keeps.
pub struct Consensus {
    pub inbox: Sender<Input>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Set when the server shuts down: an initial sync in progress gives up at its next batch.
    stopping: Arc<std::sync::atomic::AtomicBool>,
}

/// Called when the member's role, term or primary changes (to wake awaitable `hello`s).
pub type OnChange = Box<dyn Fn(&SetConfig) + Send>;

/// What the thread works on and reports to, besides its log.
pub struct Surroundings {
    pub store: Arc<docstore::Store>,
    pub progress: Arc<Progress>,
    pub on_change: OnChange,
    /// Where rolled-back entries are kept (the data directory).
    pub rollback_dir: Option<std::path::PathBuf>,
    /// The address this member listens on (its connections to peers start from it).
    pub source: Option<std::net::IpAddr>,
    /// What this member proves itself to the others with.
    pub credentials: MemberCredentials,
}

impl Consensus {
    /// Starts the thread for member `id` over `log` (bootstrapped: see `LogStore::bootstrap`).
    pub fn start(id: u64, config: SetConfig, log: LogStore, around: Surroundings) -> Result<Consensus, String> {
        let (inbox, receiver) = std::sync::mpsc::channel();
        let (unreachable_tx, mut unreachable_rx) = tokio::sync::mpsc::unbounded_channel();
        let runtime = tokio::runtime::Handle::try_current().map_err(|e| e.to_string())?;
        let forward = inbox.clone();
        runtime.spawn(async move {
            while let Some(id) = unreachable_rx.recv().await {
                if forward.send(Input::Unreachable(id)).is_err() {
                    return;
                }
            }
        });
        let mut transport = Transport::new(unreachable_tx, (around.source, around.credentials.clone()));
        transport.set_set_id(config.replica_set_id());
        transport.set_peers(&peers(&config, id));
        let node = Node::new(id, config, log, transport, around)?;
        let stopping = Arc::clone(&node.stopping);
        let thread = std::thread::Builder::new()
            .name("consensus".into())
            .spawn(move || node.run(receiver))
            .map_err(|e| e.to_string())?;
        Ok(Consensus { inbox, thread: Some(thread), stopping })
    }

    /// Ends the thread and waits for it.
    pub fn stop(&mut self) {
        self.stopping.store(true, std::sync::atomic::Ordering::Release);
        let _ = self.inbox.send(Input::Stop);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn peers(config: &SetConfig, me: u64) -> Vec<(u64, String)> {
    config.members.iter().filter(|m| m.raft_id() != me).map(|m| (m.raft_id(), m.host.clone())).collect()
}

/// The library's node for member `id` over `log`, logging into the server's log.
/// (A changed `electionTimeoutMillis` applies from the node's next start.)
fn raw_node(id: u64, config: &SetConfig, log: &LogStore) -> Result<RawNode<LogStore>, String> {
    let priority = config.member(id).map_or(0.0, |m| m.priority);
    let logger = slog::Logger::root(slog::Drain::fuse(super::raft_log::ToTracing), slog::o!("member" => id));
    let election_ticks = (config.election_timeout().as_millis() / TICK.as_millis()) as usize;
    RawNode::new(&raft_config(id, priority, election_ticks), log.clone(), &logger).map_err(|e| e.to_string())
}

/// MongoDB's priorities are 0-1000 with fractions; the library's are integers.
fn raft_priority(priority: f64) -> i64 {
    (priority * 1000.0) as i64
}

/// `election_ticks`: ticks without a leader before a follower campaigns (randomized up to half
/// again: enough spread that two members rarely campaign in the same tick).
fn raft_config(id: u64, priority: f64, election_ticks: usize) -> raft::Config {
    let election_tick = election_ticks.max(3 * HEARTBEAT_TICKS);
    raft::Config {
        id,
        election_tick,
        min_election_tick: election_tick,
        max_election_tick: election_tick + (election_tick / 2).max(2),
        heartbeat_tick: HEARTBEAT_TICKS,
        max_size_per_msg: 4 << 20,
        // A turn applies about this much (one entry at least), so that a member applying large
        // documents still answers heartbeats in time.
        max_committed_size_per_ready: 4 << 20,
        max_inflight_msgs: 256,
        check_quorum: true,
        pre_vote: true,
        priority: raft_priority(priority),
        ..raft::Config::default()
    }
}

struct Node {
    raw: RawNode<LogStore>,
    log: LogStore,
    store: Arc<docstore::Store>,
    progress: Arc<Progress>,
    transport: Transport,
    config: SetConfig,
    on_change: OnChange,
    /// The `ts` of the newest operation taken from the committed log (applied here, or found
    /// already here).
    last_raft_ts: u64,
    /// The newest `ts` proposed (as primary).
    proposed_ts: u64,
    /// Entries proposed in this term not yet known to every member: (index, last ts).
    in_flight: VecDeque<(u64, u64)>,
    /// Set once this member's data left the set's history; it then applies nothing.
    diverged: Option<String>,
    frozen_until: Option<Instant>,
    published: (StateRole, u64, u64, bool),
    /// Where rolled-back entries are kept (the data directory).
    rollback_dir: Option<std::path::PathBuf>,
    /// Linearizable reads waiting for their read index: by request number, then by index.
    read_requests: std::collections::HashMap<u64, Sender<Result<(), String>>>,
    read_waits: Vec<(u64, Sender<Result<(), String>>)>,
    next_read: u64,
    /// How far each secondary reported it has applied (as primary; `w: N` counts these).
    applied_by: std::collections::HashMap<u64, u64>,
    /// Set when a proposal left operations for the next turn.
    more_to_propose: bool,
    /// The newest position this member reported, and to which primary.
    reported: (u64, u64),
    /// What initial sync's connections prove this member with.
    credentials: MemberCredentials,
    /// A snapshot whose data this member must copy (`initial_sync`) before going on.
    syncing: Option<Snapshot>,
    /// Set when the server shuts down (an initial sync gives up).
    stopping: Arc<std::sync::atomic::AtomicBool>,
    /// Points the log may be compacted to, oldest first: (index, its term, the oplog position
    /// there, the base document there, the membership there).
    compaction_points: VecDeque<CompactionPoint>,
    /// The membership changed since the newest compaction point.
    membership_changed: bool,
    /// On a delayed member (`secondaryDelaySecs`): committed entries not applied yet, oldest
    /// first (read again from the log when due, so they take no memory).
    delayed: VecDeque<u64>,
}

struct CompactionPoint {
    index: u64,
    term: u64,
    ts: u64,
    base: Vec<u8>,
    conf: ConfState,
}

impl Node {
    fn new(
        id: u64,
        config: SetConfig,
        log: LogStore,
        transport: Transport,
        around: Surroundings,
    ) -> Result<Node, String> {
        let Surroundings { store, progress, on_change, rollback_dir, credentials, .. } = around;
        let raw = raw_node(id, &config, &log)?;
        let syncing = pending_sync(&log, &store)?;
        if syncing.is_some() {
            // Not a secondary until the copy is in (hello, rs.status and reads say so).
            progress.publish(|published| published.state = State::Startup2);
        }
        let base = base_ts(&log.base().1);
        store.set_originates(false);
        store.set_builds_indexes(config.member(id).is_none_or(|me| me.build_indexes));
        Ok(Node {
            raw,
            log,
            store,
            progress,
            transport,
            config,
            on_change,
            last_raft_ts: base,
            proposed_ts: base,
            in_flight: VecDeque::new(),
            diverged: None,
            frozen_until: None,
            published: (StateRole::Follower, 0, 0, false),
            rollback_dir,
            read_requests: std::collections::HashMap::new(),
            read_waits: Vec::new(),
            next_read: 0,
            applied_by: std::collections::HashMap::new(),
            reported: (0, 0),
            more_to_propose: false,
            credentials,
            syncing,
            compaction_points: VecDeque::new(),
            membership_changed: false,
            delayed: VecDeque::new(),
            stopping: Arc::default(),
        })
    }

    fn run(mut self, inbox: Receiver<Input>) {
        let mut next_tick = Instant::now() + TICK;
        let mut failures = 0;
        loop {
            let step = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.step(&inbox, &mut next_tick)));
            let failure = match step {
                Ok(Ok(true)) => {
                    failures = 0;
                    continue;
                }
                Ok(Ok(false)) => return,
                Ok(Err(failure)) => failure,
                Err(panic) => panic_message(&panic),
            };
            // Start the library's node again from the durable log, as a restart would; a
            // member that keeps failing stops replicating and says so (never a silent thread
            // whose last word was "writable").
            failures += 1;
            error!(%failure, failures, "consensus: a step failed; restarting the consensus node from its log");
            std::thread::sleep(TICK * 2);
            let restarted = if failures < 5 { self.restart() } else { Err(failure) };
            if let Err(reason) = restarted {
                self.diverge(format!("the consensus node keeps failing: {reason}"));
                self.publish();
                while !matches!(inbox.recv(), Ok(Input::Stop) | Err(_)) {}
                return;
            }
        }
    }

    /// One turn of the loop: inputs, a tick when due, proposals, the library's ready state,
    /// publishing. `Ok(false)`: stop.
    fn step(&mut self, inbox: &Receiver<Input>, next_tick: &mut Instant) -> Result<bool, String> {
        let wait = match std::mem::take(&mut self.more_to_propose) {
            true => Duration::ZERO,
            false => next_tick.saturating_duration_since(Instant::now()),
        };
        match inbox.recv_timeout(wait) {
            Ok(Input::Stop) => return Ok(false),
            Ok(input) => {
                self.handle(input);
                while let Ok(input) = inbox.try_recv() {
                    if matches!(input, Input::Stop) {
                        return Ok(false);
                    }
                    self.handle(input);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return Ok(false),
        }
        let now = Instant::now();
        if now >= *next_tick {
            self.tick(now);
            *next_tick = (*next_tick + TICK).max(now);
        }
        self.propose_new_ops();
        self.promote_caught_up();
        self.on_ready()?;
        if let Some(snapshot) = self.syncing.take() {
            self.initial_sync(snapshot)?;
        }
        self.apply_delayed()?;
        self.publish();
        Ok(true)
    }

    /// A new library node over the durable log (what was not persisted is forgotten, as in a
    /// crash); committed entries come again and are skipped where this member holds them.
    fn restart(&mut self) -> Result<(), String> {
        self.raw = raw_node(self.raw.raft.id, &self.config, &self.log)?;
        if self.config.voters() == vec![self.raw.raft.id] {
            // Alone, it is primary again at once rather than after an election timeout.
            let _ = self.raw.campaign();
        }
        self.last_raft_ts = base_ts(&self.log.base().1);
        self.proposed_ts = self.last_raft_ts;
        self.in_flight.clear();
        self.compaction_points.clear();
        self.delayed.clear();
        self.syncing = pending_sync(&self.log, &self.store)?;
        for (_, reply) in self.read_waits.drain(..).chain(self.read_requests.drain()) {
            let _ = reply.send(Err("the consensus node restarted".into()));
        }
        Ok(())
    }

    fn handle(&mut self, input: Input) {
        match input {
            Input::Messages(messages) => {
                for message in messages {
                    // A message for an older configuration or from a stranger is dropped by
                    // the library; errors here are of that kind.
                    let _ = self.raw.step(message);
                }
            }
            Input::Appended => {}
            Input::Campaign => {
                let _ = self.raw.campaign();
            }
            Input::StepDown => self.step_down(),
            Input::Freeze(until) => self.frozen_until = until,
            Input::Reconfigure { config, reply } => {
                let _ = reply.send(self.reconfigure(config));
            }
            Input::Unreachable(id) => self.raw.report_unreachable(id),
            Input::ReadIndex(reply) => {
                if !self.is_writable() {
                    let _ = reply.send(Err("not primary".into()));
                    return;
                }
                self.next_read += 1;
                self.read_requests.insert(self.next_read, reply);
                self.raw.read_index(self.next_read.to_le_bytes().to_vec());
            }
            Input::Position { member, applied } => {
                let known = self.applied_by.entry(member).or_insert(0);
                *known = (*known).max(applied);
            }
            Input::Stop => {}
        }
    }

    fn tick(&mut self, now: Instant) {
        let frozen = self.frozen_until.is_some_and(|until| now < until);
        if frozen && self.raw.raft.state != StateRole::Leader {
            // A frozen member does not campaign: its election clock does not run.
            return;
        }
        self.raw.tick();
    }

    /// `replSetStepDown`: transfer leadership to the member that has the most of the log.
    fn step_down(&mut self) {
        if self.raw.raft.state != StateRole::Leader {
            return;
        }
        let me = self.raw.raft.id;
        let best = self
            .raw
            .raft
            .prs()
            .iter()
            .filter(|(id, _)| **id != me && self.config.member(**id).is_some_and(|m| m.priority > 0.0 && m.votes))
            .max_by_key(|(_, progress)| progress.matched)
            .map(|(id, _)| *id);
        if let Some(target) = best {
            info!(to = target, "stepping down: handing the primary role over");
            self.raw.transfer_leader(target);
        }
    }

    /// Proposes a membership change to `config` (joint consensus when several members change).
    fn reconfigure(&mut self, config: SetConfig) -> Result<(), String> {
        if self.raw.raft.state != StateRole::Leader {
            return Err("not primary".into());
        }
        let old = (self.config.voters(), self.config.learners());
        let mut changes = Vec::new();
        let mut change = |kind: ConfChangeType, id: u64| {
            let mut single = ConfChangeSingle::default();
            single.set_change_type(kind);
            single.node_id = id;
            changes.push(single);
        };
        for id in config.voters() {
            match (old.0.contains(&id), old.1.contains(&id)) {
                (true, _) => {}
                // A member that had no vote gets it.
                (false, true) => change(ConfChangeType::AddNode, id),
                // A new member joins without a vote until it has caught up (MongoDB's "newly
                // added"): copying the data, it must not count toward the majority.
                (false, false) => change(ConfChangeType::AddLearnerNode, id),
            }
        }
        for id in config.learners() {
            if !old.1.contains(&id) {
                change(ConfChangeType::AddLearnerNode, id);
            }
        }
        for id in old.0.iter().chain(&old.1) {
            if config.member(*id).is_none() {
                change(ConfChangeType::RemoveNode, *id);
            }
        }
        let context = RawDocumentBuf::try_from(&config.document()).map_err(|e| e.to_string())?.into_bytes();
        let mut cc = ConfChangeV2::default();
        cc.set_changes(changes.into());
        self.raw.propose_conf_change(context, cc).map_err(|e| e.to_string())
    }

    /// As primary, once drained: proposes (one consensus entry's worth of) the oplog entries
    /// committed locally since the last proposal, in `ts` order.
    fn propose_new_ops(&mut self) {
        if !self.is_writable() {
            return;
        }
        // At most ENTRY_BYTES of operations (one at least: an operation is at most 16 MiB and a
        // bit, and the engine keeps values up to 64 MiB).
        let bounds = (OPS_PER_ENTRY, ENTRY_BYTES);
        let Ok(mut ops) = self.store.oplog_after_bounded(from_u64(self.proposed_ts), bounds) else { return };
        // Only entries whose commit has finished: the engine shows an entry a moment before the
        // oplog counts it as its last, and applying this member's own entry checks that count.
        let done = self.store.oplog().map_or(0, |oplog| as_u64(oplog.last()));
        ops.retain(|(ts, _)| as_u64(*ts) <= done);
        let Some((last, _)) = ops.last() else { return };
        let last = as_u64(*last);
        let mut array = bson::RawArrayBuf::new();
        for (_, op) in &ops {
            array.push(op.clone());
        }
        let data = rawdoc! {"ops": array}.into_bytes();
        if self.raw.propose(Vec::new(), data).is_err() {
            return;
        }
        let index = self.raw.raft.raft_log.last_index();
        self.proposed_ts = last;
        self.keep_unproposed();
        self.in_flight.push_back((index, last));
        // Perhaps more is waiting: the next turn comes at once (and finds out).
        self.more_to_propose = true;
    }

    /// As primary: gives its vote to a newly added member (see `reconfigure`) that has caught
    /// up with the committed log, one membership change at a time.
    fn promote_caught_up(&mut self) {
        let raft = &self.raw.raft;
        if !self.is_writable() || raft.has_pending_conf() {
            return;
        }
        let committed = raft.raft_log.committed;
        let learners = raft.prs().conf().to_conf_state().learners;
        let caught_up = self.config.voters().into_iter().find(|id| {
            learners.contains(id) && raft.prs().get(*id).is_some_and(|progress| progress.matched >= committed)
        });
        let Some(id) = caught_up else { return };
        let mut single = ConfChangeSingle::default();
        single.set_change_type(ConfChangeType::AddNode);
        single.node_id = id;
        let mut change = ConfChangeV2::default();
        change.set_changes(vec![single].into());
        if self.raw.propose_conf_change(Vec::new(), change).is_ok() {
            info!(member = id, "a newly added member has caught up: it votes from now on");
        }
    }

    /// The oplog's cap never trims what this member has not put in the consensus log yet
    /// (its own writes as primary, which the set would otherwise never get).
    fn keep_unproposed(&self) {
        if let Some(oplog) = self.store.oplog() {
            oplog.keep_after(from_u64(self.proposed_ts.max(self.last_raft_ts)));
        }
    }

    fn is_writable(&self) -> bool {
        self.raw.raft.state == StateRole::Leader
            && self.diverged.is_none()
            && self.raw.raft.raft_log.applied >= self.term_start()
    }

    /// The index of the first entry of this leader's term (the library appends an empty one
    /// at each election); once applied, everything committed before the term is applied too.
    fn term_start(&self) -> u64 {
        let term = self.raw.raft.term;
        let log = &self.raw.raft.raft_log;
        let mut index = log.last_index();
        while index > log.applied && log.term(index - 1).is_ok_and(|t| t == term) {
            index -= 1;
        }
        index
    }

    fn on_ready(&mut self) -> Result<(), String> {
        if !self.raw.has_ready() {
            return Ok(());
        }
        let mut ready = self.raw.ready();
        if !ready.messages().is_empty() {
            self.send(ready.take_messages());
        }
        if *ready.snapshot() != Snapshot::default() {
            let snapshot_ts = base_ts(&ready.snapshot().data);
            if ready.snapshot().get_metadata().index > 1 && snapshot_ts > self.last_raft_ts {
                // A snapshot past the log's base: the data must be copied first. The rest of
                // this ready is dropped; the node starts again from the log once the copy is in.
                self.syncing = Some(ready.snapshot().clone());
                return Ok(());
            }
            // The log's base, or a point this member has applied the set's history through
            // (it copied the data a moment ago): only the log starts there.
            self.log.apply_snapshot(ready.snapshot()).map_err(|e| e.to_string())?;
        }
        for state in ready.take_read_states() {
            let number = state.request_ctx.as_slice().try_into().map(u64::from_le_bytes).unwrap_or(0);
            if let Some(reply) = self.read_requests.remove(&number) {
                self.read_waits.push((state.index, reply));
            }
        }
        // New entries are persisted and acknowledged before the committed ones are applied:
        // the primary's majority waits for the acknowledgement, not for this member's apply.
        self.log.append(ready.entries(), ready.hs()).map_err(|e| e.to_string())?;
        if !ready.persisted_messages().is_empty() {
            self.send(ready.take_persisted_messages());
        }
        self.apply(ready.take_committed_entries())?;
        let mut light = self.raw.advance(ready);
        self.send(light.take_messages());
        self.apply(light.take_committed_entries())?;
        self.raw.advance_apply();
        self.compact_log()?;
        self.answer_reads();
        self.report_position();
        Ok(())
    }

    /// Sends the library's messages; a snapshot sent is reported done at once (it carries only
    /// the log's base: the member that gets it copies the data itself, then answers), so the
    /// library probes that member again instead of waiting.
    fn send(&mut self, messages: Vec<Message>) {
        let snapshots: Vec<u64> =
            messages.iter().filter(|m| m.get_msg_type() == MessageType::MsgSnapshot).map(|m| m.to).collect();
        self.transport.send(messages);
        for to in snapshots {
            info!(to, "sent the log's base: that member copies the data (initial sync)");
            self.raw.report_snapshot(to, SnapshotStatus::Finish);
        }
    }

    /// Copies the set's data for `snapshot` (see `initial_sync`) from the primary, or another
    /// member, then installs the snapshot as the log's base and starts the node again from it.
    /// The snapshot is recorded first, so that a member stopped halfway copies again when it
    /// starts. (A snapshot at index 0 is a rollback's copy: the log stays as it is.)
    fn initial_sync(&mut self, snapshot: Snapshot) -> Result<(), String> {
        self.log.begin_initial_sync(&snapshot).map_err(|e| e.to_string())?;
        self.progress.publish(|published| published.state = State::Startup2);
        warn!(index = snapshot.get_metadata().index, "initial sync: copying the set's data from another member");
        let through = self.copy_from_members()?;
        if snapshot.get_metadata().index == 0 {
            self.log.end_initial_sync().map_err(|e| e.to_string())?;
            self.last_raft_ts = self.last_raft_ts.max(as_u64(through));
            self.proposed_ts = self.last_raft_ts;
            info!(?through, "rollback done: this member copied the set's data");
            return Ok(());
        }
        self.log.apply_snapshot(&snapshot).map_err(|e| e.to_string())?;
        let base = Document::from_reader(&snapshot.data[..]).map_err(|e| e.to_string())?;
        if let Ok(config) = SetConfig::parse(&base, &self.config.name)
            && config.version > self.config.version
        {
            self.transport.set_peers(&peers(&config, self.raw.raft.id));
            if let Some(me) = config.member(self.raw.raft.id) {
                self.store.set_builds_indexes(me.build_indexes);
            }
            self.config = config;
            (self.on_change)(&self.config);
        }
        self.restart()?;
        self.last_raft_ts = self.last_raft_ts.max(as_u64(through));
        self.proposed_ts = self.last_raft_ts;
        info!(through = ?through, "initial sync done: applying the set's log from the copy on");
        Ok(())
    }

    /// Copies the set's data from a member (the primary first); returns the oplog position
    /// the copy reached. Every member is tried, a few rounds.
    fn copy_from_members(&mut self) -> Result<Timestamp, String> {
        let me = self.raw.raft.id;
        let mut failures = Vec::new();
        for round in 0..SYNC_ROUNDS {
            let leader = self.raw.raft.leader_id;
            let mut sources: Vec<&super::config::Member> =
                self.config.members.iter().filter(|m| m.raft_id() != me).collect();
            sources.sort_by_key(|m| m.raft_id() != leader);
            let hosts: Vec<String> = sources.iter().map(|m| m.host.clone()).collect();
            for host in hosts {
                if self.stopping.load(std::sync::atomic::Ordering::Acquire) {
                    return Err("the server is shutting down".into());
                }
                match super::initial_sync::copy(&self.store, &host, &self.credentials, &self.stopping) {
                    Ok(through) => return Ok(through),
                    Err(error) => {
                        warn!(%host, %error, round, "initial sync from this member failed");
                        failures.push(format!("{host}: {error}"));
                    }
                }
            }
            if self.stopping.load(std::sync::atomic::Ordering::Acquire) {
                return Err("the server is shutting down".into());
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        Err(format!("initial sync failed: {}", failures.join("; ")))
    }

    /// Compacts the log: entries whose operations the oplog's cap has trimmed go (a member
    /// that still needs them is further behind than the oplog reaches, and copies the data
    /// instead, as mongod's members that fell off the oplog do). A point is noted every
    /// [`COMPACTION_POINT_EVERY`] applied entries, and then the newest point the oplog no longer
    /// holds is where the log is cut.
    fn compact_log(&mut self) -> Result<(), String> {
        // (What the data holds: a delayed member's data trails the library's applied index.)
        let applied = match self.delayed.front() {
            Some(first) => first - 1,
            None => self.raw.raft.raft_log.applied,
        };
        let newest = self.compaction_points.back().map_or(self.log.compacted(), |p| p.index);
        let due = applied >= newest + COMPACTION_POINT_EVERY || (self.membership_changed && applied > newest);
        if !due {
            // The oplog's first entry is read (a snapshot and a seek) only when a point is
            // noted, not on every turn: the log is cut at most 64 entries later.
            return Ok(());
        }
        if self.diverged.is_none() && self.last_raft_ts > 0 {
            let term = self.raw.raft.raft_log.term(applied).map_err(|e| e.to_string())?;
            let point = CompactionPoint {
                index: applied,
                term,
                ts: self.last_raft_ts,
                base: base_document(&self.config, from_u64(self.last_raft_ts))?,
                conf: self.raw.raft.prs().conf().to_conf_state(),
            };
            self.log.set_snapshot_point(point.index, point.term, &point.conf, point.base.clone());
            self.compaction_points.push_back(point);
            self.membership_changed = false;
        }
        let Some(first) = self.store.oplog_first().map_err(|e| e.to_string())? else { return Ok(()) };
        let mut cut = None;
        while self.compaction_points.front().is_some_and(|p| p.ts < as_u64(first)) {
            cut = self.compaction_points.pop_front();
        }
        if let Some(point) = cut {
            self.log.compact(point.index, point.term, &point.conf, point.base).map_err(|e| e.to_string())?;
            info!(index = point.index, "compacted the consensus log (the oplog no longer holds what it cut)");
        }
        Ok(())
    }

    /// As a secondary: tells the primary how far this member has applied, when that moved.
    fn report_position(&mut self) {
        let (me, leader) = (self.raw.raft.id, self.raw.raft.leader_id);
        if self.raw.raft.state == StateRole::Leader || leader == 0 || self.reported == (leader, self.last_raft_ts) {
            return;
        }
        self.transport.report_position(leader, me, self.last_raft_ts);
        self.reported = (leader, self.last_raft_ts);
    }

    /// Answers the linearizable reads whose read index is applied; fails them all if this
    /// member is no longer primary.
    fn answer_reads(&mut self) {
        if self.raw.raft.state != StateRole::Leader {
            for (_, reply) in self.read_waits.drain(..).chain(self.read_requests.drain()) {
                let _ = reply.send(Err("not primary".into()));
            }
            return;
        }
        let applied = self.raw.raft.raft_log.applied;
        let (ready, waiting): (Vec<_>, Vec<_>) = self.read_waits.drain(..).partition(|(index, _)| *index <= applied);
        self.read_waits = waiting;
        for (_, reply) in ready {
            let _ = reply.send(Ok(()));
        }
    }

    fn apply(&mut self, entries: Vec<Entry>) -> Result<(), String> {
        let delayed = self.delay().is_some();
        for entry in entries {
            match entry.get_entry_type() {
                EntryType::EntryNormal if entry.data.is_empty() => {}
                // A delayed member applies it later (`apply_delayed`), reading it again from
                // the log; entries wait in order behind one that waits.
                EntryType::EntryNormal if delayed || !self.delayed.is_empty() => self.delayed.push_back(entry.index),
                EntryType::EntryNormal => self.apply_entry(entry.index, &entry.data)?,
                EntryType::EntryConfChange | EntryType::EntryConfChangeV2 => self.apply_conf_change(&entry)?,
            }
        }
        Ok(())
    }

    /// `secondaryDelaySecs` of this member, if it is delayed.
    fn delay(&self) -> Option<Duration> {
        let me = self.config.member(self.raw.raft.id)?;
        (me.secondary_delay_secs > 0).then(|| Duration::from_secs(me.secondary_delay_secs as u64))
    }

    /// On a delayed member: applies the waiting entries whose operations are at least
    /// `secondaryDelaySecs` old (by their `wall` time), in order.
    fn apply_delayed(&mut self) -> Result<(), String> {
        let delay_ms = self.delay().map_or(0, |delay| delay.as_millis() as i64);
        let now_ms = bson::DateTime::now().timestamp_millis();
        while let Some(&index) = self.delayed.front() {
            let context = raft::GetEntriesContext::empty(false);
            let entries = raft::Storage::entries(&self.log, index, index + 1, u64::MAX, context)
                .map_err(|e| format!("reading delayed entry {index}: {e}"))?;
            let Some(entry) = entries.first() else { return Err(format!("delayed entry {index} is missing")) };
            if newest_wall_ms(&entry.data)? + delay_ms > now_ms {
                return Ok(());
            }
            self.delayed.pop_front();
            self.apply_entry(index, &entry.data)?;
        }
        Ok(())
    }

    /// Applies committed entry `index`'s oplog operations; a member found to hold entries the
    /// set did not commit rolls back first (see [`Node::roll_back`]).
    fn apply_entry(&mut self, index: u64, data: &[u8]) -> Result<(), String> {
        if self.diverged.is_some() {
            return Ok(());
        }
        match self.apply_ops(data)? {
            Applied::All => Ok(()),
            Applied::Diverged(why) => self.roll_back(index, why),
        }
    }

    /// Applies the operations this member does not hold yet; stops at the first sign that it
    /// holds something else.
    fn apply_ops(&mut self, data: &[u8]) -> Result<Applied, String> {
        let entry = bson::RawDocument::from_bytes(data).map_err(|e| e.to_string())?;
        let ops = entry.get_array("ops").map_err(|e| e.to_string())?;
        let ops: Vec<&bson::RawDocument> = ops
            .into_iter()
            .filter_map(|op| op.map(|op| op.as_document()).transpose())
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())?;
        // The operations this member holds already come first; the rest are applied together.
        let mut start = 0;
        while let Some(&op) = ops.get(start) {
            let ts = op.get_timestamp("ts").map_err(|e| e.to_string())?;
            let term = op.get_i64("t").unwrap_or(0);
            let local_last = self.store.oplog().map_or(0, |oplog| as_u64(oplog.last()));
            if as_u64(ts) <= local_last {
                // Already here (this member wrote it as primary, or applied it before a
                // restart) — or this member holds something else at that point.
                let held = match self.store.oplog_entry(ts).map_err(|e| e.to_string())? {
                    Some(local) => local.get_i64("t").ok() == Some(term),
                    // Older than the capped oplog keeps: applied long ago.
                    None => self.store.oplog_first().map_err(|e| e.to_string())?.is_none_or(|first| ts < first),
                };
                if !held {
                    return Ok(Applied::Diverged(format!("its oplog differs from the set's at {ts:?}")));
                }
                self.last_raft_ts = as_u64(ts);
                start += 1;
                continue;
            }
            if local_last > self.last_raft_ts {
                let after = from_u64(self.last_raft_ts);
                return Ok(Applied::Diverged(format!(
                    "it holds oplog entries after {after:?} that the set did not commit"
                )));
            }
            break;
        }
        let ops = ops.get(start..).unwrap_or_default();
        let Some(last) = ops.last() else { return Ok(Applied::All) };
        let last = last.get_timestamp("ts").map_err(|e| e.to_string())?;
        self.store
            .apply_replicated_batch(ops)
            .map_err(|e| format!("applying the oplog entries up to {last:?}: {e}"))?;
        self.last_raft_ts = as_u64(last);
        self.proposed_ts = self.proposed_ts.max(self.last_raft_ts);
        Ok(Applied::All)
    }

    /// Rollback: this member (a primary that lost its majority) holds oplog entries the set
    /// never committed. They are written to `rollback/` in the data directory (the entries,
    /// BSON one after the other, as mongod keeps what it rolls back), then the member forgets
    /// its data and applies the set's history again from the log, through entry `through`, or,
    /// where the log no longer holds the whole history (compacted, or a set initiated over
    /// existing data), copies the set's data from another member (`initial_sync`).
    fn roll_back(&mut self, through: u64, why: String) -> Result<(), String> {
        self.await_no_transactions()?;
        let lost = self.store.oplog_after(from_u64(self.last_raft_ts), usize::MAX).map_err(|e| e.to_string())?;
        warn!(%why, entries = lost.len(), "rolling back: this member holds oplog entries the set did not commit");
        if let Some(dir) = &self.rollback_dir {
            let saved = save_rolled_back(dir, &self.config.name, &lost)
                .map_err(|e| format!("saving rolled-back entries: {e}"))?;
            warn!(file = %saved.display(), "the rolled-back oplog entries are kept");
        }
        if base_ts(&self.log.base().1) != 0 || self.log.compacted() > 1 {
            // The log no longer holds the whole history: copy the set's data instead (recorded
            // as a snapshot at index 0, which leaves the log as it is).
            let copy = Snapshot { data: self.log.base().1.into(), ..Default::default() };
            return self.initial_sync(copy);
        }
        self.store.reset_for_resync().map_err(|e| e.to_string())?;
        self.last_raft_ts = 0;
        let mut next = 2;
        while next <= through {
            let entries =
                raft::Storage::entries(&self.log, next, through + 1, 4 << 20, raft::GetEntriesContext::empty(false))
                    .map_err(|e| e.to_string())?;
            let Some(last) = entries.last().map(|e| e.index) else { break };
            for entry in entries {
                if entry.get_entry_type() != EntryType::EntryNormal || entry.data.is_empty() {
                    continue;
                }
                if let Applied::Diverged(why) = self.apply_ops(&entry.data)? {
                    return Err(format!("replaying the set's history after a rollback: {why}"));
                }
            }
            next = last + 1;
        }
        info!(through, "rollback done: this member holds the set's history again");
        Ok(())
    }

    /// A rollback replaces this member's data: it waits (a few seconds at most) until the
    /// transactions left open from its time as primary are aborted (`transactions::
    /// abort_off_primary`).
    fn await_no_transactions(&self) -> Result<(), String> {
        let deadline = Instant::now() + ROLLBACK_TRANSACTIONS_WAIT;
        while self.store.transactions_open() {
            if Instant::now() > deadline {
                return Err("transactions from this member's time as primary are still open".into());
            }
            std::thread::sleep(TICK / 5);
        }
        Ok(())
    }

    fn apply_conf_change(&mut self, entry: &Entry) -> Result<(), String> {
        // The library puts a proposal's context (the new configuration document) on the entry.
        let context = entry.context.to_vec();
        let conf: ConfState = match entry.get_entry_type() {
            EntryType::EntryConfChange => {
                let cc = raft::prelude::ConfChange::parse_from_bytes(&entry.data).map_err(|e| e.to_string())?;
                self.raw.apply_conf_change(&cc).map_err(|e| e.to_string())?
            }
            _ => {
                let cc = ConfChangeV2::parse_from_bytes(&entry.data).map_err(|e| e.to_string())?;
                self.raw.apply_conf_change(&cc).map_err(|e| e.to_string())?
            }
        };
        self.log.set_conf(conf).map_err(|e| e.to_string())?;
        self.membership_changed = true;
        if !context.is_empty() {
            let document = Document::from_reader(&context[..]).map_err(|e| e.to_string())?;
            let config = SetConfig::parse(&document, &self.config.name).map_err(|e| e.message)?;
            info!(version = config.version, members = config.members.len(), "new replica set configuration");
            self.transport.set_peers(&peers(&config, self.raw.raft.id));
            if let Some(me) = config.member(self.raw.raft.id) {
                self.raw.set_priority(raft_priority(me.priority));
                self.store.set_builds_indexes(me.build_indexes);
            }
            self.config = config;
            (self.on_change)(&self.config);
        }
        Ok(())
    }

    fn diverge(&mut self, why: String) {
        if self.diverged.is_none() {
            error!(%why, "this member stopped applying the set's oplog (state RECOVERING)");
            self.diverged = Some(why);
        }
    }

    /// Publishes the state for the server, and logs and announces role changes.
    fn publish(&mut self) {
        self.keep_unproposed();
        let raft = &self.raw.raft;
        let writable = self.is_writable();
        let now = (raft.state, raft.term, raft.leader_id, writable);
        let changed = now != self.published;
        if changed {
            self.on_role_change(now);
        }
        let raft = &self.raw.raft;
        let committed = raft.raft_log.committed;
        let local_last = self.store.oplog().map_or(0, |oplog| as_u64(oplog.last()));
        let ts_at = |index: u64, in_flight: &VecDeque<(u64, u64)>, floor: u64| {
            in_flight.iter().take_while(|(i, _)| *i <= index).last().map_or(floor, |(_, ts)| *ts)
        };
        let (majority_ts, members) = if raft.state == StateRole::Leader {
            // Entries before this term's proposals are committed (drained) and on every member
            // that matched past them; a member's own oplog is as far as it has committed locally.
            let floor = self.last_raft_ts.min(self.proposed_ts);
            let majority = ts_at(committed, &self.in_flight, floor).max(floor);
            let members = raft
                .prs()
                .iter()
                .map(|(id, progress)| MemberProgress {
                    raft_id: *id,
                    // A member counts for `w: N` once it applied the write (its report), not
                    // merely logged it.
                    matched_ts: match *id == raft.id {
                        true => local_last,
                        false => ts_at(progress.matched, &self.in_flight, 0)
                            .min(self.applied_by.get(id).copied().unwrap_or(0)),
                    },
                    active: *id == raft.id || progress.recent_active,
                })
                .collect();
            (majority, members)
        } else {
            let me = MemberProgress { raft_id: raft.id, matched_ts: self.last_raft_ts, active: true };
            (self.last_raft_ts, vec![me])
        };
        if raft.state == StateRole::Leader {
            let slowest = raft.prs().iter().map(|(_, p)| p.matched).min().unwrap_or(0);
            while self.in_flight.len() > 1 && self.in_flight.get(1).is_some_and(|(i, _)| *i <= slowest.min(committed)) {
                self.in_flight.pop_front();
            }
        }
        let state = match (&self.diverged, raft.state, writable) {
            (Some(_), _, _) => State::Recovering,
            (None, _, true) => State::Primary,
            (None, _, false) => State::Secondary,
        };
        let diverged = self.diverged.clone();
        let applied_ts = self.last_raft_ts.max(if writable { local_last } else { 0 });
        let (term, leader) = (raft.term, (raft.leader_id != 0).then_some(raft.leader_id));
        self.progress.publish(|published| {
            published.state = state;
            published.term = term;
            published.leader = leader;
            published.writable = writable;
            published.majority_ts = majority_ts;
            published.applied_ts = applied_ts;
            published.members = members;
            published.diverged = diverged;
        });
        if changed {
            (self.on_change)(&self.config);
        }
    }

    fn on_role_change(&mut self, now: (StateRole, u64, u64, bool)) {
        let (role, term, leader, writable) = now;
        let was_writable = self.published.3;
        self.published = now;
        if writable && !was_writable {
            // Drained: the primary's entries carry its term; what it holds past the committed
            // log (written in an earlier term of its own, never proposed) is proposed now.
            if let Some(oplog) = self.store.oplog() {
                oplog.set_term(term as i64);
            }
            self.proposed_ts = self.last_raft_ts;
            self.keep_unproposed();
            self.in_flight.clear();
            self.store.set_originates(true);
            let elected = bson::DateTime::now().timestamp_millis();
            self.progress.publish(|published| {
                published.elected_at_ms = Some(elected);
                published.elections_won += 1;
            });
            info!(term, "this member is now PRIMARY");
        } else if was_writable && !writable {
            self.store.set_originates(false);
            warn!(term, ?role, "this member stepped down: no longer PRIMARY");
        } else {
            info!(term, ?role, leader, "replica set state changed");
        }
    }
}

/// The newest `wall` time (milliseconds) among a consensus entry's operations.
fn newest_wall_ms(data: &[u8]) -> Result<i64, String> {
    let entry = bson::RawDocument::from_bytes(data).map_err(|e| e.to_string())?;
    let mut newest = i64::MIN;
    for op in entry.get_array("ops").map_err(|e| e.to_string())? {
        if let Some(wall) = op.map_err(|e| e.to_string())?.as_document().and_then(|op| op.get_datetime("wall").ok()) {
            newest = newest.max(wall.timestamp_millis());
        }
    }
    Ok(newest)
}

/// The snapshot this member must copy the data for before it applies the log: an unfinished
/// initial sync's, or the log's base when this member does not hold the history the log starts
/// after (a member that joined a set whose log was compacted, or that was initiated over
/// existing data).
fn pending_sync(log: &LogStore, store: &docstore::Store) -> Result<Option<Snapshot>, String> {
    if let Some(snapshot) = log.initial_sync().map_err(|e| e.to_string())? {
        return Ok(Some(snapshot));
    }
    let local_last = store.oplog().map_or(0, |oplog| as_u64(oplog.last()));
    if base_ts(&log.base().1) <= local_last {
        return Ok(None);
    }
    raft::Storage::snapshot(log, 0, 0).map(Some).map_err(|e| e.to_string())
}

/// A panic's message, for the log.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
        (Some(message), _) => format!("panic: {message}"),
        (_, Some(message)) => format!("panic: {message}"),
        _ => "panic".to_owned(),
    }
}

/// The `ts` the set's log starts after (a field of the base configuration document, see
/// `Replication::initiate`).
pub fn base_ts(base: &[u8]) -> u64 {
    Document::from_reader(base)
        .ok()
        .and_then(|d| d.get("baseTs").cloned())
        .and_then(|value| match value {
            Bson::Timestamp(ts) => Some(as_u64(ts)),
            _ => None,
        })
        .unwrap_or(0)
}

pub fn as_u64(ts: Timestamp) -> u64 {
    (u64::from(ts.time) << 32) | u64::from(ts.increment)
}

pub fn from_u64(value: u64) -> Timestamp {
    Timestamp { time: (value >> 32) as u32, increment: value as u32 }
}

/// The consensus log's base configuration document: the set's configuration and the oplog
/// position the log starts after.
pub fn base_document(config: &SetConfig, base_ts: Timestamp) -> Result<Vec<u8>, String> {
    let mut document = config.document();
    document.insert("baseTs", base_ts);
    RawDocumentBuf::try_from(&document).map(RawDocumentBuf::into_bytes).map_err(|e| e.to_string())
}

/// The base configuration a member joins with, and its consensus membership.
pub fn conf_state(config: &SetConfig) -> ConfState {
    let mut conf = ConfState::default();
    conf.set_voters(config.voters());
    conf.set_learners(config.learners());
    conf
}

/// A `replSetRaftJoin` command: the log's base, and the set's configuration now.
///
/// `copy`: a member added to a running set copies the data (initial sync) rather than replay
/// the set's whole log; the founding members of a new set start empty together.
pub fn join_command(
    set: &str,
    member_host: &str,
    base: &(ConfState, Vec<u8>),
    config: &Document,
    copy: bool,
) -> Result<RawDocumentBuf, String> {
    let conf = base.0.write_to_bytes().map_err(|e| e.to_string())?;
    let binary = |bytes: Vec<u8>| bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes };
    let config = RawDocumentBuf::try_from(config).map_err(|e| e.to_string())?;
    Ok(rawdoc! {
        "replSetRaftJoin": set, "host": member_host, "conf": binary(conf), "base": binary(base.1.clone()),
        "config": config, "initialSync": copy, "$db": "admin",
    })
}
