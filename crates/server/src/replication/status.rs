//! What a member says about the set: `hello`'s replica-set fields (as the drivers' server
//! discovery and monitoring specification reads them), `rs.status()`, and the checks that
//! keep writes on the primary and reads off members that may not serve them.

use bson::{Bson, DateTime, Document, Timestamp, doc};
use wire::ErrorCode;

use super::consensus::from_u64;
use super::progress::{Published, State};
use super::{Replication, election_id, last_write};
use crate::command::Command;
use crate::error::CommandError;

/// `optime`s as mongod writes them: `{ts, t}`, and the wall time of `ts`.
fn op_time(ts: u64, term: u64) -> (Document, DateTime) {
    let ts = from_u64(ts);
    (doc! {"ts": ts, "t": term as i64}, DateTime::from_millis(i64::from(ts.time) * 1000))
}

/// Commands that read data: a member that is not primary serves them only with
/// `secondaryOk` (a read preference other than `primary`).
const READS: &[&str] =
    &["find", "aggregate", "count", "distinct", "listCollections", "listIndexes", "dbStats", "collStats", "dbHash"];

impl Replication {
    /// `hello`'s replica-set fields.
    pub fn hello_fields(&self) -> Document {
        let mut fields = doc! {"topologyVersion": self.topology_version(), "setName": self.name.clone()};
        let Some(config) = self.set_config() else {
            fields.insert("isreplicaset", true);
            fields.insert("secondary", false);
            fields.insert("info", "Does not have a valid replica set config");
            return fields;
        };
        let published = self.progress.get();
        let visible = config.members.iter().filter(|m| !m.hidden);
        let hosts: Vec<String> = visible.clone().filter(|m| m.priority > 0.0).map(|m| m.host.clone()).collect();
        let passives: Vec<String> = visible.filter(|m| m.priority == 0.0).map(|m| m.host.clone()).collect();
        fields.insert("hosts", hosts);
        if !passives.is_empty() {
            fields.insert("passives", passives);
        }
        fields.insert("setVersion", config.version);
        fields.insert("secondary", published.state == State::Secondary);
        if let Some(primary) = published.leader.and_then(|id| config.member(id)) {
            fields.insert("primary", primary.host.clone());
        }
        let me = self.my_id(&config).ok().and_then(|id| config.member(id));
        fields.insert("me", me.map_or(self.me.clone(), |m| m.host.clone()));
        if let Some(me) = me {
            if me.priority == 0.0 {
                fields.insert("passive", true);
            }
            if me.hidden {
                fields.insert("hidden", true);
            }
            if !me.tags.is_empty() {
                fields.insert("tags", me.tags.clone());
            }
        }
        if published.writable {
            fields.insert("electionId", election_id(published.term as i64));
        }
        let last = crate::replication::consensus::as_u64(last_write(&self.store));
        let (applied, applied_date) = op_time(last, published.term);
        let (majority, majority_date) = op_time(published.majority_ts, published.term);
        fields.insert(
            "lastWrite",
            doc! {
                "opTime": applied, "lastWriteDate": applied_date,
                "majorityOpTime": majority, "majorityWriteDate": majority_date,
            },
        );
        fields
    }

    /// `serverStatus.repl`: `hello`'s replica-set fields, with the term and elections won.
    pub fn server_status_fields(&self) -> Document {
        let mut fields = self.hello_fields();
        let published = self.progress.get();
        fields.insert("isWritablePrimary", published.writable);
        fields.insert("term", published.term as i64);
        fields.insert("electionsWon", published.elections_won as i64);
        fields
    }

    /// `replSetGetStatus` (`rs.status()`).
    pub fn status(&self, uptime_seconds: i64) -> Result<Document, CommandError> {
        let Some(config) = self.set_config() else { return Err(super::not_yet_initialized()) };
        let published = self.progress.get();
        let me = self.my_id(&config).ok();
        let last = crate::replication::consensus::as_u64(last_write(&self.store));
        let (applied, applied_date) = op_time(last, published.term);
        let (committed, committed_date) = op_time(published.majority_ts, published.term);
        let members: Vec<Bson> = config
            .members
            .iter()
            .map(|member| {
                Bson::Document(self.member_status(member, (me, config.version), &published, last, uptime_seconds))
            })
            .collect();
        let voting = config.voters().len() as i32;
        let mut status = doc! {
            "set": self.name.clone(),
            "date": DateTime::now(),
            "myState": published.state.number(),
            "term": published.term as i64,
            "heartbeatIntervalMillis": super::consensus::TICK.as_millis() as i64 * 2,
            "majorityVoteCount": config.majority() as i32,
            "writeMajorityCount": config.majority() as i32,
            "votingMembersCount": voting,
            "writableVotingMembersCount": voting,
            "optimes": {
                "lastCommittedOpTime": committed.clone(), "lastCommittedWallTime": committed_date,
                "readConcernMajorityOpTime": committed, "readConcernMajorityWallTime": committed_date,
                "appliedOpTime": applied.clone(), "durableOpTime": applied,
                "lastAppliedWallTime": applied_date, "lastDurableWallTime": applied_date,
            },
            "members": members,
        };
        if let Some(elected) = published.elected_at_ms {
            status.insert("electionCandidateMetrics", doc! {"lastElectionDate": DateTime::from_millis(elected)});
        }
        Ok(status)
    }

    fn member_status(
        &self,
        member: &super::config::Member,
        (me, config_version): (Option<u64>, i64),
        published: &Published,
        last: u64,
        uptime_seconds: i64,
    ) -> Document {
        let id = member.raft_id();
        let is_me = me == Some(id);
        let known = published.members.iter().find(|m| m.raft_id == id);
        let (state, health, optime) = if is_me {
            (published.state, 1.0, last)
        } else if published.leader == Some(id) {
            (State::Primary, 1.0, known.map_or(published.majority_ts, |m| m.matched_ts))
        } else {
            let health = known.map_or(1.0, |m| if m.active { 1.0 } else { 0.0 });
            (State::Secondary, health, known.map_or(0, |m| m.matched_ts))
        };
        let (op, date) = op_time(optime, published.term);
        let mut status = doc! {
            "_id": member.id, "name": member.host.clone(), "health": health,
            "state": if health == 0.0 { 8 } else { state.number() },
            "stateStr": if health == 0.0 { "(not reachable/healthy)" } else { state.name() },
            "uptime": uptime_seconds, "optime": op.clone(), "optimeDate": date,
            "optimeDurable": op, "optimeDurableDate": date,
            "lastAppliedWallTime": date, "lastDurableWallTime": date,
            "syncSourceHost": "", "syncSourceId": -1,
            "infoMessage": if is_me { published.diverged.clone().unwrap_or_default() } else { String::new() },
            "configVersion": config_version, "configTerm": published.term as i64,
        };
        if is_me {
            status.insert("self", true);
        } else {
            status.insert("lastHeartbeat", DateTime::now());
            status.insert("lastHeartbeatRecv", DateTime::now());
            status.insert("lastHeartbeatMessage", "");
            status.insert("pingMs", 0_i64);
        }
        if state == State::Primary {
            if let Some(elected) = published.elected_at_ms.filter(|_| is_me) {
                status.insert("electionDate", DateTime::from_millis(elected));
                status.insert("electionTime", Timestamp { time: (elected / 1000) as u32, increment: 1 });
            }
            status.insert("electionId", election_id(published.term as i64));
        }
        status
    }

    /// Refuses a write unless this member is the primary. The error carries the current
    /// `topologyVersion`, so drivers know whether it is news (SDAM: an error no newer than the
    /// description is stale) and rediscover the primary.
    pub fn check_writable(&self) -> Result<(), CommandError> {
        if self.is_writable() {
            return Ok(());
        }
        let mut error = CommandError::new(ErrorCode::NotWritablePrimary, "not primary");
        error.extra.insert("topologyVersion", self.topology_version());
        Err(error)
    }

    /// Refuses a read on a member that is not primary, unless the client allows secondaries
    /// (and this member is one).
    pub fn check_readable(&self, command: &Command) -> Result<(), CommandError> {
        if !READS.contains(&command.name.as_str()) || self.is_writable() || !self.is_initiated() {
            return Ok(());
        }
        let state = self.progress.read(|p| p.state);
        if state != State::Secondary {
            let mut error =
                CommandError::new(ErrorCode::NotPrimaryOrSecondary, "node is not in primary or recovering state");
            error.extra.insert("topologyVersion", self.topology_version());
            return Err(error);
        }
        let mode = command.body.get_document("$readPreference").ok().and_then(|p| p.get_str("mode").ok());
        if mode.is_some_and(|mode| mode != "primary") {
            return Ok(());
        }
        let mut error = CommandError::new(ErrorCode::NotPrimaryNoSecondaryOk, "not primary and secondaryOk=false");
        error.extra.insert("topologyVersion", self.topology_version());
        Err(error)
    }
}
