//! The replica-set commands: `replSetInitiate` (mongosh's `rs.initiate()`), `replSetGetStatus`
//! (`rs.status()`), `replSetGetConfig` (`rs.conf()`), `replSetReconfig` (`rs.reconfig()`, and
//! `rs.add()`/`rs.remove()`, which mongosh builds on it), `replSetStepDown`, `replSetFreeze`,
//! and the members' own `replSetRaftJoin` and `replSetRaftMessage`. On a standalone server
//! they fail as mongod's do: NoReplicationEnabled.

use bson::{Bson, RawDocumentBuf, doc};
use raft::prelude::MessageType;
use wire::ErrorCode;

use crate::command::Command;
use crate::commands::reply;
use crate::error::CommandError;
use crate::fail_points::Point;
use crate::replication::{self, Replication};
use crate::state::{Context, WakeOn};

fn replication(context: &Context) -> Result<&Replication, CommandError> {
    context
        .shared
        .replication
        .as_ref()
        .ok_or_else(|| CommandError::new(ErrorCode::NoReplicationEnabled, "not running with --replSet"))
}

pub fn initiate(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let set = replication(context)?;
    let given = match command.get("replSetInitiate") {
        Some(Bson::Document(config)) if !config.is_empty() => Some(config.clone()),
        _ => None,
    };
    set.initiate(given)?;
    context.shared.wake_on_oplog();
    context.shared.wake(WakeOn::Topology);
    tracing::info!(set = %set.name, "replica set initiated");
    reply(doc! {})
}

pub fn get_status(context: &Context, _command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let set = replication(context)?;
    let uptime = context.shared.started.elapsed().as_secs() as i64;
    reply(set.status(uptime)?)
}

pub fn get_config(context: &Context, _command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let set = replication(context)?;
    let Some(config) = set.config() else { return Err(replication::not_yet_initialized()) };
    reply(doc! {"config": config})
}

pub fn reconfig(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let set = replication(context)?;
    let Some(Bson::Document(config)) = command.get("replSetReconfig") else {
        return Err(CommandError::type_mismatch("replSetReconfig takes the new configuration document"));
    };
    set.reconfigure(config)?;
    reply(doc! {})
}

pub fn step_down(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let set = replication(context)?;
    let seconds = command.get("replSetStepDown").and_then(crate::command::as_i64).unwrap_or(60);
    if seconds <= 0 {
        return Err(CommandError::bad_value("replSetStepDown takes a positive number of seconds"));
    }
    set.step_down(seconds as u64)?;
    reply(doc! {})
}

pub fn freeze(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let set = replication(context)?;
    let seconds = command.get("replSetFreeze").and_then(crate::command::as_i64).unwrap_or(0);
    set.freeze(seconds.max(0) as u64)?;
    reply(doc! {})
}

/// A member joining: sent by the member that initiates the set or adds this one.
pub fn raft_join(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let set = replication(context)?;
    set.join(&command.body)?;
    context.shared.wake_on_oplog();
    context.shared.wake(WakeOn::Topology);
    reply(doc! {})
}

/// Consensus messages from another member (sent with `moreToCome`: no reply is read).
pub fn raft_message(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let set = replication(context)?;
    let ours = set.set_config().and_then(|config| config.replica_set_id());
    if let (Some(ours), Some(theirs)) = (ours, replication::transport::decode_set_id(&command.body))
        && ours != theirs
    {
        // A member of another set (one of the same name, at addresses this set's members once
        // had): its messages would corrupt this member's consensus state.
        return Err(CommandError::new(
            ErrorCode::InvalidReplicaSetConfig,
            format!("replica set IDs do not match, ours: {ours}; remote node's: {theirs}"),
        ));
    }
    let mut messages = replication::transport::decode(&command.body).map_err(CommandError::bad_value)?;
    if context.shared.config.test_commands
        && context.shared.fail_points.check(Point::StopReplProducer, &command.name, None).is_some()
    {
        // The fail point stops replication to this member: new entries are not taken (the
        // primary sends them again once it is off); heartbeats and votes still count.
        messages.retain(|message| !matches!(message.get_msg_type(), MessageType::MsgAppend | MessageType::MsgSnapshot));
    }
    set.deliver(messages)?;
    if let Some((member, applied)) = replication::transport::decode_position(&command.body) {
        set.note_position(member, applied)?;
    }
    reply(doc! {})
}
