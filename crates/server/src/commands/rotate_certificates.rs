//! `rotateCertificates`: re-read the TLS certificate, key and CA files; connections opened
//! from now on use them (open ones keep their session). On an error the old files stay in use.

use bson::{Document, RawDocumentBuf};
use tracing::info;
use wire::ErrorCode;

use crate::command::Command;
use crate::commands::reply;
use crate::error::CommandError;
use crate::state::Context;

pub fn run(context: &Context, _command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let Some(tls) = &context.shared.tls else {
        return Err(CommandError::new(ErrorCode::IllegalOperation, "TLS is not enabled on this server"));
    };
    tls.reload().map_err(|error| {
        CommandError::new(ErrorCode::OperationFailed, format!("cannot rotate certificates: {error}"))
    })?;
    info!("TLS certificates rotated");
    reply(Document::new())
}
