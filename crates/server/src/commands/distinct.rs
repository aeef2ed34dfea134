//! `distinct`: the distinct values at `key` among documents matching `query` (under the
//! `collation`, if any).

use bson::{Document, RawDocumentBuf, doc};

use crate::command::Command;
use crate::commands::{collation, reply};
use crate::error::CommandError;
use crate::state::Context;
use docstore::FindRequest;

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let collection = command.collection()?;
    let Some(key) = command.optional_str("key")? else {
        return Err(CommandError::new(
            wire::ErrorCode::NoSuchKey,
            "BSON field 'distinct.key' is missing but a required field",
        ));
    };
    let (read_at, at_cluster_time) = crate::read_concern::read_view(context, command)?;
    let request = FindRequest {
        filter: command.optional_document("query")?.cloned().unwrap_or_else(Document::new),
        read_at,
        collation: collation(command.get("collation"))?,
        ..FindRequest::default()
    };
    let values = context.shared.store.collection((&command.database, &collection)).distinct(key, &request)?;
    let mut fields = doc! { "values": values };
    if let Some(ts) = at_cluster_time {
        fields.insert("atClusterTime", ts);
    }
    reply(fields)
}
