//! Accumulators: the per-group state machines of `$group` (`$sum $avg $min $max $first $last
//! $push $addToSet $count $stdDevPop $stdDevSamp $mergeObjects`, the n-element ones of
//! [`super::ranked`] and `$percentile $median` of [`super::quantile`]), and the same operators used
//! as expressions over an array or an argument list (`{$sum: "$scores"}`, `{$max: [1, 5]}`).
//!
//! Semantics: `$sum`/`$avg`/`$stdDev*` ignore non-numeric values; `$min`/`$max` ignore null and
//! missing; `$push`/`$addToSet` skip missing values; `$first`/`$last` keep null and turn missing
//! into null. Sums promote types like `$add` (int → long → double; decimal wins).

use std::cmp::Ordering;
use vocabulary::location;

use bson::{Bson, Document};

use super::value::{EvalResult, Value, approximate_bytes, approximate_document_bytes, fail};
use super::{Arity, Func, OpDef};
use crate::collation::{Collation, compare_values};
use crate::error::QueryError;
use crate::number::{ArithOp, Dec, Num, NumType, arith, dec_divide};

/// Which accumulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccumulatorKind {
    Sum,
    Avg,
    Min,
    Max,
    First,
    Last,
    Push,
    AddToSet,
    StdDevPop,
    StdDevSamp,
    MergeObjects,
    // The n-element accumulators (`super::ranked`).
    FirstN,
    LastN,
    MaxN,
    MinN,
    Top,
    Bottom,
    TopN,
    BottomN,
    // `super::quantile`.
    Percentile,
    Median,
}

impl AccumulatorKind {
    /// The `$group` accumulator named `name` (`$count` is rewritten to `$sum: 1` by the caller).
    pub fn from_name(name: &str) -> Option<AccumulatorKind> {
        Some(match name {
            "$sum" => AccumulatorKind::Sum,
            "$avg" => AccumulatorKind::Avg,
            "$min" => AccumulatorKind::Min,
            "$max" => AccumulatorKind::Max,
            "$first" => AccumulatorKind::First,
            "$last" => AccumulatorKind::Last,
            "$push" => AccumulatorKind::Push,
            "$addToSet" => AccumulatorKind::AddToSet,
            "$stdDevPop" => AccumulatorKind::StdDevPop,
            "$stdDevSamp" => AccumulatorKind::StdDevSamp,
            "$mergeObjects" => AccumulatorKind::MergeObjects,
            "$firstN" => AccumulatorKind::FirstN,
            "$lastN" => AccumulatorKind::LastN,
            "$maxN" => AccumulatorKind::MaxN,
            "$minN" => AccumulatorKind::MinN,
            "$top" => AccumulatorKind::Top,
            "$bottom" => AccumulatorKind::Bottom,
            "$topN" => AccumulatorKind::TopN,
            "$bottomN" => AccumulatorKind::BottomN,
            "$percentile" => AccumulatorKind::Percentile,
            "$median" => AccumulatorKind::Median,
            _ => return None,
        })
    }

    /// An n-element accumulator, whose argument is an object of named fields
    /// (`super::ranked`).
    pub fn is_ranked(self) -> bool {
        use AccumulatorKind::*;
        matches!(self, FirstN | LastN | MaxN | MinN | Top | Bottom | TopN | BottomN)
    }
}

/// Running state of one accumulator for one group.
#[derive(Debug, Clone)]
pub struct Accumulator {
    kind: AccumulatorKind,
    total: Num,
    count: u64,
    /// Welford's running mean and sum of squared deviations, for `$stdDev*`.
    mean: f64,
    squares: f64,
    best: Option<Bson>,
    seen_first: bool,
    items: Vec<Bson>,
    merged: Document,
    ranked: super::ranked::Ranked,
    samples: super::quantile::Samples,
    /// [`approximate_bytes`] of the values held in `best`, `items` and `merged`, kept as they
    /// change so that a group's size costs nothing to read.
    held_bytes: usize,
}

impl Accumulator {
    pub fn new(kind: AccumulatorKind) -> Accumulator {
        Accumulator {
            kind,
            total: Num::Int(0),
            count: 0,
            mean: 0.0,
            squares: 0.0,
            best: None,
            seen_first: false,
            items: Vec::new(),
            merged: Document::new(),
            ranked: super::ranked::Ranked::default(),
            samples: super::quantile::Samples::default(),
            held_bytes: 0,
        }
    }

    /// Roughly the memory this accumulator holds (for `$group`'s memory limit).
    pub fn approximate_bytes(&self) -> usize {
        std::mem::size_of::<Accumulator>() + self.held_bytes
    }

    /// Feeds one value; `$min`, `$max` and `$addToSet` compare strings under `collation` (a
    /// `$group`'s or `$bucket`'s statement's).
    pub fn process(&mut self, value: &Value, collation: Option<&Collation>) -> Result<(), QueryError> {
        match self.kind {
            AccumulatorKind::Sum | AccumulatorKind::Avg => {
                if let Some(n) = value.as_ref().and_then(Num::from_bson) {
                    self.total = arith(ArithOp::Add, &self.total, &n);
                    self.count += 1;
                }
            }
            AccumulatorKind::StdDevPop | AccumulatorKind::StdDevSamp => {
                if let Some(n) = value.as_ref().and_then(Num::from_bson) {
                    self.count += 1;
                    let x = n.to_f64();
                    let delta = x - self.mean;
                    self.mean += delta / self.count as f64;
                    self.squares += delta * (x - self.mean);
                }
            }
            AccumulatorKind::Min | AccumulatorKind::Max => self.keep_extreme(value, collation),
            AccumulatorKind::First => {
                if !self.seen_first {
                    self.seen_first = true;
                    self.keep(value.clone().unwrap_or(Bson::Null));
                }
            }
            AccumulatorKind::Last => self.keep(value.clone().unwrap_or(Bson::Null)),
            AccumulatorKind::Push => {
                if let Some(v) = value {
                    self.held_bytes += approximate_bytes(v);
                    self.items.push(v.clone());
                }
            }
            AccumulatorKind::AddToSet => {
                if let Some(v) = value
                    && !self.items.iter().any(|seen| compare_values(seen, v, collation) == Ordering::Equal)
                {
                    self.held_bytes += approximate_bytes(v);
                    self.items.push(v.clone());
                }
            }
            AccumulatorKind::MergeObjects => {
                super::object::merge_into(&mut self.merged, value)?;
                self.held_bytes = approximate_document_bytes(&self.merged);
            }
            AccumulatorKind::Percentile | AccumulatorKind::Median => self.held_bytes = self.samples.process(value),
            kind => self.held_bytes = self.ranked.process(kind, value, collation)?,
        }
        Ok(())
    }

    /// Replaces the kept value of `$first`/`$last`/`$min`/`$max`.
    fn keep(&mut self, value: Bson) {
        self.held_bytes = approximate_bytes(&value);
        self.best = Some(value);
    }

    fn keep_extreme(&mut self, value: &Value, collation: Option<&Collation>) {
        let Some(v) = value else { return };
        if matches!(v, Bson::Null | Bson::Undefined) {
            return;
        }
        let wanted = if self.kind == AccumulatorKind::Min { Ordering::Less } else { Ordering::Greater };
        let replace = match &self.best {
            None => true,
            Some(best) => compare_values(v, best, collation) == wanted,
        };
        if replace {
            self.keep(v.clone());
        }
    }

    pub fn finish(self) -> Bson {
        match self.kind {
            AccumulatorKind::Sum => self.total.to_bson(),
            AccumulatorKind::Avg => average(&self.total, self.count),
            AccumulatorKind::StdDevPop if self.count > 0 => Bson::Double((self.squares / self.count as f64).sqrt()),
            AccumulatorKind::StdDevSamp if self.count > 1 => {
                Bson::Double((self.squares / (self.count - 1) as f64).sqrt())
            }
            AccumulatorKind::StdDevPop | AccumulatorKind::StdDevSamp => Bson::Null,
            AccumulatorKind::Min | AccumulatorKind::Max | AccumulatorKind::First | AccumulatorKind::Last => {
                self.best.unwrap_or(Bson::Null)
            }
            AccumulatorKind::Push | AccumulatorKind::AddToSet => Bson::Array(self.items),
            AccumulatorKind::MergeObjects => Bson::Document(self.merged),
            AccumulatorKind::Percentile | AccumulatorKind::Median => self.samples.finish(),
            kind => self.ranked.finish(kind),
        }
    }
}

fn average(total: &Num, count: u64) -> Bson {
    if count == 0 {
        return Bson::Null;
    }
    if total.num_type() == NumType::Decimal {
        let quotient = dec_divide(&total.to_dec(), &Dec::from_i64(count as i64));
        return Num::Decimal(quotient).to_bson();
    }
    Bson::Double(total.to_f64() / count as f64)
}

pub(crate) fn lookup(name: &str) -> Option<OpDef> {
    let (name, func): (&'static str, Func) = match name {
        "$sum" => ("$sum", |a| over_values(a, AccumulatorKind::Sum)),
        "$avg" => ("$avg", |a| over_values(a, AccumulatorKind::Avg)),
        "$min" => ("$min", |a| over_values(a, AccumulatorKind::Min)),
        "$max" => ("$max", |a| over_values(a, AccumulatorKind::Max)),
        "$stdDevPop" => ("$stdDevPop", |a| over_values(a, AccumulatorKind::StdDevPop)),
        "$stdDevSamp" => ("$stdDevSamp", |a| over_values(a, AccumulatorKind::StdDevSamp)),
        "$first" => ("$first", |a| one_array_arg(a, "$first", false)),
        "$last" => ("$last", |a| one_array_arg(a, "$last", true)),
        _ => return None,
    };
    Some(OpDef::Strict { name, arity: Arity::Any, func })
}

fn one_array_arg(args: &[Value], op: &str, last: bool) -> EvalResult {
    if args.len() != 1 {
        return Err(fail(
            location::EXPRESSION_ARGUMENT_COUNT_EXACT,
            format!("Expression {op} takes exactly 1 arguments. {} were passed in.", args.len()),
        ));
    }
    super::array::first_or_last(args, op, last)
}

/// An accumulator as an expression: over the one array operand, or over the operands.
fn over_values(args: &[Value], kind: AccumulatorKind) -> EvalResult {
    let mut accumulator = Accumulator::new(kind);
    match args {
        [Some(Bson::Array(items))] => {
            for item in items {
                accumulator.process(&Some(item.clone()), None)?;
            }
        }
        _ => {
            for arg in args {
                accumulator.process(arg, None)?;
            }
        }
    }
    Ok(Some(accumulator.finish()))
}
