//! The evaluator: variables, field paths, and the walk over an [`Expr`] tree.
//!
//! A [`Scope`] holds the root document, the caller's [`Variables`] and a stack of local
//! bindings pushed by `$let`, `$map`, `$filter` and `$reduce` (innermost last, so a lookup
//! searches from the end and inner bindings shadow outer ones). Binding `CURRENT` locally
//! re-roots `"$field"` paths, which is how `$redact` descends into subdocuments.
//!
//! Field paths follow aggregation semantics, not the find-filter ones: a path through an array
//! maps over the array's documents (skipping non-documents and missing results), and numeric
//! path components are field names, never array indexes.

use std::borrow::Cow;
use vocabulary::location;

use bson::{Bson, DateTime, Document};

use super::value::{EvalResult, Value, fail};
use super::{Expr, control};
use crate::collation::Collation;
use crate::error::QueryError;

/// Variables supplied by the caller: `$$NOW`, `$$CLUSTER_TIME` and user variables (a
/// command's `let`, `$lookup`'s, `$merge`'s). One statement's variables are made once, so
/// `$$NOW` is the same for every document it touches.
#[derive(Debug, Clone)]
pub struct Variables {
    now: DateTime,
    /// The deployment's logical clock; `None` outside a replica set, where MongoDB refuses
    /// `$$CLUSTER_TIME`.
    cluster_time: Option<bson::Timestamp>,
    bindings: Vec<(String, Bson)>,
    /// The statement's collation: comparison operators compare strings under it.
    collation: Option<Collation>,
}

impl Default for Variables {
    fn default() -> Self {
        Variables::new()
    }
}

impl Variables {
    /// `$$NOW` is the current time.
    pub fn new() -> Variables {
        Variables::with_now(DateTime::now())
    }

    /// A fixed `$$NOW`, for tests and for one statement's consistent clock.
    pub fn with_now(now: DateTime) -> Variables {
        Variables { now, cluster_time: None, bindings: Vec::new(), collation: None }
    }

    /// The same variables with the statement's collation, under which `$eq`, `$cmp`, `$in` and
    /// the other operators whose result is a comparison's compare strings (`None`: binary).
    pub fn with_collation(mut self, collation: Option<Collation>) -> Variables {
        self.collation = collation.filter(|collation| !collation.is_simple());
        self
    }

    pub fn collation(&self) -> Option<&Collation> {
        self.collation.as_ref()
    }

    /// `$$CLUSTER_TIME`'s value (a replica set member's latest optime).
    pub fn with_cluster_time(mut self, time: bson::Timestamp) -> Variables {
        self.cluster_time = Some(time);
        self
    }

    /// These variables plus a command's `let`: each value an expression evaluated once, before
    /// any document is read (so it may use `$$NOW` and earlier `let` names, not fields).
    pub fn with_let(mut self, lets: &Document) -> Result<Variables, QueryError> {
        let empty = Document::new();
        for (name, value) in lets {
            super::check_variable_name(name, false)?;
            let expr = Expr::parse(value)?;
            let value = super::evaluate(&expr, &empty, &self)?;
            self.set(name.clone(), value);
        }
        Ok(self)
    }

    /// Binds (or rebinds) a user variable.
    pub fn set(&mut self, name: impl Into<String>, value: Bson) {
        let name = name.into();
        match self.bindings.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => self.bindings.push((name, value)),
        }
    }

    pub fn get(&self, name: &str) -> Option<&Bson> {
        self.bindings.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    pub fn now(&self) -> DateTime {
        self.now
    }
}

/// Evaluation state for one document.
pub struct Scope<'a> {
    root: &'a Document,
    vars: &'a Variables,
    locals: Vec<(String, Value)>,
    collation: Option<&'a Collation>,
}

impl<'a> Scope<'a> {
    pub fn new(root: &'a Document, vars: &'a Variables) -> Scope<'a> {
        Scope { root, vars, locals: Vec::new(), collation: vars.collation() }
    }

    /// Comparisons under `collation` rather than the variables' (a filter's `$expr`: the
    /// filter carries the statement's collation, its variables may not).
    pub fn with_collation(mut self, collation: Option<&'a Collation>) -> Scope<'a> {
        self.collation = collation.or(self.collation);
        self
    }

    pub fn push_local(&mut self, name: &str, value: Value) {
        self.locals.push((name.to_string(), value));
    }

    pub fn pop_local(&mut self) {
        self.locals.pop();
    }

    pub fn vars(&self) -> &Variables {
        self.vars
    }

    pub fn eval(&mut self, expr: &Expr) -> EvalResult {
        match expr {
            Expr::Literal(v) => Ok(Some(v.clone())),
            Expr::Absent => Ok(None),
            Expr::FieldPath(path) => Ok(self.current_path(path)),
            Expr::Variable { name, path } => {
                let base = self.variable(name)?;
                Ok(base.and_then(|v| get_path(&v, path)))
            }
            Expr::Object(fields) => self.eval_object(fields),
            Expr::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    out.push(self.eval(item)?.unwrap_or(Bson::Null));
                }
                Ok(Some(Bson::Array(out)))
            }
            Expr::Call(call) => {
                let mut args = Vec::with_capacity(call.args.len());
                for arg in &call.args {
                    args.push(self.eval(arg)?);
                }
                if let Some(collation) = self.collation.filter(|_| returns_argument(call.name)) {
                    return collated_call(call, &args, collation);
                }
                if let Some(collation) = self.collation.filter(|_| compares(call.name)) {
                    // Strings become their collation surrogates, whose binary order is the
                    // collation's; these operators return a comparison's result, never an
                    // argument, so no surrogate leaves.
                    for arg in args.iter_mut().flatten() {
                        if let Cow::Owned(surrogate) = collation.surrogate(arg) {
                            *arg = surrogate;
                        }
                    }
                }
                (call.func)(&args)
            }
            Expr::Control(form) => control::eval(form, self),
        }
    }

    fn eval_object(&mut self, fields: &[(String, Expr)]) -> EvalResult {
        let mut out = Document::new();
        for (name, field) in fields {
            if let Some(v) = self.eval(field)? {
                out.insert(name.clone(), v);
            }
        }
        Ok(Some(Bson::Document(out)))
    }

    fn local(&self, name: &str) -> Option<&Value> {
        self.locals.iter().rev().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    fn current_path(&self, path: &[String]) -> Value {
        match self.local("CURRENT") {
            Some(current) => current.as_ref().and_then(|c| get_path(c, path)),
            None => document_path(self.root, path),
        }
    }

    fn variable(&self, name: &str) -> EvalResult {
        if let Some(v) = self.local(name) {
            return Ok(v.clone());
        }
        match name {
            "ROOT" => Ok(Some(Bson::Document(self.root.clone()))),
            "CURRENT" => Ok(Some(Bson::Document(self.root.clone()))),
            "REMOVE" => Ok(None),
            "NOW" => Ok(Some(Bson::DateTime(self.vars.now))),
            "CLUSTER_TIME" => match self.vars.cluster_time {
                Some(time) => Ok(Some(Bson::Timestamp(time))),
                // MongoDB's code and words; a standalone has no cluster time.
                None => {
                    Err(fail(location::CLUSTER_TIME_UNAVAILABLE, "Builtin variable '$$CLUSTER_TIME' is not available"))
                }
            },
            "DESCEND" => Ok(Some(Bson::String("descend".into()))),
            "PRUNE" => Ok(Some(Bson::String("prune".into()))),
            "KEEP" => Ok(Some(Bson::String("keep".into()))),
            _ => match self.vars.get(name) {
                Some(v) => Ok(Some(v.clone())),
                None => Err(fail(location::UNDEFINED_VARIABLE, format!("Use of undefined variable: {name}"))),
            },
        }
    }
}

/// Aggregation field-path lookup from a document.
pub fn document_path(document: &Document, path: &[String]) -> Value {
    let (first, rest) = path.split_first()?;
    let value = document.get(first)?;
    get_path(value, rest)
}

/// Aggregation field-path lookup from any value (arrays map over their documents).
pub fn get_path(value: &Bson, path: &[String]) -> Value {
    if path.is_empty() {
        return Some(value.clone());
    }
    match value {
        Bson::Document(d) => document_path(d, path),
        Bson::Array(items) => {
            let found = items
                .iter()
                .filter_map(|item| match item {
                    Bson::Document(d) => document_path(d, path),
                    _ => None,
                })
                .collect();
            Some(Bson::Array(found))
        }
        _ => None,
    }
}

/// The operators whose result is one of their arguments or of their arrays' elements, chosen
/// or ordered by comparing them: under a collation they run on surrogates
/// ([`collated_call`]).
fn returns_argument(name: &str) -> bool {
    matches!(
        name,
        "$max" | "$min" | "$setUnion" | "$setIntersection" | "$setDifference" | "$sortArray" | "$maxN" | "$minN"
    )
}

/// Runs an operator that returns arguments on their collation surrogates, then puts back the
/// original of each surrogate in the result (the result, or each of its elements): equal
/// surrogates ("a" and "A" at strength 2) give back their originals in the order they came.
fn collated_call(call: &super::Call, args: &[Value], collation: &Collation) -> EvalResult {
    let mut originals = Originals::default();
    let surrogates: Vec<Value> = args
        .iter()
        .map(|arg| {
            arg.as_ref().map(|value| {
                originals.register(value, collation);
                collation.surrogate(value).into_owned()
            })
        })
        .collect();
    Ok((call.func)(&surrogates)?.map(|result| originals.restore(result)))
}

/// Originals by their surrogates' key bytes: each argument, its array's elements, and the
/// elements of arrays in a document argument (`$sortArray`'s and `$maxN`'s `input`).
#[derive(Default)]
struct Originals(std::collections::HashMap<Vec<u8>, std::collections::VecDeque<Bson>>);

impl Originals {
    fn register(&mut self, value: &Bson, collation: &Collation) {
        self.add(value, collation);
        let arrays: Vec<&Vec<Bson>> = match value {
            Bson::Array(items) => vec![items],
            Bson::Document(fields) => {
                fields.values().filter_map(|v| if let Bson::Array(a) = v { Some(a) } else { None }).collect()
            }
            _ => Vec::new(),
        };
        for item in arrays.into_iter().flatten() {
            self.add(item, collation);
        }
    }

    fn add(&mut self, value: &Bson, collation: &Collation) {
        let key = document::keycodec::encode_value(&collation.surrogate(value));
        self.0.entry(key).or_default().push_back(value.clone());
    }

    fn take(&mut self, surrogate: &Bson) -> Option<Bson> {
        self.0.get_mut(&document::keycodec::encode_value(surrogate))?.pop_front()
    }

    /// An array result is restored element by element (a set's elements come from its
    /// operands in order), anything else whole.
    fn restore(&mut self, result: Bson) -> Bson {
        match result {
            Bson::Array(items) => Bson::Array(items.into_iter().map(|item| self.take(&item).unwrap_or(item)).collect()),
            other => self.take(&other).unwrap_or(other),
        }
    }
}

/// The operators whose result is a comparison of their arguments (a boolean, an order or a
/// position), which a collation changes; `$max`, `$setUnion` and the like return an argument,
/// which a surrogate must not replace.
fn compares(name: &str) -> bool {
    matches!(
        name,
        "$eq"
            | "$ne"
            | "$gt"
            | "$gte"
            | "$lt"
            | "$lte"
            | "$cmp"
            | "$in"
            | "$indexOfArray"
            | "$setEquals"
            | "$setIsSubset"
    )
}
