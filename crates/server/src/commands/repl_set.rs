//! The replica-set commands: `replSetInitiate` (mongosh's `rs.initiate()`), `replSetGetStatus`
//! (`rs.status()`) and `replSetGetConfig` (`rs.conf()`). On a standalone server they fail as
//! mongod's do: NoReplicationEnabled.

use bson::{Bson, RawDocumentBuf, doc};
use wire::ErrorCode;

use crate::command::Command;
use crate::commands::reply;
use crate::error::CommandError;
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
    set.initiate(&context.shared.store, given)?;
    context.shared.wake_on_oplog();
    context.shared.wake(WakeOn::Topology);
    tracing::info!(set = %set.name, "replica set initiated; this member is primary");
    reply(doc! {})
}

pub fn get_status(context: &Context, _command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let set = replication(context)?;
    let uptime = context.shared.started.elapsed().as_secs() as i64;
    reply(set.status(&context.shared.store, uptime)?)
}

pub fn get_config(context: &Context, _command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let set = replication(context)?;
    let Some(config) = set.config() else { return Err(replication::not_yet_initialized()) };
    reply(doc! {"config": config})
}
