//! Write concerns on a replica set: after a write command, wait until as many members hold its
//! changes as `w` asks (`"majority"`, the default since MongoDB 5.0, or a number), or until
//! `wtimeout`. A wait that ends without that adds MongoDB's `writeConcernError` to the reply;
//! the write itself stays (it is not undone: a later majority may still commit it).

use std::time::{Duration, Instant};

use bson::{Bson, RawDocumentBuf, doc};
use wire::ErrorCode;

use super::consensus::as_u64;
use super::progress::{Waited, Want};
use super::{Replication, is_write, last_write};
use crate::command::Command;

/// What a command's write concern asks for.
enum Asked {
    Nothing,
    Wait(Want, Option<Duration>),
    Unsatisfiable(String),
    UnknownMode(String),
}

fn asked(set: &Replication, command: &Command) -> Asked {
    let ends_transaction = matches!(command.name.as_str(), "commitTransaction" | "abortTransaction");
    // A statement inside a transaction waits for nothing: its commit does.
    let in_transaction = command.body.contains_key("autocommit") && !ends_transaction;
    if !(is_write(&command.name) || ends_transaction) || in_transaction {
        return Asked::Nothing;
    }
    let Some(config) = set.set_config() else { return Asked::Nothing };
    let concern = command.body.get_document("writeConcern").ok();
    let timeout = concern
        .and_then(|c| c.get("wtimeout"))
        .and_then(crate::command::as_i64)
        .filter(|ms| *ms > 0)
        .map(|ms| Duration::from_millis(ms as u64));
    let members = config.members.len();
    let want = match concern.and_then(|c| c.get("w")) {
        None | Some(Bson::Null) => Want::Majority,
        Some(Bson::String(mode)) if mode == "majority" => Want::Majority,
        Some(Bson::String(mode)) => match config.write_mode(mode) {
            Some(rules) => Want::Tags(rules),
            None => return Asked::UnknownMode(mode.clone()),
        },
        Some(w) => match crate::command::as_i64(w) {
            Some(n) if n <= 1 => return Asked::Nothing,
            Some(n) if n as usize > members => {
                return Asked::Unsatisfiable(format!(
                    "Not enough data-bearing nodes: w is {n} and the set has {members}"
                ));
            }
            Some(n) => Want::Members(n as usize),
            None => return Asked::Nothing,
        },
    };
    if members == 1 {
        // The only member: its own commit is the majority's.
        return Asked::Nothing;
    }
    Asked::Wait(want, timeout)
}

/// Waits for `command`'s write concern (its changes are everything in the oplog now) and
/// reports a failure in `reply`.
pub fn await_replication(set: &Replication, command: &Command, reply: &mut RawDocumentBuf) {
    if !set.is_initiated() || reply.get("writeConcernError").ok().flatten().is_some() {
        return;
    }
    let error = match asked(set, command) {
        Asked::Nothing => return,
        Asked::Unsatisfiable(message) => (ErrorCode::UnsatisfiableWriteConcern, message, doc! {}),
        Asked::UnknownMode(mode) => (
            ErrorCode::UnknownReplWriteConcern,
            format!("No write concern mode named '{mode}' found in replica set configuration"),
            doc! {},
        ),
        Asked::Wait(want, timeout) => {
            let ts = as_u64(last_write(&set.store));
            match set.progress.wait(ts, &want, timeout.map(|t| Instant::now() + t)) {
                Waited::Done => return,
                Waited::TimedOut => (
                    ErrorCode::WriteConcernTimeout,
                    "waiting for replication timed out".to_owned(),
                    doc! {"wtimeout": true},
                ),
                Waited::SteppedDown => (
                    ErrorCode::PrimarySteppedDown,
                    "Primary stepped down while waiting for replication".to_owned(),
                    doc! {},
                ),
            }
        }
    };
    let (code, message, info) = error;
    let Ok(info) = RawDocumentBuf::try_from(&info) else { return };
    let error = bson::rawdoc! {"code": code.code(), "codeName": code.name(), "errmsg": message, "errInfo": info};
    reply.append(bson::raw::cstr!("writeConcernError"), error);
}
