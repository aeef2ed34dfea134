//! Who is in the set: `replSetInitiate`, a member joining (`replSetRaftJoin`), `rs.add()`,
//! `rs.remove()` and `rs.reconfig()` (`replSetReconfig`), `replSetStepDown` and
//! `replSetFreeze`.
//!
//! A member starts its consensus log from the set's base (the membership and configuration at
//! the log's first entry, and the oplog position the log starts after); the log's entries then
//! bring it every change since, membership changes included. Where the log does not reach back
//! to an empty set (it was compacted, or the set was initiated over existing data), the member
//! first copies the data from another member (`initial_sync`). A member must hold no data of
//! its own when it joins (refused with an error that says so).

use std::time::{Duration, Instant};

use bson::{Bson, Document, doc};
use protobuf::Message as _;
use wire::ErrorCode;

use super::config::SetConfig;
use super::consensus::{self, Input};
use super::log_store::LogStore;
use super::{INITIATE_WAIT, JOIN_TIMEOUT, Replication, store_config, transport};
use crate::error::CommandError;

/// How long a reconfiguration waits to be applied.
const RECONFIG_WAIT: Duration = Duration::from_secs(10);
/// How long `replSetStepDown` waits for another member to take over (mongod's
/// `secondaryCatchUpPeriodSecs` default).
const STEP_DOWN_WAIT: Duration = Duration::from_secs(10);

impl Replication {
    /// `replSetInitiate`: checks the configuration, has every other member join, starts the
    /// consensus thread here and waits (up to 10 s) for a primary.
    pub fn initiate(&self, given: Option<Document>) -> Result<Document, CommandError> {
        if self.is_initiated() {
            return Err(CommandError::new(ErrorCode::AlreadyInitialized, "already initialized"));
        }
        let document = match given {
            Some(config) => config,
            None => doc! {"_id": self.name.clone(), "members": [{"_id": 0, "host": self.me.clone()}]},
        };
        let mut config = SetConfig::parse(&document, &self.name)?;
        if config.replica_set_id().is_none() {
            config.settings.insert("replicaSetId", bson::oid::ObjectId::new());
        }
        let me = self.my_id(&config)?;
        if config.members.len() > 1 {
            self.refuse_data("initiate a set of several members")?;
        }
        let oplog = self.store.enable_oplog(self.oplog_bytes)?;
        if !self.databases_with_data().is_empty() && oplog.last() == (bson::Timestamp { time: 0, increment: 0 }) {
            // The log starts after data it does not hold: its base names an oplog position
            // (mongod's first entry, "initiating set"), and members added later copy the data.
            self.store.append_noop("initiating set", docstore::Durability::Immediate)?;
        }
        let base_document = consensus::base_document(&config, oplog.last()).map_err(CommandError::internal)?;
        let base = (consensus::conf_state(&config), base_document);
        for member in config.members.iter().filter(|m| m.raft_id() != me) {
            let join = consensus::join_command(&self.name, &member.host, &base, &config.document(), false)
                .map_err(CommandError::internal)?;
            transport::call(&member.host, join, JOIN_TIMEOUT, &self.credentials).map_err(|error| {
                CommandError::new(
                    ErrorCode::NodeNotFound,
                    format!("replSetInitiate quorum check failed because not all proposed set members responded affirmatively: {error}"),
                )
            })?;
        }
        let log = LogStore::open(&self.store)?;
        log.bootstrap(base.0, base.1).map_err(|e| CommandError::internal(e.to_string()))?;
        store_config(&self.store, &config.document())?;
        self.start(config.clone(), log)?;
        self.send(Input::Campaign)?;
        self.wait_until(INITIATE_WAIT, |set| set.progress.read(|p| p.leader.is_some()));
        Ok(config.document())
    }

    /// `replSetRaftJoin` (from the member that initiates the set or adds this one): start the
    /// consensus log from the set's base, with `config` the set's configuration now.
    pub fn join(&self, command: &Document) -> Result<(), CommandError> {
        let set = command.get_str("replSetRaftJoin").unwrap_or_default();
        if set != self.name {
            return Err(CommandError::new(
                ErrorCode::InvalidReplicaSetConfig,
                format!("this member runs with --replSet {}, not {set}", self.name),
            ));
        }
        if self.is_initiated() {
            return Err(CommandError::new(ErrorCode::AlreadyInitialized, "this member is already in a replica set"));
        }
        self.refuse_data("join a replica set")?;
        let binary = |key: &str| match command.get(key) {
            Some(Bson::Binary(binary)) => Ok(binary.bytes.clone()),
            _ => Err(CommandError::bad_value(format!("replSetRaftJoin needs {key}"))),
        };
        let conf = raft::prelude::ConfState::parse_from_bytes(&binary("conf")?)
            .map_err(|e| CommandError::bad_value(e.to_string()))?;
        let base = binary("base")?;
        let current =
            command.get_document("config").map_err(|_| CommandError::bad_value("replSetRaftJoin needs config"))?;
        let config = SetConfig::parse(current, &self.name)?;
        self.store.enable_oplog(self.oplog_bytes)?;
        let log = LogStore::open(&self.store)?;
        log.bootstrap(conf, base).map_err(|e| CommandError::internal(e.to_string()))?;
        if command.get_bool("initialSync").unwrap_or(false) {
            // Added to a running set: copy its data, not replay its whole log.
            let snapshot = raft::Storage::snapshot(&log, 0, 0).map_err(|e| CommandError::internal(e.to_string()))?;
            log.begin_initial_sync(&snapshot).map_err(|e| CommandError::internal(e.to_string()))?;
        }
        store_config(&self.store, &config.document())?;
        tracing::info!(set = %self.name, version = config.version, "joined the replica set");
        self.start(config, log)
    }

    /// A member must hold no data of its own to start from the set's base.
    fn refuse_data(&self, what: &str) -> Result<(), CommandError> {
        let with_data = self.databases_with_data();
        if with_data.is_empty() {
            return Ok(());
        }
        Err(CommandError::new(
            ErrorCode::InvalidReplicaSetConfig,
            format!(
                "cannot {what}: {} holds data ({}); a member must start empty (it copies the set's data when it joins)",
                self.me,
                with_data.join(", ")
            ),
        ))
    }

    /// The databases holding data of their own (not `local` nor `config`).
    fn databases_with_data(&self) -> Vec<String> {
        let mut databases = self.store.database_names();
        databases.retain(|db| !matches!(db.as_str(), "local" | "config"));
        databases
    }

    /// `replSetReconfig` (and mongosh's `rs.add`, `rs.remove`, `rs.reconfig`): on the primary,
    /// has new members join, then proposes the new membership and waits for it.
    pub fn reconfigure(&self, given: &Document) -> Result<(), CommandError> {
        let current = self.set_config().ok_or_else(super::not_yet_initialized)?;
        self.check_writable()?;
        let mut document = given.clone();
        document.insert("term", self.progress.read(|p| p.term) as i64);
        let mut config = SetConfig::parse(&document, &self.name)?;
        match (current.replica_set_id(), config.replica_set_id()) {
            (Some(id), None) => {
                config.settings.insert("replicaSetId", id);
            }
            (Some(id), Some(given)) if id != given => {
                return Err(CommandError::new(
                    ErrorCode::NewReplicaSetConfigurationIncompatible,
                    format!("New and old configurations differ in replica set ID; old was {id}, and new is {given}"),
                ));
            }
            _ => {}
        }
        if config.version <= current.version {
            return Err(CommandError::new(
                ErrorCode::NewReplicaSetConfigurationIncompatible,
                format!("version {} must be greater than the current version {}", config.version, current.version),
            ));
        }
        for member in &config.members {
            if current.member(member.raft_id()).is_some_and(|old| old.build_indexes != member.build_indexes) {
                return Err(CommandError::new(
                    ErrorCode::NewReplicaSetConfigurationIncompatible,
                    format!(
                        "New and old configurations differ in the setting of the buildIndexes field for member {}; to make this change, remove then re-add the member",
                        member.host
                    ),
                ));
            }
        }
        let added: Vec<_> = config.members.iter().filter(|m| current.member(m.raft_id()).is_none()).collect();
        let base = LogStore::open(&self.store)?.base();
        for member in &added {
            let join = consensus::join_command(&self.name, &member.host, &base, &config.document(), true)
                .map_err(CommandError::internal)?;
            transport::call(&member.host, join, JOIN_TIMEOUT, &self.credentials).map_err(|error| {
                CommandError::new(ErrorCode::NodeNotFound, format!("{} could not join: {error}", member.host))
            })?;
        }
        let (reply, answer) = std::sync::mpsc::channel();
        self.send(Input::Reconfigure { config: config.clone(), reply })?;
        answer
            .recv_timeout(RECONFIG_WAIT)
            .map_err(|_| CommandError::new(ErrorCode::ExceededTimeLimit, "reconfiguration not accepted in time"))?
            .map_err(|error| CommandError::new(ErrorCode::NotWritablePrimary, error))?;
        let applied =
            self.wait_until(RECONFIG_WAIT, |set| set.set_config().is_some_and(|c| c.version >= config.version));
        if !applied {
            return Err(CommandError::new(
                ErrorCode::ExceededTimeLimit,
                "the new configuration was not committed in time (is a majority of the members up?)",
            ));
        }
        Ok(())
    }

    /// `replSetStepDown`: hands the primary role to a caught-up electable member and does not
    /// stand for election for `seconds`.
    pub fn step_down(&self, seconds: u64) -> Result<(), CommandError> {
        if !self.is_writable() {
            return Err(CommandError::new(ErrorCode::NotWritablePrimary, "not primary so can't step down"));
        }
        self.send(Input::Freeze(Some(Instant::now() + Duration::from_secs(seconds))))?;
        self.send(Input::StepDown)?;
        if self.wait_until(STEP_DOWN_WAIT, |set| !set.is_writable()) {
            return Ok(());
        }
        self.send(Input::Freeze(None))?;
        Err(CommandError::new(
            ErrorCode::ExceededTimeLimit,
            "No electable secondaries caught up as of the step-down deadline",
        ))
    }

    /// `replSetFreeze`: a secondary does not stand for election for `seconds` (0: again now).
    pub fn freeze(&self, seconds: u64) -> Result<(), CommandError> {
        if self.is_writable() {
            return Err(CommandError::new(
                ErrorCode::NotSecondary,
                "cannot freeze node when primary or running for election",
            ));
        }
        let until = (seconds > 0).then(|| Instant::now() + Duration::from_secs(seconds));
        self.send(Input::Freeze(until))
    }

    /// Waits (polling the published state) until `done`, or `limit`; says whether it came.
    fn wait_until(&self, limit: Duration, done: impl Fn(&Replication) -> bool) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if done(self) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        done(self)
    }
}
