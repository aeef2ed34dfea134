//! The window functions of `$setWindowFields`' `output`: parsing one `{$fn: args, window}` and
//! computing it for every document of a sorted partition.
//!
//! - The `$group` accumulators (`$sum $avg $min $max $first $last $push $addToSet $stdDevPop
//!   $stdDevSamp $count $firstN $lastN $maxN $minN $top $bottom $topN $bottomN $percentile
//!   $median`) and `$covariancePop`/`$covarianceSamp`, `$integral` run over each document's
//!   window ([`super::bounds`]).
//! - `$derivative` reads its window's first and last documents.
//! - `$rank $denseRank $documentNumber $shift $locf $linearFill $expMovingAvg` take no window:
//!   they depend on positions and neighbours.
//!
//! Windows are computed without removal: a window equal to the previous document's reuses its
//! result, one that only grows at its end (`["unbounded", "current"]`, running totals) feeds
//! the new documents to the previous state, any other is computed afresh. So whole-partition
//! and running windows cost O(n), a sliding window of w documents O(n·w).

use bson::Bson;
use vocabulary::location;

use super::bounds::Bounds;
use crate::collation::{Collation, compare_values};
use crate::error::{ErrorCode, QueryError};
use crate::expr::accumulator::{Accumulator, AccumulatorKind};
use crate::expr::{Expr, TimeUnit, Value, bson_type_name, fail};
use crate::number::{ArithOp, Num, arith, long_or_int};
use crate::pipeline::group::parse_accumulator;
use crate::sort::SortSpec;

/// One output field's function.
#[derive(Debug, Clone)]
pub enum Function {
    Accumulate { kind: AccumulatorKind, input: Expr, bounds: Bounds },
    Covariance { sample: bool, x: Expr, y: Expr, bounds: Bounds },
    Integral { input: Expr, unit_ms: Option<i64>, bounds: Bounds },
    Derivative { input: Expr, unit_ms: Option<i64>, bounds: Bounds },
    Rank(Rank),
    Shift { output: Expr, by: i64, default: Bson },
    Locf(Expr),
    LinearFill(Expr),
    ExpMovingAvg { input: Expr, alpha: Num },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rank {
    /// `$rank`: ties share a rank, which then skips.
    Gapped,
    /// `$denseRank`: ties share a rank, which then goes on by one.
    Dense,
    DocumentNumber,
}

/// What a function reads of its partition, besides the documents themselves.
pub struct Partition<'p> {
    pub documents: &'p [bson::Document],
    /// Each document's value of the single `sortBy` field (empty without one).
    pub keys: &'p [Bson],
    pub vars: &'p crate::expr::Variables,
    pub collation: Option<&'p Collation>,
    /// How many bytes a function's results may hold (a whole-partition `$push` gives every
    /// document the whole partition): past it, 5414201 as for the partition itself.
    pub limit: usize,
}

impl Function {
    /// Parses `{$fn: args, window?: {...}}`.
    pub fn parse(spec: &Bson, sort_by: Option<&SortSpec>) -> Result<Function, QueryError> {
        let Bson::Document(spec) = spec else {
            return Err(fail(ErrorCode::FailedToParse, "Expected a $-prefixed window function"));
        };
        let mut operator = None;
        let mut window = None;
        for (key, value) in spec {
            if key == "window" {
                window = Some(value);
            } else if key.starts_with('$') {
                if operator.is_some() {
                    return Err(fail(ErrorCode::FailedToParse, "Cannot specify two functions in window function spec"));
                }
                operator = Some((key.as_str(), value));
            } else {
                return Err(fail(
                    ErrorCode::FailedToParse,
                    format!("Window function found an unknown argument: {key}"),
                ));
            }
        }
        let Some((name, argument)) = operator else {
            let first = spec.keys().next().map(|k| format!(", {k}")).unwrap_or_default();
            return Err(fail(ErrorCode::FailedToParse, format!("Expected a $-prefixed window function{first}")));
        };
        let bounds = || match window {
            Some(window) => Bounds::parse(window, sort_by),
            None => Ok(Bounds::WHOLE),
        };
        let no_window = || match window {
            Some(_) => Err(fail(ErrorCode::FailedToParse, format!("'window' field is not allowed in {name}"))),
            None => Ok(()),
        };
        Ok(match name {
            "$rank" | "$denseRank" | "$documentNumber" => {
                if spec.len() != 1 {
                    return Err(fail(
                        location::RANK_WITH_ARGUMENTS,
                        "Rank style window functions take no other arguments",
                    ));
                }
                if !matches!(argument, Bson::Document(d) if d.is_empty()) {
                    return Err(fail(
                        location::RANK_ARGUMENT_NOT_EMPTY_OBJECT,
                        format!("{name} must be specified with '{{}}' as the value"),
                    ));
                }
                if name != "$documentNumber" && sort_by.is_none_or(|s| s.fields().len() != 1) {
                    return Err(fail(
                        location::RANK_WITHOUT_ONE_SORT_BY,
                        format!("{name} must be specified with a top level sortBy expression with exactly one element"),
                    ));
                }
                Function::Rank(match name {
                    "$rank" => Rank::Gapped,
                    "$denseRank" => Rank::Dense,
                    _ => Rank::DocumentNumber,
                })
            }
            "$shift" => {
                no_window()?;
                parse_shift(argument, sort_by)?
            }
            "$locf" => {
                no_window()?;
                Function::Locf(Expr::parse(argument)?)
            }
            "$linearFill" => {
                no_window()?;
                if sort_by.is_none_or(|s| s.fields().len() != 1) {
                    return Err(fail(
                        location::LINEAR_FILL_WITHOUT_ONE_SORT_BY,
                        "$linearFill must be specified with a top level sortBy expression with exactly one element",
                    ));
                }
                Function::LinearFill(Expr::parse(argument)?)
            }
            "$expMovingAvg" => {
                if spec.len() != 1 {
                    return Err(fail(
                        ErrorCode::FailedToParse,
                        "$expMovingAvg must have exactly one argument that is an object",
                    ));
                }
                parse_exp_moving_avg(argument, sort_by)?
            }
            "$derivative" | "$integral" => {
                let one_field = sort_by.is_some_and(|s| s.fields().len() == 1);
                match sort_by {
                    None => return Err(fail(ErrorCode::FailedToParse, format!("{name} requires a sortBy"))),
                    Some(_) if !one_field => {
                        return Err(fail(ErrorCode::FailedToParse, format!("{name} requires a non-compound sortBy")));
                    }
                    Some(_) => {}
                }
                let (input, unit_ms) = parse_input_and_unit(name, argument)?;
                if name == "$derivative" {
                    if window.is_none() {
                        return Err(fail(ErrorCode::FailedToParse, "$derivative requires explicit window bounds"));
                    }
                    Function::Derivative { input, unit_ms, bounds: bounds()? }
                } else {
                    Function::Integral { input, unit_ms, bounds: bounds()? }
                }
            }
            "$covariancePop" | "$covarianceSamp" => {
                let (x, y) = match argument {
                    Bson::Array(items) if items.len() == 2 => (Expr::parse(&items[0])?, Expr::parse(&items[1])?),
                    _ => {
                        return Err(fail(
                            ErrorCode::FailedToParse,
                            format!("{name} requires an array of two expressions"),
                        ));
                    }
                };
                Function::Covariance { sample: name == "$covarianceSamp", x, y, bounds: bounds()? }
            }
            "$count" => {
                if !matches!(argument, Bson::Document(d) if d.is_empty()) {
                    return Err(fail(ErrorCode::FailedToParse, "$count only accepts an empty object as input"));
                }
                Function::Accumulate {
                    kind: AccumulatorKind::Sum,
                    input: Expr::Literal(Bson::Int32(1)),
                    bounds: bounds()?,
                }
            }
            "$mergeObjects" => return Err(unknown(name)),
            _ => match AccumulatorKind::from_name(name) {
                Some(_) => {
                    let parsed = parse_accumulator("window", &Bson::Document(bson::doc! { name: argument.clone() }))?;
                    Function::Accumulate { kind: parsed.kind, input: parsed.expr, bounds: bounds()? }
                }
                None => return Err(unknown(name)),
            },
        })
    }

    /// The function's value for every document of the partition, in order.
    pub fn compute(&self, partition: &Partition<'_>) -> Result<Vec<Bson>, QueryError> {
        let n = partition.documents.len();
        match self {
            Function::Accumulate { kind, input, bounds } => {
                let values = evaluate_all(input, partition)?;
                let collation = partition.collation;
                over_windows(
                    n,
                    partition.limit,
                    order_free(*kind),
                    window_of(bounds, n, partition.keys),
                    || Accumulator::new(*kind),
                    |state, j| state.process(&values[j], collation),
                    |state| Ok(state.finish()),
                )
            }
            Function::Covariance { sample, x, y, bounds } => {
                let (xs, ys) = (evaluate_all(x, partition)?, evaluate_all(y, partition)?);
                let points: Vec<Option<(f64, f64)>> =
                    xs.iter().zip(&ys).map(|(x, y)| Some((number(x)?, number(y)?))).collect();
                over_windows(
                    n,
                    partition.limit,
                    true,
                    window_of(bounds, n, partition.keys),
                    Covariance::default,
                    |state, j| {
                        if let Some(point) = points[j] {
                            state.add(point);
                        }
                        Ok(())
                    },
                    |state| Ok(state.value(*sample)),
                )
            }
            Function::Integral { input, unit_ms, bounds } => {
                let points = curve_points("$integral", input, *unit_ms, partition)?;
                over_windows(
                    n,
                    partition.limit,
                    false,
                    window_of(bounds, n, partition.keys),
                    Integral::default,
                    |state, j| {
                        state.add(points[j]);
                        Ok(())
                    },
                    |state| Ok(state.value()),
                )
            }
            Function::Derivative { input, unit_ms, bounds } => {
                let points = curve_points("$derivative", input, *unit_ms, partition)?;
                (0..n)
                    .map(|i| {
                        let (a, b) = bounds.resolve(i, n, partition.keys)?;
                        if b < a + 2 {
                            return Ok(Bson::Null);
                        }
                        let ((x1, y1), (x2, y2)) = (points[a], points[b - 1]);
                        Ok(if x2 == x1 { Bson::Null } else { Bson::Double((y2 - y1) / (x2 - x1)) })
                    })
                    .collect()
            }
            Function::Rank(rank) => Ok(ranks(*rank, partition)),
            Function::Shift { output, by, default } => (0..n as i64)
                .map(|i| match i.checked_add(*by).filter(|j| (0..n as i64).contains(j)) {
                    Some(j) => Ok(crate::expr::evaluate(output, &partition.documents[j as usize], partition.vars)?),
                    None => Ok(default.clone()),
                })
                .collect(),
            Function::Locf(input) => {
                let mut last = Bson::Null;
                let values = evaluate_all(input, partition)?;
                Ok(values
                    .into_iter()
                    .map(|value| {
                        if let Some(v) = value.filter(|v| !matches!(v, Bson::Null | Bson::Undefined)) {
                            last = v;
                        }
                        last.clone()
                    })
                    .collect())
            }
            Function::LinearFill(input) => linear_fill(input, partition),
            Function::ExpMovingAvg { input, alpha } => {
                let mut average: Option<Num> = None;
                let one_minus = arith(ArithOp::Subtract, &Num::Int(1), alpha);
                Ok(evaluate_all(input, partition)?
                    .iter()
                    .map(|value| {
                        if let Some(x) = value.as_ref().and_then(Num::from_bson) {
                            average = Some(match &average {
                                None => x,
                                Some(previous) => arith(
                                    ArithOp::Add,
                                    &arith(ArithOp::Multiply, alpha, &x),
                                    &arith(ArithOp::Multiply, &one_minus, previous),
                                ),
                            });
                        }
                        average.as_ref().map_or(Bson::Null, |a| {
                            if matches!(a, Num::Decimal(_)) { a.to_bson() } else { Bson::Double(a.to_f64()) }
                        })
                    })
                    .collect())
            }
        }
    }
}

/// Whether an accumulator's result is the same whatever order its values come in (ties of
/// `$top`/`$bottom` keep their arrival order, `$push`/`$first`... are orders).
fn order_free(kind: AccumulatorKind) -> bool {
    use AccumulatorKind::*;
    matches!(kind, Sum | Avg | Min | Max | StdDevPop | StdDevSamp | MaxN | MinN | Percentile | Median)
}

/// Each document's window `[a, b)`, by position.
fn window_of<'b>(
    bounds: &'b Bounds,
    n: usize,
    keys: &'b [Bson],
) -> impl FnMut(usize) -> Result<(usize, usize), QueryError> + 'b {
    move |i| bounds.resolve(i, n, keys)
}

fn unknown(name: &str) -> QueryError {
    fail(ErrorCode::FailedToParse, format!("Unrecognized window function, {name}"))
}

fn evaluate_all(input: &Expr, partition: &Partition<'_>) -> Result<Vec<Value>, QueryError> {
    partition.documents.iter().map(|d| crate::expr::evaluate_value(input, d, partition.vars)).collect()
}

fn number(value: &Value) -> Option<f64> {
    value.as_ref().and_then(Num::from_bson).map(|n| n.to_f64())
}

/// Computes `finish(state)` over each document's window, reusing the previous window's state
/// when the window is the same or only grew at its end; when every window ends with the
/// partition and they only shrink from the front (`["current", "unbounded"]`) and the order
/// values are fed in does not matter (`order_free`), the states are built from the end
/// backwards, so that too is one pass.
fn over_windows<S: Clone>(
    n: usize,
    limit: usize,
    order_free: bool,
    mut window: impl FnMut(usize) -> Result<(usize, usize), QueryError>,
    fresh: impl Fn() -> S,
    mut add: impl FnMut(&mut S, usize) -> Result<(), QueryError>,
    finish: impl Fn(S) -> Result<Bson, QueryError>,
) -> Result<Vec<Bson>, QueryError> {
    let spans: Vec<(usize, usize)> = (0..n).map(&mut window).collect::<Result<_, _>>()?;
    let suffixes = spans.iter().all(|(_, b)| *b == n) && spans.windows(2).all(|w| w[0].0 <= w[1].0);
    let mut held = Held { bytes: 0, limit };
    if order_free && suffixes && n > 0 {
        let mut results = vec![Bson::Null; n];
        let (mut state, mut fed) = (fresh(), n);
        let mut previous: Option<(usize, Bson)> = None;
        for i in (0..n).rev() {
            let a = spans[i].0;
            let result = match &previous {
                Some((pa, result)) if *pa == a => result.clone(),
                _ => {
                    while fed > a {
                        fed -= 1;
                        add(&mut state, fed)?;
                    }
                    let result = finish(state.clone())?;
                    previous = Some((a, result.clone()));
                    result
                }
            };
            held.add(&result)?;
            results[i] = result;
        }
        return Ok(results);
    }
    let mut results = Vec::with_capacity(n);
    let mut previous: Option<(usize, usize, S, Bson)> = None;
    for &(a, b) in &spans {
        let result = match &mut previous {
            Some((pa, pb, _, result)) if *pa == a && *pb == b => result.clone(),
            Some((pa, pb, state, result)) if *pa == a && *pb < b => {
                for j in *pb..b {
                    add(state, j)?;
                }
                *pb = b;
                *result = finish(state.clone())?;
                result.clone()
            }
            _ => {
                let mut state = fresh();
                for j in a..b {
                    add(&mut state, j)?;
                }
                let result = finish(state.clone())?;
                previous = Some((a, b, state, result.clone()));
                result
            }
        };
        held.add(&result)?;
        results.push(result);
    }
    Ok(results)
}

/// The bytes a function's results hold, against the stage's limit.
struct Held {
    bytes: usize,
    limit: usize,
}

impl Held {
    fn add(&mut self, result: &Bson) -> Result<(), QueryError> {
        self.bytes += crate::expr::approximate_bytes(result);
        if self.bytes <= self.limit { Ok(()) } else { Err(super::memory_exceeded(self.bytes, self.limit)) }
    }
}

/// Running sums for `$covariancePop`/`$covarianceSamp` (Welford's co-moment).
#[derive(Debug, Clone, Default)]
struct Covariance {
    count: f64,
    mean_x: f64,
    mean_y: f64,
    co_moment: f64,
}

impl Covariance {
    fn add(&mut self, (x, y): (f64, f64)) {
        self.count += 1.0;
        let dx = x - self.mean_x;
        self.mean_x += dx / self.count;
        self.mean_y += (y - self.mean_y) / self.count;
        self.co_moment += dx * (y - self.mean_y);
    }

    fn value(&self, sample: bool) -> Bson {
        let divisor = if sample { self.count - 1.0 } else { self.count };
        if divisor <= 0.0 { Bson::Null } else { Bson::Double(self.co_moment / divisor) }
    }
}

/// `$integral`'s trapezoids over the points added so far, in order.
#[derive(Debug, Clone, Default)]
struct Integral {
    last: Option<(f64, f64)>,
    area: f64,
}

impl Integral {
    fn add(&mut self, (x, y): (f64, f64)) {
        if let Some((x0, y0)) = self.last {
            self.area += (y + y0) / 2.0 * (x - x0);
        }
        self.last = Some((x, y));
    }

    fn value(&self) -> Bson {
        if self.last.is_some() { Bson::Double(self.area) } else { Bson::Null }
    }
}

/// `(x, y)` for `$derivative`/`$integral`: x the `sortBy` value (a number, or a date in `unit`s
/// when a unit is given), y the numeric input.
fn curve_points(
    name: &str,
    input: &Expr,
    unit_ms: Option<i64>,
    partition: &Partition<'_>,
) -> Result<Vec<(f64, f64)>, QueryError> {
    let values = evaluate_all(input, partition)?;
    values
        .iter()
        .zip(partition.keys)
        .map(|(value, key)| {
            let x = match (key, unit_ms) {
                (Bson::DateTime(date), Some(unit)) => date.timestamp_millis() as f64 / unit as f64,
                (Bson::DateTime(_), None) => {
                    return Err(fail(
                        location::WINDOW_DATE_SORT_BY_WITHOUT_UNIT,
                        format!("{name} where the sortBy is a Date requires an 'unit'"),
                    ));
                }
                (other, Some(_)) => {
                    return Err(fail(
                        location::WINDOW_UNIT_SORT_BY_NOT_DATE,
                        format!(
                            "{name} with 'unit' expects the sortBy field to be a Date, but it was {}",
                            bson_type_name(other)
                        ),
                    ));
                }
                (other, None) => Num::from_bson(other).map(|n| n.to_f64()).ok_or_else(|| {
                    fail(
                        location::WINDOW_SORT_BY_NOT_NUMBER,
                        format!("{name} expects the sortBy field to be numeric, but it was {}", bson_type_name(other)),
                    )
                })?,
            };
            let y = number(value).ok_or_else(|| {
                fail(
                    location::WINDOW_INPUT_NOT_NUMBER,
                    format!("{name} expects its input to be numeric, but it was {}", crate::expr::type_name(value)),
                )
            })?;
            Ok((x, y))
        })
        .collect()
}

fn parse_input_and_unit(name: &str, argument: &Bson) -> Result<(Expr, Option<i64>), QueryError> {
    let Bson::Document(args) = argument else {
        return Err(fail(
            ErrorCode::FailedToParse,
            format!("{name} expects an object, but got a {}: {argument}", bson_type_name(argument)),
        ));
    };
    let (mut input, mut unit_ms) = (None, None);
    for (key, value) in args {
        match key.as_str() {
            "input" => input = Some(Expr::parse(value)?),
            "unit" => {
                let Bson::String(_) = value else {
                    return Err(fail(
                        ErrorCode::FailedToParse,
                        format!("unit' must be a string, but got {}", bson_type_name(value)),
                    ));
                };
                let unit = TimeUnit::parse(&Some(value.clone()), name)?;
                unit_ms = Some(
                    unit.millis()
                        .ok_or_else(|| fail(location::WINDOW_UNIT_ABOVE_WEEK, "unit must be 'week' or smaller"))?,
                );
            }
            other => return Err(fail(ErrorCode::FailedToParse, format!("{name} got unexpected argument: {other}"))),
        }
    }
    let input =
        input.ok_or_else(|| fail(ErrorCode::FailedToParse, format!("{name} requires an 'input' expression")))?;
    Ok((input, unit_ms))
}

fn parse_shift(argument: &Bson, sort_by: Option<&SortSpec>) -> Result<Function, QueryError> {
    let Bson::Document(args) = argument else {
        return Err(fail(ErrorCode::FailedToParse, "Argument to $shift must be an object"));
    };
    if sort_by.is_none() {
        return Err(fail(ErrorCode::FailedToParse, "$shift requires a sortBy"));
    }
    let (mut output, mut by, mut default) = (None, None, Bson::Null);
    for (key, value) in args {
        match key.as_str() {
            "output" => output = Some(Expr::parse(value)?),
            "by" => {
                by = Some(Num::from_bson(value).and_then(|n| n.to_exact_i64()).ok_or_else(|| {
                    fail(
                        ErrorCode::FailedToParse,
                        "'$shift:by' field must be an integer, but found by: ".to_string() + &value.to_string(),
                    )
                })?)
            }
            "default" => {
                // A constant: a field path or variable has nothing to read here.
                let expr = Expr::parse(value)?;
                if matches!(expr, Expr::FieldPath(_) | Expr::Variable { .. }) {
                    return Err(fail(
                        ErrorCode::FailedToParse,
                        "'$shift:default' expression must yield a constant value.",
                    ));
                }
                default = crate::expr::evaluate(&expr, &bson::Document::new(), &crate::expr::Variables::new())?;
            }
            other => return Err(fail(ErrorCode::FailedToParse, format!("Unknown argument in $shift: {other}"))),
        }
    }
    let output = output.ok_or_else(|| fail(ErrorCode::FailedToParse, "$shift requires an 'output' expression."))?;
    let by = by.ok_or_else(|| fail(ErrorCode::FailedToParse, "$shift requires a 'by' value."))?;
    Ok(Function::Shift { output, by, default })
}

fn parse_exp_moving_avg(argument: &Bson, sort_by: Option<&SortSpec>) -> Result<Function, QueryError> {
    const SHAPE: &str = "$expMovingAvg sub object must have exactly two fields: An 'input' field, and either an 'N' field or an 'alpha' field";
    let Bson::Document(args) = argument else {
        return Err(fail(ErrorCode::FailedToParse, "$expMovingAvg must have exactly one argument that is an object"));
    };
    if args.len() != 2 || !args.contains_key("input") {
        return Err(fail(ErrorCode::FailedToParse, SHAPE));
    }
    if sort_by.is_none() {
        return Err(fail(ErrorCode::FailedToParse, "$expMovingAvg requires an explicit 'sortBy'"));
    }
    let input = Expr::parse(args.get("input").unwrap_or(&Bson::Null))?;
    let alpha = if let Some(n) = args.get("N") {
        let number = Num::from_bson(n).ok_or_else(|| {
            fail(
                ErrorCode::FailedToParse,
                format!("'N' field must be an integer, but found type {}", bson_type_name(n)),
            )
        })?;
        let whole = number.to_exact_i64().ok_or_else(|| {
            fail(ErrorCode::FailedToParse, format!("'N' field must be an integer, but found  {n}. To use a non-integer, use the 'alpha' argument instead"))
        })?;
        if whole <= 0 {
            return Err(fail(ErrorCode::FailedToParse, format!("'N' must be greater than zero. Got {whole}")));
        }
        Num::Double(2.0 / (whole as f64 + 1.0))
    } else if let Some(alpha) = args.get("alpha") {
        let number = Num::from_bson(alpha).ok_or_else(|| fail(ErrorCode::FailedToParse, "'alpha' must be a number"))?;
        if !(number.to_f64() > 0.0 && number.to_f64() < 1.0) {
            return Err(fail(
                ErrorCode::FailedToParse,
                format!("'alpha' must be between 0 and 1 (exclusive), found {alpha}"),
            ));
        }
        number
    } else {
        return Err(fail(ErrorCode::FailedToParse, format!("Got unrecognized field in $expMovingAvg{SHAPE}")));
    };
    Ok(Function::ExpMovingAvg { input, alpha })
}

fn ranks(rank: Rank, partition: &Partition<'_>) -> Vec<Bson> {
    let mut out = Vec::with_capacity(partition.documents.len());
    let (mut current, mut dense) = (0i64, 0i64);
    for i in 0..partition.documents.len() {
        let tied = i > 0
            && rank != Rank::DocumentNumber
            && compare_values(&partition.keys[i], &partition.keys[i - 1], partition.collation).is_eq();
        if !tied {
            current = i as i64 + 1;
            dense += 1;
        }
        out.push(long_or_int(match rank {
            Rank::Gapped => current,
            Rank::Dense => dense,
            Rank::DocumentNumber => i as i64 + 1,
        }));
    }
    out
}

/// `$linearFill`: each run of null or missing values between two numbers is filled on the line
/// between them, positioned by the `sortBy` values; runs at the ends stay null.
fn linear_fill(input: &Expr, partition: &Partition<'_>) -> Result<Vec<Bson>, QueryError> {
    let values = evaluate_all(input, partition)?;
    let mut xs = Vec::with_capacity(values.len());
    for key in partition.keys {
        let x = match key {
            Bson::DateTime(date) => date.timestamp_millis() as f64,
            other => Num::from_bson(other).map(|n| n.to_f64()).ok_or_else(|| {
                fail(
                    location::LINEAR_FILL_SORT_BY_NOT_NUMBER_OR_DATE,
                    format!(
                        "The sortBy field of $linearFill must be numeric or a date, but it was {}",
                        bson_type_name(other)
                    ),
                )
            })?,
        };
        if xs.last().is_some_and(|previous| *previous == x) {
            return Err(fail(
                location::LINEAR_FILL_REPEATED_SORT_VALUE,
                "There can be no repeated values in the sort field of $linearFill",
            ));
        }
        xs.push(x);
    }
    let mut out: Vec<Bson> = Vec::with_capacity(values.len());
    let mut last_known: Option<usize> = None;
    for (i, value) in values.iter().enumerate() {
        match value {
            None | Some(Bson::Null) | Some(Bson::Undefined) => out.push(Bson::Null),
            Some(v) => {
                let y = Num::from_bson(v).ok_or_else(|| {
                    fail(
                        location::LINEAR_FILL_VALUE_NOT_NUMBER,
                        format!("Value to $linearFill must be numeric or nullish, but it was {}", bson_type_name(v)),
                    )
                })?;
                if let Some(k) = last_known
                    && k + 1 < i
                {
                    let (x0, y0, x1, y1) = (xs[k], number(&values[k]).unwrap_or(0.0), xs[i], y.to_f64());
                    for j in k + 1..i {
                        out[j] = Bson::Double(y0 + (xs[j] - x0) * (y1 - y0) / (x1 - x0));
                    }
                }
                out.push(v.clone());
                last_known = Some(i);
            }
        }
    }
    Ok(out)
}
