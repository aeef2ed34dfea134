//! `getLog`: mongosh asks for "startupWarnings" when it connects. Logs go to stderr through
//! `tracing` and are not kept, so every log is empty; `getLog: "*"` lists the names.

use bson::{Bson, RawDocumentBuf, doc};

use crate::command::{Command, mismatch};
use crate::commands::reply;
use crate::error::CommandError;
use crate::state::Context;

pub fn run(_context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    match command.argument() {
        Some(Bson::String(name)) if name == "*" => reply(doc! { "names": ["global", "startupWarnings"] }),
        Some(Bson::String(name)) if name == "global" || name == "startupWarnings" => {
            reply(doc! { "totalLinesWritten": 0, "log": Bson::Array(Vec::new()) })
        }
        Some(Bson::String(name)) => {
            Err(CommandError::new(wire::ErrorCode::OperationFailed, format!("No log named '{name}'")))
        }
        Some(other) => Err(mismatch("getLog", "string", other)),
        None => Err(CommandError::bad_value("getLog needs a log name")),
    }
}
