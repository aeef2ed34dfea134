//! A replica set's configuration (`rs.conf()`), checked as mongod checks it: members with
//! `_id`, `host`, `priority`, `votes`, `hidden`, `secondaryDelaySecs`, `buildIndexes`, `tags`
//! (string values; `settings.getLastErrorModes` may only ask for tags the members have, and a
//! write concern names such a mode as its `w`);
//! at most 50 members of which at most 7 vote; a member that may never be primary (priority 0)
//! is the only kind that may be hidden, delayed or skip index builds.
//!
//! The consensus library names members by a non-zero number: a member's is its `_id` + 1.

use bson::{Bson, Document, doc};
use wire::ErrorCode;

use crate::error::CommandError;

/// MongoDB's limits.
pub const MAX_MEMBERS: usize = 50;
pub const MAX_VOTING_MEMBERS: usize = 7;
/// mongod's default `settings.electionTimeoutMillis`.
const DEFAULT_ELECTION_TIMEOUT_MS: u64 = 10_000;
/// Shorter than this and a primary's heartbeats (every 100 ms) could not keep secondaries from
/// campaigning.
const MIN_ELECTION_TIMEOUT_MS: i64 = 300;

/// One member, as the configuration describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    pub id: i32,
    pub host: String,
    pub priority: f64,
    pub votes: bool,
    pub hidden: bool,
    pub secondary_delay_secs: i64,
    pub build_indexes: bool,
    pub tags: Document,
}

impl Member {
    /// The consensus library's name for this member.
    pub fn raft_id(&self) -> u64 {
        self.id as u64 + 1
    }

    /// The member as `rs.conf()` shows it.
    pub fn document(&self) -> Document {
        doc! {
            "_id": self.id, "host": self.host.clone(), "arbiterOnly": false,
            "buildIndexes": self.build_indexes, "hidden": self.hidden, "priority": self.priority,
            "tags": self.tags.clone(), "secondaryDelaySecs": self.secondary_delay_secs,
            "votes": i32::from(self.votes),
        }
    }
}

/// A checked configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct SetConfig {
    pub name: String,
    pub version: i64,
    pub term: i64,
    pub members: Vec<Member>,
    pub settings: Document,
}

fn invalid(message: impl Into<String>) -> CommandError {
    CommandError::new(ErrorCode::InvalidReplicaSetConfig, message)
}

impl SetConfig {
    /// Checks `config` (as given to `replSetInitiate` or `replSetReconfig`) for the set `name`.
    pub fn parse(config: &Document, name: &str) -> Result<SetConfig, CommandError> {
        match config.get_str("_id") {
            Ok(given) if given == name => {}
            Ok(given) => {
                return Err(invalid(format!(
                    "Attempting to initiate a replica set with name {given}, but command line reports {name}; rejecting"
                )));
            }
            Err(_) => return Err(invalid("the configuration needs an _id, the set's name")),
        }
        let listed = config.get_array("members").map_err(|_| invalid("the configuration needs a members array"))?;
        let members = listed.iter().map(parse_member).collect::<Result<Vec<_>, _>>()?;
        let set = SetConfig {
            name: name.to_owned(),
            version: config.get("version").and_then(crate::command::as_i64).unwrap_or(1),
            term: config.get("term").and_then(crate::command::as_i64).unwrap_or(0),
            members,
            settings: config.get_document("settings").cloned().unwrap_or_default(),
        };
        set.check()?;
        Ok(set)
    }

    fn check(&self) -> Result<(), CommandError> {
        if self.members.is_empty() {
            return Err(invalid("a replica set needs at least one member"));
        }
        if self.members.len() > MAX_MEMBERS {
            return Err(invalid(format!("a replica set has at most {MAX_MEMBERS} members")));
        }
        let voting = self.members.iter().filter(|m| m.votes).count();
        if voting > MAX_VOTING_MEMBERS {
            return Err(invalid(format!(
                "a replica set has at most {MAX_VOTING_MEMBERS} voting members; this has {voting}"
            )));
        }
        if !self.members.iter().any(|m| m.votes && m.priority > 0.0) {
            return Err(invalid("at least one voting member must be electable (priority above 0)"));
        }
        for (i, member) in self.members.iter().enumerate() {
            for other in self.members.iter().take(i) {
                if other.id == member.id {
                    return Err(invalid(format!("two members have _id {}", member.id)));
                }
                if other.host == member.host {
                    return Err(invalid(format!("two members have host {}", member.host)));
                }
            }
        }
        if self.version < 1 {
            return Err(invalid("version must be at least 1"));
        }
        self.check_write_modes()?;
        match self.settings.get("electionTimeoutMillis").map(crate::command::as_i64) {
            None => {}
            Some(Some(ms)) if ms >= MIN_ELECTION_TIMEOUT_MS => {}
            Some(_) => {
                return Err(invalid(format!(
                    "settings.electionTimeoutMillis must be a number of milliseconds, at least {MIN_ELECTION_TIMEOUT_MS}"
                )));
            }
        }
        Ok(())
    }

    /// Members' tags are strings, and each of `settings.getLastErrorModes` (`{mode: {tag: n}}`)
    /// asks for a positive number of different values of tags the members have.
    fn check_write_modes(&self) -> Result<(), CommandError> {
        for member in &self.members {
            if let Some((tag, _)) = member.tags.iter().find(|(_, value)| !matches!(value, Bson::String(_))) {
                return Err(invalid(format!("the value of tag {tag} of member {} is not a string", member.id)));
            }
        }
        let Some(modes) = self.settings.get("getLastErrorModes") else { return Ok(()) };
        let Bson::Document(modes) = modes else {
            return Err(invalid("settings.getLastErrorModes must be a document of modes"));
        };
        for (mode, rules) in modes {
            let Bson::Document(rules) = rules else {
                return Err(invalid(format!("write concern mode {mode} must be a document of tag counts")));
            };
            for (tag, count) in rules {
                let count = crate::command::as_i64(count).filter(|n| *n > 0);
                let Some(count) = count else {
                    return Err(invalid(format!("mode {mode}: the count for tag {tag} must be a positive number")));
                };
                let values: std::collections::HashSet<&str> =
                    self.members.iter().filter_map(|m| m.tags.get_str(tag).ok()).collect();
                if (values.len() as i64) < count {
                    return Err(invalid(format!(
                        "mode {mode} requires {count} different values for the tag {tag}, but the members have {}",
                        values.len()
                    )));
                }
            }
        }
        Ok(())
    }

    /// Write concern mode `name` of `settings.getLastErrorModes`: for each of its tags, how
    /// many different values of it the members holding a write must have between them, and
    /// each tagged member's (consensus id, value).
    pub fn write_mode(&self, name: &str) -> Option<Vec<super::progress::TagRule>> {
        let rules = self.settings.get_document("getLastErrorModes").ok()?.get_document(name).ok()?;
        let rules = rules
            .iter()
            .map(|(tag, count)| super::progress::TagRule {
                count: crate::command::as_i64(count).unwrap_or(1).max(1) as usize,
                values: self
                    .members
                    .iter()
                    .filter_map(|m| Some((m.raft_id(), m.tags.get_str(tag).ok()?.to_owned())))
                    .collect(),
            })
            .collect();
        Some(rules)
    }

    /// How long a secondary waits without hearing from a primary before it calls an election,
    /// and a primary that has not heard from a majority steps down: MongoDB's
    /// `settings.replicaSetId`: made once, when the set is initiated, and kept by every
    /// reconfiguration. Members' messages carry it, so a member never takes another set's
    /// (one of the same name whose members once had these addresses).
    pub fn replica_set_id(&self) -> Option<bson::oid::ObjectId> {
        self.settings.get_object_id("replicaSetId").ok()
    }

    /// `settings.electionTimeoutMillis`, 10 s unless the configuration says otherwise.
    pub fn election_timeout(&self) -> std::time::Duration {
        let ms = self.settings.get("electionTimeoutMillis").and_then(crate::command::as_i64);
        std::time::Duration::from_millis(
            ms.map_or(DEFAULT_ELECTION_TIMEOUT_MS, |ms| ms.max(MIN_ELECTION_TIMEOUT_MS) as u64),
        )
    }

    pub fn member(&self, raft_id: u64) -> Option<&Member> {
        self.members.iter().find(|m| m.raft_id() == raft_id)
    }

    pub fn member_at(&self, host: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.host == host)
    }

    pub fn voters(&self) -> Vec<u64> {
        self.members.iter().filter(|m| m.votes).map(Member::raft_id).collect()
    }

    pub fn learners(&self) -> Vec<u64> {
        self.members.iter().filter(|m| !m.votes).map(Member::raft_id).collect()
    }

    /// How many voting members make a majority.
    pub fn majority(&self) -> usize {
        self.members.iter().filter(|m| m.votes).count() / 2 + 1
    }

    /// The configuration as `rs.conf()` shows it.
    pub fn document(&self) -> Document {
        let mut settings = doc! {
            "chainingAllowed": true, "heartbeatIntervalMillis": 2000,
            "heartbeatTimeoutSecs": 10, "electionTimeoutMillis": DEFAULT_ELECTION_TIMEOUT_MS as i64,
            "catchUpTimeoutMillis": -1, "getLastErrorModes": {}, "getLastErrorDefaults": {"w": 1, "wtimeout": 0},
        };
        settings.extend(self.settings.clone());
        doc! {
            "_id": self.name.clone(), "version": self.version, "term": self.term,
            "members": self.members.iter().map(|m| Bson::Document(m.document())).collect::<Vec<_>>(),
            "protocolVersion": 1_i64, "writeConcernMajorityJournalDefault": true, "settings": settings,
        }
    }
}

fn parse_member(value: &Bson) -> Result<Member, CommandError> {
    let member = value.as_document().ok_or_else(|| invalid("each member must be a document"))?;
    let id = member.get("_id").and_then(crate::command::as_i64).ok_or_else(|| invalid("each member needs an _id"))?;
    if !(0..=255).contains(&id) {
        return Err(invalid(format!("member _id {id} is not between 0 and 255")));
    }
    let host = member.get_str("host").map_err(|_| invalid(format!("member {id} needs a host")))?.to_owned();
    if !host.contains(':') {
        return Err(invalid(format!("member {id}'s host '{host}' must be host:port")));
    }
    if member.get_bool("arbiterOnly").unwrap_or(false) {
        return Err(invalid("arbiters are not supported: give the set another data-bearing member"));
    }
    let number = |key: &str, default: f64| member.get(key).and_then(as_f64).unwrap_or(default);
    let priority = number("priority", 1.0);
    if !(0.0..=1000.0).contains(&priority) {
        return Err(invalid(format!("member {id}'s priority must be between 0 and 1000")));
    }
    let votes = match number("votes", 1.0) {
        0.0 => false,
        1.0 => true,
        v => return Err(invalid(format!("member {id}'s votes must be 0 or 1, not {v}"))),
    };
    if !votes && priority > 0.0 {
        return Err(invalid(format!("member {id} has votes 0, so its priority must be 0")));
    }
    let hidden = member.get_bool("hidden").unwrap_or(false);
    let secondary_delay_secs = number("secondaryDelaySecs", number("slaveDelay", 0.0)) as i64;
    let build_indexes = member.get_bool("buildIndexes").unwrap_or(true);
    if priority > 0.0 && (hidden || secondary_delay_secs > 0 || !build_indexes) {
        return Err(invalid(format!(
            "member {id} is hidden, delayed or does not build indexes, so its priority must be 0"
        )));
    }
    Ok(Member {
        id: id as i32,
        host,
        priority,
        votes,
        hidden,
        secondary_delay_secs,
        build_indexes,
        tags: member.get_document("tags").cloned().unwrap_or_default(),
    })
}

fn as_f64(value: &Bson) -> Option<f64> {
    match value {
        Bson::Double(number) => Some(*number),
        Bson::Int32(number) => Some(f64::from(*number)),
        Bson::Int64(number) => Some(*number as f64),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn three() -> Document {
        doc! {"_id": "rs", "members": [
            {"_id": 0, "host": "127.0.0.1:1"}, {"_id": 1, "host": "127.0.0.1:2", "priority": 2},
            {"_id": 2, "host": "127.0.0.1:3", "priority": 0, "votes": 0, "hidden": true},
        ]}
    }

    /// Goal: mongod's rules on members hold. Method: a valid set, then one breach at a time.
    #[test]
    fn member_rules() {
        let set = SetConfig::parse(&three(), "rs").unwrap();
        assert_eq!(set.voters(), vec![1, 2]);
        assert_eq!(set.learners(), vec![3]);
        assert_eq!(set.majority(), 2);
        let breach = |edit: fn(&mut Document) -> Option<Bson>| {
            let mut config = three();
            edit(&mut config);
            SetConfig::parse(&config, "rs").unwrap_err().code
        };
        let bad = ErrorCode::InvalidReplicaSetConfig;
        assert_eq!(breach(|c| c.insert("_id", "other")), bad);
        assert_eq!(
            breach(|c| c.insert("members", vec![Bson::Document(doc! {"_id": 0, "host": "h:1", "hidden": true})])),
            bad
        );
        assert_eq!(
            breach(|c| c.insert("members", vec![Bson::Document(doc! {"_id": 0, "host": "h:1", "votes": 0})])),
            bad
        );
        assert_eq!(breach(|c| c.insert("members", vec![Bson::Document(doc! {"_id": 0, "host": "nohost"})])), bad);
        let mut eight = three();
        eight.insert(
            "members",
            (0..8).map(|i| Bson::Document(doc! {"_id": i, "host": format!("h:{i}")})).collect::<Vec<_>>(),
        );
        assert_eq!(SetConfig::parse(&eight, "rs").unwrap_err().code, bad);
    }

    /// Goal: `settings.getLastErrorModes` is checked against the members' tags, and a mode
    /// resolves to each tagged member's value. Method: tag three members, parse good and bad
    /// modes.
    #[test]
    fn write_concern_modes() {
        let tagged = |modes: Document| {
            let mut config = three();
            let members: Vec<Bson> = [("east", 0), ("east", 1), ("west", 2)]
                .iter()
                .map(|(dc, i)| Bson::Document(doc! {"_id": *i, "host": format!("h:{i}"), "tags": {"dc": *dc}}))
                .collect();
            config.insert("members", members);
            config.insert("settings", doc! {"getLastErrorModes": modes});
            SetConfig::parse(&config, "rs")
        };
        let set = tagged(doc! {"twoDCs": {"dc": 2}}).unwrap();
        let rules = set.write_mode("twoDCs").unwrap();
        assert_eq!(rules.len(), 1);
        assert_eq!(rules[0].count, 2);
        assert_eq!(rules[0].values, vec![(1, "east".into()), (2, "east".into()), (3, "west".into())]);
        assert!(set.write_mode("threeDCs").is_none());
        let bad = ErrorCode::InvalidReplicaSetConfig;
        assert_eq!(tagged(doc! {"threeDCs": {"dc": 3}}).unwrap_err().code, bad, "only two values of dc");
        assert_eq!(tagged(doc! {"none": {"rack": 1}}).unwrap_err().code, bad, "no member has a rack");
        assert_eq!(tagged(doc! {"zero": {"dc": 0}}).unwrap_err().code, bad);
        let mut numeric = three();
        numeric.insert("members", vec![Bson::Document(doc! {"_id": 0, "host": "h:0", "tags": {"dc": 1}})]);
        assert_eq!(SetConfig::parse(&numeric, "rs").unwrap_err().code, bad, "tag values are strings");
    }

    /// Goal: the election timeout is mongod's `settings.electionTimeoutMillis`, 10 s by default,
    /// and a value too short for the heartbeats is refused. Method: parse three settings.
    #[test]
    fn election_timeout_setting() {
        let with = |settings: Option<Document>| {
            let mut config = three();
            if let Some(settings) = settings {
                config.insert("settings", settings);
            }
            SetConfig::parse(&config, "rs")
        };
        let default = with(None).unwrap();
        assert_eq!(default.election_timeout(), std::time::Duration::from_secs(10));
        assert_eq!(
            default.document().get_document("settings").unwrap().get_i64("electionTimeoutMillis").ok(),
            Some(10_000)
        );
        let quick = with(Some(doc! {"electionTimeoutMillis": 1000})).unwrap();
        assert_eq!(quick.election_timeout(), std::time::Duration::from_millis(1000));
        let code = with(Some(doc! {"electionTimeoutMillis": 10})).unwrap_err().code;
        assert_eq!(code, ErrorCode::InvalidReplicaSetConfig);
        let code = with(Some(doc! {"electionTimeoutMillis": "soon"})).unwrap_err().code;
        assert_eq!(code, ErrorCode::InvalidReplicaSetConfig);
    }
}
