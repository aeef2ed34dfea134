//! Replica-set mode (`--replSet NAME`): a replica set of one or more members, on a consensus
//! library (see `consensus`).
//!
//! Started with a set name and no configuration yet, the server waits for `replSetInitiate`
//! (mongosh's `rs.initiate()`): until then `hello` says so and writes are refused with
//! NotWritablePrimary, as mongod does. Initiating checks the configuration (`config`), tells
//! every other member to join (`replSetRaftJoin`: each starts its consensus log from the same
//! base, and must hold no data: copying a running member's data, initial sync, is not built
//! yet), stores the configuration in `local.system.replset`, turns on the store's oplog and
//! starts the consensus thread, which campaigns. A restart finds the configuration and the
//! consensus log and starts the thread again. `rs.add`, `rs.remove` and `rs.reconfig` are
//! consensus configuration changes; a member added is told to join first.
//!
//! The consensus thread publishes this member's state (`progress`): `hello` and `rs.status()`
//! read it; writes are accepted only on the primary (NotWritablePrimary elsewhere); reads on a
//! secondary need `secondaryOk` (a read preference other than primary); a write concern of
//! `w: "majority"` or `w: N` waits for it (`wait_for`), and times out into MongoDB's
//! `writeConcernError`. Cluster time is the oplog's: `$clusterTime` and `operationTime` in
//! every reply are the newest entry's `ts`.
//!
//! The topology (`hello`'s `topologyVersion`: this process's id and a counter) changes with
//! every change of role, term, primary or configuration; an awaitable `hello` waits for that.

pub mod config;
pub mod consensus;
mod initial_sync;
pub mod log_store;
pub mod member_auth;
mod membership;
pub mod progress;
mod raft_log;
mod status;
pub mod transport;
pub mod write_concern;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use bson::oid::ObjectId;
use bson::{Bson, Document, RawDocumentBuf, Timestamp, doc};
use docstore::{Durability, FindRequest, Store};
use parking_lot::{Mutex, RwLock};
use wire::ErrorCode;

use crate::error::CommandError;
use config::SetConfig;
use consensus::{Consensus, Input};
use progress::Progress;

/// Where the configuration lives.
pub const CONFIG_DB: &str = "local";
pub const CONFIG_COLLECTION: &str = "system.replset";

/// How long a set of one waits for its own election when it starts.
const SOLE_VOTER_WAIT: Duration = Duration::from_secs(5);
/// How long `replSetInitiate` waits for the first primary.
const INITIATE_WAIT: Duration = Duration::from_secs(10);
/// How long a linearizable read waits to confirm this member is primary.
const LINEARIZABLE_WAIT: Duration = Duration::from_secs(5);
/// How long a member being added or initiated has to answer.
const JOIN_TIMEOUT: Duration = Duration::from_secs(5);

/// A replica set's state in this server.
pub struct Replication {
    pub name: String,
    pub oplog_bytes: u64,
    /// This process's id in `topologyVersion`.
    pub process_id: ObjectId,
    topology: Arc<Topology>,
    /// This member's `host:port`.
    pub me: String,
    store: Arc<Store>,
    pub progress: Arc<Progress>,
    consensus: Mutex<Option<Consensus>>,
    /// The data directory (rolled-back oplog entries go to `rollback/` in it).
    data_dir: Option<std::path::PathBuf>,
    /// What this member proves itself to the others with (`--keyFile`, its certificate).
    credentials: member_auth::MemberCredentials,
}

/// The configuration and the topology counter, shared with the consensus thread (which
/// changes both).
struct Topology {
    config: RwLock<Option<SetConfig>>,
    counter: AtomicI64,
    wake: Arc<tokio::sync::watch::Sender<u64>>,
}

impl Topology {
    fn changed(&self) {
        self.counter.fetch_add(1, Ordering::AcqRel);
        self.wake.send_modify(|generation| *generation += 1);
    }
}

impl Replication {
    /// Reads a stored configuration; with one, the oplog is kept from the start and the
    /// consensus thread starts (a set of one from before consensus gets its log now).
    pub fn open(
        name: &str,
        oplog_mb: u64,
        me: String,
        store: &Arc<Store>,
        wake: Arc<tokio::sync::watch::Sender<u64>>,
        (data_dir, credentials): (Option<std::path::PathBuf>, member_auth::MemberCredentials),
    ) -> Result<Replication, CommandError> {
        let replication = Replication {
            name: name.to_owned(),
            oplog_bytes: oplog_mb.max(1) << 20,
            process_id: ObjectId::new(),
            topology: Arc::new(Topology { config: RwLock::new(None), counter: AtomicI64::new(0), wake }),
            me,
            store: Arc::clone(store),
            progress: Arc::new(Progress::default()),
            consensus: Mutex::new(None),
            data_dir,
            credentials,
        };
        let stored =
            store.collection((CONFIG_DB, CONFIG_COLLECTION)).find(&FindRequest::default())?.next().transpose()?;
        if let Some(raw) = stored {
            let document = Document::try_from(raw.as_ref()).map_err(|e| CommandError::internal(e.to_string()))?;
            let mut config = SetConfig::parse(&document, name)?;
            if let [only] = config.members.as_mut_slice()
                && only.host != replication.me
                && !replication.is_me(&only.host)
            {
                // A set of one restarted on another address: it is that member, now here (what
                // hello reports, and drivers connect to).
                tracing::warn!(configured = %only.host, me = %replication.me, "this set's only member now listens elsewhere");
                only.host = replication.me.clone();
                store_config(store, &config.document())?;
            }
            store.enable_oplog(replication.oplog_bytes)?;
            let log = log_store::LogStore::open(store)?;
            if !log.is_initialized() {
                // A set of one initiated before members had a consensus log.
                let base = store.oplog().map(|oplog| oplog.last()).unwrap_or(Timestamp { time: 0, increment: 0 });
                log.bootstrap(
                    consensus::conf_state(&config),
                    consensus::base_document(&config, base).map_err(CommandError::internal)?,
                )
                .map_err(|e| CommandError::internal(e.to_string()))?;
            }
            replication.start(config, log)?;
        }
        Ok(replication)
    }

    /// Starts the consensus thread as the member of `config` that is this server.
    fn start(&self, config: SetConfig, log: log_store::LogStore) -> Result<(), CommandError> {
        let id = self.my_id(&config)?;
        *self.topology.config.write() = Some(config.clone());
        let sole_voter = config.voters() == vec![id];
        let (topology, store) = (Arc::clone(&self.topology), Arc::clone(&self.store));
        let on_change = Box::new(move |config: &SetConfig| {
            let changed = topology.config.read().as_ref() != Some(config);
            if changed {
                *topology.config.write() = Some(config.clone());
                if let Err(error) = store_config(&store, &config.document()) {
                    tracing::error!(%error, "storing the replica set configuration failed");
                }
            }
            topology.changed();
        });
        let around = consensus::Surroundings {
            store: Arc::clone(&self.store),
            progress: Arc::clone(&self.progress),
            on_change,
            rollback_dir: self.data_dir.clone(),
            credentials: self.credentials.clone(),
            source: self
                .me
                .rsplit_once(':')
                .and_then(|(ip, _)| ip.parse().ok())
                .filter(|ip: &std::net::IpAddr| !ip.is_unspecified()),
        };
        let consensus = Consensus::start(id, config, log, around).map_err(CommandError::internal)?;
        // A member of an initiated set serves reads as a secondary from the start (it holds
        // only what it applied), unless it must copy the data first (STARTUP2); the consensus
        // thread publishes its real state next.
        self.progress.publish(|published| {
            if published.state == progress::State::Startup {
                published.state = progress::State::Secondary;
            }
        });
        if sole_voter {
            // Alone, it is primary at once rather than after an election timeout.
            let _ = consensus.inbox.send(Input::Campaign);
        }
        // A primary's change streams return only what a majority holds (a rollback never
        // undoes an event a client saw); a secondary applies only what the set committed.
        let progress = Arc::clone(&self.progress);
        self.store.set_change_stream_limit(Some(Arc::new(move || {
            progress.read(|p| p.writable.then(|| consensus::from_u64(p.majority_ts)))
        })));
        if let Some(oplog) = self.store.oplog() {
            // The primary proposes new entries as soon as they are committed here.
            let inbox = consensus.inbox.clone();
            oplog.on_append(Box::new(move || {
                let _ = inbox.send(Input::Appended);
            }));
        }
        *self.consensus.lock() = Some(consensus);
        if sole_voter {
            // Serve as the primary it will be in a moment, not as a secondary that refuses
            // writes to the first clients after a restart.
            let deadline = std::time::Instant::now() + SOLE_VOTER_WAIT;
            while !self.is_writable() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        Ok(())
    }

    /// This server's member in `config`: the one with its host, or on its port at an address
    /// of this machine.
    fn my_id(&self, config: &SetConfig) -> Result<u64, CommandError> {
        if let Some(member) = config.member_at(&self.me) {
            return Ok(member.raft_id());
        }
        let mine: Vec<_> = config.members.iter().filter(|m| self.is_me(&m.host)).collect();
        match mine.as_slice() {
            [member] => Ok(member.raft_id()),
            _ => Err(CommandError::new(
                ErrorCode::InvalidReplicaSetConfig,
                format!(
                    "No host described in new configuration with version {} for replica set {} maps to this node ({})",
                    config.version, config.name, self.me
                ),
            )),
        }
    }

    /// As mongod's "is self": whether `host` names this member — a name for loopback, or a
    /// loopback address, on this member's port.
    fn is_me(&self, host: &str) -> bool {
        let port = self.me.rsplit(':').next().unwrap_or_default();
        let (name, member_port) = host.rsplit_once(':').unwrap_or((host, ""));
        let loopback = name.trim_matches(['[', ']']).parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
        member_port == port && (loopback || name == "localhost")
    }

    pub fn config(&self) -> Option<Document> {
        self.topology.config.read().as_ref().map(SetConfig::document)
    }

    pub fn set_config(&self) -> Option<SetConfig> {
        self.topology.config.read().clone()
    }

    pub fn is_initiated(&self) -> bool {
        self.topology.config.read().is_some()
    }

    /// Whether this member is the primary and takes writes.
    pub fn is_writable(&self) -> bool {
        self.progress.writable()
    }

    pub fn topology_version(&self) -> Document {
        doc! {"processId": self.process_id, "counter": self.topology.counter.load(Ordering::Acquire)}
    }

    /// Whether `asked` (a client's `topologyVersion`) is the current one.
    pub fn is_current(&self, asked: &Document) -> bool {
        asked.get_object_id("processId").ok() == Some(self.process_id)
            && asked.get("counter").and_then(Bson::as_i64) == Some(self.topology.counter.load(Ordering::Acquire))
    }

    /// `electionId`: the term in an ObjectId, as mongod writes it.
    pub fn election_id(&self) -> ObjectId {
        election_id(self.progress.read(|p| p.term) as i64)
    }

    fn send(&self, input: Input) -> Result<(), CommandError> {
        let consensus = self.consensus.lock();
        let consensus = consensus.as_ref().ok_or_else(not_yet_initialized)?;
        consensus.inbox.send(input).map_err(|_| CommandError::new(ErrorCode::ShutdownInProgress, "shutting down"))
    }

    /// Before a linearizable read: this member is still the primary (a heartbeat round a
    /// majority answered after the read arrived). What the read sees is confirmed on a majority
    /// after it ([`Replication::confirm_read_committed`]).
    pub fn confirm_linearizable(&self) -> Result<(), CommandError> {
        self.check_writable()?;
        let deadline = std::time::Instant::now() + LINEARIZABLE_WAIT;
        let (reply, answer) = std::sync::mpsc::channel();
        self.send(Input::ReadIndex(reply))?;
        let remaining = deadline.saturating_duration_since(std::time::Instant::now());
        match answer.recv_timeout(remaining) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => {
                self.check_writable().and(Err(CommandError::new(ErrorCode::PrimarySteppedDown, "stepped down")))
            }
            Err(_) => {
                Err(CommandError::new(ErrorCode::ExceededTimeLimit, "could not confirm a linearizable read in time"))
            }
        }
    }

    /// After a linearizable read: what it saw may include writes a majority does not hold yet
    /// (another client's, still waiting for its write concern), which a failover could roll
    /// back; the read is answered only once a majority holds everything it could have seen,
    /// as mongod answers it after a no-op write is majority-committed.
    pub fn confirm_read_committed(&self) -> Result<(), CommandError> {
        if self.set_config().is_none_or(|c| c.members.len() <= 1) {
            return Ok(());
        }
        // The newest entry in the store now: a commit can be visible a moment before the
        // oplog's own counter moves past it.
        let last = last_write(&self.store);
        let newest = match self.store.oplog_after(last, usize::MAX) {
            Ok(entries) => entries.last().map_or(last, |(ts, _)| *ts),
            Err(error) => return Err(CommandError::internal(error.to_string())),
        };
        self.wait_majority(newest, std::time::Instant::now() + LINEARIZABLE_WAIT)
    }

    /// Waits (until `deadline`) for this member to have applied the entry at `ts`.
    pub fn wait_applied(&self, ts: Timestamp, deadline: std::time::Instant) -> bool {
        if last_write(&self.store) >= ts {
            return true;
        }
        self.progress.wait_applied(consensus::as_u64(ts), deadline)
    }

    /// Waits (until `deadline`) for a majority to hold the entry at `ts`.
    pub fn wait_majority(&self, ts: Timestamp, deadline: std::time::Instant) -> Result<(), CommandError> {
        match self.progress.wait(consensus::as_u64(ts), &progress::Want::Majority, Some(deadline)) {
            progress::Waited::Done => Ok(()),
            progress::Waited::TimedOut => {
                Err(CommandError::new(ErrorCode::ExceededTimeLimit, "a majority did not confirm the read in time"))
            }
            progress::Waited::SteppedDown => Err(CommandError::new(ErrorCode::PrimarySteppedDown, "stepped down")),
        }
    }

    /// Stops the consensus thread (at shutdown: it holds the store).
    pub fn stop(&self) {
        if let Some(mut consensus) = self.consensus.lock().take() {
            consensus.stop();
        }
    }

    /// Messages from another member's consensus thread.
    pub fn deliver(&self, messages: Vec<raft::prelude::Message>) -> Result<(), CommandError> {
        self.send(Input::Messages(messages))
    }

    /// A secondary's report of how far it has applied.
    pub fn note_position(&self, member: u64, applied: u64) -> Result<(), CommandError> {
        self.send(Input::Position { member, applied })
    }

    /// The oplog grew (the primary proposes the new entries).
    pub fn appended(&self) {
        if let Some(consensus) = self.consensus.lock().as_ref() {
            let _ = consensus.inbox.send(Input::Appended);
        }
    }
}

/// Commands that change data: refused before the set is initiated, as on a member that is not
/// primary.
pub fn is_write(command: &str) -> bool {
    const WRITES: &[&str] = &[
        "insert",
        "update",
        "delete",
        "findAndModify",
        "findandmodify",
        "create",
        "createIndexes",
        "drop",
        "dropDatabase",
        "dropIndexes",
        "deleteIndexes",
        "renameCollection",
        "collMod",
    ];
    WRITES.contains(&command) || crate::auth::required::USER_AND_ROLE_COMMANDS.contains(&command)
}

/// An `aggregate` whose pipeline ends in `$out` or `$merge`: it writes, so it runs on the
/// primary only. (mongod 5.0+ runs one sent to a secondary there and makes its writes on the
/// primary; Strata refuses it with NotWritablePrimary. Run locally, its writes would enter the
/// secondary's oplog as its own and part it from the set's history.)
pub fn writes_through_pipeline(command: &crate::command::Command) -> bool {
    command.name == "aggregate"
        && command.body.get_array("pipeline").ok().and_then(|stages| stages.last()).is_some_and(|stage| {
            stage
                .as_document()
                .and_then(|stage| stage.keys().next())
                .is_some_and(|name| name == "$out" || name == "$merge")
        })
}

/// `$clusterTime` at `time`, as gossiped in replies (unsigned: keyId 0), built as raw bytes:
/// every reply carries it.
fn cluster_time(time: Timestamp) -> RawDocumentBuf {
    let hash = bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![0; 20] };
    bson::rawdoc! { "clusterTime": time, "signature": { "hash": hash, "keyId": 0_i64 } }
}

/// `electionId`: the term in an ObjectId, as mongod writes it.
pub fn election_id(term: i64) -> ObjectId {
    let mut bytes = [0u8; 12];
    bytes[..4].copy_from_slice(&0x7fff_ffffu32.to_be_bytes());
    bytes[4..].copy_from_slice(&term.to_be_bytes());
    ObjectId::from_bytes(bytes)
}

/// Stores `config` as this member's configuration (`local.system.replset`, never logged).
fn store_config(store: &Store, config: &Document) -> Result<(), CommandError> {
    let replset = store.collection((CONFIG_DB, CONFIG_COLLECTION));
    replset.ensure_system(Document::new())?;
    let request = docstore::UpdateRequest {
        filter: doc! {},
        update: docstore::UpdateModification::Document(config.clone()),
        multi: false,
        upsert: true,
        array_filters: Vec::new(),
        hint: None,
        variables: Default::default(),
        collation: None,
    };
    replset.update(&request, Durability::Immediate)?;
    Ok(())
}

/// Adds `$clusterTime` and `operationTime` to a reply, as a replica set member does.
pub fn gossip(set: &Replication, store: &Store, reply: &mut RawDocumentBuf) {
    if !set.is_initiated() {
        return;
    }
    let time = last_write(store);
    reply.append(bson::raw::cstr!("$clusterTime"), cluster_time(time));
    reply.append(bson::raw::cstr!("operationTime"), time);
}

/// The newest oplog entry's time (the set's last write).
pub fn last_write(store: &Store) -> Timestamp {
    store.oplog().map(|oplog| oplog.last()).unwrap_or(Timestamp { time: 0, increment: 0 })
}

pub fn not_yet_initialized() -> CommandError {
    CommandError::new(ErrorCode::NotYetInitialized, "no replset config has been received")
}
