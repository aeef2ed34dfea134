//! The command table: one file per command, each exporting `run(&Context, &Command)`.
//!
//! A handler returns the whole reply body (with `ok: 1.0` last, built by `reply`) or a
//! `CommandError`. Handlers never see the wire: framing, compression and `moreToCome` are the
//! connection's business.

use bson::{Document, RawDocumentBuf};

use crate::command::Command;
use crate::error::CommandError;
use crate::state::Context;

mod build_info;
mod connection_status;
mod end_sessions;
mod get_cmd_line_opts;
mod get_log;
mod get_parameter;
mod hello;
mod host_info;
mod kill_sessions;
mod list_commands;
mod ping;
mod server_status;
mod whatsmyuri;

pub type Handler = fn(&Context, &Command) -> Result<RawDocumentBuf, CommandError>;

/// One command: its names (the first is canonical) and handler.
pub struct Spec {
    pub names: &'static [&'static str],
    pub help: &'static str,
    pub handler: Handler,
}

pub static COMMANDS: &[Spec] = &[
    Spec { names: &["buildInfo", "buildinfo"], help: "version and build details", handler: build_info::run },
    Spec { names: &["connectionStatus"], help: "authentication state of this connection", handler: connection_status::run },
    Spec { names: &["endSessions"], help: "end logical sessions", handler: end_sessions::run },
    Spec { names: &["getCmdLineOpts"], help: "the server's startup options", handler: get_cmd_line_opts::run },
    Spec { names: &["getLog"], help: "recent log lines (none are kept)", handler: get_log::run },
    Spec { names: &["getParameter"], help: "server parameters", handler: get_parameter::run },
    Spec { names: &["hello", "isMaster", "ismaster"], help: "handshake and topology", handler: hello::run },
    Spec { names: &["hostInfo"], help: "the host's system details", handler: host_info::run },
    Spec { names: &["killSessions"], help: "kill logical sessions", handler: kill_sessions::run },
    Spec { names: &["listCommands"], help: "this list", handler: list_commands::run },
    Spec { names: &["ping"], help: "check the server answers", handler: ping::run },
    Spec { names: &["serverStatus"], help: "server and engine statistics", handler: server_status::run },
    Spec { names: &["whatsmyuri"], help: "the client's address as the server sees it", handler: whatsmyuri::run },
];

/// The command named `name` (exact, case-sensitive, as in mongod).
pub fn find(name: &str) -> Option<&'static Spec> {
    COMMANDS.iter().find(|spec| spec.names.contains(&name))
}

/// `fields` with `ok: 1.0` last, as raw bytes.
pub fn reply(fields: Document) -> Result<RawDocumentBuf, CommandError> {
    Ok(RawDocumentBuf::try_from(&wire::ok_reply(fields))?)
}
