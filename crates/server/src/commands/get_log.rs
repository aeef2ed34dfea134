//! `getLog`: "global" is the last lines the server logged (mongod's JSON lines, see
//! `logging`); "startupWarnings", which mongosh shows when it connects, the warnings the server
//! gave at startup; `getLog: "*"` lists the names.

use bson::{Bson, RawDocumentBuf, doc};

use crate::command::{Command, mismatch};
use crate::commands::{int, reply};
use crate::error::CommandError;
use crate::state::Context;

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    match command.argument() {
        Some(Bson::String(name)) if name == "*" => reply(doc! { "names": ["global", "startupWarnings"] }),
        Some(Bson::String(name)) if name == "global" => {
            let (written, lines) = crate::logging::recent();
            let lines: Vec<Bson> = lines.into_iter().map(Bson::String).collect();
            reply(doc! { "totalLinesWritten": int(written), "log": lines })
        }
        Some(Bson::String(name)) if name == "startupWarnings" => {
            let lines: Vec<Bson> = context.shared.startup_warnings.iter().cloned().map(Bson::String).collect();
            reply(doc! { "totalLinesWritten": int(lines.len()), "log": lines })
        }
        Some(Bson::String(name)) => {
            Err(CommandError::new(wire::ErrorCode::OperationFailed, format!("No log named '{name}'")))
        }
        Some(other) => Err(mismatch("getLog", "string", other)),
        None => Err(CommandError::bad_value("getLog needs a log name")),
    }
}
