//! Parsing the grouping stages `$group`, `$sortByCount` and `$count`, and a group's output
//! document. Running a group is [`super::groups`]; `$bucket`/`$bucketAuto` are
//! [`super::bucket`].

use bson::{Bson, Document};
use document::keycodec::Direction;
use vocabulary::location;

use super::Context;
use super::groups::GroupFold;
use crate::error::QueryError;
use crate::expr::accumulator::{Accumulator, AccumulatorKind};
use crate::expr::{Expr, fail};
use crate::sort::SortSpec;

/// One output field of `$group`: `name: {$acc: expr}`.
#[derive(Debug, Clone)]
pub struct AccumulatorSpec {
    pub name: String,
    pub kind: AccumulatorKind,
    pub expr: Expr,
}

#[derive(Debug, Clone)]
pub struct GroupSpec {
    pub id: Expr,
    pub accumulators: Vec<AccumulatorSpec>,
}

impl GroupSpec {
    pub fn parse(spec: &Bson) -> Result<GroupSpec, QueryError> {
        let Bson::Document(spec) = spec else {
            return Err(fail(location::FIELDS_NOT_OBJECT, "a group's fields must be specified in an object"));
        };
        let mut id = None;
        let mut accumulators = Vec::new();
        for (name, value) in spec {
            if name == "_id" {
                id = Some(Expr::parse(value)?);
                continue;
            }
            accumulators.push(parse_accumulator(name, value)?);
        }
        let id = id.ok_or_else(|| fail(location::GROUP_WITHOUT_ID, "a group specification must include an _id"))?;
        Ok(GroupSpec { id, accumulators })
    }

    /// The stage's state while its input streams past ([`GroupFold`]).
    pub(super) fn fold(&self, context: &Context<'_>) -> GroupFold {
        GroupFold::new(self.clone(), context)
    }

    /// Fresh accumulators for a new group.
    pub(super) fn fresh_accumulators(&self) -> Vec<Accumulator> {
        fresh_accumulators(&self.accumulators)
    }

    /// A finished group's output document.
    pub(super) fn output(&self, key: Bson, accumulators: Vec<Accumulator>) -> Document {
        output_document(key, &self.accumulators, accumulators)
    }
}

pub(super) fn fresh_accumulators(specs: &[AccumulatorSpec]) -> Vec<Accumulator> {
    specs.iter().map(|a| Accumulator::new(a.kind)).collect()
}

/// `{_id: id, <name>: <finished accumulator>, ...}`.
pub(super) fn output_document(id: Bson, specs: &[AccumulatorSpec], accumulators: Vec<Accumulator>) -> Document {
    let mut document = Document::new();
    document.insert("_id", id);
    for (spec, accumulator) in specs.iter().zip(accumulators) {
        document.insert(spec.name.clone(), accumulator.finish());
    }
    document
}

pub(crate) fn parse_accumulator(name: &str, value: &Bson) -> Result<AccumulatorSpec, QueryError> {
    if name.starts_with('$') {
        return Err(fail(
            location::GROUP_FIELD_IS_OPERATOR,
            format!("The field name '{name}' cannot be an operator name"),
        ));
    }
    if name.contains('.') {
        return Err(fail(location::GROUP_FIELD_HAS_DOT, format!("The field name '{name}' cannot contain '.'")));
    }
    let Bson::Document(acc) = value else {
        return Err(fail(
            location::GROUP_FIELD_NOT_ACCUMULATOR_OBJECT,
            format!("The field '{name}' must be an accumulator object"),
        ));
    };
    if acc.len() != 1 {
        return Err(fail(
            location::GROUP_FIELD_NOT_ONE_ACCUMULATOR,
            format!("The field '{name}' must specify one accumulator"),
        ));
    }
    let Some((operator, argument)) = acc.iter().next() else {
        return Err(fail(
            location::GROUP_FIELD_NOT_ONE_ACCUMULATOR,
            format!("The field '{name}' must specify one accumulator"),
        ));
    };
    if operator == "$count" {
        if !matches!(argument, Bson::Document(d) if d.is_empty()) {
            return Err(fail(crate::error::ErrorCode::FailedToParse, "$count takes no arguments, i.e. $count:{}"));
        }
        return Ok(AccumulatorSpec {
            name: name.to_string(),
            kind: AccumulatorKind::Sum,
            expr: Expr::Literal(Bson::Int32(1)),
        });
    }
    let kind = AccumulatorKind::from_name(operator).ok_or_else(|| match operator.as_str() {
        "$accumulator" => fail(
            location::UNKNOWN_GROUP_OPERATOR,
            "$accumulator is not supported: Strata runs no server-side JavaScript",
        ),
        _ => fail(location::UNKNOWN_GROUP_OPERATOR, format!("unknown group operator '{operator}'")),
    })?;
    if matches!(kind, AccumulatorKind::Percentile | AccumulatorKind::Median) {
        let spec = crate::expr::quantile::QuantileSpec::parse(operator, argument)?;
        return Ok(AccumulatorSpec { name: name.to_string(), kind, expr: spec.accumulator_argument() });
    }
    if kind.is_ranked() {
        return Ok(AccumulatorSpec { name: name.to_string(), kind, expr: ranked_argument(operator, kind, argument)? });
    }
    if let Bson::Array(_) = argument {
        return Err(fail(location::ACCUMULATOR_NOT_UNARY, format!("The {operator} accumulator is a unary operator")));
    }
    Ok(AccumulatorSpec { name: name.to_string(), kind, expr: Expr::parse(argument)? })
}

/// An n-element accumulator's fields as one expression, evaluated for each document
/// (`expr::ranked`): `{n, v: input}` for `$firstN $lastN $maxN $minN`, `{n, v: output, k:
/// [the sortBy fields' values], d: [their directions]}` for `$top $bottom $topN $bottomN` (no
/// `n` for `$top`/`$bottom`).
fn ranked_argument(operator: &str, kind: AccumulatorKind, argument: &Bson) -> Result<Expr, QueryError> {
    use AccumulatorKind::{Bottom, BottomN, Top, TopN};
    let sorted = matches!(kind, Top | Bottom | TopN | BottomN);
    let takes_n = !matches!(kind, Top | Bottom);
    let value_field = if sorted { "output" } else { "input" };
    let (not_object, unknown) = if sorted {
        (location::SORTED_N_ACCUMULATOR_NOT_OBJECT, location::SORTED_N_ACCUMULATOR_UNKNOWN_FIELD)
    } else {
        (location::N_ACCUMULATOR_NOT_OBJECT, location::N_ACCUMULATOR_UNKNOWN_FIELD)
    };
    let Bson::Document(spec) = argument else {
        return Err(fail(not_object, format!("specification must be an object; found {operator}: {argument}")));
    };
    for key in spec.keys() {
        let known = key == value_field || (key == "n" && takes_n) || (key == "sortBy" && sorted);
        if !known {
            return Err(fail(unknown, format!("Unknown argument for '{operator}' operator: {key}")));
        }
    }
    let get = |field: &str, code: i32| {
        spec.get(field).ok_or_else(|| fail(code, format!("Missing value for '{field}' in {operator}")))
    };
    let mut fields = Vec::new();
    if takes_n {
        fields.push(("n".to_string(), Expr::parse(get("n", location::N_ACCUMULATOR_WITHOUT_N)?)?));
    }
    fields.push((
        "v".to_string(),
        Expr::parse(get(
            value_field,
            if sorted { location::SORTED_N_ACCUMULATOR_WITHOUT_OUTPUT } else { location::N_ACCUMULATOR_WITHOUT_INPUT },
        )?)?,
    ));
    if sorted {
        let Bson::Document(sort_by) = get("sortBy", location::SORTED_N_ACCUMULATOR_SORT_BY_NOT_OBJECT)? else {
            return Err(fail(
                location::SORTED_N_ACCUMULATOR_SORT_BY_NOT_OBJECT,
                format!("sortBy of {operator} must be an object"),
            ));
        };
        let mut keys = Vec::new();
        let mut directions = Vec::new();
        for (path, direction) in SortSpec::parse(sort_by)?.fields() {
            keys.push(Expr::parse(&Bson::String(format!("${path}")))?);
            directions.push(Bson::Int32(if *direction == Direction::Descending { -1 } else { 1 }));
        }
        fields.push(("k".to_string(), Expr::Array(keys)));
        fields.push(("d".to_string(), Expr::Literal(Bson::Array(directions))));
    }
    Ok(Expr::Object(fields))
}

/// `$count: "name"`: the output field name.
pub fn parse_count(spec: &Bson) -> Result<String, QueryError> {
    let Bson::String(name) = spec else {
        return Err(fail(location::COUNT_FIELD_NOT_STRING, "the count field must be a non-empty string"));
    };
    if name.is_empty() {
        return Err(fail(location::COUNT_FIELD_EMPTY, "the count field must be a non-empty string"));
    }
    if name.starts_with('$') {
        return Err(fail(location::COUNT_FIELD_HAS_DOLLAR, "the count field cannot be a $-prefixed path"));
    }
    if name.contains('.') {
        return Err(fail(location::COUNT_FIELD_HAS_DOT, "the count field cannot contain '.'"));
    }
    Ok(name.clone())
}

/// `$sortByCount: <expr>` = `$group {_id: expr, count: {$sum: 1}}` + `$sort {count: -1}`.
pub fn parse_sort_by_count(spec: &Bson) -> Result<(GroupSpec, SortSpec), QueryError> {
    let valid = match spec {
        Bson::String(s) => s.starts_with('$'),
        Bson::Document(d) => d.len() == 1 && d.keys().next().is_some_and(|k| k.starts_with('$')),
        _ => false,
    };
    if !valid {
        return Err(fail(
            location::SORT_BY_COUNT_NOT_PATH_OR_EXPRESSION,
            "the sortBy field must be defined as a $-prefixed path or an expression inside an object",
        ));
    }
    let count =
        AccumulatorSpec { name: "count".into(), kind: AccumulatorKind::Sum, expr: Expr::Literal(Bson::Int32(1)) };
    let group = GroupSpec { id: Expr::parse(spec)?, accumulators: vec![count] };
    Ok((group, SortSpec::single("count", Direction::Descending)?))
}
