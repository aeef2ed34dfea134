//! Test fail points: mongod's `configureFailPoint`, which the drivers' specification tests use
//! to make a command fail, close its connection, block, or report a write concern error.
//! Enabled only with `--setParameter enableTestCommands=1`, as in mongod. Four of mongod's:
//!
//! - `failCommand`: `{mode: "alwaysOn" | "off" | {times: n} | {skip: n}, data: {failCommands:
//!   [names], closeConnection?, errorCode?, errorLabels?, errmsg?, writeConcernError?,
//!   blockConnection?, blockTimeMS?, appName?}}` — checked before the command's session is
//!   checked out, so a failed statement leaves its transaction as it was;
//! - `onPrimaryTransactionalWrite`: a retryable write fails with `failBeforeCommitExceptionCode`
//!   before it writes, or (`closeConnection`, the default) its connection closes after the
//!   write, so the driver retries a write that happened; `{skip: n}` counts statements (the
//!   documents a batch writes), as mongod's does, and the command holding statement n + 1
//!   fails whole (mongod writes the statements before it first);
//! - `failGetMoreAfterCursorCheckout`: a `getMore` fails with `errorCode` (or closes);
//! - `stopReplProducer` (on a secondary): it takes no new entries from the primary while on
//!   (drivers' tests use it to make a write concern time out).

use std::time::Duration;

use bson::{Bson, Document};
use parking_lot::Mutex;

use crate::command::{Command, as_i64, mismatch};
use crate::error::CommandError;

/// What a triggered `failCommand` does to the command.
#[derive(Debug, Clone, Default)]
pub struct Triggered {
    pub close_connection: bool,
    /// Close only after running the command (its write done).
    pub close_after_running: bool,
    /// Fired by `failCommand`, before the command ran (its error is not the command's own, so
    /// mongod gives it no change-stream resume label).
    pub from_fail_command: bool,
    pub block: Option<Duration>,
    /// Fail with this error instead of running.
    pub error: Option<CommandError>,
    /// Run, then report this write concern error.
    pub write_concern_error: Option<Document>,
    pub error_labels: Option<Vec<String>>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    AlwaysOn,
    /// Trigger this many more times.
    Times(i64),
    /// Let this many pass, then trigger always.
    Skip(i64),
}

#[derive(Debug, Clone)]
struct FailCommand {
    mode: Mode,
    commands: Vec<String>,
    app_name: Option<String>,
    action: Triggered,
}

/// The fail points Strata has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    FailCommand,
    OnPrimaryTransactionalWrite,
    FailGetMoreAfterCursorCheckout,
    StopReplProducer,
}

impl Point {
    fn parse(name: &str) -> Option<Point> {
        match name {
            "failCommand" => Some(Point::FailCommand),
            "onPrimaryTransactionalWrite" => Some(Point::OnPrimaryTransactionalWrite),
            "failGetMoreAfterCursorCheckout" => Some(Point::FailGetMoreAfterCursorCheckout),
            "stopReplProducer" => Some(Point::StopReplProducer),
            _ => None,
        }
    }
}

#[derive(Default)]
pub struct FailPoints {
    points: Mutex<Vec<(Point, FailCommand)>>,
}

impl FailPoints {
    /// `configureFailPoint`.
    pub fn configure(&self, command: &Command) -> Result<(), CommandError> {
        let point = match command.argument() {
            Some(Bson::String(name)) => Point::parse(name).ok_or_else(|| {
                CommandError::bad_value(format!(
                    "Unknown fail point: {name} (Strata has failCommand, onPrimaryTransactionalWrite, \
                     failGetMoreAfterCursorCheckout, stopReplProducer)"
                ))
            })?,
            Some(other) => return Err(mismatch("configureFailPoint", "string", other)),
            None => return Err(CommandError::bad_value("missing fail point name")),
        };
        let mode = match command.get("mode") {
            Some(Bson::String(mode)) if mode == "off" => {
                self.points.lock().retain(|(existing, _)| *existing != point);
                return Ok(());
            }
            Some(Bson::String(mode)) if mode == "alwaysOn" => Mode::AlwaysOn,
            Some(Bson::Document(mode)) => match (mode.get("times"), mode.get("skip")) {
                (Some(times), _) => Mode::Times(as_i64(times).ok_or_else(|| mismatch("times", "number", times))?),
                (None, Some(skip)) => Mode::Skip(as_i64(skip).ok_or_else(|| mismatch("skip", "number", skip))?),
                _ => return Err(CommandError::bad_value("mode must have times or skip")),
            },
            _ => return Err(CommandError::bad_value("mode must be alwaysOn, off, {times: n} or {skip: n}")),
        };
        let data = command.optional_document("data")?.cloned().unwrap_or_default();
        let parsed = parse(point, mode, &data)?;
        let mut points = self.points.lock();
        points.retain(|(existing, _)| *existing != point);
        points.push((point, parsed));
        Ok(())
    }

    /// Whether fail point `point` fires for this command (counting it when it does).
    pub fn check(&self, point: Point, command: &str, app_name: Option<&str>) -> Option<Triggered> {
        self.check_statements(point, command, app_name, 1)
    }

    /// [`FailPoints::check`] for a command of `statements` statements: a `skip` counts
    /// statements, as mongod's `onPrimaryTransactionalWrite` counts the documents it writes
    /// (it fires for a command holding a statement past the skipped ones).
    pub fn check_statements(
        &self,
        point: Point,
        command: &str,
        app_name: Option<&str>,
        statements: i64,
    ) -> Option<Triggered> {
        let mut points = self.points.lock();
        let position = points.iter().position(|(existing, _)| *existing == point)?;
        let (_, fail) = points.get_mut(position)?;
        if !fail.commands.iter().any(|name| name == command)
            || fail.app_name.as_deref().is_some_and(|wanted| app_name != Some(wanted))
        {
            return None;
        }
        match &mut fail.mode {
            Mode::AlwaysOn => {}
            Mode::Skip(left) if *left >= statements.max(1) => {
                *left -= statements.max(1);
                return None;
            }
            Mode::Skip(left) => *left = 0,
            Mode::Times(left) => {
                *left -= 1;
                if *left <= 0 {
                    let action = fail.action.clone();
                    points.remove(position);
                    return Some(action);
                }
            }
        }
        Some(fail.action.clone())
    }
}

/// The commands a fail point applies to: `failCommand`'s list, the retryable writes, `getMore`.
fn commands_of(point: Point, data: &Document) -> Result<Vec<String>, CommandError> {
    let names = |list: &[&str]| list.iter().map(|name| (*name).to_owned()).collect();
    match point {
        Point::FailCommand => match data.get("failCommands") {
            Some(Bson::Array(names)) => Ok(names.iter().filter_map(Bson::as_str).map(str::to_owned).collect()),
            _ => Err(CommandError::bad_value("failCommand needs data.failCommands, an array of names")),
        },
        Point::OnPrimaryTransactionalWrite => {
            Ok(names(&["insert", "update", "delete", "findAndModify", "findandmodify"]))
        }
        Point::FailGetMoreAfterCursorCheckout => Ok(names(&["getMore"])),
        Point::StopReplProducer => Ok(names(&["replSetRaftMessage"])),
    }
}

fn parse(point: Point, mode: Mode, data: &Document) -> Result<FailCommand, CommandError> {
    let commands = commands_of(point, data)?;
    let block = match (data.get_bool("blockConnection").unwrap_or(false), data.get("blockTimeMS")) {
        (true, Some(ms)) => Some(Duration::from_millis(as_i64(ms).unwrap_or(0).max(0) as u64)),
        _ => None,
    };
    let code = match point {
        Point::OnPrimaryTransactionalWrite => data.get("failBeforeCommitExceptionCode"),
        _ => data.get("errorCode"),
    };
    let error = match code.and_then(as_i64) {
        Some(code) => {
            let code = code as i32;
            let message = data.get_str("errmsg").unwrap_or("Failing command via 'failCommand' failpoint");
            Some(CommandError::new(wire::Code::new(code), message))
        }
        None => None,
    };
    let error_labels = match data.get("errorLabels") {
        Some(Bson::Array(labels)) => Some(labels.iter().filter_map(Bson::as_str).map(str::to_owned).collect()),
        _ => None,
    };
    Ok(FailCommand {
        mode,
        commands,
        app_name: data.get_str("appName").ok().map(str::to_owned),
        action: Triggered {
            // onPrimaryTransactionalWrite closes the connection after the write unless told not
            // to (or told to fail before it).
            close_connection: data.get_bool("closeConnection").unwrap_or(point == Point::OnPrimaryTransactionalWrite),
            // Without an error to fail with, onPrimaryTransactionalWrite lets the write happen
            // and closes after it; with one, it fails before the write (and closes, unless told
            // not to).
            close_after_running: point == Point::OnPrimaryTransactionalWrite && error.is_none(),
            from_fail_command: point == Point::FailCommand,
            block,
            error,
            write_concern_error: data.get_document("writeConcernError").ok().cloned(),
            error_labels,
        },
    })
}

/// The reply fields a triggered fail point adds after the command ran: a write concern error
/// and the labels asked for.
pub fn decorate(triggered: &Triggered, reply: &mut bson::RawDocumentBuf) {
    if let Some(error) = &triggered.write_concern_error
        && let Ok(raw) = bson::RawDocumentBuf::try_from(error)
    {
        reply.append(bson::raw::cstr!("writeConcernError"), raw);
    }
    if let Some(labels) = &triggered.error_labels {
        let mut array = bson::RawArrayBuf::new();
        for label in labels {
            array.push(label.as_str());
        }
        reply.append(bson::raw::cstr!("errorLabels"), array);
    }
}

/// The error document of a fail point that fails the command.
pub fn error_reply(error: &CommandError, triggered: &Triggered) -> Document {
    let mut reply = error.to_document();
    if let Some(labels) = &triggered.error_labels {
        reply.insert("errorLabels", labels.clone());
    }
    reply
}
