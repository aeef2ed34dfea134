//! `listCommands`: every command the server answers, by each of its names.

use bson::{Document, RawDocumentBuf, doc};

use crate::command::Command;
use crate::commands::{COMMANDS, reply};
use crate::error::CommandError;
use crate::state::Context;

pub fn run(_context: &Context, _command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let mut commands = Document::new();
    for spec in COMMANDS {
        for name in spec.names {
            commands.insert(
                *name,
                doc! {
                    "help": spec.help,
                    "adminOnly": false,
                    "requiresAuth": false,
                    "secondaryOk": true,
                },
            );
        }
    }
    reply(doc! { "commands": commands })
}
