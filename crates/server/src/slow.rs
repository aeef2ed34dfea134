//! Slow operations: a command that ran longer than `slowms` (`--slowms`, default 100 ms, as
//! mongod; `profile` changes it) is logged as mongod logs it — "Slow query", component COMMAND, with the namespace,
//! the command (long values cut), its duration, whether it failed, and for the commands that
//! read by a filter, the plan's summary ("COLLSCAN", "IXSCAN { k: 1 }"), found by asking the
//! planner again: only slow commands pay for it.

use std::time::Duration;

use bson::{Bson, Document};
use tracing::info;

use crate::command::Command;
use crate::state::Context;

/// Longest command text a slow-operation line carries.
const MAX_COMMAND_CHARS: usize = 1024;

pub fn note(context: &Context, command: &Command, elapsed: Duration, ok: bool) {
    let threshold = context.shared.profiler.slow_ms();
    if elapsed < Duration::from_millis(threshold) {
        return;
    }
    let namespace = match command.argument() {
        Some(Bson::String(collection)) => format!("{}.{collection}", command.database),
        _ => format!("{}.$cmd", command.database),
    };
    let mut text = Bson::Document((*command.body).clone()).into_relaxed_extjson().to_string();
    if text.len() > MAX_COMMAND_CHARS {
        let cut = (0..=MAX_COMMAND_CHARS).rev().find(|at| text.is_char_boundary(*at)).unwrap_or(0);
        text.truncate(cut);
        text.push_str(" ...");
    }
    let plan = plan_summary(context, command).unwrap_or_default();
    info!(
        target: "server::slow",
        connection = context.connection.id,
        r#type = "command",
        ns = %namespace,
        command = %text,
        planSummary = %plan,
        durationMillis = elapsed.as_millis() as u64,
        ok,
        "Slow query"
    );
}

/// The winning plan of a find, count or distinct, as mongod's `planSummary` names it.
pub fn plan_summary(context: &Context, command: &Command) -> Option<String> {
    if !matches!(command.name.as_str(), "find" | "count" | "distinct") {
        return None;
    }
    let collection = command.collection().ok()?;
    let request = match command.name.as_str() {
        "find" => crate::commands::find::find_request(command).ok()?.0,
        _ => docstore::FindRequest {
            filter: command.optional_document("query").ok().flatten().cloned().unwrap_or_default(),
            ..docstore::FindRequest::default()
        },
    };
    let explained = context
        .shared
        .store
        .collection((&command.database, &collection))
        .explain(&request, docstore::Verbosity::QueryPlanner)
        .ok()?;
    let winning = explained.get_document("queryPlanner").ok()?.get_document("winningPlan").ok()?;
    Some(summarize(winning))
}

/// "IXSCAN { k: 1 }" for the deepest index scan, else the deepest stage's name.
fn summarize(stage: &Document) -> String {
    let name = stage.get_str("stage").unwrap_or("UNKNOWN");
    if name == "IXSCAN" {
        let fields: Vec<String> = stage
            .get_document("keyPattern")
            .map(|key| key.iter().map(|(name, value)| format!("{name}: {value}")).collect())
            .unwrap_or_default();
        return format!("IXSCAN {{ {} }}", fields.join(", "));
    }
    if let Ok(input) = stage.get_document("inputStage") {
        return summarize(input);
    }
    if let Ok(inputs) = stage.get_array("inputStages") {
        let parts: Vec<String> = inputs.iter().filter_map(Bson::as_document).map(summarize).collect();
        return parts.join(", ");
    }
    name.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn summaries() {
        let plan = doc! { "stage": "FETCH", "inputStage": { "stage": "IXSCAN", "keyPattern": { "k": 1 } } };
        assert_eq!(summarize(&plan), "IXSCAN { k: 1 }");
        assert_eq!(summarize(&doc! { "stage": "LIMIT", "inputStage": { "stage": "COLLSCAN" } }), "COLLSCAN");
    }
}
