//! `profile`: a database's profiling level (0 off, 1 slow commands, 2 all; -1 only reads the
//! settings), the server's `slowms` and `sampleRate`, and the database's `filter` (a query
//! over profile entries, or `"unset"`). Replies with the settings as they were (`was`, ...).
//! See `crate::profiler`.

use bson::{Bson, RawDocumentBuf, doc};

use crate::command::{Command, as_i64, mismatch};
use crate::commands::reply;
use crate::error::CommandError;
use crate::profiler::Change;
use crate::state::Context;

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let level = match command.argument() {
        Some(value) => as_i64(value).ok_or_else(|| mismatch("profile", "number", value))?,
        None => return Err(CommandError::bad_value("profile needs a level")),
    };
    if !(-1..=2).contains(&level) {
        return Err(CommandError::bad_value(format!("Invalid profiling level: {level}")));
    }
    let slow_ms = match command.get("slowms") {
        Some(value) => Some(as_i64(value).ok_or_else(|| mismatch("slowms", "number", value))?.max(0) as u64),
        None => None,
    };
    let sample_rate = match command.get("sampleRate") {
        Some(Bson::Double(rate)) if (0.0..=1.0).contains(rate) => Some(*rate),
        Some(value) if matches!(as_i64(value), Some(0 | 1)) => as_i64(value).map(|rate| rate as f64),
        Some(_) => return Err(CommandError::bad_value("'sampleRate' must be between 0.0 and 1.0 inclusive")),
        None => None,
    };
    let filter = match command.get("filter") {
        Some(Bson::String(unset)) if unset == "unset" => Some(None),
        Some(Bson::Document(filter)) => Some(Some(filter.clone())),
        Some(other) => return Err(mismatch("filter", "object or \"unset\"", other)),
        None => None,
    };
    let profiler = &context.shared.profiler;
    let (was, old_filter) = profiler.settings(&command.database);
    let mut answer = doc! {"was": was, "slowms": profiler.slow_ms() as i64, "sampleRate": profiler.sample_rate()};
    if let Some(filter) = old_filter {
        answer.insert("filter", filter);
    }
    let level = (level >= 0).then_some(level as i32);
    profiler.change(&command.database, Change { level, slow_ms, sample_rate, filter })?;
    reply(answer)
}
