//! Aggregation expressions: parsed once into an [`Expr`] tree, then evaluated per document.
//!
//! - [`Expr::parse`] turns the BSON of an expression (`"$a.b"`, `{$add: [...]}`, `{a: ...}`,
//!   literals) into a tree, rejecting unknown operators and malformed arguments with MongoDB's
//!   codes. Parsing never looks at a document.
//! - [`evaluate`] / [`evaluate_value`] run the tree against a root document and [`Variables`]
//!   (`$$ROOT`, `$$CURRENT`, `$$REMOVE`, `$$NOW`, user variables from `let`).
//!
//! Invariants: evaluation never panics on any input; a missing value is `None` (distinct from
//! `null`) until the caller decides what missing means; operators are pure functions of their
//! evaluated arguments except the control forms ([`control`]), which evaluate lazily
//! (`$cond` does not evaluate the branch it does not take) or bind variables.
//!
//! Operator families live one per file: [`arith`], [`compare`], [`string`], [`array`],
//! [`object`], [`convert`], [`date`], and accumulators usable as expressions in
//! [`accumulator`]. Each exposes `lookup(name) -> Option<OpDef>`, consulted by [`parse`].

pub mod accumulator;
mod arith;
mod array;
mod bitwise;
mod compare;
mod control;
mod convert;
mod date;
mod date_format;
mod date_parts;
mod eval;
mod object;
mod parse;
pub mod quantile;
mod ranked;
mod regex_util;
mod set;
mod string;
mod trig;
mod value;
mod zone;

use std::fmt;

use bson::{Bson, Document};

use crate::error::QueryError;

pub use compare::compare as compare_values_missing;
pub use date::{Unit as TimeUnit, date_millis};
pub use eval::{Scope, Variables, document_path};
pub use parse::{check_field_name, check_variable_name, parse_field_path};
pub use value::{Value, approximate_bytes, approximate_document_bytes, bson_type_name, is_truthy, type_name};

pub(crate) use value::EvalResult;
pub use value::fail;

/// A strict operator: a pure function of its evaluated arguments.
pub type Func = fn(&[Value]) -> EvalResult;

/// A parsed aggregation expression.
#[derive(Debug, Clone)]
pub enum Expr {
    Literal(Bson),
    /// An optional named argument that was not given; evaluates to missing.
    Absent,
    /// `"$a.b"`: a path from `$$CURRENT`.
    FieldPath(Vec<String>),
    /// `"$$name.a.b"`.
    Variable {
        name: String,
        path: Vec<String>,
    },
    /// `{a: <expr>, b: <expr>}`: fields evaluating to missing are left out.
    Object(Vec<(String, Expr)>),
    /// `[<expr>, ...]`: elements evaluating to missing become null.
    Array(Vec<Expr>),
    /// A strict operator applied to its positional arguments.
    Call(Call),
    /// A control form (lazy or binding variables).
    Control(Box<control::Control>),
}

/// A strict operator call.
#[derive(Clone)]
pub struct Call {
    pub name: &'static str,
    pub func: Func,
    pub args: Vec<Expr>,
}

impl fmt::Debug for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Call").field("name", &self.name).field("args", &self.args).finish()
    }
}

/// How many positional arguments an operator takes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Arity {
    Exact(usize),
    Range(usize, usize),
    Any,
}

/// How an operator is parsed: positional and strict, or by its own parser.
pub(crate) enum OpDef {
    Strict { name: &'static str, arity: Arity, func: Func },
    Custom(&'static str, fn(&'static str, &Bson) -> Result<Expr, QueryError>),
}

impl Expr {
    /// Parses an expression given as BSON.
    pub fn parse(value: &Bson) -> Result<Expr, QueryError> {
        parse::parse(value)
    }

    /// Parses an object of expressions (`{$expr: {...}}`'s operand, `$addFields`' fields).
    pub fn parse_document(document: &Document) -> Result<Expr, QueryError> {
        parse::parse(&Bson::Document(document.clone()))
    }

    /// Whether the expression is a constant (a literal, or built only from literals).
    pub fn as_literal(&self) -> Option<&Bson> {
        match self {
            Expr::Literal(v) => Some(v),
            _ => None,
        }
    }
}

/// Evaluates `expr` with `$$ROOT` = `$$CURRENT` = `root`; a missing result becomes `null`.
pub fn evaluate(expr: &Expr, root: &Document, vars: &Variables) -> Result<Bson, QueryError> {
    Ok(evaluate_value(expr, root, vars)?.unwrap_or(Bson::Null))
}

/// Evaluates `expr`, keeping a missing result as `None`.
pub fn evaluate_value(expr: &Expr, root: &Document, vars: &Variables) -> Result<Value, QueryError> {
    let mut scope = Scope::new(root, vars);
    scope.eval(expr)
}

/// `$expr`'s test: the expression's value coerced to bool.
pub fn evaluate_truthy(expr: &Expr, root: &Document, vars: &Variables) -> Result<bool, QueryError> {
    Ok(value::value_truthy(&evaluate_value(expr, root, vars)?))
}

/// `$expr`'s test under a filter's collation (which the variables may not carry).
pub fn evaluate_truthy_collated(
    expr: &Expr,
    root: &Document,
    vars: &Variables,
    collation: Option<&crate::collation::Collation>,
) -> Result<bool, QueryError> {
    let mut scope = Scope::new(root, vars).with_collation(collation);
    Ok(value::value_truthy(&scope.eval(expr)?))
}
