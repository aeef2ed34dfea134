//! The Stable API (`apiVersion`, `apiStrict`, `apiDeprecationErrors`), checked for every
//! command before it runs: the only version is "1"; with `apiStrict: true` a command outside
//! API Version 1 is refused with APIStrictError, as mongod refuses it. (Strata deprecates
//! nothing in it, so `apiDeprecationErrors` refuses nothing.)

use bson::Bson;
use wire::ErrorCode;

use crate::command::Command;
use crate::error::CommandError;

/// The commands of API Version 1 (MongoDB 7's list).
const VERSION_1: &[&str] = &[
    "abortTransaction",
    "aggregate",
    "authenticate",
    "bulkWrite",
    "collMod",
    "commitTransaction",
    "count",
    "create",
    "createIndexes",
    "delete",
    "distinct",
    "drop",
    "dropDatabase",
    "dropIndexes",
    "endSessions",
    "explain",
    "find",
    "findAndModify",
    "getMore",
    "hello",
    "insert",
    "killCursors",
    "listCollections",
    "listDatabases",
    "listIndexes",
    "ping",
    "refreshSessions",
    "saslContinue",
    "saslStart",
    "update",
];

pub fn check(command: &Command) -> Result<(), CommandError> {
    let strict = flag(command, "apiStrict")?;
    let deprecation_errors = flag(command, "apiDeprecationErrors")?;
    match command.get("apiVersion") {
        None if strict.is_some() || deprecation_errors.is_some() => Err(CommandError::new(
            ErrorCode::InvalidOptions,
            "Provided apiStrict and/or apiDeprecationErrors without passing apiVersion",
        )),
        None => Ok(()),
        Some(Bson::String(version)) if version == "1" => match strict {
            Some(true) if !VERSION_1.contains(&command.name.as_str()) => Err(CommandError::new(
                ErrorCode::APIStrictError,
                format!(
                    "Provided apiStrict:true, but the command {} is not in API Version 1. Information on supported \
                     commands and migrations in API Version 1 can be found at \
                     https://dochub.mongodb.org/core/manual-versioned-api",
                    command.name
                ),
            )),
            _ => Ok(()),
        },
        Some(Bson::String(version)) => {
            Err(CommandError::new(ErrorCode::APIVersionError, format!("API version must be \"1\", not \"{version}\"")))
        }
        Some(other) => Err(crate::command::mismatch("apiVersion", "string", other)),
    }
}

fn flag(command: &Command, name: &str) -> Result<Option<bool>, CommandError> {
    match command.get(name) {
        None => Ok(None),
        Some(Bson::Boolean(value)) => Ok(Some(*value)),
        Some(other) => Err(crate::command::mismatch(name, "bool", other)),
    }
}
