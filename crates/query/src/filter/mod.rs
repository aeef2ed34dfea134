//! Query filters: parsed once into a validated tree, then matched against documents.
//!
//! [`Filter::parse`] turns a filter document (`{a: {$gt: 1}, $or: [...]}`) into a
//! [`MatchExpr`] tree, rejecting malformed filters with MongoDB's errors; matching never fails
//! afterwards except through `$expr`. [`Filter::matches`] evaluates it on a document,
//! [`Filter::matches_raw`] on stored bytes, decoding only the top-level fields the filter reads
//! (all of them for `$expr` and `$jsonSchema`).
//!
//! Semantics are MongoDB's: a path predicate holds when any value the path reaches satisfies it
//! (implicit array traversal, [`document::path::match_candidates`]); a missing field equals
//! `null`; comparisons only match values of the same canonical type (type bracketing) except
//! against MinKey/MaxKey; NaN only equals NaN; `$ne`, `$nin` and `$not` negate the whole path
//! predicate, so `{a: {$ne: 1}}` rejects `{a: [1, 2]}`.

mod bson_type;
mod eval;
mod json_schema;
mod parse;

pub use parse::parse_field_value;
mod regex;

use bson::{Bson, Document, RawDocument};
use document::path::FieldPath;

use crate::error::{QueryError, Result};

pub use bson_type::{BsonTypeSet, type_code, type_name};
pub use json_schema::Schema;
pub use regex::FilterRegex;

/// A parsed filter.
#[derive(Debug, Clone)]
pub struct Filter {
    root: MatchExpr,
    /// Top-level fields read, or `None` when the whole document is needed.
    heads: Option<Vec<String>>,
    /// The statement's variables (`let`, `$$NOW`) that `$expr` sees; `None`: `$$NOW` only.
    variables: Option<std::sync::Arc<crate::expr::Variables>>,
    /// The statement's collation for comparisons of strings; `None`: the binary order.
    collation: Option<crate::collation::Collation>,
}

/// One node of the filter tree.
#[derive(Debug, Clone)]
pub enum MatchExpr {
    And(Vec<MatchExpr>),
    Or(Vec<MatchExpr>),
    Nor(Vec<MatchExpr>),
    /// A predicate on the values at a path.
    Path {
        path: FieldPath,
        predicate: Predicate,
    },
    JsonSchema(Box<Schema>),
    /// `$expr`: an aggregation expression, true when it evaluates truthy.
    Expr(Box<crate::expr::Expr>),
    AlwaysTrue,
    AlwaysFalse,
}

/// What a path's values must satisfy.
#[derive(Debug, Clone)]
pub enum Predicate {
    Eq(Bson),
    Compare(Comparison, Bson),
    In(Vec<InItem>),
    Exists(bool),
    Type(BsonTypeSet),
    Regex(FilterRegex),
    Mod {
        divisor: i64,
        remainder: i64,
    },
    Size(i64),
    /// `$all`: every value is contained (equality, or regex for regex items).
    All(Vec<InItem>),
    /// `$all: [{$elemMatch: …}, …]`: every element match holds.
    AllElemMatch(Vec<Predicate>),
    /// `$elemMatch: {field: …}`: some array element, as a document, matches.
    ElemMatchObject(Box<MatchExpr>),
    /// `$elemMatch: {$gt: 1, …}`: some array element satisfies all the predicates.
    ElemMatchValue(Vec<Predicate>),
    /// Several operators on one path, all of which must hold.
    And(Vec<Predicate>),
    /// `$ne`, `$nin`, `$not`: the negation of the whole path predicate.
    Not(Box<Predicate>),
    /// `$geoWithin` (or its old name `$within`): some location lies wholly inside the shape.
    GeoWithin(Box<crate::geo::Shape>),
    /// `$geoIntersects`: some location meets the geometry.
    GeoIntersects(Box<crate::geo::sphere::SphericalShape>),
    /// `$near`/`$nearSphere`: some location within the distances (the order by distance is
    /// the reader's: it needs a geospatial index).
    Near(Box<crate::geo::Near>),
}

/// `$gt`, `$gte`, `$lt`, `$lte`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    Greater,
    GreaterOrEqual,
    Less,
    LessOrEqual,
}

/// An element of `$in`/`$nin`/`$all`: a value to equal, or a regex to match.
#[derive(Debug, Clone)]
pub enum InItem {
    Value(Bson),
    Regex(FilterRegex),
}

impl Filter {
    /// Parses and validates a filter document.
    pub fn parse(filter: &Document) -> Result<Filter> {
        let root = parse::parse_document(filter)?;
        let heads = top_level_heads(&root);
        Ok(Filter { root, heads, variables: None, collation: None })
    }

    /// The same filter comparing strings under `collation` (`None`: the binary order).
    pub fn with_collation(mut self, collation: Option<crate::collation::Collation>) -> Filter {
        self.collation = collation;
        self
    }

    pub fn collation(&self) -> Option<&crate::collation::Collation> {
        self.collation.as_ref()
    }

    fn env(&self) -> eval::Env<'_> {
        eval::Env { variables: self.variables.as_deref(), collation: self.collation.as_ref() }
    }

    /// The same filter with a statement's variables for its `$expr` (a command's `let`).
    pub fn with_variables(mut self, variables: std::sync::Arc<crate::expr::Variables>) -> Filter {
        self.variables = Some(variables);
        self
    }

    pub fn root(&self) -> &MatchExpr {
        &self.root
    }

    /// Whether the document matches.
    pub fn matches(&self, document: &Document) -> Result<bool> {
        Ok(eval::matches(&self.root, document, self.env())?.is_some())
    }

    /// Whether the document matches, with variables for `$expr` (`$lookup`'s `let`).
    pub fn matches_with_variables(&self, document: &Document, variables: &crate::expr::Variables) -> Result<bool> {
        let env = eval::Env { variables: Some(variables), ..self.env() };
        Ok(eval::matches(&self.root, document, env)?.is_some())
    }

    /// Whether the document matches, and the index of the array element the match went
    /// through (for the positional `$` of projections and updates).
    pub fn matches_with_position(&self, document: &Document) -> Result<Option<Option<usize>>> {
        eval::matches(&self.root, document, self.env())
    }

    /// Whether stored bytes match, decoding only the fields the filter reads.
    pub fn matches_raw(&self, raw: &RawDocument) -> Result<bool> {
        let document = match &self.heads {
            Some(heads) => document::path::decode_fields(raw, heads.iter().map(String::as_str))?,
            None => Document::try_from(raw).map_err(|e| QueryError::bad_value(e.to_string()))?,
        };
        self.matches(&document)
    }

    /// The full dotted paths the filter's predicates read, or `None` when it reads the whole
    /// document (`$expr`, `$jsonSchema`).
    pub fn paths_read(&self) -> Option<Vec<String>> {
        let mut paths = Vec::new();
        collect_paths(&self.root, &mut paths).then_some(paths)
    }

    /// The top-level fields the filter reads, or `None` when it needs the whole document.
    pub fn fields_read(&self) -> Option<&[String]> {
        self.heads.as_deref()
    }
}

impl Predicate {
    /// Whether the predicate holds on one value, as if it were a field's whole value; the
    /// position is the matching array element's index (used by `$elemMatch` projections and
    /// `$pull`).
    pub fn holds_on(&self, value: &Bson) -> Result<eval::MatchResult> {
        let candidates = document::path::match_candidates_of_value(value);
        eval::holds(self, &candidates, eval::Env::default())
    }
}

impl Predicate {
    /// Whether the predicate holds on one value taken alone (no array expansion), as `$pull`
    /// and `$elemMatch` test array elements.
    pub fn holds_on_single(&self, value: &Bson) -> Result<bool> {
        let single = [document::path::Located { candidate: document::path::Candidate::Value(value), position: None }];
        Ok(eval::holds(self, &single, eval::Env::default())?.is_some())
    }
}

fn top_level_heads(root: &MatchExpr) -> Option<Vec<String>> {
    let mut heads = Vec::new();
    collect_heads(root, &mut heads)?;
    heads.sort();
    heads.dedup();
    Some(heads)
}

fn collect_heads(expr: &MatchExpr, heads: &mut Vec<String>) -> Option<()> {
    match expr {
        MatchExpr::And(children) | MatchExpr::Or(children) | MatchExpr::Nor(children) => {
            for child in children {
                collect_heads(child, heads)?;
            }
            Some(())
        }
        MatchExpr::Path { path, .. } => {
            heads.push(path.head().to_string());
            Some(())
        }
        MatchExpr::JsonSchema(_) | MatchExpr::Expr(_) => None,
        MatchExpr::AlwaysTrue | MatchExpr::AlwaysFalse => Some(()),
    }
}

fn collect_paths(expr: &MatchExpr, paths: &mut Vec<String>) -> bool {
    match expr {
        MatchExpr::And(children) | MatchExpr::Or(children) | MatchExpr::Nor(children) => {
            children.iter().all(|child| collect_paths(child, paths))
        }
        MatchExpr::Path { path, .. } => {
            paths.push(path.as_str().to_owned());
            true
        }
        MatchExpr::JsonSchema(_) | MatchExpr::Expr(_) => false,
        MatchExpr::AlwaysTrue | MatchExpr::AlwaysFalse => true,
    }
}
