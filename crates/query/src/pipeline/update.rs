//! Pipeline-style updates: an update given as an array of stages, each of which maps one
//! document to one document (`$addFields`/`$set`, `$project`, `$unset`,
//! `$replaceRoot`/`$replaceWith`). Used by the update command and by `$merge`'s pipeline form.
//!
//! This module only computes the new document; `_id` immutability and document size are the
//! update module's checks.

use bson::{Bson, Document};

use super::stage::{Stage, parse_stage, stage_parts};
use crate::error::QueryError;
use crate::expr::{Variables, fail};

#[derive(Debug, Clone)]
pub struct UpdatePipeline {
    stages: Vec<Stage>,
}

impl UpdatePipeline {
    pub fn parse(stages: &[Bson]) -> Result<UpdatePipeline, QueryError> {
        let mut parsed = Vec::with_capacity(stages.len());
        for stage in stages {
            let (name, _) = stage_parts(stage)?;
            if !matches!(name, "$addFields" | "$set" | "$project" | "$unset" | "$replaceRoot" | "$replaceWith") {
                return Err(fail(
                    72,
                    format!("Invalid update pipeline: {name} is not allowed to be used within an update"),
                ));
            }
            parsed.push(parse_stage(stage)?);
        }
        Ok(UpdatePipeline { stages: parsed })
    }

    pub fn apply(&self, document: &Document, vars: &Variables) -> Result<Document, QueryError> {
        let mut current = document.clone();
        for stage in &self.stages {
            current = match stage {
                Stage::AddFields(spec) => spec.apply(&current, vars)?,
                Stage::Project(spec) => spec.apply_with(&current, None, vars)?,
                Stage::ReplaceRoot(expr) => super::replace_root(expr, &current, vars)?,
                _ => return Err(fail(crate::error::ErrorCode::InvalidOptions, "Invalid update pipeline stage")),
            };
        }
        Ok(current)
    }
}

/// Applies a pipeline-style update to one document (`$$NOW` is the current time).
pub fn apply_pipeline_update(document: &Document, stages: &[Bson]) -> Result<Document, QueryError> {
    UpdatePipeline::parse(stages)?.apply(document, &Variables::new())
}
