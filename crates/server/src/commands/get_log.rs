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
            let lines: Vec<Bson> =
                context.shared.startup_warnings.iter().map(|w| Bson::String(log_line(context, w))).collect();
            reply(doc! { "totalLinesWritten": int(lines.len()), "log": lines })
        }
        Some(Bson::String(name)) => {
            Err(CommandError::new(wire::ErrorCode::OperationFailed, format!("No log named '{name}'")))
        }
        Some(other) => Err(mismatch("getLog", "string", other)),
        None => Err(CommandError::bad_value("getLog needs a log name")),
    }
}

/// A warning as mongod 4.4+ logs it: one JSON line with `t`, `s`, `c`, `id`, `ctx`, `msg`.
fn log_line(context: &Context, message: &str) -> String {
    let started = bson::DateTime::now().saturating_duration_since(bson::DateTime::from_millis(0));
    let since_start = context.shared.started.elapsed();
    let millis = started.saturating_sub(since_start).as_millis();
    let time = bson::DateTime::from_millis(i64::try_from(millis).unwrap_or(i64::MAX));
    let line = doc! {
        "t": { "$date": time.try_to_rfc3339_string().unwrap_or_default() },
        "s": "W",
        "c": "CONTROL",
        "id": 22120,
        "ctx": "initandlisten",
        "msg": message,
        "tags": ["startupWarnings"],
    };
    Bson::Document(line).into_relaxed_extjson().to_string()
}
