//! Views: a name that reads as the result of a pipeline over another collection or view.
//!
//! A view owns no tree. Its definition is one `__catalog` entry under its own key prefix:
//!
//! ```text
//! key "\0view\0db.name"   value BSON { db, name, viewOn, pipeline: [...] }
//! ```
//!
//! (A key starting with `\0` is skipped by catalogs that know no views, so an older Strata
//! opens a directory with views and simply does not see them.) A read of a view runs the
//! definitions' pipelines from the innermost source collection outwards, then the read's own
//! stages; writes, indexes and renames are refused with MongoDB's CommandNotSupportedOnView.

use bson::{Bson, Document, doc};

use crate::error::{Error, Result};

/// The key prefix of view entries in `__catalog`.
pub(crate) const VIEW_KEY_PREFIX: &[u8] = b"\0view\0";

/// MongoDB's limit on views defined on views.
pub(crate) const MAX_VIEW_DEPTH: usize = 20;

/// ViewDepthLimitExceeded, in MongoDB's words.
pub(crate) fn too_deep() -> Error {
    Error::ViewDepthLimitExceeded(format!(
        "View depth too deep or view cycle detected. Maximum depth is {MAX_VIEW_DEPTH}"
    ))
}

/// A view's definition.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ViewMeta {
    pub db: String,
    pub name: String,
    /// The collection or view it reads, in the same database.
    pub view_on: String,
    pub pipeline: Vec<Document>,
}

impl ViewMeta {
    /// The definition `create` was given: `viewOn` (a name in the same database) and
    /// `pipeline` (an array of stages; none of them may write).
    pub(crate) fn from_options(db: &str, name: &str, options: &Document) -> Result<ViewMeta> {
        let view_on = match options.get("viewOn") {
            Some(Bson::String(view_on)) if !view_on.is_empty() => view_on.clone(),
            Some(Bson::String(_)) => return Err(Error::bad_value("'viewOn' cannot be empty")),
            _ => return Err(Error::TypeMismatch("'viewOn' must be a string".into())),
        };
        if let Some(other) = options.keys().find(|key| !matches!(key.as_str(), "viewOn" | "pipeline")) {
            return Err(Error::InvalidOptions(format!("option '{other}' is not supported on a view")));
        }
        let pipeline = match options.get("pipeline") {
            None => Vec::new(),
            Some(Bson::Array(stages)) => stages
                .iter()
                .map(|stage| match stage {
                    Bson::Document(stage) => Ok(stage.clone()),
                    _ => Err(Error::TypeMismatch("'pipeline' must be an array of objects".into())),
                })
                .collect::<Result<Vec<_>>>()?,
            Some(_) => return Err(Error::TypeMismatch("'pipeline' must be an array".into())),
        };
        let writes = pipeline.iter().find_map(|stage| ["$out", "$merge"].into_iter().find(|s| stage.contains_key(*s)));
        if let Some(stage) = writes {
            return Err(Error::OptionNotSupportedOnView(format!("{stage} cannot be used in a view definition")));
        }
        let stages: Vec<Bson> = pipeline.iter().cloned().map(Bson::Document).collect();
        query::pipeline::Pipeline::parse(&stages)?;
        Ok(ViewMeta { db: db.into(), name: name.into(), view_on, pipeline })
    }

    /// Its options as listCollections shows them.
    pub(crate) fn options(&self) -> Document {
        doc! { "viewOn": self.view_on.clone(), "pipeline": self.pipeline.clone() }
    }

    pub(crate) fn key(db: &str, name: &str) -> Vec<u8> {
        let mut key = VIEW_KEY_PREFIX.to_vec();
        key.extend_from_slice(format!("{db}.{name}").as_bytes());
        key
    }

    pub(crate) fn encode(&self) -> Result<Vec<u8>> {
        let mut document = doc! { "db": self.db.clone(), "name": self.name.clone() };
        document.extend(self.options());
        bson::RawDocumentBuf::try_from(&document)
            .map(bson::RawDocumentBuf::into_bytes)
            .map_err(|e| Error::corrupt(format!("cannot encode view entry: {e}")))
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<ViewMeta> {
        let mut document = Document::from_reader(bytes).map_err(|e| Error::corrupt(format!("view entry: {e}")))?;
        let mut text = |key: &str| match document.remove(key) {
            Some(Bson::String(value)) => Ok(value),
            _ => Err(Error::corrupt(format!("view entry without '{key}'"))),
        };
        let (db, name) = (text("db")?, text("name")?);
        ViewMeta::from_options(&db, &name, &document).map_err(|e| Error::corrupt(format!("view entry: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_round_trip_and_bad_ones_are_refused() {
        let options = doc! {"viewOn": "people", "pipeline": [{"$match": {"age": {"$gt": 1}}}]};
        let view = ViewMeta::from_options("db", "adults", &options).unwrap();
        assert_eq!(view.options(), options);
        assert_eq!(ViewMeta::decode(&view.encode().unwrap()).unwrap(), view);
        assert!(ViewMeta::key("db", "adults").starts_with(VIEW_KEY_PREFIX));
        for (bad, code) in [
            (doc! {"viewOn": 1}, 14),
            (doc! {"viewOn": ""}, 2),
            (doc! {"viewOn": "p", "pipeline": {}}, 14),
            (doc! {"viewOn": "p", "pipeline": [1]}, 14),
            (doc! {"viewOn": "p", "capped": true}, 72),
            (doc! {"viewOn": "p", "pipeline": [{"$out": "x"}]}, 167),
            (doc! {"viewOn": "p", "pipeline": [{"$nope": 1}]}, 40324),
        ] {
            let code_of = ViewMeta::from_options("db", "v", &bad).map(|_| ()).map_err(|e| e.code());
            assert_eq!(code_of, Err(code), "{bad}");
        }
    }
}
