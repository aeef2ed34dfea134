//! Parsing one pipeline stage (`{$name: spec}`) into a [`Stage`].
//!
//! Every stage is validated at parse time with MongoDB's codes, so a malformed pipeline fails
//! before any document is read. Where a stage is defined as a combination of others
//! (`$sortByCount` = `$group` + `$sort`, `$set` = `$addFields`, `$unset` = exclusion
//! `$project`), it is parsed straight into those.

use bson::{Bson, Document};
use vocabulary::location;

use super::add_fields::AddFields;
use super::bucket::{BucketAutoSpec, BucketSpec};
use super::group::{GroupSpec, parse_count, parse_sort_by_count};
use super::lookup::{LookupSpec, UnionWithSpec};
use super::output::{MergeSpec, parse_out};
use super::source::Namespace;
use super::unwind::UnwindSpec;
use super::{MatchStage, Pipeline};
use crate::error::{QueryError, idl};
use crate::expr::{Expr, bson_type_name, fail};
use crate::projection::Projection;
use crate::sort::SortSpec;

/// A parsed stage.
#[derive(Debug, Clone)]
pub enum Stage {
    Match(MatchStage),
    Project(Projection),
    AddFields(AddFields),
    Group(GroupSpec),
    Sort(SortSpec),
    Limit(usize),
    Skip(usize),
    Unwind(UnwindSpec),
    Count(String),
    ReplaceRoot(Expr),
    SortByCount(GroupSpec, SortSpec),
    Bucket(BucketSpec),
    BucketAuto(BucketAutoSpec),
    Facet(Vec<(String, Pipeline)>),
    Sample(usize),
    Redact(Expr),
    Lookup(Box<LookupSpec>),
    UnionWith(Box<UnionWithSpec>),
    Out(Namespace),
    Merge(Box<MergeSpec>),
    Documents(Expr),
    SetWindowFields(Box<super::window::SetWindowFields>),
    Densify(Box<super::densify::DensifySpec>),
    Fill(Box<super::fill::FillSpec>),
}

impl Stage {
    /// The stage's name as written, for placement rules and messages.
    pub fn is_output(&self) -> bool {
        matches!(self, Stage::Out(_) | Stage::Merge(_))
    }
}

/// `(name, spec)` of a stage document, which must have exactly one field.
pub fn stage_parts(stage: &Bson) -> Result<(&str, &Bson), QueryError> {
    let Bson::Document(document) = stage else {
        return Err(fail(
            14,
            format!("Each element of the 'pipeline' array must be an object, found {}", bson_type_name(stage)),
        ));
    };
    let mut fields = document.iter();
    match (fields.next(), fields.next()) {
        (Some((name, spec)), None) => Ok((name.as_str(), spec)),
        _ => Err(fail(
            location::STAGE_NOT_ONE_FIELD,
            "A pipeline stage specification object must contain exactly one field.",
        )),
    }
}

pub fn parse_stage(stage: &Bson) -> Result<Stage, QueryError> {
    let (name, spec) = stage_parts(stage)?;
    Ok(match name {
        "$match" => Stage::Match(MatchStage::parse(object(
            spec,
            location::MATCH_FILTER_NOT_OBJECT,
            "the match filter must be an expression in an object",
        )?)?),
        "$project" => Stage::Project(Projection::parse_stage(object(
            spec,
            location::PROJECT_SPECIFICATION_NOT_OBJECT,
            "$project specification must be an object",
        )?)?),
        "$addFields" | "$set" => Stage::AddFields(AddFields::parse(object(
            spec,
            location::ADD_FIELDS_SPECIFICATION_NOT_OBJECT,
            "$addFields specification stage must be an object",
        )?)?),
        "$unset" => Stage::Project(Projection::parse_unset(spec)?),
        "$group" => Stage::Group(GroupSpec::parse(spec)?),
        "$sort" => Stage::Sort(SortSpec::parse_stage(spec)?),
        "$limit" => Stage::Limit(parse_limit(spec)?),
        "$skip" => Stage::Skip(parse_skip(spec)?),
        "$unwind" => Stage::Unwind(UnwindSpec::parse(spec)?),
        "$count" => Stage::Count(parse_count(spec)?),
        "$replaceRoot" => Stage::ReplaceRoot(parse_replace_root(spec)?),
        "$replaceWith" => Stage::ReplaceRoot(Expr::parse(spec)?),
        "$sortByCount" => {
            let (group, sort) = parse_sort_by_count(spec)?;
            Stage::SortByCount(group, sort)
        }
        "$bucket" => Stage::Bucket(BucketSpec::parse(spec)?),
        "$bucketAuto" => Stage::BucketAuto(BucketAutoSpec::parse(spec)?),
        "$facet" => Stage::Facet(parse_facet(spec)?),
        "$sample" => Stage::Sample(parse_sample(spec)?),
        "$redact" => Stage::Redact(Expr::parse(spec)?),
        "$lookup" => Stage::Lookup(Box::new(LookupSpec::parse(spec)?)),
        "$unionWith" => Stage::UnionWith(Box::new(UnionWithSpec::parse(spec)?)),
        "$out" => Stage::Out(parse_out(spec)?),
        "$merge" => Stage::Merge(Box::new(MergeSpec::parse(spec)?)),
        "$documents" => Stage::Documents(Expr::parse(spec)?),
        "$densify" => Stage::Densify(Box::new(super::densify::DensifySpec::parse(spec)?)),
        "$fill" => Stage::Fill(Box::new(super::fill::FillSpec::parse(spec)?)),
        "$setWindowFields" => Stage::SetWindowFields(Box::new(super::window::SetWindowFields::parse(spec)?)),
        other => {
            return Err(fail(
                location::UNRECOGNIZED_PIPELINE_STAGE,
                format!("Unrecognized pipeline stage name: '{other}'"),
            ));
        }
    })
}

fn object<'a>(spec: &'a Bson, code: i32, message: &str) -> Result<&'a Document, QueryError> {
    match spec {
        Bson::Document(d) => Ok(d),
        _ => Err(fail(code, message.to_string())),
    }
}

fn whole_number(spec: &Bson) -> Option<i64> {
    crate::number::Num::from_bson(spec).and_then(|n| n.to_exact_i64())
}

fn parse_limit(spec: &Bson) -> Result<usize, QueryError> {
    let n = whole_number(spec)
        .ok_or_else(|| fail(location::LIMIT_NOT_NUMBER, "the limit must be specified as a number"))?;
    if n <= 0 {
        return Err(fail(location::LIMIT_NOT_POSITIVE, "the limit must be positive"));
    }
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}

fn parse_skip(spec: &Bson) -> Result<usize, QueryError> {
    let n = whole_number(spec).ok_or_else(|| fail(location::SKIP_NOT_NUMBER, "Argument to $skip must be a number"))?;
    if n < 0 {
        return Err(fail(location::SKIP_NEGATIVE, "Argument to $skip cannot be negative"));
    }
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}

fn parse_replace_root(spec: &Bson) -> Result<Expr, QueryError> {
    let Bson::Document(spec) = spec else {
        return Err(fail(
            location::REPLACE_ROOT_SPECIFICATION_NOT_OBJECT,
            format!("expected an object as specification for $replaceRoot stage, got {}", bson_type_name(spec)),
        ));
    };
    let mut new_root = None;
    for (key, value) in spec {
        match key.as_str() {
            "newRoot" => new_root = Some(Expr::parse(value)?),
            other => return Err(idl::unknown_field(&format!("$replaceRoot.{other}"))),
        }
    }
    new_root
        .ok_or_else(|| fail(location::REPLACE_ROOT_WITHOUT_NEW_ROOT, "no newRoot specified for the $replaceRoot stage"))
}

fn parse_facet(spec: &Bson) -> Result<Vec<(String, Pipeline)>, QueryError> {
    let Bson::Document(spec) = spec else {
        return Err(fail(location::FIELDS_NOT_OBJECT, "the $facet specification must be a non-empty object"));
    };
    if spec.is_empty() {
        return Err(fail(location::FACET_SPECIFICATION_EMPTY, "the $facet specification must be a non-empty object"));
    }
    let mut facets = Vec::with_capacity(spec.len());
    for (name, stages) in spec {
        crate::expr::check_field_name(name)?;
        let Bson::Array(stages) = stages else {
            return Err(fail(
                location::FACET_ARGUMENT_NOT_ARRAY,
                format!("arguments to $facet must be arrays, {name} is type {}", bson_type_name(stages)),
            ));
        };
        for stage in stages {
            let (stage_name, _) = stage_parts(stage)?;
            if matches!(stage_name, "$out" | "$merge" | "$facet" | "$collStats" | "$indexStats" | "$documents") {
                return Err(fail(
                    location::STAGE_NOT_ALLOWED_IN_FACET,
                    format!("{stage_name} is not allowed to be used within a $facet stage"),
                ));
            }
        }
        facets.push((name.clone(), Pipeline::parse(stages)?));
    }
    Ok(facets)
}

fn parse_sample(spec: &Bson) -> Result<usize, QueryError> {
    let Bson::Document(spec) = spec else {
        return Err(fail(
            location::SAMPLE_SPECIFICATION_NOT_OBJECT,
            "the $sample stage specification must be an object",
        ));
    };
    let mut size = None;
    for (key, value) in spec {
        if key != "size" {
            return Err(fail(location::SAMPLE_UNRECOGNIZED_OPTION, format!("unrecognized option to $sample: {key}")));
        }
        let n = whole_number(value)
            .ok_or_else(|| fail(location::SAMPLE_SIZE_NOT_NUMBER, "size argument to $sample must be a number"))?;
        if n < 0 {
            return Err(fail(location::SAMPLE_SIZE_NEGATIVE, "size argument to $sample must not be negative"));
        }
        size = Some(usize::try_from(n).unwrap_or(usize::MAX));
    }
    size.ok_or_else(|| fail(location::SAMPLE_WITHOUT_SIZE, "$sample stage must specify a size"))
}
