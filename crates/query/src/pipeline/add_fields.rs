//! `$addFields` (and its alias `$set`): computed fields added to each document.
//!
//! A spec is a [`Tree`] of the projection's, with the stages' path rules: dotted keys are split
//! and nested, so `{"a.b": "$x"}` and `{a: {b: "$x"}}` are the same tree, and every leaf is an
//! expression evaluated against the whole input document. Existing fields are replaced in place
//! and new ones appended; `$$REMOVE` removes a field; a sub-spec merges into an existing
//! document (or each document of an array) instead of replacing it. `$project` and `$unset`
//! are [`crate::projection::Projection`]s.

use bson::{Bson, Document};

use crate::error::QueryError;
use crate::expr::{Expr, Scope, Variables};
use crate::projection::{Node, Tree};

/// A parsed `$addFields`/`$set`.
#[derive(Debug, Clone)]
pub struct AddFields {
    tree: Tree,
}

impl AddFields {
    pub fn parse(spec: &Document) -> Result<AddFields, QueryError> {
        let mut tree = Tree::default();
        for (key, value) in spec {
            tree.insert_dotted(key, parse_computed(value)?)?;
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
            let mut children = Tree::default();
            for (key, inner) in d {
                children.insert_dotted(key, parse_computed(inner)?)?;
            }
            Ok(Node::Children(children))
        }
        other => Ok(Node::Computed(Box::new(Expr::parse(other)?))),
    }
}

fn set_fields(tree: &Tree, target: &mut Document, scope: &mut Scope<'_>) -> Result<(), QueryError> {
    for (name, node) in tree.fields() {
        match node {
            Node::Computed(expr) => match scope.eval(expr)? {
                Some(v) => {
                    target.insert(name.clone(), v);
                }
                None => {
                    target.remove(name);
                }
            },
            Node::Children(children) => {
                let updated = match target.get(name) {
                    Some(Bson::Document(d)) => {
                        let mut d = d.clone();
                        set_fields(children, &mut d, scope)?;
                        Bson::Document(d)
                    }
                    Some(Bson::Array(items)) => set_in_array(children, items, scope)?,
                    _ => {
                        let mut d = Document::new();
                        set_fields(children, &mut d, scope)?;
                        Bson::Document(d)
                    }
                };
                target.insert(name.clone(), updated);
            }
            _ => {}
        }
    }
    Ok(())
}

fn set_in_array(tree: &Tree, items: &[Bson], scope: &mut Scope<'_>) -> Result<Bson, QueryError> {
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
