//! Control forms: operators that do not simply evaluate all their arguments first.
//!
//! `$cond`, `$ifNull`, `$switch`, `$and`, `$or` evaluate lazily (a branch not taken never
//! raises its error); `$let`, `$map`, `$filter`, `$reduce` bind local variables around their
//! body. `$convert` and `$dateFromString` live here as variants because their `onError`
//! is evaluated only when the conversion fails; their logic stays in their families.

use bson::Bson;
use vocabulary::location;

use super::eval::Scope;
use super::parse::{check_variable_name, parse};
use super::value::{EvalResult, bson_type_name, fail, is_nullish, value_truthy};
use super::{Expr, OpDef, convert, date};
use crate::error::QueryError;

#[derive(Debug, Clone)]
pub enum Control {
    Cond { test: Expr, then: Expr, otherwise: Expr },
    IfNull(Vec<Expr>),
    Switch { branches: Vec<(Expr, Expr)>, default: Option<Expr> },
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Let { bindings: Vec<(String, Expr)>, body: Expr },
    Filter { input: Expr, name: String, cond: Expr, limit: Option<Expr> },
    Map { input: Expr, name: String, body: Expr },
    Reduce { input: Expr, initial: Expr, body: Expr },
    Convert(convert::ConvertSpec),
    DateFromString(date::DateFromStringSpec),
}

type Parser = fn(&'static str, &Bson) -> Result<Expr, QueryError>;

const FORMS: &[(&str, Parser)] = &[
    ("$cond", parse_cond),
    ("$ifNull", parse_if_null),
    ("$switch", parse_switch),
    ("$and", parse_and),
    ("$or", parse_or),
    ("$let", parse_let),
    ("$filter", parse_filter),
    ("$map", parse_map),
    ("$reduce", parse_reduce),
];

pub fn lookup(name: &str) -> Option<OpDef> {
    FORMS.iter().find(|(n, _)| *n == name).map(|(n, p)| OpDef::Custom(n, *p))
}

fn parse_and(_: &'static str, arg: &Bson) -> Result<Expr, QueryError> {
    Ok(control(Control::And(super::parse::positional_args(arg)?)))
}

fn parse_or(_: &'static str, arg: &Bson) -> Result<Expr, QueryError> {
    Ok(control(Control::Or(super::parse::positional_args(arg)?)))
}

pub fn control(form: Control) -> Expr {
    Expr::Control(Box::new(form))
}

/// The fields of an object-form operator, rejecting unknown ones with `unknown_code`.
fn fields<'a>(
    op: &str,
    arg: &'a Bson,
    allowed: &[&str],
    unknown_code: i32,
) -> Result<Vec<Option<&'a Bson>>, QueryError> {
    let Bson::Document(spec) = arg else {
        return Err(fail(unknown_code, format!("{op} expects an object, found: {}", bson_type_name(arg))));
    };
    let mut out = vec![None; allowed.len()];
    for (key, value) in spec {
        match allowed.iter().position(|a| a == key) {
            Some(i) => out[i] = Some(value),
            None => return Err(fail(unknown_code, format!("Unrecognized parameter to {op}: {key}"))),
        }
    }
    Ok(out)
}

fn required<'a>(value: Option<&'a Bson>, op: &str, name: &str, code: i32) -> Result<&'a Bson, QueryError> {
    value.ok_or_else(|| fail(code, format!("Missing '{name}' parameter to {op}")))
}

fn parse_cond(name: &'static str, arg: &Bson) -> Result<Expr, QueryError> {
    if let Bson::Document(_) = arg {
        let f = fields(name, arg, &["if", "then", "else"], location::COND_UNKNOWN_ARGUMENT)?;
        let test = parse(required(f[0], name, "if", location::COND_WITHOUT_IF)?)?;
        let then = parse(required(f[1], name, "then", location::COND_WITHOUT_THEN)?)?;
        let otherwise = parse(required(f[2], name, "else", location::COND_WITHOUT_ELSE)?)?;
        return Ok(control(Control::Cond { test, then, otherwise }));
    }
    let args = super::parse::positional_args(arg)?;
    super::parse::check_arity(name, super::Arity::Exact(3), args.len())?;
    let mut it = args.into_iter();
    match (it.next(), it.next(), it.next()) {
        (Some(test), Some(then), Some(otherwise)) => Ok(control(Control::Cond { test, then, otherwise })),
        _ => Err(fail(location::EXPRESSION_ARGUMENT_COUNT_EXACT, "Expression $cond takes exactly 3 arguments.")),
    }
}

fn parse_if_null(_: &'static str, arg: &Bson) -> Result<Expr, QueryError> {
    let args = super::parse::positional_args(arg)?;
    if args.len() < 2 {
        return Err(fail(
            location::IF_NULL_TOO_FEW_ARGUMENTS,
            format!("$ifNull needs at least two arguments, had: {}", args.len()),
        ));
    }
    Ok(control(Control::IfNull(args)))
}

fn parse_switch(_: &'static str, arg: &Bson) -> Result<Expr, QueryError> {
    let Bson::Document(spec) = arg else {
        return Err(fail(
            location::SWITCH_ARGUMENT_NOT_OBJECT,
            format!("$switch requires an object as an argument, found: {}", bson_type_name(arg)),
        ));
    };
    let mut branches = Vec::new();
    let mut default = None;
    for (key, value) in spec {
        match key.as_str() {
            "branches" => {
                let Bson::Array(items) = value else {
                    return Err(fail(
                        location::SWITCH_BRANCHES_NOT_ARRAY,
                        format!("$switch expected an array for 'branches', found: {}", bson_type_name(value)),
                    ));
                };
                for item in items {
                    branches.push(parse_branch(item)?);
                }
            }
            "default" => default = Some(parse(value)?),
            other => {
                return Err(fail(
                    location::SWITCH_UNKNOWN_ARGUMENT,
                    format!("$switch found an unknown argument: {other}"),
                ));
            }
        }
    }
    if branches.is_empty() {
        return Err(fail(location::SWITCH_WITHOUT_BRANCHES, "$switch requires at least one branch."));
    }
    Ok(control(Control::Switch { branches, default }))
}

fn parse_branch(item: &Bson) -> Result<(Expr, Expr), QueryError> {
    let Bson::Document(branch) = item else {
        return Err(fail(
            location::SWITCH_BRANCH_NOT_OBJECT,
            format!("$switch expected each branch to be an object, found: {}", bson_type_name(item)),
        ));
    };
    let (mut case, mut then) = (None, None);
    for (key, value) in branch {
        match key.as_str() {
            "case" => case = Some(parse(value)?),
            "then" => then = Some(parse(value)?),
            other => {
                return Err(fail(
                    location::SWITCH_BRANCH_UNKNOWN_ARGUMENT,
                    format!("$switch found an unknown argument to a branch: {other}"),
                ));
            }
        }
    }
    let case = case.ok_or_else(|| {
        fail(location::SWITCH_BRANCH_WITHOUT_CASE, "$switch requires each branch have a 'case' expression")
    })?;
    let then = then.ok_or_else(|| {
        fail(location::SWITCH_BRANCH_WITHOUT_THEN, "$switch requires each branch have a 'then' expression.")
    })?;
    Ok((case, then))
}

fn parse_let(name: &'static str, arg: &Bson) -> Result<Expr, QueryError> {
    let f = fields(name, arg, &["vars", "in"], location::LET_UNKNOWN_ARGUMENT)?;
    let vars = required(f[0], name, "vars", location::LET_WITHOUT_VARS)?;
    let body = parse(required(f[1], name, "in", location::LET_WITHOUT_IN)?)?;
    let Bson::Document(vars) = vars else {
        return Err(fail(
            location::ARGUMENT_NOT_OBJECT,
            format!("invalid parameter: expected an object (vars), found: {}", bson_type_name(vars)),
        ));
    };
    let mut bindings = Vec::new();
    for (var, value) in vars {
        check_variable_name(var, false)?;
        bindings.push((var.clone(), parse(value)?));
    }
    Ok(control(Control::Let { bindings, body }))
}

fn variable_name(value: Option<&Bson>, op: &str) -> Result<String, QueryError> {
    match value {
        None => Ok("this".to_string()),
        Some(Bson::String(s)) => {
            check_variable_name(s, false)?;
            Ok(s.clone())
        }
        Some(other) => Err(fail(
            location::AS_NOT_STRING,
            format!("'as' of {op} must be a string, found: {}", bson_type_name(other)),
        )),
    }
}

fn parse_filter(name: &'static str, arg: &Bson) -> Result<Expr, QueryError> {
    let f = fields(name, arg, &["input", "as", "cond", "limit"], location::FILTER_UNKNOWN_ARGUMENT)?;
    let input = parse(required(f[0], name, "input", location::FILTER_WITHOUT_INPUT)?)?;
    let var = variable_name(f[1], name)?;
    let cond = parse(required(f[2], name, "cond", location::FILTER_WITHOUT_COND)?)?;
    let limit = f[3].map(parse).transpose()?;
    Ok(control(Control::Filter { input, name: var, cond, limit }))
}

fn parse_map(name: &'static str, arg: &Bson) -> Result<Expr, QueryError> {
    let f = fields(name, arg, &["input", "as", "in"], location::MAP_UNKNOWN_ARGUMENT)?;
    let input = parse(required(f[0], name, "input", location::MAP_WITHOUT_INPUT)?)?;
    let var = variable_name(f[1], name)?;
    let body = parse(required(f[2], name, "in", location::MAP_WITHOUT_IN)?)?;
    Ok(control(Control::Map { input, name: var, body }))
}

fn parse_reduce(name: &'static str, arg: &Bson) -> Result<Expr, QueryError> {
    let f = fields(name, arg, &["input", "initialValue", "in"], location::REDUCE_UNKNOWN_ARGUMENT)?;
    let input = parse(required(f[0], name, "input", location::REDUCE_WITHOUT_INPUT)?)?;
    let initial = parse(required(f[1], name, "initialValue", location::REDUCE_WITHOUT_INITIAL_VALUE)?)?;
    let body = parse(required(f[2], name, "in", location::REDUCE_WITHOUT_IN)?)?;
    Ok(control(Control::Reduce { input, initial, body }))
}

pub fn eval(form: &Control, scope: &mut Scope<'_>) -> EvalResult {
    match form {
        Control::Cond { test, then, otherwise } => {
            if value_truthy(&scope.eval(test)?) {
                scope.eval(then)
            } else {
                scope.eval(otherwise)
            }
        }
        Control::IfNull(args) => {
            let (last, rest) = args
                .split_last()
                .ok_or_else(|| fail(location::IF_NULL_TOO_FEW_ARGUMENTS, "$ifNull needs at least two arguments"))?;
            for arg in rest {
                let v = scope.eval(arg)?;
                if !is_nullish(&v) {
                    return Ok(v);
                }
            }
            scope.eval(last)
        }
        Control::Switch { branches, default } => {
            for (case, then) in branches {
                if value_truthy(&scope.eval(case)?) {
                    return scope.eval(then);
                }
            }
            match default {
                Some(d) => scope.eval(d),
                None => Err(fail(
                    location::SWITCH_NO_MATCHING_BRANCH,
                    "$switch could not find a matching branch for an input, and no default was specified.",
                )),
            }
        }
        Control::And(args) => {
            for arg in args {
                if !value_truthy(&scope.eval(arg)?) {
                    return Ok(Some(Bson::Boolean(false)));
                }
            }
            Ok(Some(Bson::Boolean(true)))
        }
        Control::Or(args) => {
            for arg in args {
                if value_truthy(&scope.eval(arg)?) {
                    return Ok(Some(Bson::Boolean(true)));
                }
            }
            Ok(Some(Bson::Boolean(false)))
        }
        Control::Let { bindings, body } => eval_let(bindings, body, scope),
        Control::Filter { input, name, cond, limit } => eval_filter(input, name, cond, limit.as_ref(), scope),
        Control::Map { input, name, body } => eval_map(input, name, body, scope),
        Control::Reduce { input, initial, body } => eval_reduce(input, initial, body, scope),
        Control::Convert(spec) => convert::eval_convert(spec, scope),
        Control::DateFromString(spec) => date::eval_date_from_string(spec, scope),
    }
}

fn eval_let(bindings: &[(String, Expr)], body: &Expr, scope: &mut Scope<'_>) -> EvalResult {
    // All values are computed in the outer scope before any is bound.
    let mut values = Vec::with_capacity(bindings.len());
    for (_, value) in bindings {
        values.push(scope.eval(value)?);
    }
    for ((name, _), value) in bindings.iter().zip(values) {
        scope.push_local(name, value);
    }
    let result = scope.eval(body);
    for _ in bindings {
        scope.pop_local();
    }
    result
}

/// The array operand of `$map`/`$filter`/`$reduce`: `Ok(None)` for null or missing.
fn array_input(value: crate::expr::Value, code: i32, op: &str) -> Result<Option<Vec<Bson>>, QueryError> {
    match value {
        None | Some(Bson::Null) | Some(Bson::Undefined) => Ok(None),
        Some(Bson::Array(items)) => Ok(Some(items)),
        Some(other) => Err(fail(code, format!("input to {op} must be an array not {}", bson_type_name(&other)))),
    }
}

fn eval_filter(input: &Expr, name: &str, cond: &Expr, limit: Option<&Expr>, scope: &mut Scope<'_>) -> EvalResult {
    let Some(items) = array_input(scope.eval(input)?, location::FILTER_INPUT_NOT_ARRAY, "$filter")? else {
        return Ok(Some(Bson::Null));
    };
    let limit = match limit {
        None => None,
        Some(expr) => filter_limit(scope.eval(expr)?)?,
    };
    let mut out = Vec::new();
    for item in items {
        if limit.is_some_and(|l| out.len() >= l) {
            break;
        }
        scope.push_local(name, Some(item.clone()));
        let keep = scope.eval(cond);
        scope.pop_local();
        if value_truthy(&keep?) {
            out.push(item);
        }
    }
    Ok(Some(Bson::Array(out)))
}

fn filter_limit(value: crate::expr::Value) -> Result<Option<usize>, QueryError> {
    if is_nullish(&value) {
        return Ok(None);
    }
    let n = value.as_ref().and_then(crate::number::Num::from_bson).and_then(|n| n.to_exact_i64()).ok_or_else(|| {
        fail(
            location::FILTER_LIMIT_NOT_INT32,
            format!("$filter: limit must be represented as a 32-bit integral value: {}", super::value::display(&value)),
        )
    })?;
    if n < 1 {
        return Err(fail(location::FILTER_LIMIT_NOT_POSITIVE, format!("$filter: limit must be greater than 0: {n}")));
    }
    Ok(Some(usize::try_from(n).unwrap_or(usize::MAX)))
}

fn eval_map(input: &Expr, name: &str, body: &Expr, scope: &mut Scope<'_>) -> EvalResult {
    let Some(items) = array_input(scope.eval(input)?, location::MAP_INPUT_NOT_ARRAY, "$map")? else {
        return Ok(Some(Bson::Null));
    };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        scope.push_local(name, Some(item));
        let mapped = scope.eval(body);
        scope.pop_local();
        out.push(mapped?.unwrap_or(Bson::Null));
    }
    Ok(Some(Bson::Array(out)))
}

fn eval_reduce(input: &Expr, initial: &Expr, body: &Expr, scope: &mut Scope<'_>) -> EvalResult {
    let items = match scope.eval(input)? {
        None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
        Some(Bson::Array(items)) => items,
        Some(other) => {
            return Err(fail(
                location::REDUCE_INPUT_NOT_ARRAY,
                format!("$reduce requires an array as 'input', found: {}", bson_type_name(&other)),
            ));
        }
    };
    let mut accumulated = scope.eval(initial)?;
    for item in items {
        scope.push_local("value", accumulated);
        scope.push_local("this", Some(item));
        let next = scope.eval(body);
        scope.pop_local();
        scope.pop_local();
        accumulated = next?;
    }
    Ok(accumulated)
}
