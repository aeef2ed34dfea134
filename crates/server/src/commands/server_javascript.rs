//! Server-side JavaScript is not part of Strata: `mapReduce` (like `$where`, `$function` and
//! `$accumulator` in the query language) is refused with a reason and the alternative, rather
//! than reported as an unknown command.

use bson::RawDocumentBuf;

use crate::command::Command;
use crate::error::CommandError;
use crate::state::Context;

pub fn map_reduce(_context: &Context, _command: &Command) -> Result<RawDocumentBuf, CommandError> {
    Err(CommandError::new(
        wire::ErrorCode::CommandNotSupported,
        "mapReduce is not supported: Strata runs no server-side JavaScript; write it as an aggregation pipeline",
    ))
}
