//! Find projections: inclusion, exclusion, `_id`, dotted paths, positional `$`, `$slice`,
//! `$elemMatch`.
//!
//! A projection is parsed once into a tree of field names ([`Projection::parse`]) and then
//! applied to each result ([`Projection::apply`]). Rules, as in MongoDB:
//!
//! - Inclusion mode (any field `1`/`true`, `$elemMatch` or `a.$`): only the named fields, plus
//!   `_id` unless `_id: 0`; fields keep the document's order; through an array, inclusion keeps
//!   the projected sub-documents and drops scalars (`{"a.b": 1}` on `{a: [{b: 1, c: 2}, 3]}` is
//!   `{a: [{b: 1}]}`); a path through a scalar yields nothing, through a sub-document lacking it
//!   yields `{}`.
//! - Exclusion mode (any field `0`/`false`, or only `$slice`): everything but the named fields.
//! - Mixing both is error 31253/31254; `{a: 1, "a.b": 1}` is a path collision (31250).
//! - `$slice: n | [skip, limit]` cuts an array, `$elemMatch` keeps the first matching element
//!   (or drops the field), `a.$` keeps the element the filter matched (its position comes from
//!   [`crate::filter::Filter::matches_with_position`]).
//!
//! - Any other value is an expression (`{x: {$add: …}}`, `{x: "$a"}`, `{x: "text"}`), a
//!   computed field in inclusion mode, evaluated by [`crate::expr`] against the whole document
//!   and appended after the included fields; an expression that evaluates to missing adds
//!   nothing.
//!
//! Known limit: `a.b.$` applies the position to the array at `a.b`, not to the first array on
//! the path.

use bson::{Bson, Document};
use document::path::FieldPath;

use crate::error::{QueryError, Result};
use crate::filter::Predicate;

/// A parsed find projection.
#[derive(Debug, Clone)]
pub struct Projection {
    mode: Mode,
    tree: Tree,
    include_id: bool,
    positional: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// No projection: the whole document.
    Everything,
    Inclusion,
    Exclusion,
}

#[derive(Debug, Clone, Default)]
struct Tree {
    fields: Vec<(String, Node)>,
}

#[derive(Debug, Clone)]
enum Node {
    Include,
    Exclude,
    Slice {
        skip: Option<i64>,
        limit: i64,
    },
    ElemMatch(Box<Predicate>),
    Positional,
    Children(Tree),
    /// A computed field: an aggregation expression evaluated against the whole document.
    Expression(Box<crate::expr::Expr>),
}

fn coded(code: i32, message: String) -> QueryError {
    crate::error::fail(code, message)
}

impl Projection {
    pub fn parse(spec: &Document) -> Result<Projection> {
        let mut tree = Tree::default();
        let mut id_rule = None;
        let mut inclusion_field = None;
        let mut exclusion_field = None;
        let mut positional = false;
        for (name, value) in flatten(spec, "") {
            let (path_text, node) = parse_field(&name, value)?;
            if path_text == "_id" && matches!(node, Node::Include | Node::Exclude) {
                id_rule = Some(matches!(node, Node::Include));
                continue;
            }
            match node {
                Node::Include | Node::ElemMatch(_) | Node::Positional | Node::Expression(_) => {
                    inclusion_field.get_or_insert(path_text.clone())
                }
                Node::Exclude => exclusion_field.get_or_insert(path_text.clone()),
                _ => &mut String::new(),
            };
            positional |= matches!(node, Node::Positional);
            let path = FieldPath::parse(&path_text).map_err(|e| QueryError::bad_value(e.to_string()))?;
            tree.insert(path.parts(), node, &path_text)?;
        }
        let mode = match (&inclusion_field, &exclusion_field) {
            (Some(_), Some(excluded)) => {
                return Err(coded(31254, format!("Cannot do exclusion on field {excluded} in inclusion projection")));
            }
            (Some(_), None) => Mode::Inclusion,
            (None, Some(_)) => Mode::Exclusion,
            (None, None) if !tree.fields.is_empty() => Mode::Exclusion,
            (None, None) => match id_rule {
                Some(true) => Mode::Inclusion,
                Some(false) => Mode::Exclusion,
                None => Mode::Everything,
            },
        };
        Ok(Projection { mode, tree, include_id: id_rule != Some(false), positional })
    }

    /// The dotted paths of a plain inclusion projection that excludes `_id` (`{a: 1, "b.c": 1,
    /// _id: 0}`), or `None` for any other kind: what a covered read can answer from index
    /// fields alone.
    pub fn plain_inclusion_paths(&self) -> Option<Vec<String>> {
        if self.mode != Mode::Inclusion || self.include_id {
            return None;
        }
        let mut paths = Vec::new();
        self.tree.collect_included("", &mut paths).then_some(paths)
    }

    /// Whether the projection needs the filter's match position (`a.$`).
    pub fn needs_position(&self) -> bool {
        self.positional
    }

    /// Projects a document; `position` is the filter's match position for `a.$`.
    pub fn apply(&self, document: &Document, position: Option<usize>) -> Result<Document> {
        if self.positional && position.is_none() {
            return Err(coded(
                51246,
                "Executor error during find command :: caused by :: positional operator '.$' couldn't find a matching element in the array".into(),
            ));
        }
        match self.mode {
            Mode::Everything => Ok(document.clone()),
            Mode::Inclusion => {
                let mut out = self.tree.include(document, document, position)?;
                let id_named = self.tree.fields.iter().any(|(name, _)| name == "_id");
                if self.include_id
                    && !id_named
                    && let Some(id) = document.get("_id")
                {
                    let mut with_id = Document::new();
                    with_id.insert("_id", id.clone());
                    with_id.extend(out);
                    out = with_id;
                }
                Ok(out)
            }
            Mode::Exclusion => {
                let mut out = self.tree.exclude(document)?;
                if !self.include_id {
                    out.remove("_id");
                }
                Ok(out)
            }
        }
    }
}

/// `{size: {h: 1}}` is `{"size.h": 1}`: nested documents without operators are paths.
fn flatten<'a>(spec: &'a Document, prefix: &str) -> Vec<(String, &'a Bson)> {
    let mut out = Vec::with_capacity(spec.len());
    for (name, value) in spec {
        let full = if prefix.is_empty() { name.clone() } else { format!("{prefix}.{name}") };
        match value {
            Bson::Document(inner) if inner.keys().next().is_some_and(|k| !k.starts_with('$')) => {
                out.extend(flatten(inner, &full));
            }
            _ => out.push((full, value)),
        }
    }
    out
}

fn parse_field(name: &str, value: &Bson) -> Result<(String, Node)> {
    if let Some(prefix) = name.strip_suffix(".$") {
        return Ok((prefix.to_string(), Node::Positional));
    }
    if name.split('.').any(|part| part.starts_with('$')) {
        return Err(QueryError::bad_value(format!("FieldPath field names may not start with '$': {name}")));
    }
    let node = match value {
        Bson::Boolean(b) => include_or_exclude(*b),
        Bson::Int32(i) => include_or_exclude(*i != 0),
        Bson::Int64(i) => include_or_exclude(*i != 0),
        Bson::Double(d) => include_or_exclude(*d != 0.0),
        Bson::Decimal128(_) => include_or_exclude(value.to_string() != "0"),
        Bson::Document(operator) if operator.len() == 1 && operator.contains_key("$slice") => {
            parse_slice(operator.get("$slice").unwrap_or(&Bson::Null))?
        }
        Bson::Document(operator) if operator.len() == 1 && operator.contains_key("$elemMatch") => {
            if name.contains('.') {
                return Err(QueryError::bad_value("Cannot use $elemMatch projection on a nested field."));
            }
            if !matches!(operator.get("$elemMatch"), Some(Bson::Document(_))) {
                return Err(QueryError::bad_value("elemMatch: Invalid argument, object required."));
            }
            Node::ElemMatch(Box::new(crate::filter::parse_field_value(value)?))
        }
        Bson::Document(operator) if operator.contains_key("$meta") => {
            return Err(QueryError::bad_value(format!("$meta projection is not supported (field '{name}')")));
        }
        expression => Node::Expression(Box::new(crate::expr::Expr::parse(expression)?)),
    };
    Ok((name.to_string(), node))
}

fn include_or_exclude(include: bool) -> Node {
    if include { Node::Include } else { Node::Exclude }
}

fn parse_slice(value: &Bson) -> Result<Node> {
    let integer = |value: &Bson| match value {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        Bson::Double(d) if d.is_finite() => Some(*d as i64),
        _ => None,
    };
    match value {
        Bson::Array(pair) if pair.len() == 2 => {
            let (Some(skip), Some(limit)) = (integer(&pair[0]), integer(&pair[1])) else {
                return Err(QueryError::bad_value("$slice array elements must be numbers"));
            };
            if limit <= 0 {
                return Err(coded(28724, "First argument to $slice must be an array, limit must be positive".into()));
            }
            Ok(Node::Slice { skip: Some(skip), limit })
        }
        single => match integer(single) {
            Some(limit) => Ok(Node::Slice { skip: None, limit }),
            None => Err(QueryError::bad_value("$slice only supports numbers and [skip, limit] arrays")),
        },
    }
}

impl Tree {
    /// Pushes the dotted path of every `Include` leaf; false if any node is something else.
    fn collect_included(&self, prefix: &str, paths: &mut Vec<String>) -> bool {
        self.fields.iter().all(|(name, node)| {
            let path = if prefix.is_empty() { name.clone() } else { format!("{prefix}.{name}") };
            match node {
                Node::Include => {
                    paths.push(path);
                    true
                }
                Node::Children(tree) => tree.collect_included(&path, paths),
                _ => false,
            }
        })
    }

    fn insert(&mut self, parts: &[String], node: Node, full: &str) -> Result<()> {
        let Some((head, rest)) = parts.split_first() else {
            return Ok(());
        };
        let collision = || coded(31250, format!("Path collision at {full}"));
        let existing = self.fields.iter_mut().find(|(name, _)| name == head);
        match (existing, rest.is_empty()) {
            (None, true) => self.fields.push((head.clone(), node)),
            (None, false) => {
                let mut child = Tree::default();
                child.insert(rest, node, full)?;
                self.fields.push((head.clone(), Node::Children(child)));
            }
            (Some((_, Node::Children(child))), false) => child.insert(rest, node, full)?,
            (Some(_), _) => return Err(collision()),
        }
        Ok(())
    }

    fn get(&self, name: &str) -> Option<&Node> {
        self.fields.iter().find(|(field, _)| field == name).map(|(_, node)| node)
    }

    /// Inclusion of `document` (a sub-document of `root`): named fields in the document's
    /// order, then computed fields in the projection's order (as MongoDB appends them).
    fn include(&self, root: &Document, document: &Document, position: Option<usize>) -> Result<Document> {
        let mut out = Document::new();
        for (name, value) in document {
            let Some(node) = self.get(name) else {
                continue;
            };
            if let Some(projected) = include_value(root, node, value, position)? {
                out.insert(name.clone(), projected);
            }
        }
        for (name, node) in &self.fields {
            match node {
                Node::Expression(expression) => {
                    let value = crate::expr::evaluate_value(expression, root, &crate::expr::Variables::new())?;
                    if let Some(value) = value {
                        out.insert(name.clone(), value);
                    }
                }
                Node::Children(child)
                    if child.has_expressions()
                        && !matches!(document.get(name), Some(Bson::Document(_) | Bson::Array(_))) =>
                {
                    out.insert(name.clone(), Bson::Document(child.include(root, &Document::new(), position)?));
                }
                _ => {}
            }
        }
        Ok(out)
    }

    fn has_expressions(&self) -> bool {
        self.fields.iter().any(|(_, node)| match node {
            Node::Expression(_) => true,
            Node::Children(child) => child.has_expressions(),
            _ => false,
        })
    }

    fn exclude(&self, document: &Document) -> Result<Document> {
        let mut out = Document::new();
        for (name, value) in document {
            match self.get(name) {
                None => {
                    out.insert(name.clone(), value.clone());
                }
                Some(Node::Exclude) => {}
                Some(Node::Children(child)) => {
                    out.insert(name.clone(), child.exclude_value(value)?);
                }
                Some(node) => {
                    if let Some(projected) = include_value(document, node, value, None)? {
                        out.insert(name.clone(), projected);
                    }
                }
            }
        }
        Ok(out)
    }

    fn exclude_value(&self, value: &Bson) -> Result<Bson> {
        Ok(match value {
            Bson::Document(inner) => Bson::Document(self.exclude(inner)?),
            Bson::Array(items) => {
                Bson::Array(items.iter().map(|item| self.exclude_value(item)).collect::<Result<_>>()?)
            }
            scalar => scalar.clone(),
        })
    }

    fn include_value(&self, root: &Document, value: &Bson, position: Option<usize>) -> Result<Option<Bson>> {
        Ok(match value {
            Bson::Document(inner) => Some(Bson::Document(self.include(root, inner, position)?)),
            Bson::Array(items) => {
                let mut kept = Vec::with_capacity(items.len());
                for item in items {
                    if let Some(projected) = self.include_value(root, item, position)? {
                        kept.push(projected);
                    }
                }
                Some(Bson::Array(kept))
            }
            _ => None,
        })
    }
}

/// One named field's value under an inclusion-side node.
fn include_value(root: &Document, node: &Node, value: &Bson, position: Option<usize>) -> Result<Option<Bson>> {
    Ok(match node {
        Node::Include => Some(value.clone()),
        Node::Exclude | Node::Expression(_) => None,
        Node::Children(child) => child.include_value(root, value, position)?,
        Node::Slice { skip, limit } => Some(slice(value, *skip, *limit)),
        Node::ElemMatch(expr) => elem_match(expr, value)?,
        Node::Positional => match (value, position) {
            (Bson::Array(items), Some(index)) => match items.get(index) {
                Some(element) => Some(Bson::Array(vec![element.clone()])),
                None => return Err(coded(51246, "positional operator '.$' element mismatch".into())),
            },
            _ => Some(value.clone()),
        },
    })
}

fn slice(value: &Bson, skip: Option<i64>, limit: i64) -> Bson {
    let Bson::Array(items) = value else {
        return value.clone();
    };
    let length = items.len() as i64;
    let (start, count) = match skip {
        None if limit >= 0 => (0, limit),
        None => ((length + limit).max(0), -limit),
        Some(skip) if skip >= 0 => (skip.min(length), limit),
        Some(skip) => ((length + skip).max(0), limit),
    };
    let start = start as usize;
    let end = (start as i64 + count).min(length).max(start as i64) as usize;
    Bson::Array(items.get(start..end).map(<[Bson]>::to_vec).unwrap_or_default())
}

/// `$elemMatch` projection: the first element the predicate matches, or nothing.
fn elem_match(predicate: &Predicate, value: &Bson) -> Result<Option<Bson>> {
    let Bson::Array(items) = value else {
        return Ok(None);
    };
    Ok(match predicate.holds_on(value)? {
        Some(Some(index)) => items.get(index).map(|item| Bson::Array(vec![item.clone()])),
        _ => None,
    })
}
