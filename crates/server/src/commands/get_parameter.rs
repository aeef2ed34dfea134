//! `getParameter`: the few server parameters drivers and tools ask for. `{getParameter: "*"}`
//! returns all of them; otherwise each field of the command names one parameter.

use bson::{Bson, Document, RawDocumentBuf, doc};
use wire::ErrorCode;

use crate::command::{Command, GENERIC_ARGUMENTS};
use crate::commands::reply;
use crate::error::CommandError;
use crate::state::Context;

fn parameters(context: &Context) -> Document {
    let mut parameters = doc! {
        "featureCompatibilityVersion": { "version": "7.0" },
        "authenticationMechanisms": Bson::Array(Vec::new()),
        "maxBSONDepth": wire::limits::MAX_WIRE_NESTING_DEPTH as i32,
        "logLevel": 0,
        "quiet": false,
        "requireApiVersion": false,
        "internalQueryMaxBlockingSortMemoryUsageBytes": 104_857_600,
        "transactionLifetimeLimitSeconds": context.shared.config.transaction_lifetime.as_secs() as i64,
    };
    if context.shared.config.test_commands {
        parameters.insert("enableTestCommands", true);
    }
    parameters
}

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let all = parameters(context);
    if matches!(command.argument(), Some(Bson::String(star)) if star == "*") {
        return reply(all);
    }
    let mut found = Document::new();
    for key in command.body.keys().skip(1) {
        if GENERIC_ARGUMENTS.contains(&key.as_str()) {
            continue;
        }
        if let Some(value) = all.get(key) {
            found.insert(key.clone(), value.clone());
        }
    }
    if found.is_empty() {
        return Err(CommandError::new(ErrorCode::InvalidOptions, "no option found to get"));
    }
    reply(found)
}
