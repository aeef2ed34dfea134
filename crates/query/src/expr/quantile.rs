//! `$percentile` and `$median`: the `$group`/`$bucket`/window accumulators and the expressions
//! over an array (`{$percentile: {input, p, method}}`, `{$median: {input, method}}`).
//!
//! Only numeric values count (NaN left out); none gives `null` (`$median`) or one `null` per
//! requested percentile. `method` is required: `discrete` answers the sample at rank
//! `ceil(p·n)` (1-based), `continuous` interpolates linearly at position `p·(n−1)`, and
//! `approximate` (MongoDB's t-digest, whose answers may be any value within its error) is
//! answered exactly, the way `discrete` is: an exact answer is always within the error.
//!
//! An accumulator's argument is evaluated per document as `{v: input, p: [...], m: method}`
//! (the same shape the n-element accumulators use, `super::ranked`), so the per-group state
//! needs nothing at construction.

use bson::{Bson, Document};
use vocabulary::location;

use super::parse::parse;
use super::value::{EvalResult, Value, fail};
use super::{Call, Expr, Func, OpDef};
use crate::error::{QueryError, idl};
use crate::number::Num;

pub(crate) fn lookup(name: &str) -> Option<OpDef> {
    match name {
        "$percentile" => Some(OpDef::Custom("$percentile", parse_expression)),
        "$median" => Some(OpDef::Custom("$median", parse_expression)),
        _ => None,
    }
}

/// How a percentile is chosen from the samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Approximate,
    Discrete,
    Continuous,
}

impl Method {
    fn parse(op: &str, value: &Bson) -> Result<Method, QueryError> {
        match value {
            Bson::String(s) if s == "approximate" => Ok(Method::Approximate),
            Bson::String(s) if s == "discrete" => Ok(Method::Discrete),
            Bson::String(s) if s == "continuous" => Ok(Method::Continuous),
            Bson::String(_) => Err(fail(
                crate::error::ErrorCode::BadValue,
                "Currently only 'approximate', 'discrete', and 'continuous' can be used as percentile 'method'",
            )),
            other => Err(idl::wrong_type(&format!("{op}.method"), other, "string")),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Method::Approximate => "approximate",
            Method::Discrete => "discrete",
            Method::Continuous => "continuous",
        }
    }

    fn from_name(name: &str) -> Method {
        match name {
            "discrete" => Method::Discrete,
            "continuous" => Method::Continuous,
            _ => Method::Approximate,
        }
    }
}

/// A parsed `$percentile`/`$median` specification: the input and what to answer.
#[derive(Debug, Clone)]
pub struct QuantileSpec {
    pub input: Expr,
    /// The requested percentiles; `None` for `$median` (one value, not an array).
    pub ps: Option<Vec<f64>>,
    pub method: Method,
}

impl QuantileSpec {
    /// Parses `{input, p, method}` (`$percentile`) or `{input, method}` (`$median`).
    pub fn parse(op: &str, arg: &Bson) -> Result<QuantileSpec, QueryError> {
        let median = op == "$median";
        let Bson::Document(spec) = arg else {
            let code = if median { location::MEDIAN_NOT_OBJECT } else { location::PERCENTILE_NOT_OBJECT };
            return Err(fail(code, format!("specification must be an object; found {op}: {arg}")));
        };
        let (mut input, mut ps, mut method) = (None, None, None);
        for (key, value) in spec {
            match key.as_str() {
                "input" => input = Some(parse(value)?),
                "p" if !median => ps = Some(parse_ps(value)?),
                "method" => method = Some(Method::parse(op, value)?),
                other => return Err(idl::unknown_field(&format!("{op}.{other}"))),
            }
        }
        let missing = |field: &str| idl::missing_field(&format!("{op}.{field}"));
        let input = input.ok_or_else(|| missing("input"))?;
        if !median && ps.is_none() {
            return Err(missing("p"));
        }
        let method = method.ok_or_else(|| missing("method"))?;
        Ok(QuantileSpec { input, ps, method })
    }

    /// The per-document argument of the accumulator: `{v: input, p, m}`.
    pub fn accumulator_argument(&self) -> Expr {
        let mut fields = vec![("v".to_string(), self.input.clone())];
        if let Some(ps) = &self.ps {
            fields.push(("p".to_string(), Expr::Literal(Bson::Array(ps.iter().map(|p| Bson::Double(*p)).collect()))));
        }
        fields.push(("m".to_string(), Expr::Literal(Bson::String(self.method.name().to_string()))));
        Expr::Object(fields)
    }
}

/// `p`: a non-empty array of numbers in [0, 1], given as constants.
fn parse_ps(value: &Bson) -> Result<Vec<f64>, QueryError> {
    const MESSAGE: &str = "The $percentile 'p' field must be an array of numbers from [0.0, 1.0], but found: ";
    let items = match value {
        Bson::Array(items) if !items.is_empty() => items,
        Bson::Array(_) => return Err(fail(location::PERCENTILE_P_NOT_NON_EMPTY_ARRAY, format!("{MESSAGE}{value}"))),
        Bson::String(s) if s.starts_with('$') => {
            return Err(fail(
                location::PERCENTILE_P_NOT_CONSTANT,
                format!("The $percentile 'p' field must be an array of constant values, but found value: {value}."),
            ));
        }
        Bson::Document(_) => {
            return Err(fail(
                location::PERCENTILE_P_NOT_CONSTANT,
                format!("The $percentile 'p' field must be an array of constant values, but found value: {value}."),
            ));
        }
        other => return Err(fail(location::PERCENTILE_P_NOT_NON_EMPTY_ARRAY, format!("{MESSAGE}{other}"))),
    };
    items
        .iter()
        .map(|item| {
            let p = Num::from_bson(item)
                .map(|n| n.to_f64())
                .ok_or_else(|| fail(location::PERCENTILE_P_ELEMENT_NOT_NUMBER, format!("{MESSAGE}{item}")))?;
            if !(0.0..=1.0).contains(&p) {
                return Err(fail(location::PERCENTILE_P_ELEMENT_OUT_OF_RANGE, format!("{MESSAGE}{p}")));
            }
            Ok(p)
        })
        .collect()
}

/// A group's numeric samples and what to answer from them.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    values: Vec<f64>,
    ps: Option<Vec<f64>>,
    method: Option<Method>,
}

impl Samples {
    /// Feeds one document's `{v, p, m}`; returns the bytes now held.
    pub fn process(&mut self, value: &Value) -> usize {
        if let Some(Bson::Document(argument)) = value {
            if self.method.is_none() {
                self.method = Some(Method::from_name(argument.get_str("m").unwrap_or("approximate")));
                self.ps = read_ps(argument);
            }
            if let Some(x) = argument.get("v").and_then(Num::from_bson).map(|n| n.to_f64())
                && !x.is_nan()
            {
                self.values.push(x);
            }
        }
        self.values.len() * std::mem::size_of::<f64>()
    }

    pub fn finish(mut self) -> Bson {
        let method = self.method.unwrap_or(Method::Approximate);
        answer(&mut self.values, self.ps.as_deref(), method)
    }
}

fn read_ps(argument: &Document) -> Option<Vec<f64>> {
    match argument.get("p") {
        Some(Bson::Array(ps)) => Some(ps.iter().filter_map(|p| Num::from_bson(p).map(|n| n.to_f64())).collect()),
        _ => None,
    }
}

/// The answer over `samples` (reordered): one value for `$median` (`ps` = `None`), an array
/// for `$percentile`.
pub fn answer(samples: &mut [f64], ps: Option<&[f64]>, method: Method) -> Bson {
    samples.sort_by(f64::total_cmp);
    let one = |p: f64| percentile(samples, p, method).map_or(Bson::Null, Bson::Double);
    match ps {
        None => one(0.5),
        Some(ps) => Bson::Array(ps.iter().map(|p| one(*p)).collect()),
    }
}

/// The `p` percentile of sorted samples.
fn percentile(sorted: &[f64], p: f64, method: Method) -> Option<f64> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    match method {
        Method::Continuous => {
            let position = p * (n - 1) as f64;
            let (low, high) = (position.floor() as usize, position.ceil() as usize);
            let (a, b) = (sorted[low.min(n - 1)], sorted[high.min(n - 1)]);
            // On a sample itself (an infinity among them), no arithmetic: ∞ − ∞ is NaN.
            if low == high || a == b {
                return Some(a);
            }
            Some(a + (position - low as f64) * (b - a))
        }
        Method::Discrete | Method::Approximate => {
            let rank = (p * n as f64).ceil() as usize;
            Some(sorted[rank.saturating_sub(1).min(n - 1)])
        }
    }
}

/// The expressions: over an array's numeric elements, or a single number.
fn parse_expression(name: &'static str, arg: &Bson) -> Result<Expr, QueryError> {
    let spec = QuantileSpec::parse(name, arg)?;
    let ps = spec.ps.clone().map(|ps| Bson::Array(ps.into_iter().map(Bson::Double).collect()));
    let func: Func = |a| over_array(a);
    let args = vec![
        spec.input,
        Expr::Literal(ps.unwrap_or(Bson::Null)),
        Expr::Literal(Bson::String(spec.method.name().to_string())),
    ];
    Ok(Expr::Call(Call { name, func, args }))
}

/// Arguments: `[input, ps (null for $median), method]`.
fn over_array(args: &[Value]) -> EvalResult {
    let ps = match &args[1] {
        Some(Bson::Array(ps)) => Some(ps.iter().filter_map(|p| p.as_f64()).collect::<Vec<f64>>()),
        _ => None,
    };
    let method = match &args[2] {
        Some(Bson::String(m)) => Method::from_name(m),
        _ => Method::Approximate,
    };
    let mut samples: Vec<f64> = match &args[0] {
        Some(Bson::Array(items)) => {
            items.iter().filter_map(|item| Num::from_bson(item).map(|n| n.to_f64())).filter(|x| !x.is_nan()).collect()
        }
        Some(value) => Num::from_bson(value).map(|n| n.to_f64()).into_iter().filter(|x| !x.is_nan()).collect(),
        None => Vec::new(),
    };
    Ok(Some(answer(&mut samples, ps.as_deref(), method)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discrete_and_continuous_percentiles() {
        let mut samples = vec![5.0, 1.0, 4.0, 2.0, 3.0];
        let ps = [0.0, 0.5, 0.625, 1.0];
        let discrete = answer(&mut samples, Some(&ps), Method::Discrete);
        assert_eq!(discrete, Bson::Array(vec![1.0, 3.0, 4.0, 5.0].into_iter().map(Bson::Double).collect()));
        let continuous = answer(&mut samples, Some(&ps), Method::Continuous);
        assert_eq!(continuous, Bson::Array(vec![1.0, 3.0, 3.5, 5.0].into_iter().map(Bson::Double).collect()));
        let mut even = vec![1.0, 2.0, 3.0, 4.0];
        assert_eq!(answer(&mut even, None, Method::Discrete), Bson::Double(2.0));
        assert_eq!(answer(&mut even, None, Method::Continuous), Bson::Double(2.5));
        assert_eq!(answer(&mut [], Some(&[0.5, 0.9]), Method::Approximate), Bson::Array(vec![Bson::Null, Bson::Null]));
    }
}
