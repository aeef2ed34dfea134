//! `explain`: the query plan of a find, aggregate, count, distinct, update, delete or
//! findAndModify, in MongoDB's shape. Every one of them is explained as the find its filter
//! (and sort) would run: that is the part of the work the planner decides.

use bson::{Bson, Document, RawDocumentBuf, doc};
use docstore::{FindRequest, Verbosity};
use wire::ErrorCode;

use crate::command::{Command, mismatch};
use crate::commands::{build_info::VERSION, count, find, reply};
use crate::error::CommandError;
use crate::state::Context;

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let inner = match command.argument() {
        Some(Bson::Document(inner)) => inner.clone(),
        Some(other) => return Err(mismatch("explain", "object", other)),
        None => return Err(CommandError::bad_value("explain needs a command")),
    };
    let verbosity = match command.optional_str("verbosity")? {
        None | Some("allPlansExecution") => Verbosity::AllPlansExecution,
        Some("executionStats") => Verbosity::ExecutionStats,
        Some("queryPlanner") => Verbosity::QueryPlanner,
        Some(other) => {
            return Err(CommandError::bad_value(format!(
                "verbosity string must be one of {{'queryPlanner', 'executionStats', 'allPlansExecution'}}, got {other}"
            )));
        }
    };
    let explained = Command {
        name: inner.keys().next().cloned().unwrap_or_default(),
        database: command.database.clone(),
        body: std::sync::Arc::new(inner.clone()),
        sequences: Vec::new(),
        legacy: command.legacy,
    };
    let collection = explained.collection()?;
    let mut request = as_find(&explained)?;
    request.variables = std::sync::Arc::new(crate::commands::variables(context, &explained)?);
    let mut result = context.shared.store.collection((&command.database, &collection)).explain(&request, verbosity)?;
    result.insert("command", inner);
    result.insert("serverInfo", doc! { "host": context.shared.local_addr.to_string(), "version": VERSION });
    reply(result)
}

/// The find that does the reading for `command`.
fn as_find(command: &Command) -> Result<FindRequest, CommandError> {
    let filter_of = |value: Option<&Bson>| match value {
        Some(Bson::Document(filter)) => filter.clone(),
        _ => Document::new(),
    };
    match command.name.as_str() {
        "find" => Ok(find::find_request(command)?.0),
        "count" => count::count_request(command),
        "distinct" => Ok(FindRequest { filter: filter_of(command.get("query")), ..FindRequest::default() }),
        "findAndModify" | "findandmodify" => Ok(FindRequest {
            filter: filter_of(command.get("query")),
            sort: command.optional_document("sort")?.cloned(),
            limit: Some(1),
            ..FindRequest::default()
        }),
        "aggregate" => {
            let stages = crate::commands::aggregate::pipeline(command)?;
            let filter = stages.first().and_then(|stage| stage.get_document("$match").ok()).cloned();
            Ok(FindRequest { filter: filter.unwrap_or_default(), ..FindRequest::default() })
        }
        "update" | "delete" => {
            let field = if command.name == "update" { "updates" } else { "deletes" };
            let first = match command.get(field) {
                Some(Bson::Array(statements)) => statements.first().and_then(Bson::as_document).cloned(),
                _ => None,
            };
            let statement = first
                .ok_or_else(|| CommandError::bad_value(format!("explain of {} needs one statement", command.name)))?;
            Ok(FindRequest { filter: filter_of(statement.get("q")), ..FindRequest::default() })
        }
        other => Err(CommandError::new(
            ErrorCode::CommandNotFound,
            format!("Explain failed due to unknown command: {other}"),
        )),
    }
}
