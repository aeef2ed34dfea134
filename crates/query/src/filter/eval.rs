//! Matching a [`MatchExpr`] tree against a document.
//!
//! A match returns `Some(position)`: the index of the element of the first array the match went
//! through, when there is one (the positional `$`), or `None` when the document does not match.
//! Path predicates hold when any candidate value satisfies them; see [`super`] for the rules.

use std::cmp::Ordering;

use bson::{Bson, Document};
use document::canonical_type_rank;
use document::path::{Candidate, Located, located_candidates};

use super::parse::truncated;
use super::{Comparison, InItem, MatchExpr, Predicate};
use crate::collation::{Collation, compare_values};
use crate::error::Result;
use crate::expr::{Variables, evaluate_truthy_collated};

/// `Some(position)` when the document matches.
pub type MatchResult = Option<Option<usize>>;

/// What a match sees besides the document: the statement's variables (for `$expr`) and its
/// collation (for comparisons of strings).
#[derive(Clone, Copy, Default)]
pub struct Env<'a> {
    pub variables: Option<&'a Variables>,
    pub collation: Option<&'a Collation>,
}

pub fn matches(expr: &MatchExpr, document: &Document, env: Env<'_>) -> Result<MatchResult> {
    Ok(match expr {
        MatchExpr::And(children) => {
            let mut position = None;
            for child in children {
                match matches(child, document, env)? {
                    None => return Ok(None),
                    Some(found) => position = position.or(found),
                }
            }
            Some(position)
        }
        MatchExpr::Or(children) => {
            for child in children {
                if let Some(found) = matches(child, document, env)? {
                    return Ok(Some(found));
                }
            }
            None
        }
        MatchExpr::Nor(children) => {
            for child in children {
                if matches(child, document, env)?.is_some() {
                    return Ok(None);
                }
            }
            Some(None)
        }
        MatchExpr::Path { path, predicate } => {
            let candidates = located_candidates(document, path.parts());
            holds(predicate, &candidates, env)?
        }
        MatchExpr::JsonSchema(schema) => schema.matches(document).then_some(None),
        MatchExpr::Expr(expression) => {
            let fresh;
            let variables = match env.variables {
                Some(variables) => variables,
                None => {
                    fresh = Variables::new();
                    &fresh
                }
            };
            let truthy = evaluate_truthy_collated(expression, document, variables, env.collation)?;
            truthy.then_some(None)
        }
        MatchExpr::AlwaysTrue => Some(None),
        MatchExpr::AlwaysFalse => None,
    })
}

/// Whether a path predicate holds over the path's candidates.
pub fn holds(predicate: &Predicate, candidates: &[Located<'_>], env: Env<'_>) -> Result<MatchResult> {
    let collation = env.collation;
    let first = |test: &dyn Fn(Candidate<'_>) -> bool| {
        candidates.iter().find(|located| test(located.candidate)).map(|located| located.position)
    };
    Ok(match predicate {
        Predicate::Eq(value) => first(&|candidate| equals(candidate, value, collation)),
        Predicate::Compare(comparison, value) => first(&|candidate| compare(candidate, *comparison, value, collation)),
        Predicate::In(items) => first(&|candidate| items.iter().any(|item| in_item(candidate, item, collation))),
        Predicate::Exists(true) => first(&|candidate| candidate != Candidate::Missing),
        Predicate::Exists(false) => match first(&|candidate| candidate != Candidate::Missing) {
            Some(_) => None,
            None => Some(None),
        },
        Predicate::Type(types) => first(&|candidate| candidate.value().is_some_and(|v| types.contains(v))),
        Predicate::Regex(regex) => first(&|candidate| match candidate.value() {
            Some(Bson::String(text) | Bson::Symbol(text)) => regex.is_match(text),
            Some(Bson::RegularExpression(value)) => regex.equals_value(value),
            _ => false,
        }),
        Predicate::Mod { divisor, remainder } => first(&|candidate| {
            let number = candidate.value().filter(|v| is_number(v)).and_then(truncated);
            number.is_some_and(|n| n.wrapping_rem(*divisor) == *remainder)
        }),
        Predicate::GeoWithin(shape) => {
            first(&|candidate| candidate.value().and_then(crate::geo::location).is_some_and(|at| shape.contains(&at)))
        }
        Predicate::GeoIntersects(geometry) => first(&|candidate| {
            candidate.value().and_then(crate::geo::location).is_some_and(|at| geometry.intersects(&at.geometry))
        }),
        Predicate::Near(near) => first(&|candidate| {
            candidate.value().and_then(crate::geo::location).is_some_and(|at| near.admits(near.distance(&at)))
        }),
        Predicate::Size(size) => {
            first(&|candidate| matches!(candidate, Candidate::Value(Bson::Array(array)) if array.len() as i64 == *size))
        }
        Predicate::All(items) => all(items, candidates, collation)?,
        Predicate::AllElemMatch(predicates) | Predicate::And(predicates) => {
            let mut position = None;
            for predicate in predicates {
                match holds(predicate, candidates, env)? {
                    None => return Ok(None),
                    Some(found) => position = position.or(found),
                }
            }
            Some(position)
        }
        Predicate::ElemMatchObject(expr) => elem_match(candidates, &|element| match element {
            Bson::Document(document) => Ok(matches(expr, document, env)?.is_some()),
            Bson::Array(array) => Ok(matches(expr, &array_as_document(array), env)?.is_some()),
            _ => Ok(false),
        })?,
        Predicate::ElemMatchValue(predicates) => elem_match(candidates, &|element| {
            let single = [Located { candidate: Candidate::Value(element), position: None }];
            for predicate in predicates {
                if holds(predicate, &single, env)?.is_none() {
                    return Ok(false);
                }
            }
            Ok(true)
        })?,
        Predicate::Not(inner) => match holds(inner, candidates, env)? {
            Some(_) => None,
            None => Some(None),
        },
    })
}

fn all(items: &[InItem], candidates: &[Located<'_>], collation: Option<&Collation>) -> Result<MatchResult> {
    if items.is_empty() {
        return Ok(None);
    }
    let mut position = None;
    for item in items {
        let found = candidates.iter().find(|located| in_item(located.candidate, item, collation));
        match found {
            None => return Ok(None),
            Some(located) => position = position.or(located.position),
        }
    }
    Ok(Some(position))
}

/// `$elemMatch`: some element of a whole array candidate passes `test`.
fn elem_match(candidates: &[Located<'_>], test: &dyn Fn(&Bson) -> Result<bool>) -> Result<MatchResult> {
    for located in candidates {
        if let Candidate::Value(Bson::Array(array)) = located.candidate {
            for (index, element) in array.iter().enumerate() {
                if test(element)? {
                    return Ok(Some(located.position.or(Some(index))));
                }
            }
        }
    }
    Ok(None)
}

/// An array seen as the document `{"0": …, "1": …}` (how `$elemMatch` reads nested arrays).
fn array_as_document(array: &[Bson]) -> Document {
    array.iter().enumerate().map(|(index, value)| (index.to_string(), value.clone())).collect()
}

fn is_number(value: &Bson) -> bool {
    matches!(value, Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_))
}

/// Equality of one candidate: missing equals null; otherwise MongoDB's value equality.
pub fn equals(candidate: Candidate<'_>, value: &Bson, collation: Option<&Collation>) -> bool {
    match candidate.value() {
        None => matches!(value, Bson::Null),
        Some(found) => compare_values(found, value, collation) == Ordering::Equal,
    }
}

fn in_item(candidate: Candidate<'_>, item: &InItem, collation: Option<&Collation>) -> bool {
    match item {
        InItem::Value(value) => equals(candidate, value, collation),
        InItem::Regex(regex) => match candidate.value() {
            Some(Bson::String(text) | Bson::Symbol(text)) => regex.is_match(text),
            Some(Bson::RegularExpression(value)) => regex.equals_value(value),
            _ => false,
        },
    }
}

/// `$gt`/`$gte`/`$lt`/`$lte` on one candidate, with type bracketing and NaN rules.
pub fn compare(candidate: Candidate<'_>, comparison: Comparison, value: &Bson, collation: Option<&Collation>) -> bool {
    let found = candidate.value().unwrap_or(&Bson::Null);
    let unbracketed = matches!(value, Bson::MinKey | Bson::MaxKey);
    if !unbracketed && canonical_type_rank(found) != canonical_type_rank(value) {
        return false;
    }
    if is_nan(found) || is_nan(value) {
        let both = is_nan(found) && is_nan(value);
        return both && matches!(comparison, Comparison::GreaterOrEqual | Comparison::LessOrEqual);
    }
    let order = compare_values(found, value, collation);
    match comparison {
        Comparison::Greater => order == Ordering::Greater,
        Comparison::GreaterOrEqual => order != Ordering::Less,
        Comparison::Less => order == Ordering::Less,
        Comparison::LessOrEqual => order != Ordering::Greater,
    }
}

fn is_nan(value: &Bson) -> bool {
    match value {
        Bson::Double(d) => d.is_nan(),
        Bson::Decimal128(d) => matches!(document::number::Numeric::from_decimal128(d), document::number::Numeric::NaN),
        _ => false,
    }
}
