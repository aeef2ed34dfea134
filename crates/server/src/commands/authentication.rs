//! The authentication commands, one handler each: `saslStart`, `saslContinue` (SCRAM, see
//! `auth`), `authenticate` (MONGODB-X509) and `logout`.

use bson::{Document, RawDocumentBuf};

use crate::auth;
use crate::command::Command;
use crate::commands::reply;
use crate::error::CommandError;
use crate::state::Context;

pub fn sasl_start(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    reply(auth::sasl_start(context, &command.database, &command.body)?)
}

pub fn sasl_continue(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    reply(auth::sasl_continue(context, &command.body)?)
}

pub fn authenticate(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    reply(auth::authenticate_x509(context, &command.database, &command.body)?)
}

pub fn logout(context: &Context, _command: &Command) -> Result<RawDocumentBuf, CommandError> {
    auth::logout(context);
    reply(Document::new())
}
