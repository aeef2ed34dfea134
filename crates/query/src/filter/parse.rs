//! Filter documents to [`MatchExpr`] trees, with MongoDB's validation and error messages.
//!
//! A field's value is an operator document when its first key starts with `$` (except DBRef
//! documents, `{$ref, $id}`), otherwise a literal to compare for equality; a regex value is a
//! `$regex` match.

use bson::{Bson, Document};
use document::path::FieldPath;

use super::bson_type::BsonTypeSet;
use super::json_schema::Schema;
use super::regex::FilterRegex;
use super::{Comparison, InItem, MatchExpr, Predicate};
use crate::error::{QueryError, Result};

/// Where a filter document sits: `$expr` is only valid on the top-level document (and under
/// `$and`/`$or`/`$nor` there), not inside `$elemMatch` or `$pull`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    TopLevel,
    Nested,
}

/// Parses a whole top-level filter document (an implicit `$and` of its fields).
pub fn parse_document(filter: &Document) -> Result<MatchExpr> {
    parse_document_at(filter, Level::TopLevel)
}

fn parse_document_at(filter: &Document, level: Level) -> Result<MatchExpr> {
    let mut children = Vec::with_capacity(filter.len());
    for (key, value) in filter {
        if let Some(operator) = key.strip_prefix('$') {
            if let Some(child) = parse_top_level(operator, value, level)? {
                children.push(child);
            }
        } else {
            let path = FieldPath::parse(key)?;
            children.push(MatchExpr::Path { path, predicate: parse_field_value(value)? });
        }
    }
    Ok(if children.len() == 1 { children.remove(0) } else { MatchExpr::And(children) })
}

fn parse_top_level(operator: &str, value: &Bson, level: Level) -> Result<Option<MatchExpr>> {
    Ok(Some(match operator {
        "and" => MatchExpr::And(parse_clauses(operator, value, level)?),
        "or" => MatchExpr::Or(parse_clauses(operator, value, level)?),
        "nor" => MatchExpr::Nor(parse_clauses(operator, value, level)?),
        "expr" if level == Level::TopLevel => MatchExpr::Expr(Box::new(crate::expr::Expr::parse(value)?)),
        "expr" => return Err(QueryError::bad_value("$expr can only be applied to the top-level document")),
        "sampleRate" if level == Level::TopLevel => sample_rate(value)?,
        "comment" => return Ok(None),
        "alwaysTrue" => MatchExpr::AlwaysTrue,
        "alwaysFalse" => MatchExpr::AlwaysFalse,
        "jsonSchema" => match value {
            Bson::Document(schema) => MatchExpr::JsonSchema(Box::new(Schema::parse(schema)?)),
            _ => return Err(QueryError::failed_to_parse("$jsonSchema must be an object")),
        },
        "where" => return Err(QueryError::bad_value(crate::error::NO_JAVASCRIPT_WHERE)),
        "text" => {
            return Err(QueryError::bad_value(
                "$text is allowed only at the top level of a filter or in its top-level $and",
            ));
        }
        "near" | "geoWithin" => {
            return Err(QueryError::bad_value(format!(
                "${operator} is an operator of a field: {{field: {{${operator}: ...}}}}"
            )));
        }
        _ => {
            return Err(QueryError::bad_value(format!(
                "unknown top level operator: ${operator}. If you have a field name that starts with a '$' symbol, consider using $getField or $setField."
            )));
        }
    }))
}

/// `{$sampleRate: r}`: each document matches with probability `r`, as MongoDB writes it:
/// `{$expr: {$lt: [{$rand: {}}, r]}}`.
fn sample_rate(value: &Bson) -> Result<MatchExpr> {
    let rate = crate::number::Num::from_bson(value)
        .ok_or_else(|| QueryError::bad_value("argument to $sampleRate must be a numeric type"))?
        .to_f64();
    if !(0.0..=1.0).contains(&rate) {
        return Err(QueryError::bad_value("numeric argument to $sampleRate must be in [0, 1]"));
    }
    let expr = bson::doc! {"$lt": [{"$rand": {}}, rate]};
    Ok(MatchExpr::Expr(Box::new(crate::expr::Expr::parse(&Bson::Document(expr))?)))
}

fn parse_clauses(operator: &str, value: &Bson, level: Level) -> Result<Vec<MatchExpr>> {
    let Bson::Array(items) = value else {
        return Err(QueryError::bad_value(format!("${operator} must be an array")));
    };
    if items.is_empty() {
        return Err(QueryError::bad_value("$and/$or/$nor must be a nonempty array"));
    }
    items
        .iter()
        .map(|item| match item {
            Bson::Document(clause) => parse_document_at(clause, level),
            _ => Err(QueryError::bad_value("$or/$and/$nor entries need to be full objects")),
        })
        .collect()
}

/// The value of a field in a filter: operators, a regex, or a literal to equal.
pub fn parse_field_value(value: &Bson) -> Result<Predicate> {
    match value {
        Bson::Document(operators) if is_operator_document(operators) => parse_operators(operators),
        Bson::RegularExpression(regex) => {
            Ok(Predicate::Regex(FilterRegex::new(regex.pattern.as_str(), regex.options.as_str())?))
        }
        literal => Ok(Predicate::Eq(literal.clone())),
    }
}

fn is_operator_document(document: &Document) -> bool {
    match document.keys().next() {
        Some(first) => first.starts_with('$') && !matches!(first.as_str(), "$ref" | "$id" | "$db"),
        None => false,
    }
}

/// `{$gt: 1, $lt: 5}`: all must hold. `$regex` and `$options` combine into one predicate.
pub fn parse_operators(operators: &Document) -> Result<Predicate> {
    if let Some(name) = ["$near", "$nearSphere"].into_iter().find(|name| operators.contains_key(*name)) {
        if let Some(other) = operators
            .keys()
            .find(|key| !matches!(key.as_str(), "$near" | "$nearSphere" | "$minDistance" | "$maxDistance"))
        {
            return Err(QueryError::bad_value(format!("{name} cannot be combined with {other} on one field")));
        }
        return Ok(Predicate::Near(Box::new(crate::geo::Near::parse(name, operators)?)));
    }
    let mut predicates = Vec::with_capacity(operators.len());
    for (name, operand) in operators {
        match name.as_str() {
            "$options" => {
                if !operators.contains_key("$regex") {
                    return Err(QueryError::bad_value("$options needs a $regex"));
                }
            }
            "$regex" => predicates.push(parse_regex(operand, operators.get("$options"))?),
            _ => predicates.push(parse_operator(name, operand)?),
        }
    }
    Ok(if predicates.len() == 1 { predicates.remove(0) } else { Predicate::And(predicates) })
}

fn parse_operator(name: &str, operand: &Bson) -> Result<Predicate> {
    Ok(match name {
        "$eq" => Predicate::Eq(operand.clone()),
        "$ne" => {
            if matches!(operand, Bson::RegularExpression(_)) {
                return Err(QueryError::bad_value("Can't have regex as arg to $ne."));
            }
            Predicate::Not(Box::new(Predicate::Eq(operand.clone())))
        }
        "$gt" => Predicate::Compare(Comparison::Greater, operand.clone()),
        "$gte" => Predicate::Compare(Comparison::GreaterOrEqual, operand.clone()),
        "$lt" => Predicate::Compare(Comparison::Less, operand.clone()),
        "$lte" => Predicate::Compare(Comparison::LessOrEqual, operand.clone()),
        "$in" => Predicate::In(parse_list("$in", operand)?),
        "$nin" => Predicate::Not(Box::new(Predicate::In(parse_list("$nin", operand)?))),
        "$all" => parse_all(operand)?,
        "$exists" => Predicate::Exists(crate::truthy(operand)),
        "$type" => Predicate::Type(BsonTypeSet::parse(operand)?),
        "$mod" => parse_mod(operand)?,
        "$size" => Predicate::Size(parse_size(operand)?),
        "$elemMatch" => parse_elem_match(operand)?,
        "$not" => parse_not(operand)?,
        "$geoWithin" | "$within" => Predicate::GeoWithin(Box::new(crate::geo::Shape::parse(operand)?)),
        "$geoIntersects" => Predicate::GeoIntersects(Box::new(crate::geo::parse_intersects(operand)?)),
        "$minDistance" | "$maxDistance" => {
            return Err(QueryError::bad_value(format!("{name} needs $near or $nearSphere beside it")));
        }
        _ => return Err(QueryError::bad_value(format!("unknown operator: {name}"))),
    })
}

fn parse_regex(operand: &Bson, options: Option<&Bson>) -> Result<Predicate> {
    let extra_options = match options {
        None => "",
        Some(Bson::String(options)) => options.as_str(),
        Some(_) => return Err(QueryError::bad_value("$options has to be a string")),
    };
    let regex = match operand {
        Bson::String(pattern) => FilterRegex::new(pattern, extra_options)?,
        Bson::RegularExpression(regex) => {
            if !extra_options.is_empty() && !regex.options.as_str().is_empty() {
                return Err(QueryError::bad_value("options set in both $regex and $options"));
            }
            let options = format!("{}{}", regex.options.as_str(), extra_options);
            FilterRegex::new(regex.pattern.as_str(), &options)?
        }
        _ => return Err(QueryError::bad_value("$regex has to be a string")),
    };
    Ok(Predicate::Regex(regex))
}

fn parse_list(name: &str, operand: &Bson) -> Result<Vec<InItem>> {
    let Bson::Array(items) = operand else {
        return Err(QueryError::bad_value(format!("{name} needs an array")));
    };
    items
        .iter()
        .map(|item| match item {
            Bson::RegularExpression(regex) => {
                Ok(InItem::Regex(FilterRegex::new(regex.pattern.as_str(), regex.options.as_str())?))
            }
            Bson::Document(document) if is_operator_document(document) => {
                Err(QueryError::bad_value(format!("cannot nest $ under {name}")))
            }
            value => Ok(InItem::Value(value.clone())),
        })
        .collect()
}

fn parse_all(operand: &Bson) -> Result<Predicate> {
    let Bson::Array(items) = operand else {
        return Err(QueryError::bad_value("$all needs an array"));
    };
    let elem_match =
        |item: &Bson| matches!(item, Bson::Document(d) if d.keys().next().is_some_and(|k| k == "$elemMatch"));
    if items.first().is_some_and(elem_match) {
        let mut clauses = Vec::with_capacity(items.len());
        for item in items {
            match item {
                Bson::Document(document) if elem_match(item) => match parse_operators(document)? {
                    predicate @ (Predicate::ElemMatchObject(_) | Predicate::ElemMatchValue(_)) => {
                        clauses.push(predicate);
                    }
                    _ => return Err(QueryError::bad_value("$all/$elemMatch has to be consistent")),
                },
                _ => return Err(QueryError::bad_value("$all/$elemMatch has to be consistent")),
            }
        }
        return Ok(Predicate::AllElemMatch(clauses));
    }
    Ok(Predicate::All(parse_list("$all", operand)?))
}

fn parse_mod(operand: &Bson) -> Result<Predicate> {
    let Bson::Array(items) = operand else {
        return Err(QueryError::bad_value("malformed mod, needs to be an array"));
    };
    if items.len() < 2 {
        return Err(QueryError::bad_value("malformed mod, not enough elements"));
    }
    if items.len() > 2 {
        return Err(QueryError::bad_value("malformed mod, too many elements"));
    }
    let divisor = truncated(&items[0]).ok_or_else(|| QueryError::bad_value("malformed mod, divisor not a number"))?;
    let remainder =
        truncated(&items[1]).ok_or_else(|| QueryError::bad_value("malformed mod, remainder not a number"))?;
    if divisor == 0 {
        return Err(QueryError::bad_value("divisor cannot be 0"));
    }
    Ok(Predicate::Mod { divisor, remainder })
}

/// A number truncated toward zero to an int64 (as `$mod` does); `None` for NaN, ±inf, others.
pub fn truncated(value: &Bson) -> Option<i64> {
    match value {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        Bson::Double(d) if d.is_finite() => Some(d.trunc() as i64),
        Bson::Decimal128(d) => d.to_string().parse::<f64>().ok().filter(|f| f.is_finite()).map(|f| f.trunc() as i64),
        _ => None,
    }
}

fn parse_size(operand: &Bson) -> Result<i64> {
    let size = match operand {
        Bson::Int32(i) => i64::from(*i),
        Bson::Int64(i) => *i,
        Bson::Double(d) if d.fract() == 0.0 && d.is_finite() => *d as i64,
        Bson::Decimal128(_) => {
            truncated(operand).ok_or_else(|| QueryError::bad_value("$size must be a whole number"))?
        }
        Bson::Double(_) => return Err(QueryError::bad_value("$size must be a whole number")),
        _ => return Err(QueryError::bad_value("$size needs a number")),
    };
    if size < 0 {
        return Err(QueryError::bad_value("$size may not be negative"));
    }
    Ok(size)
}

fn parse_elem_match(operand: &Bson) -> Result<Predicate> {
    let Bson::Document(inner) = operand else {
        return Err(QueryError::bad_value("$elemMatch needs an Object"));
    };
    let value_form = inner.keys().next().is_some_and(|first| {
        first.starts_with('$')
            && !matches!(
                first.as_str(),
                "$and"
                    | "$or"
                    | "$nor"
                    | "$expr"
                    | "$where"
                    | "$jsonSchema"
                    | "$alwaysTrue"
                    | "$alwaysFalse"
                    | "$comment"
            )
    });
    if value_form {
        return Ok(match parse_operators(inner)? {
            Predicate::And(predicates) => Predicate::ElemMatchValue(predicates),
            single => Predicate::ElemMatchValue(vec![single]),
        });
    }
    Ok(Predicate::ElemMatchObject(Box::new(parse_document_at(inner, Level::Nested)?)))
}

fn parse_not(operand: &Bson) -> Result<Predicate> {
    match operand {
        Bson::RegularExpression(regex) => Ok(Predicate::Not(Box::new(Predicate::Regex(FilterRegex::new(
            regex.pattern.as_str(),
            regex.options.as_str(),
        )?)))),
        Bson::Document(inner) if inner.is_empty() => Err(QueryError::bad_value("$not cannot be empty")),
        Bson::Document(inner) => {
            if !is_operator_document(inner) {
                return Err(QueryError::bad_value("$not needs a regex or a document"));
            }
            Ok(Predicate::Not(Box::new(parse_operators(inner)?)))
        }
        _ => Err(QueryError::bad_value("$not needs a regex or a document")),
    }
}
