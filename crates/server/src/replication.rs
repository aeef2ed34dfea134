//! Replica-set mode (`--replSet NAME`): a replica set of one member, the primary.
//!
//! Started with a set name and no configuration yet, the server waits for `replSetInitiate`
//! (mongosh's `rs.initiate()`): until then `hello` says so and writes are refused with
//! NotWritablePrimary, as mongod does. Initiating stores the configuration in
//! `local.system.replset` (a restart finds it and is primary at once) and turns on the store's
//! oplog (`docstore::oplog`), which from then on records every change in the change's own
//! engine transaction. Cluster time is the oplog's: `$clusterTime` and `operationTime` in every
//! reply are the newest entry's `ts`.
//!
//! The topology (`hello`'s `topologyVersion`: this process's id and a counter) changes only
//! when the set is initiated; an awaitable `hello` (`topologyVersion` + `maxAwaitTimeMS`) waits
//! for that or its time, parked without a thread (see `connection`'s waits).
//!
//! What a second member would add (not built): members that tail this oplog over the wire and
//! apply its entries (every entry names its document by `_id`, and updates are diffs or whole
//! documents, so applying is idempotent), a majority commit point for `w: "majority"` and
//! readConcern `majority` (today both are the local commit), and elections with terms — the
//! `t` every entry carries and the term in `electionId` — decided by a consensus service.

use std::sync::atomic::{AtomicI64, Ordering};

use bson::oid::ObjectId;
use bson::{Bson, DateTime, Document, RawDocumentBuf, Timestamp, doc};
use docstore::{Durability, FindRequest, Store};
use parking_lot::RwLock;
use wire::ErrorCode;

use crate::command::Command;
use crate::error::CommandError;

/// Where the configuration lives.
pub const CONFIG_DB: &str = "local";
pub const CONFIG_COLLECTION: &str = "system.replset";

/// The term of the only election a one-member set has.
const TERM: i64 = docstore::OPLOG_TERM;

/// A replica set's state in this server.
pub struct Replication {
    pub name: String,
    pub oplog_bytes: u64,
    /// This process's id in `topologyVersion`.
    pub process_id: ObjectId,
    topology_counter: AtomicI64,
    config: RwLock<Option<Document>>,
    /// This member's `host:port`.
    pub me: String,
}

impl Replication {
    /// Reads a stored configuration; with one, the oplog is kept from the start.
    pub fn open(name: &str, oplog_mb: u64, me: String, store: &Store) -> Result<Replication, CommandError> {
        let replication = Replication {
            name: name.to_owned(),
            oplog_bytes: oplog_mb.max(1) << 20,
            process_id: ObjectId::new(),
            topology_counter: AtomicI64::new(0),
            config: RwLock::new(None),
            me,
        };
        let stored =
            store.collection((CONFIG_DB, CONFIG_COLLECTION)).find(&FindRequest::default())?.next().transpose()?;
        if let Some(raw) = stored {
            let config = Document::try_from(raw.as_ref()).map_err(|e| CommandError::internal(e.to_string()))?;
            store.enable_oplog(replication.oplog_bytes)?;
            *replication.config.write() = Some(config);
        }
        Ok(replication)
    }

    pub fn config(&self) -> Option<Document> {
        self.config.read().clone()
    }

    pub fn is_initiated(&self) -> bool {
        self.config.read().is_some()
    }

    pub fn topology_version(&self) -> Document {
        doc! {"processId": self.process_id, "counter": self.topology_counter.load(Ordering::Acquire)}
    }

    /// Whether `asked` (a client's `topologyVersion`) is the current one.
    pub fn is_current(&self, asked: &Document) -> bool {
        asked.get_object_id("processId").ok() == Some(self.process_id)
            && asked.get("counter").and_then(Bson::as_i64) == Some(self.topology_counter.load(Ordering::Acquire))
    }

    /// `electionId`: the term in an ObjectId, as mongod writes it.
    pub fn election_id(&self) -> ObjectId {
        let mut bytes = [0u8; 12];
        bytes[..4].copy_from_slice(&0x7fff_ffffu32.to_be_bytes());
        bytes[4..].copy_from_slice(&TERM.to_be_bytes());
        ObjectId::from_bytes(bytes)
    }

    /// `replSetInitiate`: checks and stores the configuration, starts the oplog, becomes primary.
    pub fn initiate(&self, store: &Store, given: Option<Document>) -> Result<Document, CommandError> {
        let mut current = self.config.write();
        if current.is_some() {
            return Err(CommandError::new(ErrorCode::AlreadyInitialized, "already initialized"));
        }
        let config = self.checked_config(given)?;
        store.collection((CONFIG_DB, CONFIG_COLLECTION)).ensure_system(bson::Document::new())?;
        let oplog = store.enable_oplog(self.oplog_bytes)?;
        let raw = RawDocumentBuf::try_from(&config).map_err(|e| CommandError::bad_value(e.to_string()))?;
        let outcome = store.collection((CONFIG_DB, CONFIG_COLLECTION)).insert(vec![raw], true, Durability::Immediate);
        if let Some((_, error)) = outcome.errors.into_iter().next() {
            return Err(error.into());
        }
        // The set's first entry, as mongod's "initiating set" no-op.
        store.append_noop("initiating set", Durability::Immediate)?;
        let _ = oplog;
        *current = Some(config.clone());
        self.topology_counter.fetch_add(1, Ordering::AcqRel);
        Ok(config)
    }

    /// The configuration to store: the one given (which must name this set and this one
    /// member), or the default one.
    fn checked_config(&self, given: Option<Document>) -> Result<Document, CommandError> {
        let Some(mut config) = given else {
            return Ok(doc! {
                "_id": self.name.clone(),
                "version": 1,
                "term": TERM,
                "members": [{"_id": 0, "host": self.me.clone()}],
                "protocolVersion": 1_i64,
                "settings": {"chainingAllowed": true, "replicaSetId": ObjectId::new()},
            });
        };
        let invalid = |message: String| CommandError::new(ErrorCode::InvalidReplicaSetConfig, message);
        match config.get_str("_id") {
            Ok(name) if name == self.name => {}
            Ok(name) => {
                return Err(invalid(format!(
                    "Attempting to initiate a replica set with name {name}, but command line reports {}; rejecting",
                    self.name
                )));
            }
            Err(_) => return Err(invalid("the configuration needs an _id, the set's name".into())),
        }
        let members = config.get_array("members").map_err(|_| invalid("the configuration needs members".into()))?;
        if members.len() != 1 {
            return Err(invalid(format!(
                "Strata runs replica sets of one member; this configuration has {}",
                members.len()
            )));
        }
        if !config.contains_key("version") {
            config.insert("version", 1);
        }
        config.insert("term", TERM);
        Ok(config)
    }

    /// `hello`'s replica-set fields.
    pub fn hello_fields(&self, store: &Store) -> Document {
        let mut fields = doc! {"topologyVersion": self.topology_version(), "setName": self.name.clone()};
        let Some(config) = self.config() else {
            fields.insert("isreplicaset", true);
            fields.insert("secondary", false);
            fields.insert("info", "Does not have a valid replica set config");
            return fields;
        };
        let last = last_write(store);
        let op_time = doc! {"ts": last, "t": TERM};
        let written = DateTime::from_millis(i64::from(last.time) * 1000);
        fields.insert("setVersion", config.get("version").cloned().unwrap_or(Bson::Int32(1)));
        fields.insert("hosts", vec![self.me.clone()]);
        fields.insert("primary", self.me.clone());
        fields.insert("me", self.me.clone());
        fields.insert("secondary", false);
        fields.insert("electionId", self.election_id());
        fields.insert(
            "lastWrite",
            doc! {
                "opTime": op_time.clone(), "lastWriteDate": written,
                "majorityOpTime": op_time, "majorityWriteDate": written,
            },
        );
        fields
    }

    /// `replSetGetStatus`.
    pub fn status(&self, store: &Store, uptime_seconds: i64) -> Result<Document, CommandError> {
        let Some(config) = self.config() else { return Err(not_yet_initialized()) };
        let last = last_write(store);
        let op_time = doc! {"ts": last, "t": TERM};
        let written = DateTime::from_millis(i64::from(last.time) * 1000);
        let host = config
            .get_array("members")
            .ok()
            .and_then(|m| m.first())
            .and_then(Bson::as_document)
            .and_then(|m| m.get_str("host").ok())
            .unwrap_or(&self.me)
            .to_owned();
        Ok(doc! {
            "set": self.name.clone(),
            "date": DateTime::now(),
            "myState": 1,
            "term": TERM,
            "heartbeatIntervalMillis": 2000_i64,
            "majorityVoteCount": 1,
            "writeMajorityCount": 1,
            "votingMembersCount": 1,
            "writableVotingMembersCount": 1,
            "optimes": {
                "lastCommittedOpTime": op_time.clone(), "lastCommittedWallTime": written,
                "readConcernMajorityOpTime": op_time.clone(),
                "appliedOpTime": op_time.clone(), "durableOpTime": op_time.clone(),
                "lastAppliedWallTime": written, "lastDurableWallTime": written,
            },
            "members": [{
                "_id": 0, "name": host, "health": 1.0, "state": 1, "stateStr": "PRIMARY",
                "uptime": uptime_seconds, "optime": op_time.clone(), "optimeDate": written,
                "lastAppliedWallTime": written, "lastDurableWallTime": written,
                "syncSourceHost": "", "syncSourceId": -1, "infoMessage": "",
                "electionTime": last, "electionDate": written,
                "configVersion": config.get("version").cloned().unwrap_or(Bson::Int32(1)),
                "configTerm": TERM, "self": true, "lastHeartbeatMessage": "",
            }],
        })
    }

    /// Refuses a write before the set is initiated. The error carries the current
    /// `topologyVersion`, so drivers know it is not news (SDAM: an error no newer than the
    /// description is stale) and do not mark the server unknown over it.
    pub fn check_writable(&self) -> Result<(), CommandError> {
        if self.is_initiated() {
            return Ok(());
        }
        let mut error = CommandError::new(ErrorCode::NotWritablePrimary, "not primary");
        error.extra.insert("topologyVersion", self.topology_version());
        Err(error)
    }

    /// `$clusterTime` at `time`, as gossiped in replies (unsigned: keyId 0), built as raw
    /// bytes: every reply carries it.
    fn cluster_time(time: Timestamp) -> RawDocumentBuf {
        let hash = bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![0; 20] };
        bson::rawdoc! { "clusterTime": time, "signature": { "hash": hash, "keyId": 0_i64 } }
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

/// Adds `$clusterTime` and `operationTime` to a reply, as a replica set member does.
pub fn gossip(set: &Replication, store: &Store, reply: &mut RawDocumentBuf) {
    if !set.is_initiated() {
        return;
    }
    let time = last_write(store);
    reply.append(bson::raw::cstr!("$clusterTime"), Replication::cluster_time(time));
    reply.append(bson::raw::cstr!("operationTime"), time);
}

/// A write asking more members to acknowledge it (`w: n > 1`) than the set has gets the
/// UnsatisfiableWriteConcern write concern error, after the write, as mongod answers.
pub fn unsatisfiable_write_concern(command: &Command, reply: &mut RawDocumentBuf) {
    let wants = command
        .body
        .get_document("writeConcern")
        .ok()
        .and_then(|concern| concern.get("w"))
        .and_then(crate::command::as_i64);
    let is_write = is_write(&command.name) || matches!(command.name.as_str(), "commitTransaction" | "abortTransaction");
    if !is_write || wants.is_none_or(|w| w <= 1) || reply.get("writeConcernError").ok().flatten().is_some() {
        return;
    }
    let error = bson::rawdoc! {
        "code": ErrorCode::UnsatisfiableWriteConcern.code(),
        "codeName": ErrorCode::UnsatisfiableWriteConcern.name(),
        "errmsg": "Not enough data-bearing nodes",
    };
    reply.append(bson::raw::cstr!("writeConcernError"), error);
}

/// The newest oplog entry's time (the set's last write).
pub fn last_write(store: &Store) -> Timestamp {
    store.oplog().map(|oplog| oplog.last()).unwrap_or(Timestamp { time: 0, increment: 0 })
}

pub fn not_yet_initialized() -> CommandError {
    CommandError::new(ErrorCode::NotYetInitialized, "no replset config has been received")
}
