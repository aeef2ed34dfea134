//! `$densify`: adds documents so that a numeric or date field has a value at every step of a
//! range, within each partition.
//!
//! `{$densify: {field, partitionByFields?: [...], range: {step, unit?, bounds}}}`. The input is
//! sorted by the partition fields and then `field` (`$sort`'s fold), and held whole. In each
//! partition the grid is anchored at the range's lower end: `lower`, `lower + step`, ... up to
//! but excluding the upper end, where `bounds` is `[lower, upper]`, `"partition"` (the
//! partition's own least and greatest values) or `"full"` (the least and greatest over every
//! partition, that greatest value included). A grid value no document holds becomes a new
//! document with only the partition fields and `field`; documents off the grid and outside
//! the bounds pass unchanged, as do those whose `field` is null or missing. Dates step by `unit` as `$dateAdd` adds it.
//!
//! Known difference: with `"full"` MongoDB sorts by `field` alone and interleaves partitions;
//! here the output comes partition by partition, each in `field` order.

use bson::{Bson, Document};
use vocabulary::location;

use super::{Context, DocumentStream, folded, set_path};
use crate::collation::{Collation, compare_values};
use crate::error::{ErrorCode, QueryError, idl};
use crate::expr::{TimeUnit, bson_type_name, document_path, fail, parse_field_path};
use crate::number::{ArithOp, Num, arith};
use crate::sort::SortSpec;

/// MongoDB's `internalQueryMaxAllowedDensifyDocs`.
const MAX_GENERATED: usize = 500_000;

#[derive(Debug, Clone)]
pub struct DensifySpec {
    path: Vec<String>,
    /// The paths of `partitionByFields`.
    partitions: Vec<Vec<String>>,
    step: Num,
    unit: Option<TimeUnit>,
    bounds: RangeBounds,
    /// The partition fields, then `field`, ascending.
    sort: SortSpec,
}

#[derive(Debug, Clone)]
enum RangeBounds {
    Full,
    Partition,
    Explicit(Box<(Bson, Bson)>),
}

impl DensifySpec {
    pub fn parse(spec: &Bson) -> Result<DensifySpec, QueryError> {
        let Bson::Document(spec) = spec else {
            return Err(fail(
                ErrorCode::FailedToParse,
                format!("The $densify stage specification must be an object, found {}", bson_type_name(spec)),
            ));
        };
        let (mut field, mut partitions, mut range) = (None, Vec::new(), None);
        let mut order = Document::new();
        for (key, value) in spec {
            match (key.as_str(), value) {
                ("field", Bson::String(name)) => field = Some(name.clone()),
                ("partitionByFields", Bson::Array(names)) => {
                    for name in names {
                        let Bson::String(name) = name else {
                            return Err(wrong_type("partitionByFields", name, "string"));
                        };
                        partitions.push(parse_field_path(name)?);
                        order.insert(name.clone(), 1);
                    }
                }
                ("range", Bson::Document(r)) => range = Some(r),
                ("field", other) => return Err(wrong_type("field", other, "string")),
                ("partitionByFields", other) => return Err(wrong_type("partitionByFields", other, "array")),
                ("range", other) => return Err(wrong_type("range", other, "object")),
                (other, _) => return Err(idl::unknown_field(&format!("$densify.{other}"))),
            }
        }
        let field = field.ok_or_else(|| missing("field"))?;
        let path = parse_field_path(&field)?;
        let (step, unit, bounds) = parse_range(range.ok_or_else(|| missing("range"))?)?;
        if matches!(bounds, RangeBounds::Partition) && partitions.is_empty() {
            return Err(fail(
                location::DENSIFY_PARTITION_BOUNDS_WITHOUT_FIELDS,
                "One cannot specify the bounds as 'partition' without specifying a non-empty array of partitionByFields. You may have meant to specify 'full' bounds.",
            ));
        }
        order.insert(field, 1);
        let sort = SortSpec::parse_stage(&Bson::Document(order))?;
        Ok(DensifySpec { path, partitions, step, unit, bounds, sort })
    }

    pub(super) fn stream<'a>(&self, input: DocumentStream<'a>, context: &Context<'a>) -> DocumentStream<'a> {
        let sorted = folded(input, Box::new(super::sort::fold(&self.sort, context)));
        let spec = self.clone();
        let collation = context.collation.clone();
        let mut pending = Some(sorted);
        let mut output: Option<std::vec::IntoIter<Document>> = None;
        Box::new(std::iter::from_fn(move || {
            if let Some(sorted) = pending.take() {
                match sorted
                    .collect::<Result<Vec<_>, _>>()
                    .and_then(|documents| spec.densify(documents, collation.as_ref()))
                {
                    Ok(documents) => output = Some(documents.into_iter()),
                    Err(e) => return Some(Err(e)),
                }
            }
            output.as_mut()?.next().map(Ok)
        }))
    }

    /// The sorted input with the missing grid values added. Partitions are told apart as the
    /// sort ordered them: under the collation, missing equal to null.
    fn densify(&self, documents: Vec<Document>, collation: Option<&Collation>) -> Result<Vec<Document>, QueryError> {
        let mut out = Vec::with_capacity(documents.len());
        let mut generated = 0usize;
        if documents.is_empty() {
            if let RangeBounds::Explicit(range) = &self.bounds {
                self.fill(range.0.clone(), &range.1, false, &Document::new(), &mut out, &mut generated)?;
            }
            return Ok(out);
        }
        let full = match self.bounds {
            RangeBounds::Full => self.extremes(&documents)?,
            _ => None,
        };
        let mut start = 0;
        while start < documents.len() {
            let key = self.partition_key(&documents[start]);
            let end = start
                + documents[start..]
                    .iter()
                    .position(|d| !same_key(&self.partition_key(d), &key, collation))
                    .unwrap_or(documents.len() - start);
            let partition = &documents[start..end];
            let bounds = match (&self.bounds, &full) {
                (RangeBounds::Explicit(range), _) => Some((range.0.clone(), range.1.clone())),
                (RangeBounds::Full, extremes) => extremes.clone(),
                (RangeBounds::Partition, _) => self.extremes(partition)?,
            };
            let include = self.partition_fields(&partition[0]);
            let mut next = bounds.as_ref().map(|(lower, _)| lower.clone());
            for document in partition {
                let Some(value) = self.value(document)? else {
                    out.push(document.clone());
                    continue;
                };
                if let (Some(grid), Some((_, upper))) = (&mut next, &bounds) {
                    *grid =
                        self.fill(grid.clone(), &min_of(&value, upper), false, &include, &mut out, &mut generated)?;
                    if compare_values(grid, &value, None).is_eq() {
                        *grid = self.increment(grid)?;
                    }
                }
                out.push(document.clone());
            }
            // "full" reaches the greatest value in every partition, as MongoDB's does.
            let inclusive = matches!(self.bounds, RangeBounds::Full);
            if let (Some(grid), Some((_, upper))) = (next, &bounds) {
                self.fill(grid, upper, inclusive, &include, &mut out, &mut generated)?;
            }
            start = end;
        }
        Ok(out)
    }

    /// Generates documents at `next`, `next + step`, ... while below `upper` (or at it,
    /// `inclusive`); returns the first grid value not generated.
    fn fill(
        &self,
        mut next: Bson,
        upper: &Bson,
        inclusive: bool,
        include: &Document,
        out: &mut Vec<Document>,
        generated: &mut usize,
    ) -> Result<Bson, QueryError> {
        while compare_values(&next, upper, None).is_lt() || (inclusive && compare_values(&next, upper, None).is_eq()) {
            *generated += 1;
            if *generated > MAX_GENERATED {
                return Err(fail(
                    location::DENSIFY_TOO_MANY_DOCUMENTS,
                    format!(
                        "Generated {} documents in $densify, which is over the limit of {MAX_GENERATED}. Increase the 'internalQueryMaxAllowedDensifyDocs' parameter to allow more generated documents",
                        *generated
                    ),
                ));
            }
            let mut document = include.clone();
            set_path(&mut document, &self.path, next.clone());
            out.push(document);
            next = self.increment(&next)?;
        }
        Ok(next)
    }

    fn increment(&self, value: &Bson) -> Result<Bson, QueryError> {
        match (value, self.unit) {
            (Bson::DateTime(date), Some(unit)) => {
                let step = self.step.to_exact_i64().unwrap_or(1);
                let moved = unit
                    .add_to(date.timestamp_millis(), step)
                    .ok_or_else(|| fail(location::DATE_ADD_OVERFLOW, "$densify overflowed a date"))?;
                Ok(Bson::DateTime(bson::DateTime::from_millis(moved)))
            }
            _ => Ok(arith(ArithOp::Add, &Num::from_bson(value).unwrap_or(Num::Int(0)), &self.step).to_bson()),
        }
    }

    /// The document's `field`: `None` when null or missing; a number, or a date with a unit.
    fn value(&self, document: &Document) -> Result<Option<Bson>, QueryError> {
        match document_path(document, &self.path) {
            None | Some(Bson::Null) | Some(Bson::Undefined) => Ok(None),
            Some(Bson::DateTime(date)) if self.unit.is_some() => Ok(Some(Bson::DateTime(date))),
            Some(Bson::DateTime(_)) => Err(fail(
                location::DENSIFY_DATE_VALUE_WITHOUT_UNIT,
                "Encountered date densify value in collection when step does not have a date unit.",
            )),
            Some(number) if Num::from_bson(&number).is_some() => match self.unit {
                Some(_) => Err(fail(
                    location::DENSIFY_NUMERIC_VALUE_WITH_UNIT,
                    "Encountered numeric densify value in collection when step has a date unit.",
                )),
                None => Ok(Some(number)),
            },
            Some(_) => {
                Err(fail(location::DENSIFY_FIELD_NOT_NUMBER_OR_DATE, "Densify field type must be numeric or a date"))
            }
        }
    }

    /// The least and greatest values of `field` among `documents` (sorted), if any.
    fn extremes(&self, documents: &[Document]) -> Result<Option<(Bson, Bson)>, QueryError> {
        let mut extremes: Option<(Bson, Bson)> = None;
        for document in documents {
            if let Some(value) = self.value(document)? {
                extremes = Some(match extremes {
                    None => (value.clone(), value),
                    Some((low, high)) => {
                        let low = if compare_values(&value, &low, None).is_lt() { value.clone() } else { low };
                        let high = if compare_values(&value, &high, None).is_gt() { value } else { high };
                        (low, high)
                    }
                });
            }
        }
        Ok(extremes)
    }

    /// The partition fields' values, missing as null (as the sort orders them).
    fn partition_key(&self, document: &Document) -> Vec<Bson> {
        self.partitions.iter().map(|path| document_path(document, path).unwrap_or(Bson::Null)).collect()
    }

    /// The partition's fields as a generated document starts: the values present in `document`.
    fn partition_fields(&self, document: &Document) -> Document {
        let mut fields = Document::new();
        for path in &self.partitions {
            if let Some(value) = document_path(document, path) {
                set_path(&mut fields, path, value);
            }
        }
        fields
    }
}

fn same_key(a: &[Bson], b: &[Bson], collation: Option<&Collation>) -> bool {
    a.iter().zip(b).all(|(a, b)| compare_values(a, b, collation).is_eq())
}

fn min_of(a: &Bson, b: &Bson) -> Bson {
    if compare_values(a, b, None).is_lt() { a.clone() } else { b.clone() }
}

fn parse_range(range: &Document) -> Result<(Num, Option<TimeUnit>, RangeBounds), QueryError> {
    let (mut step, mut unit, mut bounds) = (None, None, None);
    for (key, value) in range {
        match key.as_str() {
            "step" => step = Some(value),
            "unit" => match value {
                Bson::String(_) => unit = Some(TimeUnit::parse(&Some(value.clone()), "$densify")?),
                other => return Err(wrong_type("range.unit", other, "string")),
            },
            "bounds" => bounds = Some(value),
            other => return Err(idl::unknown_field(&format!("$densify.range.{other}"))),
        }
    }
    let step = step.ok_or_else(|| missing("range.step"))?;
    let bounds = bounds.ok_or_else(|| missing("range.bounds"))?;
    let step_number = Num::from_bson(step).filter(|n| n.to_f64() > 0.0).ok_or_else(|| {
        fail(
            location::DENSIFY_STEP_NOT_POSITIVE,
            "The step parameter in a range statement must be a strictly positive numeric value",
        )
    })?;
    if unit.is_some() && step_number.to_exact_i64().is_none() {
        return Err(fail(
            location::DENSIFY_DATE_STEP_NOT_WHOLE,
            "The step parameter in a range statement must be a whole number when densifying a date range",
        ));
    }
    let bounds = match bounds {
        Bson::String(s) if s == "full" => RangeBounds::Full,
        Bson::String(s) if s == "partition" => RangeBounds::Partition,
        Bson::String(_) => {
            return Err(fail(
                location::DENSIFY_BOUNDS_STRING_INVALID,
                "Bounds string must either be 'full' or 'partition'",
            ));
        }
        Bson::Array(items) => explicit_bounds(items, step, unit)?,
        _ => {
            return Err(fail(
                location::DENSIFY_BOUNDS_INVALID,
                "The bounds in a range statement must be the string 'full', 'partition', or an ascending array of two numbers or two dates",
            ));
        }
    };
    Ok((step_number, unit, bounds))
}

fn explicit_bounds(items: &[Bson], step: &Bson, unit: Option<TimeUnit>) -> Result<RangeBounds, QueryError> {
    let [lower, upper] = items else {
        return Err(fail(
            location::DENSIFY_BOUNDS_NOT_TWO_ELEMENTS,
            "A bounding array in a range statement must have exactly two elements",
        ));
    };
    if compare_values(lower, upper, None).is_gt() {
        return Err(fail(
            location::DENSIFY_BOUNDS_NOT_ASCENDING,
            "A bounding array must be an ascending array of either two dates or two numbers",
        ));
    }
    match (lower, upper) {
        (Bson::DateTime(_), Bson::DateTime(_)) if unit.is_none() => {
            Err(fail(location::DENSIFY_DATE_BOUNDS_WITHOUT_UNIT, "A bounding array of dates must specify a unit"))
        }
        (Bson::DateTime(_), Bson::DateTime(_)) => Ok(RangeBounds::Explicit(Box::new((lower.clone(), upper.clone())))),
        (Bson::DateTime(_), _) => Err(fail(
            location::DENSIFY_DATE_BOUND_WITH_NUMBER,
            "A bounding array must contain either both dates or both numeric types",
        )),
        (lower, upper) if Num::from_bson(lower).is_some() => {
            if unit.is_some() {
                return Err(fail(
                    location::DENSIFY_NUMERIC_BOUNDS_WITH_UNIT,
                    "Numeric bounds may not have unit parameter",
                ));
            }
            if Num::from_bson(upper).is_none() {
                return Err(fail(
                    location::DENSIFY_NUMBER_BOUND_WITH_DATE,
                    "A bounding array must contain either both dates or both numeric types",
                ));
            }
            let same = std::mem::discriminant(lower) == std::mem::discriminant(upper)
                && std::mem::discriminant(lower) == std::mem::discriminant(step);
            if !same {
                return Err(fail(
                    location::DENSIFY_BOUNDS_AND_STEP_TYPES_DIFFER,
                    "Upper bound, lower bound, and step must all have the same type",
                ));
            }
            Ok(RangeBounds::Explicit(Box::new((lower.clone(), upper.clone()))))
        }
        _ => {
            Err(fail(location::DENSIFY_EXPLICIT_BOUNDS_NOT_NUMBER_OR_DATE, "Explicit bounds must be numeric or dates"))
        }
    }
}

fn missing(field: &str) -> QueryError {
    idl::missing_field(&format!("$densify.{field}"))
}

fn wrong_type(field: &str, value: &Bson, expected: &str) -> QueryError {
    idl::wrong_type(&format!("$densify.{field}"), value, expected)
}
