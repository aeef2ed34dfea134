//! Document validation: a collection's `validator` (a query filter, `$jsonSchema` included),
//! `validationLevel` and `validationAction`, checked on the one write path every insert,
//! update, upsert, `$out` and `$merge` takes ([`crate::write::DocumentWrite`]).
//!
//! - `validationLevel`: `strict` (default) checks every insert and update; `moderate` checks
//!   inserts, and updates of documents that were valid before; `off` checks nothing.
//! - `validationAction`: `error` (default) refuses the write with DocumentValidationFailure
//!   (121) and an `errInfo` naming the failing document and the clauses it failed; `warn`
//!   writes it and logs the same details.
//! - `bypassDocumentValidation` on a write skips the check.
//!
//! `errInfo.details` follows MongoDB 5+'s shape where it is simple to give: the validator's
//! top-level clauses are tried one by one (`operatorName: "$and"`, `clausesNotSatisfied`), and
//! a `$jsonSchema` names the `required` properties missing and the `properties` not satisfied;
//! deeper explanations (which element of which array) are not given.

use bson::{Bson, Document, RawDocument, doc};
use query::filter::Filter;

use crate::error::{Error, Result};

/// The operators a validator may not use (as in MongoDB: they need an index or a query context).
const REFUSED: &[&str] = &["$near", "$nearSphere", "$text", "$where", "$geoNear"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Off,
    Strict,
    Moderate,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Error,
    Warn,
}

/// A collection's parsed validation settings.
#[derive(Debug, Clone)]
pub struct Validator {
    spec: Document,
    filter: Filter,
    pub level: Level,
    pub action: Action,
}

impl Validator {
    /// The collection's validation, from its options (`None`: no validator). Errors are
    /// MongoDB's for a bad `validator`, `validationLevel` or `validationAction`.
    pub fn from_options(options: &Document) -> Result<Option<Validator>> {
        let levels = [("strict", Level::Strict), ("moderate", Level::Moderate), ("off", Level::Off)];
        let level = enumeration(options, "validationLevel", Level::Strict, &levels)?;
        let actions = [("error", Action::Error), ("warn", Action::Warn)];
        let action = enumeration(options, "validationAction", Action::Error, &actions)?;
        let spec = match options.get("validator") {
            None => return Ok(None),
            Some(Bson::Document(spec)) if spec.is_empty() => return Ok(None),
            Some(Bson::Document(spec)) => spec.clone(),
            Some(_) => return Err(Error::TypeMismatch("'validator' must be an object".into())),
        };
        if let Some(refused) = refused_operator(&Bson::Document(spec.clone())) {
            return Err(Error::QueryFeatureNotAllowed(format!("{refused} is not allowed in collection validators")));
        }
        let filter = Filter::parse(&spec)?;
        Ok(Some(Validator { spec, filter, level, action }))
    }

    /// Checks a document an insert (or upsert) writes.
    pub fn check_insert(&self, new: &RawDocument, namespace: &str) -> Result<()> {
        if self.level == Level::Off {
            return Ok(());
        }
        self.check(new, namespace)
    }

    /// Checks a document an update writes; `moderate` lets an already invalid one through.
    pub fn check_update(&self, old: &RawDocument, new: &RawDocument, namespace: &str) -> Result<()> {
        match self.level {
            Level::Off => Ok(()),
            Level::Moderate if !self.filter.matches_raw(old)? => Ok(()),
            _ => self.check(new, namespace),
        }
    }

    fn check(&self, raw: &RawDocument, namespace: &str) -> Result<()> {
        if self.filter.matches_raw(raw)? {
            return Ok(());
        }
        let document = Document::try_from(raw).map_err(|e| Error::bad_value(e.to_string()))?;
        let info = doc! {
            "failingDocumentId": document.get("_id").cloned().unwrap_or(Bson::Null),
            "details": self.details(&document)?,
        };
        match self.action {
            Action::Error => {
                Err(Error::DocumentValidationFailure { message: "Document failed validation".into(), info })
            }
            Action::Warn => {
                tracing::warn!(namespace, err_info = %info, "Document would fail validation");
                Ok(())
            }
        }
    }

    /// Which of the validator's clauses the document fails (see the module header).
    fn details(&self, document: &Document) -> Result<Document> {
        let mut failed = Vec::new();
        for (index, (name, value)) in self.spec.iter().enumerate() {
            let clause = doc! { name.clone(): value.clone() };
            if !Filter::parse(&clause)?.matches(document)? {
                failed.push(doc! { "index": index as i32, "details": clause_details(name, value, document)? });
            }
        }
        Ok(match (self.spec.len(), failed.pop()) {
            (1, Some(only)) => only.get_document("details").cloned().unwrap_or_default(),
            (_, last) => {
                failed.extend(last);
                doc! { "operatorName": "$and", "clausesNotSatisfied": failed }
            }
        })
    }
}

/// An option naming one of `choices`; `default` when it is absent.
fn enumeration<T: Copy>(options: &Document, field: &str, default: T, choices: &[(&str, T)]) -> Result<T> {
    let Some(value) = options.get(field) else { return Ok(default) };
    let Bson::String(name) = value else {
        return Err(Error::TypeMismatch(format!("'{field}' must be a string")));
    };
    match choices.iter().find(|(choice, _)| choice == name) {
        Some((_, chosen)) => Ok(*chosen),
        None => Err(Error::bad_value(format!("Enumeration value '{name}' for field '{field}' is not a valid value."))),
    }
}

/// One failed clause: a `$jsonSchema` with its unsatisfied rules, else the clause as given.
fn clause_details(name: &str, value: &Bson, document: &Document) -> Result<Document> {
    let Bson::Document(schema) = value else {
        return Ok(
            doc! { "operatorName": operator_name(name), "specifiedAs": { name: value.clone() }, "reason": "expression did not match" },
        );
    };
    if name != "$jsonSchema" {
        return Ok(
            doc! { "operatorName": operator_name(name), "specifiedAs": { name: value.clone() }, "reason": "expression did not match" },
        );
    }
    let mut rules = Vec::new();
    if let Ok(required) = schema.get_array("required") {
        let missing: Vec<Bson> = required
            .iter()
            .filter(|field| field.as_str().is_some_and(|f| !document.contains_key(f)))
            .cloned()
            .collect();
        if !missing.is_empty() {
            rules.push(Bson::Document(doc! {
                "operatorName": "required",
                "specifiedAs": { "required": required.clone() },
                "missingProperties": missing,
            }));
        }
    }
    if let Ok(properties) = schema.get_document("properties") {
        let mut unsatisfied = Vec::new();
        for (property, rule) in properties {
            let alone = doc! { "$jsonSchema": { "properties": { property.clone(): rule.clone() } } };
            if !Filter::parse(&alone)?.matches(document)? {
                unsatisfied.push(Bson::Document(doc! {
                    "propertyName": property.clone(),
                    "details": [{ "specifiedAs": rule.clone(), "consideredValue": document.get(property).cloned().unwrap_or(Bson::Null), "reason": "property did not match its schema" }],
                }));
            }
        }
        if !unsatisfied.is_empty() {
            rules.push(Bson::Document(doc! { "operatorName": "properties", "propertiesNotSatisfied": unsatisfied }));
        }
    }
    Ok(doc! { "operatorName": "$jsonSchema", "schemaRulesNotSatisfied": rules })
}

/// A clause's operator: `$and`, `$or`, ..., or `$eq` for a `field: value` clause.
fn operator_name(name: &str) -> &str {
    if name.starts_with('$') { name } else { "$eq" }
}

fn refused_operator(value: &Bson) -> Option<&'static str> {
    match value {
        Bson::Document(fields) => fields.iter().find_map(|(name, value)| {
            REFUSED.iter().find(|refused| **refused == name).copied().or_else(|| refused_operator(value))
        }),
        Bson::Array(items) => items.iter().find_map(refused_operator),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(document: Document) -> bson::RawDocumentBuf {
        bson::RawDocumentBuf::try_from(&document).unwrap()
    }

    #[test]
    fn levels_actions_and_details() {
        let options = doc! {"validator": {"$jsonSchema": {"required": ["name"], "properties": {"age": {"bsonType": "int", "minimum": 0}}}}};
        let validator = Validator::from_options(&options).unwrap().unwrap();
        validator.check_insert(&raw(doc! {"_id": 1, "name": "a", "age": 3}), "db.c").unwrap();
        let refused = validator.check_insert(&raw(doc! {"_id": 2, "age": -1}), "db.c").unwrap_err();
        let Error::DocumentValidationFailure { info, .. } = &refused else { panic!("{refused:?}") };
        assert_eq!(info.get("failingDocumentId"), Some(&Bson::Int32(2)));
        let rules = info.get_document("details").unwrap().get_array("schemaRulesNotSatisfied").unwrap();
        assert_eq!(rules.len(), 2, "{info}");
        assert_eq!(refused.code(), 121);

        let moderate =
            Validator::from_options(&doc! {"validator": {"a": 1}, "validationLevel": "moderate"}).unwrap().unwrap();
        moderate.check_update(&raw(doc! {"a": 2}), &raw(doc! {"a": 3}), "db.c").unwrap();
        assert!(moderate.check_update(&raw(doc! {"a": 1}), &raw(doc! {"a": 3}), "db.c").is_err());
        let warn = Validator::from_options(&doc! {"validator": {"a": 1}, "validationAction": "warn"}).unwrap().unwrap();
        warn.check_insert(&raw(doc! {"a": 2}), "db.c").unwrap();
        let off = Validator::from_options(&doc! {"validator": {"a": 1}, "validationLevel": "off"}).unwrap().unwrap();
        off.check_insert(&raw(doc! {"a": 2}), "db.c").unwrap();

        let two = Validator::from_options(&doc! {"validator": {"a": 1, "b": {"$gt": 1}}}).unwrap().unwrap();
        let Err(Error::DocumentValidationFailure { info, .. }) = two.check_insert(&raw(doc! {"a": 1, "b": 0}), "db.c")
        else {
            panic!("b fails")
        };
        let details = info.get_document("details").unwrap();
        assert_eq!(details.get_str("operatorName").ok(), Some("$and"));
        assert_eq!(details.get_array("clausesNotSatisfied").unwrap().len(), 1);

        for (bad, code) in [
            (doc! {"validator": {"$text": {"$search": "x"}}}, 224),
            (doc! {"validator": 1}, 14),
            (doc! {"validator": {"a": 1}, "validationLevel": "sometimes"}, 2),
            (doc! {"validator": {"a": {"$bogus": 1}}}, 2),
        ] {
            assert_eq!(Validator::from_options(&bad).map(|_| ()).map_err(|e| e.code()), Err(code), "{bad}");
        }
    }
}
