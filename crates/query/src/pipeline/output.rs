//! Output stages `$out` and `$merge`: the last stage of a pipeline, writing its results
//! through [`super::CollectionSource`] and returning no documents.
//!
//! `$out` replaces the target's contents in one call. `$merge` decides per document, here and
//! not in the collection layer: find the target document whose `on` fields equal the result's,
//! then apply `whenMatched` (replace, keepExisting, merge, fail, or an update pipeline with
//! `$$new`) or `whenNotMatched` (insert, discard, fail).

use bson::{Bson, Document};
use vocabulary::location;

use super::Context;
use super::source::Namespace;
use super::update::UpdatePipeline;
use crate::error::{QueryError, idl};
use crate::expr::{Expr, Scope, bson_type_name, fail};

/// `$out: "coll"` or `{db, coll}`.
pub fn parse_out(spec: &Bson) -> Result<Namespace, QueryError> {
    match spec {
        Bson::String(s) if !s.is_empty() => Ok(Namespace::new("", s.clone())),
        Bson::Document(d) => parse_namespace(d, "$out"),
        other => Err(fail(
            location::OUT_ARGUMENT_NOT_STRING_OR_OBJECT,
            format!("$out only supports a string or object argument, not {}", bson_type_name(other)),
        )),
    }
}

fn parse_namespace(spec: &Document, stage: &str) -> Result<Namespace, QueryError> {
    let (mut db, mut coll) = (String::new(), None);
    for (key, value) in spec {
        match (key.as_str(), value) {
            ("db", Bson::String(s)) => db = s.clone(),
            ("coll", Bson::String(s)) => coll = Some(s.clone()),
            (other, _) => return Err(idl::unknown_field(&format!("{stage}.{other}"))),
        }
    }
    let coll = coll.ok_or_else(|| idl::missing_field(&format!("{stage}.coll")))?;
    Ok(Namespace::new(db, coll))
}

/// Fills in the current database when the spec named none.
pub fn resolve(namespace: &Namespace, db: &str) -> Namespace {
    if namespace.db.is_empty() { Namespace::new(db, namespace.collection.clone()) } else { namespace.clone() }
}

#[derive(Debug, Clone)]
pub enum WhenMatched {
    Replace,
    KeepExisting,
    Merge,
    Fail,
    Pipeline(UpdatePipeline),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenNotMatched {
    Insert,
    Discard,
    Fail,
}

#[derive(Debug, Clone)]
pub struct MergeSpec {
    into: Namespace,
    on: Vec<String>,
    let_vars: Vec<(String, Expr)>,
    when_matched: WhenMatched,
    when_not_matched: WhenNotMatched,
}

impl MergeSpec {
    pub fn parse(spec: &Bson) -> Result<MergeSpec, QueryError> {
        let spec = match spec {
            Bson::String(s) => return Ok(MergeSpec::into_only(Namespace::new("", s.clone()))),
            Bson::Document(d) => d,
            other => {
                return Err(fail(
                    location::MERGE_ARGUMENT_NOT_STRING_OR_OBJECT,
                    format!("$merge only supports a string or object argument, not {}", bson_type_name(other)),
                ));
            }
        };
        let mut merge = MergeSpec::into_only(Namespace::new("", ""));
        let mut has_into = false;
        for (key, value) in spec {
            match key.as_str() {
                "into" => {
                    has_into = true;
                    merge.into = match value {
                        Bson::String(s) => Namespace::new("", s.clone()),
                        Bson::Document(d) => parse_namespace(d, "$merge.into")?,
                        other => {
                            return Err(fail(
                                location::MERGE_INTO_NOT_STRING_OR_OBJECT,
                                format!(
                                    "$merge 'into' field must be either a string or an object, but found {}",
                                    bson_type_name(other)
                                ),
                            ));
                        }
                    };
                }
                "on" => merge.on = parse_on(value)?,
                "let" => merge.let_vars = parse_let(value)?,
                "whenMatched" => merge.when_matched = parse_when_matched(value)?,
                "whenNotMatched" => merge.when_not_matched = parse_when_not_matched(value)?,
                other => return Err(idl::unknown_field(&format!("$merge.{other}"))),
            }
        }
        if !has_into {
            return Err(idl::missing_field("$merge.into"));
        }
        Ok(merge)
    }

    fn into_only(into: Namespace) -> MergeSpec {
        MergeSpec {
            into,
            on: vec!["_id".to_string()],
            let_vars: Vec::new(),
            when_matched: WhenMatched::Merge,
            when_not_matched: WhenNotMatched::Insert,
        }
    }

    /// Writes every result document into the target.
    pub fn write(&self, documents: Vec<Document>, context: &Context<'_>) -> Result<(), QueryError> {
        let target = resolve(&self.into, &context.db);
        for document in documents {
            self.write_one(&target, document, context)?;
        }
        Ok(())
    }

    fn write_one(&self, target: &Namespace, mut document: Document, context: &Context<'_>) -> Result<(), QueryError> {
        if self.on == ["_id"] && !document.contains_key("_id") {
            document.insert("_id", bson::oid::ObjectId::new());
        }
        let key = self.key_of(&document)?;
        let existing = context.source.find_equal(target, &key)?.into_iter().next();
        let Some(existing) = existing else {
            return match self.when_not_matched {
                WhenNotMatched::Insert => context.source.insert(target, document),
                WhenNotMatched::Discard => Ok(()),
                WhenNotMatched::Fail => Err(fail(
                    vocabulary::ErrorCode::MergeStageNoMatchingDocument,
                    "$merge could not find a matching document in the target collection for at least one document in the source collection",
                )),
            };
        };
        let id = existing.get("_id").cloned().unwrap_or(Bson::Null);
        let replacement = match &self.when_matched {
            WhenMatched::KeepExisting => return Ok(()),
            WhenMatched::Fail => {
                let message = vocabulary::duplicate_key_message(
                    &format!("{}.{}", target.db, target.collection),
                    &self.on_index_name(),
                    &key,
                );
                let key_pattern = key.keys().map(|field| (field.clone(), Bson::Int32(1))).collect();
                return Err(crate::error::QueryError::DuplicateKey { message, key_pattern, key_value: key });
            }
            WhenMatched::Replace => with_id(document, &id)?,
            WhenMatched::Merge => {
                let mut merged = existing;
                for (k, v) in document {
                    merged.insert(k, v);
                }
                with_id(merged, &id)?
            }
            WhenMatched::Pipeline(update) => {
                let mut vars = context.vars.clone();
                if self.let_vars.is_empty() {
                    vars.set("new", Bson::Document(document.clone()));
                }
                let mut scope = Scope::new(&document, &context.vars);
                for (name, expr) in &self.let_vars {
                    vars.set(name.clone(), scope.eval(expr)?.unwrap_or(Bson::Null));
                }
                with_id(update.apply(&existing, &vars)?, &id)?
            }
        };
        context.source.replace(target, &id, replacement)
    }

    /// The name MongoDB gives the unique index on the `on` fields (`_id_`, or `a_1_b_1`).
    fn on_index_name(&self) -> String {
        match self.on.as_slice() {
            [only] if only == "_id" => "_id_".to_owned(),
            fields => fields.iter().map(|field| format!("{field}_1")).collect::<Vec<_>>().join("_"),
        }
    }

    fn key_of(&self, document: &Document) -> Result<Document, QueryError> {
        let mut key = Document::new();
        for field in &self.on {
            let path: Vec<String> = field.split('.').map(str::to_string).collect();
            match document::path::get_dotted(document, &path) {
                None | Some(Bson::Null) | Some(Bson::Undefined) | Some(Bson::Array(_)) => {
                    return Err(fail(
                        location::MERGE_ON_FIELD_MISSING_OR_ARRAY,
                        "$merge write error: 'on' field cannot be missing, null, undefined or an array",
                    ));
                }
                Some(v) => {
                    key.insert(field.clone(), v.clone());
                }
            }
        }
        Ok(key)
    }
}

/// The target document keeps its `_id`; a result that changes it is an error.
fn with_id(mut document: Document, id: &Bson) -> Result<Document, QueryError> {
    match document.get("_id") {
        Some(existing) if !document::values_equal(existing, id) => Err(fail(
            66,
            "$merge failed to update the matching document, did you attempt to modify the _id or the shard key?",
        )),
        Some(_) => Ok(document),
        None => {
            let mut out = Document::new();
            out.insert("_id", id.clone());
            for (k, v) in std::mem::take(&mut document) {
                out.insert(k, v);
            }
            Ok(out)
        }
    }
}

fn parse_on(value: &Bson) -> Result<Vec<String>, QueryError> {
    let fields: Vec<String> = match value {
        Bson::String(s) => vec![s.clone()],
        Bson::Array(items) if !items.is_empty() => items
            .iter()
            .map(|item| match item {
                Bson::String(s) => Ok(s.clone()),
                _ => Err(fail(location::MERGE_ON_ELEMENT_NOT_STRING, "$merge 'on' array elements must be strings")),
            })
            .collect::<Result<_, _>>()?,
        _ => {
            return Err(fail(
                location::MERGE_ON_NOT_STRING_OR_ARRAY,
                "$merge 'on' field must be either a single string or a non-empty array of strings",
            ));
        }
    };
    Ok(fields)
}

fn parse_let(value: &Bson) -> Result<Vec<(String, Expr)>, QueryError> {
    let Bson::Document(vars) = value else {
        return Err(fail(crate::error::ErrorCode::TypeMismatch, "$merge 'let' must be an object"));
    };
    vars.iter()
        .map(|(name, expr)| {
            crate::expr::check_variable_name(name, false)?;
            Ok((name.clone(), Expr::parse(expr)?))
        })
        .collect()
}

fn parse_when_matched(value: &Bson) -> Result<WhenMatched, QueryError> {
    match value {
        Bson::String(s) => match s.as_str() {
            "replace" => Ok(WhenMatched::Replace),
            "keepExisting" => Ok(WhenMatched::KeepExisting),
            "merge" => Ok(WhenMatched::Merge),
            "fail" => Ok(WhenMatched::Fail),
            other => Err(fail(
                2,
                format!("Enumeration value '{other}' for field '$merge.whenMatched' is not a valid value."),
            )),
        },
        Bson::Array(stages) => Ok(WhenMatched::Pipeline(UpdatePipeline::parse(stages)?)),
        other => Err(fail(
            crate::error::ErrorCode::TypeMismatch,
            format!("$merge 'whenMatched' must be a string or an array, found {}", bson_type_name(other)),
        )),
    }
}

fn parse_when_not_matched(value: &Bson) -> Result<WhenNotMatched, QueryError> {
    match value {
        Bson::String(s) => match s.as_str() {
            "insert" => Ok(WhenNotMatched::Insert),
            "discard" => Ok(WhenNotMatched::Discard),
            "fail" => Ok(WhenNotMatched::Fail),
            other => Err(fail(
                2,
                format!("Enumeration value '{other}' for field '$merge.whenNotMatched' is not a valid value."),
            )),
        },
        other => Err(fail(
            crate::error::ErrorCode::TypeMismatch,
            format!("$merge 'whenNotMatched' must be a string, found {}", bson_type_name(other)),
        )),
    }
}
