//! Atlas Search's commands (`createSearchIndexes`, `updateSearchIndex`, `dropSearchIndex`) and
//! stages (`$listSearchIndexes`, `$search`, `$searchMeta`, `$vectorSearch`): a mongod without
//! a search process refuses them with SearchNotEnabled, and so does Strata, which has none.
//! Drivers and tools recognise this answer (their search-index tests expect it).

use bson::{Document, RawDocumentBuf};

use crate::command::Command;
use crate::error::CommandError;
use crate::state::Context;

/// The pipeline stages that need a search process.
const SEARCH_STAGES: &[&str] = &["$listSearchIndexes", "$search", "$searchMeta", "$vectorSearch"];

pub fn run(_context: &Context, _command: &Command) -> Result<RawDocumentBuf, CommandError> {
    Err(not_enabled())
}

/// Refuses a pipeline with a search stage.
pub fn check_pipeline(pipeline: &[Document]) -> Result<(), CommandError> {
    match pipeline.iter().any(|stage| SEARCH_STAGES.iter().any(|name| stage.contains_key(*name))) {
        true => Err(not_enabled()),
        false => Ok(()),
    }
}

/// mongod's words, which point users to a deployment that has search.
fn not_enabled() -> CommandError {
    CommandError::new(
        wire::ErrorCode::SearchNotEnabled,
        "Using Atlas Search Database Commands and the $listSearchIndexes aggregation stage requires additional \
         configuration. Please connect to Atlas or an AtlasCLI local deployment to enable. For more information on \
         how to connect, see https://dochub.mongodb.org/core/atlas-cli-deploy-local-reqs",
    )
}
