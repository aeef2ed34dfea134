//! `$lookup` and `$unionWith`: stages that read another collection through
//! [`super::CollectionSource`].
//!
//! `$lookup` has both forms: equality (`localField`/`foreignField`, with find-filter semantics:
//! an array local value matches any of its elements, a missing one matches null or missing
//! foreign fields) and correlated (`let` + `pipeline`), and their combination. The foreign
//! collection is scanned once per stage run, not once per input document.

use bson::{Bson, Document, doc};
use document::path::{Candidate, match_candidates};
use vocabulary::location;

use super::source::Namespace;
use super::unwind::set_path;
use super::{Context, Pipeline};
use crate::error::{QueryError, idl};
use crate::expr::{Expr, Scope, bson_type_name, fail};

#[derive(Debug, Clone)]
pub struct LookupSpec {
    from: Option<String>,
    as_path: Vec<String>,
    equality: Option<(Vec<String>, String)>,
    let_vars: Vec<(String, Expr)>,
    pipeline: Option<Pipeline>,
}

fn string_arg(key: &str, value: &Bson) -> Result<String, QueryError> {
    match value {
        Bson::String(s) => Ok(s.clone()),
        other => Err(fail(
            location::LOOKUP_ARGUMENT_NOT_STRING,
            format!("$lookup argument '{key}: {other}' must be a string, is type {}", bson_type_name(other)),
        )),
    }
}

/// A sub-pipeline of `$lookup`/`$unionWith`: no `$out`/`$merge` inside.
fn sub_pipeline(value: &Bson, stage: &str) -> Result<Pipeline, QueryError> {
    let Bson::Array(stages) = value else {
        return Err(fail(
            crate::error::ErrorCode::FailedToParse,
            format!("{stage} 'pipeline' must be an array, found {}", bson_type_name(value)),
        ));
    };
    for item in stages {
        let (name, _) = super::stage::stage_parts(item)?;
        if matches!(name, "$out" | "$merge") {
            return Err(fail(
                location::STAGE_NOT_ALLOWED_IN_SUB_PIPELINE,
                format!("{name} is not allowed within a {stage}'s sub-pipeline"),
            ));
        }
    }
    Pipeline::parse(stages)
}

impl LookupSpec {
    pub fn parse(spec: &Bson) -> Result<LookupSpec, QueryError> {
        let Bson::Document(spec) = spec else {
            return Err(fail(
                9,
                format!("the $lookup specification must be an object, found {}", bson_type_name(spec)),
            ));
        };
        let (mut from, mut as_field, mut local, mut foreign) = (None, None, None, None);
        let (mut let_vars, mut pipeline) = (Vec::new(), None);
        for (key, value) in spec {
            match key.as_str() {
                "from" => from = Some(string_arg(key, value)?),
                "as" => as_field = Some(string_arg(key, value)?),
                "localField" => local = Some(string_arg(key, value)?),
                "foreignField" => foreign = Some(string_arg(key, value)?),
                "let" => let_vars = parse_let(value)?,
                "pipeline" => pipeline = Some(sub_pipeline(value, "$lookup")?),
                other => {
                    return Err(fail(
                        crate::error::ErrorCode::FailedToParse,
                        format!("unknown argument to $lookup: {other}"),
                    ));
                }
            }
        }
        let as_field = as_field
            .ok_or_else(|| fail(crate::error::ErrorCode::FailedToParse, "must specify 'as' field for a $lookup"))?;
        let equality = match (local, foreign) {
            (Some(l), Some(f)) => Some((split(&l), f)),
            (None, None) => None,
            _ => {
                return Err(fail(
                    9,
                    "$lookup requires both or neither of 'localField' and 'foreignField' to be specified",
                ));
            }
        };
        if equality.is_none() && pipeline.is_none() {
            return Err(fail(
                9,
                "$lookup requires either 'pipeline' or both 'localField' and 'foreignField' to be specified",
            ));
        }
        if from.is_none() && pipeline.is_none() {
            return Err(fail(crate::error::ErrorCode::FailedToParse, "must specify 'from' field for a $lookup"));
        }
        Ok(LookupSpec { from, as_path: split(&as_field), equality, let_vars, pipeline })
    }

    /// Runs the lookup for every input document; `foreign` is the scanned collection.
    pub fn apply(
        &self,
        document: Document,
        foreign: &[Document],
        context: &Context<'_>,
    ) -> Result<Document, QueryError> {
        let matched: Vec<Document> = match &self.equality {
            Some((local, foreign_field)) => {
                let filter = equality_filter(&document, local, foreign_field)?;
                let mut out = Vec::new();
                for candidate in foreign {
                    if filter.matches(candidate)? {
                        out.push(candidate.clone());
                    }
                }
                out
            }
            None => foreign.to_vec(),
        };
        let results = match &self.pipeline {
            Some(pipeline) => {
                let mut vars = context.vars.clone();
                let mut scope = Scope::new(&document, &context.vars);
                for (name, expr) in &self.let_vars {
                    vars.set(name.clone(), scope.eval(expr)?.unwrap_or(Bson::Null));
                }
                pipeline.run(matched, &context.with_vars(vars))?
            }
            None => matched,
        };
        let mut out = document;
        set_path(&mut out, &self.as_path, Bson::Array(results.into_iter().map(Bson::Document).collect()));
        Ok(out)
    }

    /// The collection to scan (`None` only with a `$documents` pipeline).
    pub fn from(&self, db: &str) -> Option<Namespace> {
        self.from.as_ref().map(|c| Namespace::new(db, c.clone()))
    }
}

fn split(path: &str) -> Vec<String> {
    path.split('.').map(str::to_string).collect()
}

fn parse_let(value: &Bson) -> Result<Vec<(String, Expr)>, QueryError> {
    let Bson::Document(vars) = value else {
        return Err(fail(
            crate::error::ErrorCode::FailedToParse,
            format!("$lookup argument 'let' must be an object, is type {}", bson_type_name(value)),
        ));
    };
    let mut out = Vec::with_capacity(vars.len());
    for (name, expr) in vars {
        crate::expr::check_variable_name(name, false)?;
        out.push((name.clone(), Expr::parse(expr)?));
    }
    Ok(out)
}

/// `{foreignField: {$in: <local values>}}`: the local field's values as a find filter sees them.
fn equality_filter(
    document: &Document,
    local: &[String],
    foreign_field: &str,
) -> Result<crate::filter::Filter, QueryError> {
    let mut values = Vec::new();
    for candidate in match_candidates(document, local) {
        match candidate {
            Candidate::Missing => values.push(Bson::Null),
            Candidate::ArrayElement(v) => values.push(v.clone()),
            Candidate::Value(Bson::Array(_)) => {}
            Candidate::Value(v) => values.push(v.clone()),
        }
    }
    // A regex local value is compared for equality, not used as a pattern.
    let (regexes, plain): (Vec<Bson>, Vec<Bson>) =
        values.into_iter().partition(|v| matches!(v, Bson::RegularExpression(_)));
    let mut clauses = vec![Bson::Document(doc! {foreign_field: {"$in": plain}})];
    clauses.extend(regexes.into_iter().map(|r| Bson::Document(doc! {foreign_field: {"$eq": r}})));
    crate::filter::Filter::parse(&doc! {"$or": clauses})
}

#[derive(Debug, Clone)]
pub struct UnionWithSpec {
    collection: String,
    pipeline: Option<Pipeline>,
}

impl UnionWithSpec {
    pub fn parse(spec: &Bson) -> Result<UnionWithSpec, QueryError> {
        match spec {
            Bson::String(s) => Ok(UnionWithSpec { collection: s.clone(), pipeline: None }),
            Bson::Document(d) => {
                let (mut collection, mut pipeline) = (None, None);
                for (key, value) in d {
                    match (key.as_str(), value) {
                        ("coll", Bson::String(s)) => collection = Some(s.clone()),
                        ("pipeline", v) => pipeline = Some(sub_pipeline(v, "$unionWith")?),
                        (other, _) => {
                            return Err(idl::unknown_field(&format!("$unionWith.{other}")));
                        }
                    }
                }
                let collection = collection.ok_or_else(|| idl::missing_field("$unionWith.coll"))?;
                Ok(UnionWithSpec { collection, pipeline })
            }
            other => Err(fail(
                14,
                format!(
                    "the $unionWith stage specification must be an object or string, but found {}",
                    bson_type_name(other)
                ),
            )),
        }
    }

    /// The documents the union adds after its input.
    pub fn documents(&self, context: &Context<'_>) -> Result<Vec<Document>, QueryError> {
        let documents = context.source.scan(&Namespace::new(context.db.clone(), self.collection.clone()))?;
        match &self.pipeline {
            Some(pipeline) => pipeline.run(documents, context),
            None => Ok(documents),
        }
    }
}
