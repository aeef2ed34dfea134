//! Reshaping stages: `$project`, `$addFields`/`$set`, `$unset`, and the projection trees they
//! share.
//!
//! A spec becomes a [`FieldTree`]: dotted keys are split and nested, so `{"a.b": 1, "a.c": 1}`
//! and `{a: {b: 1, c: 1}}` are the same tree. `$project` is either an inclusion (included and
//! computed fields, `_id` kept unless excluded) or an exclusion (removed fields only); mixing
//! is an error, as in MongoDB. Computed values are evaluated against the whole input
//! document (`$$CURRENT` is the root, not the subdocument being built).
//!
//! Field order: inclusion keeps the input document's order and appends computed fields in spec
//! order; `$addFields` replaces existing fields in place and appends new ones.

use bson::{Bson, Document};

use crate::error::QueryError;
use crate::expr::{Expr, Scope, Variables, fail};

/// One node of a projection tree.
#[derive(Debug, Clone)]
pub enum Node {
    Include,
    Exclude,
    Computed(Expr),
    Sub(FieldTree),
}

/// Fields of one document level, in spec order.
#[derive(Debug, Clone, Default)]
pub struct FieldTree {
    fields: Vec<(String, Node)>,
}

impl FieldTree {
    fn get(&self, name: &str) -> Option<&Node> {
        self.fields.iter().find(|(n, _)| n == name).map(|(_, node)| node)
    }

    /// Inserts `node` at a dotted path; a path that runs into or over another is a collision.
    pub fn insert(&mut self, path: &str, node: Node) -> Result<(), QueryError> {
        let parts: Vec<&str> = path.split('.').collect();
        if parts.iter().any(|p| p.is_empty()) {
            return Err(fail(40352, format!("FieldPath cannot be constructed with empty string: '{path}'")));
        }
        if parts.iter().any(|p| p.starts_with('$')) {
            return Err(fail(16410, format!("FieldPath field names may not start with '$'. (field: {path})")));
        }
        self.insert_parts(&parts, node, path)
    }

    fn insert_parts(&mut self, parts: &[&str], node: Node, full: &str) -> Result<(), QueryError> {
        let collision = || fail(31250, format!("Invalid specification: Path collision at {full}"));
        let Some((head, rest)) = parts.split_first() else { return Err(collision()) };
        let position = self.fields.iter().position(|(n, _)| n == head);
        match (position, rest.is_empty()) {
            (None, true) => self.fields.push((head.to_string(), node)),
            (None, false) => {
                let mut sub = FieldTree::default();
                sub.insert_parts(rest, node, full)?;
                self.fields.push((head.to_string(), Node::Sub(sub)));
            }
            (Some(i), false) => match self.fields.get_mut(i) {
                Some((_, Node::Sub(sub))) => sub.insert_parts(rest, node, full)?,
                _ => return Err(collision()),
            },
            (Some(_), true) => return Err(collision()),
        }
        Ok(())
    }

    fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.fields.iter().map(|(_, node)| node).flat_map(|node| {
            let mut all = vec![node];
            if let Node::Sub(sub) = node {
                all.extend(sub.nodes());
            }
            all
        })
    }

    fn first_path(&self, wanted: fn(&Node) -> bool) -> Option<String> {
        for (name, node) in &self.fields {
            if wanted(node) {
                return Some(name.clone());
            }
            if let Node::Sub(sub) = node
                && let Some(rest) = sub.first_path(wanted)
            {
                return Some(format!("{name}.{rest}"));
            }
        }
        None
    }
}

/// A parsed `$project`.
#[derive(Debug, Clone)]
pub enum Projection {
    Inclusion { tree: FieldTree, keep_id: bool },
    Exclusion { tree: FieldTree },
}

impl Projection {
    /// Parses an aggregation `$project` spec.
    pub fn parse(spec: &Document) -> Result<Projection, QueryError> {
        if spec.is_empty() {
            return Err(fail(
                51272,
                "Invalid $project :: caused by :: projection specification must have at least one field",
            ));
        }
        let mut tree = FieldTree::default();
        let mut keep_id = true;
        let mut explicit_id = false;
        for (key, value) in spec {
            if key == "_id" && matches!(classify(value)?, Node::Include | Node::Exclude) {
                keep_id = matches!(classify(value)?, Node::Include);
                explicit_id = true;
                continue;
            }
            tree.insert(key, parse_node(value)?)?;
        }
        let includes = tree.nodes().any(|n| matches!(n, Node::Include | Node::Computed(_)));
        let excludes = tree.nodes().any(|n| matches!(n, Node::Exclude));
        match (includes, excludes) {
            (true, true) => {
                let path = tree.first_path(|n| matches!(n, Node::Exclude)).unwrap_or_default();
                Err(fail(
                    31254,
                    format!(
                        "Invalid $project :: caused by :: Cannot do exclusion on field {path} in inclusion projection"
                    ),
                ))
            }
            (false, true) => Ok(Projection::Exclusion { tree: with_id_exclusion(tree, !keep_id)? }),
            (true, false) => Ok(Projection::Inclusion { tree, keep_id }),
            (false, false) if explicit_id && !keep_id => {
                Ok(Projection::Exclusion { tree: with_id_exclusion(tree, true)? })
            }
            (false, false) => Ok(Projection::Inclusion { tree, keep_id }),
        }
    }

    /// An exclusion of the given dotted paths (`$unset`).
    pub fn exclusion(paths: &[String]) -> Result<Projection, QueryError> {
        let mut tree = FieldTree::default();
        for path in paths {
            tree.insert(path, Node::Exclude)?;
        }
        Ok(Projection::Exclusion { tree })
    }

    pub fn apply(&self, document: &Document, vars: &Variables) -> Result<Document, QueryError> {
        match self {
            Projection::Exclusion { tree } => Ok(exclude(tree, document)),
            Projection::Inclusion { tree, keep_id } => {
                let mut scope = Scope::new(document, vars);
                let mut out = Document::new();
                if *keep_id && let Some(id) = document.get("_id") {
                    out.insert("_id", id.clone());
                }
                include_into(tree, document, &mut scope, &mut out)?;
                Ok(out)
            }
        }
    }
}

fn with_id_exclusion(mut tree: FieldTree, exclude_id: bool) -> Result<FieldTree, QueryError> {
    if exclude_id {
        tree.insert("_id", Node::Exclude)?;
    }
    Ok(tree)
}

/// Booleans and numbers are include/exclude flags; anything else is an expression.
fn classify(value: &Bson) -> Result<Node, QueryError> {
    Ok(match value {
        Bson::Boolean(b) => flag(*b),
        Bson::Int32(i) => flag(*i != 0),
        Bson::Int64(i) => flag(*i != 0),
        Bson::Double(d) => flag(*d != 0.0),
        Bson::Decimal128(_) => flag(crate::expr::is_truthy(value)),
        other => Node::Computed(Expr::parse(other)?),
    })
}

fn flag(include: bool) -> Node {
    if include { Node::Include } else { Node::Exclude }
}

fn parse_node(value: &Bson) -> Result<Node, QueryError> {
    match value {
        Bson::Document(d) if d.keys().next().is_some_and(|k| !k.starts_with('$')) => {
            let mut sub = FieldTree::default();
            for (key, inner) in d {
                sub.insert(key, parse_node(inner)?)?;
            }
            Ok(Node::Sub(sub))
        }
        Bson::Document(d) if d.is_empty() => {
            Err(fail(51270, "An empty sub-projection is not a valid value. Found empty object at path"))
        }
        other => classify(other),
    }
}

fn exclude(tree: &FieldTree, document: &Document) -> Document {
    let mut out = Document::new();
    for (name, value) in document {
        match (tree.get(name), value) {
            (Some(Node::Exclude), _) => {}
            (Some(Node::Sub(sub)), Bson::Document(d)) => {
                out.insert(name.clone(), exclude(sub, d));
            }
            (Some(Node::Sub(sub)), Bson::Array(items)) => {
                out.insert(name.clone(), exclude_array(sub, items));
            }
            _ => {
                out.insert(name.clone(), value.clone());
            }
        }
    }
    out
}

fn exclude_array(tree: &FieldTree, items: &[Bson]) -> Bson {
    Bson::Array(
        items
            .iter()
            .map(|item| match item {
                Bson::Document(d) => Bson::Document(exclude(tree, d)),
                Bson::Array(inner) => exclude_array(tree, inner),
                other => other.clone(),
            })
            .collect(),
    )
}

/// Inclusion: included fields in document order, then computed fields in spec order.
fn include_into(
    tree: &FieldTree,
    document: &Document,
    scope: &mut Scope<'_>,
    out: &mut Document,
) -> Result<(), QueryError> {
    for (name, value) in document {
        match (tree.get(name), value) {
            (Some(Node::Include), _) => {
                out.insert(name.clone(), value.clone());
            }
            (Some(Node::Sub(sub)), Bson::Document(d)) => {
                let mut inner = Document::new();
                include_into(sub, d, scope, &mut inner)?;
                out.insert(name.clone(), inner);
            }
            (Some(Node::Sub(sub)), Bson::Array(items)) => {
                out.insert(name.clone(), include_array(sub, items, scope)?);
            }
            _ => {}
        }
    }
    for (name, node) in &tree.fields {
        match node {
            Node::Computed(expr) => {
                if let Some(v) = scope.eval(expr)? {
                    out.insert(name.clone(), v);
                }
            }
            Node::Sub(sub) if !out.contains_key(name) && has_computed(sub) => {
                let mut inner = Document::new();
                include_into(sub, &Document::new(), scope, &mut inner)?;
                out.insert(name.clone(), inner);
            }
            _ => {}
        }
    }
    Ok(())
}

fn has_computed(tree: &FieldTree) -> bool {
    tree.nodes().any(|n| matches!(n, Node::Computed(_)))
}

fn include_array(tree: &FieldTree, items: &[Bson], scope: &mut Scope<'_>) -> Result<Bson, QueryError> {
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        match item {
            Bson::Document(d) => {
                let mut inner = Document::new();
                include_into(tree, d, scope, &mut inner)?;
                out.push(Bson::Document(inner));
            }
            Bson::Array(inner) => out.push(include_array(tree, inner, scope)?),
            _ if has_computed(tree) => {
                let mut inner = Document::new();
                include_into(tree, &Document::new(), scope, &mut inner)?;
                out.push(Bson::Document(inner));
            }
            _ => {}
        }
    }
    Ok(Bson::Array(out))
}

/// A parsed `$addFields`/`$set`: every leaf is an expression.
#[derive(Debug, Clone)]
pub struct AddFields {
    tree: FieldTree,
}

impl AddFields {
    pub fn parse(spec: &Document) -> Result<AddFields, QueryError> {
        let mut tree = FieldTree::default();
        for (key, value) in spec {
            tree.insert(key, parse_computed(value)?)?;
        }
        Ok(AddFields { tree })
    }

    pub fn apply(&self, document: &Document, vars: &Variables) -> Result<Document, QueryError> {
        let mut scope = Scope::new(document, vars);
        let mut out = document.clone();
        set_fields(&self.tree, &mut out, &mut scope)?;
        Ok(out)
    }
}

fn parse_computed(value: &Bson) -> Result<Node, QueryError> {
    match value {
        Bson::Document(d) if d.keys().next().is_some_and(|k| !k.starts_with('$')) => {
            let mut sub = FieldTree::default();
            for (key, inner) in d {
                sub.insert(key, parse_computed(inner)?)?;
            }
            Ok(Node::Sub(sub))
        }
        other => Ok(Node::Computed(Expr::parse(other)?)),
    }
}

/// `$addFields` semantics: replace in place, append new, `$$REMOVE` removes; a sub-spec
/// merges into an existing document (or each document of an array) instead of replacing it.
fn set_fields(tree: &FieldTree, target: &mut Document, scope: &mut Scope<'_>) -> Result<(), QueryError> {
    for (name, node) in &tree.fields {
        match node {
            Node::Computed(expr) => match scope.eval(expr)? {
                Some(v) => {
                    target.insert(name.clone(), v);
                }
                None => {
                    target.remove(name);
                }
            },
            Node::Sub(sub) => {
                let updated = match target.get(name) {
                    Some(Bson::Document(d)) => {
                        let mut d = d.clone();
                        set_fields(sub, &mut d, scope)?;
                        Bson::Document(d)
                    }
                    Some(Bson::Array(items)) => set_in_array(sub, items, scope)?,
                    _ => {
                        let mut d = Document::new();
                        set_fields(sub, &mut d, scope)?;
                        Bson::Document(d)
                    }
                };
                target.insert(name.clone(), updated);
            }
            Node::Include | Node::Exclude => {}
        }
    }
    Ok(())
}

fn set_in_array(tree: &FieldTree, items: &[Bson], scope: &mut Scope<'_>) -> Result<Bson, QueryError> {
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        out.push(match item {
            Bson::Document(d) => {
                let mut d = d.clone();
                set_fields(tree, &mut d, scope)?;
                Bson::Document(d)
            }
            Bson::Array(inner) => set_in_array(tree, inner, scope)?,
            _ => {
                let mut d = Document::new();
                set_fields(tree, &mut d, scope)?;
                Bson::Document(d)
            }
        });
    }
    Ok(Bson::Array(out))
}

/// `$unset`'s operand: a field path or an array of them.
pub fn parse_unset(spec: &Bson) -> Result<Projection, QueryError> {
    let paths: Vec<String> = match spec {
        Bson::String(s) => vec![s.clone()],
        Bson::Array(items) if !items.is_empty() => items
            .iter()
            .map(|item| match item {
                Bson::String(s) => Ok(s.clone()),
                _ => {
                    Err(fail(31120, "$unset specification must be a string or an array containing only string values"))
                }
            })
            .collect::<Result<_, _>>()?,
        _ => return Err(fail(31002, "$unset specification must be a string or an array with at least one field")),
    };
    Projection::exclusion(&paths)
}
