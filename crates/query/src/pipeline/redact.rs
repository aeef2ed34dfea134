//! `$redact`: the expression is evaluated at every document level with `$$CURRENT` bound to
//! that level; `$$KEEP` keeps the level whole, `$$PRUNE` drops it, `$$DESCEND` keeps its
//! scalar fields and recurses into embedded documents (also inside arrays). `$$ROOT` stays the
//! top-level document throughout. Any other result is error 17053.

use bson::{Bson, Document};
use vocabulary::location;

use crate::error::QueryError;
use crate::expr::{Expr, Scope, Variables, fail};

enum Verdict {
    Keep,
    Prune,
    Descend,
}

/// The redacted document, or `None` when the top level is pruned.
pub fn redact(expr: &Expr, document: Document, vars: &Variables) -> Result<Option<Document>, QueryError> {
    let root = document.clone();
    let mut scope = Scope::new(&root, vars);
    level(expr, document, &mut scope)
}

fn verdict(expr: &Expr, current: &Document, scope: &mut Scope<'_>) -> Result<Verdict, QueryError> {
    scope.push_local("CURRENT", Some(Bson::Document(current.clone())));
    let result = scope.eval(expr);
    scope.pop_local();
    match result? {
        Some(Bson::String(s)) if s == "keep" => Ok(Verdict::Keep),
        Some(Bson::String(s)) if s == "prune" => Ok(Verdict::Prune),
        Some(Bson::String(s)) if s == "descend" => Ok(Verdict::Descend),
        other => Err(fail(
            location::REDACT_RESULT_NOT_KEEP_DESCEND_PRUNE,
            format!(
                "$redact's expression should not return anything aside from the variables $$KEEP, $$DESCEND, and $$PRUNE, but returned {}",
                other.map_or_else(|| "MISSING".to_string(), |v| v.to_string())
            ),
        )),
    }
}

fn level(expr: &Expr, document: Document, scope: &mut Scope<'_>) -> Result<Option<Document>, QueryError> {
    match verdict(expr, &document, scope)? {
        Verdict::Keep => Ok(Some(document)),
        Verdict::Prune => Ok(None),
        Verdict::Descend => {
            let mut out = Document::new();
            for (name, value) in document {
                match value {
                    Bson::Document(inner) => {
                        if let Some(kept) = level(expr, inner, scope)? {
                            out.insert(name, kept);
                        }
                    }
                    Bson::Array(items) => {
                        out.insert(name, Bson::Array(array(expr, items, scope)?));
                    }
                    other => {
                        out.insert(name, other);
                    }
                }
            }
            Ok(Some(out))
        }
    }
}

fn array(expr: &Expr, items: Vec<Bson>, scope: &mut Scope<'_>) -> Result<Vec<Bson>, QueryError> {
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        match item {
            Bson::Document(inner) => {
                if let Some(kept) = level(expr, inner, scope)? {
                    out.push(Bson::Document(kept));
                }
            }
            Bson::Array(nested) => out.push(Bson::Array(array(expr, nested, scope)?)),
            other => out.push(other),
        }
    }
    Ok(out)
}
