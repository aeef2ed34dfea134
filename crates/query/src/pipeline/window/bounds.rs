//! A window function's `window`: `{documents: [lower, upper]}` (positions relative to the
//! current document) or `{range: [lower, upper], unit?}` (values relative to the current
//! document's `sortBy` value, plain numbers or, with a `unit`, time added as `$dateAdd` adds it).
//! A bound is `"unbounded"`, `"current"` (the current document's position, in both kinds) or a
//! constant number; both are inclusive. No `window` means the whole partition.
//!
//! [`Bounds::resolve`] turns them into the half-open index range `[a, b)` of one document's
//! window in its sorted partition (empty when `a == b`).

use bson::Bson;
use document::keycodec::Direction;
use vocabulary::location;

use crate::collation::compare_values;
use crate::error::{ErrorCode, QueryError};
use crate::expr::{TimeUnit, bson_type_name, fail};
use crate::number::{ArithOp, Num, arith};
use crate::sort::SortSpec;

#[derive(Debug, Clone, PartialEq)]
pub enum Bound<T> {
    Unbounded,
    Current,
    At(T),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Bounds {
    Documents(Bound<i64>, Bound<i64>),
    Range(Bound<Num>, Bound<Num>, Option<TimeUnit>),
}

impl Bounds {
    /// The default window: the whole partition.
    pub const WHOLE: Bounds = Bounds::Documents(Bound::Unbounded, Bound::Unbounded);

    pub fn parse(window: &Bson, sort_by: Option<&SortSpec>) -> Result<Bounds, QueryError> {
        let Bson::Document(window) = window else {
            return Err(fail(ErrorCode::FailedToParse, "'window' field must be an object"));
        };
        let (documents, range, unit) = (window.get("documents"), window.get("range"), window.get("unit"));
        if documents.is_some() && range.is_some() {
            return Err(fail(
                ErrorCode::FailedToParse,
                "Window bounds can specify either 'documents' or 'unit', not both.",
            ));
        }
        if range.is_none() && unit.is_some() {
            return Err(fail(
                ErrorCode::FailedToParse,
                "Window bounds can only specify 'unit' with range-based bounds.",
            ));
        }
        if let Some(documents) = documents {
            if window.len() != 1 {
                return Err(fail(
                    ErrorCode::FailedToParse,
                    "'window' field that specifies documents cannot have other fields",
                ));
            }
            let (lower, upper) = pair(documents)?;
            let (lower, upper) = (document_bound(lower)?, document_bound(upper)?);
            check_forward(&lower, &upper, 0, |a, b| a <= b, |n| n.to_string())?;
            let bounds = Bounds::Documents(lower, upper);
            if !bounds.is_whole() && sort_by.is_none() {
                return Err(fail(location::WINDOW_DOCUMENTS_WITHOUT_SORT_BY, "Document-based bounds require a sortBy"));
            }
            return Ok(bounds);
        }
        let Some(range) = range else {
            if !window.is_empty() {
                return Err(fail(
                    ErrorCode::FailedToParse,
                    "'window' field can only contain 'documents' as the only argument or 'range' with an optional 'unit' field",
                ));
            }
            return Ok(Bounds::WHOLE);
        };
        let unit = match unit {
            Some(Bson::String(name)) => Some(TimeUnit::parse(&Some(Bson::String(name.clone())), "$setWindowFields")?),
            Some(_) => return Err(fail(ErrorCode::FailedToParse, "'unit' must be a string")),
            None => None,
        };
        if window.len() != 1 + usize::from(unit.is_some()) {
            return Err(fail(
                ErrorCode::FailedToParse,
                "'window' field that specifies range cannot have other fields besides 'unit'",
            ));
        }
        let (lower, upper) = pair(range)?;
        let (lower, upper) = (range_bound(lower, unit.is_some())?, range_bound(upper, unit.is_some())?);
        check_forward(&lower, &upper, Num::Int(0), |a, b| compare_num(a, b).is_le(), |n| n.to_bson().to_string())?;
        match sort_by.map(SortSpec::fields) {
            Some([(_, Direction::Ascending)]) => Ok(Bounds::Range(lower, upper, unit)),
            Some([_]) => Err(fail(
                location::WINDOW_RANGE_SORT_BY_NOT_ASCENDING,
                "Range-based bounds require an ascending sortBy",
            )),
            _ => Err(fail(
                location::WINDOW_RANGE_SORT_BY_NOT_ONE_FIELD,
                "Range-based bounds require sortBy a single field",
            )),
        }
    }

    pub fn is_whole(&self) -> bool {
        matches!(self, Bounds::Documents(Bound::Unbounded, Bound::Unbounded))
    }

    /// Document `i`'s window `[a, b)` in a partition of `n` documents whose `sortBy` values are
    /// `keys` (used by range bounds only), ascending.
    pub fn resolve(&self, i: usize, n: usize, keys: &[Bson]) -> Result<(usize, usize), QueryError> {
        let (a, b) = match self {
            Bounds::Documents(lower, upper) => {
                let at =
                    |offset: i64, end: i64| (i as i64).saturating_add(offset).saturating_add(end).clamp(0, n as i64);
                let a = match lower {
                    Bound::Unbounded => 0,
                    Bound::Current => i,
                    Bound::At(k) => at(*k, 0) as usize,
                };
                let b = match upper {
                    Bound::Unbounded => n,
                    Bound::Current => i + 1,
                    Bound::At(k) => at(*k, 1) as usize,
                };
                (a, b)
            }
            Bounds::Range(lower, upper, unit) => {
                let current = range_key(&keys[i], *unit)?;
                let a = match lower {
                    Bound::Unbounded => 0,
                    Bound::Current => i,
                    Bound::At(offset) => {
                        let threshold = shifted(&current, offset, *unit)?;
                        keys.partition_point(|key| compare_values(key, &threshold, None).is_lt())
                    }
                };
                let b = match upper {
                    Bound::Unbounded => n,
                    Bound::Current => i + 1,
                    Bound::At(offset) => {
                        let threshold = shifted(&current, offset, *unit)?;
                        keys.partition_point(|key| compare_values(key, &threshold, None).is_le())
                    }
                };
                (a, b)
            }
        };
        Ok((a, b.max(a)))
    }
}

fn pair(bounds: &Bson) -> Result<(&Bson, &Bson), QueryError> {
    match bounds {
        Bson::Array(items) if items.len() == 2 => Ok((&items[0], &items[1])),
        other => Err(fail(ErrorCode::FailedToParse, format!("Window bounds must be a 2-element array: {other}"))),
    }
}

fn keyword<T>(bound: &Bson) -> Result<Option<Bound<T>>, QueryError> {
    match bound {
        Bson::String(s) if s == "unbounded" => Ok(Some(Bound::Unbounded)),
        Bson::String(s) if s == "current" => Ok(Some(Bound::Current)),
        Bson::String(_) => {
            Err(fail(ErrorCode::FailedToParse, "Window bounds must be 'unbounded', 'current', or a number."))
        }
        Bson::Document(_) | Bson::Array(_) => {
            Err(fail(ErrorCode::FailedToParse, "Window bounds expression must be a constant."))
        }
        _ => Ok(None),
    }
}

fn document_bound(bound: &Bson) -> Result<Bound<i64>, QueryError> {
    if let Some(bound) = keyword(bound)? {
        return Ok(bound);
    }
    Num::from_bson(bound)
        .and_then(|n| n.to_exact_i64())
        .map(Bound::At)
        .ok_or_else(|| fail(ErrorCode::FailedToParse, "Numeric document-based bounds must be an integer"))
}

fn range_bound(bound: &Bson, timed: bool) -> Result<Bound<Num>, QueryError> {
    if let Some(bound) = keyword(bound)? {
        return Ok(bound);
    }
    let number = Num::from_bson(bound);
    match number {
        Some(n) if timed && n.to_exact_i64().is_none() => {
            Err(fail(ErrorCode::FailedToParse, "With 'unit', range-based bounds must be an integer"))
        }
        Some(n) => Ok(Bound::At(n)),
        None if timed => Err(fail(ErrorCode::FailedToParse, "With 'unit', range-based bounds must be an integer")),
        None => Err(fail(ErrorCode::FailedToParse, "Range-based bounds expression must be a number")),
    }
}

/// Lower must not exceed upper, `current` counting as `zero`.
fn check_forward<T: Clone>(
    lower: &Bound<T>,
    upper: &Bound<T>,
    zero: T,
    less_or_equal: impl Fn(&T, &T) -> bool,
    show: impl Fn(&T) -> String,
) -> Result<(), QueryError> {
    let as_number = |bound: &Bound<T>| match bound {
        Bound::Current => Some(zero.clone()),
        Bound::At(v) => Some(v.clone()),
        Bound::Unbounded => None,
    };
    if let (Some(a), Some(b)) = (as_number(lower), as_number(upper))
        && !less_or_equal(&a, &b)
    {
        return Err(fail(
            location::WINDOW_LOWER_ABOVE_UPPER,
            format!("Lower bound must not exceed upper bound: [{}, {}]", show(&a), show(&b)),
        ));
    }
    Ok(())
}

fn compare_num(a: &Num, b: &Num) -> std::cmp::Ordering {
    document::compare_values(&a.to_bson(), &b.to_bson())
}

/// A document's `sortBy` value as a range window reads it: a number, or a date with a unit.
fn range_key(key: &Bson, unit: Option<TimeUnit>) -> Result<Bson, QueryError> {
    match (key, unit) {
        (Bson::DateTime(_), Some(_)) => Ok(key.clone()),
        (other, Some(_)) => Err(fail(
            location::WINDOW_RANGE_SORT_BY_NOT_DATE,
            format!("Invalid range: Expected the sortBy field to be a Date, but it was {}", bson_type_name(other)),
        )),
        (other, None) if Num::from_bson(other).is_some() => Ok(key.clone()),
        (other, None) => Err(fail(
            location::WINDOW_RANGE_SORT_BY_NOT_NUMBER,
            format!("Invalid range: Expected the sortBy field to be a number, but it was {}", bson_type_name(other)),
        )),
    }
}

/// The current value moved by a bound's offset.
fn shifted(current: &Bson, offset: &Num, unit: Option<TimeUnit>) -> Result<Bson, QueryError> {
    match (current, unit) {
        (Bson::DateTime(date), Some(unit)) => {
            let amount = offset.to_exact_i64().unwrap_or(0);
            let moved = unit
                .add_to(date.timestamp_millis(), amount)
                .ok_or_else(|| fail(location::DATE_ADD_OVERFLOW, "Date overflowed in a range-based window bound"))?;
            Ok(Bson::DateTime(bson::DateTime::from_millis(moved)))
        }
        _ => {
            let n = Num::from_bson(current).unwrap_or(Num::Int(0));
            Ok(arith(ArithOp::Add, &n, offset).to_bson())
        }
    }
}
