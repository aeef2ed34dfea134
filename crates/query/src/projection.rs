//! Projections: which fields a find returns, and the reshaping of the `$project` and `$unset`
//! stages. One [`Projection`] type, parsed under one of two sets of rules.
//!
//! A projection is parsed once into a tree of field names and then applied to each result
//! ([`Projection::apply`]). Rules, as in MongoDB:
//!
//! - Inclusion (any field `1`/`true`, an expression, and for find `$elemMatch` or `a.$`): only
//!   the named fields, plus `_id` unless `_id: 0`; fields keep the document's order; through
//!   an array, inclusion keeps the projected sub-documents and drops scalars (`{"a.b": 1}` on
//!   `{a: [{b: 1, c: 2}, 3]}` is `{a: [{b: 1}]}`); a path through a scalar yields nothing,
//!   through a sub-document lacking it yields `{}`.
//! - Exclusion (any field `0`/`false`, or for find only `$slice`): everything but the named
//!   fields.
//! - Mixing both is error 31254; `{a: 1, "a.b": 1}` is a path collision (31250).
//! - Any other value is an expression (`{x: {$add: …}}`, `{x: "$a"}`, `{x: "text"}`), a
//!   computed field, evaluated by [`crate::expr`] against the whole document and appended
//!   after the included fields; an expression that evaluates to missing adds nothing.
//!
//! Find's projection ([`Projection::parse`]) also takes `$slice: n | [skip, limit]` (cuts an
//! array), `$elemMatch` (keeps the first matching element, or drops the field) and `a.$` (keeps
//! the element the filter matched; its position comes from
//! [`crate::filter::Filter::matches_with_position`]); an empty one returns whole documents.
//! The `$project` stage ([`Projection::parse_stage`]) refuses an empty spec and reads `$slice`
//! as the aggregation operator; `$unset` ([`Projection::parse_unset`]) is an exclusion. The
//! two parsers keep MongoDB's codes and messages for each, and a few rules of their own, kept
//! as they were found: which decimal zeros exclude (parsing), where a computed field named
//! `_id` goes and what a scalar in an array under computed fields becomes ([`Rules`]).
//!
//! Known limit: `a.b.$` applies the position to the array at `a.b`, not to the first array on
//! the path.

use bson::{Bson, Document};
use document::path::FieldPath;
use vocabulary::location;

use crate::error::{QueryError, Result, fail};
use crate::expr::{Expr, Scope, Variables};
use crate::filter::Predicate;

/// A parsed projection: find's, or a `$project`/`$unset` stage's.
#[derive(Debug, Clone)]
pub struct Projection {
    shape: Shape,
    tree: Tree,
    /// Whether an inclusion puts the document's `_id` first.
    include_id: bool,
    /// Whether a field is `a.$` (the filter's match position is needed).
    positional: bool,
    rules: Rules,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// No projection: the whole document.
    Everything,
    Inclusion,
    Exclusion,
}

/// Which parser made a projection: the rules that differ when it is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rules {
    /// Find's: `_id` is put first only when no field is named `_id` (a computed `_id` comes
    /// after the included fields); a scalar in an array under computed fields is dropped.
    Find,
    /// The stages': `_id` is put first and replaced in place by a field named `_id`; a scalar
    /// in an array under computed fields becomes a document of them.
    Stage,
}

/// Fields of one document level, in spec order: a projection's, or `$addFields`'.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tree {
    fields: Vec<(String, Node)>,
}

/// What a projection does with one field.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    Include,
    Exclude,
    /// A computed field: an aggregation expression evaluated against the whole document.
    Computed(Box<Expr>),
    Children(Tree),
    /// Find's `$slice`.
    Slice {
        skip: Option<i64>,
        limit: i64,
    },
    /// Find's `$elemMatch`.
    ElemMatch(Box<Predicate>),
    /// Find's `a.$`.
    Positional,
}

impl Projection {
    /// Parses find's `projection` (or findAndModify's `fields`).
    pub fn parse(spec: &Document) -> Result<Projection> {
        let mut tree = Tree::default();
        let mut id_rule = None;
        let mut inclusion_field = None;
        let mut exclusion_field = None;
        let mut positional = false;
        for (name, value) in flatten(spec, "") {
            let (path_text, node) = parse_find_field(&name, value)?;
            if path_text == "_id" && matches!(node, Node::Include | Node::Exclude) {
                id_rule = Some(matches!(node, Node::Include));
                continue;
            }
            match node {
                Node::Include | Node::ElemMatch(_) | Node::Positional | Node::Computed(_) => {
                    inclusion_field.get_or_insert(path_text.clone())
                }
                Node::Exclude => exclusion_field.get_or_insert(path_text.clone()),
                _ => &mut String::new(),
            };
            positional |= matches!(node, Node::Positional);
            let path = FieldPath::parse(&path_text).map_err(|e| QueryError::bad_value(e.to_string()))?;
            tree.insert_parts(path.parts(), node, &|| {
                fail(location::PROJECTION_PATH_COLLISION, format!("Path collision at {path_text}"))
            })?;
        }
        let shape = match (&inclusion_field, &exclusion_field) {
            (Some(_), Some(excluded)) => {
                return Err(fail(
                    location::PROJECTION_EXCLUSION_IN_INCLUSION,
                    format!("Cannot do exclusion on field {excluded} in inclusion projection"),
                ));
            }
            (Some(_), None) => Shape::Inclusion,
            (None, Some(_)) => Shape::Exclusion,
            (None, None) if !tree.fields.is_empty() => Shape::Exclusion,
            (None, None) => match id_rule {
                Some(true) => Shape::Inclusion,
                Some(false) => Shape::Exclusion,
                None => Shape::Everything,
            },
        };
        Ok(Projection { shape, tree, include_id: id_rule != Some(false), positional, rules: Rules::Find })
    }

    /// Parses a `$project` stage's spec.
    pub fn parse_stage(spec: &Document) -> Result<Projection> {
        if spec.is_empty() {
            return Err(fail(
                location::PROJECTION_HAS_NO_FIELDS,
                "Invalid $project :: caused by :: projection specification must have at least one field",
            ));
        }
        let mut tree = Tree::default();
        let mut keep_id = true;
        let mut explicit_id = false;
        for (key, value) in spec {
            if key == "_id" && matches!(stage_flag_or_computed(value)?, Node::Include | Node::Exclude) {
                keep_id = matches!(stage_flag_or_computed(value)?, Node::Include);
                explicit_id = true;
                continue;
            }
            tree.insert_dotted(key, parse_stage_node(value)?)?;
        }
        let includes = tree.any_node(|n| matches!(n, Node::Include | Node::Computed(_)));
        let excludes = tree.any_node(|n| matches!(n, Node::Exclude));
        match (includes, excludes) {
            (true, true) => {
                let path = tree.first_path(|n| matches!(n, Node::Exclude)).unwrap_or_default();
                Err(fail(
                    location::PROJECTION_EXCLUSION_IN_INCLUSION,
                    format!(
                        "Invalid $project :: caused by :: Cannot do exclusion on field {path} in inclusion projection"
                    ),
                ))
            }
            (false, true) => Ok(Projection::stage(Shape::Exclusion, with_id_excluded(tree, !keep_id)?, true)),
            (true, false) => Ok(Projection::stage(Shape::Inclusion, tree, keep_id)),
            (false, false) if explicit_id && !keep_id => {
                Ok(Projection::stage(Shape::Exclusion, with_id_excluded(tree, true)?, true))
            }
            (false, false) => Ok(Projection::stage(Shape::Inclusion, tree, keep_id)),
        }
    }

    /// Parses `$unset`'s operand: a field path or an array of them, excluded.
    pub fn parse_unset(spec: &Bson) -> Result<Projection> {
        let paths: Vec<&String> = match spec {
            Bson::String(path) => vec![path],
            Bson::Array(items) if !items.is_empty() => items
                .iter()
                .map(|item| match item {
                    Bson::String(path) => Ok(path),
                    _ => Err(fail(
                        location::UNSET_SPECIFICATION_NOT_STRINGS,
                        "$unset specification must be a string or an array containing only string values",
                    )),
                })
                .collect::<Result<_>>()?,
            _ => {
                return Err(fail(
                    location::UNSET_SPECIFICATION_EMPTY,
                    "$unset specification must be a string or an array with at least one field",
                ));
            }
        };
        let mut tree = Tree::default();
        for path in paths {
            tree.insert_dotted(path, Node::Exclude)?;
        }
        Ok(Projection::stage(Shape::Exclusion, tree, true))
    }

    fn stage(shape: Shape, tree: Tree, include_id: bool) -> Projection {
        Projection { shape, tree, include_id, positional: false, rules: Rules::Stage }
    }

    /// The dotted paths of a plain inclusion projection that excludes `_id` (`{a: 1, "b.c": 1,
    /// _id: 0}`), or `None` for any other kind: what a covered read can answer from index
    /// fields alone.
    pub fn plain_inclusion_paths(&self) -> Option<Vec<String>> {
        if self.shape != Shape::Inclusion || self.include_id {
            return None;
        }
        let mut paths = Vec::new();
        self.tree.collect_included("", &mut paths).then_some(paths)
    }

    /// Whether the projection needs the filter's match position (`a.$`).
    pub fn needs_position(&self) -> bool {
        self.positional
    }

    /// Projects a find result; `position` is the filter's match position for `a.$`.
    pub fn apply(&self, document: &Document, position: Option<usize>) -> Result<Document> {
        self.apply_with(document, position, &Variables::new())
    }

    /// Projects a document with the caller's variables (a stage's `$$NOW` and `let`).
    pub fn apply_with(&self, document: &Document, position: Option<usize>, vars: &Variables) -> Result<Document> {
        if self.positional && position.is_none() {
            return Err(fail(
                location::POSITIONAL_PROJECTION_NO_MATCH,
                "Executor error during find command :: caused by :: positional operator '.$' couldn't find a matching element in the array",
            ));
        }
        match self.shape {
            Shape::Everything => Ok(document.clone()),
            Shape::Inclusion => {
                let mut out = Document::new();
                let id_first = self.include_id && (self.rules == Rules::Stage || self.tree.get("_id").is_none());
                if id_first && let Some(id) = document.get("_id") {
                    out.insert("_id", id.clone());
                }
                let mut scope = Scope::new(document, vars);
                let include = Include { position, rules: self.rules };
                include.document(&self.tree, document, &mut scope, &mut out)?;
                Ok(out)
            }
            Shape::Exclusion => {
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

fn parse_find_field(name: &str, value: &Bson) -> Result<(String, Node)> {
    if let Some(prefix) = name.strip_suffix(".$") {
        return Ok((prefix.to_string(), Node::Positional));
    }
    if name.split('.').any(|part| part.starts_with('$')) {
        return Err(QueryError::bad_value(format!("FieldPath field names may not start with '$': {name}")));
    }
    let node = match value {
        Bson::Boolean(b) => flag(*b),
        Bson::Int32(i) => flag(*i != 0),
        Bson::Int64(i) => flag(*i != 0),
        Bson::Double(d) => flag(*d != 0.0),
        // Only the decimal spelled "0" excludes (not "-0" or "0.0"), unlike the stages.
        Bson::Decimal128(_) => flag(value.to_string() != "0"),
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
        expression => Node::Computed(Box::new(Expr::parse(expression)?)),
    };
    Ok((name.to_string(), node))
}

fn flag(include: bool) -> Node {
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
                return Err(fail(
                    location::SLICE_FIRST_ARGUMENT_NOT_ARRAY,
                    "First argument to $slice must be an array, limit must be positive",
                ));
            }
            Ok(Node::Slice { skip: Some(skip), limit })
        }
        single => match integer(single) {
            Some(limit) => Ok(Node::Slice { skip: None, limit }),
            None => Err(QueryError::bad_value("$slice only supports numbers and [skip, limit] arrays")),
        },
    }
}

/// A stage's field value: booleans and numbers are include/exclude flags; anything else is an
/// expression.
fn stage_flag_or_computed(value: &Bson) -> Result<Node> {
    Ok(match value {
        Bson::Boolean(b) => flag(*b),
        Bson::Int32(i) => flag(*i != 0),
        Bson::Int64(i) => flag(*i != 0),
        Bson::Double(d) => flag(*d != 0.0),
        Bson::Decimal128(_) => flag(crate::expr::is_truthy(value)),
        other => Node::Computed(Box::new(Expr::parse(other)?)),
    })
}

/// A stage's field value, a nested document without operators being a sub-projection.
fn parse_stage_node(value: &Bson) -> Result<Node> {
    match value {
        Bson::Document(d) if d.keys().next().is_some_and(|k| !k.starts_with('$')) => {
            let mut children = Tree::default();
            for (key, inner) in d {
                children.insert_dotted(key, parse_stage_node(inner)?)?;
            }
            Ok(Node::Children(children))
        }
        Bson::Document(d) if d.is_empty() => Err(fail(
            location::PROJECTION_EMPTY_SUB_PROJECTION,
            "An empty sub-projection is not a valid value. Found empty object at path",
        )),
        other => stage_flag_or_computed(other),
    }
}

fn with_id_excluded(mut tree: Tree, exclude_id: bool) -> Result<Tree> {
    if exclude_id {
        tree.insert_dotted("_id", Node::Exclude)?;
    }
    Ok(tree)
}

impl Tree {
    pub(crate) fn fields(&self) -> &[(String, Node)] {
        &self.fields
    }

    fn get(&self, name: &str) -> Option<&Node> {
        self.fields.iter().find(|(field, _)| field == name).map(|(_, node)| node)
    }

    /// Inserts `node` at a dotted path under the stages' rules (`$project`, `$addFields`,
    /// `$unset`): no empty or `$`-prefixed component; a path that runs into or over another is
    /// a collision.
    pub(crate) fn insert_dotted(&mut self, path: &str, node: Node) -> Result<()> {
        let parts: Vec<&str> = path.split('.').collect();
        if parts.iter().any(|p| p.is_empty()) {
            return Err(fail(
                location::FIELD_PATH_EMPTY,
                format!("FieldPath cannot be constructed with empty string: '{path}'"),
            ));
        }
        if parts.iter().any(|p| p.starts_with('$')) {
            return Err(fail(
                location::FIELD_PATH_STARTS_WITH_DOLLAR,
                format!("FieldPath field names may not start with '$'. (field: {path})"),
            ));
        }
        self.insert_parts(&parts, node, &|| {
            fail(location::PROJECTION_PATH_COLLISION, format!("Invalid specification: Path collision at {path}"))
        })
    }

    fn insert_parts<S: AsRef<str>>(
        &mut self,
        parts: &[S],
        node: Node,
        collision: &dyn Fn() -> QueryError,
    ) -> Result<()> {
        let Some((head, rest)) = parts.split_first() else { return Err(collision()) };
        let head = head.as_ref();
        let existing = self.fields.iter_mut().find(|(name, _)| name == head);
        match (existing, rest.is_empty()) {
            (None, true) => self.fields.push((head.to_string(), node)),
            (None, false) => {
                let mut child = Tree::default();
                child.insert_parts(rest, node, collision)?;
                self.fields.push((head.to_string(), Node::Children(child)));
            }
            (Some((_, Node::Children(child))), false) => child.insert_parts(rest, node, collision)?,
            (Some(_), _) => return Err(collision()),
        }
        Ok(())
    }

    /// Whether any node, at any depth, is `wanted`.
    fn any_node(&self, wanted: fn(&Node) -> bool) -> bool {
        self.fields.iter().any(|(_, node)| match node {
            Node::Children(child) => wanted(node) || child.any_node(wanted),
            _ => wanted(node),
        })
    }

    /// The dotted path of the first node (depth first) that is `wanted`.
    fn first_path(&self, wanted: fn(&Node) -> bool) -> Option<String> {
        for (name, node) in &self.fields {
            if wanted(node) {
                return Some(name.clone());
            }
            if let Node::Children(child) = node
                && let Some(rest) = child.first_path(wanted)
            {
                return Some(format!("{name}.{rest}"));
            }
        }
        None
    }

    fn has_computed(&self) -> bool {
        self.any_node(|node| matches!(node, Node::Computed(_)))
    }

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
                    if let Some(projected) = include_named(node, value, None)? {
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
}

/// An inclusion under way: the filter's match position and the rules it was parsed under.
struct Include {
    position: Option<usize>,
    rules: Rules,
}

impl Include {
    /// Inclusion of `document` (the root or a sub-document) into `out`: named fields in the
    /// document's order, then computed fields in the projection's order (as MongoDB appends
    /// them).
    fn document(&self, tree: &Tree, document: &Document, scope: &mut Scope<'_>, out: &mut Document) -> Result<()> {
        for (name, value) in document {
            let Some(node) = tree.get(name) else {
                continue;
            };
            let projected = match node {
                Node::Children(child) => self.value(child, value, scope)?,
                node => include_named(node, value, self.position)?,
            };
            if let Some(projected) = projected {
                out.insert(name.clone(), projected);
            }
        }
        for (name, node) in &tree.fields {
            match node {
                Node::Computed(expression) => {
                    if let Some(value) = scope.eval(expression)? {
                        out.insert(name.clone(), value);
                    }
                }
                Node::Children(child) if !out.contains_key(name) && child.has_computed() => {
                    let mut inner = Document::new();
                    self.document(child, &Document::new(), scope, &mut inner)?;
                    out.insert(name.clone(), Bson::Document(inner));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// A value under a sub-projection: a document is projected, an array element by element,
    /// a scalar yields nothing.
    fn value(&self, tree: &Tree, value: &Bson, scope: &mut Scope<'_>) -> Result<Option<Bson>> {
        Ok(match value {
            Bson::Document(inner) => {
                let mut out = Document::new();
                self.document(tree, inner, scope, &mut out)?;
                Some(Bson::Document(out))
            }
            Bson::Array(items) => {
                let mut kept = Vec::with_capacity(items.len());
                for item in items {
                    match self.value(tree, item, scope)? {
                        Some(projected) => kept.push(projected),
                        None if self.rules == Rules::Stage && tree.has_computed() => {
                            let mut computed = Document::new();
                            self.document(tree, &Document::new(), scope, &mut computed)?;
                            kept.push(Bson::Document(computed));
                        }
                        None => {}
                    }
                }
                Some(Bson::Array(kept))
            }
            _ => None,
        })
    }
}

/// One named field's value under a leaf node (not a sub-projection).
fn include_named(node: &Node, value: &Bson, position: Option<usize>) -> Result<Option<Bson>> {
    Ok(match node {
        Node::Include => Some(value.clone()),
        Node::Exclude | Node::Computed(_) | Node::Children(_) => None,
        Node::Slice { skip, limit } => Some(slice(value, *skip, *limit)),
        Node::ElemMatch(predicate) => elem_match(predicate, value)?,
        Node::Positional => match (value, position) {
            (Bson::Array(items), Some(index)) => match items.get(index) {
                Some(element) => Some(Bson::Array(vec![element.clone()])),
                None => {
                    return Err(fail(
                        location::POSITIONAL_PROJECTION_NO_MATCH,
                        "positional operator '.$' element mismatch",
                    ));
                }
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
