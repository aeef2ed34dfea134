//! `aggregate`: a pipeline over a collection (or `aggregate: 1` for a database-level pipeline)
//! through the store; results come back as a cursor like find's. `explain: true` describes the
//! pipeline's first stage's query plan.

use bson::{Bson, Document, RawDocumentBuf, doc};
use docstore::AggregateOptions;

use crate::auth;
use crate::command::{Command, mismatch};
use crate::commands::{collation, hint, reply, variables};
use crate::cursors::{DEFAULT_FIRST_BATCH, ServerCursor, batch_size, first_batch};
use crate::error::CommandError;
use crate::state::Context;

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let collection = match command.argument() {
        Some(Bson::String(_)) => Some(command.collection()?),
        Some(value) if crate::command::as_i64(value) == Some(1) => None,
        Some(other) => return Err(mismatch("aggregate", "string", other)),
        None => None,
    };
    let mut pipeline = pipeline(command)?;
    crate::commands::search_indexes::check_pipeline(&pipeline)?;
    list_local_sessions(context, collection.as_deref(), &mut pipeline)?;
    current_op(context, command, collection.as_deref(), &mut pipeline)?;
    let index_stats = index_stats(context, command, collection.as_deref(), &mut pipeline)?;
    // `$collStats` makes the input from the collection's statistics, not its documents.
    let input = match index_stats || coll_stats(context, command, collection.as_deref(), &mut pipeline)? {
        true => None,
        false => collection.clone(),
    };
    if pipeline.first().is_some_and(|stage| stage.contains_key("$changeStream")) {
        return change_stream(context, command, collection.as_deref(), &pipeline);
    }
    let (read_at, at_cluster_time) = crate::read_concern::read_view(context, command)?;
    let options = AggregateOptions {
        allow_disk_use: command.optional_bool("allowDiskUse")?.unwrap_or(false),
        hint: hint(command.get("hint"))?,
        read_at,
        variables: variables(context, command)?,
        collation: collation(command.get("collation"))?,
    };
    if command.optional_bool("explain")?.unwrap_or(false) {
        return reply(doc! { "stages": pipeline.iter().cloned().map(Bson::Document).collect::<Vec<_>>() });
    }
    let cursor_options = command.optional_document("cursor")?;
    if cursor_options.is_none() {
        return Err(CommandError::new(
            wire::ErrorCode::FailedToParse,
            "The 'cursor' option is required, except for aggregate with the explain argument",
        ));
    }
    let size = match cursor_options.and_then(|options| options.get("batchSize")) {
        Some(value) => batch_size(
            Some(crate::command::as_i64(value).ok_or_else(|| mismatch("batchSize", "number", value))?),
            DEFAULT_FIRST_BATCH,
        )?,
        None => DEFAULT_FIRST_BATCH,
    };
    let store = &context.shared.store;
    let cursor = match input.as_deref() {
        Some(input) => store.collection((&command.database, input)).aggregate(&pipeline, &options)?,
        None => store.aggregate_database(&command.database, &pipeline, &options)?,
    };
    let namespace = command.namespace(collection.as_deref().unwrap_or("$cmd.aggregate"));
    let mut cursor = ServerCursor::new(cursor, namespace, auth::owner(context));
    cursor.at_cluster_time = at_cluster_time;
    first_batch(&context.shared.cursors, cursor, size, false)
}

/// A change stream: a tailable cursor over the oplog's events (see `docstore::change_stream`).
fn change_stream(
    context: &Context,
    command: &Command,
    collection: Option<&str>,
    pipeline: &[Document],
) -> Result<RawDocumentBuf, CommandError> {
    use docstore::ChangeStreamScope as Scope;
    // A change stream reads at majority (on a primary, up to the majority commit point): as
    // mongod, any other level asked for is refused rather than ignored.
    let level = command.optional_document("readConcern")?.and_then(|concern| concern.get_str("level").ok());
    if let Some(level) = level.filter(|level| *level != "majority") {
        return Err(CommandError::new(
            wire::ErrorCode::InvalidOptions,
            format!("Read concern {level} is not supported for $changeStream: change streams read at majority"),
        ));
    }
    let spec = pipeline.first().and_then(|stage| stage.get_document("$changeStream").ok());
    let all = spec.and_then(|spec| spec.get_bool("allChangesForCluster").ok()).unwrap_or(false);
    let db = command.database.clone();
    let scope = match (collection, all) {
        (Some(name), false) => Scope::Collection(db, name.to_owned()),
        (None, true) if db == "admin" => Scope::Cluster,
        (None, false) if db != "admin" => Scope::Database(db),
        _ => {
            return Err(CommandError::new(
                wire::ErrorCode::InvalidOptions,
                "A change stream on the whole deployment runs on admin with {aggregate: 1} and allChangesForCluster: true",
            ));
        }
    };
    let size = match command.optional_document("cursor")?.and_then(|options| options.get("batchSize")) {
        Some(value) => batch_size(crate::command::as_i64(value), DEFAULT_FIRST_BATCH)?,
        None => DEFAULT_FIRST_BATCH,
    };
    let stream = context.shared.store.watch(scope, pipeline)?;
    let namespace = command.namespace(collection.unwrap_or("$cmd.aggregate"));
    let cursor = ServerCursor::change_stream(stream, namespace, auth::owner(context));
    first_batch(&context.shared.cursors, cursor, size, false)
}

/// `$listLocalSessions` (first stage of a database-level pipeline): the sessions this server
/// holds, fed to the rest of the pipeline as `$documents`.
fn list_local_sessions(
    context: &Context,
    collection: Option<&str>,
    pipeline: &mut [Document],
) -> Result<(), CommandError> {
    let Some(first) = pipeline.first_mut().filter(|stage| stage.contains_key("$listLocalSessions")) else {
        return Ok(());
    };
    if collection.is_some() {
        return Err(CommandError::new(
            wire::ErrorCode::InvalidNamespace,
            "$listLocalSessions must be run against the database with {aggregate: 1}",
        ));
    }
    let sessions: Vec<Bson> = context.shared.sessions.list().into_iter().map(Bson::Document).collect();
    *first = doc! {"$documents": sessions};
    Ok(())
}

/// `$currentOp` (first stage of `{aggregate: 1}` on admin): the commands running now, as
/// currentOp lists them, fed to the rest of the pipeline as `$documents`. `allUsers: false`
/// (the default) lists the caller's own commands only; idle connections, cursors and sessions
/// are not listed.
fn current_op(
    context: &Context,
    command: &Command,
    collection: Option<&str>,
    pipeline: &mut [Document],
) -> Result<(), CommandError> {
    let Some(first) = pipeline.first_mut().filter(|stage| stage.contains_key("$currentOp")) else {
        return Ok(());
    };
    if collection.is_some() || command.database != "admin" {
        return Err(CommandError::new(
            wire::ErrorCode::InvalidNamespace,
            "$currentOp must be run against the 'admin' database with {aggregate: 1}",
        ));
    }
    let all_users = match first.get("$currentOp") {
        Some(Bson::Document(spec)) => spec.get_bool("allUsers").unwrap_or(false),
        Some(other) => return Err(mismatch("$currentOp", "object", other)),
        None => false,
    };
    let operations = crate::commands::current_op::documents(context, !all_users);
    // Literal: a command's fields (`$lookup`, `$set`...) are not expressions to evaluate.
    let literal = doc! {"$literal": operations.into_iter().map(Bson::Document).collect::<Vec<_>>()};
    *first = doc! {"$documents": literal};
    Ok(())
}

/// The pipeline's first stage if it is `stage`, one that describes a collection (an error on
/// `{aggregate: 1}`), with the collection.
fn collection_stage<'p, 'c>(
    pipeline: &'p mut [Document],
    stage: &str,
    collection: Option<&'c str>,
) -> Result<Option<(&'p mut Document, &'c str)>, CommandError> {
    let Some(first) = pipeline.first_mut().filter(|first| first.contains_key(stage)) else { return Ok(None) };
    let Some(collection) = collection else {
        return Err(CommandError::new(
            wire::ErrorCode::InvalidNamespace,
            format!("{stage} must be run against a collection namespace"),
        ));
    };
    Ok(Some((first, collection)))
}

/// `$indexStats` (first stage of a collection's pipeline): one document per index with its
/// accesses (`docstore::index::usage`), fed to the rest of the pipeline; `true` when it did.
fn index_stats(
    context: &Context,
    command: &Command,
    collection: Option<&str>,
    pipeline: &mut [Document],
) -> Result<bool, CommandError> {
    let Some((first, collection)) = collection_stage(pipeline, "$indexStats", collection)? else { return Ok(false) };
    let host = context.shared.local_addr.to_string();
    let stats = match context.shared.store.collection((&command.database, collection)).index_stats() {
        Ok(stats) => stats,
        Err(docstore::Error::NamespaceNotFound(_)) => Vec::new(),
        Err(error) => return Err(error.into()),
    };
    let documents: Vec<Bson> = stats
        .into_iter()
        .map(|mut stat| {
            stat.insert("host", host.clone());
            Bson::Document(stat)
        })
        .collect();
    *first = doc! {"$documents": {"$literal": documents}};
    Ok(true)
}

/// `$collStats` (first stage of a collection's pipeline): one document with the collection's
/// `storageStats` (collStats' figures, `scale` honoured) and/or `count`, fed to the rest of the
/// pipeline as `$documents`; `true` when it did. `latencyStats` comes from the server's
/// per-collection figures (`crate::top`); Strata keeps no query-execution counters per
/// collection, so `queryExecStats` is refused.
fn coll_stats(
    context: &Context,
    command: &Command,
    collection: Option<&str>,
    pipeline: &mut [Document],
) -> Result<bool, CommandError> {
    let Some((first, collection)) = collection_stage(pipeline, "$collStats", collection)? else { return Ok(false) };
    let spec = match first.get("$collStats") {
        Some(Bson::Document(spec)) => spec.clone(),
        Some(other) => return Err(mismatch("$collStats", "object", other)),
        None => Document::new(),
    };
    let store = &context.shared.store;
    let mut stats = doc! {
        "ns": command.namespace(collection),
        "host": context.shared.local_addr.to_string(),
        "localTime": bson::DateTime::now(),
    };
    for (key, value) in &spec {
        match key.as_str() {
            "storageStats" => {
                let scale = match value {
                    Bson::Document(options) => options.get("scale").and_then(crate::command::as_i64).unwrap_or(1),
                    _ => 1,
                };
                if scale < 1 {
                    return Err(CommandError::bad_value("scale has to be > 0"));
                }
                stats.insert("storageStats", store.collection((&command.database, collection)).stats(scale as u64)?);
            }
            "count" => {
                let count = store.collection((&command.database, collection)).estimated_document_count()?;
                stats.insert("count", crate::commands::int(count));
            }
            "latencyStats" => {
                let histograms = value.as_document().and_then(|options| options.get_bool("histograms").ok());
                let latency = context.shared.top.latency_stats(&command.database, collection, histograms == Some(true));
                stats.insert("latencyStats", latency);
            }
            other => {
                return Err(CommandError::new(
                    wire::ErrorCode::InvalidOptions,
                    format!(
                        "$collStats option '{other}' is not supported by Strata (it has storageStats, count and latencyStats)"
                    ),
                ));
            }
        }
    }
    *first = doc! {"$documents": {"$literal": [stats]}};
    Ok(true)
}

pub fn pipeline(command: &Command) -> Result<Vec<Document>, CommandError> {
    match command.get("pipeline") {
        Some(Bson::Array(stages)) => stages
            .iter()
            .map(|stage| match stage {
                Bson::Document(stage) => Ok(stage.clone()),
                other => Err(mismatch("pipeline", "object", other)),
            })
            .collect(),
        Some(other) => Err(mismatch("pipeline", "array", other)),
        None => {
            Err(CommandError::new(wire::ErrorCode::FailedToParse, "'pipeline' option must be specified as an array"))
        }
    }
}
